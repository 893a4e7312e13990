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
