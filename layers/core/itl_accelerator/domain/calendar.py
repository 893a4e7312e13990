"""Capacity in time: when a waiting job will start (issue 44, "When a waiting job will start"). Pure; services/common/
placement.py ``Placement.estimate_starts`` reads the nodes and writes the estimates.

The rules (Slurm's backfill scheduler's expected start times, ``squeue --start``, are the model):

- **A node's calendar.** Each workload on a node holds its devices until its end as known now (domain/records.py
  ``Hold``): a job until its placement plus its ``maxDurationMinutes`` (Slurm: start time plus time limit), an
  instance or a job without a maximum duration open-ended; devices held by work placed before holds were recorded
  count as open-ended. A hold past its end still holds until it is released, and is taken to end now.
- **In queue order.** The subscription's waiting jobs are estimated in the order they are served (priority, then
  submission: services/common/placement.py); each takes, on the node its best fit gives at the earliest time it fits
  for its whole maximum duration, a hold the jobs behind it then see — so a later job may start before an earlier one
  only where it fits around it (backfill), as the dispatcher will place it.
- **The same constraints as placement.** Only nodes the job may use (domain/scheduling.py ``matches``: its kind,
  vendor, model, location, memory per device, price ceiling and budget currencies); a gang needs its size of nodes of
  one group (``gang_groups``) free together for its whole duration.
- **Capacity reservations block their windows** (issue 44). A booking on a node is taken over its window ``[start,
  end)`` for any job not run in its reservation (the work run in it holds devices out of the booking, so it is not
  counted again); so a job that cannot end before a window opens starts after it ends. A job run in a reservation
  sees only its booking — the booking's devices, less what the reservation's other work holds — from the window's
  start (at the earliest), for at most what is left of the window.
- **Unknown is said.** No time when open-ended work holds every node that could take it, when it has no maximum
  duration of its own behind open-ended work it waits on, or when no node it may use was read; the reason says which.
- **Bounded.** The nodes are the placement index's page of the job's kind, model and location whatever their room (one
  ``Query``, as the starvation drain reads): the estimate is over those nodes, whatever the fleet's size.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from itl_accelerator.arm import normalize_location
from itl_accelerator.domain.records import Booking, Job, Node, ResourceKey, StartEstimate
from itl_accelerator.domain.scheduling import Within, fit_key, gang_groups, matches, own_booking, squats

#: An estimate moved by less than this (seconds) is not written again: figures alone do not rewrite a job.
ESTIMATE_TOLERANCE_SECONDS = 60


@dataclass(frozen=True)
class Busy:
    """``devices`` devices and ``memory_gb`` GiB of a node taken from ``start`` to ``end`` (epoch seconds; ``end``
    ``math.inf``: open-ended)."""

    devices: int
    memory_gb: int
    start: float
    end: float


@dataclass(frozen=True)
class Timeline:
    """A node and what is taken on it over time (its holds as of ``now``, and the holds of jobs estimated ahead)."""

    node: Node
    busy: tuple[Busy, ...]

    @classmethod
    def of(cls, node: Node, now: float) -> Timeline:
        """The node's calendar from ``now`` on (module docstring: a hold past its end ends now; each booking taken over
        its window, the holds of the work run in it within it)."""
        booked = {b.reservation for b in node.bookings}
        held = [h for h in node.holds if h.reservation not in booked]
        if node.unaccounted is not None:
            held.append(node.unaccounted)
        busy = tuple(Busy(h.devices, h.memory_gb, now, _hold_end(h.until, now)) for h in held)
        windows = tuple(Busy(b.devices, b.memory_gb, b.start, b.end) for b in node.bookings if b.end > now)
        return cls(node, busy + windows)

    @classmethod
    def within(cls, node: Node, booking: Booking, now: float) -> Timeline:
        """The calendar a job run in ``booking``'s reservation sees on ``node``: a node of the booking's size, taken
        by the holds of the reservation's work (module docstring)."""
        held = [h for h in node.holds if h.reservation == booking.reservation]
        busy = tuple(Busy(h.devices, h.memory_gb, now, _hold_end(h.until, now)) for h in held)
        return cls(replace(node, device_total=booking.devices, memory_gb_total=booking.memory_gb), busy)

    def free_at(self, t: float) -> tuple[int, int]:
        """Free devices and GiB at ``t``."""
        taken = [b for b in self.busy if b.start <= t < b.end]
        return (
            self.node.device_total - sum(b.devices for b in taken),
            self.node.memory_gb_total - sum(b.memory_gb for b in taken),
        )

    def fits(self, devices: int, memory_gb: int, start: float, end: float) -> bool:
        """Whether ``devices`` and ``memory_gb`` are free for all of ``[start, end)``: checked at ``start`` and wherever
        something starts to be taken within it (free only falls there)."""
        points = [start, *(b.start for b in self.busy if start < b.start < end)]
        for t in points:
            free_devices, free_memory = self.free_at(t)
            if free_devices < devices or free_memory < memory_gb:
                return False
        return True

    def ends(self, after: float) -> list[float]:
        """The times after ``after`` at which something taken here ends (when more may fit)."""
        return sorted({b.end for b in self.busy if after < b.end < math.inf})

    def taking(self, busy: Busy) -> Timeline:
        return replace(self, busy=(*self.busy, busy))


