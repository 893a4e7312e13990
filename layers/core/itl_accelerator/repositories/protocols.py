"""The repositories, one per aggregate, as ``typing.Protocol``s: what the services may ask of storage, in the
provider's words. Each takes and returns typed records (domain/records.py, domain/usage.py) and offers intent
methods; each implementation owns every attribute name, index key and condition of its items. Two implementations
keep the same semantics — compare-and-set, all-or-nothing transactions, the same typed errors
(repositories/errors.py) — and pass the same scenario table (tests/contract): ``repositories/dynamodb`` (the one
table) and ``repositories/memory`` (for tests of services in milliseconds).

Changes that must happen together happen in one call: a workload's transition carries its audit event and its
:class:`Effects` — its operation(s), the capacity it reserves or releases on its node, the meter it starts or ends
— written in one transaction or not at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from itl_accelerator.domain.states import JobStatus, LeaseKind, ProvisioningState

if TYPE_CHECKING:  # annotations only: the domain's modules load where they are used, not with the protocols
    from itl_accelerator.billing.rollup import CostDay, CostHour, CostMonth, Rollup, Totals
    from itl_accelerator.domain.budgets import Budget, BudgetState
    from itl_accelerator.domain.quotas import QuotaUsage
    from itl_accelerator.domain.rate_limits import RateCounter
    from itl_accelerator.domain.records import (
        Demand,
        FleetShape,
        Instance,
        Job,
        Node,
        Operation,
        Release,
        Reservation,
        ResourceKey,
    )
    from itl_accelerator.domain.reservations import CapacityReservation
    from itl_accelerator.domain.usage import (
        BillEntry,
        CorrectionDue,
        ExportDay,
        Meter,
        MeterEnd,
        MeterRef,
        UsageRecord,
        WriteOutcome,
    )
    from itl_accelerator.models.audit import AuditEvent

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list, in (resource group, name) order, and the token of the next (None on the last)."""

    items: list[T]
    token: str | None


@dataclass(frozen=True)
class Scope:
    """Which part of a subscription a list covers: one ``resource_group``, or the whole subscription
    (``resource_group`` None) — then only ``visible_groups`` when the caller holds only some groups (None: all)."""

    subscription_id: str
    resource_group: str | None = None
    visible_groups: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Expect:
    """What a workload's transition requires of it as stored — else :class:`~.errors.WorkloadChanged` and nothing is
    written. Fields left None are not checked; ``state``/``status`` accept any of the states given."""

    etag: str | None = None
    state: tuple[ProvisioningState, ...] | None = None
    status: tuple[JobStatus, ...] | None = None
    operation_id: str | None = None
    delete_operation_id: str | None = None
    dgx_id: str | None = None
    capacity_reserved: bool | None = None
    cancel_requested: bool | None = None
    task_token: str | None = None


@dataclass(frozen=True)
class Effects:
    """What moves with a workload's transition, in the same transaction: ``operation`` (and ``more_operations``)
    moved on — refused when one has already ended; ``new_operation`` started; capacity reserved on (``reservation``)
    or given back to (``release``) a node; a meter started (``meter_start``: idempotent, the first start stands) or
    ended (``meter_end``); a gang job's other parts: ``more_reservations``, ``more_releases``, ``more_meter_starts``,
    ``more_meter_ends`` (all or nothing with the rest)."""

    operation: Operation | None = None
    more_operations: tuple[Operation, ...] = ()
    new_operation: Operation | None = None
    reservation: Reservation | None = None
    release: Release | None = None
    meter_start: Meter | None = None
    meter_end: MeterEnd | None = None
    more_reservations: tuple[Reservation, ...] = ()
    more_releases: tuple[Release, ...] = ()
    more_meter_starts: tuple[Meter, ...] = ()
    more_meter_ends: tuple[MeterEnd, ...] = ()

    @property
    def reservations(self) -> tuple[Reservation, ...]:
        return ((self.reservation,) if self.reservation else ()) + self.more_reservations

    @property
    def releases(self) -> tuple[Release, ...]:
        return ((self.release,) if self.release else ()) + self.more_releases

    @property
    def meter_starts(self) -> tuple[Meter, ...]:
        return ((self.meter_start,) if self.meter_start else ()) + self.more_meter_starts

    @property
    def meter_ends(self) -> tuple[MeterEnd, ...]:
        return ((self.meter_end,) if self.meter_end else ()) + self.more_meter_ends


