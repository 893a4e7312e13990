"""The one state every in-memory repository shares, behind one lock: what the DynamoDB table holds, as typed records.

Each repository method takes :attr:`MemoryState.lock` for its whole length, checks every condition of its change
before it writes anything, then writes it all — so a change is all-or-nothing across repositories, as one
``TransactWriteItems`` is on the table. Names are compared case-insensitively (:func:`fold`), as the table's keys
are lower-cased; the records keep the casing last supplied. Records are copied in and out: nothing a caller holds
is the stored object.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.billing.rollup import CostDay, CostMonth, Totals
from itl_accelerator.domain.budgets import Budget
from itl_accelerator.domain.records import FleetShape, Node, Operation, ResourceKey, Workload
from itl_accelerator.domain.reservations import CapacityReservation
from itl_accelerator.domain.usage import BillEntry, ExportDay, UsageRecord
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.errors import InvalidSkipToken, ItemTooLarge

#: A resource's identity as the table's keys spell it: subscription, resource group, type segment and names, lower
#: case (the type segment as is).
FoldKey = tuple[str, ...]

#: The largest item the DynamoDB implementation writes (``codec.MAX_ITEM_BYTES``: DynamoDB's 400 KB less a margin).
MAX_ITEM_BYTES = 400 * 1024 - 8 * 1024
#: Subscription states that allow writes (a subscription never registered counts as Registered).
WRITABLE_SUBSCRIPTION_STATES = ("Registered",)


def fold(key: ResourceKey) -> FoldKey:
    """The key a resource is found by: names match case-insensitively (the table lower-cases them in its keys)."""
    return (key.subscription_id.lower(), key.resource_group.lower(), key.type_segment, *(n.lower() for n in key.names))


def sort_key(key: ResourceKey) -> str:
    """Where a resource sorts in its lists: ``{rg}#{name}[#{child}]`` lower-cased, the order of the table's sort keys
    (``NODE#{rg}#{node}``, GSI3's ``{rg}#{name}``...)."""
    return "#".join([key.resource_group.lower(), *(n.lower() for n in key.names)])


def rekeyed(key: ResourceKey | None, subscription_id: str) -> ResourceKey | None:
    """``key`` in ``subscription_id`` (a workload's node as the table decodes it: the subscription of the read)."""
    if key is None:
        return None
    return ResourceKey(subscription_id, key.resource_group, key.type_segment, key.names)


def to_json(value: Any) -> str:
    """Compact JSON, UTF-8 as is (the table's stored form of documents)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


def check_size(*values: Any) -> None:
    """Refuse a write whose item would exceed DynamoDB's item size, before anything is written — as the DynamoDB
    implementation does (``Table.transact``: :class:`ItemTooLarge`). An estimate: the UTF-8 JSON of what the item
    holds (its document, its audit states...), each value one item."""
    for value in values:
        size = len(to_json(value).encode())
        if size > MAX_ITEM_BYTES:
            raise ItemTooLarge(size)


def audit_size(event: AuditEvent) -> dict[str, Any]:
    """What an audit item holds (for :func:`check_size`)."""
    return event.model_dump()


# ------------------------------------------------------------------------------------------------------ tokens
def encode_token(list_id: str, after: str) -> str:
    """A continuation token: the list it belongs to (``list_id``) and the sort key of the last item returned
    (URL-safe base64 of compact JSON, like the DynamoDB implementation's ``$skipToken``)."""
    raw = json.dumps({"l": list_id, "a": after}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_token(token: str, list_id: str) -> str:
    """The sort key a token of ``list_id`` continues after. Raises :class:`InvalidSkipToken` for anything else —
    forged, or issued for another list, scope or subscription (the DynamoDB implementation checks the partition and
    sort-key prefix of its tokens the same way)."""
    try:
        value = json.loads(base64.urlsafe_b64decode((token + "=" * (-len(token) % 4)).encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise InvalidSkipToken(token) from exc
    if not isinstance(value, dict) or value.get("l") != list_id or not isinstance(value.get("a"), str):
        raise InvalidSkipToken(token)
    return str(value["a"])


# ------------------------------------------------------------------------------------------------------ items
@dataclass
class StoredNode:
    """A node item: the node (its key in the casing last supplied, its counters) and the job it is drained for
    (``drainingFor``, placement's bookkeeping, not part of the record)."""

    node: Node
    draining_for: FoldKey | None = None


@dataclass
class StoredShape:
    """A ``FleetShape`` item: the shape as last written, how many nodes have it (may reach 0) and how many of those
    are ``Available``."""

    shape: FleetShape
    nodes: int = 0
    available: int = 0


@dataclass
class StoredMeter:
    """A meter item (``SUB#{sub}`` / ``METER#{allocationId}``): ``due`` is its place in the meter index (None: out of
    it, closed)."""

    allocation_id: str
    descriptor: dict[str, Any]
    gpus: int
    dgx_id: str
    terms: BillingTerms
    start: int
    metered_until: int
    due: int | None
    end: int | None = None
    metrics_retry_from: int | None = None
    settled_months: set[str] = field(default_factory=set)


@dataclass
class StoredQuota:
    """A ``QuotaUsage`` item: GPUs held (``used``) and the limit when one is set, with its envelope and etag."""

    location: str
    name: str
    used: int = 0
    limit: int | None = None
    document: dict[str, Any] | None = None
    etag: str | None = None


@dataclass
class MemoryState:
    """Every item of the store, by kind. Only the repositories of this package touch it, under :attr:`lock`."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    #: subscription (lower) → registration record
    subscriptions: dict[str, dict[str, Any]] = field(default_factory=dict)
    nodes: dict[FoldKey, StoredNode] = field(default_factory=dict)
    #: (subscription (lower), shape sort key) → shape count
    shapes: dict[tuple[str, str], StoredShape] = field(default_factory=dict)
    #: instances and jobs (the type segment is part of the key)
    workloads: dict[FoldKey, Workload] = field(default_factory=dict)
    #: capacity reservations (their bookings are on :attr:`nodes`)
    reservations: dict[FoldKey, CapacityReservation] = field(default_factory=dict)
    #: (subscription (lower), operation id (lower)) → operation
    operations: dict[tuple[str, str], Operation] = field(default_factory=dict)
    #: (subscription (lower), ``{timestamp}#{eventId}``) → event
    audit: dict[tuple[str, str], AuditEvent] = field(default_factory=dict)
    #: (subscription (lower), allocation id) → meter
    meters: dict[tuple[str, str], StoredMeter] = field(default_factory=dict)
    #: (subscription (lower), month, budget scope) → settled spend by currency (``SpendMonth`` items)
    spend: dict[tuple[str, str, str], dict[str, Decimal]] = field(default_factory=dict)
    #: (hour, allocation id) → usage record
    usage: dict[tuple[str, str], UsageRecord] = field(default_factory=dict)
    #: hour → version of its due mark
    rollup_due: dict[str, str] = field(default_factory=dict)
    #: (hour, allocation id) → version of the queued correction
    correction_due: dict[tuple[str, str], str] = field(default_factory=dict)
    #: the first day still open (the cursor's ``nextDay``)
    export_cursor: str | None = None
    export_days: dict[str, ExportDay] = field(default_factory=dict)
    #: day → (``{hour}#{allocationId}#{seq}`` → line)
    correction_lines: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: (subscription (lower), day) → (entry key → a :class:`BillEntry` of that subscription's part of the day's bill)
    bill_entries: dict[tuple[str, str], dict[str, BillEntry]] = field(default_factory=dict)
    #: (subscription (lower), scope (lower)) → hour → totals
    rollups: dict[tuple[str, str], dict[str, Totals]] = field(default_factory=dict)
    #: (subscription (lower), day, resource scope (lower)) → that resource's charges of the day by hour
    cost_days: dict[tuple[str, str, str], CostDay] = field(default_factory=dict)
    #: (subscription (lower), day, cost group scope) → (revision, that group's charges of the day by hour)
    cost_group_days: dict[tuple[str, str, str], tuple[int, CostDay]] = field(default_factory=dict)
    #: (subscription (lower), month, cost group scope) → (day → revision, that group's charges of the month by day)
    cost_group_months: dict[tuple[str, str, str], tuple[dict[str, int], CostMonth]] = field(default_factory=dict)
    #: the first hour rolled up with its cost groups (``SYS#COSTGROUPS`` / ``SINCE``)
    cost_groups_since: str | None = None
    #: (subscription (lower), budget name (lower)) → budget
    budgets: dict[tuple[str, str], Budget] = field(default_factory=dict)
    budget_sweep_cursor: str | None = None
    #: (subscription (lower), location (lower), quota name (lower)) → quota counter
    quotas: dict[tuple[str, str, str], StoredQuota] = field(default_factory=dict)
    #: (subscription (lower), kind, window start, caller subject or None) → requests counted
    rate_counters: dict[tuple[str, str, int, str | None], int] = field(default_factory=dict)

    # ------------------------------------------------------------------------------------- shared conditions
    def refusing_state(self, subscription_id: str) -> str | None:
        """The registration state that forbids writes in ``subscription_id``, or None when writes are allowed — the
        DynamoDB implementation's ``subscription_check`` (``attribute_not_exists(state) OR state = Registered``)."""
        record = self.subscriptions.get(subscription_id.lower())
        if record is None or "state" not in record:
            return None
        state = str(record["state"])
        return None if state in WRITABLE_SUBSCRIPTION_STATES else state

    def audit_taken(self, event: AuditEvent) -> bool:
        """Whether an event with the same key is stored (the table's audit put requires ``attribute_not_exists``)."""
        return audit_key(event) in self.audit

    def put_audit(self, event: AuditEvent) -> None:
        self.audit[audit_key(event)] = event.model_copy(deep=True)


def audit_key(event: AuditEvent) -> tuple[str, str]:
    """Where an audit event is stored: its subscription and ``{timestamp}#{eventId}`` (the table's sort key)."""
    return (event.subscription_id.lower(), f"{event.timestamp}#{event.event_id}")
