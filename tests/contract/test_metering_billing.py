"""MeterRepository (the sync's work list and progress), UsageRepository (records written compare-and-set, roll-ups)
and BillingRepository (the export's cursor, day states, claims and corrections)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from itl_accelerator.billing.rollup import Rollup, Totals
from itl_accelerator.domain.records import Instance
from itl_accelerator.domain.usage import CorrectionDue, ExportDay, MeterRef, UsageRecord, hour_key
from itl_accelerator.repositories.dynamodb import dynamodb_repositories, keys
from itl_accelerator.repositories.protocols import Effects, Expect, Repositories
from tests.contract.builders import (
    DAY1_START,
    HOUR,
    TERMS,
    create_node,
    make_audit,
    make_meter,
    make_node,
    make_usage,
    place_instance,
)

DAY1, DAY2, DAY3 = "2024-05-01", "2024-05-02", "2024-05-03"
DAY2_START = DAY1_START + 24 * HOUR
H0, H1 = hour_key(DAY1_START), hour_key(DAY1_START + HOUR)


# ---------------------------------------------------------------------------------------------- meters
def start_meters(repos: Repositories, sub: str, starts: dict[str, int]) -> Instance:
    """Meters ``allocation id → start`` started by transitions of one instance; the instance as it is then."""
    node = create_node(repos, make_node(sub))
    instance = place_instance(repos, node)
    for n, (allocation_id, start) in enumerate(starts.items()):
        after = replace(instance, etag=f"m{n}")
        repos.instances.update(
            instance,
            after,
            make_audit(sub),
            expect=Expect(etag=instance.etag),
            effects=Effects(meter_start=make_meter(sub, allocation_id, start=start)),
        )
        instance = after
    return instance


def test_a_meter_reads_back_as_started(repos: Repositories, sub: str) -> None:
    start_meters(repos, sub, {"alloc-a": 1000})
    meter = repos.meters.get(MeterRef(sub.upper(), "alloc-a"))
    assert meter == replace(
        make_meter(sub, "alloc-a", start=1000, gpus=2), metered_until=1000
    )  # recorded from its start
    assert meter is not None and (meter.end, meter.active, meter.terms) == (None, True, TERMS)
    assert repos.meters.get(MeterRef(sub, "alloc-b")) is None


def test_open_meters_are_the_subscriptions_meters_until_they_close(repos: Repositories, sub: str) -> None:
    start_meters(repos, sub, {"alloc-a": 1000, "alloc-b": 2000})
    start_meters(repos, f"{sub}-other", {"alloc-c": 1000})
    assert [m.allocation_id for m in repos.meters.open_in(sub.upper())] == ["alloc-a", "alloc-b"]
    a = repos.meters.get(MeterRef(sub, "alloc-a"))
    assert a is not None
    repos.meters.advance(a, metered_until=1900, due=None)  # closed
    assert [m.allocation_id for m in repos.meters.open_in(sub)] == ["alloc-b"]


def test_a_months_charges_are_settled_once_per_meter_and_scope(repos: Repositories, sub: str) -> None:
    start_meters(repos, sub, {"alloc-a": 1000, "alloc-b": 2000})
    a, b = (repos.meters.get(MeterRef(sub, x)) for x in ("alloc-a", "alloc-b"))
    assert a is not None and b is not None
    usd = {"SUBSCRIPTION": {"USD": Decimal("1.250000")}, "RG#rg1": {"USD": Decimal("1.250000")}}
    assert repos.meters.settle(a, "2024-05", usd) is True
    assert repos.meters.settle(a, "2024-05", usd) is False  # once: a retried close adds nothing
    assert repos.meters.settle(b, "2024-05", {"SUBSCRIPTION": {"USD": Decimal("0.5"), "EUR": Decimal("2")}}) is True
    assert repos.meters.settle(a, "2024-06", {"SUBSCRIPTION": {"USD": Decimal("7")}}) is True
    settled = repos.meters.settled(sub, "2024-05", ("SUBSCRIPTION", "RG#rg1", "TAG#team#nlp"))
    assert settled == {
        "SUBSCRIPTION": {"USD": Decimal("1.75"), "EUR": Decimal("2")},
        "RG#rg1": {"USD": Decimal("1.25")},
        "TAG#team#nlp": {},
    }
    found = repos.meters.get(MeterRef(sub, "alloc-a"))
    assert found is not None and found.settled_months == frozenset({"2024-05", "2024-06"})


def test_meters_due_and_the_progress_of_their_sync(repos: Repositories, sub: str) -> None:
    start_meters(repos, sub, {"alloc-a": 1000, "alloc-b": 2000})
    a, b = MeterRef(sub, "alloc-a"), MeterRef(sub, "alloc-b")

    assert repos.meters.due(999, 10) == []
    assert repos.meters.due(1500, 10) == [a]
    assert set(repos.meters.due(2000, 10)) == {a, b}
    assert len(repos.meters.due(2000, 1)) == 1

    meter_a = repos.meters.get(a)
    assert meter_a is not None
    repos.meters.advance(meter_a, metered_until=1800, due=5000, metrics_retry_from=1000)
    found = repos.meters.get(a)
    assert found is not None and (found.metered_until, found.metrics_retry_from, found.active) == (1800, 1000, True)
    assert repos.meters.due(4999, 10) == [b]
    assert set(repos.meters.due(5000, 10)) == {a, b}

    repos.meters.advance(meter_a, metered_until=1900, due=None)  # closed: out of the due list
    found = repos.meters.get(a)
    assert found is not None and (found.metered_until, found.metrics_retry_from, found.active) == (1900, None, False)
    assert repos.meters.due(10**9, 10) == [b]

    repos.meters.advance(make_meter(sub, "alloc-gone"), metered_until=1, due=1)  # a meter gone is left alone
    assert repos.meters.get(MeterRef(sub, "alloc-gone")) is None
    assert repos.meters.due(10**9, 10) == [b]


# ---------------------------------------------------------------------------------------------- usage records
def test_a_usage_record_is_written_compare_and_set(repos: Repositories) -> None:
    first = make_usage("alloc-1", metrics={"gpuUtilizationPercent": 50})
    assert repos.usage.write(first, None) == "written"
    stored = repos.usage.get("alloc-1", DAY1_START)
    assert stored is not None
    assert (stored.content_hash, stored.segments, stored.metrics, stored.billed) == (
        first.content_hash,
        first.segments,
        {"gpuUtilizationPercent": 50},
        None,
    )

    assert repos.usage.write(make_usage("alloc-1", cost="6.000000"), None) == "conflict"  # it exists
    second = make_usage("alloc-1", cost="6.000000", final=True)
    assert repos.usage.write(second, stored) == "written"
    assert repos.usage.write(make_usage("alloc-1", cost="7.000000"), stored) == "conflict"  # stale
    found = repos.usage.get("alloc-1", DAY1_START)
    assert found is not None and (found.content_hash, found.final) == (second.content_hash, True)

    assert repos.usage.write(make_usage("alloc-1", DAY1_START + HOUR), None) == "written"
    assert sorted(repos.usage.records("alloc-1", [DAY1_START, DAY1_START + HOUR, DAY1_START + 2 * HOUR])) == [
        DAY1_START,
        DAY1_START + HOUR,
    ]
    assert repos.usage.records("alloc-2", [DAY1_START]) == {}
    assert repos.usage.get("alloc-1", DAY2_START) is None


def test_the_records_of_an_hour(repos: Repositories) -> None:
    for allocation in ("alloc-3", "alloc-1", "alloc-2"):
        repos.usage.write(make_usage(allocation), None)
    repos.usage.write(make_usage("alloc-1", DAY1_START + HOUR), None)
    assert sorted(r.allocation_id for r in repos.usage.hour_records(H0)) == ["alloc-1", "alloc-2", "alloc-3"]
    assert [r.window_start for r in repos.usage.hour_records(H1)] == [DAY1_START + HOUR]
    assert list(repos.usage.hour_records("2024-05-01T05")) == []


def test_each_write_marks_its_hour_due_for_a_roll_up(repos: Repositories) -> None:
    assert repos.usage.due_rollups(10) == []
    repos.usage.write(make_usage("alloc-1", DAY1_START + HOUR), None)
    repos.usage.write(make_usage("alloc-1"), None)
    due = repos.usage.due_rollups(10)
    assert [hour for hour, _ in due] == [H0, H1]  # oldest first
    assert repos.usage.due_rollups(1) == due[:1]
    versions = dict(due)

    stored = repos.usage.get("alloc-1", DAY1_START)
    repos.usage.write(make_usage("alloc-1", cost="9.000000"), stored)  # newer usage marks the hour again
    assert repos.usage.rollup_done(H0, versions[H0]) is False
    assert repos.usage.rollup_done(H0, "never") is False
    current = dict(repos.usage.due_rollups(10))[H0]
    assert current != versions[H0]
    assert repos.usage.rollup_done(H0, current) is True
    assert repos.usage.due_rollups(10) == [(H1, versions[H1])]
    assert repos.usage.rollup_done(H0, current) is False


def test_roll_ups_by_scope_and_hour(repos: Repositories, sub: str) -> None:
    totals = Totals(gpu_seconds=7200, billable_gpu_seconds=7200, costs={"USD": Decimal("5.000000")}, requests=3)
    later = Totals(gpu_seconds=3600, costs={"USD": Decimal("2.5"), "EUR": Decimal("1.25")}, energy_wh=Decimal("1.5"))
    repos.usage.put_rollups(
        [
            Rollup(sub, "SUBSCRIPTION", H0, totals, 1),
            Rollup(sub, "SUBSCRIPTION", H1, later, 1),
            Rollup(sub, "RES#/x#2024", H0, later, 1),
            Rollup(f"{sub}-other", "SUBSCRIPTION", H0, later, 1),
        ]
    )
    assert repos.usage.rollups(sub.upper(), "subscription", H0, H1) == {H0: totals, H1: later}
    assert repos.usage.rollups(sub, "SUBSCRIPTION", H1, "2024-05-01T23") == {H1: later}
    assert repos.usage.rollups(sub, "RES#/X#2024", "2024-04-30T00", H0) == {H0: later}

    repos.usage.put_rollups([Rollup(sub, "SUBSCRIPTION", H0, later, 1)])  # replaces the hour's
    assert repos.usage.rollups(sub, "SUBSCRIPTION", H0, H0) == {H0: later}


# ---------------------------------------------------------------------------------------------- the export
def test_the_cursor_and_the_day_states(repos: Repositories) -> None:
    assert repos.billing.export_cursor() is None
    assert repos.billing.close_day(DAY1, DAY2) is False  # no cursor yet
    repos.billing.open_days_from(DAY1)
    repos.billing.open_days_from("2024-04-01")  # unless it exists
    assert repos.billing.export_cursor() == DAY1
    assert repos.billing.export_day(DAY1) is None

    assert repos.billing.close_day(DAY2, DAY3) is False  # the cursor is elsewhere
    assert repos.billing.close_day(DAY1, DAY2) is True
    assert repos.billing.export_cursor() == DAY2
    assert repos.billing.export_day(DAY1) == ExportDay(DAY1, "Closed", by_subscription=True)
    assert repos.billing.close_day(DAY1, DAY2) is False

    manifest = {"files": [f"{DAY1}/part-0.csv"], "rows": 3}
    repos.billing.mark_exported(DAY1, manifest)
    assert repos.billing.export_day(DAY1) == ExportDay(DAY1, "Exported", manifest, by_subscription=True)


def test_usage_of_a_closed_day_is_queued_as_a_correction(repos: Repositories) -> None:
    repos.billing.open_days_from(DAY1)
    assert repos.usage.write(make_usage("alloc-1"), None) == "written"  # the day is open
    assert repos.billing.close_day(DAY1, DAY2)

    assert repos.usage.write(make_usage("alloc-2"), None) == "correction"
    stored = repos.usage.get("alloc-1", DAY1_START)
    assert repos.usage.write(make_usage("alloc-1", cost="9.000000"), stored) == "correction"
    assert repos.usage.write(make_usage("alloc-3", DAY2_START), None) == "written"

    due = repos.billing.corrections_due(10)
    assert [(d.hour, d.allocation_id) for d in due] == [(H0, "alloc-1"), (H0, "alloc-2")]
    assert repos.billing.corrections_due(1) == due[:1]
    assert repos.usage.get("alloc-2", DAY1_START) is not None  # queued, and written


def test_a_record_is_claimed_once_as_it_is(repos: Repositories) -> None:
    repos.usage.write(make_usage("alloc-1"), None)
    stale = make_usage("alloc-1", cost="1.000000")
    assert repos.billing.claim(stale, DAY1) is False  # not what is stored
    record = repos.usage.get("alloc-1", DAY1_START)
    assert record is not None
    assert repos.billing.claim(record, DAY1) is True
    assert record.billed == {
        "day": DAY1,
        "segments": record.segments,
        "hash": record.billing_hash,
        "descriptor": record.descriptor,  # the cells the day's file writes, as claimed
    }
    assert repos.billing.claim(record, DAY1) is False  # claimed
    stored = repos.usage.get("alloc-1", DAY1_START)
    assert stored is not None and stored.billed == record.billed
    assert repos.billing.claim(make_usage("alloc-9"), DAY1) is False  # no such record


def test_billed_usage_that_changes_goes_out_as_a_correction(repos: Repositories) -> None:
    repos.usage.write(make_usage("alloc-1"), None)
    record = repos.usage.get("alloc-1", DAY1_START)
    assert record is not None and repos.billing.claim(record, DAY1)
    billed = repos.usage.get("alloc-1", DAY1_START)
    assert billed is not None

    late_metrics = make_usage("alloc-1", metrics={"gpuUtilizationPercent": 80})  # the same bill
    assert repos.usage.write(late_metrics, billed) == "written"
    assert late_metrics.billed == billed.billed  # the write carries the billing state over
    assert repos.billing.corrections_due(10) == []
    with_metrics = repos.usage.get("alloc-1", DAY1_START)
    assert with_metrics is not None and with_metrics.billed == billed.billed

    assert repos.usage.write(make_usage("alloc-1", cost="9.000000"), billed) == "conflict"  # stale
    changed = make_usage("alloc-1", cost="9.000000", metrics={"gpuUtilizationPercent": 80})
    assert repos.usage.write(changed, with_metrics) == "correction"
    assert [(d.hour, d.allocation_id) for d in repos.billing.corrections_due(10)] == [(H0, "alloc-1")]
    stored = repos.usage.get("alloc-1", DAY1_START)
    assert stored is not None and stored.billed == billed.billed and stored.content_hash == changed.content_hash


def _queued_correction(repos: Repositories) -> tuple[UsageRecord, CorrectionDue]:
    """A record billed in DAY1, changed since: the stored record and its queue entry."""
    repos.usage.write(make_usage("alloc-1"), None)
    record = repos.usage.get("alloc-1", DAY1_START)
    assert record is not None and repos.billing.claim(record, DAY1)
    assert repos.usage.write(make_usage("alloc-1", cost="9.000000"), record) == "correction"
    changed = repos.usage.get("alloc-1", DAY1_START)
    assert changed is not None
    (due,) = repos.billing.corrections_due(10)
    return changed, due


def test_a_correction_is_claimed_with_its_line_together(repos: Repositories) -> None:
    changed, due = _queued_correction(repos)
    line = {"ChargeCategory": "Adjustment", "BilledCost": "4.000000", "x_AllocationId": "alloc-1"}

    assert repos.billing.claim_correction(changed, replace(due, version="stale"), DAY3, line) is False
    stale = make_usage("alloc-1", cost="1.000000")
    stale.billed = changed.billed
    assert repos.billing.claim_correction(stale, due, DAY3, line) is False
    assert list(repos.billing.correction_lines(DAY3)) == []
    assert repos.billing.corrections_due(10) == [due]

    assert repos.billing.claim_correction(changed, due, DAY3, line) is True
    assert list(repos.billing.correction_lines(DAY3)) == [line]
    assert repos.billing.corrections_due(10) == []
    stored = repos.usage.get("alloc-1", DAY1_START)
    assert stored is not None
    assert stored.billed == {
        "day": DAY1,
        "segments": changed.segments,
        "hash": changed.billing_hash,
        "descriptor": changed.descriptor,
    }
    assert stored.corrections == 1
    assert repos.billing.claim_correction(changed, due, DAY3, line) is False  # claimed once


def test_each_claim_keeps_its_subscriptions_bill_entry_as_it_was_billed(repos: Repositories) -> None:
    # Given two subscriptions' usage of DAY1, claimed for DAY1
    for allocation, sub in (("alloc-1", "sub-a"), ("alloc-2", "sub-a"), ("alloc-3", "sub-b")):
        repos.usage.write(make_usage(allocation, sub=sub), None)
        record = repos.usage.get(allocation, DAY1_START)
        assert record is not None and repos.billing.claim(record, DAY1)
    # Then each subscription's part of the day holds its own usage only, in key order, page by page
    first, after = repos.billing.bill_entries("SUB-A", DAY1, None, 1)  # keys are case-insensitive, as ARM's
    assert after == first[0].key and "alloc" not in after  # a key names the hour, never the allocation
    rest, last = repos.billing.bill_entries("sub-a", DAY1, after, 5)
    assert sorted(e.allocation_id for e in first + rest) == ["alloc-1", "alloc-2"] and last is None
    assert after < rest[0].key
    (entry,), _ = repos.billing.bill_entries("sub-b", DAY1, None, 5)
    assert (entry.window_start, entry.correction) == (DAY1_START, False)
    assert entry.segments[0]["cost"] == "5.000000" and entry.descriptor["subscriptionId"] == "sub-b"
    assert repos.billing.bill_entries("sub-a", DAY2, None, 5) == ([], None)
    # When a billed record changes and goes out as a correction line of DAY3
    stored = repos.usage.get("alloc-3", DAY1_START)
    assert stored is not None
    assert repos.usage.write(make_usage("alloc-3", cost="9.000000", sub="sub-b"), stored) == "correction"
    changed = repos.usage.get("alloc-3", DAY1_START)
    (due,) = repos.billing.corrections_due(10)
    delta = {"pricePerGpuHour": "2.5", "currency": "USD", "gpuSeconds": 0, "billableGpuSeconds": 0, "cost": "4"}
    assert changed is not None
    assert repos.billing.claim_correction(changed, due, DAY3, {"deltas": [delta]})
    # Then DAY1's entry stays what went out, and DAY3 holds the correction
    assert repos.billing.bill_entries("sub-b", DAY1, None, 5)[0][0].segments[0]["cost"] == "5.000000"
    (line,), _ = repos.billing.bill_entries("sub-b", DAY3, None, 5)
    assert line.correction and line.segments == [delta] and line.key == keys.bill_correction_sk(H0, "alloc-3", 1)


def test_usage_claimed_again_while_its_own_day_is_exported_replaces_its_entry(repos: Repositories) -> None:
    repos.billing.open_days_from(DAY1)
    repos.usage.write(make_usage("alloc-1"), None)
    assert repos.billing.close_day(DAY1, DAY2)
    record = repos.usage.get("alloc-1", DAY1_START)
    assert record is not None and repos.billing.claim(record, DAY1)
    assert repos.usage.write(make_usage("alloc-1", cost="7.000000"), record) == "correction"
    changed = repos.usage.get("alloc-1", DAY1_START)
    (due,) = repos.billing.corrections_due(10)
    assert changed is not None and repos.billing.claim_correction(changed, due, DAY1, None)
    (entry,), _ = repos.billing.bill_entries("sub-usage", DAY1, None, 5)
    assert entry.segments[0]["cost"] == "7.000000" and not entry.correction


def test_correction_lines_in_order_and_a_correction_with_nothing_to_bill(repos: Repositories) -> None:
    changed, due = _queued_correction(repos)
    assert repos.billing.claim_correction(changed, due, DAY2, {"n": 1})
    stored = repos.usage.get("alloc-1", DAY1_START)
    assert stored is not None
    assert repos.usage.write(make_usage("alloc-1", cost="12.000000"), stored) == "correction"
    again = repos.usage.get("alloc-1", DAY1_START)
    (due,) = repos.billing.corrections_due(10)
    assert again is not None and again.corrections == 1
    assert repos.billing.claim_correction(again, due, DAY2, {"n": 2})
    assert [line["n"] for line in repos.billing.correction_lines(DAY2)] == [1, 2]

    third = repos.usage.get("alloc-1", DAY1_START)
    assert third is not None and third.corrections == 2
    assert repos.usage.write(make_usage("alloc-1", cost="12.000000", final=True), third) == "written"  # same bill
    assert repos.billing.corrections_due(10) == []


def test_a_queued_correction_whose_record_is_gone_is_dropped(repos: Repositories) -> None:
    _, due = _queued_correction(repos)
    repos.billing.drop_correction(due)
    assert repos.billing.corrections_due(10) == []
    repos.billing.drop_correction(due)  # gone already: no error


@pytest.mark.parametrize("line", [None])
def test_a_correction_with_no_line_updates_the_bill_only(repos: Repositories, line: None) -> None:
    changed, due = _queued_correction(repos)
    assert repos.billing.claim_correction(changed, due, DAY3, line) is True
    assert list(repos.billing.correction_lines(DAY3)) == []
    stored = repos.usage.get("alloc-1", DAY1_START)
    assert stored is not None and stored.corrections == 0 and stored.billed is not None
    assert stored.billed["hash"] == changed.billing_hash


# ---------------------------------------------------------------------------------------------- the write path
@pytest.fixture
def table(moto_dynamodb: Any, contract_template: Any) -> Iterator[tuple[Any, str]]:
    """A fresh table of template.yaml's definition on moto: (client, name)."""
    from itl_local.aws import create_table

    name = f"contract-{uuid.uuid4().hex[:12]}"
    create_table(moto_dynamodb, contract_template, name)
    yield moto_dynamodb, name
    moto_dynamodb.delete_table(TableName=name)