class NodeRepository(Protocol):
    """GPU nodes, their capacity counters, the fleet shapes admission reads and the placement index."""

    def get(self, key: ResourceKey) -> Node | None:
        """The node (a consistent read), or None."""
        ...

    def page(self, scope: Scope, limit: int, token: str | None) -> Page[Node]:
        """A page of the nodes in ``scope``. Raises ``InvalidSkipToken`` for a token of another list."""
        ...

    def create(self, node: Node, audit: AuditEvent) -> None:
        """Register ``node`` (allocations start at 0) with its audit event, counted in its fleet shape. Raises
        ``ItemExists``, ``SubscriptionNotWritable``."""
        ...

    def replace(self, previous: Node, node: Node, audit: AuditEvent) -> None:
        """Replace what clients write of ``previous`` (still at its etag) with ``node``: allocations stay, free
        capacity follows the new totals, which must still cover them; its shape count moves. Raises
        ``ItemMissing``, ``EtagMismatch``, ``CapacityInUse``, ``SubscriptionNotWritable``."""
        ...

    def delete(self, node: Node, audit: AuditEvent) -> None:
        """Remove ``node`` (still at its etag, holding no allocation and no instance). Allowed in any subscription
        state. Raises ``ItemMissing``, ``EtagMismatch``, ``CapacityInUse``."""
        ...

    def fleet_shapes(self, subscription_id: str) -> list[FleetShape]:
        """The shapes of the subscription's nodes (those with at least one node)."""
        ...

    def candidates(
        self,
        subscription_id: str,
        demand: Demand,
        *,
        for_job: ResourceKey | None = None,
        pages: int | None = None,
        most_free_first: bool = False,
    ) -> list[Node]:
        """``Available`` nodes that could take ``demand`` now (free GPUs and memory, model and location when given)
        and are not drained for another job than ``for_job``, fewest free GPUs first (``most_free_first``: the other
        way — a booking's read, whose window is not now), bounded in number whatever the fleet's size: those of the
        first page that yields any — or, with ``pages``, of that many pages (a gang's read: its nodes side by side).
        The index may lag: a reservation is the judge."""
        ...

    def bookable(self, subscription_id: str, demand: Demand, start: int, *, pages: int) -> list[Node]:
        """``Available`` nodes of the demand's kind (model, vendor and location when given) that no booking holds from
        ``start`` (epoch seconds) on, those free the longest first: at most ``pages`` pages of the booking calendar
        index, whatever the fleet's size (a booking's first read). A node stored before the index is not in it until
        it next changes."""
        ...

    def set_draining(self, node: ResourceKey, for_job: ResourceKey | None, *, unless_held: bool = False) -> bool:
        """Drain ``node`` for ``for_job`` (no other job is placed there until it is) or end its drain (None).
        Placement's bookkeeping, not a change of the node (no audit). ``unless_held``: not when the node is held for
        another job already. Whether it was written (a missing node is no error: False)."""
        ...

    def on_cluster(self, cluster: str, node_name: str | None = None) -> list[Node]:
        """Every node (of any subscription) that is a node of Slurm cluster ``cluster`` (domain/backends.py), or
        only those naming Slurm node ``node_name`` (any case): a read of that cluster's nodes only, never the
        fleet."""
        ...

    def set_backend_status(self, node: Node, status: dict[str, Any]) -> bool:
        """Record how its platform reports ``node`` (:attr:`Node.backend_status`; bookkeeping: no new etag, no
        audit) and keep it out of the placement index while the platform takes no work on it — if the node is as
        read (its etag). False when it changed meanwhile."""
        ...


