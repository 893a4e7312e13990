"""Handlers of the EventBridge Scheduler schedules of template.yaml.

Schedules are delivered at least once and may overlap: every handler here is idempotent. Each publishes what it
did as CloudWatch metrics (Powertools EMF) and returns it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

from itl_accelerator.observability import did_something, log_metrics, logger, metrics, publish_counts, tracer
from itl_accelerator.wiring import Wiring
from itl_functions.process import wiring


def _wiring() -> Wiring:
    return wiring(__name__)


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def reconcile(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Every 5 minutes: end the operations whose workflow stalled (services/schedules/reconciler.py). ``event`` is the
    schedule's input (``scheduledTime``, ``executionId``); the run stops early when its time runs short."""
    report = _wiring().reconciler.run(time_left=lambda: context.get_remaining_time_in_millis() / 1000)
    _publish("Reconciler", report.as_metrics())
    _log("Reconciled", asdict(report), event)
    return asdict(report)


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def track_jobs(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Every minute: check every running job and live instance that is due (services/schedules/job_tracker.py: ended or
    lost on the DGX Platform, past its max duration, or to be checked later), page by page until none is due or the
    run's time runs short."""
    counts = _wiring().job_tracker.run(time_left=lambda: context.get_remaining_time_in_millis() / 1000)
    _publish("JobTracker", counts)
    _log("Tracked jobs", counts, event)
    return counts


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def sync_usage(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Every 5 minutes: record the usage of every meter that is due (services/schedules/usage_sync.py) and publish how far
    the billing export lags (``BillingExportLagHours``, watched by the missing-export alarm) and how far the sync
    itself lags (``UsageSyncLagSeconds``: how long the most overdue meter has waited, 0 while it keeps up)."""
    wiring = _wiring()
    report = wiring.usage_sync.run(time_left=lambda: context.get_remaining_time_in_millis() / 1000)
    _publish("UsageSync", report.as_metrics())
    metrics.add_metric(name="UsageSyncRuns", unit=MetricUnit.Count, value=1)
    metrics.add_metric(
        name="UsageSyncLagSeconds", unit=MetricUnit.Seconds, value=wiring.usage_sync.lag_seconds(time.time())
    )
    lag = wiring.billing_export.lag_hours(time.time())
    if lag is not None:
        metrics.add_metric(name="BillingExportLagHours", unit=MetricUnit.Count, value=lag)
    _log("Synced usage", asdict(report), event)
    return {**asdict(report), "exportLagHours": lag}


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def roll_up_usage(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Hourly: recompute the roll-ups of every hour whose usage changed (services/schedules/usage_rollups.py)."""
    report = _wiring().usage_rollups.run(time_left=lambda: context.get_remaining_time_in_millis() / 1000)
    _publish("UsageRollup", report.as_metrics())
    _log("Rolled up usage", asdict(report), event)
    return asdict(report)


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def export_billing(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Hourly at :30: write the FOCUS export of every day due (services/schedules/billing_export.py). ``event["day"]``
    (``YYYY-MM-DD``, optional) exports that day only — an operator's re-run or an early export of today."""
    report = _wiring().billing_export.run(
        day=event.get("day") or None, time_left=lambda: context.get_remaining_time_in_millis() / 1000
    )
    _publish("BillingExport", report.as_metrics())
    for day in report.days:
        if day.written:
            for currency, total in day.manifest["totals"].items():
                # a metric of its own dimension, flushed now (honours POWERTOOLS_METRICS_DISABLED, as single_metric
                # does not: locally it printed an EMF line on the quiet console)
                cost = EphemeralMetrics(namespace=metrics.namespace, service=metrics.service)
                cost.add_dimension(name="Currency", value=currency)
                cost.add_metric(name="BillingExportCost", unit=MetricUnit.Count, value=float(total))
                cost.flush_metrics()
    result = {
        "days": [
            {"day": d.day, "written": d.written, "claimed": d.claimed, "corrections": d.corrections, **d.manifest}
            for d in report.days
        ],
        "stoppedEarly": report.stopped_early,
    }
    _log("Exported billing", result, event)
    return result


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def monitor_budgets(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Every 5 minutes: evaluate every budget from its spend as of now (services/schedules/budget_monitor.py: notify
    the thresholds crossed, once a month each; stop what a spent ``StopAll`` budget covers)."""
    report = _wiring().budget_monitor.run(time_left=lambda: context.get_remaining_time_in_millis() / 1000)
    _publish("BudgetMonitor", report.as_metrics())
    _log("Evaluated budgets", asdict(report), event)
    return asdict(report)


def _log(message: str, report: dict[str, Any], event: dict[str, Any]) -> None:
    """A run's report, at INFO when it did something (:func:`did_something`), else at DEBUG: a schedule that fires
    every few minutes with nothing to do fills no log."""
    log = logger.info if did_something(report) else logger.debug
    log(message, extra={"report": report, "scheduled_time": event.get("scheduledTime")})


def _publish(prefix: str, counts: Mapping[str, int | float]) -> None:
    publish_counts(metrics, prefix, counts)
