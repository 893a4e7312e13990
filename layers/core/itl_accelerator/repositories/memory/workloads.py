"""What the in-memory instance and job repositories share — the DynamoDB implementation's ``WorkloadTable``
(repositories/dynamodb/workloads.py): workloads, their transitions and what moves with them (operations, the
capacity reserved on or given back to a node, meters), each change checked whole before any of it is written.

- A transition writes the difference between the workload as read (``before``) and as it should be (``after``):
  only the fields that differ are written, so bookkeeping written meanwhile (a lease, a task token) stays.
- Its failures come back as the DynamoDB implementation's ``_raise_typed`` makes them: ``SubscriptionNotWritable``
  first (creations only), then ``WorkloadChanged`` (the workload, an operation, an audit event or any other item of
  the transaction refused), then the node errors of a reservation.
- Records are stored as the table would give them back: empty optional texts are absent (None), a lease ends on a
  whole second, a job is waiting only while it has no node owner, the node of a workload is its resource group
  and name (read back in the subscription of the read).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Generic, TypeVar

from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.records import Instance, Job, Lease, Operation, Reservation, ResourceKey, Workload
from itl_accelerator.domain.runs import JobRun
from itl_accelerator.domain.states import JobStatus, LeaseKind
from itl_accelerator.domain.usage import Meter, MeterEnd
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.errors import SubscriptionNotWritable, WorkloadChanged
from itl_accelerator.repositories.memory import nodes as node_items
from itl_accelerator.repositories.memory import paging
from itl_accelerator.repositories.memory.state import (
    MemoryState,
    StoredMeter,
    audit_size,
    check_size,
    fold,
    rekeyed,
    sort_key,
)
from itl_accelerator.repositories.protocols import Effects, Expect, Page, Scope

W = TypeVar("W", bound=Workload)

#: Fields a transition never writes: the key (the identity of the item).
IDENTITY = ("key",)


# ------------------------------------------------------------------------------------------ stored form
def _node_ref(key: ResourceKey | None) -> ResourceKey | None:
    """A node reference as the table keeps it: its resource group and name (``nodeResourceGroup``/``nodeName``,
    ``drainNode``), the subscription filled in when read."""
    if key is None:
        return None
    return ResourceKey("", key.resource_group, "sparkNodes", (key.name,))


def _terms(terms: BillingTerms | None) -> BillingTerms | None:
    return BillingTerms.from_pricing(terms.as_stored()) if terms else None


def stored_form(workload: W) -> W:
    """A copy of ``workload`` as the table would give it back (module docstring)."""
    w = copy.deepcopy(workload)
    w.operation_id = w.operation_id or None
    w.dgx_id = w.dgx_id or None
    w.node = _node_ref(w.node)
    w.node_owner = w.node_owner or None
    w.billing_terms = _terms(w.billing_terms)
    w.meter_id = w.meter_id or None
    w.lease = Lease(LeaseKind(w.lease.kind), float(int(w.lease.until))) if w.lease else None
    if isinstance(w, Instance):
        w.delete_operation_id = w.delete_operation_id or None
        w.compensation_error = w.compensation_error or None
        w.task_token = w.task_token or None
        w.ready_signal = bool(w.ready_signal)
    if isinstance(w, Job):
        w.queued = bool(w.queued and not w.node_owner)
        w.secret_env = w.secret_env or {}
        w.task_token = w.task_token or None
        w.started_at = w.started_at or None
        w.run = JobRun.of_properties(w.properties)  # the table keeps the run in the job's document
        w.ended_at = w.ended_at or None
        w.canceled_by = w.canceled_by or None
        w.cancel_operation_id = w.cancel_operation_id or None
        w.drain_node = _node_ref(w.drain_node)
    return w


def present(stored: W, key: ResourceKey) -> W:
    """A copy of a stored workload under ``key``: a point read answers with the key it was asked, a list with the
    resource group and names as stored; its node references in ``key``'s subscription."""
    w = copy.deepcopy(stored)
    w.key = key
    w.node = rekeyed(w.node, key.subscription_id)
    if isinstance(w, Job):
        w.drain_node = rekeyed(w.drain_node, key.subscription_id)
        if w.status != JobStatus.PENDING:  # the table keeps a start estimate only while the job waits
            w.start_estimate = None
    return w


