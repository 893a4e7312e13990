"""``quota``, ``offer``, ``budget`` and ``cost``: the subscription's limits, what a job could get now, and what its
work cost.

Requests (docs/API_REFERENCE.md, "Quotas", "Budgets", "Cost queries"):

- ``quota list|show|set|delete`` → ``GET|PUT|DELETE .../locations/{location}/quotas[/{name}]`` (``name`` ``gpus``:
  every GPU model; ``gpus-{model}``: one); ``usage list`` (itlc_accelerator/commands/usage.py) →
  ``GET .../locations/{location}/usages``;
- ``offer list`` → ``GET .../locations/{location}/offers[?resourceGroup=]``;
- ``budget list|show|create|delete`` → ``GET|PUT|DELETE .../budgets[/{name}]`` (Azure Cost Management's budget shape);
- ``cost query`` → ``POST .../costQuery`` with ``timeframe``, ``dataset.granularity``, ``grouping`` and ``filter``;
  a table shows the answer's columns and rows;
- ``cost export DAY`` → ``GET .../billingExports/{day}`` page after page (``nextLink``), written as one FOCUS CSV.
"""

from __future__ import annotations

import csv
import json
import re
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import click

from itlc_accelerator import paths
from itlc_accelerator.output import emit, table
from itlc_accelerator.session import Session, pass_session

LOCATION = click.option("-l", "--location", required=True, help="The location (e.g. us-east-1).")


def _deleted(s: Session, what: str, status: int) -> None:
    click.echo(f"{what} {'deleted' if status == 200 else 'did not exist: nothing deleted'}.", err=True)


# ------------------------------------------------------------------------------------------------------ quotas
@click.group("quota")
def quota() -> None:
    """GPU quotas: how many GPUs the subscription may hold at once in a location."""


@quota.command("list")
@LOCATION
@pass_session(resource_group=False)
def quota_list(s: Session, location: str) -> None:
    """List the quotas set in a location."""
    emit(s.output, "quota", s.client.get(paths.quotas(s.need_subscription(), location)), many=True)


@quota.command("show")
@click.argument("name")
@LOCATION
@pass_session(resource_group=False)
def quota_show(s: Session, name: str, location: str) -> None:
    """Show a quota (NAME: gpus, or gpus-{model} such as gpus-h100)."""
    emit(s.output, "quota", s.client.get(paths.quotas(s.need_subscription(), location, name)))


@quota.command("set")
@click.argument("name")
@LOCATION
@click.option("--limit", type=click.IntRange(0), required=True, help="GPUs held at once (0 refuses every allocation).")
@pass_session(resource_group=False)
def quota_set(s: Session, name: str, location: str, limit: int) -> None:
    """Set a quota's limit (operators)."""
    body = {"properties": {"limit": {"limitObjectType": "LimitValue", "value": limit}}}
    response = s.client.send("PUT", paths.quotas(s.need_subscription(), location, name), json=body)
    emit(s.output, "quota", response.json())


@quota.command("delete")
@click.argument("name")
@LOCATION
@pass_session(resource_group=False)
def quota_delete(s: Session, name: str, location: str) -> None:
    """Remove a quota's limit (operators)."""
    response = s.client.send("DELETE", paths.quotas(s.need_subscription(), location, name))
    _deleted(s, f"quota {name}", response.status_code)


# ----------------------------------------------------------------------------------------------------- budgets
@click.group("offer")
def offer() -> None:
    """Capacity offers: what a job submitted now could get in a location."""


@offer.command("list")
@LOCATION
@pass_session()
def offer_list(s: Session, location: str) -> None:
    """Per accelerator kind and model: the largest request placed at once now (devices on one node), nodes, prices per
    device-hour, and what quotas and budgets allow (for work in --resource-group, when given)."""
    query = {"resourceGroup": s.resource_group} if s.resource_group else {}
    emit(s.output, "offer", s.client.get(paths.offers(s.need_subscription(), location), **query), many=True)


@click.group("budget")
def budget() -> None:
    """Monthly budgets: notifications at thresholds, and what happens once spent."""


@budget.command("list")
@pass_session(resource_group=False)
def budget_list(s: Session) -> None:
    """List the subscription's budgets."""
    emit(s.output, "budget", s.client.get(paths.budgets(s.need_subscription())), many=True)


@budget.command("show")
@click.argument("name")
@pass_session(resource_group=False)
def budget_show(s: Session, name: str) -> None:
    """Show a budget, with this month's spend."""
    emit(s.output, "budget", s.client.get(paths.budgets(s.need_subscription(), name)))


