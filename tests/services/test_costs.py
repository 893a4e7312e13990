"""Cost queries on the fake clock: answered from the roll-ups' cost days, equal to what the FOCUS export bills for the
same period, deleted work included, grouped and filtered as asked, and each caller seeing only the costs it may."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from itl_accelerator.errors import AuthorizationFailed, InvalidParameter
from itl_accelerator.models.costs import CostQuery
from itl_accelerator.services.api.costs import CostQueryService
from tests.services.conftest import Env
from tests.services.test_metering import DAY, export_rows, money, run_job, sync, t


def query(env: Env, ctx: Any, **body: Any) -> dict[str, Any]:
    return env.w.costs.query(ctx, env.sub, CostQuery.model_validate(body))


def one_day(**dataset: Any) -> dict[str, Any]:
    return {
        "timeframe": "Custom",
        "timePeriod": {"from": f"{DAY}T00:00:00Z", "to": "2025-03-11T00:00:00Z"},
        "dataset": dataset,
    }


def rows_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    names = [c["name"] for c in answer["properties"]["columns"]]
    return [dict(zip(names, row, strict=True)) for row in answer["properties"]["rows"]]


@pytest.fixture
def billed_day(env: Env) -> Env:
    """Two jobs of one day, by two consumers on two suppliers' nodes, metered and rolled up."""
    env.add_node("a", price=2.40, model="H100", owner="sup-a")
    env.add_node("b", price=3.10, increment=1, minimum=0, model="H200", gpu_memory_gb=141, owner="sup-b")
    run_job(env, "llama", 2, f"{DAY}T10:40:10", gpuModel="H100", ctx=env.consumer("ann"), tags={"team": "nlp"})
    run_job(env, "train", 4, f"{DAY}T11:59:00", f"{DAY}T12:00:30", gpuModel="H200", ctx=env.consumer("bob"),
            tags={"team": "vision"})  # fmt: skip
    env.clock.set(f"{DAY}T13:00:00")
    env.end_job("llama", at=t(f"{DAY}T12:10:00"))
    sync(env, "2025-03-11T01:00:00")
    env.w.usage_rollups.run()
    return env


def test_a_days_cost_equals_what_the_export_bills(billed_day: Env):
    env = billed_day
    (exported,) = env.w.billing_export.run(now=t("2025-03-11T01:30:00")).days
    billed = money(export_rows(env, DAY))
    (total,) = rows_of(query(env, env.admin(), **one_day()))
    assert Decimal(str(total["totalCost"])) == billed and total["Currency"] == "USD"
    assert exported.manifest["totals"] == {"USD": format(billed, "f")}


def test_costs_group_by_dimension_and_tag_by_day(billed_day: Env):
    env = billed_day
    answer = query(
        env,
        env.admin(),
        **one_day(
            granularity="Daily",
            aggregation={"totalCost": {"name": "Cost"}, "gpu": {"name": "GpuSeconds"}},
            grouping=[{"type": "Dimension", "name": "SubmittedBy"}, {"type": "TagKey", "name": "team"}],
        ),
    )
    assert [c["name"] for c in answer["properties"]["columns"]] == [
        "totalCost",
        "gpu",
        "UsageDate",
        "SubmittedBy",
        "team",
        "Currency",
    ]
    rows = rows_of(answer)
    assert [(r["UsageDate"], r["SubmittedBy"], r["team"]) for r in rows] == [
        (20250310, "ann", "nlp"),
        (20250310, "bob", "vision"),
    ]
    assert Decimal(str(rows[0]["totalCost"])) == Decimal(env.job_props("llama")["cost"]["amount"])
    assert rows[1]["gpu"] == env.job_props("train")["gpuSeconds"]


def test_a_filter_keeps_only_what_it_names(billed_day: Env):
    env = billed_day
    answer = query(env, env.admin(), **one_day(filter={"tags": {"name": "team", "operator": "In", "values": ["nlp"]}}))
    (row,) = rows_of(answer)
    assert Decimal(str(row["totalCost"])) == Decimal(env.job_props("llama")["cost"]["amount"])


def test_deleted_work_stays_in_the_figures(billed_day: Env):
    env = billed_day
    before = rows_of(query(env, env.admin(), **one_day()))
    assert env.w.jobs.delete(env.admin(), env.sub, "rg1", "llama")
    assert rows_of(query(env, env.admin(), **one_day())) == before


