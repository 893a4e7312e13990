"""A subscription's FOCUS billing file of a day (services/api/billing_files.py): exactly its rows of the day's export,
as billed, scoped like the cost query, page by page; a day not exported yet is a clear 404."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from itl_accelerator.errors import AuthorizationFailed, BillingExportNotFound, InvalidParameter
from itl_accelerator.services.api.billing_files import decode_token
from tests.services.conftest import SUB, Env
from tests.services.test_costs import billed_day  # noqa: F401  (the fixture)
from tests.services.test_metering import DAY, export_rows, money, run_job, sync, t

NEXT_DAY = "2025-03-11"


def billing_file(env: Env, ctx: Any, day: str = DAY, top: int | None = None) -> list[dict[str, str]]:
    """Every row of the file, page after page, as the export's CSV reader gives them (column → cell)."""
    rows: list[dict[str, str]] = []
    token = None
    while True:
        page, token = env.w.billing_files.page(ctx, env.sub, day, token, top)
        names = [c["name"] for c in page["properties"]["columns"]]
        rows += [dict(zip(names, row, strict=True)) for row in page["properties"]["rows"]]
        if token is None:
            return rows


def key(row: dict[str, str]) -> tuple[str, ...]:
    return row["x_AllocationId"], row["ChargePeriodStart"], row["ChargeClass"], row["ListUnitPrice"]


@pytest.fixture
def exported(billed_day: Env) -> Env:  # noqa: F811
    billed_day.w.billing_export.run(now=t(f"{NEXT_DAY}T01:30:00"))
    return billed_day


def test_an_admins_file_is_the_subscriptions_rows_of_the_days_export(exported: Env):
    env = exported
    rows = billing_file(env, env.admin())
    export = export_rows(env, DAY)
    assert sorted(rows, key=key) == sorted(export, key=key)  # every column, cell for cell
    assert {r["BillingAccountId"] for r in rows} == {f"/subscriptions/{SUB}"}
    # and paged one entry at a time, the pages join into the same file
    assert billing_file(env, env.admin(), top=1) == rows


def test_each_caller_gets_the_rows_the_cost_query_lets_it_see(exported: Env):
    env = exported
    ann = billing_file(env, env.consumer("ann"))
    assert {r["ResourceName"] for r in ann} == {"llama"}
    assert money(ann) == Decimal(env.job_props("llama")["cost"]["amount"])
    assert {r["ResourceName"] for r in billing_file(env, env.supplier("sup-b"))} == {"train"}
    assert billing_file(env, env.consumer("carol")) == []
    narrow = env.consumer("ann", scopes=[f"/subscriptions/{SUB}/resourceGroups/other"])
    assert billing_file(env, narrow) == []  # a caller holding another resource group sees none of rg1's rows
    with pytest.raises(AuthorizationFailed):
        billing_file(env, env.ctx(env.principal("itl-accelerator-other", "eve")))


def test_a_day_not_exported_yet_is_a_clear_404(billed_day: Env):  # noqa: F811
    env = billed_day
    with pytest.raises(BillingExportNotFound, match="does not exist yet"):
        billing_file(env, env.admin())
    with pytest.raises(BillingExportNotFound, match="not ended yet"):
        billing_file(env, env.admin(), day="2099-01-01")


def test_a_day_exported_before_files_per_subscription_says_so(exported: Env):
    env = exported
    state = env.state.export_days[DAY]
    env.state.export_days[DAY] = type(state)(state.day, state.state, state.manifest, by_subscription=False)
    with pytest.raises(BillingExportNotFound, match="before billing files per subscription existed"):
        billing_file(env, env.admin())


@pytest.mark.parametrize("day", ["2025-3-10", "2025-02-30", "yesterday", "2025-03-10T00", "٢٠٢٥-03-10"])
def test_a_day_that_is_not_a_date_is_refused_naming_it(exported: Env, day: str):
    with pytest.raises(InvalidParameter) as refused:
        billing_file(exported, exported.admin(), day=day)
    assert refused.value.target == "day"


@pytest.mark.parametrize("token", ["garbage", "QiM=", "Zm9v"])
def test_a_skip_token_the_api_did_not_give_is_refused(token: str):
    with pytest.raises(InvalidParameter):
        decode_token(token)


