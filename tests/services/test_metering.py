"""Usage metering and billing on the fake clock: jobs run (their meters started and ended by the job lifecycle) →
the usage sync's hourly records (services/schedules/usage_sync.py) → the hourly roll-ups and /stats
(usage_rollups.py, services/api/usage_stats.py) → the daily FOCUS export to S3 (billing_export.py), with
corrections for usage that changes after its day was billed."""

from __future__ import annotations

import csv
import gzip
import io
import json
from decimal import Decimal
from typing import Any

import pytest

from itl_accelerator.billing.metering import HOUR, windows
from itl_accelerator.domain.usage import UsageRecord
from itl_accelerator.errors import AuthorizationFailed
from itl_accelerator.services.schedules.billing_export import ExportRefused
from tests.services.conftest import BUCKET, Env
from tests.services.fakes import epoch_of, iso

DAY = "2025-03-10"


def t(text: str) -> int:
    return int(epoch_of(text))


def run_job(env: Env, name: str, devices: int, start: str, end: str | None = None, **props: Any) -> str:
    """A job of ``devices`` GPUs running from ``start`` (until ``end``, when the platform ends it and the tracker
    reports it); returns its allocation id (its operation id)."""
    env.clock.set(start)
    accepted = env.submit(name, devices, devices * 80, **props)
    env.run()
    assert env.status(name) == "Running", env.job_props(name)["statusReason"]
    if end is not None:
        env.clock.set(end)
        env.end_job(name, at=env.clock())
    return accepted.operation_id


def records(env: Env, allocation_id: str, first: str, last: str) -> list[UsageRecord]:
    stored = env.repos.usage.records(allocation_id, list(windows(t(first), t(last) + 1)))
    return [stored[w] for w in sorted(stored)]


def sync(env: Env, at: str):
    env.clock.set(at)
    return env.w.usage_sync.run()


def export_rows(env: Env, day: str) -> list[dict[str, str]]:
    data_key, _ = env.w.billing_export.object_keys(day)
    return list(csv.DictReader(io.StringIO(gzip.decompress(env.s3.body(BUCKET, data_key)).decode())))


def money(rows: list[dict[str, str]]) -> Decimal:
    return sum((Decimal(r["BilledCost"]) for r in rows), Decimal(0))


# ------------------------------------------------------------------------------------------------ records
def test_a_job_across_midnight_is_recorded_per_hour_at_its_locked_price(env):
    # Given a 2-GPU job on a node at 2.40 USD per GPU-hour billed per started minute, from 23:40:10 to 01:05:00
    env.add_node(price=2.40)
    allocation = run_job(env, "j", 2, f"{DAY}T23:40:10", "2025-03-11T01:05:00")
    # When the usage sync runs once the late period has passed
    report = sync(env, "2025-03-11T04:00:00")
    # Then there is one record per hour it touched, final, at its locked price; the meter is closed
    found = records(env, allocation, f"{DAY}T23:00:00", "2025-03-11T02:00:00")
    assert [r.hour for r in found] == [f"{DAY}T23", "2025-03-11T00", "2025-03-11T01"]
    assert [r.gpu_seconds for r in found] == [2380, 7200, 600]
    assert [r.billable_gpu_seconds for r in found] == [2380, 7200, 620]  # the last hour carries the rounding
    assert [str(r.cost) for r in found] == ["1.586667", "4.800000", "0.413333"]
    assert all(r.final for r in found)
    assert report.windows_written == 3 and report.meters_closed == 1
    # And the job's own cost is exactly the sum of its records
    props = env.job_props("j")
    assert props["gpuSeconds"] == 10180 and props["billableGpuSeconds"] == 10200
    assert props["cost"] == {"amount": "6.800000", "currency": "USD"}
    assert sync(env, "2025-03-11T05:00:00").meters == 0  # a closed meter is no longer read


