"""Handler of the table's stream that publishes state-change events (itl_accelerator/events.py) and archives
the audit events whose retention ended (services/streams/audit_archive.py): the second and last event source mapping
on the table's stream (template.yaml ``StateEventsFunction``; DynamoDB Streams advises at most two readers a shard),
filtered to instance, job, node and capacity reservation items and to DynamoDB's TTL deletions of audit items.

A batch is delivered at least once, in order per item; when EventBridge does not take every event of it, the handler
raises and the batch comes again (split in halves, up to ``MaximumRetryAttempts``, then its position goes to the
dead-letter queue): events are never lost, and one delivered twice carries the same ``detail.eventId``.
"""

from __future__ import annotations

from typing import Any

from itl_accelerator.observability import log_metrics, logger, metrics, publish_counts, tracer
from itl_accelerator.repositories.dynamodb.streams import expired_audit_events, state_changes
from itl_accelerator.wiring import Wiring
from itl_functions.process import wiring


def _wiring() -> Wiring:
    return wiring(__name__)


@logger.inject_lambda_context(clear_state=True)
@log_metrics
@tracer.capture_lambda_handler(capture_response=False)
def publish(event: dict[str, Any], context: Any) -> dict[str, int]:
    """Stream records (``event["Records"]``) → the expired audit events among them into the archive, then one
    event per state change on the provider's bus. Returns the batch's counts (``published``, ``ignored``,
    ``retried``; ``archived`` when it held expired audit events), published as ``StateEvents*`` and
    ``AuditArchive*`` metrics."""
    records = event.get("Records") or []
    expired = expired_audit_events(records)
    counts: dict[str, int] = {}
    if expired:  # first: a batch it fails comes again whole, and its state events carry the same ids
        archived = _wiring().audit_archive.archive(expired)
        publish_counts(metrics, "AuditArchive", archived.as_metrics())
        counts["archived"] = archived.events
    report = _wiring().state_events.publish(state_changes(records), len(records) - len(expired))
    publish_counts(metrics, "StateEvents", report.as_metrics())
    return report.as_metrics() | counts