def _hold_end(until: int, now: float) -> float:
    """When a hold ends as the calendar sees it: ``until`` (0 open-ended), a past one now."""
    return max(float(until), now) if until else math.inf


class Unknown(StrEnum):
    """Why a waiting job's start cannot be known."""

    OPEN_ENDED = (
        "work without a maximum duration (an instance, or a job without maxDurationMinutes) holds every node that "
        "could take it"
    )
    NO_NODES = "no node it may use now was found (all cordoned, drained, above its price ceiling, or none read)"
    WINDOW_FULL = "the work of its capacity reservation holds the devices it books until its window ends"


@dataclass(frozen=True)
class Estimate:
    """A waiting job's estimate: its ``position`` among its subscription's waiting jobs (1: served first), the
    earliest ``start`` (epoch seconds; None: :class:`Unknown` ``why``) and the ``nodes`` it would start on."""

    job: ResourceKey
    position: int
    start: float | None
    nodes: tuple[ResourceKey, ...] = ()
    why: Unknown | None = None

    def stored(self, now: float) -> StartEstimate:
        """As a job records it (domain/records.py ``StartEstimate``): whole seconds, the reason in words."""
        at = None if self.start is None else math.ceil(self.start)
        return StartEstimate(at, self.position, int(now), str(self.why) if self.why else "")


def earliest(timeline: Timeline, devices: int, memory_gb: int, duration: float, now: float) -> float | None:
    """The earliest time from ``now`` at which ``devices``/``memory_gb`` are free on the node for ``duration`` seconds
    (``math.inf``: for good); None when never (open-ended work in the way)."""
    for start in (now, *timeline.ends(now)):
        if timeline.fits(devices, memory_gb, start, start + duration):
            return start
    return None


def _single(
    job: Job, timelines: Sequence[Timeline], duration: float, now: float
) -> tuple[float, list[Timeline]] | None:
    """The earliest start of a job of one node and the node best fit gives then (fit_key at that time; ties: the
    index's order), in :func:`_gang`'s shape."""
    best: tuple[tuple[float, int, int], Timeline] | None = None
    for timeline in timelines:
        start = earliest(timeline, job.devices, job.memory_gb, duration, now)
        if start is None:
            continue
        rank = (start, *_fit_then(timeline, job, start))
        if best is None or rank < best[0]:
            best = (rank, timeline)
    return None if best is None else (best[0][0], [best[1]])


def _gang(
    job: Job, timelines: Sequence[Timeline], terms: Within, duration: float, now: float
) -> tuple[float, list[Timeline]] | None:
    """The earliest time ``job.gang_size`` nodes of one group (domain/scheduling.py ``gang_groups``) are free
    together for its duration, and those nodes, best fit first."""
    by_key = {t.node.key: t for t in timelines}
    times = sorted({now, *(e for t in timelines for e in t.ends(now))})
    for start in times:
        fitting = [t.node for t in timelines if t.fits(job.devices, job.memory_gb, start, start + duration)]
        for group in gang_groups(job, fitting, terms):
            if len(group) >= job.gang_size:
                chosen = sorted((by_key[n.key] for n in group), key=lambda t: _fit_then(t, job, start))
                return start, chosen[: job.gang_size]
    return None


def estimate_queue(
    waiting: Sequence[tuple[Job, Within]], nodes: Mapping[ResourceKey, Iterable[Node]], now: float
) -> list[Estimate]:
    """The estimates of ``waiting`` (the subscription's waiting jobs in the order they are served, each with the
    terms a node taking it must bill within: domain/scheduling.py ``within``), over ``nodes`` (by job: the nodes read
    for it), at ``now`` (epoch seconds). Module docstring: the rules."""
    timelines: dict[tuple[ResourceKey, str], Timeline] = {}
    estimates = []
    for position, (job, terms) in enumerate(waiting, 1):
        usable, since, deadline = _usable(job, terms, nodes.get(job.key, ()), timelines, now)
        if not usable:
            estimates.append(Estimate(job.key, position, None, why=Unknown.NO_NODES))
            continue
        duration = min(float(job.max_duration_seconds) if job.max_duration_seconds else math.inf, deadline - since)
        found = (
            _gang(job, usable, None if job.reservation else terms, duration, since)
            if job.gang_size > 1
            else _single(job, usable, duration, since)
        )
        if found is None or found[0] >= deadline:
            why = Unknown.OPEN_ENDED if found is None and deadline == math.inf else Unknown.WINDOW_FULL
            estimates.append(Estimate(job.key, position, None, why=why))
            continue
        start, chosen = found
        for timeline in chosen:  # the jobs behind it see it there
            taken = timeline.taking(Busy(job.devices, job.memory_gb, start, min(start + duration, deadline)))
            timelines[(timeline.node.key, job.reservation or ("*" if squats(job) else ""))] = taken
        estimates.append(Estimate(job.key, position, start, tuple(t.node.key for t in chosen)))
    return estimates