def test_a_running_job_is_recorded_up_to_now_and_repeated_syncs_write_nothing_new(env, node):
    allocation = run_job(env, "j", 1, f"{DAY}T08:00:00")
    first = sync(env, f"{DAY}T09:30:00")
    found = records(env, allocation, f"{DAY}T08:00:00", f"{DAY}T09:00:00")
    assert [(r.hour, r.gpu_seconds, r.final) for r in found] == [(f"{DAY}T08", 3600, True), (f"{DAY}T09", 1800, False)]
    assert first.windows_written == 2
    again = env.w.usage_sync.run()  # a duplicate delivery of the schedule: the meter is not due again yet
    assert again.meters == 0
    later = sync(env, f"{DAY}T10:15:00")
    found = records(env, allocation, f"{DAY}T08:00:00", f"{DAY}T10:00:00")
    assert [(r.gpu_seconds, r.final) for r in found] == [(3600, True), (3600, True), (900, False)]
    assert later.windows_unchanged == 1 and later.windows_written == 2


def test_metrics_that_arrive_late_update_their_own_window_without_touching_the_bill(env, node):
    allocation = run_job(env, "j", 1, f"{DAY}T09:00:00")
    sync(env, f"{DAY}T10:30:00")
    before = records(env, allocation, f"{DAY}T09:00:00", f"{DAY}T09:00:00")[0]
    assert before.metrics["gpuUtilizationPercent"] == 50.0
    # When the platform revises its figures, a sync within the same hour reads the current hour only
    env.dgx.metrics_offset = 7.0
    env.dgx.calls.clear()
    sync(env, f"{DAY}T10:35:00")
    assert [call[1] for call in env.dgx.called("get_usage")] == [f"{DAY}T10:00:00Z"]
    assert records(env, allocation, f"{DAY}T09:00:00", f"{DAY}T09:00:00")[0].metrics == before.metrics
    # and the first sync of the next hour re-reads the late hours
    report = sync(env, f"{DAY}T11:00:30")
    after = records(env, allocation, f"{DAY}T09:00:00", f"{DAY}T09:00:00")[0]
    # Then the 09:00 record carries the new figure, counted as late, and its bill is the same
    assert after.metrics["gpuUtilizationPercent"] == 57.0 and report.late_windows >= 1
    assert after.segments == before.segments and after.cost == before.cost


def test_an_hour_is_read_as_final_a_bounded_number_of_times(env, node):
    """Issue 27: every sync re-read the last hours for every meter (about 48 platform reads per hour and meter).
    Now an hour is read while open, and as final at most ``usage_late_windows + 1`` times, however often the sync
    runs; an ended meter is read when its end is known and once when it settles."""
    run_job(env, "j", 1, f"{DAY}T08:00:00")
    env.dgx.calls.clear()
    minute = 0
    while minute < 6 * 60:  # six hours of syncs every 5 minutes
        sync(env, f"{DAY}T{8 + minute // 60:02d}:{minute % 60:02d}:30")
        minute += 5
    reads = [call[1] for call in env.dgx.called("get_usage")]
    nine = [r for r in reads if r.startswith(f"{DAY}T09:00:00")]
    assert len(nine) <= 12 + env.settings.usage_late_windows + 1  # 12 syncs while open (every 5 min), 3 as final
    assert len(reads) <= 6 * 12 + 6 * (env.settings.usage_late_windows + 1)
    # an ended job: read when its end is known, once more when it settles (then its meter closes), not between
    allocation = env.job("j").operation_id
    env.clock.set(f"{DAY}T14:10:00")
    env.end_job("j", at=env.clock())
    reading_syncs = 0
    for _ in range(40):  # 200 minutes of syncs every 5 minutes: past the 2-hour late period
        env.clock.advance(300)
        env.dgx.calls.clear()
        sync(env, iso(env.clock()))
        reading_syncs += bool(env.dgx.called("get_usage"))
    meter = env.meter(allocation)
    assert meter is None or not meter.active
    assert reading_syncs == 2


def test_metrics_the_platform_cannot_give_never_hold_billing_back(env, node):
    allocation = run_job(env, "j", 1, f"{DAY}T08:00:00")
    env.dgx.down("get_usage")
    report = sync(env, f"{DAY}T11:00:00")
    # Then the hours are recorded and billed all the same, and their metrics are marked to be read again
    meter = env.meter(allocation)
    assert report.dgx_failures >= 3 and meter.metered_until == t(f"{DAY}T11:00:00")
    assert meter.metrics_retry_from == t(f"{DAY}T08:00:00")
    found = records(env, allocation, f"{DAY}T08:00:00", f"{DAY}T10:00:00")
    assert sum(r.gpu_seconds for r in found) == 3 * HOUR and all(r.metrics is None for r in found)
    # When the platform answers again, the next sync reads them and clears the mark
    env.dgx.heal()
    sync(env, f"{DAY}T11:05:00")
    assert all(r.metrics for r in records(env, allocation, f"{DAY}T08:00:00", f"{DAY}T10:00:00"))
    assert env.meter(allocation).metrics_retry_from is None


