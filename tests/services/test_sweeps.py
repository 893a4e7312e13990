"""The periodic sweeps at fleet scale (issue 27): each run of the job tracker and the reconciler reaches every
workload due, page after page, whatever partition of the lease index it sits in — a fixed batch per run and
partition-ordered reads once left part of the fleet unchecked forever — and reads the DGX Platform in batches."""

from __future__ import annotations

from tests.services.conftest import Env, make_settings


def fleet(pages: int = 8) -> Env:
    """A world whose sweeps read the lease index ``pages`` workloads at a time, with ten 8-GPU nodes."""
    env = Env(make_settings(job_track_batch_size=pages, reconcile_batch_size=pages, usage_sync_batch_size=pages))
    for n in range(10):
        env.add_node(f"dgx-{n}")
    return env


def test_one_tracker_run_checks_every_running_job_due_in_batches():
    env = fleet()
    for n in range(60):
        env.submit(f"j{n}", 1, 80)
    env.run()
    assert sum(env.status(f"j{n}") == "Running" for n in range(60)) == 60
    for n in range(0, 60, 3):
        env.finish_on_platform(f"j{n}")
    env.clock.advance(3600)  # every check is due
    env.dgx.calls.clear()
    counts = env.track()
    assert counts["checked"] == 60 and counts["ended"] == 20 and counts["pages"] > 60 // 8
    # a batch read per page, not a GET per job
    assert env.dgx.called("get_job") == []
    assert sum(len(ids) for ids in env.dgx.called("get_jobs")) == 60
    assert sum(env.status(f"j{n}") == "Succeeded" for n in range(60)) == 20


def test_one_tracker_run_watches_every_live_instance_due():
    env = fleet()
    for n in range(30):
        env.provision(f"i{n}", node=f"dgx-{n % 10}", devices=1, memory_gb=80)
    env.run()
    env.clock.advance(3600)
    env.dgx.calls.clear()
    lost = [str(env.instance(f"i{n}", f"dgx-{n % 10}").dgx_id) for n in (4, 17, 29)]
    for dgx_id in lost:
        env.dgx.instances.pop(dgx_id)  # the platform lost three of them
    counts = env.track()
    assert counts["instances_lost"] == 3 and counts["errors"] == 0
    assert sum(len(ids) for ids in env.dgx.called("get_instances")) == 30 and env.dgx.called("get_instance") == []


def test_one_reconciler_run_reaches_every_expired_lease():
    env = fleet()
    env.sfn.fail_next_start(times=40)  # Step Functions throttled every start: each is deferred to the reconciler
    for n in range(40):
        env.submit(f"j{n}", 1, 80)
    env.clock.advance(env.settings.workflow_start_grace_seconds + 1)
    report = env.w.reconciler.run()
    assert report.examined == 40 and report.restarted == 40 and report.left == 0


def test_one_usage_sync_run_meters_every_allocation_due():
    """Issue 27: a run took at most ``USAGE_SYNC_BATCH_SIZE`` meters and stopped: past that many, the lag grew
    without bound and nothing said so. Now it reads page after page until none is due."""
    env = fleet()
    for n in range(30):
        env.submit(f"j{n}", 1, 80)
        env.provision(f"i{n}", node=f"dgx-{n % 10}", devices=1, memory_gb=80)
    env.run()
    env.clock.advance(3600)
    report = env.w.usage_sync.run()
    assert report.meters == 60 and report.errors == 0 and not report.stopped_early
    assert report.pages > 60 // 8
    assert env.w.usage_sync.lag_seconds(env.clock()) == 0
    assert env.w.usage_sync.run().meters == 0  # all synced: none due again until half a period on


def test_a_usage_sync_that_runs_out_of_time_says_so_and_the_next_run_goes_on():
    env = fleet()
    for n in range(20):
        env.submit(f"j{n}", 1, 80)
    env.run()
    env.clock.advance(3600)
    budget = iter([60.0] * 5 + [1.0] * 100)
    first = env.w.usage_sync.run(time_left=lambda: next(budget))
    assert first.meters == 5 and first.stopped_early
    assert env.w.usage_sync.lag_seconds(env.clock()) > 0  # what the alarm watches
    second = env.w.usage_sync.run()
    assert second.meters == 15 and not second.stopped_early