def test_each_caller_sees_only_the_costs_it_may(billed_day: Env):
    env = billed_day
    by = {"grouping": [{"type": "Dimension", "name": "SubmittedBy"}]}
    assert [r["SubmittedBy"] for r in rows_of(query(env, env.consumer("ann"), **one_day(**by)))] == ["ann"]
    assert [r["SubmittedBy"] for r in rows_of(query(env, env.consumer("bob"), **one_day(**by)))] == ["bob"]
    supplier = env.supplier("sup-b")
    assert [r["SubmittedBy"] for r in rows_of(query(env, supplier, **one_day(**by)))] == ["bob"]
    assert [r["SubmittedBy"] for r in rows_of(query(env, env.admin(), **one_day(**by)))] == ["ann", "bob"]
    assert rows_of(query(env, env.consumer("carol"), **one_day(**by))) == []


def test_a_period_that_ends_before_it_starts_is_refused(env: Env):
    body = {"timeframe": "Custom", "timePeriod": {"from": "2025-03-11T00:00:00Z", "to": "2025-03-10T00:00:00Z"}}
    with pytest.raises(InvalidParameter):
        query(env, env.admin(), **body)


def test_a_caller_outside_the_roles_is_refused(env: Env):
    stranger = env.ctx(env.principal("itl-accelerator-other", "eve"))
    with pytest.raises(AuthorizationFailed):
        query(env, stranger, timeframe="MonthToDate")


def period(start: str, end: str) -> dict[str, Any]:
    return {"timeframe": "Custom", "timePeriod": {"from": start, "to": end}, "dataset": {"granularity": "Hourly"}}


def hours_and_cost(env: Env, start: str, end: str) -> tuple[list[str], Decimal]:
    rows = rows_of(query(env, env.admin(), **period(start, end)))
    return [r["UsageDateTime"] for r in rows], sum((Decimal(str(r["totalCost"])) for r in rows), Decimal(0))


def test_an_hour_belongs_to_the_one_period_it_starts_in(billed_day: Env):
    """Adjacent periods split at half past never both count the hour they share; together they make the day."""
    env = billed_day
    day_hours, day_cost = hours_and_cost(env, f"{DAY}T00:00:00Z", "2025-03-11T00:00:00Z")
    assert day_hours == [f"{DAY}T10:00:00Z", f"{DAY}T11:00:00Z", f"{DAY}T12:00:00Z"]
    early, early_cost = hours_and_cost(env, f"{DAY}T00:00:00Z", f"{DAY}T11:30:00Z")
    late, late_cost = hours_and_cost(env, f"{DAY}T11:30:00Z", "2025-03-11T00:00:00Z")
    assert (early, late) == ([f"{DAY}T10:00:00Z", f"{DAY}T11:00:00Z"], [f"{DAY}T12:00:00Z"])
    assert early_cost + late_cost == day_cost > 0
    # an offset is the same instant: 12:30+01:00 is 11:30Z
    assert hours_and_cost(env, f"{DAY}T12:30:00+01:00", "2025-03-11T00:00:00Z")[0] == late


@pytest.mark.parametrize(
    ("start", "end", "hours"),
    [
        (f"{DAY}T11:30:00Z", f"{DAY}T11:30:00Z", []),  # an empty period is empty
        (f"{DAY}T11:30:00Z", f"{DAY}T11:30:01Z", []),  # no hour starts in one second at half past
        (f"{DAY}T11:00:00Z", f"{DAY}T11:00:01Z", [f"{DAY}T11:00:00Z"]),  # this one does
        (f"{DAY}T10:59:59Z", f"{DAY}T11:00:00Z", []),
    ],
)
def test_short_periods_hold_only_the_hours_that_start_in_them(billed_day: Env, start: str, end: str, hours: list[str]):
    assert hours_and_cost(billed_day, start, end)[0] == hours


@pytest.mark.parametrize(
    "bound",
    ["0001-01-01T00:00:00+01:00", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59-01:00", "9999-12-31T23:00:00Z",
     "1969-12-31T23:59:59Z", "2025-03-10T00:00:00"],
)  # fmt: skip
def test_a_time_out_of_range_or_without_a_zone_is_refused_naming_it(bound: str):
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as refused:
        CostQuery.model_validate(period(bound, "2025-03-11T00:00:00Z"))
    assert refused.value.errors()[0]["loc"][:2] == ("timePeriod", "from")


