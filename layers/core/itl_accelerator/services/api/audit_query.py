"""The admin audit query: a subscription's audit events by time range and by resource, paged."""

from __future__ import annotations

from datetime import UTC, datetime

from itl_accelerator.arm import validate_subscription_id
from itl_accelerator.auth import rbac
from itl_accelerator.errors import InvalidParameter
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.errors import InvalidSkipToken
from itl_accelerator.repositories.protocols import AuditRepository
from itl_accelerator.services.common.access import Access
from itl_accelerator.services.common.context import CallContext


def _parse_time(value: str | None, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidParameter(f"'{name}' must be an ISO 8601 date-time.", target=name) from exc
    if parsed.tzinfo is None:
        raise InvalidParameter(f"'{name}' must carry a time zone (e.g. 'Z').", target=name)
    return parsed


def _utc(value: datetime | None) -> str | None:
    """A bound as the events' own timestamps are written (UTC ISO 8601 with microseconds); None when there is none,
    or when the bound lies beyond what a UTC timestamp can express (``0001-01-01T00:00:00+01:00`` is before year 1
    in UTC: no event is older; likewise ``9999-12-31T23:59:59-01:00`` is after every event)."""
    if value is None:
        return None
    try:
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except OverflowError:
        return None


def _newest_first(order_by: str | None) -> bool:
    """Whether ``$orderby`` (OData: a property, then ``asc`` or ``desc``; only ``timestamp`` sorts events) asks
    for the newest first. 400 ``InvalidParameter`` naming ``$orderby`` otherwise."""
    if order_by is None:
        return False
    words = order_by.split()
    if words and words[0].lower() == "timestamp" and len(words) <= 2:
        direction = words[1].lower() if len(words) == 2 else "asc"
        if direction in ("asc", "desc"):
            return direction == "desc"
    raise InvalidParameter("'$orderby' must be 'timestamp asc' or 'timestamp desc'.", target="$orderby")


class AuditQueryService:
    """Admin-only audit queries (``ITL.Accelerator/auditEvents/read`` on the whole subscription)."""

    def __init__(self, audit: AuditRepository, access: Access):
        self._audit = audit
        self._access = access

    def list_events(
        self,
        ctx: CallContext,
        subscription_id: str,
        *,
        start_time: str | None,
        end_time: str | None,
        resource_id: str | None,
        top: int,
        skip_token: str | None,
        actor: str | None = None,
        order_by: str | None = None,
    ) -> tuple[list[AuditEvent], str | None]:
        """A page of events with ``start_time <= timestamp <= end_time`` (ISO 8601; default: all time), optionally
        of one ``resource_id`` and/or one ``actor`` (the ``actorId``: a token's subject, or SYSTEM), in the order of
        ``order_by`` (OData ``$orderby``: ``timestamp`` or ``timestamp asc``, the default, oldest first;
        ``timestamp desc`` newest first). Raises 400 ``InvalidParameter`` for bad times, orders or tokens, 403 when
        the caller lacks the action or holds only some resource groups of the subscription, 404 outside its scope.
        """
        validate_subscription_id(subscription_id)
        self._access.require_subscription(ctx, subscription_id, rbac.AUDIT_READ)
        start = _parse_time(start_time, "startTime")
        end = _parse_time(end_time, "endTime")
        if start and end and start > end:
            raise InvalidParameter("'startTime' must not be after 'endTime'.", target="startTime")
        newest_first = _newest_first(order_by)
        try:
            page = self._audit.page(
                subscription_id,
                _utc(start),
                _utc(end),
                resource_id,
                top,
                skip_token,
                actor_id=actor or None,
                newest_first=newest_first,
            )
        except InvalidSkipToken as exc:
            raise InvalidParameter("The $skipToken is not valid for this query.", target="$skipToken") from exc
        return page.items, page.token
