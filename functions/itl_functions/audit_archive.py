"""Handler of the table's stream that archives expired audit events to S3 (services/streams/audit_archive.py):
template.yaml ``AuditArchiveFunction``, filtered to ``REMOVE`` records of ``AuditEvent`` items by DynamoDB's TTL.

A batch S3 does not take raises, and the batch comes again (split in halves, up to ``MaximumRetryAttempts``, then
its position goes to the dead-letter queue); one delivered twice writes the same objects.
"""

from __future__ import annotations

from typing import Any

from itl_accelerator.observability import log_metrics, logger, metrics, publish_counts, tracer
from itl_accelerator.repositories.dynamodb.streams import expired_audit_events
from itl_accelerator.wiring import Wiring
from itl_functions.process import wiring


def _wiring() -> Wiring:
    return wiring(__name__)


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def archive(event: dict[str, Any], context: Any) -> dict[str, int]:
    """Stream records (``event["Records"]``) → the expired audit events among them in S3. Returns the batch's
    counts (``events``, ``objects``), also published as ``AuditArchive*`` metrics."""
    report = _wiring().audit_archive.archive(expired_audit_events(event.get("Records") or []))
    publish_counts(metrics, "AuditArchive", report.as_metrics())
    return report.as_metrics()
