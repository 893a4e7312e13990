"""``audit list``: the subscription's audit events (admins), oldest first (``--newest-first``: the other way).

Request: ``GET /subscriptions/{sub}/providers/ITL.Accelerator/auditEvents?startTime=&endTime=&resourceId=&actor=
&$orderby=``, following
``nextLink``. ``--since``/``--until`` take an ISO 8601 time with a zone (``2026-05-01T00:00:00Z``) or a span back
from now (``30m``, ``2h``, ``7d``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import click

from itlc_accelerator import paths
from itlc_accelerator.output import emit
from itlc_accelerator.session import Session, pass_session

_SPAN = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def to_time(value: str | None, now: datetime | None = None) -> str | None:
    """``30m`` → the UTC ISO 8601 time 30 minutes ago; an ISO time → itself (the API checks it); None → None."""
    if value is None:
        return None
    span = _SPAN.match(value.strip())
    if not span:
        return value
    moment = (now or datetime.now(UTC)) - timedelta(**{_UNITS[span.group(2)]: int(span.group(1))})
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


if TYPE_CHECKING:  # generic from click 8.2 on; the distribution allows 8.1
    _ParamType = click.ParamType[str]
else:
    _ParamType = click.ParamType


class Moment(_ParamType):
    """A ``--since``/``--until`` value: an ISO 8601 time with a zone, or a span back from now (``30m``, ``2h``,
    ``7d``), as :func:`to_time` gives it to the API. Anything else is a usage error (exit 2) naming the option,
    not the API's 400 naming its query parameter."""

    name = "TIME"

    def convert(self, value: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if _SPAN.match(value.strip()):
            return str(to_time(value))
        try:
            zoned = datetime.fromisoformat(value.strip().replace("Z", "+00:00")).tzinfo is not None
        except ValueError:
            zoned = False
        if not zoned:
            self.fail(
                f"{value!r} is not an ISO 8601 time with a zone (2026-05-01T00:00:00Z) nor 30m / 2h / 7d", param, ctx
            )
        return value.strip()


#: The type of every option that takes a moment.
MOMENT = Moment()


@click.group("audit")
def audit() -> None:
    """Audit events: who did what to which resource, and when (admins)."""


@audit.command("list")
@click.option("--resource", "resource_id", help="Only the events of this ARM id.")
@click.option("--since", type=MOMENT, help="From this time: ISO 8601 with a zone, or 30m / 2h / 7d ago.")
@click.option("--until", type=MOMENT, help="Up to this time (same forms).")
@click.option("--actor", help="Only the events of this actor id (a user's subject, or SYSTEM).")
@click.option("--newest-first", is_flag=True, help="Newest first (what just happened on the first page).")
@click.option("--max-items", type=click.IntRange(min=1), help="Stop after this many.")
@pass_session(resource_group=False)
def list_(
    s: Session,
    resource_id: str | None,
    since: str | None,
    until: str | None,
    actor: str | None,
    newest_first: bool,
    max_items: int | None,
) -> None:
    """List the subscription's audit events, oldest first (or newest first)."""
    order = "timestamp desc" if newest_first else None
    params = {"startTime": since, "endTime": until, "resourceId": resource_id, "actor": actor, "$orderby": order}
    query = {k: v for k, v in params.items() if v is not None}
    emit(s.output, "audit", s.client.list(paths.audit_events(s.need_subscription()), query, max_items), many=True)
