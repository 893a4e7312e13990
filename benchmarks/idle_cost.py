"""What a deployment costs a month while nobody uses it (issue 27's target: under 40 USD), at us-east-1 list prices,
modelled from template.yaml itself, with the DynamoDB requests of the schedules' idle runs measured.

Run from the repository root: ``python -m benchmarks.idle_cost`` (``./dev bench`` runs it too). Each line is read
from the template, so a resource added there moves the figure:

- **SnapStart**: the snapshot cache of every function version SnapStart applies to (``SnapStart`` resolved with the
  template's conditions, once per ``ApiSnapStart`` value), 0.0000015046 USD per GB-second of the function's
  ``MemorySize``, all month; restores are paid per cold start, so an idle month has almost none.
- **Schedules**: every ``ScheduleExpression`` (``rate(...)``, or an hourly ``cron``) fired for 30 days: EventBridge
  Scheduler 1.00 USD per million invocations; Lambda 0.20 USD per million requests plus 0.0000133334 per GB-second
  (arm64) at the function's memory for ``--run-ms`` (an idle run: a few queries); X-Ray 5.00 USD per million traces
  (``Tracing: Active``); CloudWatch Logs 0.50 USD per GB ingested (the runtime's START/END/REPORT lines, about 350
  bytes a run: an idle run logs its report at DEBUG, so nothing else); DynamoDB read and write request units of
  one idle run of each duty over an empty table on moto, at 0.125 and 0.625 USD per million.
- **Canaries**: ``AWS::Synthetics::Canary`` runs at their schedule, 0.0012 USD a run.
- **CloudWatch**: a standard alarm 0.10 USD a month per metric it reads, a composite alarm 0.50, a dashboard 3.00;
  custom metrics 0.30 USD each a month: those an idle month publishes (a schedule's non-zero counts, measured on
  the idle runs, and the few published by name on every run; one dimension set each: Powertools' ``service``).
- **Secrets Manager**: 0.40 USD per secret a month.

Not counted: storage of an empty table and buckets, the free tiers (Lambda's 1 M requests and 400,000 GB-s, X-Ray's
100,000 traces, CloudWatch's 10 alarms and 3 dashboards and 10 metrics, Scheduler's 14 M invocations): the figure is
what a deployment costs in an account whose free tier is already used. Prices: AWS pricing pages, December 2026.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.requests_and_cold_start import _table
from itl_local.template import Template, Unresolvable

MONTH_SECONDS = 30 * 86400
SNAPSTART_CACHE_PER_GB_SECOND = 0.0000015046
LAMBDA_PER_REQUEST = 0.20e-6
LAMBDA_PER_GB_SECOND = 0.0000133334
SCHEDULER_PER_INVOCATION = 1.00e-6
XRAY_PER_TRACE = 5.00e-6
LOGS_PER_GB = 0.50
LOG_BYTES_PER_RUN = 350
DYNAMODB_PER_READ_UNIT = 0.125e-6
DYNAMODB_PER_WRITE_UNIT = 0.625e-6
CANARY_PER_RUN = 0.0012
ALARM_PER_METRIC = 0.10
COMPOSITE_ALARM = 0.50
DASHBOARD = 3.00
CUSTOM_METRIC = 0.30
SECRET = 0.40


def period_seconds(expression: str) -> float:
    """Seconds between firings of a ``rate(N unit)`` or of a ``cron(...)`` that fires once an hour or more often
    (its minutes field a number or a list). Raises ``ValueError`` for another form."""
    rate = re.fullmatch(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)", expression)
    if rate:
        unit = {"minute": 60, "hour": 3600, "day": 86400}[rate.group(2).rstrip("s")]
        return int(rate.group(1)) * unit
    cron = re.fullmatch(r"cron\(([\d,]+) \* \* \* \? \*\)", expression)
    if cron:
        return 3600 / len(cron.group(1).split(","))
    raise ValueError(f"a schedule this model does not read: {expression}")


def _memory_mb(template: Template, props: dict[str, Any]) -> int:
    return int(props.get("MemorySize") or template.doc["Globals"]["Function"].get("MemorySize", 128))


def has_snapstart(template: Template, props: dict[str, Any]) -> bool:
    """Whether SnapStart applies to a function of ``template`` (its ``Properties``), conditions resolved."""
    value = props.get("SnapStart", template.doc["Globals"]["Function"].get("SnapStart"))
    if value is None:
        return False
    try:
        resolved = template.resolve(value)
    except Unresolvable:  # AWS::NoValue: the condition left SnapStart out
        return False
    return isinstance(resolved, dict) and resolved.get("ApplyOn") == "PublishedVersions"


def schedules(template: Template) -> list[tuple[str, float]]:
    """(target function's logical id, seconds between runs) of every ``AWS::Serverless::Function`` Schedule event."""
    found = []
    for name, props in template.functions().items():
        for event in (props.get("Events") or {}).values():
            if event.get("Type") in ("Schedule", "ScheduleV2"):
                found.append((name, period_seconds(str(event["Properties"]["ScheduleExpression"]))))
    return found


#: Metrics published by name on every run (functions/itl_functions/schedules.py): UsageSyncRuns and
#: UsageSyncLagSeconds (the sync's heartbeat and lag), BillingExportLagHours (the export's lag).
PUBLISHED_EVERY_RUN = 3


@dataclass
class IdleRun:
    """DynamoDB request units of one idle run of each duty (empty table, moto), and how many of its counts are not
    zero (observability.publish_counts publishes only those)."""

    read_units: float
    write_units: float
    published: int = 0


def idle_runs() -> dict[str, IdleRun]:
    """One run of each scheduled duty over an empty table, its DynamoDB request units counted (keyed by the
    function that runs it in template.yaml)."""
    from benchmarks.fleet_sweeps import store
    from tests.services.conftest import Env, make_settings

    measured: dict[str, IdleRun] = {}
    with store("moto") as (repositories, counting):
        assert counting is not None
        env = Env(make_settings(), repositories=repositories)
        duties: dict[str, Callable[[], Any]] = {
            "JobTrackerFunction": env.w.job_tracker.run,
            "ReconcilerFunction": env.w.reconciler.run,
            "UsageSyncFunction": env.w.usage_sync.run,
            "UsageRollupFunction": env.w.usage_rollups.run,
            "BillingExportFunction": lambda: env.w.billing_export.run(now=env.clock()),
            "BudgetMonitorFunction": env.w.budget_monitor.run,
        }
        for name, run in duties.items():
            run()  # the first run creates what later runs keep (cursors): its writes are not an idle month's
            before = (counting.read_units, counting.write_units)
            report = run()
            counts = report if isinstance(report, dict) else report.as_metrics()
            published = sum(1 for v in counts.values() if v)
            measured[name] = IdleRun(counting.read_units - before[0], counting.write_units - before[1], published)
    return measured


def model(template: Template, run_ms: float, runs: dict[str, IdleRun]) -> dict[str, float]:
    """USD a month per line (module docstring) for ``template`` with its parameters as given."""
    functions = template.functions()
    cost: dict[str, float] = {}
    snap_gb = sum(_memory_mb(template, p) / 1024 for p in functions.values() if has_snapstart(template, p))
    cost["SnapStart cache"] = snap_gb * MONTH_SECONDS * SNAPSTART_CACHE_PER_GB_SECOND
    scheduled = schedules(template)
    invocations = sum(MONTH_SECONDS / period for _, period in scheduled)
    cost["Scheduler invocations"] = invocations * SCHEDULER_PER_INVOCATION
    cost["Lambda (schedules)"] = sum(
        MONTH_SECONDS
        / period
        * (LAMBDA_PER_REQUEST + run_ms / 1000 * _memory_mb(template, functions[name]) / 1024 * LAMBDA_PER_GB_SECOND)
        for name, period in scheduled
    )
    cost["X-Ray traces"] = invocations * XRAY_PER_TRACE
    cost["CloudWatch Logs"] = invocations * LOG_BYTES_PER_RUN / 1e9 * LOGS_PER_GB
    cost["DynamoDB (schedules)"] = sum(
        MONTH_SECONDS
        / period
        * (runs[name].read_units * DYNAMODB_PER_READ_UNIT + runs[name].write_units * DYNAMODB_PER_WRITE_UNIT)
        for name, period in scheduled
        if name in runs
    )
    resources = template.resources.values()
    cost["Synthetics canary"] = sum(
        MONTH_SECONDS / period_seconds(str(r["Properties"]["Schedule"]["Expression"])) * CANARY_PER_RUN
        for r in resources
        if r["Type"] == "AWS::Synthetics::Canary"
    )
    cost["CloudWatch alarms"] = sum(
        ALARM_PER_METRIC * max(1, sum(1 for m in r["Properties"].get("Metrics", []) if "MetricStat" in m))
        for r in resources
        if r["Type"] == "AWS::CloudWatch::Alarm"
    ) + COMPOSITE_ALARM * sum(1 for r in resources if r["Type"] == "AWS::CloudWatch::CompositeAlarm")
    cost["CloudWatch dashboards"] = DASHBOARD * sum(1 for r in resources if r["Type"] == "AWS::CloudWatch::Dashboard")
    cost["Custom metrics"] = CUSTOM_METRIC * (PUBLISHED_EVERY_RUN + sum(r.published for r in runs.values()))
    cost["Secrets Manager"] = SECRET * sum(1 for r in resources if r["Type"] == "AWS::SecretsManager::Secret")
    return cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-ms", type=float, default=150.0, help="an idle scheduled run's billed duration")
    args = parser.parse_args()
    from itl_accelerator.observability import logger

    logger.setLevel("CRITICAL")
    runs = idle_runs()
    base = Template()
    variants = {value: model(Template(parameters={"ApiSnapStart": value}), args.run_ms, runs)
                for value in base.doc["Parameters"]["ApiSnapStart"]["AllowedValues"]}  # fmt: skip
    rows = [
        [line, *(f"{variants[v][line]:.2f}" for v in variants)] for line in variants[base.parameters["ApiSnapStart"]]
    ]
    rows.append(["total", *(f"{sum(variants[v].values()):.2f}" for v in variants)])
    default = base.parameters["ApiSnapStart"]
    print(f"Idle deployment, USD a month at us-east-1 list prices (template default ApiSnapStart={default})")
    print(_table(["line", *(f"ApiSnapStart={v}" for v in variants)], rows, set(range(1, len(variants) + 1))))
    print("an idle run's DynamoDB read/write units and non-zero counts:")
    for name, run in runs.items():
        print(f"  {name}: {run.read_units:g} / {run.write_units:g}, {run.published}")


if __name__ == "__main__":
    main()
