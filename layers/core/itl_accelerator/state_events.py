"""State-change events: every change of state of an Ollama instance, a job or a node, put on EventBridge as a
documented event (docs/EVENTS.md) — read from the table's stream, so an event exists exactly when the transaction
that made the change committed.

A stream record (NEW_AND_OLD_IMAGES) becomes an event when its item's state attribute differs between the images:

| item (sort key) | state attribute | ``detail-type`` |
|---|---|---|
| ``INSTANCE#...`` | ``provisioningState`` (Accepted, Provisioning, Succeeded, Failed, Deleting, Canceled) | ``Instance State Changed`` |
| ``JOB#...`` | ``status`` (Pending, Scheduled, Running, Succeeded, Failed, Canceled) | ``Job State Changed`` |
| ``NODE#...`` | ``availability`` (Available, Cordoned, Maintenance, Offline) | ``Node State Changed`` |

An item written for the first time has ``previousState`` null; an item removed has ``state`` ``Deleted``. Every other
change of these items (a lease renewed, a price changed, capacity reserved) is no state change and makes no event.

Delivery: the stream delivers every committed change at least once, in order per item; a batch whose events
EventBridge does not all accept is retried whole by the event source mapping (template.yaml). So an event is never
lost, and may come twice: ``detail.eventId`` (the stream record's own id, the same on every delivery) is what a
consumer dedupes by, and ``detail.sequenceNumber`` (increasing per item) orders one resource's events, which
EventBridge does not promise to deliver in order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.observability import logger
from itl_accelerator.store.codec import plain

#: ``source`` of every event.
SOURCE = "itl.accelerator"
#: The ``state`` of an item that was removed.
DELETED = "Deleted"


@dataclass(frozen=True)
class Kind:
    """One kind of item whose state changes are published: its sort-key prefix, state attribute and detail-type."""

    key_prefix: str
    state_attribute: str
    detail_type: str
    resource_type: str


KINDS: tuple[Kind, ...] = (
    Kind(
        "INSTANCE#",
        "provisioningState",
        "Instance State Changed",
        f"{PROVIDER_NAMESPACE}/sparkNodes/sparkOllamaInstances",
    ),
    Kind("JOB#", "status", "Job State Changed", f"{PROVIDER_NAMESPACE}/sparkJobs"),
    Kind("NODE#", "availability", "Node State Changed", f"{PROVIDER_NAMESPACE}/sparkNodes"),
)
DETAIL_TYPES: tuple[str, ...] = tuple(k.detail_type for k in KINDS)


@dataclass(frozen=True)
class StateChange:
    """One event's content (docs/EVENTS.md): see :meth:`detail`."""

    detail_type: str
    resource_type: str
    resource_id: str
    subscription_id: str
    resource_group: str
    name: str
    previous_state: str | None
    state: str
    time: str
    event_id: str
    sequence_number: str
    extra: dict[str, Any] = field(default_factory=dict)

    def detail(self) -> dict[str, Any]:
        """The event's ``detail``: ``eventId`` (dedupe by it), ``sequenceNumber`` (order per resource),
        ``resourceId`` (the ARM id), ``resourceType``, ``subscriptionId``, ``resourceGroup``, ``name``,
        ``previousState`` (null when created), ``state`` (``Deleted`` when removed), ``time`` (ISO 8601 UTC, when
        the change was committed), and for jobs ``submittedBy`` and ``statusReason``."""
        return {
            "eventId": self.event_id,
            "sequenceNumber": self.sequence_number,
            "resourceId": self.resource_id,
            "resourceType": self.resource_type,
            "subscriptionId": self.subscription_id,
            "resourceGroup": self.resource_group,
            "name": self.name,
            "previousState": self.previous_state,
            "state": self.state,
            "time": self.time,
            **self.extra,
        }

    def entry(self, bus_name: str) -> dict[str, Any]:
        """The ``PutEvents`` entry of this change on ``bus_name``."""
        return {
            "Source": SOURCE,
            "DetailType": self.detail_type,
            "Detail": json.dumps(self.detail(), separators=(",", ":")),
            "EventBusName": bus_name,
            "Time": datetime.fromisoformat(self.time.replace("Z", "+00:00")),
        }


