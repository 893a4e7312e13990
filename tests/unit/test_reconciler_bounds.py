"""A reconciler run is bounded whatever the backlog: it asks the lease index for at most its batch, and stops when
its invocation's time runs short (the rest waits for the next run)."""

from __future__ import annotations

from itl_accelerator.services.reconciler import Reconciler
from itl_accelerator.settings import Settings
from itl_accelerator.store.keys import ResourceKey


class _Store:
    def __init__(self, backlog: int):
        self.backlog = backlog
        self.asked: list[int] = []

    def expired_leases(self, now: float, limit: int) -> list[ResourceKey]:
        self.asked.append(limit)
        return [ResourceKey("s", "rg", "sparkOtherThings", (f"n{i}",)) for i in range(min(limit, self.backlog))]


class _Kernel:
    def __init__(self, store: _Store):
        self.store = store


def _reconciler(store: _Store) -> Reconciler:
    return Reconciler(_Kernel(store), None, None, Settings(reconcile_batch_size=7))  # type: ignore[arg-type]


def test_a_run_takes_at_most_its_batch_from_a_large_backlog():
    store = _Store(backlog=10_000)
    report = _reconciler(store).run(now=0)
    assert store.asked == [7]
    assert report.examined == 7


def test_a_run_stops_when_its_time_runs_short():
    store = _Store(backlog=50)
    left = iter([60.0, 30.0, 9.0, 60.0])
    report = _reconciler(store).run(now=0, limit=50, time_left=lambda: next(left))
    assert report.examined == 2