@budget.command("create")
@click.argument("name")
@click.option("--amount", required=True, help="The monthly amount (a decimal number in --currency).")
@click.option("--currency", default="USD", show_default=True, help="ISO 4217 code: the allocations it counts.")
@click.option("--start", help="The first month, YYYY-MM (default: this one).")
@click.option("--end", help="The month after the last, YYYY-MM (default: none).")
@click.option("--threshold", "thresholds", multiple=True, type=float, help="Notify at this percent (repeatable).")
@click.option("--contact", "contacts", multiple=True, help="An e-mail address carried in the notifications.")
@click.option("--resource-group", "groups", multiple=True, help="Count only these resource groups (repeatable).")
@click.option("--tag", help="Count only the work carrying this tag: KEY=VALUE[,VALUE...].")
@click.option(
    "--action",
    type=click.Choice(["None", "RefuseNewAllocations", "StopAll"]),
    default="None",
    show_default=True,
    help="What happens once the budget is spent.",
)
@pass_session(resource_group=False)
def budget_create(
    s: Session,
    name: str,
    amount: str,
    currency: str,
    start: str | None,
    end: str | None,
    thresholds: tuple[float, ...],
    contacts: tuple[str, ...],
    groups: tuple[str, ...],
    tag: str | None,
    action: str,
) -> None:
    """Create a budget, or replace one of that name (operators): ARM's PUT."""
    if groups and tag:
        raise click.UsageError("Filter by --resource-group or by --tag, not both.")
    first = start or datetime.now(UTC).strftime("%Y-%m")
    period: dict[str, str] = {"startDate": f"{first}-01T00:00:00Z"}
    if end:
        period["endDate"] = f"{end}-01T00:00:00Z"
    props: dict[str, Any] = {
        "category": "Cost",
        "amount": amount,
        "currency": currency,
        "timeGrain": "Monthly",
        "timePeriod": period,
        "notifications": {
            f"at{t:g}": {"enabled": True, "operator": "GreaterThanOrEqualTo", "threshold": t,
                         "contactEmails": list(contacts)}
            for t in thresholds
        },
        "actionAtLimit": action,
    }  # fmt: skip
    if groups:
        props["filter"] = {"dimensions": {"name": "ResourceGroupName", "operator": "In", "values": list(groups)}}
    elif tag:
        key, _, values = tag.partition("=")
        if not key or not values:
            raise click.UsageError("--tag takes KEY=VALUE[,VALUE...].")
        props["filter"] = {"tags": {"name": key, "operator": "In", "values": values.split(",")}}
    response = s.client.send("PUT", paths.budgets(s.need_subscription(), name), json={"properties": props})
    emit(s.output, "budget", response.json())


@budget.command("delete")
@click.argument("name")
@pass_session(resource_group=False)
def budget_delete(s: Session, name: str) -> None:
    """Delete a budget (operators)."""
    response = s.client.send("DELETE", paths.budgets(s.need_subscription(), name))
    _deleted(s, f"budget {name}", response.status_code)


# ------------------------------------------------------------------------------------------------------- costs
@click.group("cost")
def cost() -> None:
    """What the subscription's work cost, deleted resources included."""


@cost.command("query")
@click.option(
    "--timeframe",
    type=click.Choice(["MonthToDate", "TheLastMonth", "WeekToDate", "Custom"]),
    default="MonthToDate",
    show_default=True,
)
@click.option("--from", "from_", help="With --timeframe Custom: the start, ISO 8601 (e.g. 2026-11-01T00:00:00Z).")
@click.option("--to", help="With --timeframe Custom: the end, ISO 8601 (exclusive).")
@click.option(
    "--granularity",
    type=click.Choice(["None", "Hourly", "Daily", "Monthly"]),
    default="None",
    show_default=True,
)
@click.option("--group-by", "group_by", multiple=True,
              help="A dimension (ResourceGroupName, ResourceType, ResourceId, ResourceName, SubmittedBy, NodeId, "
              "Supplier) or tag:KEY; at most 3.")  # fmt: skip
