"""A reconciler run reads the lease index a bounded page at a time and goes on page after page until no expired
lease is left — a backlog of many is reached in one run, not one batch a run — and stops when its invocation's
time runs short (``left``: the rest waits for the next run)."""

from __future__ import annotations

from typing import Any

from itl_accelerator.domain.records import ResourceKey
from itl_accelerator.domain.states import LeaseKind
from itl_accelerator.repositories.protocols import Page
from itl_accelerator.services.schedules.reconciler import Reconciler
from itl_accelerator.settings import Settings


class _Leases:
    """A lease index with ``backlog`` expired leases of a type the reconciler skips, paged by an offset token."""

    def __init__(self, backlog: int):
        self.backlog = backlog
        self.asked: list[int] = []

    def expired(
        self, now: float, limit: int, kind: LeaseKind = LeaseKind.LEASE, token: str | None = None
    ) -> Page[ResourceKey]:
        self.asked.append(limit)
        start = int(token or 0)
        end = min(start + limit, self.backlog)
        keys = [ResourceKey("s", "rg", "sparkOtherThings", (f"n{i}",)) for i in range(start, end)]
        return Page(keys, str(end) if end < self.backlog else None)


class _Kernel:
    def __init__(self, leases: _Leases):
        self.repositories = type("Repositories", (), {"leases": leases})()


def _reconciler(leases: _Leases) -> Reconciler:
    nothing: Any = None  # the steps, placement and state machines: never reached for a skipped type
    kernel: Any = _Kernel(leases)
    return Reconciler(kernel, nothing, nothing, nothing, nothing, nothing, Settings(reconcile_batch_size=7))


def test_a_run_reads_the_whole_backlog_a_bounded_page_at_a_time():
    leases = _Leases(backlog=1_000)
    report = _reconciler(leases).run(now=0)
    assert report.examined == 1_000 and report.left == 0
    assert set(leases.asked) == {7} and len(leases.asked) == 143


def test_a_run_stops_when_its_time_runs_short():
    leases = _Leases(backlog=50)
    left = iter([60.0, 30.0, 9.0, 60.0])
    report = _reconciler(leases).run(now=0, limit=50, time_left=lambda: next(left))
    assert report.examined == 2 and report.left == 1