def listed_key(stored: Workload, subscription_id: str) -> ResourceKey:
    return ResourceKey(subscription_id, stored.key.resource_group, stored.key.type_segment, stored.key.names)


def changes(before: Workload, after: Workload) -> dict[str, Any]:
    """The fields of ``after`` that differ from ``before`` (as stored), by name — what a transition writes."""
    old, new = stored_form(before), stored_form(after)
    return {
        f.name: getattr(new, f.name)
        for f in dataclasses.fields(new)
        if f.name not in IDENTITY and getattr(old, f.name, None) != getattr(new, f.name)
    }


def expect_holds(stored: Workload | None, expect: Expect) -> bool:
    """Whether the stored workload meets ``expect`` (it exists; each field given equals, or is one of, the stored
    value — a field the workload does not have never matches), as the DynamoDB implementation's ``expectation``."""
    if stored is None:
        return False
    checks: list[tuple[Any, Any]] = [
        (expect.etag, stored.etag),
        (expect.operation_id, stored.operation_id),
        (expect.dgx_id, stored.dgx_id),
        (expect.capacity_reserved, stored.capacity_reserved),
        (expect.cancel_requested, stored.cancel_requested),
        (expect.delete_operation_id, stored.delete_operation_id if isinstance(stored, Instance) else None),
        (expect.task_token, stored.task_token if isinstance(stored, (Instance, Job)) else None),
    ]
    if any(wanted is not None and wanted != found for wanted, found in checks):
        return False
    if expect.state is not None and stored.state not in expect.state:
        return False
    return expect.status is None or (isinstance(stored, Job) and stored.status in expect.status)


def stored_operation(operation: Operation) -> Operation:
    """A copy of a new operation as the table keeps it (its resource group lower-cased, an empty owner absent)."""
    return Operation(
        copy.deepcopy(operation.body), operation.kind, operation.resource_group.lower(), operation.owner or None
    )


def operation_key(subscription_id: str, operation_id: str) -> tuple[str, str]:
    return (subscription_id.lower(), operation_id.lower())


def operation_moves(state: MemoryState, subscription_id: str, operation: Operation) -> bool:
    """Whether ``operation`` may move on: it exists and has not ended (``operation_update``'s condition)."""
    current = state.operations.get(operation_key(subscription_id, operation.operation_id))
    return current is not None and not current.status.final


def move_operation(state: MemoryState, subscription_id: str, operation: Operation) -> None:
    """Write ``operation``'s status and body (its kind, resource group and owner stay as stored)."""
    key = operation_key(subscription_id, operation.operation_id)
    current = state.operations[key]
    state.operations[key] = Operation(
        copy.deepcopy(operation.body), current.kind, current.resource_group, current.owner
    )


def meter_key(subscription_id: str, allocation_id: str) -> tuple[str, str]:
    return (subscription_id.lower(), allocation_id)


def start_meter(state: MemoryState, meter: Meter) -> None:
    """Start a meter, idempotently (the DynamoDB implementation's ``meter_start_item``: every attribute
    ``if_not_exists``): a meter already there keeps its start and figures, and goes back into the due index at
    ``meter.start`` only if it had left it. A meter whose end is known at its start (a capacity reservation's window)
    is written with it."""
    key = meter_key(meter.subscription_id, meter.allocation_id)
    current = state.meters.get(key)
    if current is None:
        state.meters[key] = StoredMeter(
            allocation_id=meter.allocation_id,
            descriptor=copy.deepcopy(meter.descriptor()),
            gpus=int(meter.gpus),
            dgx_id=meter.dgx_id,
            terms=BillingTerms.from_pricing(meter.terms.as_stored()),
            start=int(meter.start),
            end=None if meter.end is None else int(meter.end),
            metered_until=int(meter.start),
            due=int(meter.start),
        )
    elif current.due is None:
        current.due = int(meter.start)


def end_meter(state: MemoryState, end: MeterEnd) -> None:
    """End a meter (it exists): the first end stands; it is due at ``end.due`` (``meter_end_item``)."""
    current = state.meters[meter_key(end.subscription_id, end.allocation_id)]
    if current.end is None:
        current.end = int(end.end)
    current.due = int(end.due)


