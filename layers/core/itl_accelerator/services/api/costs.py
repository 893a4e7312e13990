"""Cost queries (models/costs.py): what a subscription's work cost, over any past period, grouped and filtered by
resource group, resource type, resource, submitter, node, supplier or tag — answered from what the hourly roll-up
keeps (billing/rollup.py), for every resource, deleted or not: each *cost group*'s (the resources alike in every
dimension but themselves) charges by day in a month and by hour in a day, so a query reads groups x days, not
resources x days (issue 27: a month to date of 30,000 resource-days read 29 MiB); a query that groups or filters by
``ResourceId`` or ``ResourceName`` reads each resource's charges by hour. The figures are those of the usage records
the FOCUS export bills: a query and the export agree for the same period.

Who sees what (docs/RBAC.md): admins every charge; consumers the charges of the work they asked for (their jobs);
suppliers the charges of the work on their nodes while they owned them (their earnings) — whoever holds several
roles, the union; a caller holding only some resource groups, those groups only. Needs ``costQuery/action``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.arm import validate_subscription_id
from itl_accelerator.auth import rbac
from itl_accelerator.billing.rollup import CostDimensions, Totals
from itl_accelerator.errors import InvalidParameter
from itl_accelerator.models.costs import CostQuery, QueryFilter
from itl_accelerator.repositories.protocols import UsageRepository
from itl_accelerator.services.common.access import Access, Target
from itl_accelerator.services.common.context import CallContext

#: The longest period one query covers (days).
MAX_DAYS = 366
#: The most rows one answer holds.
MAX_ROWS = 50_000


def _dimension(d: CostDimensions, name: str) -> str:
    return {
        "ResourceGroupName": d.resource_group,
        "ResourceType": d.resource_type,
        "ResourceId": d.resource_id,
        "ResourceName": d.resource_name,
        "SubmittedBy": d.submitted_by,
        "NodeId": d.node_id,
        "Supplier": d.supplier,
        "AcceleratorKind": d.accelerator_kind,
        "AcceleratorModel": d.accelerator_model,
    }[name]


def _tag(d: CostDimensions, key: str) -> str:
    """The value of tag ``key`` (names are case-insensitive, as ARM's), "" when the resource has none."""
    return next((v for k, v in d.tags if k.lower() == key.lower()), "")


def _matches(d: CostDimensions, f: QueryFilter | None) -> bool:
    if f is None:
        return True
    if f.and_ is not None:
        return all(_matches(d, x) for x in f.and_)
    if f.or_ is not None:
        return any(_matches(d, x) for x in f.or_)
    if f.dimensions is not None:
        wanted = {v.lower() for v in f.dimensions.values}
        return _dimension(d, f.dimensions.name).lower() in wanted
    assert f.tags is not None
    return _tag(d, f.tags.name) in f.tags.values


#: What one item of the cost store holds for a query: the dimensions it is grouped, filtered and confined by, and its
#: charges in the period by hour (``YYYY-MM-DDTHH``) or whole day (``YYYY-MM-DD``).
Span = tuple[CostDimensions, list[tuple[str, Totals]]]

#: The dimensions only a resource's own charges carry: a query naming them reads resources x days.
RESOURCE_DIMENSIONS = frozenset({"resourceid", "resourcename"})


def _filter_names(f: QueryFilter | None) -> Iterator[str]:
    if f is None:
        return
    for sub in (f.and_ or []) + (f.or_ or []):
        yield from _filter_names(sub)
    if f.dimensions is not None:
        yield f.dimensions.name


def _names_resource(query: CostQuery) -> bool:
    """Whether the query groups or filters by the resource itself (``ResourceId``, ``ResourceName``)."""
    names = [g.name for g in query.dataset.grouping if g.type == "Dimension"]
    names += list(_filter_names(query.dataset.filter))
    return any(n.lower() in RESOURCE_DIMENSIONS for n in names)


def _next_day(day: str) -> str:
    return (date.fromisoformat(day) + timedelta(days=1)).isoformat()


def _days(first: str, last: str) -> list[str]:
    """The days ``first`` to ``last`` (``YYYY-MM-DD``) inclusive."""
    days, day = [], first
    while day <= last:
        days.append(day)
        day = _next_day(day)
    return days


def period_of(query: CostQuery, now: datetime) -> tuple[datetime, datetime]:
    """``[start, end)`` of the query (UTC): this month so far, last month, this week so far (from Monday), or the
    custom period. 400 for a period that ends before it starts or is longer than :data:`MAX_DAYS`."""
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if query.timeframe == "MonthToDate":
        return today.replace(day=1), now
    if query.timeframe == "TheLastMonth":
        first = today.replace(day=1)
        return (first - timedelta(days=1)).replace(day=1), first
    if query.timeframe == "WeekToDate":
        return today - timedelta(days=today.weekday()), now
    assert query.time_period is not None
    start, end = query.time_period.from_, query.time_period.to  # UTC, between 1970 and 9000 (models/costs.py)
    if end < start:
        raise InvalidParameter("'timePeriod.to' is before 'timePeriod.from'.", target="timePeriod.to")
    if end - start > timedelta(days=MAX_DAYS):
        raise InvalidParameter(f"A query covers at most {MAX_DAYS} days.", target="timePeriod")
    return start.astimezone(UTC), end.astimezone(UTC)


def _hour_start(hour: str) -> datetime:
    return datetime.strptime(hour, "%Y-%m-%dT%H").replace(tzinfo=UTC)


def hours_of_period(start: datetime, end: datetime) -> tuple[str, str]:
    """The hours a period ``[start, end)`` (UTC) holds, as ``(first, stop)`` hour keys (``YYYY-MM-DDTHH``): those
    with ``first <= hour < stop``, i.e. the hours that *start* in the period. So ``[10:30, 11:30)`` holds 11:00 only,
    ``[10:00, 10:30)`` holds 10:00, an empty period none, and adjacent periods never share an hour (docs/
    API_REFERENCE.md, "Cost queries"). A month to date ends now: the current hour started in it, so it counts."""

    def ceil(moment: datetime) -> str:
        floor = moment.replace(minute=0, second=0, microsecond=0)
        return (floor if floor == moment else floor + timedelta(hours=1)).strftime("%Y-%m-%dT%H")

    return ceil(start), ceil(end)


def require_cost_read(access: Access, ctx: CallContext, subscription_id: str, type_name: str, name: str) -> None:
    """The caller may read the subscription's costs (``costQuery/action``): the cost query and the billing files
    (billing_files.py), each a subscription-level resource ``.../providers/ITL.Accelerator/{type_name}[/{name}]``.
    400 for a malformed subscription id; 404 outside the caller's scopes; 403 (audited) without the permission."""
    validate_subscription_id(subscription_id)
    path = type_name if name == type_name else f"{type_name}/{name}"
    resource_id = f"/subscriptions/{subscription_id}/providers/{PROVIDER_NAMESPACE}/{path}"
    target = Target.of_subscription(subscription_id, resource_id, f"{PROVIDER_NAMESPACE}/{type_name}", name)
    access.require_any(ctx, (rbac.COSTS_READ,), target)


def charges_visible_to(ctx: CallContext, subscription_id: str) -> Callable[[CostDimensions], bool]:
    """Whether the caller sees a charge of ``subscription_id`` with these dimensions (module docstring, "Who sees
    what"; docs/RBAC.md): admins every charge, consumers their own work's, suppliers their nodes' — within the
    resource groups the caller holds. The cost query and the billing files (billing_files.py) answer the same."""
    principal = ctx.principal
    groups = principal.resource_groups_in(subscription_id)
    visible_groups = {g.lower() for g in groups} if groups is not None else None

    def sees(d: CostDimensions) -> bool:
        if visible_groups is not None and d.resource_group.lower() not in visible_groups:
            return False
        return (
            rbac.ROLE_ADMIN in principal.roles
            or (rbac.ROLE_CONSUMER in principal.roles and d.submitted_by == principal.subject)
            or (rbac.ROLE_SUPPLIER in principal.roles and d.supplier == principal.subject)
        )

    return sees


class CostQueryService:
    """Cost queries over the usage repository's cost days. ``clock`` returns epoch seconds."""

    def __init__(self, usage: UsageRepository, access: Access, clock: Callable[[], float] = time.time):
        self._usage = usage
        self._access = access
        self._clock = clock

    def query(self, ctx: CallContext, subscription_id: str, query: CostQuery) -> dict[str, Any]:
        """The answer (module docstring): ``{"id", "name", "type", "properties": {"columns", "rows"}}``; rows
        ordered by time bucket, then group values, then currency. 400 for a bad period or too many rows; 404
        outside the caller's scopes; 403 (audited) without the permission."""
        require_cost_read(self._access, ctx, subscription_id, "costQuery", "costQuery")
        start, end = period_of(query, datetime.fromtimestamp(self._clock(), UTC))
        first, stop = hours_of_period(start, end)
        if first >= stop:
            return self._answer(subscription_id, query, {})  # no hour starts in the period
        if _names_resource(query):
            spans: Iterable[Span] = self._resource_spans(subscription_id, first, stop)
        else:
            spans = self._spans(subscription_id, first, stop, hourly=query.dataset.granularity == "Hourly")
        sums = self._aggregate(query, self._visible(ctx, subscription_id, spans))
        return self._answer(subscription_id, query, sums)

    # ----------------------------------------------------------------------------------------------- what is read
    def _resource_spans(self, subscription_id: str, first: str, stop: str) -> Iterator[Span]:
        """Each resource's hours of the period (a query that groups or filters by resource: resources x days)."""
        last_day = (_hour_start(stop) - timedelta(hours=1)).date().isoformat()
        for day in self._usage.cost_days(subscription_id, first[:10], last_day):
            yield day.dimensions, [(h, t) for h, t in day.hours.items() if first <= h < stop]

    def _spans(self, subscription_id: str, first: str, stop: str, *, hourly: bool) -> Iterator[Span]:
        """The period's charges from the cost groups where every hour of the day is sure to hold them
        (``UsageRepository.cost_groups_since``: from the day after the one it names), from the resources' days
        before — so a table from before cost groups answers its old days as it always did."""
        since = self._usage.cost_groups_since()
        boundary = f"{_next_day(since[:10])}T00" if since is not None else "~"
        if first < boundary:
            yield from self._resource_spans(subscription_id, first, min(stop, boundary))
        if stop > boundary:
            yield from self._group_spans(subscription_id, max(first, boundary), stop, hourly=hourly)

    def _group_spans(self, subscription_id: str, first: str, stop: str, *, hourly: bool) -> Iterator[Span]:
        """Each cost group's charges of the period (billing/rollup.py ``group_dimensions``: groups x days, never
        resources): the whole days from the groups' month items, by day; the days the period holds only part of (its
        first and last, or every day of an hourly query) from the groups' day items, by hour (Slurm's day and hour
        tables, issue 27)."""
        days = _days(first[:10], (_hour_start(stop) - timedelta(hours=1)).date().isoformat())
        whole = set() if hourly else {d for d in days if f"{d}T00" >= first and f"{_next_day(d)}T00" <= stop}
        for month in sorted({d[:7] for d in whole}):
            for m in self._usage.cost_group_months(subscription_id, month):
                yield m.dimensions, [(d, t) for d, t in m.days.items() if d in whole]
        part = [d for d in days if d not in whole]
        ranges = [(part[0], part[-1])] if hourly else [(d, d) for d in part]
        for a, b in ranges:
            for day in self._usage.cost_group_days(subscription_id, a, b):
                yield day.dimensions, [(h, t) for h, t in day.hours.items() if first <= h < stop]

    # ----------------------------------------------------------------------------------------------- who sees what
    @staticmethod
    def _visible(ctx: CallContext, subscription_id: str, spans: Iterable[Span]) -> Iterable[Span]:
        sees = charges_visible_to(ctx, subscription_id)
        return (span for span in spans if sees(span[0]))

    # ----------------------------------------------------------------------------------------------- sums
    @staticmethod
    def _bucket(query: CostQuery, key: str) -> str:
        """The time bucket of an hour (``YYYY-MM-DDTHH``) or a whole day (``YYYY-MM-DD``; never hourly)."""
        granularity = query.dataset.granularity
        if granularity == "Hourly":
            return f"{key}:00:00Z"
        if granularity == "Daily":
            return key[:10].replace("-", "")
        if granularity == "Monthly":
            return key[:7]
        return ""

    def _aggregate(self, query: CostQuery, spans: Iterable[Span]) -> dict[tuple[str, tuple[str, ...]], Totals]:
        """Totals by (time bucket, group values) of the spans' hours and days (all in the period)."""
        sums: dict[tuple[str, tuple[str, ...]], Totals] = {}
        for d, charges in spans:
            if not _matches(d, query.dataset.filter):
                continue
            group = tuple(
                _dimension(d, g.name) if g.type == "Dimension" else _tag(d, g.name) for g in query.dataset.grouping
            )
            for key, totals in charges:
                bucket = (self._bucket(query, key), group)
                if bucket not in sums:
                    sums[bucket] = Totals()
                # the measures a query answers (a full merge would add the utilisation figures no query reads)
                sums[bucket].add_record(totals.gpu_seconds, totals.billable_gpu_seconds, totals.costs, None)
        return sums

    def _answer(
        self, subscription_id: str, query: CostQuery, sums: dict[tuple[str, tuple[str, ...]], Totals]
    ) -> dict[str, Any]:
        measures = [a.name for a in query.dataset.aggregation.values()]
        names = list(query.dataset.aggregation)
        by_cost = "Cost" in measures
        columns = [{"name": n, "type": "Number"} for n in names]
        granularity = query.dataset.granularity
        if granularity == "Daily":
            columns.append({"name": "UsageDate", "type": "Number"})
        elif granularity == "Monthly":
            columns.append({"name": "BillingMonth", "type": "String"})
        elif granularity == "Hourly":
            columns.append({"name": "UsageDateTime", "type": "String"})
        columns += [{"name": g.name, "type": "String"} for g in query.dataset.grouping]
        if by_cost:
            columns.append({"name": "Currency", "type": "String"})
        rows: list[list[Any]] = []
        for (bucket, group), totals in sorted(sums.items()):
            currencies = sorted(totals.costs) if by_cost else [""]
            for currency in currencies or [""]:
                row: list[Any] = []
                for measure in measures:
                    if measure == "Cost":
                        row.append(float(totals.costs.get(currency, Decimal(0))))
                    elif measure == "GpuSeconds":
                        row.append(totals.gpu_seconds)
                    else:
                        row.append(totals.billable_gpu_seconds)
                if granularity == "Daily":
                    row.append(int(bucket))
                elif granularity in ("Monthly", "Hourly"):
                    row.append(bucket)
                row.extend(group)
                if by_cost:
                    row.append(currency)
                rows.append(row)
                if len(rows) > MAX_ROWS:
                    raise InvalidParameter(
                        f"The query answers more than {MAX_ROWS} rows: narrow its period, granularity or groups.",
                        target="dataset",
                    )
        name = str(uuid.uuid4())
        return {
            "id": f"/subscriptions/{subscription_id}/providers/{PROVIDER_NAMESPACE}/costQuery/{name}",
            "name": name,
            "type": f"{PROVIDER_NAMESPACE}/costQuery",
            "properties": {"columns": columns, "rows": rows, "nextLink": None},
        }