def test_a_change_after_the_export_goes_out_in_a_later_days_file_and_never_rewrites_the_day(env: Env):
    env.add_node(price=1.0, increment=1, minimum=0)
    run_job(env, "long", 1, f"{DAY}T22:00:00")
    sync(env, f"{NEXT_DAY}T01:00:00")
    env.w.billing_export.run(now=t(f"{NEXT_DAY}T01:30:00"))
    before = billing_file(env, env.admin())
    assert money(before) == Decimal("2.000000")
    # When the job turns out to have ended at 23:30 (heard of late) and the 11th is exported
    env.clock.set(f"{NEXT_DAY}T02:00:00")
    env.end_job("long", at=t(f"{DAY}T23:30:00"))
    sync(env, f"{NEXT_DAY}T03:00:00")
    env.w.billing_export.run(now=t("2025-03-12T01:30:00"))
    # Then the 10th's file is what it was, and the 11th's carries the correction, as the export does
    assert billing_file(env, env.admin()) == before
    later = billing_file(env, env.admin(), day=NEXT_DAY)
    assert sorted(later, key=key) == sorted(export_rows(env, NEXT_DAY), key=key)
    assert [money([r]) for r in later if r["ChargeClass"] == "Correction"] == [Decimal("-0.500000")]
    assert money(before) + money(later) == Decimal(env.job_props("long")["cost"]["amount"])


def test_a_late_record_that_changes_again_in_the_same_export_is_billed_both_times(env: Env):
    from dataclasses import replace as copied

    env.add_node(price=1.0, increment=1, minimum=0)
    allocation = run_job(env, "early", 1, f"{DAY}T10:00:00", f"{DAY}T10:30:00")
    sync(env, f"{NEXT_DAY}T01:00:00")
    env.w.billing_export.run(now=t(f"{NEXT_DAY}T01:30:00"))  # the 10th exported
    on_time = env.repos.usage.get(allocation, t(f"{DAY}T10:00:00"))
    assert on_time is not None
    # Given usage of the 10th that reaches the store only now (a meter no sync had read): queued as a correction
    late = copied(on_time, allocation_id="late-1", billed=None, corrections=0, content_hash="")
    assert env.repos.usage.write(late, None) == "correction"
    # When the 11th's export has billed it by a correction line, and it changes again before the file is written
    assert env.repos.billing.close_day(NEXT_DAY, "2025-03-12")
    assert env.w.billing_export._claim_corrections(NEXT_DAY) == 1
    billed_once = env.repos.usage.get("late-1", late.window_start)
    assert billed_once is not None
    doubled = [{**s, "gpuSeconds": 3600, "billableGpuSeconds": 3600, "cost": "1.000000"} for s in late.segments]
    changed = copied(billed_once, segments=doubled, content_hash="")
    assert env.repos.usage.write(changed, billed_once) == "correction"
    env.w.billing_export.run(now=t("2025-03-12T01:30:00"), day=NEXT_DAY)
    # Then the 11th bills it twice, first as it came and then the difference: in all, what it finally is
    corrections = [r for r in export_rows(env, NEXT_DAY) if r["x_AllocationId"] == "late-1"]
    assert [r["ChargeClass"] for r in corrections] == ["Correction", "Correction"]
    assert money(corrections) == Decimal("1.000000")
    assert money([r for r in billing_file(env, env.admin(), NEXT_DAY) if r["x_AllocationId"] == "late-1"]) == Decimal(
        "1.000000"
    )


def test_a_tag_changed_after_the_claim_is_not_what_the_day_billed_in_either_file(billed_day: Env):  # noqa: F811
    env = billed_day
    # Given the 10th closed and claimed by an export that was cut off before it wrote the file
    assert env.repos.billing.close_day(DAY, NEXT_DAY)
    assert env.w.billing_export._claim_usage(DAY) > 0
    # When the job's tags change in its usage records meanwhile (the bill's segments unchanged)
    for record in env.state.usage.values():
        record.descriptor = {**record.descriptor, "tags": {"team": "renamed"}}
    env.w.billing_export.run(now=t(f"{NEXT_DAY}T02:30:00"), day=DAY)
    # Then the daily file and the subscription's file both bill the tags as claimed, cell for cell
    export = export_rows(env, DAY)
    assert "renamed" not in {r["Tags"] for r in export}
    assert sorted(billing_file(env, env.admin()), key=key) == sorted(export, key=key)


def test_a_page_token_never_names_an_allocation_the_caller_may_not_see(exported: Env):
    env = exported
    allocations = {r["x_AllocationId"] for r in export_rows(env, DAY)}
    token, tokens = None, []
    while True:
        _page, token = env.w.billing_files.page(env.consumer("ann"), env.sub, DAY, token, 1)
        if token is None:
            break
        tokens.append(decode_token(token))
    assert tokens and not any(a in k for k in tokens for a in allocations)


def test_a_day_past_retention_is_gone_not_empty(exported: Env):
    env = exported
    env.clock.set("2026-05-01T00:00:00")  # 400 days after the 10th of March 2025, and more
    with pytest.raises(BillingExportNotFound, match="no longer kept"):
        billing_file(env, env.admin())