def refuse_repeated_items(key: ResourceKey, effects: Effects) -> None:
    """DynamoDB refuses a transaction naming one item twice (``ValidationException``, nothing written): so does
    memory (``ValueError``), so a service test meets it as early as the table would."""
    operations = [
        o.operation_id.lower() for o in (effects.operation, *effects.more_operations, effects.new_operation) if o
    ]
    nodes = [fold(r.node) for r in effects.reservations] + [fold(r.node) for r in effects.releases]
    same_node = len(set(nodes)) < len(nodes)
    meters = [meter_key(m.subscription_id, m.allocation_id) for m in effects.meter_starts]
    meters += [meter_key(m.subscription_id, m.allocation_id) for m in effects.meter_ends]
    same_meter = len(set(meters)) < len(meters)
    if len(set(operations)) < len(operations) or same_node or same_meter:
        raise ValueError(f"a transaction of {key.name} names one item twice (DynamoDB refuses it)")


def effects_refused(state: MemoryState, key: ResourceKey, effects: Effects) -> bool:
    """Whether an item of ``effects`` other than the reservation refuses the transaction: an operation gone or
    ended, a new operation whose id is taken, a release on a node gone, the end of a meter that does not exist."""
    subscription = key.subscription_id
    moved = [o for o in (effects.operation, *effects.more_operations) if o is not None]
    return (
        any(not operation_moves(state, subscription, o) for o in moved)
        or (
            effects.new_operation is not None
            and operation_key(subscription, effects.new_operation.operation_id) in state.operations
        )
        or any(node_items.release_refused(state, r) for r in effects.releases)
        or any(meter_key(m.subscription_id, m.allocation_id) not in state.meters for m in effects.meter_ends)
    )


def apply_effects(state: MemoryState, key: ResourceKey, effects: Effects) -> None:
    """Write ``effects`` (checked by :func:`effects_refused` and :func:`~.nodes.reservation_refusal`)."""
    subscription = key.subscription_id
    for moved in (effects.operation, *effects.more_operations):
        if moved is not None:
            move_operation(state, subscription, moved)
    if effects.new_operation is not None:
        op = effects.new_operation
        state.operations[operation_key(subscription, op.operation_id)] = stored_operation(op)
    for reservation in effects.reservations:
        node_items.reserve(state, reservation)
    for release in effects.releases:
        node_items.release(state, release)
    for meter in effects.meter_starts:
        start_meter(state, meter)
    for end in effects.meter_ends:
        end_meter(state, end)


