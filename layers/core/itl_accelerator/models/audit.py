"""Audit events. Field names follow the ITL SDK's ``AuditEvent`` (snake_case, as the SDK writes them)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

Outcome = Literal["Succeeded", "Denied"]


class AuditEvent(BaseModel):
    """One append-only audit record.

    ``previous_state``/``new_state`` are the resource envelopes before and after (None for create/delete);
    ``timestamp`` is UTC ISO 8601 with microseconds; ``actor_type`` is ``User``, ``Application`` or ``SYSTEM``.
    """

    model_config = ConfigDict(extra="forbid")

    event_id: str
    timestamp: str
    subscription_id: str
    actor_id: str
    actor_type: str
    actor_display_name: str
    action: str
    outcome: Outcome = "Succeeded"
    resource_id: str
    resource_type: str
    resource_name: str
    previous_state: dict[str, Any] | None = None
    new_state: dict[str, Any] | None = None
    change_summary: str
    request_id: str
    correlation_id: str
    source_ip: str | None = None
    user_agent: str | None = None
