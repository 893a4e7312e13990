"""Nodes in memory: the DynamoDB implementation's ``SparkNode`` items (repositories/dynamodb/nodes.py) — the node,
its capacity counters, its fleet-shape count and its place in the placement index while it is ``Available`` — and
the reservations and releases workload transitions make on them (repositories/dynamodb/workloads.py)."""

from __future__ import annotations

import copy
from typing import Any

from itl_accelerator.domain.accelerators import model_of_key, vendor_key
from itl_accelerator.domain.pricing import roughly_within
from itl_accelerator.domain.quotas import QuotaScope
from itl_accelerator.domain.records import Demand, FleetShape, Node, Release, Reservation, ResourceKey, breaks_bookings
from itl_accelerator.domain.states import Availability
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.errors import (
    CapacityInUse,
    CapacityShortfall,
    EtagMismatch,
    ItemExists,
    ItemMissing,
    NodeChanged,
    NodeMissing,
    NodeUnavailable,
    QuotaExceeded,
    StoreError,
    SubscriptionNotWritable,
)
from itl_accelerator.repositories.memory import paging
from itl_accelerator.repositories.memory.state import (
    MemoryState,
    StoredNode,
    StoredQuota,
    StoredShape,
    audit_size,
    check_size,
    fold,
    sort_key,
)
from itl_accelerator.repositories.protocols import Page, Scope

TYPE = "sparkNodes"
#: Candidates the placement index returns per page, and the most pages read for one demand (as the DynamoDB
#: implementation: ``CANDIDATE_PAGE``, ``MAX_CANDIDATE_PAGES``).
CANDIDATE_PAGE = 25
MAX_CANDIDATE_PAGES = 2


def _available(node: Node) -> int:
    """1 when ``node`` is ``Available`` (it counts in its shape's available nodes), else 0."""
    return int(node.availability == Availability.AVAILABLE)


def stored_node(node: Node) -> Node:
    """A copy of ``node`` as the store keeps it."""
    return Node(
        key=node.key,
        document=copy.deepcopy(node.document),
        etag=node.etag,
        device_total=int(node.device_total),
        memory_gb_total=int(node.memory_gb_total),
        devices_allocated=int(node.devices_allocated),
        memory_gb_allocated=int(node.memory_gb_allocated),
        child_count=int(node.child_count),
        former_owners=tuple(node.former_owners),
        counted_shape=node.counted_shape,
        backend_status=copy.deepcopy(node.backend_status),
        holds=tuple(node.holds),
        bookings=tuple(node.bookings),
        calendar_revision=int(node.calendar_revision),
        hold_revision=int(node.hold_revision),
        booked_until=node.booked_until,
    )


def present(node: Node, key: ResourceKey) -> Node:
    """A copy of a stored node under ``key`` (a point read answers with the key it was asked; a list with the
    resource group and names as stored)."""
    found = stored_node(node)
    found.key = key
    return found


def listed_key(node: Node, subscription_id: str) -> ResourceKey:
    return ResourceKey(subscription_id, node.key.resource_group, TYPE, node.key.names)


# ------------------------------------------------------------------------------------- reservations, releases
def reservation_refusal(state: MemoryState, r: Reservation) -> StoreError | None:
    """Why ``r`` cannot be taken now, or None — the DynamoDB implementation's conditional ``ADD`` on the node item
    (``_node_reserve``) and the error ``_raise_typed`` makes of its failure: the node exists, is ``Available``, is at
    the etag and totals read, holds ``allocated + requested <= total``, and — for a job's reservation only — is not
    drained for another job. The first failing of: ``NodeMissing``, ``NodeUnavailable``, ``NodeChanged``, and
    ``CapacityShortfall`` (free figures as stored) for everything else."""
    stored = state.nodes.get(fold(r.node))
    if stored is None:
        return NodeMissing()
    node = stored.node
    fits = (
        node.availability == Availability.AVAILABLE
        and node.device_total == r.device_total
        and node.memory_gb_total == r.memory_gb_total
        and node.devices_allocated <= r.device_total - r.devices
        and node.memory_gb_allocated <= r.memory_gb_total - r.memory_gb
        and node.etag == r.etag
        and node.calendar_revision == r.calendar_revision
        and (r.hold_revision is None or node.hold_revision == r.hold_revision)
        and (r.for_job is None or stored.draining_for in (None, fold(r.for_job)))
    )
    if fits:
        return quota_refusal(state, r)
    if node.availability != Availability.AVAILABLE:
        return NodeUnavailable(str(node.availability))
    if (
        node.etag != r.etag
        or node.calendar_revision != r.calendar_revision
        or (r.hold_revision is not None and node.hold_revision != r.hold_revision)
    ):
        return NodeChanged()
    return CapacityShortfall(node.free_devices, node.free_memory_gb)


