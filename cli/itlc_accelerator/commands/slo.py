"""``slo show``: the API's service level objectives over a month — attainment and error budget left (admins).

Request: ``GET /subscriptions/{sub}/providers/ITL.Accelerator/slo?month=YYYY-MM`` (the current month, so far, when
``--month`` is left out), answered with ``{"month", "start", "end", "until", "complete", "scope", "source",
"objectives": [{"name", "goalPercent", "requests", "badRequests", "attainmentPercent", "met", "burnRate",
"errorBudget": {...}}]}`` (docs/API_REFERENCE.md, "Service level objectives"). ``-o json`` prints it as it comes;
a table shows one row per objective under a line naming the period and the source (stderr); ``-o id`` the
objectives' names.
"""

from __future__ import annotations

import click

from itlc_accelerator import paths
from itlc_accelerator.output import emit
from itlc_accelerator.session import Session, pass_session


@click.group("slo")
def slo() -> None:
    """The API's service level objectives: attainment and error budget (admins)."""


@slo.command("show")
@click.option("--month", help="A UTC calendar month, YYYY-MM (default: the current one, so far).")
@pass_session(resource_group=False)
def show(s: Session, month: str | None) -> None:
    """Show the month's attainment of each SLO and the error budget left."""
    body = s.client.get(paths.provider(s.need_subscription()) + "/slo", month=month) or {}
    if s.output == "json":
        emit("json", "slo", body)
        return
    if s.output == "table":
        period = "complete" if body.get("complete") else f"so far, until {body.get('until')}"
        click.echo(f"{body.get('month')} ({period}); counted from {body.get('source')}", err=True)
    emit(s.output, "slo", {"value": body.get("objectives") or []}, many=True)
