"""Capacity reservations in memory: the DynamoDB implementation's semantics (repositories/dynamodb/reservations.py)
over the shared state — a booking is written with its node bookings and meters or not at all, each node still at the
calendar and hold revisions read."""

from __future__ import annotations

import copy
from dataclasses import replace

from itl_accelerator.domain.records import Node, ResourceKey
from itl_accelerator.domain.reservations import CapacityReservation, booked_until
from itl_accelerator.domain.states import Availability
from itl_accelerator.domain.usage import Meter
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.errors import EtagMismatch, ItemExists, NodeChanged, SubscriptionNotWritable
from itl_accelerator.repositories.memory import paging
from itl_accelerator.repositories.memory.state import MemoryState, fold, sort_key
from itl_accelerator.repositories.memory.workloads import meter_key, start_meter
from itl_accelerator.repositories.protocols import Page, Scope


def _copy(r: CapacityReservation, key: ResourceKey | None = None) -> CapacityReservation:
    return replace(r, key=key or r.key, document=copy.deepcopy(r.document))


class MemoryCapacityReservationRepository:
    """:class:`~itl_accelerator.repositories.protocols.CapacityReservationRepository` in memory."""

    def __init__(self, state: MemoryState):
        self._s = state

    def get(self, key: ResourceKey) -> CapacityReservation | None:
        with self._s.lock:
            stored = self._s.reservations.get(fold(key))
            return None if stored is None else _copy(stored, key)

    def page(self, scope: Scope, limit: int, token: str | None) -> Page[CapacityReservation]:
        with self._s.lock:
            subscription = scope.subscription_id.lower()
            entries = [
                (sort_key(r.key), _copy(r))
                for k, r in self._s.reservations.items()
                if k[0] == subscription and paging.in_scope(scope, r.key.resource_group)
            ]
            return paging.page(entries, f"reservations|{paging.scope_id(scope)}", limit, token)

    def book(
        self,
        reservation: CapacityReservation,
        nodes: list[Node],
        meters: list[Meter],
        audit: AuditEvent,
        *,
        expired_before: int = 0,
    ) -> None:
        with self._s.lock:
            if fold(reservation.key) in self._s.reservations:
                raise ItemExists()
            refusing = self._s.refusing_state(reservation.key.subscription_id)
            if refusing is not None:
                raise SubscriptionNotWritable(refusing)
            for read in nodes:
                stored = self._s.nodes.get(fold(read.key))
                if (
                    stored is None
                    or stored.node.availability != Availability.AVAILABLE
                    or stored.node.etag != read.etag
                    or stored.node.calendar_revision != read.calendar_revision
                    or stored.node.hold_revision != read.hold_revision
                ):
                    raise NodeChanged()
            self._s.reservations[fold(reservation.key)] = _copy(reservation)
            self._s.put_audit(audit)
            for read in nodes:
                node = self._s.nodes[fold(read.key)].node
                others = tuple(b for b in node.bookings if b.reservation != reservation.ref and b.end >= expired_before)
                node.bookings = tuple(sorted((*others, reservation.booking), key=lambda b: (b.start, b.reservation)))
                node.booked_until = booked_until(read, reservation, expired_before)
                node.calendar_revision += 1
            for meter in meters:
                start_meter(self._s, meter)

    def cancel(self, reservation: CapacityReservation, audit: AuditEvent, *, bill_until: int | None) -> None:
        with self._s.lock:
            stored = self._s.reservations.get(fold(reservation.key))
            if stored is None or stored.etag != reservation.etag:
                raise EtagMismatch()
            del self._s.reservations[fold(reservation.key)]
            self._s.put_audit(audit)
            for key in reservation.nodes:
                node_stored = self._s.nodes.get(fold(key))
                if node_stored is None:
                    continue
                node = node_stored.node
                node.bookings = tuple(b for b in node.bookings if b.reservation != reservation.ref)
                node.calendar_revision += 1
            if bill_until is None or bill_until >= reservation.end:
                return
            for meter_id in reservation.meter_ids:
                stored_key = meter_key(reservation.key.subscription_id, meter_id)
                if bill_until <= reservation.start:
                    self._s.meters.pop(stored_key, None)
                elif stored_key in self._s.meters:
                    self._s.meters[stored_key].end = bill_until
