"""Who is calling and how: everything a service needs to authorise, audit and stamp a change."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from itl_accelerator.auth.principal import Principal


def utc_now() -> datetime:
    """The current time, UTC (the default clock)."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class CallContext:
    """One API call: the authenticated ``principal``, ARM request/correlation ids, caller address and agent."""

    principal: Principal
    request_id: str
    correlation_id: str
    source_ip: str | None = None
    user_agent: str | None = None
    clock: Callable[[], datetime] = field(default=utc_now, compare=False)
    #: Overrides the audit ``actor_type`` (``SYSTEM`` for changes made by workflows).
    audit_actor_type: str | None = None

    def now_iso(self) -> str:
        """UTC timestamp, ISO 8601 with microseconds and ``Z``: sorts as text in time order."""
        return self.clock().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: Who changes resources when no user does: the workflows, the schedules and the stream consumers.
SYSTEM_PRINCIPAL = Principal(
    subject="ITL.Accelerator/workflows", display_name="ITL Accelerator workflows", actor_type="Application"
)


def system_context(operation_id: str, correlation_id: str, clock: Callable[[], float] | None = None) -> CallContext:
    """The caller of changes made by workflows, schedules and stream consumers: audited as ``SYSTEM``, under the
    operation's correlation id; ``clock`` (epoch seconds) dates what it stamps (default: now)."""
    return CallContext(
        principal=SYSTEM_PRINCIPAL,
        request_id=f"workflow-{operation_id}",
        correlation_id=correlation_id or operation_id,
        audit_actor_type="SYSTEM",
        clock=(lambda: datetime.fromtimestamp(clock(), UTC)) if clock is not None else utc_now,
    )