def _items(client: Any, name: str, pk: str) -> list[dict[str, Any]]:
    response = client.query(
        TableName=name,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": pk}},
        ConsistentRead=True,
    )
    return list(response["Items"])


def test_a_burst_of_usage_writes_spreads_its_marks_and_cursor_checks_over_the_shards(table: tuple[Any, str]) -> None:
    """Issue 27: every usage write put the one ``SYS#ROLLUPDUE`` item of its hour and read the one export cursor,
    so an hour's writes could go no faster than one item allows. Now each touches its allocation's shard."""
    client, name = table
    repos = dynamodb_repositories(client, name)
    repos.billing.open_days_from(DAY1)
    allocations = [f"alloc-{n}" for n in range(64)]
    for allocation in allocations:
        assert repos.usage.write(make_usage(allocation), None) == "written"
    marked = [s for s in range(keys.WRITE_PATH_SHARDS) if _items(client, name, keys.rollup_due_pk(s))]
    assert marked == list(range(keys.WRITE_PATH_SHARDS))
    assert _items(client, name, keys.ROLLUP_DUE_PK) == []  # the one item every write put before
    ((hour, token),) = repos.usage.due_rollups(10)
    assert hour == H0 and len(token.split(";")) == keys.WRITE_PATH_SHARDS
    repos.usage.write(make_usage("one-more"), None)  # re-marks one shard's item of the hour
    assert repos.usage.rollup_done(H0, token) is False  # so the hour stays due, by that one mark
    ((_, token),) = repos.usage.due_rollups(10)
    assert len(token.split(";")) == 1 and repos.usage.rollup_done(H0, token) is True
    assert repos.usage.due_rollups(10) == []

    assert repos.billing.close_day(DAY1, DAY2)
    copies = [_items(client, name, keys.export_cursor_copy_pk(s)) for s in range(keys.WRITE_PATH_SHARDS)]
    assert [c[0]["nextDay"]["S"] for c in copies] == [DAY2] * keys.WRITE_PATH_SHARDS
    outcomes = {repos.usage.write(make_usage(f"late-{a}"), None) for a in allocations}
    assert outcomes == {"correction"}  # whichever copy a write checks, the day is closed