def quota_refusal(state: MemoryState, r: Reservation) -> QuotaExceeded | None:
    """The first quota of ``r`` it would take past its limit (the table's ``headroom >= gpus`` condition on each
    quota counter, repositories/dynamodb/quotas.py), or None."""
    if r.quota is None or not r.quota_charge:
        return None
    for name in r.quota.names:
        stored = state.quotas.get(quota_key(r.node.subscription_id, r.quota.location, name))
        if stored is not None and stored.limit is not None and stored.limit - stored.used < r.quota_charge:
            return QuotaExceeded(stored.location, stored.name, stored.limit, stored.used)
    return None


def quota_key(subscription_id: str, location: str, name: str) -> tuple[str, str, str]:
    return (subscription_id.lower(), location.lower(), name.lower())


def count_quota(state: MemoryState, subscription_id: str, scope: QuotaScope, devices: int) -> None:
    """Add ``devices`` (negative: give back) to every quota of ``scope``, creating its counter at its first use."""
    for name in scope.names:
        key = quota_key(subscription_id, scope.location, name)
        stored = state.quotas.setdefault(key, StoredQuota(scope.location, name))
        stored.used += devices


def reserve(state: MemoryState, r: Reservation) -> None:
    """Take ``r`` (checked by :func:`reservation_refusal`)."""
    node = state.nodes[fold(r.node)].node
    node.devices_allocated += r.devices
    node.memory_gb_allocated += r.memory_gb
    node.child_count += r.child
    node.hold_revision += 1
    if r.hold is not None:  # the node's calendar: one entry per holder (the table's SET of its attribute)
        node.holds = (*(h for h in node.holds if h.holder != r.hold.holder), r.hold)
    if r.quota is not None and r.quota_charge:
        count_quota(state, r.node.subscription_id, r.quota, r.quota_charge)


def release_refused(state: MemoryState, r: Release) -> bool:
    """Whether ``r`` cannot be written: its node is gone (the release requires ``attribute_exists``)."""
    return fold(r.node) not in state.nodes


def release(state: MemoryState, r: Release) -> None:
    """Give ``r`` back (its node exists: :func:`release_refused`)."""
    node = state.nodes[fold(r.node)].node
    node.devices_allocated -= r.devices
    node.memory_gb_allocated -= r.memory_gb
    node.child_count += r.child
    node.hold_revision += 1
    if r.holder:
        node.holds = tuple(h for h in node.holds if h.holder != r.holder)
    if r.quota is not None and r.quota_charge:
        count_quota(state, r.node.subscription_id, r.quota, -r.quota_charge)