def test_one_meter_that_fails_does_not_stop_the_others(env, node):
    allocations = [run_job(env, f"j{i}", 1, f"{DAY}T08:00:00") for i in range(3)]
    env.dgx.broken_usage = {str(env.job("j0").dgx_id)}
    report = sync(env, f"{DAY}T09:00:00")
    assert report.errors == 1 and report.meters == 3
    assert [len(records(env, a, f"{DAY}T08:00:00", f"{DAY}T08:00:00")) for a in allocations] == [0, 1, 1]


def test_an_end_learned_hours_late_empties_every_hour_after_it(env):
    env.add_node(price=1.0, increment=1, minimum=0)
    allocation = run_job(env, "j", 1, f"{DAY}T10:00:00")
    sync(env, f"{DAY}T14:00:00")  # recorded as running until 14:00
    # When the tracker learns at 14:05 that the job ended at 10:30 on the platform
    env.clock.set(f"{DAY}T14:05:00")
    env.end_job("j", at=t(f"{DAY}T10:30:00"))
    sync(env, f"{DAY}T14:05:00")
    # Then billing stopped at 10:30: the hours after it are empty, and the job costs half a GPU-hour
    found = records(env, allocation, f"{DAY}T10:00:00", f"{DAY}T14:00:00")
    assert [r.gpu_seconds for r in found] == [1800, 0, 0, 0]
    assert sum((r.cost for r in found), Decimal(0)) == Decimal("0.500000")
    assert env.job_props("j")["cost"]["amount"] == "0.500000"


# ------------------------------------------------------------------------------------------------ roll-ups, stats
def test_rollups_sum_each_hour_once_and_stats_show_the_jobs_cost(env):
    env.add_node(price=2.40)
    run_job(env, "j", 2, f"{DAY}T23:40:10", "2025-03-11T01:05:00")
    sync(env, "2025-03-11T04:00:00")
    first = env.w.usage_rollups.run()
    assert first.hours == 3 and env.w.usage_rollups.run().hours == 0  # nothing due twice
    stats = env.w.usage_stats.job(env.admin(), env.sub, "rg1", "j", 6)
    points = {p["timeStamp"]: p for p in stats["value"]}
    assert len(stats["value"]) == 6 and stats["timespan"] == f"{DAY}T23:00:00Z/2025-03-11T05:00:00Z"
    assert points[f"{DAY}T23:00:00Z"]["gpuSeconds"] == 2380
    assert points["2025-03-11T01:00:00Z"]["billableGpuSeconds"] == 620
    assert stats["totals"]["gpuSeconds"] == 10180
    assert stats["totals"]["cost"] == [{"amount": "6.800000", "currency": "USD"}]
    assert stats["totals"]["gpuUtilizationPercent"] == 50.0
    assert env.w.usage_stats.subscription(env.sub, 6)["totals"]["cost"] == stats["totals"]["cost"]


def test_node_stats_are_the_owning_suppliers_and_the_admins_only(env, node):
    run_job(env, "j", 2, f"{DAY}T08:00:00", f"{DAY}T09:00:00")
    sync(env, f"{DAY}T12:00:00")
    env.w.usage_rollups.run()
    owner = env.w.usage_stats.node(env.supplier("owner-123"), env.sub, "rg1", "dgx-1", 24)
    admin = env.w.usage_stats.node(env.admin(), env.sub, "rg1", "dgx-1", 24)
    assert owner["totals"]["gpuSeconds"] == admin["totals"]["gpuSeconds"] == 7200
    assert admin["totals"]["allocatedPercent"] == round(100 * 7200 / (8 * 3600 * 24), 2)
    with pytest.raises(AuthorizationFailed):
        env.w.usage_stats.node(env.supplier("someone-else"), env.sub, "rg1", "dgx-1", 24)