def test_a_table_from_before_the_shards_keeps_its_marks_and_gets_its_cursor_copies(table: tuple[Any, str]) -> None:
    client, name = table
    repos = dynamodb_repositories(client, name)
    client.put_item(TableName=name, Item={"PK": {"S": keys.ROLLUP_DUE_PK}, "SK": {"S": H1}, "version": {"S": "v0"}})
    client.put_item(
        TableName=name, Item={"PK": {"S": keys.EXPORT_PK}, "SK": {"S": keys.EXPORT_CURSOR_SK}, "nextDay": {"S": DAY2}}
    )
    assert repos.usage.due_rollups(10) == [(H1, f"{keys.ROLLUP_DUE_PK}=v0")]
    assert repos.usage.rollup_done(H1, f"{keys.ROLLUP_DUE_PK}=v0") is True
    assert repos.usage.due_rollups(10) == []

    repos.billing.open_days_from(DAY1)  # what each usage sync does first
    assert repos.billing.export_cursor() == DAY2
    copies = [_items(client, name, keys.export_cursor_copy_pk(s)) for s in range(keys.WRITE_PATH_SHARDS)]
    assert [c[0]["nextDay"]["S"] for c in copies] == [DAY2] * keys.WRITE_PATH_SHARDS
    assert {repos.usage.write(make_usage(f"alloc-{n}"), None) for n in range(32)} == {"correction"}  # DAY1 closed