class WorkloadTable(Generic[W]):
    """The workloads of one type (``kind``: :class:`Instance` or :class:`Job`) over the shared state: what the
    instance and job repositories are (``get``, ``update``, ``remove``, ``note`` as repositories/protocols.py has
    them are its own)."""

    def __init__(self, state: MemoryState, kind: type[W]):
        self._s = state
        self._kind = kind

    def _stored(self, key: ResourceKey) -> W | None:
        found = self._s.workloads.get(fold(key))
        return found if isinstance(found, self._kind) else None

    # ----------------------------------------------------------------------------------------------- reads
    def get(self, key: ResourceKey) -> W | None:
        with self._s.lock:
            stored = self._stored(key)
            return present(stored, key) if stored is not None else None

    def listed(
        self,
        scope: Scope,
        list_id: str,
        limit: int,
        token: str | None,
        *,
        parent: ResourceKey | None = None,
        keep: Callable[[W], bool] | None = None,
    ) -> Page[W]:
        """A page of the workloads of ``scope`` (under ``parent`` when given; those ``keep(stored)`` accepts), in
        (resource group, names) order. ``list_id`` names the list for its tokens."""
        with self._s.lock:
            subscription = scope.subscription_id.lower()
            entries: list[tuple[str, W]] = []
            for k, stored in self._s.workloads.items():
                if k[0] != subscription or not isinstance(stored, self._kind):
                    continue
                if not paging.in_scope(scope, stored.key.resource_group):
                    continue
                if parent is not None and fold(stored.key.parent()) != fold(parent):
                    continue
                if keep is not None and not keep(stored):
                    continue
                entries.append((sort_key(stored.key), present(stored, listed_key(stored, scope.subscription_id))))
            return paging.page(entries, f"{list_id}|{paging.scope_id(scope)}", limit, token)

    # ----------------------------------------------------------------------------------------------- writes
    def put_new(
        self,
        workload: W,
        operation: Operation,
        audit: AuditEvent,
        *,
        reservation: Reservation | None = None,
        replacing_etag: str | None = None,
    ) -> None:
        """A new workload (its name free, or the one it replaces still at ``replacing_etag``), its operation, its
        audit event and its reservation, in a subscription that allows writes — all or nothing (``put_new``)."""
        with self._s.lock:
            check_size(workload.document, operation.body, audit_size(audit))
            subscription = workload.key.subscription_id
            refusing = self._s.refusing_state(subscription)
            if refusing is not None:
                raise SubscriptionNotWritable(refusing)
            stored = self._stored(workload.key)
            taken = stored is not None if replacing_etag is None else stored is None or stored.etag != replacing_etag
            if (
                taken
                or operation_key(subscription, operation.operation_id) in self._s.operations
                or self._s.audit_taken(audit)
            ):
                raise WorkloadChanged()
            if reservation is not None:
                refusal = node_items.reservation_refusal(self._s, reservation)
                if refusal is not None:
                    raise refusal
            if reservation is not None:  # the workload records the quotas its reservation counts in
                workload = replace(workload, quota=reservation.quota)
            self._s.workloads[fold(workload.key)] = stored_form(workload)
            self._s.operations[operation_key(subscription, operation.operation_id)] = stored_operation(operation)
            self._s.put_audit(audit)
            if reservation is not None:
                node_items.reserve(self._s, reservation)

    def update(self, before: W, after: W, audit: AuditEvent, *, expect: Expect, effects: Effects = Effects()) -> None:
        """The transition ``before`` → ``after`` (the fields that differ) if ``expect`` holds, with its audit event
        and ``effects`` — all or nothing (``WorkloadTable.update``)."""
        with self._s.lock:
            if effects.reservation is not None:  # the workload records the quotas its reservation counts in
                after = replace(after, quota=effects.reservation.quota)
            written = changes(before, after)
            check_size(*([after.document] if "document" in written else []), audit_size(audit), *_effect_sizes(effects))
            refuse_repeated_items(after.key, effects)
            stored = self._stored(after.key)
            if (
                stored is None
                or not expect_holds(stored, expect)
                or self._s.audit_taken(audit)
                or effects_refused(self._s, after.key, effects)
            ):
                raise WorkloadChanged()
            for reservation in effects.reservations:  # all or nothing: the first refusal, before any write
                refusal = node_items.reservation_refusal(self._s, reservation)
                if refusal is not None:
                    raise refusal
            for name, value in written.items():
                setattr(stored, name, copy.deepcopy(value))
            self._s.put_audit(audit)
            apply_effects(self._s, after.key, effects)

    def remove(self, workload: W, audit: AuditEvent, *, expect: Expect, effects: Effects = Effects()) -> None:
        """Delete the workload if ``expect`` holds, with its audit event and ``effects``; any refusal is
        ``WorkloadChanged`` (``WorkloadTable.remove``)."""
        with self._s.lock:
            check_size(audit_size(audit), *_effect_sizes(effects))
            refuse_repeated_items(workload.key, effects)
            stored = self._stored(workload.key)
            if (
                not expect_holds(stored, expect)
                or self._s.audit_taken(audit)
                or effects_refused(self._s, workload.key, effects)
                or any(node_items.reservation_refusal(self._s, r) is not None for r in effects.reservations)
            ):
                raise WorkloadChanged()
            del self._s.workloads[fold(workload.key)]
            self._s.put_audit(audit)
            apply_effects(self._s, workload.key, effects)

    def note(self, before: W, after: W, *, expect: Expect) -> bool:
        """Bookkeeping written alone, no audit (``WorkloadTable.note``): False when ``expect`` no longer holds (then
        nothing is written; with nothing to write, the answer is whether it holds)."""
        with self._s.lock:
            written = changes(before, after)
            stored = self._stored(after.key)
            if stored is None or not expect_holds(stored, expect):
                return False
            for name, value in written.items():
                setattr(stored, name, copy.deepcopy(value))
            return True


def _effect_sizes(effects: Effects) -> list[Any]:
    """The items of ``effects`` whose size :func:`check_size` checks (operation bodies)."""
    return [o.body for o in (effects.operation, *effects.more_operations, effects.new_operation) if o is not None]
