"""Usage metering end to end on the embedded AWS, with known start and stop times: meters → usage records (the
5-minute sync) → hourly roll-ups → /stats figures → the daily FOCUS export in S3, and corrections for usage that
arrives after its day was exported. Each test has a table of its own (built from template.yaml), so the export's
day cursor is the test's alone, and a clock it sets (no sleeping)."""

from __future__ import annotations

import csv
import gzip
import io
import threading
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import boto3
import httpx
import pytest

from itl_accelerator.domain.usage import MeterEnd
from itl_accelerator.repositories.dynamodb.meters import meter_end_item, meter_start_item
from tests.conftest import BUCKET, DGX_API_KEY

HOUR = 3600


def t(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


@dataclass
class Usage:
    """The metering services over one table, with a clock the test moves."""

    table: str
    repos: Any
    sync: Any
    rollups: Any
    export: Any
    stats: Any
    now: int = 0

    # ----------------------------------------------------------------------------------------------- givens
    def meter(
        self, sub: str, name: str, *, gpus: int, start: str, service: str = "instances", node: str = "dgx-1",
        dgx_id: str = "", price: str = "1.00", currency: str = "USD", increment: int = 1, minimum: int = 0,
        kind: str = "GPU", model: str = "",
    ) -> Any:  # fmt: skip
        """A meter of an allocation of ``gpus`` devices of ``kind`` (``model``) that locked ``price`` per device-hour
        in ``currency``, ``increment``/``minimum``."""
        from itl_accelerator.billing.metering import BillingTerms
        from itl_accelerator.domain.usage import Meter

        rtype = "sparkNodes/sparkOllamaInstances" if service == "instances" else "sparkJobs"
        path = f"sparkNodes/{node}/sparkOllamaInstances/{name}" if service == "instances" else f"sparkJobs/{name}"
        meter = Meter(
            allocation_id=str(uuid.uuid4()),
            subscription_id=sub,
            resource_group="rg1",
            resource_id=f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/{path}",
            resource_name=name,
            resource_type=f"ITL.Accelerator/{rtype}",
            service=service,
            node_resource_group="rg1",
            node_name=node,
            node_id=f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/{node}",
            supplier="supplier-1",
            region="westeurope",
            sku="DGX-H100-8GPU",
            gpus=gpus,
            terms=BillingTerms(Decimal(price), currency, increment, minimum),
            start=t(start),
            dgx_id=dgx_id,
            tags={"team": "ml"},
            resource_created_at="2026-03-01T00:00:00.000000Z",
            node_created_at="2026-02-01T00:00:00.000000Z",
            accelerator_kind=kind,
            accelerator_model=model,
        )
        self._transact(meter_start_item(self.table, meter))
        return meter

    def end(self, meter: Any, at: str) -> None:
        self._transact(meter_end_item(self.table, MeterEnd(meter.subscription_id, meter.allocation_id, t(at), t(at))))

    def _transact(self, item: dict[str, Any]) -> None:
        """Meters start and end in workload transitions; here, alone (the items those transitions carry)."""
        boto3.client("dynamodb").transact_write_items(TransactItems=[item])

    def meter_now(self, meter: Any) -> Any:
        from itl_accelerator.domain.usage import MeterRef

        return self.repos.meters.get(MeterRef(meter.subscription_id, meter.allocation_id))

    # ----------------------------------------------------------------------------------------------- whens
    def run_sync(self, at: str) -> Any:
        self.now = t(at)
        return self.sync.run(now=self.now)

    def records(self, meter: Any) -> list[Any]:
        from itl_accelerator.billing.metering import windows

        until = self.now if meter.end is None else meter.end
        stored = self.repos.usage.records(meter.allocation_id, list(windows(meter.start, until + 3 * HOUR)))
        return [stored[w] for w in sorted(stored)]

    def export_object(self, day: str) -> bytes:
        data_key, _ = self.export.object_keys(day)
        return boto3.client("s3").get_object(Bucket=BUCKET, Key=data_key)["Body"].read()

    def export_rows(self, day: str) -> list[dict[str, str]]:
        return list(csv.DictReader(io.StringIO(gzip.decompress(self.export_object(day)).decode())))


@pytest.fixture
def usage(aws: Any, template: Any, dgx_simulator: Any) -> Any:
    from itl_accelerator.services.api.usage_stats import UsageStatsService
    from itl_accelerator.settings import get_settings
    from itl_accelerator.wiring import Wiring
    from itl_local.aws import create_table

    table = f"usage-{uuid.uuid4().hex[:8]}"
    create_table(aws, template, table)
    settings = get_settings().model_copy(update={"table_name": table, "billing_export_prefix": f"{table}/"})
    c = Wiring.build(settings)
    state = Usage(table, c.repositories, c.usage_sync, c.usage_rollups, c.billing_export, None)
    state.stats = UsageStatsService(
        c.usage_stats._kernel, c.instances, c.jobs, c.repositories.usage, clock=lambda: state.now
    )
    yield state
    aws.delete_table(TableName=table)


def money(rows: list[dict[str, str]], column: str = "BilledCost") -> Decimal:
    return sum((Decimal(r[column]) for r in rows), Decimal(0))


# ----------------------------------------------------------------------------------------------- records


def test_an_instance_across_midnight_is_recorded_per_hour_at_its_locked_price(usage):
    # Given an instance of 2 GPUs that locked 2.40 USD per GPU-hour billed per started minute, from 23:40:10 until
    # its deletion was accepted at 01:05:00 the next day
    meter = usage.meter("sub-a", "llama", gpus=2, start="2026-03-01T23:40:10", price="2.40", increment=60, minimum=60)
    usage.end(meter, "2026-03-02T01:05:00")
    meter = replace(meter, end=t("2026-03-02T01:05:00"))  # a meter is a value: as read after its end
    # When the usage sync runs once the late period has passed
    report = usage.run_sync("2026-03-02T04:00:00")
    # Then there is one record per hour it touched, and the meter is closed
    records = usage.records(meter)
    assert [r.hour for r in records] == ["2026-03-01T23", "2026-03-02T00", "2026-03-02T01"]
    assert [r.gpu_seconds for r in records] == [2380, 7200, 600]
    assert [r.billable_gpu_seconds for r in records] == [2380, 7200, 620]
    assert [str(r.cost) for r in records] == ["1.586667", "4.800000", "0.413333"]
    assert all(r.final for r in records)
    assert report.windows_written == 3 and report.meters_closed == 1
    assert usage.sync.run(now=t("2026-03-02T05:00")).meters == 0  # closed meters are no longer read


def test_repeated_and_concurrent_syncs_count_each_window_once(usage):
    from itl_accelerator.services.schedules.usage_sync import SyncReport

    meters = [usage.meter("sub-a", f"m{i}", gpus=1 + i % 3, start="2026-03-01T08:30:00") for i in range(6)]
    for meter in meters:
        usage.end(meter, "2026-03-01T11:15:00")
    usage.now = t("2026-03-01T11:20:00")
    # When four syncs run at once (a duplicate delivery, an overlapping run) and then once more
    threads = [threading.Thread(target=usage.sync.run, kwargs={"now": usage.now}) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    again = SyncReport()
    for meter in meters:
        usage.sync.sync_meter(usage.meter_now(meter), usage.now, again)
    # Then every allocation has exactly its windows, with the figures of one run, and the repeat wrote nothing
    for meter in meters:
        records = usage.records(meter)
        assert [r.hour for r in records] == ["2026-03-01T08", "2026-03-01T09", "2026-03-01T10", "2026-03-01T11"]
        assert sum(r.gpu_seconds for r in records) == meter.gpus * (2 * HOUR + 45 * 60)
    assert again.windows_written == 0 and again.windows_unchanged == 6 * 3  # the late period re-read, unchanged
    # And the roll-up of the subscription sums them once
    usage.rollups.run()
    stats = usage.stats.subscription("sub-a", 24)
    assert stats["totals"]["gpuSeconds"] == sum(m.gpus for m in meters) * (2 * HOUR + 45 * 60)
    assert stats["totals"]["cost"] == [{"amount": format(Decimal(stats["totals"]["gpuSeconds"]) / HOUR, ".6f"),
                                        "currency": "USD"}]  # fmt: skip


def test_metrics_that_arrive_late_update_their_own_window_without_touching_the_bill(usage, dgx):
    # Given an instance the DGX simulator knows, metered for an hour and a half
    created = httpx.post(
        f"{dgx.url}/v1/instances",
        json={"name": "late", "nodeId": "n", "model": "llama3", "gpus": 1, "memoryGb": 10},
        headers={"Authorization": f"Bearer {DGX_API_KEY}", "Idempotency-Key": str(uuid.uuid4())},
    ).json()
    meter = usage.meter("sub-a", "late", gpus=1, start="2026-03-01T09:00:00", dgx_id=created["id"])
    usage.run_sync("2026-03-01T10:30:00")
    before = {r.hour: r for r in usage.records(meter)}
    # When the platform revises the 09:00 hour's utilisation: a sync within the hour reads the open hour only,
    dgx.config.late_metrics_percent = 7.0
    usage.run_sync("2026-03-01T10:35:00")
    assert {r.hour: r for r in usage.records(meter)}["2026-03-01T09"].metrics == before["2026-03-01T09"].metrics
    # and the first sync of the next hour re-reads the late hours
    report = usage.run_sync("2026-03-01T11:00:30")
    after = {r.hour: r for r in usage.records(meter)}
    # Then the 09:00 record carries the new figure, counted as a late window, and its bill did not change
    assert after["2026-03-01T09"].metrics["gpuUtilizationPercent"] == pytest.approx(
        before["2026-03-01T09"].metrics["gpuUtilizationPercent"] + 7.0
    )
    assert report.late_windows >= 1
    assert after["2026-03-01T09"].segments == before["2026-03-01T09"].segments


# ----------------------------------------------------------------------------------------------- roll-ups, stats


def test_stats_points_and_totals_match_the_run_times(usage):
    meter = usage.meter("sub-a", "llama", gpus=2, start="2026-03-01T23:40:10", price="2.40", increment=60, minimum=60)
    usage.end(meter, "2026-03-02T01:05:00")
    usage.run_sync("2026-03-02T04:00:00")
    report = usage.rollups.run()
    assert report.hours == 3 and usage.rollups.run().hours == 0  # nothing due twice
    from itl_accelerator.billing.rollup import resource_scope

    scope = resource_scope(meter.resource_id, meter.resource_created_at)
    stats = usage.stats._series("sub-a", scope, meter.resource_id, 6)
    points = {p["timeStamp"]: p for p in stats["value"]}
    assert points["2026-03-01T23:00:00Z"]["gpuSeconds"] == 2380
    assert points["2026-03-02T01:00:00Z"]["billableGpuSeconds"] == 620
    assert stats["totals"]["gpuSeconds"] == 10180 and stats["totals"]["gpuHours"] == pytest.approx(10180 / 3600)
    assert stats["totals"]["cost"] == [{"amount": "6.800000", "currency": "USD"}]
    assert len(stats["value"]) == 6 and stats["timespan"] == "2026-03-01T23:00:00Z/2026-03-02T05:00:00Z"


# ----------------------------------------------------------------------------------------------- export


def test_the_daily_export_bills_each_record_once_sums_to_the_usage_and_reruns_identically(usage):
    a = usage.meter("sub-a", "llama", gpus=2, start="2026-03-01T10:40:10", price="2.40", increment=60, minimum=60)
    b = usage.meter("sub-a", "train", gpus=4, start="2026-03-01T11:59:00", service="jobs", price="3.10")
    usage.end(b, "2026-03-01T12:00:30")
    usage.run_sync("2026-03-01T23:00:00")
    usage.end(a, "2026-03-02T00:30:00")
    usage.run_sync("2026-03-02T01:00:00")
    records_a, records_b = usage.records(a), usage.records(b)
    day = [r for r in records_a + records_b if r.day == "2026-03-01"]
    # When the export of 1 March runs at 01:30 the next day
    first = usage.export.run(now=t("2026-03-02T01:30:00"))
    (exported,) = first.days
    rows = usage.export_rows("2026-03-01")
    # Then its rows sum exactly to the day's usage records, one row per record
    assert exported.day == "2026-03-01" and exported.written
    assert money(rows) == sum((r.cost for r in day), Decimal(0))
    assert exported.manifest["totals"] == {"USD": format(money(rows), "f")}
    assert exported.manifest["rows"] == len(rows) == sum(len(r.segments) for r in day)
    assert {r["ChargeClass"] for r in rows} == {""}
    assert {r["ResourceId"] for r in rows} == {a.resource_id, b.resource_id}
    # And each allocation is billed at the price it locked, and its rows carry its allocation id
    assert {r["ListUnitPrice"] for r in rows if r["ResourceId"] == b.resource_id} == {"3.10"}
    assert {r["ListUnitPrice"] for r in rows if r["ResourceId"] == a.resource_id} == {"2.40"}
    assert {r["x_AllocationId"] for r in rows} == {a.allocation_id, b.allocation_id}
    # When the same day is exported again (a duplicate delivery, an operator's rerun)
    again = usage.export.run(now=t("2026-03-02T02:00:00"), day="2026-03-01")
    # Then nothing is rewritten: the same manifest, the same object
    assert not again.days[0].written and again.days[0].manifest == exported.manifest
    assert usage.export_rows("2026-03-01") == rows


def test_usage_that_arrives_after_its_day_was_exported_goes_out_as_corrections(usage, tmp_path):
    from itl_accelerator.services.schedules.billing_export import ExportRefused

    running = usage.meter("sub-a", "long", gpus=1, start="2026-03-01T22:00:00", service="jobs")
    usage.run_sync("2026-03-02T01:00:00")  # both hours of 1 March recorded in full, the job still running
    usage.export.run(now=t("2026-03-02T01:30:00"))
    # When the job turns out to have ended at 23:30 (the platform said so late), and a meter of 1 March that no
    # sync had read before shows up
    usage.end(running, "2026-03-01T23:30:00")
    late = usage.meter("sub-a", "forgotten", gpus=2, start="2026-03-01T20:00:00")
    usage.end(late, "2026-03-01T20:30:00")
    report = usage.run_sync("2026-03-02T03:00:00")
    assert report.corrections >= 2
    # Then 2 March's export carries them as Correction rows: the job's 23:00 hour billed back, the late usage billed
    with pytest.raises(ExportRefused):
        usage.export.run(now=t("2026-03-04T01:30:00"), day="2026-03-03")
    (second,) = usage.export.run(now=t("2026-03-03T01:30:00")).days
    rows = usage.export_rows("2026-03-02")
    corrections = [r for r in rows if r["ChargeClass"] == "Correction"]
    assert second.corrections == 2 and len(corrections) == 2
    assert money(corrections) == Decimal("-0.500000") + Decimal("1.000000")
    # And across both exports every usage record is billed exactly once, as it stands now: the job's 1.5 GPU-hours
    # (its 00:00 hour, recorded while it seemed to run, is empty now) and the late instance's 1 GPU-hour
    everything = usage.export_rows("2026-03-01") + rows
    records = usage.records(running) + usage.records(late)
    assert money(everything) == sum((r.cost for r in records), Decimal(0)) == Decimal("2.500000")
    assert sum(r.gpu_seconds for r in usage.records(running)) == 5400
    # And both files, usage and corrections, pass FinOps' focus-validator
    from itl_local import focus_validate

    if not focus_validate.DEFAULT_VENV.joinpath("bin", "focus-validator").exists():
        pytest.skip("focus-validator is not installed: ./dev test installs it")
    for day in ("2026-03-01", "2026-03-02"):
        path = tmp_path / f"focus-{day}.csv.gz"
        path.write_bytes(usage.export_object(day))
        report = focus_validate.validate(path)
        assert report.ok, report.verdict() + "\n" + report.output + report.stderr


def test_a_mixed_fleets_day_bills_each_kind_in_its_own_unit_and_passes_focus_validator(usage, tmp_path):
    # Given a day of an H100 GPU instance, a TPU v5e job and an Ascend NPU job, each an hour
    usage.meter("sub-a", "llama", gpus=2, start="2026-03-01T10:00:00", model="H100")
    usage.meter("sub-a", "tune", gpus=8, start="2026-03-01T10:00:00", service="jobs", kind="TPU", model="v5e",
                price="1.20", node="tpu-1")  # fmt: skip
    usage.meter("sub-a", "infer", gpus=4, start="2026-03-01T10:00:00", service="jobs", kind="NPU", model="910B",
                price="0.90", node="npu-1")  # fmt: skip
    usage.run_sync("2026-03-01T11:00:00")
    usage.run_sync("2026-03-02T01:00:00")
    # When the day is exported
    usage.export.run(now=t("2026-03-02T01:30:00"))
    rows = usage.export_rows("2026-03-01")
    # Then each kind is billed in its own unit, its description and custom columns name its kind and model
    units = {(r["ResourceName"], r["ConsumedUnit"], r["PricingUnit"], r["x_AcceleratorKind"], r["x_AcceleratorModel"])
             for r in rows}  # fmt: skip
    assert units == {
        ("llama", "GPU-Hours", "GPU-Hours", "GPU", "H100"),
        ("tune", "TPU-Hours", "TPU-Hours", "TPU", "v5e"),
        ("infer", "NPU-Hours", "NPU-Hours", "NPU", "910B"),
    }
    assert any(r["ChargeDescription"].startswith("TPU time (v5e) of job tune on node tpu-1") for r in rows)
    # And the file passes FinOps' focus-validator
    from itl_local import focus_validate

    if not focus_validate.DEFAULT_VENV.joinpath("bin", "focus-validator").exists():
        pytest.skip("focus-validator is not installed: ./dev test installs it")
    path = tmp_path / "focus-mixed.csv.gz"
    path.write_bytes(usage.export_object("2026-03-01"))
    report = focus_validate.validate(path)
    assert report.ok, report.verdict() + "\n" + report.output + report.stderr


@pytest.mark.parametrize("day", ["garbage", "2026-13-01", "2026-02-30", "26-11-30", "2999-01-01"])
def test_an_export_of_a_day_that_is_no_day_or_has_not_begun_is_refused(usage, day):
    from itl_accelerator.services.schedules.billing_export import ExportRefused

    with pytest.raises(ExportRefused):
        usage.export.run(now=t("2026-03-02T01:30:00"), day=day)


def test_usage_that_changes_while_its_own_day_is_being_exported_is_billed_once(usage):
    meter = usage.meter("sub-a", "early", gpus=1, start="2026-03-01T22:00:00")
    usage.run_sync("2026-03-01T22:30:00")  # the 22:00 hour recorded while it runs: 1800 GPU-s so far
    usage.repos.billing.close_day("2026-03-01", "2026-03-02")  # Given an export of 1 March under way: closed, and
    claimed = usage.export._claim_usage("2026-03-01")  # its records claimed as they were
    assert claimed == 1
    # When the hour changes after its claim, before the export wrote its file (the sync goes on meanwhile)
    usage.end(meter, "2026-03-01T22:45:00")
    assert usage.run_sync("2026-03-01T22:50:00").corrections == 1
    (day,) = usage.export.run(now=t("2026-03-01T23:00:00"), day="2026-03-01").days
    # Then the day's file bills the hour once, as it finally stands: 45 GPU-minutes, no correction line
    rows = usage.export_rows("2026-03-01")
    assert [r["ChargeClass"] for r in rows] == [""] and money(rows) == Decimal("0.750000")
    assert day.corrections == 0


def test_an_end_learned_hours_late_empties_every_hour_after_it(usage):
    meter = usage.meter("sub-a", "late-end", gpus=1, start="2026-03-01T06:00:00", service="jobs")
    usage.run_sync("2026-03-01T10:00:00")  # recorded as running until 10:00
    usage.end(meter, "2026-03-01T06:30:00")  # the platform says it ended at 06:30 (learned 3.5 hours late)
    usage.run_sync("2026-03-01T10:05:00")
    stored = usage.repos.usage.records(meter.allocation_id, [t(f"2026-03-01T{h:02d}:00") for h in range(6, 11)])
    assert [stored[w].gpu_seconds for w in sorted(stored)] == [1800, 0, 0, 0]
    assert sum((r.cost for r in stored.values()), Decimal(0)) == Decimal("0.500000")


def test_metrics_the_platform_cannot_give_never_hold_billing_back(usage, dgx):
    created = httpx.post(
        f"{dgx.url}/v1/instances",
        json={"name": "flaky", "nodeId": "n", "model": "llama3", "gpus": 1, "memoryGb": 10},
        headers={"Authorization": f"Bearer {DGX_API_KEY}", "Idempotency-Key": str(uuid.uuid4())},
    ).json()
    meter = usage.meter("sub-a", "flaky", gpus=1, start="2026-03-01T08:00:00", dgx_id=created["id"])
    # Given the platform answering every usage read with 503
    dgx.config.error_rate = 1.0
    report = usage.run_sync("2026-03-01T11:00:00")
    # Then the hours are recorded and billed all the same, and the metrics are marked to be read again
    stored = usage.meter_now(meter)
    assert report.dgx_failures >= 3 and stored.metered_until == t("2026-03-01T11:00:00")
    assert stored.metrics_retry_from == t("2026-03-01T08:00:00")
    assert sum(r.gpu_seconds for r in usage.records(meter)) == 3 * HOUR
    # When it answers again, the next sync reads the metrics of those hours and clears the mark
    dgx.config.error_rate = 0.0
    usage.run_sync("2026-03-01T11:05:00")
    assert all(r.metrics for r in usage.records(meter) if r.gpu_seconds)
    assert usage.meter_now(meter).metrics_retry_from is None


def test_one_meter_that_fails_does_not_stop_the_others(usage, monkeypatch):
    meters = [usage.meter("sub-a", f"m{i}", gpus=1, start="2026-03-01T08:00:00") for i in range(3)]
    original = usage.sync.sync_meter
    broken = meters[0].allocation_id

    def sync_meter(meter, now, report):
        if meter.allocation_id == broken:
            raise RuntimeError("a bad meter")
        return original(meter, now, report)

    monkeypatch.setattr(usage.sync, "sync_meter", sync_meter)
    report = usage.run_sync("2026-03-01T09:00:00")
    assert report.errors == 1 and report.meters == 3
    assert [len(usage.records(m)) for m in meters] == [0, 1, 1]


def test_the_export_lag_is_never_negative_after_an_early_export_of_today(usage):
    usage.meter("sub-a", "today", gpus=1, start="2026-03-01T08:00:00")
    usage.run_sync("2026-03-01T10:00:00")
    assert usage.export.lag_hours(t("2026-03-01T10:00:00")) == 10.0  # 1 March not exported yet: 10 h into it
    usage.export.run(now=t("2026-03-01T10:00:00"), day="2026-03-01")  # an operator exports today early
    assert usage.export.lag_hours(t("2026-03-01T10:30:00")) == 0.0
    assert usage.export.lag_hours(t("2026-03-02T03:00:00")) == 3.0
