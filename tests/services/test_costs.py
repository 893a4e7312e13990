"""Cost queries on the fake clock: answered from the roll-ups' cost days, equal to what the FOCUS export bills for the
same period, deleted work included, grouped and filtered as asked, and each caller seeing only the costs it may."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from itl_accelerator.errors import AuthorizationFailed, InvalidParameter
from itl_accelerator.models.costs import CostQuery
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