class InstanceRepository(Protocol):
    """Ollama instances and their long-running operations."""

    def get(self, key: ResourceKey) -> Instance | None:
        """The instance (a consistent read), or None."""
        ...

    def get_with_node(self, key: ResourceKey) -> tuple[Instance | None, Node | None]:
        """The instance and its node, in one read."""
        ...

    def page(self, node: ResourceKey, limit: int, token: str | None) -> Page[Instance]:
        """A page of the instances of ``node``. Raises ``InvalidSkipToken``."""
        ...

    def accept(
        self,
        instance: Instance,
        operation: Operation,
        audit: AuditEvent,
        reservation: Reservation,
        *,
        replacing: Instance | None = None,
    ) -> None:
        """A new instance (its name free) or a Failed one provisioned again (``replacing``, still at its etag), its
        provisioning operation, its audit event and the reservation of its GPUs — one transaction (the
        subscription must allow writes). Raises ``WorkloadChanged``, ``NodeMissing``, ``NodeUnavailable``,
        ``NodeChanged``, ``CapacityShortfall``, ``SubscriptionNotWritable``."""
        ...

    def update(
        self, before: Instance, after: Instance, audit: AuditEvent, *, expect: Expect, effects: Effects = Effects()
    ) -> None:
        """Move the instance from ``before`` (as read) to ``after`` if ``expect`` holds, with its audit event and
        ``effects`` — one transaction. Raises ``WorkloadChanged`` (nothing written), and the node errors of a
        reservation."""
        ...

    def remove(self, instance: Instance, audit: AuditEvent, *, expect: Expect, effects: Effects = Effects()) -> None:
        """Delete the instance if ``expect`` holds, with its audit event and ``effects`` (its operation, the
        capacity it gives back). Raises ``WorkloadChanged``."""
        ...

    def note(self, before: Instance, after: Instance, *, expect: Expect) -> bool:
        """Bookkeeping of the workflow that owns it (its lease): no audit event, no new etag. Returns whether it
        was written (False: ``expect`` no longer holds)."""
        ...


class JobRepository(Protocol):
    """GPU jobs: by submitter, by the supplier of the node they run on, and the queue of those waiting for
    capacity."""

    def get(self, key: ResourceKey) -> Job | None:
        """The job (a consistent read), or None."""
        ...

    def page(
        self,
        scope: Scope,
        limit: int,
        token: str | None,
        *,
        submitted_by: str | None = None,
        node_owner: str | None = None,
    ) -> Page[Job]:
        """A page of the jobs in ``scope``: all, or those ``submitted_by`` one user, or those placed on the nodes of
        ``node_owner`` — full pages either way. Raises ``InvalidSkipToken``."""
        ...

    def submit(self, job: Job, operation: Operation, audit: AuditEvent) -> None:
        """A new job (its name free), its operation and its audit event — one transaction (the subscription must
        allow writes). Raises ``WorkloadChanged`` (the name was taken meanwhile), ``SubscriptionNotWritable``."""
        ...

    def update(
        self, before: Job, after: Job, audit: AuditEvent, *, expect: Expect, effects: Effects = Effects()
    ) -> None:
        """Move the job from ``before`` to ``after`` if ``expect`` holds, with its audit event and ``effects`` — one
        transaction. Raises ``WorkloadChanged``, and the node errors of a reservation (``NodeMissing``,
        ``NodeUnavailable``, ``NodeChanged``, ``CapacityShortfall``)."""
        ...

    def remove(self, job: Job, audit: AuditEvent, *, expect: Expect) -> None:
        """Delete the job if ``expect`` holds, with its audit event. Raises ``WorkloadChanged``."""
        ...

    def note(self, before: Job, after: Job, *, expect: Expect) -> bool:
        """Bookkeeping of the workflow or tracker that owns it (lease, task token, checks, drain): no audit event,
        no new etag. Returns whether it was written."""
        ...

    def waiting(self, subscription_id: str, limit: int) -> list[ResourceKey]:
        """Up to ``limit`` jobs waiting for capacity, in the order placement serves them (priority, then
        submission). The queue may lag: read each job again."""
        ...

    def preemptible(self, subscription_id: str, kind: str, below_priority: int, limit: int) -> list[Job]:
        """Up to ``limit`` of the subscription's preemption candidates of accelerator ``kind``
        (``Job.preemption_candidate``) with a priority below ``below_priority``, in ``Job.preemption_order``, as the
        index holds them (one request): it may lag, so a write to one must be conditioned on its etag."""
        ...


