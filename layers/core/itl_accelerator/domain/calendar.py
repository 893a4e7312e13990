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

from itl_accelerator.domain.records import Job, Node, ResourceKey, StartEstimate
from itl_accelerator.domain.scheduling import Within, fit_key, gang_groups, matches

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
        """The node's calendar from ``now`` on (module docstring: a hold past its end ends now)."""
        held = list(node.holds)
        if node.unaccounted is not None:
            held.append(node.unaccounted)
        busy = tuple(Busy(h.devices, h.memory_gb, now, max(float(h.until), now) if h.until else math.inf) for h in held)
        return cls(node, busy)

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


class Unknown(StrEnum):
    """Why a waiting job's start cannot be known."""

    OPEN_ENDED = (
        "work without a maximum duration (an instance, or a job without maxDurationMinutes) holds every node that "
        "could take it"
    )
    NO_NODES = "no node it may use now was found (all cordoned, drained, above its price ceiling, or none read)"


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
    timelines: dict[ResourceKey, Timeline] = {}
    estimates = []
    for position, (job, terms) in enumerate(waiting, 1):
        usable = []
        for node in nodes.get(job.key, ()):
            if node.key not in timelines:
                timelines[node.key] = Timeline.of(node, now)
            if matches(job, node, terms):
                usable.append(timelines[node.key])
        if not usable:
            estimates.append(Estimate(job.key, position, None, why=Unknown.NO_NODES))
            continue
        duration = float(job.max_duration_seconds) if job.max_duration_seconds else math.inf
        found = _gang(job, usable, terms, duration, now) if job.gang_size > 1 else _single(job, usable, duration, now)
        if found is None:
            estimates.append(Estimate(job.key, position, None, why=Unknown.OPEN_ENDED))
            continue
        start, chosen = found
        for timeline in chosen:  # the jobs behind it see it there
            taken = timeline.taking(Busy(job.devices, job.memory_gb, start, start + duration))
            timelines[timeline.node.key] = taken
        estimates.append(Estimate(job.key, position, start, tuple(t.node.key for t in chosen)))
    return estimates


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