def test_a_day_closed_by_an_export_of_before_the_copies_reaches_them_before_the_next_write(
    table: tuple[Any, str],
) -> None:
    """Review of issue 27: an export of the version before the copies, closing a day during a deploy, moves only the
    cursor; the usage sync's ``open_days_from`` (before its first write of every run) brings every copy up to it."""
    client, name = table
    repos = dynamodb_repositories(client, name)
    repos.billing.open_days_from(DAY1)
    client.put_item(  # the old export closed DAY1 and DAY2: the cursor alone moved
        TableName=name, Item={"PK": {"S": keys.EXPORT_PK}, "SK": {"S": keys.EXPORT_CURSOR_SK}, "nextDay": {"S": DAY3}}
    )
    repos.billing.open_days_from(DAY1)
    copies = [_items(client, name, keys.export_cursor_copy_pk(s)) for s in range(keys.WRITE_PATH_SHARDS)]
    assert [c[0]["nextDay"]["S"] for c in copies] == [DAY3] * keys.WRITE_PATH_SHARDS
    assert {repos.usage.write(make_usage(f"alloc-{n}", DAY2_START), None) for n in range(32)} == {"correction"}
    assert repos.billing.close_day(DAY3, "2024-05-04")
    repos.billing.open_days_from(DAY1)  # never moves a copy back
    assert {c[0]["nextDay"]["S"] for c in (_items(client, name, keys.export_cursor_copy_pk(0)),)} == {"2024-05-04"}