@click.option("--filter", "filters", multiple=True, help="DIMENSION=VALUE[,VALUE...] or tag:KEY=VALUE[,...].")
@click.option("--measure", type=click.Choice(["Cost", "GpuSeconds", "BillableGpuSeconds"]), default="Cost")
@pass_session(resource_group=False)
def cost_query(
    s: Session,
    timeframe: str,
    from_: str | None,
    to: str | None,
    granularity: str,
    group_by: tuple[str, ...],
    filters: tuple[str, ...],
    measure: str,
) -> None:
    """Query costs (or GPU-seconds), grouped and filtered."""
    dataset: dict[str, Any] = {
        "granularity": granularity,
        "aggregation": {"total": {"name": measure, "function": "Sum"}},
        "grouping": [_grouping(g) for g in group_by],
    }
    comparisons = [_comparison(f) for f in filters]
    if len(comparisons) == 1:
        dataset["filter"] = comparisons[0]
    elif comparisons:
        dataset["filter"] = {"and": comparisons}
    body: dict[str, Any] = {"type": "ActualCost", "timeframe": timeframe, "dataset": dataset}
    if timeframe == "Custom":
        if not (from_ and to):
            raise click.UsageError("--timeframe Custom needs --from and --to.")
        body["timePeriod"] = {"from": from_, "to": to}
    answer = s.client.send("POST", paths.cost_query(s.need_subscription()), json=body).json() or {}
    if s.output == "table":
        props = answer.get("properties") or {}
        headers = [str(c.get("name")) for c in props.get("columns") or []]
        click.echo(table(headers, [list(r) for r in props.get("rows") or []]))
    else:
        emit("json", "cost", answer)


@cost.command("export")
@click.argument("day")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True),
    help="Write the CSV here (default: itl-accelerator-focus-{subscription}-{day}.csv).",
)
@pass_session(resource_group=False)
def cost_export(s: Session, day: str, out: str | None) -> None:
    """Download the subscription's FOCUS 1.2 billing file of a UTC DAY (YYYY-MM-DD): its rows of the day's export that
    you may see (consumers: your own work; suppliers: your nodes' earnings), as CSV with the FOCUS header. A day is
    exported once it has ended (about 01:30 UTC the next day). The file is CSV whatever -o says; -o json prints the
    summary (file, rows, totals per currency) as JSON."""
    try:
        day = date.fromisoformat(day).isoformat() if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", day) else ""
    except ValueError:
        day = ""
    if not day:
        raise click.BadParameter("a UTC date, YYYY-MM-DD", param_hint="DAY")
    subscription = s.need_subscription()
    path = Path(out or f"itl-accelerator-focus-{subscription}-{day}.csv")
    # the first page before the file is touched: a refused day (404, 403) leaves nothing behind or as it was
    page = (s.client.send("GET", paths.billing_export(subscription, day)).json() or {}).get("properties") or {}
    rows = 0
    totals: dict[str, Decimal] = {}
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8", newline="") as file:  # RFC 4180, as the provider's daily export
            writer = csv.writer(file)
            names = [str(c.get("name")) for c in page.get("columns") or []]
            writer.writerow(names)
            while True:
                for row in page.get("rows") or []:
                    writer.writerow(row)
                    cells = dict(zip(names, row, strict=False))
                    code = cells.get("BillingCurrency", "")
                    totals[code] = totals.get(code, Decimal(0)) + Decimal(cells.get("BilledCost") or 0)
                    rows += 1
                next_link = page.get("nextLink")
                if not next_link:
                    break
                page = (s.client.send("GET", next_link).json() or {}).get("properties") or {}
        partial.replace(path)  # the whole file, or none: a failure part-way leaves --out as it was
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    if s.output == "json":
        totals_text = {code: format(total, "f") for code, total in sorted(totals.items())}
        click.echo(json.dumps({"file": str(path), "day": day, "rows": rows, "totals": totals_text}))
        return
    summary = ", ".join(f"{format(total, 'f')} {code}" for code, total in sorted(totals.items())) or "nothing billed"
    click.echo(f"{path}: {rows} rows, {summary}")


def _grouping(text: str) -> dict[str, str]:
    if text.startswith("tag:"):
        return {"type": "TagKey", "name": text[4:]}
    return {"type": "Dimension", "name": text}


def _comparison(text: str) -> dict[str, Any]:
    name, _, values = text.partition("=")
    if not name or not values:
        raise click.UsageError("--filter takes DIMENSION=VALUE[,VALUE...] or tag:KEY=VALUE[,...].")
    kind = "tags" if name.startswith("tag:") else "dimensions"
    return {kind: {"name": name.removeprefix("tag:"), "operator": "In", "values": values.split(",")}}
