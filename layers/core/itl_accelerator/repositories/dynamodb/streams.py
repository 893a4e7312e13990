"""The table's stream (DynamoDB Streams, ``NEW_AND_OLD_IMAGES``) in the provider's words: which records are node
changes, and what each says (domain/records.py :class:`NodeChange`), and which are state changes of instances, jobs
and nodes (domain/events.py :class:`StateChange`):

A stream record (NEW_AND_OLD_IMAGES) becomes an event when its item's state attribute differs between the images:

| item (sort key) | state attribute | ``detail-type`` |
|---|---|---|
| ``INSTANCE#...`` | ``provisioningState`` (Accepted, Provisioning, Succeeded, Failed, Deleting, Canceled) | ``Instance State Changed`` |
| ``JOB#...`` | ``status`` (Pending, Scheduled, Running, Succeeded, Failed, Canceled, Preempted) | ``Job State Changed`` |
| ``NODE#...`` | ``availability`` (Available, Cordoned, Maintenance, Offline) | ``Node State Changed`` |
| ``CAPRES#...`` | none stored: its ``state`` at the change (Scheduled, Active, Expired) | ``Capacity Reservation State Changed`` |

An item written for the first time has ``previousState`` null; an item removed has ``state`` ``Deleted``. Every other
change of these items (a lease renewed, a price changed, capacity reserved) is no state change and makes no event.

A capacity reservation stores no state: ``Scheduled``, ``Active`` and ``Expired`` follow from the clock and its window
(models/reservations.py), and the clock writes nothing. So its events are its booking (the item written: ``state``
what it was then, ``Scheduled`` — a window is booked ahead) and its cancellation (the item removed: ``previousState``
what it was when cancelled, ``Scheduled`` or ``Active``, ``state`` ``Deleted``); its window opening and ending make
none. Its ``detail`` adds ``bookedBy`` (its owner, for a rule to match on), ``startTime``, ``endTime`` and
``reservedNodes``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.domain.events import (
    DELETED,
    INSTANCE_STATE_CHANGED,
    JOB_STATE_CHANGED,
    NODE_STATE_CHANGED,
    RESERVATION_STATE_CHANGED,
    StateChange,
)
from itl_accelerator.domain.records import FleetShape, LimitChange, NodeChange, NodeState
from itl_accelerator.domain.states import Availability
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import plain

_deserializer = TypeDeserializer()
#: Sort-key prefix of node items (keys.py).
_NODE_PREFIX = f"{keys.TYPE_CODES['sparkNodes']}{keys.SEP}"


def _image(record: dict[str, Any], which: str) -> NodeState | None:
    image = (record.get("dynamodb") or {}).get(which)
    if not image:
        return None
    item = {k: _deserializer.deserialize(v) for k, v in image.items()}
    return NodeState(
        etag=str(item.get("etag", "")),
        availability=Availability(item.get("availability") or Availability.AVAILABLE),
        shape=FleetShape(
            str(item.get("gpuModelKey", "")),
            str(item.get("location", "")),
            int(item.get("gpuTotal", 0)),
            int(item.get("memoryGbTotal", 0)),
        ),
    )


def node_changes(records: list[dict[str, Any]]) -> list[NodeChange]:
    """The node changes among a batch of stream records (Lambda's event ``Records``), in order."""
    changes = []
    for record in records:
        item_keys = (record.get("dynamodb") or {}).get("Keys") or {}
        if not str((item_keys.get("SK") or {}).get("S", "")).startswith(_NODE_PREFIX):
            continue
        subscription = str(item_keys["PK"]["S"]).split(keys.SEP, 1)[1]
        changes.append(
            NodeChange(
                event_id=str(record.get("eventID", "")),
                subscription_id=subscription,
                before=_image(record, "OldImage"),
                after=_image(record, "NewImage"),
            )
        )
    return changes


#: Sort-key prefixes of the items whose changes are limit changes (keys.py ``quota_sk``, ``budget_sk``).
LIMIT_PREFIXES = {"QUOTA#": "quota", "BUDGET#": "budget"}


def limit_changes(records: list[dict[str, Any]]) -> list[LimitChange]:
    """The changes of quota limits and budgets among a batch of stream records, in order: records whose item's
    ``etag`` differs between the images (a limit set, changed or removed; a budget created, changed or deleted) —
    never a quota's count moving with an allocation, nor a budget's evaluation, which leave the etag as it was."""
    found = []
    for record in records:
        change = record.get("dynamodb") or {}
        sort_key = str(((change.get("Keys") or {}).get("SK") or {}).get("S", ""))
        kind = next((k for prefix, k in LIMIT_PREFIXES.items() if sort_key.startswith(prefix)), None)
        if kind is None:
            continue
        old = (change.get("OldImage") or {}).get("etag")
        new = (change.get("NewImage") or {}).get("etag")
        if old == new:
            continue
        subscription = str(change["Keys"]["PK"]["S"]).split(keys.SEP, 1)[1]
        found.append(LimitChange(str(record.get("eventID", "")), subscription, kind, sort_key.split(keys.SEP, 1)[1]))
    return found


@dataclass(frozen=True)
class Kind:
    """One kind of item whose state changes are published: its sort-key prefix, state attribute (None: a
    reservation's, whose state is not stored but read from its window at the change) and detail-type."""

    key_prefix: str
    state_attribute: str | None
    detail_type: str
    resource_type: str


KINDS: tuple[Kind, ...] = (
    Kind(
        "INSTANCE#",
        "provisioningState",
        INSTANCE_STATE_CHANGED,
        f"{PROVIDER_NAMESPACE}/sparkNodes/sparkOllamaInstances",
    ),
    Kind("JOB#", "status", JOB_STATE_CHANGED, f"{PROVIDER_NAMESPACE}/sparkJobs"),
    Kind("NODE#", "availability", NODE_STATE_CHANGED, f"{PROVIDER_NAMESPACE}/sparkNodes"),
    Kind(
        f"{keys.TYPE_CODES['capacityReservations']}{keys.SEP}",
        None,
        RESERVATION_STATE_CHANGED,
        f"{PROVIDER_NAMESPACE}/capacityReservations",
    ),
)
#: Sort-key prefixes of the items whose changes are state events (template.yaml ``StateEventsFunction``'s filter
#: names the same; a unit test holds them equal).
STATE_EVENT_PREFIXES: tuple[str, ...] = tuple(k.key_prefix for k in KINDS)


def _kind_of(sort_key: str) -> Kind | None:
    return next((k for k in KINDS if sort_key.startswith(k.key_prefix)), None)


def _moment(moment: Any) -> datetime:
    """A stream record's ``ApproximateCreationDateTime`` — epoch seconds from Lambda, a datetime from boto3 (the
    local poller) — as a UTC datetime; now when absent."""
    if isinstance(moment, datetime):
        return moment.astimezone(UTC)
    if moment is not None:
        return datetime.fromtimestamp(float(moment), UTC)
    return datetime.now(UTC)


def _iso(moment: Any) -> str:
    """:func:`_moment` as ISO 8601 UTC with ``Z``."""
    return _moment(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def _window_state(properties: dict[str, Any], at: datetime) -> str:
    """A reservation's ``state`` at ``at`` from its window (domain/reservations.py's rule: before the start
    ``Scheduled``, from it to the end ``Active``, then ``Expired``)."""
    start = datetime.fromisoformat(str(properties["startTime"]).replace("Z", "+00:00"))
    end = datetime.fromisoformat(str(properties["endTime"]).replace("Z", "+00:00"))
    return "Scheduled" if at < start else "Active" if at < end else "Expired"


def _attribute_change(change: dict[str, Any], attribute: str) -> tuple[str | None, str, dict[str, Any]] | None:
    """``(previousState, state, item)`` of a record whose item stores its state in ``attribute``; None when the
    state is as it was (or the new image has none)."""
    old = plain(change["OldImage"]) if change.get("OldImage") else None
    new = plain(change["NewImage"]) if change.get("NewImage") else None
    before = str(old[attribute]) if old and old.get(attribute) is not None else None
    after = DELETED if new is None else (str(new[attribute]) if new.get(attribute) else None)
    if after is None or before == after:
        return None
    item = new or old
    assert item is not None
    return before, after, item


def _reservation_change(change: dict[str, Any]) -> tuple[str | None, str, dict[str, Any]] | None:
    """``(previousState, state, item)`` of a reservation's record: booked (written) or cancelled (removed); None for
    any other write of it, which changes no state."""
    old = plain(change["OldImage"]) if change.get("OldImage") else None
    new = plain(change["NewImage"]) if change.get("NewImage") else None
    if (old is None) == (new is None):
        return None
    item = new or old
    assert item is not None
    at = _moment(change.get("ApproximateCreationDateTime"))
    state = _window_state(json.loads(str(item["doc"]))["properties"], at)
    return (None, state, item) if old is None else (state, DELETED, item)


def _id_parts(resource_id: str) -> tuple[str, str]:
    """``(subscription, resource group)`` of an ARM id, as cased in it."""
    parts = resource_id.split("/")
    lowered = [p.lower() for p in parts]
    subscription = parts[lowered.index("subscriptions") + 1] if "subscriptions" in lowered else ""
    group = parts[lowered.index("resourcegroups") + 1] if "resourcegroups" in lowered else ""
    return subscription, group


def state_change(record: dict[str, Any]) -> StateChange | None:
    """The state change a stream record carries (NEW_AND_OLD_IMAGES), or None when it carries none (another item,
    or a change that left the state as it was). Raises ``KeyError``/``ValueError`` for a record of a watched item
    without its ARM envelope (``doc``), which no writer of the store makes."""
    change = record.get("dynamodb") or {}
    kind = _kind_of(str(((change.get("Keys") or {}).get("SK") or {}).get("S", "")))
    if kind is None:
        return None
    if kind.state_attribute is None:
        found = _reservation_change(change)
    else:
        found = _attribute_change(change, kind.state_attribute)
    if found is None:
        return None
    before, after, item = found
    document = json.loads(str(item["doc"]))
    resource_id = str(document["id"])
    subscription, group = _id_parts(resource_id)
    extra: dict[str, Any] = {}
    if kind.key_prefix == "JOB#":
        properties = document.get("properties") or {}
        extra = {"submittedBy": properties.get("submittedBy"), "statusReason": properties.get("statusReason")}
    elif kind.state_attribute is None:  # a capacity reservation: whose it is, its window, the nodes that hold it
        properties = document.get("properties") or {}
        extra = {
            "bookedBy": properties.get("bookedBy"),
            "startTime": properties.get("startTime"),
            "endTime": properties.get("endTime"),
            "reservedNodes": [n.get("id") for n in properties.get("reservedNodes") or []],
        }
    return StateChange(
        detail_type=kind.detail_type,
        resource_type=kind.resource_type,
        resource_id=resource_id,
        subscription_id=subscription,
        resource_group=str(item.get("resourceGroup") or group),
        name=str(document.get("name") or resource_id.rsplit("/", 1)[-1]),
        previous_state=before,
        state=after,
        time=_iso(change.get("ApproximateCreationDateTime")),
        event_id=str(record["eventID"]),
        sequence_number=str(change.get("SequenceNumber", "")),
        extra=extra,
    )


def state_changes(records: Iterable[dict[str, Any]]) -> list[StateChange]:
    """The state changes of a batch of stream records, in stream order (records without one are left out)."""
    return [c for c in map(state_change, records) if c is not None]


#: Who deletes an item whose TTL passed (DynamoDB Streams ``userIdentity`` of such a ``REMOVE``).
TTL_DELETER = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


def expired_audit_events(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The audit events DynamoDB deleted because their TTL passed (``REMOVE`` by :data:`TTL_DELETER` of an
    ``AuditEvent`` item), each as stored (plain values, the table's keys dropped) — what the audit archive keeps.
    Every other record (a user's delete, another item's TTL) is none of them."""
    events: list[dict[str, Any]] = []
    for record in records:
        if record.get("eventName") != "REMOVE" or record.get("userIdentity") != TTL_DELETER:
            continue
        image = (record.get("dynamodb") or {}).get("OldImage") or {}
        item = plain(image)
        if item.get("entityType") != "AuditEvent":
            continue
        events.append({k: v for k, v in item.items() if k not in ("PK", "SK", "GSI1PK", "GSI1SK", "entityType")})
    return events