# ------------------------------------------------------------------------------------------------ the export
def two_jobs_of_one_day(env: Env) -> tuple[str, str]:
    env.add_node("a", price=2.40, model="H100")
    env.add_node("b", price=3.10, increment=1, minimum=0, model="H200", gpu_memory_gb=141)
    a = run_job(env, "llama", 2, f"{DAY}T10:40:10", gpuModel="H100")
    b = run_job(env, "train", 4, f"{DAY}T11:59:00", f"{DAY}T12:00:30", gpuModel="H200")
    env.clock.set(f"{DAY}T13:00:00")
    env.end_job("llama", at=t(f"{DAY}T12:10:00"))
    sync(env, "2025-03-11T01:00:00")
    return a, b


def test_the_daily_export_bills_each_record_once_and_sums_to_the_jobs_costs(env):
    a, b = two_jobs_of_one_day(env)
    assert env.w.billing_export.run(now=t("2025-03-11T01:00:00")).days == []  # not before its grace period
    # When the export of 10 March runs at 01:30 the next day
    (exported,) = env.w.billing_export.run(now=t("2025-03-11T01:30:00")).days
    rows = export_rows(env, DAY)
    # Then its rows sum exactly to the day's records, which sum to the jobs' costs
    day = records(env, a, f"{DAY}T00:00:00", f"{DAY}T23:00:00") + records(env, b, f"{DAY}T00:00:00", f"{DAY}T23:00:00")
    costs = Decimal(env.job_props("llama")["cost"]["amount"]) + Decimal(env.job_props("train")["cost"]["amount"])
    assert exported.day == DAY and exported.written and exported.claimed == len(day)
    assert money(rows) == sum((r.cost for r in day), Decimal(0)) == costs
    assert exported.manifest["rows"] == len(rows) == sum(len(r.segments) for r in day)
    assert exported.manifest["totals"] == {"USD": format(money(rows), "f")}
    assert {r["ChargeClass"] for r in rows} == {""}
    assert {r["x_AllocationId"] for r in rows} == {a, b}
    assert {Decimal(r["ListUnitPrice"]) for r in rows if r["x_AllocationId"] == a} == {Decimal("2.4")}
    assert {Decimal(r["ListUnitPrice"]) for r in rows if r["x_AllocationId"] == b} == {Decimal("3.1")}
    # And the object and its manifest are in S3, the manifest last
    data_key, manifest_key = env.w.billing_export.object_keys(DAY)
    assert data_key == f"focus/2025-03/{DAY}/itl-accelerator-focus-{DAY}.csv.gz"
    assert env.s3.writes == [(BUCKET, data_key), (BUCKET, manifest_key)]
    assert json.loads(env.s3.body(BUCKET, manifest_key)) == exported.manifest
    assert env.s3.objects[(BUCKET, data_key)].content_type == "application/gzip"
    # When the same day is exported again, nothing is rewritten
    again = env.w.billing_export.run(now=t("2025-03-11T02:00:00"), day=DAY)
    assert not again.days[0].written and again.days[0].manifest == exported.manifest
    assert len(env.s3.writes) == 2


def test_usage_that_changes_after_its_day_was_billed_goes_out_as_a_correction(env):
    env.add_node(price=1.0, increment=1, minimum=0)
    allocation = run_job(env, "long", 1, f"{DAY}T22:00:00")
    sync(env, "2025-03-11T01:00:00")  # 22:00, 23:00 and 00:00 recorded while it seemed to run
    (first,) = env.w.billing_export.run(now=t("2025-03-11T01:30:00")).days
    assert money(export_rows(env, DAY)) == Decimal("2.000000")
    # When the platform turns out to have ended it at 23:30 on the 10th (the tracker hears of it late)
    env.clock.set("2025-03-11T02:00:00")
    env.end_job("long", at=t(f"{DAY}T23:30:00"))
    report = sync(env, "2025-03-11T03:00:00")
    assert report.corrections == 1
    # Then the 11th's export carries the 23:00 hour billed back as a Correction row
    (second,) = env.w.billing_export.run(now=t("2025-03-12T01:30:00")).days
    rows = export_rows(env, "2025-03-11")
    corrections = [r for r in rows if r["ChargeClass"] == "Correction"]
    assert second.corrections == 1 and len(corrections) == 1
    assert money(corrections) == Decimal("-0.500000")
    # And across both exports the job is billed exactly its cost
    assert money(export_rows(env, DAY)) + money(rows) == Decimal(env.job_props("long")["cost"]["amount"])
    assert env.job_props("long")["cost"]["amount"] == "1.500000"
    assert first.written and second.written
    assert sum(r.gpu_seconds for r in records(env, allocation, f"{DAY}T22:00:00", "2025-03-11T00:00:00")) == 5400


