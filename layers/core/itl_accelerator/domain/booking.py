"""Where a capacity reservation is booked (issue 44): a pure decision over the nodes read — the rules of
domain/calendar.py's node calendars (each hold until its end as known now, open-ended work for good) plus every other
reservation's booking over its window; a gang on nodes of one group, as placement groups them. services/api/
reservations.py reads the nodes, asks, and writes the booking conditioned on what it read."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from itl_accelerator.arm import normalize_location
from itl_accelerator.domain.accelerators import accelerator_key, model_key, vendor_key
from itl_accelerator.domain.calendar import Timeline
from itl_accelerator.domain.pricing import PriceCeiling
from itl_accelerator.domain.records import Booking, Hold, Node, per_device_memory_fits
from itl_accelerator.domain.scheduling import fit_key

#: Bookings not yet over a node takes at most: each is an attribute of the node item (about 100 bytes), which
#: DynamoDB bounds at 400 KB and every placement on the node reads and writes — a consumer booking hour after hour
#: of one device must not make a node unplaceable.
MAX_BOOKINGS_PER_NODE = 500


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
    memory_gb: int  # per node; 0: the devices' whole memory (:func:`memory_asked`)
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


def unbooked_holds(node: Node) -> list[Hold]:
    """The holds on ``node`` no booking on it counts: all but those of work run in a reservation whose booking is still
    there (a cancelled or removed reservation's work runs on, stopped only at its window's old end) — the rule of
    domain/calendar.py ``Timeline.of``, which a booking decides over."""
    booked = {b.reservation for b in node.bookings}
    return [h for h in node.holds if h.reservation not in booked]


def memory_asked(ask: Ask, node: Node) -> int:
    """GiB a part of ``ask`` books on ``node``: what it said, or — left out — its devices' whole memory there (a job
    in the reservation may then state its devices' memory and fit)."""
    return ask.memory_gb or ask.devices * node.memory_gb_per_device


def decide_booking(ask: Ask, nodes: Iterable[Node], now: float) -> Booked | Unbookable:
    """Where ``ask`` is booked among ``nodes`` (the nodes read of its kind, model and location, whatever their room
    now: services/api/reservations.py ``_decide``): on ``node_count`` nodes of one group each free for all of the
    window (devices and GiB: domain/calendar.py ``Timeline.of``) and holding fewer than
    :data:`MAX_BOOKINGS_PER_NODE` bookings not yet over, best fit — the fewest devices left free at the window's start —
    first, the cheaper group first; else why not."""
    suitable = [n for n in nodes if suits(ask, n)]
    fitting, blockers = [], []
    for node in suitable:
        calendar = Timeline.of(node, now)
        memory = memory_asked(ask, node)
        live = sum(1 for b in node.bookings if b.end > now)
        if live < MAX_BOOKINGS_PER_NODE and calendar.fits(ask.devices, memory, ask.start, ask.end):
            free_devices, free_memory = calendar.free_at(ask.start)
            fitting.append((fit_key(free_devices, free_memory, ask.devices, memory), node))
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
    holders = tuple(h for h in unbooked_holds(node) if not h.until or max(h.until, now) > ask.start)
    unaccounted = (node.unaccounted,) if node.unaccounted is not None else ()
    return Blocker(node, (*holders, *unaccounted), tuple(b for b in node.bookings if b.overlaps(ask.start, ask.end)))
