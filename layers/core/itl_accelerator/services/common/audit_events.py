"""Builds :class:`AuditEvent` records for changes (written by the repositories in the change's own transaction) and
refused attempts (appended alone)."""

from __future__ import annotations

import uuid
from typing import Any

from itl_accelerator.models.audit import AuditEvent, Outcome
from itl_accelerator.observability import logger
from itl_accelerator.services.common.context import CallContext


def build_event(
    ctx: CallContext,
    *,
    subscription_id: str,
    action: str,
    resource_id: str,
    resource_type: str,
    resource_name: str,
    change_summary: str,
    previous_state: dict[str, Any] | None = None,
    new_state: dict[str, Any] | None = None,
    outcome: Outcome = "Succeeded",
) -> AuditEvent:
    """An audit event stamped with the caller, the ids of the request and the current time. A job's workload
    environment (``env`` and ``secretEnv`` values) is masked in ``previous_state``/``new_state``: values are secrets in
    practice, and the audit trail is append-only and read by every admin (models/jobs.py ``masked_workload``)."""
    # models/jobs.py only when an event is built (a write, or a refusal): a read's cold start does not load it
    from itl_accelerator.models.jobs import masked_job_document

    return AuditEvent(
        event_id=str(uuid.uuid4()),
        timestamp=ctx.now_iso(),
        subscription_id=subscription_id,
        actor_id=ctx.principal.subject,
        actor_type=ctx.audit_actor_type or ctx.principal.actor_type,
        actor_display_name=ctx.principal.display_name,
        action=action,
        outcome=outcome,
        resource_id=resource_id,
        resource_type=resource_type,
        resource_name=resource_name,
        previous_state=masked_job_document(previous_state, reveal_env=False),
        new_state=masked_job_document(new_state, reveal_env=False),
        change_summary=change_summary,
        request_id=ctx.request_id,
        correlation_id=ctx.correlation_id,
        source_ip=ctx.source_ip,
        user_agent=ctx.user_agent,
    )


def log_denied(event: AuditEvent) -> None:
    """Refusals are also logged (without secrets) for alarms on repeated denials."""
    logger.warning(
        "Authorization denied",
        extra={"actor_id": event.actor_id, "action": event.action, "resource_id": event.resource_id},
    )
