"""A reconciler run is bounded whatever the backlog: it asks the lease index for at most its batch, and stops when
its invocation's time runs short (the rest waits for the next run)."""

from __future__ import annotations

from typing import Any

from itl_accelerator.domain.records import ResourceKey
from itl_accelerator.domain.states import LeaseKind
from itl_accelerator.services.schedules.reconciler import Reconciler
from itl_accelerator.settings import Settings


class _Leases:
    """A lease index with ``backlog`` expired leases of a type the reconciler skips."""

    def __init__(self, backlog: int):
        self.backlog = backlog
        self.asked: list[int] = []

    def expired(self, now: float, limit: int, kind: LeaseKind = LeaseKind.LEASE) -> list[ResourceKey]:
        self.asked.append(limit)
        return [ResourceKey("s", "rg", "sparkOtherThings", (f"n{i}",)) for i in range(min(limit, self.backlog))]


class _Kernel:
    def __init__(self, leases: _Leases):
        self.repositories = type("Repositories", (), {"leases": leases})()


def _reconciler(leases: _Leases) -> Reconciler:
    nothing: Any = None  # the steps, placement and state machines: never reached for a skipped type
    kernel: Any = _Kernel(leases)
    return Reconciler(kernel, nothing, nothing, nothing, nothing, Settings(reconcile_batch_size=7))


def test_a_run_takes_at_most_its_batch_from_a_large_backlog():
    leases = _Leases(backlog=10_000)
    report = _reconciler(leases).run(now=0)
    assert leases.asked == [7]
    assert report.examined == 7


def test_a_run_stops_when_its_time_runs_short():
    leases = _Leases(backlog=50)
    left = iter([60.0, 30.0, 9.0, 60.0])
    report = _reconciler(leases).run(now=0, limit=50, time_left=lambda: next(left))
    assert report.examined == 2
