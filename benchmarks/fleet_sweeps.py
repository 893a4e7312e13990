"""The periodic sweeps as the fleet grows (issue 27): does every live instance and running job get checked on time,
and does a run's work grow with the workloads due rather than with the fleet? Prints two tables.

Run from the repository root: ``python -m benchmarks.fleet_sweeps [--fleets 100,1000,3000]`` (``./dev bench`` runs
it too). Everything runs through the services seam of the tests (tests/services: the real services and workflows,
the in-memory twin of the repositories — whose lease index pages as DynamoDB's GSI2 does, ``Limit`` and
``LastEvaluatedKey`` — a fake DGX Platform and a virtual clock), so 10,000 workloads take seconds, not hours.

(a) The job tracker: ``N`` live instances and ``N`` running jobs (1 GPU each on 8-GPU nodes), then the tracker's
    schedule (every 60 s) for 30 virtual minutes. Per fleet: the runs' index pages and DGX Platform calls (mean,
    max), the longest any workload went without a check (goal: ``INSTANCE_WATCH_INTERVAL_SECONDS`` /
    ``JOB_POLL_MAX_INTERVAL_SECONDS`` plus one schedule period, whatever N), the workloads never checked (goal: 0),
    and a run's own time at its busiest (the function's timeout is 120 s).
(b) The reconciler after a Step Functions outage: ``N`` jobs accepted whose ``StartExecution`` failed, all leases
    running out together; runs every 5 virtual minutes until every execution started. Per fleet: runs needed
    (goal: 1), leases examined (goal: N) and the run's time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from tests.services.conftest import Env, make_settings

GPUS_PER_NODE = 8
TRACKER_PERIOD = 60
RECONCILER_PERIOD = 300
VIRTUAL_MINUTES = 30


@dataclass
class Checks:
    """When each DGX id was last read by a batch call, and the longest gap between two reads of one id."""

    last: dict[str, float] = field(default_factory=dict)
    longest: float = 0.0
    calls: int = 0

    def wrap(self, env: Env, name: str) -> None:
        read = getattr(env.dgx, name)

        def counted(ids: list[str]) -> Any:
            self.calls += 1
            now = env.clock()
            for dgx_id in ids:
                if dgx_id in self.last:
                    self.longest = max(self.longest, now - self.last[dgx_id])
                self.last[dgx_id] = now
            return read(ids)

        setattr(env.dgx, name, counted)


def tracker_row(n: int) -> dict[str, Any]:
    env = Env(make_settings(job_poll_max_interval_seconds=300, instance_watch_interval_seconds=300))
    for i in range(2 * n // GPUS_PER_NODE + 1):
        env.add_node(f"dgx-{i}", gpus=GPUS_PER_NODE)
    nodes = 2 * n // GPUS_PER_NODE + 1
    for i in range(n):
        env.provision(f"i{i}", node=f"dgx-{i % nodes}", gpus=1, memory_gb=80)
        env.submit(f"j{i}", 1, 80, maxDurationMinutes=7 * 24 * 60)
    env.run()
    ids = {str(env.job(f"j{i}").dgx_id) for i in range(n)}
    ids |= {str(inst.dgx_id) for i in range(n) if (inst := env.instance(f"i{i}", f"dgx-{i % nodes}"))}
    checks = Checks()
    checks.wrap(env, "get_jobs")
    checks.wrap(env, "get_instances")
    pages: list[int] = []
    calls: list[int] = []
    seconds: list[float] = []
    for _ in range(VIRTUAL_MINUTES * 60 // TRACKER_PERIOD):
        env.clock.advance(TRACKER_PERIOD)
        before = checks.calls
        started = time.perf_counter()
        counts = env.w.job_tracker.run()
        seconds.append(time.perf_counter() - started)
        env.run()
        pages.append(counts["pages"])
        calls.append(checks.calls - before)
    return {
        "workloads": len(ids),
        "pages": (statistics.mean(pages), max(pages)),
        "calls": (statistics.mean(calls), max(calls)),
        "longest": checks.longest,
        "never": len(ids - set(checks.last)),
        "run_s": max(seconds),
    }


def reconciler_row(n: int) -> dict[str, Any]:
    env = Env(make_settings())
    nodes = n // GPUS_PER_NODE + 1
    for i in range(nodes):
        env.add_node(f"dgx-{i}", gpus=GPUS_PER_NODE)
    env.sfn.fail_next_start(times=n)  # Step Functions refused every start: each is deferred to the reconciler
    for i in range(n):
        env.submit(f"j{i}", 1, 80)
    env.clock.advance(env.settings.workflow_start_grace_seconds + 1)
    runs, examined, seconds, restarted = 0, 0, 0.0, 0
    while restarted < n and runs < 20:
        runs += 1
        started = time.perf_counter()
        report = env.w.reconciler.run()
        seconds = max(seconds, time.perf_counter() - started)
        restarted += report.restarted
        examined += report.examined
        env.clock.advance(RECONCILER_PERIOD)
    return {"jobs": n, "runs": runs, "restarted": restarted, "examined": examined, "run_s": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fleets", default="100,1000,3000", help="live instances (and as many running jobs)")
    fleets = [int(x) for x in parser.parse_args().fleets.split(",")]
    # the deferred starts of (b) and the checks log as in AWS: not figures
    from itl_accelerator.observability import logger

    logger.setLevel("CRITICAL")

    print(f"(a) Job tracker, every {TRACKER_PERIOD} s for {VIRTUAL_MINUTES} virtual minutes; checks due every 300 s")
    print(
        f"{'instances+jobs':>15} {'pages/run':>14} {'DGX calls/run':>14} {'longest gap':>12} {'never':>6} "
        f"{'busiest run':>12}"
    )
    for n in fleets:
        row = tracker_row(n)
        print(
            f"{row['workloads']:>15,} {row['pages'][0]:>8.1f} max {row['pages'][1]:<3} "
            f"{row['calls'][0]:>8.1f} max {row['calls'][1]:<3} {row['longest']:>10.0f} s {row['never']:>6} "
            f"{row['run_s']:>10.2f} s"
        )
    print()
    print(f"(b) Reconciler after a Step Functions outage, every {RECONCILER_PERIOD} s")
    print(f"{'jobs':>8} {'runs':>5} {'restarted':>10} {'examined':>9} {'busiest run':>12}")
    for n in fleets:
        row = reconciler_row(n)
        print(
            f"{row['jobs']:>8,} {row['runs']:>5} {row['restarted']:>10,} {row['examined']:>9,} {row['run_s']:>10.2f} s"
        )


if __name__ == "__main__":
    main()