def test_a_time_is_a_date_time_string_and_the_latest_bound_may_end_a_period():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="ISO 8601"):
        CostQuery.model_validate(period(0, 1))  # type: ignore[arg-type]
    CostQuery.model_validate(period("8999-12-31T00:00:00Z", "9000-01-01T00:00:00Z"))  # "to" is exclusive


def test_a_grouping_given_twice_is_refused():
    from pydantic import ValidationError

    twice = {"grouping": [{"type": "TagKey", "name": "team"}, {"type": "TagKey", "name": "Team"}]}
    with pytest.raises(ValidationError, match="given twice"):
        CostQuery.model_validate({"dataset": twice})


# ---------------------------------------------------------------------------------------------- cost groups (issue 27)
class CountingUsage:
    """The usage repository, counting the cost items a query reads of each kind."""

    def __init__(self, usage: Any):
        self._usage = usage
        self.read: dict[str, int] = {"resource days": 0, "group days": 0, "group months": 0}

    def cost_groups_since(self) -> Any:
        return self._usage.cost_groups_since()

    def cost_days(self, *args: Any) -> Any:
        for item in self._usage.cost_days(*args):
            self.read["resource days"] += 1
            yield item

    def cost_group_days(self, *args: Any) -> Any:
        for item in self._usage.cost_group_days(*args):
            self.read["group days"] += 1
            yield item

    def cost_group_months(self, *args: Any) -> Any:
        for item in self._usage.cost_group_months(*args):
            self.read["group months"] += 1
            yield item


@pytest.fixture
def busy_days(env: Env) -> Env:
    """Twelve jobs over three days (10 to 12 March): two consumers, two suppliers' nodes, two teams — four cost groups,
    each job a resource of its own."""
    env.repos.usage.mark_cost_groups_since("2025-03-01T00")  # every hour of the days is rolled up with its groups
    env.add_node("a", price=2.40, model="H100", owner="sup-a")
    env.add_node("b", price=3.10, increment=1, minimum=0, model="H200", gpu_memory_gb=141, owner="sup-b")
    for n in range(12):
        day, k = f"2025-03-1{n // 4}", n % 4
        who, model = ("ann", "H100") if n % 2 else ("bob", "H200")
        start, end = f"{day}T{8 + 2 * k:02d}:{n * 4:02d}:00", f"{day}T{9 + 2 * k:02d}:{n * 3:02d}:30"
        run_job(env, f"job{n}", 1 + n % 3, start, end, gpuModel=model, ctx=env.consumer(who),
                tags={"team": "nlp" if k < 2 else "vision"})  # fmt: skip
    sync(env, "2025-03-13T01:00:00")
    env.w.usage_rollups.run()
    return env


def _by_resource(env: Env, ctx: Any, body: dict[str, Any], grouping: list[str]) -> dict[tuple[Any, ...], Decimal]:
    """The same query answered from each resource's charges (grouped by ResourceId too), summed back per group."""
    dataset = dict(body["dataset"])
    dataset["grouping"] = [{"type": "Dimension", "name": "ResourceId"}] + [
        {"type": "TagKey" if g == "team" else "Dimension", "name": g} for g in grouping
    ]
    sums: dict[tuple[Any, ...], Decimal] = {}
    for r in rows_of(query(env, ctx, **{**body, "dataset": dataset})):
        key = (r.get("UsageDate"), r.get("BillingMonth"), r.get("UsageDateTime"), *(r[g] for g in grouping))
        sums[key] = sums.get(key, Decimal(0)) + Decimal(str(r["totalCost"]))
    return sums


PERIODS = {
    "whole days": ("2025-03-10T00:00:00Z", "2025-03-13T00:00:00Z"),
    "part days at both ends": ("2025-03-10T09:30:00Z", "2025-03-12T11:00:00Z"),
    "within one day": ("2025-03-11T09:00:00Z", "2025-03-11T13:00:00Z"),
}