class LeaseIndex(Protocol):
    """The workloads whose lease ran out, whatever their type: the reconciler's and the job tracker's work list."""

    def expired(
        self, now: float, limit: int, kind: LeaseKind = LeaseKind.LEASE, token: str | None = None
    ) -> Page[ResourceKey]:
        """A page of at most ``limit`` keys of workloads whose ``kind`` lease ended before ``now`` (epoch s): a fair
        share of every index partition not read to its end, most overdue first within each (repositories/leases.py),
        so no partition starves another. ``token`` (a page's) continues the same read; ``Page.token`` None: nothing
        more was due. May lag: read each workload again. ``ValueError`` for a token not made here."""
        ...


class QuotaRepository(Protocol):
    """The subscriptions' GPU quotas (domain/quotas.py): GPUs held per location and quota (counted by every
    reservation and release, in their own transactions) and the limits operators set."""

    def get(self, subscription_id: str, location: str, name: str) -> QuotaUsage | None:
        """One quota's usage and limit (None: never used nor limited)."""
        ...

    def in_location(self, subscription_id: str, location: str) -> list[QuotaUsage]:
        """Every quota of a location that was used or limited, by name."""
        ...

    def set_limit(self, usage: QuotaUsage, audit: AuditEvent, *, expected_etag: str | None) -> None:
        """Set ``usage.limit`` (with its ``document`` and ``etag``), or remove the limit (``limit`` None), with the
        audit event — together; ``expected_etag``: the etag its limit must still have (None: no limit may be set
        now, a create). A limit below the
        current use is allowed: new allocations are refused until enough GPUs are given back. Raises
        ``EtagMismatch``."""
        ...


class CapacityReservationRepository(Protocol):
    """Capacity reservations (domain/reservations.py) and their bookings on node items, written together."""

    def get(self, key: ResourceKey) -> CapacityReservation | None:
        """The reservation (case-insensitive names), or None."""
        ...

    def page(self, scope: Any, limit: int, token: str | None) -> Page[CapacityReservation]:
        """A page of the reservations of a resource group or a subscription (listing.py ``Scope``), by (resource
        group, name). Raises ``InvalidSkipToken``."""
        ...

    def book(
        self,
        reservation: CapacityReservation,
        nodes: list[Node],
        meters: list[Meter],
        audit: AuditEvent,
        *,
        expired_before: int = 0,
    ) -> None:
        """Create the reservation (its name free), its booking on each of ``nodes`` as read — each still at the
        calendar and hold revisions read (``Node.calendar_revision``, ``hold_revision``), so no booking and no
        placement landed there since — its ``meters`` (each starting at the window's start and ending at its end)
        and its audit event: one transaction. The bookings of those nodes that ended before ``expired_before``
        (epoch seconds) are removed in the same updates, so a node's calendar holds what is to come, not its history
        (the reservations themselves stay, ``Expired``). Raises ``ItemExists`` (the name is taken), ``NodeChanged`` (a
        node's calendar moved or it is gone or not available: read again and decide again)."""
        ...

    def cancel(self, reservation: CapacityReservation, audit: AuditEvent, *, bill_until: int | None) -> None:
        """Delete the reservation still at its etag, remove its bookings from its nodes (a node gone since is
        skipped) and bill it up to ``bill_until`` (epoch seconds; None: its whole window, as booked): its meters are
        deleted when that is at or before the window's start (nothing billed), else ended there — with its audit
        event, together. Raises ``EtagMismatch``."""
        ...