class MemoryNodeRepository:
    """:class:`~itl_accelerator.repositories.protocols.NodeRepository` in memory."""

    def __init__(self, state: MemoryState):
        self._s = state

    # ----------------------------------------------------------------------------------------------- reads
    def get(self, key: ResourceKey) -> Node | None:
        with self._s.lock:
            stored = self._s.nodes.get(fold(key))
            return present(stored.node, key) if stored else None

    def page(self, scope: Scope, limit: int, token: str | None) -> Page[Node]:
        """The nodes of ``scope`` in (resource group, name) order, as ``Lister.page``."""
        with self._s.lock:
            subscription = scope.subscription_id.lower()
            entries = [
                (sort_key(s.node.key), present(s.node, listed_key(s.node, scope.subscription_id)))
                for k, s in self._s.nodes.items()
                if k[0] == subscription and paging.in_scope(scope, s.node.key.resource_group)
            ]
            return paging.page(entries, f"nodes|{paging.scope_id(scope)}", limit, token)

    def fleet_shapes(self, subscription_id: str) -> list[FleetShape]:
        """The shapes counting at least one node, in the order of their items."""
        with self._s.lock:
            subscription = subscription_id.lower()
            found = sorted(
                ((sk, s) for (sub, sk), s in self._s.shapes.items() if sub == subscription and s.nodes > 0),
                key=lambda entry: entry[0],
            )
            return [
                FleetShape(
                    s.shape.gpu_model,
                    s.shape.location,
                    s.shape.device_total,
                    s.shape.memory_gb_total,
                    s.nodes,
                    terms=s.shape.terms,
                    available_nodes=s.available,
                    resource_group=s.shape.resource_group,
                    vendor=s.shape.vendor,
                )
                for _, s in found
            ]

    def candidates(
        self,
        subscription_id: str,
        demand: Demand,
        *,
        for_job: ResourceKey | None = None,
        pages: int | None = None,
        most_free_first: bool = False,
    ) -> list[Node]:
        """The placement index GSI5 as the DynamoDB implementation reads it: ``Available`` nodes of the demand's kind
        with at least
        ``demand.devices`` free, fewest free first (then by key; ``most_free_first``: the other way), read a page of
        :data:`CANDIDATE_PAGE` at a time and filtered by memory, model, location and drain; the first page that yields
        any, at most :data:`MAX_CANDIDATE_PAGES` pages."""
        with self._s.lock:
            subscription = subscription_id.lower()
            job = fold(for_job) if for_job else None
            indexed = sorted(
                (
                    s
                    for k, s in self._s.nodes.items()
                    if k[0] == subscription
                    and s.node.placeable
                    and s.node.kind.lower() == demand.kind.lower()  # the index is partitioned by kind
                    and s.node.free_devices >= demand.devices
                ),
                key=lambda s: (s.node.free_devices, sort_key(s.node.key)),
                reverse=most_free_first,
            )

            def wanted(s: StoredNode) -> bool:
                shape = s.node.shape
                return (
                    s.node.free_memory_gb >= demand.memory_gb
                    and (s.draining_for is None or s.draining_for == job)
                    and (not model_of_key(demand.gpu_model) or shape.gpu_model == demand.gpu_model)
                    and (not demand.vendor or vendor_key(shape.vendor) == vendor_key(demand.vendor))
                    and (not demand.location or shape.location == demand.location)
                    and roughly_within(s.node.terms, demand.within)
                )

            if demand.within is not None and not demand.within:
                return []

            found: list[Node] = []
            for first in range(0, CANDIDATE_PAGE * (pages or MAX_CANDIDATE_PAGES), CANDIDATE_PAGE):
                found += [
                    present(s.node, listed_key(s.node, subscription_id))
                    for s in indexed[first : first + CANDIDATE_PAGE]
                    if wanted(s)
                ]
                if (found and pages is None) or first + CANDIDATE_PAGE >= len(indexed):
                    break
            return found

    def bookable(self, subscription_id: str, demand: Demand, start: int, *, pages: int) -> list[Node]:
        """The booking calendar index GSI6 as the DynamoDB implementation reads it: ``Available`` nodes of the demand's
        kind whose ``booked_until`` is at most ``start``, by it (then by key), :data:`CANDIDATE_PAGE` at a time for
        ``pages`` pages, filtered by model, vendor and location; nodes stored before the index are not in it."""
        with self._s.lock:
            subscription = subscription_id.lower()
            indexed = sorted(
                (
                    s
                    for k, s in self._s.nodes.items()
                    if k[0] == subscription
                    and s.node.placeable
                    and s.node.kind.lower() == demand.kind.lower()
                    and s.node.booked_until is not None
                    and s.node.booked_until <= start
                ),
                key=lambda s: (s.node.booked_until or 0, sort_key(s.node.key)),
            )[: CANDIDATE_PAGE * pages]

            def wanted(s: StoredNode) -> bool:
                shape = s.node.shape
                return (
                    (not model_of_key(demand.gpu_model) or shape.gpu_model == demand.gpu_model)
                    and (not demand.vendor or vendor_key(shape.vendor) == vendor_key(demand.vendor))
                    and (not demand.location or shape.location == demand.location)
                )

            return [present(s.node, listed_key(s.node, subscription_id)) for s in indexed if wanted(s)]

    # ----------------------------------------------------------------------------------------------- writes
    def create(self, node: Node, audit: AuditEvent) -> None:
        """The node (allocations and instance count at 0), its audit event and its shape count — refused with
        ``SubscriptionNotWritable`` first, then ``ItemExists``; an audit event already stored refuses it too
        (a bare ``StoreError``, as the table's transaction does)."""
        with self._s.lock:
            check_size(node.document, audit_size(audit))
            refusing = self._s.refusing_state(node.key.subscription_id)
            if refusing is not None:
                raise SubscriptionNotWritable(refusing)
            if fold(node.key) in self._s.nodes:
                raise ItemExists()
            if self._s.audit_taken(audit):
                raise StoreError("the audit event exists")
            stored = stored_node(node)
            stored.devices_allocated = stored.memory_gb_allocated = stored.child_count = 0
            # a new node's calendar is empty, in the booking calendar index (the table's item has none of the record's)
            stored.holds, stored.bookings, stored.booked_until = (), (), 0
            stored.calendar_revision = stored.hold_revision = 0
            stored.counted_shape = node.shape.sort_key
            self._s.nodes[fold(node.key)] = StoredNode(stored)
            self._s.put_audit(audit)
            self._count_shape(node.key.subscription_id, node.shape, +1, _available(node))

    def replace(self, previous: Node, node: Node, audit: AuditEvent) -> None:
        """What clients write of the node (envelope, totals, owners, key casing) replaced at ``previous.etag``;
        allocations, instance count and drain stay. Refused with ``SubscriptionNotWritable``, then ``ItemMissing``,
        ``EtagMismatch``, ``CapacityInUse`` (allocations above the new totals). The shape count moves from
        ``previous``'s shape to ``node``'s when they differ."""
        with self._s.lock:
            check_size(node.document, audit_size(audit))
            refusing = self._s.refusing_state(node.key.subscription_id)
            if refusing is not None:
                raise SubscriptionNotWritable(refusing)
            stored = self._s.nodes.get(fold(node.key))
            if stored is None:
                raise ItemMissing()
            current = stored.node
            if current.etag != previous.etag or (
                breaks_bookings(previous, node) and current.calendar_revision != previous.calendar_revision
            ):
                raise EtagMismatch()
            if (
                current.devices_allocated > node.device_total
                or current.memory_gb_allocated > node.memory_gb_total
                # work placed there asked for the devices it held: none may hold any when they change
                or (
                    previous.held_identity != node.held_identity
                    and (current.devices_allocated or current.memory_gb_allocated)
                )
            ):
                raise CapacityInUse(current.devices_allocated, current.memory_gb_allocated, current.child_count)
            if self._s.audit_taken(audit):
                raise StoreError("the audit event exists")
            replaced = stored_node(node)
            replaced.counted_shape = node.shape.sort_key
            replaced.backend_status = copy.deepcopy(current.backend_status)  # the sweep's, as the table keeps it
            replaced.devices_allocated = current.devices_allocated
            replaced.memory_gb_allocated = current.memory_gb_allocated
            replaced.child_count = current.child_count
            # its calendar is the store's, not the writer's (the table's UpdateItem sets the node's own attributes)
            replaced.holds, replaced.bookings = current.holds, current.bookings
            replaced.calendar_revision, replaced.hold_revision = current.calendar_revision, current.hold_revision
            replaced.booked_until = current.booked_until if current.booked_until is not None else 0
            stored.node = replaced
            self._s.put_audit(audit)
            sub = node.key.subscription_id
            if previous.counted_shape_key != node.shape.sort_key:  # hardware, place or pricing changed
                self._count_shape(sub, node.shape, +1, _available(node))
                self._count_shape(sub, previous.shape, -1, -_available(previous), sk=previous.counted_shape_key)
            elif _available(node) != _available(previous):
                self._count_shape(sub, node.shape, 0, _available(node) - _available(previous))

    def delete(self, node: Node, audit: AuditEvent) -> None:
        """Remove the node at ``node.etag`` and booking calendar revision holding nothing (any subscription state).
        Refused with ``ItemMissing``, ``EtagMismatch`` (also: a booking written or cancelled since it was read), then
        ``CapacityInUse`` (allocations or instances as stored)."""
        with self._s.lock:
            check_size(audit_size(audit))
            stored = self._s.nodes.get(fold(node.key))
            if stored is None:
                raise ItemMissing()
            current = stored.node
            if current.etag != node.etag or current.calendar_revision != node.calendar_revision:
                raise EtagMismatch()  # changed, or booked or cancelled on since it was read
            if current.devices_allocated or current.memory_gb_allocated or current.child_count:
                raise CapacityInUse(current.devices_allocated, current.memory_gb_allocated, current.child_count)
            if self._s.audit_taken(audit):
                raise StoreError("the audit event exists")
            del self._s.nodes[fold(node.key)]
            self._s.put_audit(audit)
            self._count_shape(node.key.subscription_id, node.shape, -1, -_available(node), sk=current.counted_shape_key)

    def on_cluster(self, cluster: str, node_name: str | None = None) -> list[Node]:
        """As GSI1's partition of the cluster: its nodes of every subscription (or those naming Slurm node
        ``node_name``, any case), by Slurm node name."""
        with self._s.lock:
            found = [
                s.node
                for s in self._s.nodes.values()
                if s.node.backend.is_slurm
                and s.node.backend.cluster.lower() == cluster.lower()
                and (node_name is None or s.node.backend.node_name.lower() == node_name.lower())
            ]
            found.sort(key=lambda n: n.backend.node_name.lower())
            return [stored_node(n) for n in found]

    def set_backend_status(self, node: Node, status: dict[str, Any]) -> bool:
        with self._s.lock:
            stored = self._s.nodes.get(fold(node.key))
            if stored is None or stored.node.etag != node.etag:
                return False
            stored.node.backend_status = copy.deepcopy(status)
            return True

    def set_draining(self, node: ResourceKey, for_job: ResourceKey | None, *, unless_held: bool = False) -> bool:
        with self._s.lock:
            stored = self._s.nodes.get(fold(node))
            if stored is None:  # the node is gone: nothing to drain
                return False
            wanted = fold(for_job) if for_job else None
            if wanted is not None and unless_held and stored.draining_for not in (None, wanted):
                return False  # held for another job
            stored.draining_for = wanted
            return True

    def _count_shape(
        self, subscription_id: str, shape: FleetShape, delta: int, available: int, *, sk: str | None = None
    ) -> None:
        """Count a node in (``+1``) or out of (``-1``) its shape, and ``available`` in or out of its ``Available``
        nodes (the item keeps the shape as last written). ``sk``: the shape item the node is counted in, when another
        than its shape's own (one stored before vendors were counted keeps no vendor), as the table's."""
        sk = sk or shape.sort_key
        key = (subscription_id.lower(), sk)
        entry = self._s.shapes.setdefault(key, StoredShape(shape))
        entry.shape = FleetShape(
            shape.gpu_model,
            shape.location,
            shape.device_total,
            shape.memory_gb_total,
            terms=shape.terms,
            resource_group=shape.resource_group,
            vendor=shape.vendor if sk == shape.sort_key else "",
        )
        entry.nodes += delta
        entry.available += available
