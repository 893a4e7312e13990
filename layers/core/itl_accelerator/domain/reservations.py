"""Capacity reservations (issue 44): devices of one kind booked on nodes for a future window, as stored.

A reservation books ``devices`` devices (and ``memory_gb`` GiB) on each of its ``nodes`` (one, or a gang's several
of one group) over ``[start, end)`` (epoch seconds, whole UTC hours), at the price per device-hour of its nodes when
it was booked (``terms``, locked: AWS EC2 Capacity Blocks' upfront price, Slurm's reservations have none). Its
bookings live on the node items (domain/records.py ``Booking``), written in the transaction that writes it; its
window is billed whole, used or not, through one meter per node that starts at its start and ends at its end
(docs/BILLING.md, "Capacity reservations"). Where a booking goes is domain/booking.py's decision.

States (derived, never stored): ``Scheduled`` before its window, ``Active`` in it, ``Expired`` after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.records import Booking, Node, ResourceKey, holder_id

#: A reservation's window is on whole hours (seconds).
HOUR = 3600


class ReservationState(StrEnum):
    """Where a reservation's window stands (EC2 Capacity Blocks' ``scheduled``/``active``/``expired``)."""

    SCHEDULED = "Scheduled"
    ACTIVE = "Active"
    EXPIRED = "Expired"


@dataclass(frozen=True)
class CapacityReservation:
    """A capacity reservation as stored: its ARM ``document`` (without ``etag``), ``etag``, what it books —
    ``devices``/``memory_gb`` per node of ``kind``/``model`` (model "" any) in ``location`` on ``nodes`` — its window
    ``[start, end)`` (epoch seconds), the locked ``terms`` and who booked it (``booked_by``, a token subject)."""

    key: ResourceKey
    document: dict[str, Any]
    etag: str
    kind: str
    model: str
    location: str
    devices: int
    memory_gb: int
    start: int
    end: int
    nodes: tuple[ResourceKey, ...]
    terms: BillingTerms
    booked_by: str
    #: its meters' common id: node ``i`` of :attr:`nodes` is billed by meter ``{allocation_id}-{i}``
    allocation_id: str = ""
    #: the owners of its nodes when booked (each sees the reservation: what they sold)
    suppliers: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        """How node calendars name it (domain/records.py ``holder_id``: ``capacityReservations/{rg}/{name}``)."""
        return holder_id(self.key)

    @property
    def arm_id(self) -> str:
        return str(self.document["id"])

    @property
    def booking(self) -> Booking:
        """What it books on each of its nodes."""
        return Booking(self.ref, self.devices, self.memory_gb, self.start, self.end)

    @property
    def meter_ids(self) -> tuple[str, ...]:
        """Its meters' allocation ids, one per node."""
        return tuple(f"{self.allocation_id}-{i}" for i in range(len(self.nodes)))

    @property
    def hours(self) -> int:
        """Whole hours of its window."""
        return (self.end - self.start) // HOUR

    @property
    def device_hours(self) -> int:
        """Device-hours it books in all (every node's)."""
        return self.devices * len(self.nodes) * self.hours

    @property
    def total_cost(self) -> Decimal:
        """What its whole window costs at its locked price (billed used or not)."""
        return self.terms.price_per_gpu_hour * self.device_hours

    def state(self, now: float) -> ReservationState:
        if now < self.start:
            return ReservationState.SCHEDULED
        return ReservationState.ACTIVE if now < self.end else ReservationState.EXPIRED

    def in_window(self, start: float, end: float) -> bool:
        """Whether ``[start, end)`` lies inside its window."""
        return self.start <= start and end <= self.end


def booked_until(node: Node, reservation: CapacityReservation, expired_before: int) -> int:
    """``node``'s end of its last booking once ``reservation`` is booked on it and its bookings that ended before
    ``expired_before`` are removed (the booking calendar index's sort key: repositories/dynamodb/nodes.py
    ``BOOKED_UNTIL``)."""
    kept = [b.end for b in node.bookings if b.end >= expired_before and b.reservation != reservation.ref]
    return max([*kept, reservation.end])