def _timeline(node: Node, booking: Booking | None, now: float, squatting: bool) -> Timeline:
    """The calendar a job sees on ``node``: its reservation's ``booking`` (:meth:`Timeline.within`), or the node's — for
    a preemptible job (``squatting``) without the bookings it may borrow (domain/scheduling.py ``squats``)."""
    if booking is not None:
        return Timeline.within(node, booking, now)
    if squatting:
        return Timeline.of(replace(node, bookings=()), now)
    return Timeline.of(node, now)


def _usable(
    job: Job,
    terms: Within,
    nodes: Iterable[Node],
    timelines: dict[tuple[ResourceKey, str], Timeline],
    now: float,
) -> tuple[list[Timeline], float, float]:
    """The timelines ``job`` may start on (made and kept in ``timelines`` as first met), from when, and by when it must
    end (epoch seconds; ``math.inf``: no bound): from ``now``; a job of a capacity reservation only on its booking's
    nodes (whatever their price), from its window's start, ending by its end."""
    usable = []
    since, deadline = now, math.inf
    for node in nodes:
        booking = own_booking(node, job.reservation)
        if job.reservation and (booking is None or booking.end <= now):
            continue
        key = (node.key, job.reservation or ("*" if squats(job) else ""))
        if key not in timelines:
            timelines[key] = _timeline(node, booking, now, squats(job))
        if matches(job, node, None if booking else terms):
            usable.append(timelines[key])
        if booking is not None:
            since, deadline = max(since, float(booking.start)), min(deadline, float(booking.end))
    return usable, since, deadline


def earliest_window(
    nodes: Iterable[Node], devices: int, duration: float, now: float, gang: int = 1
) -> tuple[float, tuple[ResourceKey, ...]] | None:
    """The earliest time from ``now`` (epoch seconds) ``devices`` devices are free for ``duration`` seconds on each of
    ``gang`` nodes of ``nodes`` of one group (a gang's: one model, location, price and platform — domain/scheduling.py
    ``gang_groups``), by each node's calendar (its holds and bookings: :meth:`Timeline.of`), and those nodes (best fit
    at that time first: the fewest free devices left); None when never (open-ended work in the way, or too few nodes). What a capacity offer says
    of a shape and a duration (services/api/offers.py ``earliestStart``)."""
    timelines = [Timeline.of(n, now) for n in nodes if n.device_total >= devices]
    times = sorted({now, *(e for t in timelines for e in t.ends(now))})
    for start in times:
        groups: dict[tuple[object, ...], list[Timeline]] = {}
        for t in timelines:
            if t.fits(devices, 0, start, start + duration):
                n = t.node
                where = (n.accelerator.key, normalize_location(n.location), n.terms, n.backend.type, n.backend.cluster)
                groups.setdefault((*where, n.backend.partition), []).append(t)
        for group in groups.values():
            if len(group) >= gang:
                chosen = sorted(group, key=lambda t: t.free_at(start)[0] - devices)[:gang]
                return start, tuple(t.node.key for t in chosen)
    return None


def _fit_then(timeline: Timeline, job: Job, t: float) -> tuple[int, int]:
    """Best fit's order (domain/scheduling.py ``fit_key``) of the node at ``t``."""
    free_devices, free_memory = timeline.free_at(t)
    return fit_key(free_devices, free_memory, job.devices, job.memory_gb)


def moved(before: StartEstimate | None, after: StartEstimate) -> bool:
    """Whether ``after`` is news against what the job records (``before``): another position or reason, a time
    known or unknown now, or moved by :data:`ESTIMATE_TOLERANCE_SECONDS` or more."""
    if before is None or (before.position, before.why) != (after.position, after.why):
        return True
    if (before.at is None) != (after.at is None):
        return True
    return before.at is not None and after.at is not None and abs(before.at - after.at) >= ESTIMATE_TOLERANCE_SECONDS
