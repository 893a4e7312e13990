"""Priority preemption: which running jobs a higher-priority job that waits may stop, and on which node (issue 32,
part 2). Pure; services/common/placement.py ``Placement.preempt_for`` reads and writes.

The rules (Kueue's "preemption within a ClusterQueue" and Slurm's ``PreemptType=preempt/qos`` are the models):

- **Within one subscription only.** A job's ``priority`` (0 to 9) is set by its own consumer; it orders the work of one
  subscription, whose owner shares its capacity among its users. Across subscriptions a self-declared priority
  would let one tenant stop another's paid work, so a job never preempts another subscription's job (a tenant that
  needs guaranteed capacity gets a quota, docs/API_REFERENCE.md "Quotas").
- **Only what may be preempted.** A job is a candidate when it said ``preemptible: true`` (the default is false:
  nothing a consumer submits is stopped for someone else unless it agreed), holds capacity (``Scheduled`` or
  ``Running``) and has a strictly lower priority than the waiting job.
- **The least taken.** Candidates are read lowest priority first, then most recently submitted (the least work
  lost); on each node the waiting job could use (its kind, model, location, price ceiling and budget currency,
  ``Available``), victims are taken in that order until the node has room; the node needing the fewest victims
  wins (then the lowest highest priority among them, then the fewest devices stopped).
- **Never across a wall.** No preemption for a job its budgets refuse, nor on a node where a quota would still be
  full once the victims let go: preemption frees nodes, never spend or quota the waiting job may not have.
- **Bounded.** One Query of at most :data:`MAX_CANDIDATES` candidates (a sparse index of the subscription's
  preemptible jobs of the kind, holding each whole: a stale one fails its conditional write and is passed over) and
  at most :data:`MAX_NODES` nodes with their quotas — whatever the fleet's size (benchmarks/placement.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from itl_accelerator.domain.records import ResourceKey

#: Preemption candidates read per attempt (one page of the index, lowest priority first).
MAX_CANDIDATES = 50
#: Nodes of those candidates looked at per attempt.
MAX_NODES = 5


@dataclass(frozen=True)
class Victim:
    """A running job that may be preempted: its key, the node it holds, its devices, GiB and priority."""

    key: ResourceKey
    node: ResourceKey
    devices: int
    memory_gb: int
    priority: int


@dataclass(frozen=True)
class Room:
    """A node the waiting job could use: its free devices and GiB now, and for each quota it counts in that would
    not let the job in now, the devices still missing there (a victim's devices count in the same quotas: its
    node's)."""

    node: ResourceKey
    free_devices: int
    free_memory_gb: int
    quota_shortfall: int = 0


def choose(
    devices: int, memory_gb: int, rooms: Iterable[Room], victims: list[Victim]
) -> tuple[Room, list[Victim]] | None:
    """The node and the victims (in the order given: lowest priority first) whose stopping gives a job of ``devices``
    devices and ``memory_gb`` GiB room there, within its quotas; None when no node of ``rooms`` can be freed
    enough. The fewest victims first, then the lowest of their highest priorities, then the fewest devices."""
    best: tuple[tuple[int, int, int], Room, list[Victim]] | None = None
    for room in rooms:
        taken: list[Victim] = []
        free_devices, free_memory, quota_freed = room.free_devices, room.free_memory_gb, 0
        for victim in victims:
            if free_devices >= devices and free_memory >= memory_gb and quota_freed >= room.quota_shortfall:
                break
            if victim.node != room.node:
                continue
            taken.append(victim)
            free_devices += victim.devices
            free_memory += victim.memory_gb
            quota_freed += victim.devices
        if not taken or free_devices < devices or free_memory < memory_gb or quota_freed < room.quota_shortfall:
            continue
        score = (len(taken), max(v.priority for v in taken), sum(v.devices for v in taken))
        if best is None or score < best[0]:
            best = (score, room, taken)
    return (best[1], best[2]) if best is not None else None
