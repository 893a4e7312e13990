"""The periodic sweeps as the fleet grows (issue 27): does every live instance and running job get checked on time,
does a job's end reach the provider soon after the platform's when every callback is lost, and does a run's work
grow with the workloads due rather than with the fleet? Prints three tables.

Run from the repository root: ``python -m benchmarks.fleet_sweeps [--gpus 1000,10000] [--moto-gpus 1000]``
(``./dev bench`` runs it too). Everything runs through the services seam of the tests (tests/services: the real
services and workflows, a fake DGX Platform and a virtual clock) over one of two stores: the **DynamoDB
repositories on moto** (in process: the real key design, shards, ``Limit`` and ``LastEvaluatedKey``; every request
counted at the client) for the fleets of ``--moto-gpus``, and the in-memory twin (whose lease index pages as
DynamoDB's GSI2 does) for the larger ``--gpus`` fleets — moto's per-request cost makes those hours, not minutes.
A fleet of G GPUs is G/2 live instances and G/2 running jobs of 1 GPU each on 8-GPU nodes.

(a) The job tracker, its schedule (every 60 s) for 30 virtual minutes; one job in 20 ends on the platform at a
    random moment and *every callback is lost*. Per fleet: the runs' DynamoDB requests and items read (moto), index
    pages and DGX Platform calls (mean, max), the longest any workload went without a check (goal: the check
    interval, 300 s, plus one schedule period, whatever the fleet), the workloads never checked (goal: 0), the lag
    from a job's end on the platform to the provider recording it (p50, p99; goal: one check interval plus one
    period), and a run's own time at its busiest (the function's timeout is 120 s; goal: under half). With callbacks
    the end is recorded by the callback's own request (docs/DGX_INTEGRATION.md): no sweep is in that path.
(b) The reconciler after a Step Functions outage: every job accepted while ``StartExecution`` failed, all leases
    running out together; runs every 5 virtual minutes until every execution started. Per fleet: runs needed
    (goal: 1), leases examined (goal: all) and the run's time.
(c) The roll-up and the export at the moto fleet's size: an hour of usage records, one an allocation (each GPU its
    own allocation: the worst case), rolled up by one run, then its day exported by one: DynamoDB requests, items
    read, write units and the run's time (timeouts: roll-up 600 s, export 900 s).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from benchmarks.requests_and_cold_start import _table
from itl_accelerator.repositories.protocols import Repositories
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


def _size(item: dict[str, Any]) -> int:
    """About an item's DynamoDB size: the JSON length of its typed form (attribute names and values)."""
    return len(json.dumps(item, separators=(",", ":")))


class CountingClient:
    """A boto3 DynamoDB client that counts its requests, the items they return and their request units (on-demand:
    a write 1 per KB of the item (an update: of the whole item after it), 2 in a transaction; a read 1 per 4 KB, half for an eventually consistent
    ``Query``)."""

    def __init__(self, client: Any):
        self._client = client
        self.requests = 0
        self.items = 0
        self.write_units = 0.0
        self.read_units = 0.0
        self.written_by: Counter[str] = Counter()  # write units by item kind (``item_kind``)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute) or name.startswith("_") or name in ("exceptions", "meta"):
            return attribute

        def counted(**request: Any) -> Any:
            self.requests += 1
            response = attribute(**request)
            if isinstance(response, dict):
                self.items += len(response.get("Items", ())) + sum(
                    len(v) for v in (response.get("Responses") or {}).values()
                )
                self._units(name, request, response)
            return response

        return counted

    def _updated(self, op: dict[str, Any]) -> int:
        """Write units of an update: DynamoDB charges the whole item's size (the larger of before and after), not
        the attributes the update names. Read after it (uncounted)."""
        found = self._client.get_item(TableName=op["TableName"], Key=op["Key"]).get("Item") or {}
        return math.ceil(max(1, _size(found)) / 1024)

    def _write(self, op: dict[str, Any], *, update: bool = False, factor: int = 1) -> None:
        """Charge one item's write (a Put, Delete or Update of ``op``), by its kind too."""
        if update:
            units = self._updated(op)
        else:
            units = math.ceil(
                max(1, _size(op.get("Item") or op.get("ExpressionAttributeValues") or op.get("Key") or {})) / 1024
            )
        self.write_units += factor * units
        self.written_by[item_kind(op.get("Item") or op.get("Key") or {})] += factor * units

    def _units(self, name: str, request: dict[str, Any], response: dict[str, Any]) -> None:
        if name in ("put_item", "delete_item"):
            self._write(request)
        elif name == "update_item":
            self._write(request, update=True)
        elif name == "transact_write_items":
            for entry in request["TransactItems"]:
                (kind, op), *_ = entry.items()
                if kind == "ConditionCheck":
                    self.read_units += 2 * math.ceil(max(1, _size(op.get("Key") or {})) / 1024)
                else:
                    self._write(op, update=kind == "Update", factor=2)
        elif name == "batch_write_item":
            for requests in request["RequestItems"].values():
                for r in requests:
                    self._write(r.get("PutRequest") or r.get("DeleteRequest") or {})
        elif name == "get_item":
            self.read_units += max(1, math.ceil(_size(response.get("Item") or {}) / 4096))
        elif name == "query":
            factor = 1.0 if request.get("ConsistentRead") else 0.5
            self.read_units += factor * max(1, math.ceil(sum(_size(i) for i in response.get("Items", [])) / 4096))
        elif name == "batch_get_item":
            for items in (response.get("Responses") or {}).values():
                self.read_units += sum(max(1, math.ceil(_size(i) / 4096)) for i in items)