@pytest.mark.parametrize("granularity", ["None", "Daily", "Monthly", "Hourly"])
@pytest.mark.parametrize("period", sorted(PERIODS))
def test_a_query_by_group_equals_the_sum_of_its_resources(busy_days: Env, granularity: str, period: str):
    env = busy_days
    start, end = PERIODS[period]
    grouping = ["SubmittedBy", "team"]
    dataset = {"granularity": granularity, "grouping": [{"type": "Dimension", "name": "SubmittedBy"},
                                                         {"type": "TagKey", "name": "team"}]}  # fmt: skip
    body = {"timeframe": "Custom", "timePeriod": {"from": start, "to": end}, "dataset": dataset}
    for ctx in (env.admin(), env.consumer("ann"), env.supplier("sup-b")):
        rows = rows_of(query(env, ctx, **body))
        answered = {
            (r.get("UsageDate"), r.get("BillingMonth"), r.get("UsageDateTime"), *(r[g] for g in grouping)): Decimal(
                str(r["totalCost"])
            )
            for r in rows
        }
        assert answered == _by_resource(env, ctx, body, grouping)
        assert answered, "the period holds charges"


def test_a_month_to_date_reads_groups_by_day_not_resources(busy_days: Env):
    env = busy_days
    counting = CountingUsage(env.repos.usage)
    costs = CostQueryService(counting, env.w.access, lambda: t("2025-03-12T15:20:00"))  # type: ignore[arg-type]
    answer = costs.query(env.admin(), env.sub, CostQuery.model_validate({"timeframe": "MonthToDate"}))
    # four cost groups: their month items (10 and 11 March whole) and their day items of today (12 March, a part)
    assert counting.read == {"resource days": 0, "group days": 4, "group months": 4}
    (total,) = rows_of(answer)
    by_job = sum(Decimal(env.job_props(f"job{n}")["cost"]["amount"]) for n in range(12))
    assert Decimal(str(total["totalCost"])) == by_job
    counting.read = dict.fromkeys(counting.read, 0)
    by_resource = {"timeframe": "MonthToDate", "dataset": {"grouping": [{"type": "Dimension", "name": "ResourceId"}]}}
    assert len(rows_of(costs.query(env.admin(), env.sub, CostQuery.model_validate(by_resource)))) == 12
    assert counting.read == {"resource days": 12, "group days": 0, "group months": 0}


def test_an_hour_rolled_up_again_replaces_itself_in_its_groups_day_and_month(busy_days: Env):
    env = busy_days
    month = {"timeframe": "Custom", "timePeriod": {"from": "2025-03-01T00:00:00Z", "to": "2025-04-01T00:00:00Z"}}
    before = rows_of(query(env, env.admin(), **month))
    for hour in ("2025-03-10T10", "2025-03-11T12"):
        env.w.usage_rollups.roll_up(hour)
    assert rows_of(query(env, env.admin(), **month)) == before


def test_a_table_from_before_cost_groups_answers_its_old_days_from_the_resources(busy_days: Env):
    """Review of issue 27: a deployment upgraded on 11 March has no cost groups for the days before; its first
    roll-up after the upgrade records 11 March 05:00 as the first hour sure to hold them, and a query reads the
    resources' days up to the end of that day, the groups' after."""
    env = busy_days
    month = CostQuery.model_validate({"timeframe": "Custom", "timePeriod": {"from": "2025-03-01T00:00:00Z",
                                                                             "to": "2025-04-01T00:00:00Z"}})  # fmt: skip
    before = CostQueryService(env.repos.usage, env.w.access, env.clock).query(env.admin(), env.sub, month)
    for key in [k for k in env.state.cost_group_days if k[1] < "2025-03-12"]:
        del env.state.cost_group_days[key]  # what a table from before cost groups lacks
    for _, m in env.state.cost_group_months.values():
        m.days = {d: t for d, t in m.days.items() if d >= "2025-03-12"}
    env.state.cost_groups_since = "2025-03-11T05"
    counting = CountingUsage(env.repos.usage)
    after = CostQueryService(counting, env.w.access, env.clock).query(env.admin(), env.sub, month)  # type: ignore[arg-type]
    assert after["properties"]["rows"] == before["properties"]["rows"]
    assert counting.read == {"resource days": 8, "group days": 0, "group months": 4}  # 10-11 March; 12 March


def test_the_first_roll_up_records_the_hour_after_it_as_the_first_with_cost_groups(env: Env):
    env.clock.set("2025-03-10T10:20:00")
    env.w.usage_rollups.run()
    assert env.repos.usage.cost_groups_since() == "2025-03-10T11"
    env.clock.set("2025-03-12T00:00:00")
    env.w.usage_rollups.run()
    assert env.repos.usage.cost_groups_since() == "2025-03-10T11"  # recorded once