class BudgetRepository(Protocol):
    """Budgets (domain/budgets.py): set by operators, evaluated by the budget monitor."""

    def get(self, subscription_id: str, name: str) -> Budget | None:
        """The budget (case-insensitive name), or None."""
        ...

    def in_subscription(self, subscription_id: str) -> list[Budget]:
        """Every budget of a subscription, by name."""
        ...

    def every(self, limit: int, token: str | None) -> Page[Budget]:
        """A page of every budget of every subscription (the monitor's work list). Raises ``InvalidSkipToken``."""
        ...

    def sweep_cursor(self) -> str | None:
        """Where the budget monitor's sweep of :meth:`every` stopped (a page token; None: at the start)."""
        ...

    def save_sweep_cursor(self, token: str | None) -> None:
        """Record where the sweep stopped (None: the next sweep starts at the beginning)."""
        ...

    def put(self, budget: Budget, audit: AuditEvent, *, expected_etag: str | None, read_version: int = 0) -> None:
        """Create (``expected_etag`` None: the name must be free) or replace (still at ``expected_etag``, its state
        still at ``read_version``) a budget, with its audit event — together; ``budget.state`` (evaluated for the
        change) is written with it, its version one past ``read_version``. Raises ``ItemExists``, ``EtagMismatch``,
        ``ItemMissing``, ``StateMoved`` (an evaluation was written since: read it again)."""
        ...

    def delete(self, budget: Budget, audit: AuditEvent) -> None:
        """Remove a budget still at its etag, with its audit event. Raises ``EtagMismatch``."""
        ...

    def record(self, budget: Budget, state: BudgetState, audits: list[AuditEvent]) -> bool:
        """Write the monitor's ``state`` (its ``version`` the one read plus one) and the audit items of the thresholds
        it crossed — together, and only if no evaluation was written since ``budget`` was read (False then)."""
        ...


class RateLimitRepository(Protocol):
    """Request counters (domain/rate_limits.py): how many requests of a kind a subscription, or one caller in it,
    made in a one-minute window."""

    def take(self, counter: RateCounter, limit: int) -> int | None:
        """Count one more request on ``counter`` (made by its first request) unless it already holds ``limit``
        (>= 1): its count, this request included — or None, and nothing counted, at the limit. Atomic: concurrent
        takes of one counter each return a different value, none lost, never past ``limit``. A counter is forgotten
        some minutes after its window ended."""
        ...

    def give_back(self, counter: RateCounter) -> None:
        """Take back one request counted on ``counter`` (another limit refused it after all); nothing below 0."""
        ...


class OperationRepository(Protocol):
    """Long-running operations (their start and moves happen in the workloads' transactions)."""

    def get(self, subscription_id: str, operation_id: str) -> Operation | None:
        """The operation, or None."""
        ...

    def finish(self, subscription_id: str, operation: Operation) -> bool:
        """Move ``operation`` to its status on its own unless it has already ended. Returns whether it moved."""
        ...


class AuditRepository(Protocol):
    """The append-only audit trail."""

    def append(self, event: AuditEvent) -> None:
        """Append one event on its own (a refused attempt, which changes nothing). Raises ``ItemExists`` for an
        event already appended (the trail is append-only)."""
        ...

    def page(
        self,
        subscription_id: str,
        start: str | None,
        end: str | None,
        resource_id: str | None,
        limit: int,
        token: str | None,
        *,
        actor_id: str | None = None,
        newest_first: bool = False,
    ) -> Page[AuditEvent]:
        """Events of a subscription with ``start <= timestamp <= end`` (UTC ISO 8601 as the events carry them; None:
        unbounded), oldest first (``newest_first``: the other way); of one resource (its ARM id, any casing) when
        ``resource_id`` is given, of one actor (``actor_id``, exact) when that is; full pages, but for a resource's
        events by one actor, which may come short (with a token) when reading it took too long. Raises
        ``InvalidSkipToken``."""
        ...


class SubscriptionRepository(Protocol):
    """Subscription registration records (ARM subscription lifecycle)."""

    def get(self, subscription_id: str) -> dict[str, Any] | None:
        """The registration record (``state``, ``registrationDate``, ``properties``), or None."""
        ...

    def put(self, subscription_id: str, record: dict[str, Any], audit: AuditEvent) -> None:
        """Set the record, with its audit event, in one transaction."""
        ...


