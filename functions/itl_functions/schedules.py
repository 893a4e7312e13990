"""Handlers of the EventBridge Scheduler schedules of template.yaml.

Schedules are delivered at least once and may overlap: every handler here is idempotent. Each publishes what it
did as CloudWatch metrics (Powertools EMF) and returns it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from itl_accelerator.container import Container
from itl_accelerator.observability import logger, metrics, tracer

_containers: list[Container] = []


def _container() -> Container:
    if not _containers:
        _containers.append(Container.build())
    return _containers[0]


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def reconcile(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Every 5 minutes: end the operations whose workflow stalled (services/reconciler.py). ``event`` is the
    schedule's input (``scheduledTime``, ``executionId``); the run stops early when its time runs short."""
    report = _container().reconciler.run(time_left=lambda: context.get_remaining_time_in_millis() / 1000)
    for name, value in report.as_metrics().items():
        metrics.add_metric(name=f"Reconciler{name}", unit=MetricUnit.Count, value=value)
    logger.info("Reconciled", extra={"report": asdict(report), "scheduled_time": event.get("scheduledTime")})
    return asdict(report)


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def track_jobs(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Every minute: check the running jobs that are due (services/job_workflow.JobTracker: ended on the DGX Platform, past
    their max duration, or to be checked later, each less often)."""
    counts = _container().job_tracker.run()
    for name, value in counts.items():
        metrics.add_metric(name=f"JobTracker{name.capitalize()}", unit=MetricUnit.Count, value=value)
    logger.info("Tracked jobs", extra={"counts": counts, "scheduled_time": event.get("scheduledTime")})
    return counts