def item_kind(key: dict[str, Any]) -> str:
    """An item's kind from its key, ids left out: the literal (upper-case) parts of its PK, then its SK's first one
    (``SUB#s1#ROLLUP#RES#x`` / ``2026-12-01T10`` -> ``SUB#ROLLUP#RES/-``; ``SUB#s1`` / ``INSTANCE#rg#n#i`` ->
    ``SUB/INSTANCE``)."""

    def literal(value: Any) -> list[str]:
        text = value.get("S", "") if isinstance(value, dict) else str(value or "")
        return [part for part in text.split("#") if part.isupper() and part.isalpha()]

    pk, sk = literal(key.get("PK")), literal(key.get("SK"))
    return f"{'#'.join(pk) or '-'}/{sk[0] if sk else '-'}"


@contextmanager
def store(backend: str) -> Iterator[tuple[Repositories | None, CountingClient | None]]:
    """The repositories of ``backend`` (None: the Env's own in-memory twin) and, on moto, the counting client."""
    if backend == "memory":
        yield None, None
        return
    import boto3
    from moto import mock_aws

    from itl_accelerator.repositories.dynamodb import dynamodb_repositories
    from itl_local.aws import create_table, make_dynamodb_faithful
    from itl_local.template import Template

    make_dynamodb_faithful()
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, Template(), "fleet-bench")
        counting = CountingClient(client)
        yield dynamodb_repositories(counting, "fleet-bench"), counting


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def tracker_row(devices: int, backend: str) -> dict[str, Any]:
    n = devices // 2
    with store(backend) as (repositories, counting):
        env = Env(
            make_settings(job_poll_max_interval_seconds=300, instance_watch_interval_seconds=300),
            repositories=repositories,
        )
        nodes = 2 * n // GPUS_PER_NODE + 1
        for i in range(nodes):
            env.add_node(f"dgx-{i}", devices=GPUS_PER_NODE)
        for i in range(n):
            env.provision(f"i{i}", node=f"dgx-{i % nodes}", devices=1, memory_gb=80)
            env.submit(f"j{i}", 1, 80, maxDurationMinutes=7 * 24 * 60)
        env.run()
        ids = {str(env.job(f"j{i}").dgx_id) for i in range(n)}
        ids |= {str(inst.dgx_id) for i in range(n) if (inst := env.instance(f"i{i}", f"dgx-{i % nodes}"))}
        checks = Checks()
        checks.wrap(env, "get_jobs")
        checks.wrap(env, "get_instances")
        pages: list[int] = []
        calls: list[int] = []
        requests: list[int] = []
        items: list[int] = []
        seconds: list[float] = []
        ending = random.Random(27)
        enders = ending.sample(range(n), max(1, n // 20))
        per_run = max(1, len(enders) // (VIRTUAL_MINUTES - 6))  # the last few minutes end none: time to notice
        pending: dict[str, float] = {}
        lags: list[float] = []
        for minute in range(VIRTUAL_MINUTES * 60 // TRACKER_PERIOD):
            for k in enders[minute * per_run : (minute + 1) * per_run]:
                at = env.clock() + ending.uniform(0, TRACKER_PERIOD)
                env.finish_on_platform(f"j{k}", at=at)
                pending[f"j{k}"] = at
            env.clock.advance(TRACKER_PERIOD)
            before = checks.calls
            asked, read = (counting.requests, counting.items) if counting else (0, 0)
            started = time.perf_counter()
            counts = env.w.job_tracker.run()
            seconds.append(time.perf_counter() - started)
            if counting:
                requests.append(counting.requests - asked)
                items.append(counting.items - read)
            env.run()
            pages.append(counts["pages"])
            calls.append(checks.calls - before)
            for name, at in list(pending.items()):
                if env.status(name) in ("Succeeded", "Failed", "Canceled", "Preempted"):
                    lags.append(env.clock() - at)
                    del pending[name]
        return {
            "backend": backend,
            "gpus": devices,
            "workloads": len(ids),
            "requests": (statistics.mean(requests), max(requests)) if requests else None,
            "items": (statistics.mean(items), max(items)) if items else None,
            "pages": (statistics.mean(pages), max(pages)),
            "calls": (statistics.mean(calls), max(calls)),
            "longest": checks.longest,
            "never": len(ids - set(checks.last)),
            "lag": (_percentile(lags, 0.5), _percentile(lags, 0.99), len(lags), len(pending)),
            "run_s": max(seconds),
        }


def reconciler_row(devices: int) -> dict[str, Any]:
    n = devices
    env = Env(make_settings())
    nodes = n // GPUS_PER_NODE + 1
    for i in range(nodes):
        env.add_node(f"dgx-{i}", devices=GPUS_PER_NODE)
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


def billing_row(allocations: int) -> dict[str, Any]:
    """One hour of ``allocations`` usage records (benchmarks/usage_billing.py's, one record an allocation) written
    through the usage repository on moto, then the roll-up run of that hour and the export run of its day, each
    counted at the client."""
    import dataclasses

    from benchmarks import usage_billing
    from itl_accelerator.domain.usage import day_of

    with store("moto") as (repositories, counting):
        assert repositories is not None and counting is not None
        env = Env(make_settings(), repositories=repositories)
        env.clock.set(usage_billing.START - 7200)
        env.w.usage_rollups.run()  # the first run ever: the hours from the next on hold cost groups
        repositories.billing.open_days_from(day_of(usage_billing.START))  # as the sync's first run
        for record in usage_billing.records(allocations):
            repositories.usage.write(dataclasses.replace(record, billed=None, content_hash=""), None)
        env.clock.set(usage_billing.START + 2 * 3600)
        row: dict[str, Any] = {"records": allocations}
        runs = {
            "roll-up": env.w.usage_rollups.run,
            "export": lambda: env.w.billing_export.run(now=usage_billing.START + 2 * 86400),
        }
        for name, run in runs.items():
            before = (counting.requests, counting.items, counting.write_units)
            started = time.perf_counter()
            report = run()
            seconds = time.perf_counter() - started
            row[name] = (counting.requests - before[0], counting.items - before[1],
                         counting.write_units - before[2], seconds, report)  # fmt: skip
        return row


def _pair(value: tuple[float, float] | None) -> str:
    return "-" if value is None else f"{value[0]:,.1f} max {value[1]:,}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", default="1000,10000", help="fleets (GPUs) on the in-memory twin")
    parser.add_argument("--moto-gpus", default="1000", help="fleets (GPUs) on the DynamoDB repositories on moto")
    args = parser.parse_args()
    fleets = [("moto", int(x)) for x in args.moto_gpus.split(",") if x] + [
        ("memory", int(x)) for x in args.gpus.split(",") if x
    ]
    # the deferred starts of (b) and the checks log as in AWS: not figures
    from itl_accelerator.observability import logger

    logger.setLevel("CRITICAL")

    print(f"(a) Job tracker, every {TRACKER_PERIOD} s for {VIRTUAL_MINUTES} virtual minutes; checks due every 300 s;")
    print("    1 job in 20 ends on the platform and its callback is lost")
    headers = ["store", "GPUs", "workloads", "DynamoDB requests/run", "items read/run", "pages/run", "DGX calls/run",
               "longest gap", "never", "end lag p50/p99 (ends)", "busiest run"]  # fmt: skip
    rows = []
    for backend, devices in fleets:
        row = tracker_row(devices, backend)
        p50, p99, ended, late = row["lag"]
        rows.append([backend, f"{devices:,}", f"{row['workloads']:,}", _pair(row["requests"]), _pair(row["items"]),
                     _pair(row["pages"]), _pair(row["calls"]), f"{row['longest']:.0f} s", str(row["never"]),
                     f"{p50:.0f} / {p99:.0f} s ({ended}{f', {late} not yet' if late else ''})",
                     f"{row['run_s']:.2f} s"])  # fmt: skip
    print(_table(headers, rows, {1, 2, 3, 4, 5, 6, 7, 8, 10}))
    print()
    print(f"(b) Reconciler after a Step Functions outage, every {RECONCILER_PERIOD} s (in-memory twin)")
    rows = []
    for devices in sorted({g for _, g in fleets}):
        row = reconciler_row(devices)
        rows.append([f"{row['jobs']:,}", str(row["runs"]), f"{row['restarted']:,}", f"{row['examined']:,}",
                     f"{row['run_s']:.2f} s"])  # fmt: skip
    print(_table(["jobs", "runs", "restarted", "examined", "busiest run"], rows, {0, 1, 2, 3, 4}))
    print()
    print("(c) Roll-up of one hour and export of its day, one usage record per allocation (DynamoDB on moto)")
    rows = []
    for devices in sorted({g for b, g in fleets if b == "moto"}):
        row = billing_row(devices)
        for name in ("roll-up", "export"):
            requests, items, units, seconds, _ = row[name]
            rows.append([name, f"{row['records']:,}", f"{requests:,}", f"{items:,}", f"{units:,.0f}",
                         f"{seconds:.2f} s"])  # fmt: skip
    print(_table(["run", "records", "DynamoDB requests", "items read", "write units", "run"], rows, {1, 2, 3, 4, 5}))


if __name__ == "__main__":
    main()