class MeterRepository(Protocol):
    """Meters (started and ended in the workloads' transactions, :class:`Effects`) and the sync's progress."""

    def oldest_due(self) -> int | None:
        """When the most overdue meter was due (epoch s; None: no meter is due at all) — how far the sync lags."""
        ...

    def due(self, now: float, limit: int) -> list[MeterRef]:
        """At most ``limit`` meters due for a sync at ``now`` (epoch s), every partition getting its share."""
        ...

    def get(self, ref: MeterRef) -> Meter | None:
        """The meter (consistent), or None."""
        ...

    def advance(self, meter: Meter, metered_until: int, due: int | None, metrics_retry_from: int | None = None) -> None:
        """Usage is recorded up to ``metered_until``; metrics are read again from ``metrics_retry_from`` (None:
        none); next due at ``due`` (None: closed, out of the due list and of the open meters)."""
        ...

    def open_in(self, subscription_id: str) -> list[Meter]:
        """The subscription's meters not closed yet (read consistently; by allocation id): what budgets add up live.
        Grows with the allocations running (and ended within the late period), never with history."""
        ...

    def settle(self, meter: Meter, month: str, costs: dict[str, dict[str, Decimal]]) -> bool:
        """Add ``costs`` (budget scope → currency → amount) to the subscription's settled spend of ``month``
        (``YYYY-MM``) and mark that month settled on the meter — together and once: False when it was already."""
        ...

    def settled(self, subscription_id: str, month: str, scopes: tuple[str, ...]) -> dict[str, dict[str, Decimal]]:
        """The settled spend of ``month`` in each of ``scopes`` (currency → amount; {} where none)."""
        ...


class UsageRepository(Protocol):
    """Usage records (one allocation, one hour) and the hourly roll-ups."""

    def records(self, allocation_id: str, window_starts: list[int]) -> dict[int, UsageRecord]:
        """The stored records of one allocation for those windows."""
        ...

    def get(self, allocation_id: str, window_start: int) -> UsageRecord | None:
        """One record, or None."""
        ...

    def write(self, record: UsageRecord, previous: UsageRecord | None) -> WriteOutcome:
        """Write ``record`` if the stored one is still ``previous`` (compare-and-set on content and billing state),
        marking its hour's roll-up due — one transaction; a record of a day already billed or closed is queued as a
        correction. ``conflict``: read again. Raises ``StoreBusy``."""
        ...

    def hour_records(self, hour: str) -> Iterator[UsageRecord]:
        """Every record of one UTC hour (``YYYY-MM-DDTHH``), a page at a time."""
        ...

    def due_rollups(self, limit: int) -> list[tuple[str, str]]:
        """``(hour, version)`` of at most ``limit`` hours whose roll-ups are due, oldest first."""
        ...

    def put_rollups(self, rollups: list[Rollup]) -> None:
        """Write roll-ups (each replaces the last of its scope and hour). Raises ``StoreBusy``."""
        ...

    def rollup_done(self, hour: str, version: str) -> bool:
        """Clear an hour's due mark unless newer usage marked it again meanwhile."""
        ...

    def put_cost_hours(self, hours: list[CostHour]) -> None:
        """Write resources' charges of an hour (each replaces what that resource's hour held). Raises
        ``StoreBusy``."""
        ...

    def cost_days(self, subscription_id: str, first_day: str, last_day: str) -> Iterator[CostDay]:
        """Every resource lifetime's charges by day of a subscription, ``first_day`` to ``last_day`` (``YYYY-MM-DD``)
        inclusive, by day — deleted resources included: what cost queries grouped or filtered by resource read."""
        ...

    def put_cost_group_hours(self, hours: list[CostHour]) -> None:
        """Write cost groups' charges of an hour (billing/rollup.py ``group_dimensions``; each replaces what that
        group's hour held) and, from the group's day as it then stands, the day's total in the group's month — a
        day total never replaced by one computed from fewer of its hours. Raises ``StoreBusy``."""
        ...

    def mark_cost_groups_since(self, hour: str) -> str:
        """Record, unless recorded already, that every hour from ``hour`` (``YYYY-MM-DDTHH``) on is rolled up with
        its cost groups; the hour recorded."""
        ...

    def cost_groups_since(self) -> str | None:
        """The first hour whose roll-ups are sure to hold its cost groups (:meth:`mark_cost_groups_since`); None
        before the first roll-up that writes them. Earlier hours may lack them (a table from before them)."""
        ...

    def cost_group_days(self, subscription_id: str, first_day: str, last_day: str) -> Iterator[CostDay]:
        """Every cost group's charges by day and hour, ``first_day`` to ``last_day`` (``YYYY-MM-DD``) inclusive, by
        day: what cost queries by hour, and the part days of other queries, read."""
        ...

    def cost_group_months(self, subscription_id: str, month: str) -> Iterator[CostMonth]:
        """Every cost group's charges by day in ``month`` (``YYYY-MM``): what cost queries over whole days read."""
        ...

    def rollups(self, subscription_id: str, scope: str, first_hour: str, last_hour: str) -> dict[str, Totals]:
        """Roll-ups of one scope by hour, ``first_hour`` to ``last_hour`` inclusive."""
        ...