def test_usage_that_changes_while_its_own_day_is_being_exported_is_billed_once(env):
    env.add_node(price=1.0, increment=1, minimum=0)
    run_job(env, "early", 1, f"{DAY}T22:00:00")
    sync(env, f"{DAY}T22:30:00")  # the 22:00 hour recorded while it runs: 1800 GPU-s so far
    # Given an export of the 10th under way: the day closed, its records claimed as they were
    assert env.repos.billing.close_day(DAY, "2025-03-11")
    assert env.w.billing_export._claim_usage(DAY) == 1
    # When the hour changes after its claim, before the file is written (the job ended at 22:45)
    env.clock.set(f"{DAY}T22:50:00")
    env.end_job("early", at=t(f"{DAY}T22:45:00"))
    assert sync(env, f"{DAY}T22:50:00").corrections == 1
    (day,) = env.w.billing_export.run(now=t(f"{DAY}T23:00:00"), day=DAY).days
    # Then the day's file bills the hour once, as it finally stands, with no correction line
    rows = export_rows(env, DAY)
    assert [r["ChargeClass"] for r in rows] == [""] and money(rows) == Decimal("0.750000")
    assert day.corrections == 0 and env.job_props("early")["cost"]["amount"] == "0.750000"


def test_a_name_submitted_again_starts_without_the_figures_of_the_one_before(env, node):
    run_job(env, "j", 1, f"{DAY}T08:00:00", f"{DAY}T09:00:00")
    env.w.jobs.delete(env.admin(), env.sub, "rg1", "j")
    run_job(env, "j", 2, f"{DAY}T10:00:00", f"{DAY}T10:30:00")
    sync(env, f"{DAY}T14:00:00")
    env.w.usage_rollups.run()
    stats = env.w.usage_stats.job(env.admin(), env.sub, "rg1", "j", 24)
    assert stats["totals"]["gpuSeconds"] == 3600  # the second job's 2 x 30 minutes only
    assert env.w.usage_stats.subscription(env.sub, 24)["totals"]["gpuSeconds"] == 7200


@pytest.mark.parametrize(
    ("day", "why"),
    [
        ("garbage", "is not a day"),
        ("2025-13-01", "is not a day"),
        ("2025-02-30", "is not a day"),
        ("25-03-10", "is not a day"),
        ("2999-01-01", "has not begun yet"),
        ("2025-03-12", "2025-03-10 is to be exported before 2025-03-12"),
        ("2025-03-09", "2025-03-09 is before the first day with usage; it has nothing to bill and is never exported"),
    ],
)
def test_an_export_of_a_day_that_is_no_day_not_begun_or_not_next_is_refused_saying_why(env, node, day, why):
    run_job(env, "j", 1, f"{DAY}T08:00:00")
    sync(env, f"{DAY}T09:00:00")  # the export cursor starts at the 10th
    with pytest.raises(ExportRefused, match=why):
        env.w.billing_export.run(now=t("2025-03-12T12:00:00"), day=day)
    assert env.s3.writes == []


def test_the_export_lag_is_never_negative_after_an_early_export_of_today(env, node):
    assert env.w.billing_export.lag_hours(t(f"{DAY}T10:00:00")) is None  # no usage yet
    run_job(env, "j", 1, f"{DAY}T08:00:00")
    sync(env, f"{DAY}T10:00:00")
    assert env.w.billing_export.lag_hours(t(f"{DAY}T10:00:00")) == 10.0
    env.w.billing_export.run(now=t(f"{DAY}T10:00:00"), day=DAY)  # an operator exports today early
    assert env.w.billing_export.lag_hours(t(f"{DAY}T10:30:00")) == 0.0
    assert env.w.billing_export.lag_hours(t("2025-03-11T03:00:00")) == 3.0


def test_a_failed_provisioning_bills_nothing(env, node):
    env.dgx.fail_on_ready = True
    accepted, _ = env.provision()
    env.run()
    assert env.instance_props()["provisioningState"] == "Failed"
    assert env.meter(accepted.operation_id) is None
    assert env.w.usage_sync.run(now=env.clock() + 7200).meters == 0
