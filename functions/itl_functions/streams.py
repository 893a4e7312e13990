"""Handlers of the table's stream (DynamoDB Streams event source mappings of template.yaml).

A batch is delivered at least once, in order per item, after its transaction committed; a handler that raises gets
the batch again (``MaximumRetryAttempts``, split in halves on error), so every handler here is idempotent.
"""

from __future__ import annotations

from typing import Any

from itl_accelerator.observability import log_metrics, logger, metrics, publish_counts, tracer
from itl_accelerator.repositories.dynamodb.streams import limit_changes, node_changes
from itl_accelerator.wiring import Wiring
from itl_functions.process import wiring


def _wiring() -> Wiring:
    return wiring(__name__)


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def fleet_changes(event: dict[str, Any], context: Any) -> dict[str, int]:
    """Node, quota and budget items registered, changed or removed (``event["Records"]``, NEW_AND_OLD_IMAGES): serve
    the waiting jobs that may run now, fail those nothing can ever hold and tell the others why they wait
    (services/streams/fleet.py). Returns the batch's counts."""
    records = event.get("Records") or []
    report = _wiring().fleet_changes.on_changes(node_changes(records), limit_changes(records))
    publish_counts(metrics, "FleetChanges", report.as_metrics())
    return report.as_metrics()