class BillingRepository(Protocol):
    """The daily export's bookkeeping: the cursor (first day still open), day states, claims, correction lines."""

    def export_cursor(self) -> str | None:
        """The first day still open (``YYYY-MM-DD``), or None before any usage."""
        ...

    def open_days_from(self, day: str) -> None:
        """Start the cursor at ``day`` unless it exists."""
        ...

    def export_day(self, day: str) -> ExportDay | None:
        """The export state of ``day``, or None."""
        ...

    def close_day(self, day: str, next_day: str) -> bool:
        """Move the cursor from ``day`` to ``next_day`` and mark ``day`` Closed — together; False when the cursor is
        elsewhere."""
        ...

    def claim(self, record: UsageRecord, day: str) -> bool:
        """Bill ``record`` in ``day`` as it is now; False when it changed or was claimed meanwhile."""
        ...

    def corrections_due(self, limit: int) -> list[CorrectionDue]:
        """At most ``limit`` queued corrections, oldest hour first."""
        ...

    def claim_correction(self, record: UsageRecord, due: CorrectionDue, day: str, line: dict[str, Any] | None) -> bool:
        """Bill what changed in ``record`` as correction ``line`` of ``day`` (None: nothing to bill), its ``billed``
        brought up to date, the queue entry gone — together; False when either changed meanwhile."""
        ...

    def drop_correction(self, due: CorrectionDue) -> None:
        """Remove a queue entry whose record is gone."""
        ...

    def correction_lines(self, day: str) -> Iterator[dict[str, Any]]:
        """The correction lines of ``day``'s export, in order."""
        ...

    def mark_exported(self, day: str, manifest: dict[str, Any]) -> None:
        """Record ``day`` as exported, with its manifest (keeping what its closing recorded)."""
        ...

    def bill_entries(
        self, subscription_id: str, day: str, after: str | None, limit: int
    ) -> tuple[list[BillEntry], str | None]:
        """At most ``limit`` entries of the subscription's part of ``day``'s bill, in key order after the key
        ``after`` (None: from the first), and the key to resume after (None: no more). Every claim and correction
        of the day's export keeps its entry in the same write."""
        ...


class StoreProbe(Protocol):
    """Whether the store answers (``GET /ready``)."""

    def reachable(self) -> tuple[bool, str]:
        """``(True, "")`` when a read succeeds, else ``(False, the error's code)`` — never raises for the store's
        sake."""
        ...


@dataclass
class Repositories:
    """Every repository over one store (the DynamoDB table, or memory)."""

    nodes: NodeRepository
    instances: InstanceRepository
    jobs: JobRepository
    leases: LeaseIndex
    quotas: QuotaRepository
    budgets: BudgetRepository
    reservations: CapacityReservationRepository
    rate_limits: RateLimitRepository
    operations: OperationRepository
    audit: AuditRepository
    subscriptions: SubscriptionRepository
    meters: MeterRepository
    usage: UsageRepository
    billing: BillingRepository
    probe: StoreProbe