def _kind_of(sort_key: str) -> Kind | None:
    return next((k for k in KINDS if sort_key.startswith(k.key_prefix)), None)


def _iso(moment: Any) -> str:
    """A stream record's ``ApproximateCreationDateTime`` — epoch seconds from Lambda, a datetime from boto3 (the
    local poller) — as ISO 8601 UTC with ``Z``; now when absent."""
    if isinstance(moment, datetime):
        value = moment.astimezone(UTC)
    elif moment is not None:
        value = datetime.fromtimestamp(float(moment), UTC)
    else:
        value = datetime.now(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


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
    old = plain(change["OldImage"]) if change.get("OldImage") else None
    new = plain(change["NewImage"]) if change.get("NewImage") else None
    before = str(old[kind.state_attribute]) if old and old.get(kind.state_attribute) is not None else None
    after = DELETED if new is None else (str(new[kind.state_attribute]) if new.get(kind.state_attribute) else None)
    if after is None or before == after:
        return None
    item = new or old
    assert item is not None
    document = json.loads(str(item["doc"]))
    resource_id = str(document["id"])
    subscription, group = _id_parts(resource_id)
    extra: dict[str, Any] = {}
    if kind.key_prefix == "JOB#":
        properties = document.get("properties") or {}
        extra = {"submittedBy": properties.get("submittedBy"), "statusReason": properties.get("statusReason")}
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


class EventsNotPublished(RuntimeError):
    """EventBridge did not accept every event of a batch after the retries: the batch is to be delivered again."""


@dataclass
class PublishReport:
    """A batch: records read, events published, records without a state change, entries EventBridge refused once
    and that were sent again."""

    records: int = 0
    published: int = 0
    ignored: int = 0
    retried: int = 0

    def as_metrics(self) -> dict[str, int]:
        """Counts as metrics (``publish_counts`` prefixes them ``StateEvents``)."""
        return {"published": self.published, "ignored": self.ignored, "retried": self.retried}


#: PutEvents takes at most 10 entries a call.
MAX_ENTRIES_PER_CALL = 10


class StateEventPublisher:
    """Puts the state changes of stream records on the bus ``bus_name`` with ``events`` (a boto3 EventBridge client).
    Entries EventBridge refuses are sent again (``attempts`` in all, ``backoff`` seconds times the attempt between);
    when some still are refused, :class:`EventsNotPublished` makes the stream deliver the batch again."""

    def __init__(
        self,
        events: Any,
        bus_name: str,
        *,
        attempts: int = 3,
        backoff: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if not bus_name:
            raise ValueError("EVENT_BUS_NAME is not set: the state-change events have no bus to go to")
        self._events = events
        self._bus = bus_name
        self._attempts = attempts
        self._backoff = backoff
        self._sleep = sleep

    def publish(self, records: list[dict[str, Any]]) -> PublishReport:
        """Publish the batch's state changes in stream order; returns what was done (raises
        :class:`EventsNotPublished` as described)."""
        changes = state_changes(records)
        report = PublishReport(records=len(records), ignored=len(records) - len(changes))
        entries = [c.entry(self._bus) for c in changes]
        for start in range(0, len(entries), MAX_ENTRIES_PER_CALL):
            report.retried += self._put(entries[start : start + MAX_ENTRIES_PER_CALL])
        report.published = len(entries)
        return report

    def _put(self, entries: list[dict[str, Any]]) -> int:
        """Put ``entries``, sending again those refused; returns how many were sent again."""
        pending, retried = entries, 0
        for attempt in range(1, self._attempts + 1):
            response = self._events.put_events(Entries=pending)
            if not response.get("FailedEntryCount"):
                return retried
            refused = [e for e, r in zip(pending, response["Entries"], strict=True) if r.get("ErrorCode")]
            codes = sorted({str(r.get("ErrorCode")) for r in response["Entries"] if r.get("ErrorCode")})
            logger.warning("EventBridge refused state-change events", extra={"refused": len(refused), "codes": codes})
            if attempt == self._attempts:
                raise EventsNotPublished(f"{len(refused)} state-change events refused by EventBridge: {codes}")
            pending, retried = refused, retried + len(refused)
            self._sleep(self._backoff * attempt)
        return retried
