"""Who is calling and how: everything a service needs to authorise, audit and stamp a change."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from itl_accelerator.auth.principal import Principal


def utc_now() -> datetime:
    """The current time, UTC (the default clock)."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class Check:
    """One role check an access check made (services/common/access.py): whether the caller's roles grant
    ``action`` (an ARM action name), asked over ``subscription_id`` and ``resource_group`` (None: the subscription
    at all; ``whole``: the whole subscription, not only some of its resource groups) once the caller's scopes were
    found to cover it. Names lower-cased, as the scopes compare them."""

    action: str
    subscription_id: str
    resource_group: str | None
    whole: bool = False
    granted: bool = True

    @classmethod
    def of(cls, action: str, subscription_id: str, resource_group: str | None, *, whole: bool = False) -> Check:
        """The check (granted) of ``action`` over that scope."""
        return cls(action, subscription_id.lower(), resource_group.lower() if resource_group else None, whole)


@dataclass(frozen=True)
class CallContext:
    """One API call: the authenticated ``principal``, ARM request/correlation ids, caller address and agent; and
    ``checked``: the role checks the route made before the body was read (api/routing.py), which the service's own
    check of the same permission then answers from, without asking again — one check of a permission a request."""

    principal: Principal
    request_id: str
    correlation_id: str
    source_ip: str | None = None
    user_agent: str | None = None
    clock: Callable[[], datetime] = field(default=utc_now, compare=False)
    #: Overrides the audit ``actor_type`` (``SYSTEM`` for changes made by workflows).
    audit_actor_type: str | None = None
    checked: frozenset[Check] = field(default=frozenset(), compare=False)

    def answer(self, check: Check) -> bool | None:
        """What the route's check answered for ``check`` (its action over its scope): granted, refused, or None
        when it did not ask."""
        if check in self.checked:
            return True
        return False if replace(check, granted=False) in self.checked else None

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
