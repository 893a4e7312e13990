"""Capacity reservations (issue 44): devices of one kind booked on nodes for a future window, as stored.

A reservation books ``devices`` devices (and ``memory_gb`` GiB) on each of its ``nodes`` (one, or a gang's several
of one group) over ``[start, end)`` (epoch seconds, whole UTC hours), at the price per device-hour of its nodes when
it was booked (``terms``, locked: AWS EC2 Capacity Blocks' upfront price, Slurm's reservations have none). Its
bookings live on the node items (domain/records.py ``Booking``), written in the transaction that writes it; its
window is billed whole, used or not, through one meter per node that starts at its start and ends at its end
(docs/BILLING.md, "Capacity reservations").

States (derived, never stored): ``Scheduled`` before its window, ``Active`` in it, ``Expired`` after it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Any

from itl_accelerator.arm import normalize_location
from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.accelerators import accelerator_key, model_key, vendor_key
from itl_accelerator.domain.calendar import Busy, Timeline
from itl_accelerator.domain.pricing import PriceCeiling
from itl_accelerator.domain.records import Booking, Hold, Node, ResourceKey, holder_id, per_device_memory_fits
from itl_accelerator.domain.scheduling import fit_key

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


# ----------------------------------------------------------------------------------------------- booking decision
@dataclass(frozen=True)
class Ask:
    """What a booking asks for: ``devices``/``memory_gb`` on each of ``node_count`` nodes (a gang's: of one group —
    one model, location, price and platform, as domain/scheduling.py ``gang_groups`` places a gang), of ``kind`` (and
    ``vendor``, ``model`` when said: keys as domain/accelerators.py compares them) in ``location``, over
    ``[start, end)`` (epoch seconds), billed within ``ceiling`` (None: any price)."""

    kind: str
    vendor: str | None
    model: str
    location: str
    devices: int
    memory_gb: int
    node_count: int
    start: int
    end: int
    ceiling: PriceCeiling | None = None


@dataclass(frozen=True)
class Blocker:
    """A node that could hold the ask but is not free for all of its window, and what takes it there: the holds
    (``holders``: workloads and when they end, 0 open-ended) and the other reservations' windows (``bookings``)."""

    node: Node
    holders: tuple[Hold, ...]
    bookings: tuple[Booking, ...]


@dataclass(frozen=True)
class Booked:
    """The decision to book: the nodes, best fit first."""

    nodes: tuple[Node, ...]


@dataclass(frozen=True)
class Unbookable:
    """No group of nodes is free for the whole window: ``blockers`` (the matching nodes and what takes them), and
    ``matching`` (how many nodes could hold the ask at all; 0: none of this kind, model, location, size or price)."""

    blockers: tuple[Blocker, ...]
    matching: int


def suits(ask: Ask, node: Node) -> bool:
    """Whether ``node`` could ever hold a part of ``ask``: it takes work, its kind, vendor, model and location, its
    memory per device, and its pricing within the ceiling (domain/scheduling.py ``matches``' rules)."""
    return (
        node.placeable
        and node.kind.lower() == ask.kind.lower()
        and (ask.vendor is None or vendor_key(node.accelerator.vendor) == vendor_key(ask.vendor))
        and (not model_key(ask.model) or node.accelerator.key == accelerator_key(ask.kind, ask.model))
        and (not ask.location or normalize_location(node.location) == normalize_location(ask.location))
        and ask.devices <= node.device_total
        and per_device_memory_fits(node.device_total, node.memory_gb_total, ask.devices, ask.memory_gb)
        and (ask.ceiling is None or ask.ceiling.allows(node.terms))
    )


def window_calendar(node: Node, now: float, *, besides: str = "") -> Timeline:
    """``node``'s calendar for booking (domain/calendar.py ``Timeline``): each hold until its end as known now (an
    overdue one ends now; open-ended ones for good) — but a job's hold inside a reservation's booking, which the booking
    already counts — and every booking but ``besides``'s over its window."""
    busy = [
        Busy(h.devices, h.memory_gb, now, max(float(h.until), now) if h.until else math.inf)
        for h in node.holds
        if not h.reservation
    ]
    if node.unaccounted is not None:
        busy.append(Busy(node.unaccounted.devices, node.unaccounted.memory_gb, now, math.inf))
    busy += [Busy(b.devices, b.memory_gb, b.start, b.end) for b in node.bookings if b.reservation != besides]
    return Timeline(node, tuple(busy))


def decide_booking(ask: Ask, nodes: Iterable[Node], now: float) -> Booked | Unbookable:
    """Where ``ask`` is booked among ``nodes`` (the placement index's nodes of its kind, model and location, whatever
    their room now): on ``node_count`` nodes of one group each free for all of the window (devices and GiB), best
    fit — the fewest devices left free at the window's start — first, the cheaper group first; else why not."""
    suitable = [n for n in nodes if suits(ask, n)]
    fitting, blockers = [], []
    for node in suitable:
        calendar = window_calendar(node, now)
        if calendar.fits(ask.devices, ask.memory_gb, ask.start, ask.end):
            free_devices, free_memory = calendar.free_at(ask.start)
            fitting.append((fit_key(free_devices, free_memory, ask.devices, ask.memory_gb), node))
        else:
            blockers.append(_blocker(node, ask, now))
    groups: dict[tuple[Any, ...], list[Node]] = {}
    for _, node in sorted(fitting, key=lambda f: (f[0], f[1].key.resource_group.lower(), f[1].key.name.lower())):
        groups.setdefault(group_key(node), []).append(node)
    ready = [g for g in groups.values() if len(g) >= ask.node_count]
    if ready:
        cheapest = min(ready, key=lambda g: g[0].terms.price_per_gpu_hour)
        return Booked(tuple(cheapest[: ask.node_count]))
    return Unbookable(tuple(blockers), len(suitable))


def group_key(node: Node) -> tuple[Any, ...]:
    """The nodes a gang may span share this (domain/scheduling.py ``gang_groups``): model, location, price, platform."""
    where = (node.backend.type, node.backend.cluster, node.backend.partition)
    return (node.accelerator.key, normalize_location(node.location), node.terms, *where)


def _blocker(node: Node, ask: Ask, now: float) -> Blocker:
    holders = tuple(h for h in node.holds if not h.reservation and (not h.until or max(h.until, now) > ask.start))
    unaccounted = (node.unaccounted,) if node.unaccounted is not None else ()
    return Blocker(node, (*holders, *unaccounted), tuple(b for b in node.bookings if b.overlaps(ask.start, ask.end)))
