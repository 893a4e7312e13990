"""What the control plane costs per job (issue 27's target: under 0.40 USD of AWS per 1,000 one-hour jobs): the
AWS requests a one-hour GPU job makes from its submission to its last usage hour being rolled up and exported,
counted, then priced at us-east-1 list prices.

Run from the repository root: ``python -m benchmarks.control_plane_cost [--jobs 40]`` (``./dev bench`` runs it too).
``--jobs`` one-GPU jobs of one hour run through the services seam of the tests (the real services and workflows, a
fake DGX Platform, a virtual clock) over the DynamoDB repositories on moto, every DynamoDB request counted with the
size of what it wrote and read; every DGX callback is lost (the tracker's polling is in the figure: the worst case).
The schedules fire at template.yaml's rates (tracker 60 s, usage sync 5 min, roll-up 15 min, export once for the
day), and their runs are shared among the jobs. Counted:

- **DynamoDB** request units (on-demand): a write 1 per KB of the item (2 in a transaction), a read 1 per 4 KB
  (strongly consistent; half for an eventually consistent ``Query``); sizes are the JSON length of the typed item,
  close to DynamoDB's own (attribute names and values).
- **Lambda** invocations: each Task state entered (a workflow step), each schedule run, each API request (the PUT
  and the status polls an ARM client makes after each ``Retry-After``: services/common/lro.py ``poll_after``);
  billed at an assumed 100 ms and 512 MB each (arm64).
- **Step Functions** (Standard) state transitions: every state the executions entered.
- **API Gateway** (REST) requests: the PUT and the polls; **EventBridge** events: one per state change the job
  goes through (created, Scheduled, Running, Succeeded).

Prices (us-east-1, AWS pricing pages, December 2026): DynamoDB on-demand 0.625 USD per million write and 0.125 per
million read request units; Lambda 0.20 USD per million requests and 0.0000133334 per GB-second (arm64); Step
Functions Standard 0.025 USD per 1,000 state transitions; API Gateway REST 3.50 USD per million requests;
EventBridge custom events 1.00 USD per million. Not counted: CloudWatch Logs and metrics, X-Ray, data transfer.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass

from benchmarks.fleet_sweeps import CountingClient, store
from benchmarks.requests_and_cold_start import _table
from itl_accelerator.domain.states import OperationKind
from itl_accelerator.services.common.lro import poll_after
from tests.services.conftest import Env, make_settings

PRICES = {
    "DynamoDB write units": 0.625e-6,
    "DynamoDB read units": 0.125e-6,
    "Lambda invocations": 0.20e-6 + 0.1 * 0.5 * 0.0000133334,
    "Step Functions transitions": 0.025e-3,
    "API Gateway requests": 3.50e-6,
    "EventBridge events": 1.00e-6,
}
STATE_CHANGES_PER_JOB = 4


def polls_of(kind: OperationKind, seconds: float, env: Env) -> int:
    """The status polls of an ARM client that follows ``Retry-After`` through an operation of ``kind`` that runs
    ``seconds``."""
    elapsed, polls = 0, 0
    while elapsed < seconds:
        elapsed += poll_after(kind, elapsed, env.settings)
        polls += 1
    return polls


def _schedules(env: Env, seconds: int, *, step: int = 60) -> int:
    """Advance ``seconds`` firing the schedules at template.yaml's rates (tracker each minute, usage sync each 5,
    roll-up each 15), letting the workflows run after each tick; returns the runs made."""
    runs = 0
    for tick in range(1, seconds // step + 1):
        env.clock.advance(step)
        env.w.job_tracker.run()
        runs += 1
        if tick % 5 == 0:
            env.w.usage_sync.run()
            runs += 1
        if tick % 15 == 0:
            env.w.usage_rollups.run()
            runs += 1
        env.run()
    return runs


@dataclass
class Setup:
    """What the counting client had counted when the measured workloads began."""

    write_units: float
    read_units: float
    written_by: Counter[str]

    @classmethod
    def of(cls, counting: CountingClient) -> Setup:
        return cls(counting.write_units, counting.read_units, Counter(counting.written_by))


def _per_thousand(
    counting: CountingClient, setup: Setup, env: Env, *, runs: int, api: int, events: int, per: int
) -> tuple[dict[str, float], dict[str, float]]:
    """The AWS requests counted since ``setup``, the executions' states and Tasks, the schedules' ``runs``, the
    ``api`` requests and the EventBridge ``events``, per 1,000 of ``per`` workloads; and the write units by item
    kind (``item_kind``) per workload, largest first."""
    transitions, tasks = _executions(env)
    written = counting.written_by - setup.written_by
    by_kind = {kind: units / per for kind, units in written.most_common()}
    counts = {
        "DynamoDB write units": counting.write_units - setup.write_units,
        "DynamoDB read units": counting.read_units - setup.read_units,
        "Lambda invocations": tasks + runs + api,
        "Step Functions transitions": transitions,
        "API Gateway requests": api,
        "EventBridge events": events,
    }
    return {k: v / per * 1000 for k, v in counts.items()}, by_kind


def _executions(env: Env) -> tuple[int, int]:
    """(state transitions, Task states entered) of every execution so far."""
    runners = [e.runner for e in env.sfn.executions.values() if e.runner]
    entered = [s for r in runners for s in r.entered]
    tasks = [s for r in runners for s in r.entered if r.asl["States"].get(s, {}).get("Type") == "Task"]
    return len(entered), len(tasks)


def measure(jobs: int) -> tuple[dict[str, float], dict[str, float]]:
    with store("moto") as (repositories, counting):
        assert counting is not None
        env = Env(make_settings(job_poll_max_interval_seconds=300, instance_watch_interval_seconds=300),
                  repositories=repositories)  # fmt: skip
        for i in range(jobs // 8 + 1):
            env.add_node(f"dgx-{i}", devices=8)
        setup = Setup.of(counting)
        start = env.clock()
        for n in range(jobs):
            env.submit(f"j{n}", 1, 80, maxDurationMinutes=120)
        env.run()
        for n in range(jobs):
            env.finish_on_platform(f"j{n}", at=start + 3600 + n)
        runs = _schedules(env, 5 * 3600)  # the hour, then the late hours until every meter settled
        env.clock.set(start + 2 * 86400)
        env.w.billing_export.run(now=env.clock())
        runs += 1
        ended = sum(1 for n in range(jobs) if env.status(f"j{n}") == "Succeeded")
        assert ended == jobs, f"{jobs - ended} jobs did not end"
        api = jobs * (1 + polls_of(OperationKind.JOB, 3600, env))
        return _per_thousand(counting, setup, env, runs=runs, api=api, events=jobs * STATE_CHANGES_PER_JOB, per=jobs)


def measure_instances(instances: int, days: int = 1) -> tuple[dict[str, float], dict[str, float]]:
    """An Ollama instance of 2 GPUs serving for ``days``: its provisioning (the PUT, the polls until it is ready),
    the instance watch (every ``INSTANCE_WATCH_INTERVAL_SECONDS``, template default 300 s), the usage sync, the
    roll-ups and the day's export; the deletion is not in it (a day of a long-lived instance). Per instance-day."""
    with store("moto") as (repositories, counting):
        assert counting is not None
        env = Env(make_settings(instance_watch_interval_seconds=300), repositories=repositories)
        for i in range(instances // 4 + 1):
            env.add_node(f"dgx-{i}", devices=8)
        setup = Setup.of(counting)
        for n in range(instances):
            env.provision(f"llama-{n}", f"dgx-{n // 4}")
        began = env.clock()
        env.run()
        provisioned = max(1.0, env.clock() - began)  # the simulated provisioning's length, as the client waits it
        ready = sum(
            1
            for n in range(instances)
            if env.instance_props(f"llama-{n}", f"dgx-{n // 4}")["provisioningState"] == "Succeeded"
        )
        assert ready == instances, f"{instances - ready} instances are not serving"
        runs = _schedules(env, days * 86400)
        env.w.billing_export.run(now=env.clock())
        runs += 1
        api = instances * (1 + polls_of(OperationKind.PROVISION, provisioned, env))
        return _per_thousand(counting, setup, env, runs=runs, api=api, events=instances * 2, per=instances * days)


def _print(title: str, unit: str, measured: tuple[dict[str, float], dict[str, float]]) -> None:
    per_thousand, by_kind = measured
    rows = [[what, f"{n:,.0f}", f"{n * PRICES[what]:.4f}"] for what, n in per_thousand.items()]
    total = sum(n * PRICES[what] for what, n in per_thousand.items())
    rows.append(["total", "", f"{total:.4f}"])
    print(title)
    print(_table(["what", f"per 1,000 {unit}", "USD"], rows, {1, 2}))
    shown = list(by_kind.items())[:8]
    rest = sum(by_kind.values()) - sum(n for _, n in shown)
    rows = [[kind, f"{n:,.1f}"] for kind, n in shown] + ([["the rest", f"{rest:,.1f}"]] if rest else [])
    print(f"  DynamoDB write units per {unit[:-1]}, by item (PK / SK kind; docs/ARCHITECTURE.md, Data model):")
    print(_table(["item", "write units"], rows, {1}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--instances", type=int, default=12)
    args = parser.parse_args()
    from itl_accelerator.observability import logger

    logger.setLevel("CRITICAL")
    _print(f"Control plane per 1,000 one-hour jobs of 1 GPU ({args.jobs} measured, every callback lost), us-east-1",
           "jobs", measure(args.jobs))  # fmt: skip
    print()
    _print(f"Control plane per 1,000 instance-days of an Ollama instance of 2 GPUs ({args.instances} measured for a day,"
           " every callback lost), us-east-1", "instance-days", measure_instances(args.instances))  # fmt: skip


if __name__ == "__main__":
    main()
