"""The FOCUS 1.2 export (itl_accelerator.billing.focus): exact money, plain numbers, byte-identical output, periods
with exclusive ends, the spec's columns (read from focus-validator's own rules), focus-validator's verdict on a
file, and memory that stays flat however many lines are written."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest

from itl_accelerator.billing import focus
from itl_accelerator.billing.focus import (
    CUSTOM_COLUMNS,
    FOCUS_APPLICABILITY_CRITERIA,
    FOCUS_COLUMNS,
    SPEC_COLUMNS,
    ChargeLine,
    focus_row,
    manifest,
    split_reserved,
    write_focus_csv_gz,
)
from itl_local import focus_validate
from tests.conftest import REPO_ROOT

INSTANCE_TYPE = "ITL.Accelerator/sparkNodes/sparkOllamaInstances"
JOB_TYPE = "ITL.Accelerator/sparkJobs"
RESERVATION_TYPE = "ITL.Accelerator/capacityReservations"
RESERVATION_ID = f"/subscriptions/sub-a/resourceGroups/rg-ml/providers/{RESERVATION_TYPE}/week-1"
COST_QUANTUM = Decimal("0.000001")
NUMERIC_COLUMNS = (
    "BilledCost",
    "ConsumedQuantity",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "ListCost",
    "ListUnitPrice",
    "PricingQuantity",
    "x_ConsumedGpuSeconds",
    "x_BillableGpuSeconds",
)
DATE_COLUMNS = ("BillingPeriodEnd", "BillingPeriodStart", "ChargePeriodEnd", "ChargePeriodStart")

#: FOCUS 1.2's dataset-level column rules — (column, keyword, applicability criteria) — as focus-validator 2.2.1
#: bundles them (model-1.2.0.1.json, rules CostAndUsage-D-*). A drift test compares this copy with the model when
#: the validator is installed; without it, this copy stands in.
SPEC_PRESENCE_RULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("AvailabilityZone", "RECOMMENDED", ("AVAILABILITY_ZONE_SUPPORTED",)),
    ("BilledCost", "MUST", ()),
    ("BillingAccountId", "MUST", ()),
    ("BillingAccountName", "MUST", ()),
    ("BillingAccountType", "MUST", ("MULTIPLE_BILLING_ACCOUNT_TYPES_SUPPORTED",)),
    ("BillingCurrency", "MUST", ()),
    ("BillingPeriodEnd", "MUST", ()),
    ("BillingPeriodStart", "MUST", ()),
    ("CapacityReservationId", "MUST", ("CAPACITY_RESERVATION_SUPPORTED",)),
    ("CapacityReservationStatus", "MUST", ("CAPACITY_RESERVATION_SUPPORTED",)),
    ("ChargeCategory", "MUST", ()),
    ("ChargeClass", "MUST", ()),
    ("ChargeDescription", "MUST", ()),
    ("ChargeFrequency", "RECOMMENDED", ()),
    ("ChargePeriodEnd", "MUST", ()),
    ("ChargePeriodStart", "MUST", ()),
    ("CommitmentDiscountCategory", "MUST", ("COMMITMENT_DISCOUNT_SUPPORTED",)),
    ("CommitmentDiscountId", "MUST", ("COMMITMENT_DISCOUNT_SUPPORTED",)),
    ("CommitmentDiscountName", "MUST", ("COMMITMENT_DISCOUNT_SUPPORTED",)),
    ("CommitmentDiscountQuantity", "MUST", ("COMMITMENT_DISCOUNT_SUPPORTED",)),
    ("CommitmentDiscountStatus", "MUST", ("COMMITMENT_DISCOUNT_SUPPORTED",)),
    ("CommitmentDiscountType", "MUST", ("COMMITMENT_DISCOUNT_SUPPORTED",)),
    ("CommitmentDiscountUnit", "MUST", ("COMMITMENT_DISCOUNT_SUPPORTED",)),
    ("ConsumedQuantity", "MUST", ("USAGE_MEASUREMENT_SUPPORTED",)),
    ("ConsumedUnit", "MUST", ("USAGE_MEASUREMENT_SUPPORTED",)),
    ("ContractedCost", "MUST", ()),
    ("ContractedUnitPrice", "MUST", ("NEGOTIATED_PRICING_SUPPORTED",)),
    ("EffectiveCost", "MUST", ()),
    ("InvoiceId", "RECOMMENDED", ()),
    ("InvoiceIssuerName", "MUST", ()),
    ("ListCost", "MUST", ()),
    ("ListUnitPrice", "MUST", ("PUBLIC_PRICE_LIST_SUPPORTED",)),
    ("PricingCategory", "MUST", ("MULTIPLE_PRICING_CATEGORIES_SUPPORTED",)),
    ("PricingCurrency", "MUST", ("PRICING_BILLING_CURRENCY_DIFFERENCES_SUPPORTED",)),
    (
        "PricingCurrencyContractedUnitPrice",
        "MAY",
        ("PUBLIC_PRICE_LIST_SUPPORTED", "PRICING_BILLING_CURRENCY_DIFFERENCES_SUPPORTED"),
    ),
    ("PricingCurrencyContractedUnitPrice", "MUST", ("PUBLIC_PRICE_LIST_SUPPORTED", "VIRTUAL_CURRENCY_SUPPORTED")),
    (
        "PricingCurrencyContractedUnitPrice",
        "RECOMMENDED",
        ("PUBLIC_PRICE_LIST_SUPPORTED", "PRICING_BILLING_CURRENCY_DIFFERENCES_SUPPORTED"),
    ),
    (
        "PricingCurrencyEffectiveCost",
        "MAY",
        ("PUBLIC_PRICE_LIST_SUPPORTED", "PRICING_BILLING_CURRENCY_DIFFERENCES_SUPPORTED"),
    ),
    ("PricingCurrencyEffectiveCost", "MUST", ("PUBLIC_PRICE_LIST_SUPPORTED", "VIRTUAL_CURRENCY_SUPPORTED")),
    (
        "PricingCurrencyEffectiveCost",
        "RECOMMENDED",
        ("PUBLIC_PRICE_LIST_SUPPORTED", "PRICING_BILLING_CURRENCY_DIFFERENCES_SUPPORTED"),
    ),
    (
        "PricingCurrencyListUnitPrice",
        "MAY",
        ("PUBLIC_PRICE_LIST_SUPPORTED", "PRICING_BILLING_CURRENCY_DIFFERENCES_SUPPORTED"),
    ),
    ("PricingCurrencyListUnitPrice", "MUST", ("PUBLIC_PRICE_LIST_SUPPORTED", "VIRTUAL_CURRENCY_SUPPORTED")),
    (
        "PricingCurrencyListUnitPrice",
        "RECOMMENDED",
        ("PUBLIC_PRICE_LIST_SUPPORTED", "PRICING_BILLING_CURRENCY_DIFFERENCES_SUPPORTED"),
    ),
    ("PricingQuantity", "MUST", ()),
    ("PricingUnit", "MUST", ()),
    ("ProviderName", "MUST", ()),
    ("PublisherName", "MUST", ()),
    ("RegionId", "MUST", ("REGION_SUPPORTED",)),
    ("RegionName", "MUST", ("REGION_SUPPORTED",)),
    ("ResourceId", "MUST", ("BILLING_BASED_ON_PROVISIONED_RESOURCES_SUPPORTED",)),
    ("ResourceName", "MUST", ("BILLING_BASED_ON_PROVISIONED_RESOURCES_SUPPORTED",)),
    (
        "ResourceType",
        "MUST",
        ("BILLING_BASED_ON_PROVISIONED_RESOURCES_SUPPORTED", "RESOURCE_TYPE_ASSIGNMENT_SUPPORTED"),
    ),
    ("ServiceCategory", "MUST", ()),
    ("ServiceName", "MUST", ()),
    ("ServiceSubcategory", "RECOMMENDED", ()),
    ("SkuId", "MUST", ("PUBLIC_PRICE_LIST_SUPPORTED", "UNIT_PRICING_SUPPORTED")),
    ("SkuMeter", "MUST", ("PUBLIC_PRICE_LIST_SUPPORTED", "UNIT_PRICING_SUPPORTED")),
    ("SkuPriceDetails", "MUST", ("PUBLIC_PRICE_LIST_SUPPORTED", "UNIT_PRICING_SUPPORTED")),
    ("SkuPriceId", "MUST", ("PUBLIC_PRICE_LIST_SUPPORTED", "UNIT_PRICING_SUPPORTED")),
    ("SubAccountId", "MUST", ("SUB_ACCOUNT_SUPPORTED",)),
    ("SubAccountName", "MUST", ("SUB_ACCOUNT_SUPPORTED",)),
    ("SubAccountType", "MUST", ("MULTIPLE_SUB_ACCOUNT_TYPES_SUPPORTED",)),
    ("Tags", "MUST", ("TAGGING_SUPPORTED",)),
)


def _installed_model() -> dict[str, Any] | None:
    try:
        parent = focus_validate.package_parent()
    except focus_validate.ValidatorMissing:
        return None
    return json.loads((parent / "focus_validator" / "rules" / f"model-{focus_validate.MODEL_VERSION}.json").read_text())


MODEL = _installed_model()
needs_validator = pytest.mark.skipif(
    MODEL is None,
    reason=f"focus-validator is not installed in {focus_validate.DEFAULT_VENV}: ./dev test and ./dev focus-validate "
    "install it",
)


# ------------------------------------------------------------------------------------------------ synthetic lines
def _cost(billable_gpu_seconds: int, price: Decimal) -> Decimal:
    """Metering's rule (services/job_workflow.cost_of): seconds * price / 3600, half up to 6 decimals."""
    return (Decimal(billable_gpu_seconds) * price / Decimal(3600)).quantize(COST_QUANTUM, ROUND_HALF_UP)


def _hour(day: int, hour: int, month: int = 1, minute: int = 0) -> datetime:
    return datetime(2025, month, day, hour, minute, tzinfo=UTC)


def charge(
    *,
    sub: str = "sub-a",
    rg: str = "rg-ml",
    name: str = "llama",
    service: str = "instances",
    node: str = "dgx-1",
    start: datetime | None = None,
    end: datetime | None = None,
    used: int = 3600,
    billable: int | None = None,
    price: str = "2.50",
    currency: str = "USD",
    cost: Decimal | None = None,
    tags: dict[str, str] | None = None,
    correction: bool = False,
    reservation: str = "",
    status: str = "",
    gpus: int = 0,
) -> ChargeLine:
    start = start or _hour(30, 10)
    billable = used if billable is None else billable
    node_id = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/ITL.Accelerator/sparkNodes/{node}"
    if service == "instances":
        resource_id, resource_type = f"{node_id}/sparkOllamaInstances/{name}", INSTANCE_TYPE
    elif service == "reservations":
        resource_id, resource_type = reservation, RESERVATION_TYPE
    else:
        resource_id, resource_type = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/{JOB_TYPE}/{name}", JOB_TYPE
    return ChargeLine(
        allocation_id=f"alloc-{name}",
        subscription_id=sub,
        resource_group=rg,
        resource_id=resource_id,
        resource_name=name,
        resource_type=resource_type,
        service=service,
        node_id=node_id,
        node_name=node,
        sku="DGX-H100-8GPU",
        region="us-east-1" if currency == "USD" else "eu-central-1",
        supplier="supplier-7",
        window_start=start,
        window_end=end or start + timedelta(hours=1),
        gpu_seconds=used,
        billable_gpu_seconds=billable,
        price_per_gpu_hour=Decimal(price),
        currency=currency,
        cost=_cost(billable, Decimal(price)) if cost is None else cost,
        tags={} if tags is None else tags,
        correction=correction,
        capacity_reservation_id=reservation,
        capacity_reservation_status=status,
        gpus=gpus,
    )


def sample_lines() -> list[ChargeLine]:
    """Two subscriptions, instances and jobs, USD and EUR, a price change between windows, tags (with CSV and JSON
    specials and non-ASCII), a negative correction, a window running into February, one ending on its first
    instant, amounts that float arithmetic would blur (0.1 + 0.2), and a cost given in exponent form."""
    tags = {"env": "prod", "cost-center": 'ML, "research"', "owner": "zoë@zürich", "note": "line1\nline2"}
    return [
        # sub-a: an Ollama instance on dgx-1, 8 GPUs, the supplier's price changes from 2.50 to 3.10 at 12:00.
        charge(start=_hour(30, 10), used=28800, tags=tags),
        charge(start=_hour(30, 11), used=28800, tags=tags),
        charge(start=_hour(30, 12), used=28800, price="3.10", tags=tags),
        # ... and its last window: 1,234 s on 2 GPUs used, billed in whole minutes (rounded up).
        charge(start=_hour(30, 13), end=_hour(30, 13, minute=21), used=2468, billable=2520, price="3.10", tags=tags),
        # sub-a: a job, no tags; costs 0.1 and 0.2 at 0.36 per GPU-hour (0.1 + 0.2 != 0.3 in floats).
        charge(name="train-1", service="jobs", start=_hour(30, 10), used=1000, price="0.36"),
        charge(name="train-1", service="jobs", start=_hour(30, 11), used=2000, price="0.36"),
        # a correction: the instance's 11:00 window was over-billed by 60 GPU-seconds.
        charge(start=_hour(30, 11), used=-60, billable=-60, tags=tags, correction=True),
        # a correction that changes nothing in money: a zero given as -0E-6 must be written 0.000000.
        charge(start=_hour(30, 12), used=0, billable=0, price="3.10", cost=Decimal("-0E-6"), correction=True),
        # sub-b: a job on an EUR node: a window ending on February's first instant, one running into February.
        charge(
            sub="sub-b",
            rg="rg-eu",
            name="batch-7",
            service="jobs",
            node="dgx-eu",
            currency="EUR",
            price="1.10",
            start=_hour(31, 23),
            used=7200,
            tags={"team": "nlp"},
        ),
        charge(
            sub="sub-b",
            rg="rg-eu",
            name="batch-8",
            service="jobs",
            node="dgx-eu",
            currency="EUR",
            price="1.10",
            start=_hour(31, 23, minute=30),
            used=3600,
            tags={"team": "nlp"},
        ),
        charge(
            sub="sub-b",
            rg="rg-eu",
            name="batch-8",
            service="jobs",
            node="dgx-eu",
            currency="EUR",
            price="1.10",
            start=_hour(1, 0, month=2, minute=30),
            end=_hour(1, 0, month=2, minute=31),
            used=60,
            billable=60,
            tags={"team": "nlp"},
        ),
        # sub-b: a cost handed over in exponent form (1E-6 = one micro-unit) and a price with 6 decimals.
        charge(
            sub="sub-b",
            rg="rg-eu",
            name="tiny",
            service="jobs",
            node="dgx-eu",
            currency="EUR",
            price="0.000001",
            used=3600,
            cost=Decimal("1E-6"),
        ),
        # sub-a: capacity reservation week-1 of 8 GPUs on dgx-2 at 2.50: its 10:00 hour split, 4 GPUs used by a job
        # in it (its own row at price 0, carrying the reservation's id), the rest unused; its 11:00 hour unused.
        *split_reserved(
            charge(name="week-1", service="reservations", node="dgx-2", reservation=RESERVATION_ID, gpus=8,
                   used=28800, status="Used"),
            14400,
        ),
        charge(name="in-week-1", service="jobs", node="dgx-2", reservation=RESERVATION_ID, status="Used", gpus=4,
               used=14400, price="0"),
        charge(name="week-1", service="reservations", node="dgx-2", reservation=RESERVATION_ID, gpus=8,
               start=_hour(30, 11), used=28800, status="Unused"),
    ]  # fmt: skip


def write(lines: list[ChargeLine]) -> tuple[bytes, focus.ExportSummary]:
    out = io.BytesIO()
    summary = write_focus_csv_gz(iter(lines), out)
    return out.getvalue(), summary


def read_rows(data: bytes) -> tuple[list[str], list[dict[str, str]]]:
    text = gzip.decompress(data).decode("utf-8")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    return list(reader.fieldnames or []), list(reader)


@pytest.fixture(scope="module")
def exported() -> tuple[list[ChargeLine], bytes, focus.ExportSummary, list[dict[str, str]]]:
    lines = sample_lines()
    data, summary = write(lines)
    header, rows = read_rows(data)
    assert header == list(FOCUS_COLUMNS)
    assert len(rows) == len(lines) == summary.rows
    return lines, data, summary, rows


# ------------------------------------------------------------------------------------------------ (1) exact money
def test_rows_sum_exactly_to_the_lines_costs_per_currency(exported: Any) -> None:
    lines, _, summary, rows = exported
    expected: dict[str, Decimal] = {}
    for line in lines:
        expected[line.currency] = expected.get(line.currency, Decimal(0)) + line.cost
    for column in ("BilledCost", "EffectiveCost"):
        written: dict[str, Decimal] = {}
        for row in rows:
            written[row["BillingCurrency"]] = written.get(row["BillingCurrency"], Decimal(0)) + Decimal(row[column])
        assert written == expected == summary.totals, column
    assert set(expected) == {"USD", "EUR"}
    # Each row carries its line's cost as given, to the digit.
    for line, row in zip(lines, rows, strict=True):
        assert row["BilledCost"] == row["EffectiveCost"] == format(abs(line.cost) if not line.cost else line.cost, "f")
    # 0.1 + 0.2 stays 0.3 (in floats it is 0.30000000000000004).
    jobs = [Decimal(r["BilledCost"]) for r in rows if r["ResourceName"] == "train-1"]
    assert jobs == [Decimal("0.1"), Decimal("0.2")] and sum(jobs) == Decimal("0.3")
    assert summary.gpu_seconds == sum(line.gpu_seconds for line in lines)
    assert summary.billable_gpu_seconds == sum(line.billable_gpu_seconds for line in lines)


def test_list_cost_is_unit_price_times_pricing_quantity_and_the_charge_before_rounding(exported: Any) -> None:
    lines, _, _, rows = exported
    for line, row in zip(lines, rows, strict=True):
        price, quantity, list_cost = (Decimal(row[c]) for c in ("ListUnitPrice", "PricingQuantity", "ListCost"))
        assert price == Decimal(row["ContractedUnitPrice"]) == line.price_per_gpu_hour
        assert list_cost == Decimal(row["ContractedCost"])
        # FOCUS: ListUnitPrice * PricingQuantity matches ListCost — within focus-validator's tolerance.
        assert abs(price * quantity - list_cost) <= Decimal("1e-9") * max(abs(list_cost), Decimal(1))
        exact = Decimal(line.billable_gpu_seconds) * line.price_per_gpu_hour / 3600
        assert abs(list_cost - exact) <= Decimal("0.5e-13")
        if not line.correction:
            assert abs(list_cost - line.cost) <= Decimal("0.0000005") + Decimal("0.5e-13")
        assert Decimal(row["x_BillableGpuSeconds"]) == line.billable_gpu_seconds
        assert Decimal(row["x_ConsumedGpuSeconds"]) == line.gpu_seconds


@pytest.mark.parametrize("price", ["0.000001", "1", "2.5", "2000", "3600", "999999.999999", "1000000"])
@pytest.mark.parametrize("seconds", [1, 2, 59, 61, 3599, 28800, 230400])
def test_thirteen_decimals_keep_the_product_rule_for_every_price_and_second(price: str, seconds: int) -> None:
    # The validator compares in doubles: |price * quantity - ListCost| <= 1e-9 * max(|ListCost|, 1).
    row = focus_row(charge(used=seconds, price=price))
    p, q, cost = (float(row[c]) for c in ("ListUnitPrice", "PricingQuantity", "ListCost"))
    assert abs(p * q - cost) <= 1e-9 * max(abs(cost), 1)


# ------------------------------------------------------------------------------------------------ (2) plain numbers
PLAIN_DECIMAL = re.compile(r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?$")


def test_no_cell_has_an_exponent_a_float_artefact_or_a_negative_zero(exported: Any) -> None:
    _, _, _, rows = exported
    for row in rows:
        for column in NUMERIC_COLUMNS:
            cell = row[column]
            assert PLAIN_DECIMAL.match(cell), (column, cell)
            assert not re.match(r"^-0(\.0*)?$", cell), (column, cell)
            # A float artefact needs 16-17 significant digits; the export writes at most 13 decimals.
            assert len(cell.partition(".")[2]) <= focus.QUANTITY_DECIMALS, (column, cell)
    tiny = next(r for r in rows if r["ResourceName"] == "tiny")
    assert (tiny["BilledCost"], tiny["ListUnitPrice"]) == ("0.000001", "0.000001")
    zero = next(r for r in rows if r["ChargeClass"] == "Correction" and r["x_BillableGpuSeconds"] == "0")
    assert (zero["BilledCost"], zero["PricingQuantity"], zero["ListCost"]) == ("0.000000", "0.0", "0.0")
    negative = next(r for r in rows if r["ChargeClass"] == "Correction" and r["x_BillableGpuSeconds"] == "-60")
    assert (negative["BilledCost"], negative["PricingQuantity"]) == ("-0.041667", "-0.0166666666667")


def test_float_money_and_invalid_lines_are_refused() -> None:
    line = charge()
    for bad in (
        {"cost": 0.3},
        {"price_per_gpu_hour": 2.5},
        {"cost": Decimal("NaN")},
        {"price_per_gpu_hour": Decimal("-1")},
        {"cost": Decimal("-0.000001")},  # negative only as a correction
        {"tags": {"env": 1}},
        {"gpu_seconds": -1},
        {"gpu_seconds": 1.0},
        {"currency": "usd"},
        {"service": "nodes"},
        {"resource_name": " "},
        {"window_start": datetime(2025, 1, 30, 10)},  # naive
        {"window_end": line.window_start},  # empty window
        {"window_end": line.window_start + timedelta(hours=1, seconds=1)},  # over an hour
        {"window_end": line.window_start + timedelta(minutes=30, microseconds=5)},  # not whole seconds
    ):
        with pytest.raises(ValueError):
            replace(line, **bad)


def test_tags_are_a_json_object_with_sorted_keys_and_null_when_none(exported: Any) -> None:
    lines, _, _, rows = exported
    for line, row in zip(lines, rows, strict=True):
        if line.tags:
            assert json.loads(row["Tags"]) == line.tags
            assert list(json.loads(row["Tags"])) == sorted(line.tags)
        else:
            assert row["Tags"] == ""


# ------------------------------------------------------------------------------------------------ (3) determinism
def test_identical_input_gives_byte_identical_output_and_the_same_sha256() -> None:
    first, summary = write(sample_lines())
    second, again = write(sample_lines())
    assert first == second
    assert summary == again
    assert summary.sha256 == hashlib.sha256(first).hexdigest()
    assert summary.size_bytes == len(first)
    # gzip header: no file name (FLG 0), mtime 0.
    assert first[:4] == b"\x1f\x8b\x08\x00" and first[4:8] == b"\x00\x00\x00\x00"
    changed, other = write([*sample_lines()[:-1], replace(sample_lines()[-1], cost=Decimal("0.000002"))])
    assert changed != first and other.sha256 != summary.sha256


def test_manifest_is_json_with_decimal_strings() -> None:
    data, summary = write(sample_lines())
    doc = manifest(date(2025, 1, 31), summary, "exports/focus/2025/01/31/focus-2025-01-31.csv.gz")
    assert json.loads(json.dumps(doc)) == doc
    assert doc["focusVersion"] == "1.2"
    assert doc["day"] == "2025-01-31"
    assert doc["billingPeriod"] == {"start": "2025-01-01T00:00:00Z", "end": "2025-02-01T00:00:00Z"}
    assert doc["objectKey"].endswith(".csv.gz") and (doc["format"], doc["compression"]) == ("csv", "gzip")
    assert doc["rows"] == summary.rows and doc["columns"] == list(FOCUS_COLUMNS)
    assert doc["totals"] == {c: format(t, "f") for c, t in summary.totals.items()}
    assert all(isinstance(v, str) for v in doc["totals"].values())
    assert (doc["sha256"], doc["sizeBytes"]) == (hashlib.sha256(data).hexdigest(), len(data))


# ------------------------------------------------------------------------------------------------ (4) periods
def test_periods_have_exclusive_ends_and_months_end_where_they_should(exported: Any) -> None:
    lines, _, _, rows = exported
    for line, row in zip(lines, rows, strict=True):
        for column in DATE_COLUMNS:
            assert re.match(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$", row[column]), (column, row[column])
        assert row["ChargePeriodStart"] == line.window_start.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert row["ChargePeriodEnd"] == line.window_end.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert row["ChargePeriodStart"] < row["ChargePeriodEnd"]
        assert row["BillingPeriodStart"] <= row["ChargePeriodStart"] < row["BillingPeriodEnd"]
    by_window = {(r["ResourceName"], r["ChargePeriodStart"]): r for r in rows}
    ends_on_month = by_window[("batch-7", "2025-01-31T23:00:00Z")]
    assert ends_on_month["ChargePeriodEnd"] == ends_on_month["BillingPeriodEnd"] == "2025-02-01T00:00:00Z"
    assert ends_on_month["BillingPeriodStart"] == "2025-01-01T00:00:00Z"
    crossing = by_window[("batch-8", "2025-01-31T23:30:00Z")]
    assert crossing["ChargePeriodEnd"] == "2025-02-01T00:30:00Z"
    assert (crossing["BillingPeriodStart"], crossing["BillingPeriodEnd"]) == (
        "2025-01-01T00:00:00Z",
        "2025-02-01T00:00:00Z",
    )
    february = by_window[("batch-8", "2025-02-01T00:30:00Z")]
    assert (february["BillingPeriodStart"], february["BillingPeriodEnd"]) == (
        "2025-02-01T00:00:00Z",
        "2025-03-01T00:00:00Z",
    )
    assert focus.billing_period(2025, 12) == ("2025-12-01T00:00:00Z", "2026-01-01T00:00:00Z")
    assert focus.billing_period(2024, 2) == ("2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z")


def test_windows_in_other_zones_are_written_in_utc() -> None:
    cet = timezone(timedelta(hours=1))
    # 2025-02-01 00:30 in UTC+1 is still January in UTC.
    row = focus_row(charge(start=datetime(2025, 2, 1, 0, 30, tzinfo=cet)))
    assert (row["ChargePeriodStart"], row["ChargePeriodEnd"]) == ("2025-01-31T23:30:00Z", "2025-02-01T00:30:00Z")
    assert row["BillingPeriodStart"] == "2025-01-01T00:00:00Z"


# ------------------------------------------------------------------------------------------------ (5) the spec's columns
def _presence_rules(model: dict[str, Any]) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    rules = [
        (r["Reference"], r["ValidationCriteria"]["Keyword"], tuple(r["ApplicabilityCriteria"]))
        for r in model["ModelRules"].values()
        if r["EntityType"] == "Dataset" and r["Function"] == "Presence" and r["Status"] == "Active"
    ]
    return tuple(sorted(rules))


@needs_validator
def test_spec_column_list_matches_the_validators_bundled_model() -> None:
    assert MODEL is not None and MODEL["Details"]["FOCUSVersion"] == focus.FOCUS_VERSION
    assert _presence_rules(MODEL) == SPEC_PRESENCE_RULES, "FOCUS's column rules changed: update SPEC_PRESENCE_RULES"


def test_written_columns_cover_every_column_the_spec_requires_here() -> None:
    rules = _presence_rules(MODEL) if MODEL is not None else SPEC_PRESENCE_RULES
    spec_columns = {column for column, _, _ in rules}
    # As focus-validator decides: a rule applies when it names no criterion or any of the provider's.
    required = {
        column
        for column, keyword, criteria in rules
        if keyword in ("MUST", "RECOMMENDED") and (not criteria or set(criteria) & set(FOCUS_APPLICABILITY_CRITERIA))
    }
    assert required <= set(SPEC_COLUMNS), sorted(required - set(SPEC_COLUMNS))
    # Also what the brief asks beyond that: unit prices, SKU, pricing category.
    assert {"ListUnitPrice", "ContractedUnitPrice", "SkuId", "PricingCategory", "ChargeFrequency"} <= set(SPEC_COLUMNS)
    assert set(SPEC_COLUMNS) <= spec_columns, sorted(set(SPEC_COLUMNS) - spec_columns)
    assert all(c.startswith("x_") and c[2:].isalnum() for c in CUSTOM_COLUMNS)
    assert FOCUS_COLUMNS == SPEC_COLUMNS + CUSTOM_COLUMNS  # FOCUS columns first, custom ones after
    assert len(set(FOCUS_COLUMNS)) == len(FOCUS_COLUMNS)


def test_focus_row_has_every_column_as_text() -> None:
    row = focus_row(sample_lines()[0])
    assert list(row) == list(FOCUS_COLUMNS)
    assert all(isinstance(v, str) for v in row.values())


# ------------------------------------------------------------------------------------------------ (6) focus-validator
@needs_validator
def test_focus_validator_accepts_the_export(tmp_path: Path, exported: Any) -> None:
    _, data, _, _ = exported
    path = tmp_path / "focus-2025-01-31.csv.gz"
    path.write_bytes(data)
    report = focus_validate.validate(path)  # what ./dev focus-validate runs
    assert report.ok, report.verdict() + "\n" + report.output + report.stderr
    assert report.total > 500 and report.passed > 150
    # Only the validator's known false failure is discounted (module docstring of itl_local.focus_validate).
    assert report.excused == {"InvoiceId-C-005-C": "InvoiceId-C-003-C"}
    for rule in ("BilledCost-C-000-M", "ChargePeriodEnd-C-000-M", "Tags-C-000-C", "ConsumedQuantity-C-000-C",
                 "PricingUnit-C-000-M", "ServiceSubcategory-C-004-M", "SubAccountId-C-000-C", "ChargeClass-C-005-C",
                 "CapacityReservationId-C-000-C", "CapacityReservationStatus-C-000-C",
                 "CapacityReservationStatus-C-003-C", "CapacityReservationStatus-C-004-C",
                 "CapacityReservationStatus-C-006-M"):  # fmt: skip
        assert report.results.get(rule) == "PASS", rule


def test_the_runner_gives_the_validator_the_two_reservation_conditions_as_it_reads_them() -> None:
    model = MODEL or {
        "ModelRules": {
            "CapacityReservationStatus-C-003-C": {"ValidationCriteria": {"Condition": {"AND": {"CheckFunction": "X"}}}},
            "CapacityReservationStatus-C-004-C": {
                "ValidationCriteria": {"Condition": {"AND": [{"CheckFunction": "X"}, {"CheckFunction": "Y"}]}}
            },
            "Other-C-000-C": {"ValidationCriteria": {"Condition": {"CheckFunction": "AND", "Items": []}}},
        }
    }
    fixed, changed = focus_validate.corrected_model(model)
    assert changed == ["CapacityReservationStatus-C-003-C", "CapacityReservationStatus-C-004-C"]
    conditions = {r: fixed["ModelRules"][r]["ValidationCriteria"]["Condition"] for r in changed}
    assert all("CheckFunction" in c for c in conditions.values())
    assert conditions["CapacityReservationStatus-C-004-C"]["CheckFunction"] == "AND"
    unchanged = {k: v for k, v in fixed["ModelRules"].items() if k not in changed}
    assert unchanged == {k: v for k, v in model["ModelRules"].items() if k not in changed}


@needs_validator
@pytest.mark.parametrize(
    ("old", "new", "failed"),
    [
        (",Unused,", ",,", "CapacityReservationStatus-C-004-C"),  # a reservation's row without its status
        (",,Usage,", ",Used,Usage,", "CapacityReservationStatus-C-003-C"),  # a status on a row of no reservation
    ],
)
def test_the_validator_fails_a_reservation_status_that_breaks_focus(
    tmp_path: Path, exported: Any, old: str, new: str, failed: str
) -> None:
    _, data, _, _ = exported
    text = gzip.decompress(data).decode()
    assert old in text
    path = tmp_path / "broken.csv"
    path.write_text(text.replace(old, new, 1), newline="")
    report = focus_validate.validate(path)
    assert not report.ok and failed in report.failures, report.verdict()


@needs_validator
def test_focus_validator_checks_list_cost_is_unit_price_times_quantity(tmp_path: Path, exported: Any) -> None:
    # focus-validator checks this FOCUS rule only for providers with a public price list: enable that criterion for
    # the list-price rules alone.
    _, data, _, _ = exported
    path = tmp_path / "focus.csv.gz"
    path.write_bytes(data)
    criteria = ",".join((*FOCUS_APPLICABILITY_CRITERIA, "PUBLIC_PRICE_LIST_SUPPORTED"))
    report = focus_validate.validate(path, "--applicability-criteria", criteria, "--filter-rules", "List")
    assert report.ok, report.verdict() + "\n" + report.output
    assert report.results.get("ListCost-C-009-C") == report.results.get("ListUnitPrice-C-010-C") == "PASS"


@needs_validator
def test_focus_validate_fails_a_broken_file(tmp_path: Path, exported: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _, data, _, _ = exported
    text = gzip.decompress(data).decode().replace(",Usage-Based,", ",Per Use,")
    path = tmp_path / "broken.csv"
    path.write_text(text, newline="")
    assert focus_validate.main([str(path)]) == 1  # ./dev focus-validate's exit status
    verdict = capsys.readouterr().out.splitlines()[-1]
    assert "FAILED" in verdict and "counted failures: ChargeFrequency-C-000-O, ChargeFrequency-C-003-M" in verdict


# ------------------------------------------------------------------------------------------------ reservations
def _reservation_descriptor(**extra: Any) -> dict[str, Any]:
    """A capacity reservation's descriptor as its meter stores it (8 GPUs on dgx-2), plus ``extra`` keys."""
    line = charge(name="week-1", service="reservations", node="dgx-2", reservation=RESERVATION_ID, gpus=8,
                  status="Unused")  # fmt: skip
    return {**line.as_stored(), **extra}


def _segment(used: int, price: str = "2.50", start: datetime | None = None) -> dict[str, Any]:
    begin = int((start or _hour(30, 10)).timestamp())
    return {"start": begin, "end": begin + 3600, "gpuSeconds": used, "billableGpuSeconds": used,
            "pricePerGpuHour": price, "currency": "USD", "cost": format(_cost(used, Decimal(price)), "f")}  # fmt: skip


def test_a_reservations_hour_is_split_into_its_used_and_unused_portions_adding_up_exactly() -> None:
    # an hour of 8 GPUs at 2.50 (20.00), 4 of them used by jobs in it for 45 minutes: 10,800 device-seconds
    descriptor = _reservation_descriptor(**{focus.USED_GPU_SECONDS_KEY: 10800})
    rows = [focus_row(line) for line in focus.billed_lines("alloc-week-1", descriptor, [_segment(28800)])]
    assert [(r["CapacityReservationStatus"], r["BilledCost"], r["x_ConsumedGpuSeconds"]) for r in rows] == [
        ("Used", "7.500000", "10800"),
        ("Unused", "12.500000", "18000"),
    ]
    assert {r["CapacityReservationId"] for r in rows} == {RESERVATION_ID}
    assert sum(Decimal(r["BilledCost"]) for r in rows) == Decimal("20.000000")
    assert [r["ChargeDescription"] for r in rows] == [
        "GPU time reserved by capacity reservation week-1 on node dgx-2 (DGX-H100-8GPU), 8 GPUs booked: used by jobs "
        "in it",
        "GPU time reserved by capacity reservation week-1 on node dgx-2 (DGX-H100-8GPU), 8 GPUs booked: unused",
    ]
    assert {r["ServiceName"] for r in rows} == {"ITL Accelerator Capacity Reservations"}


@pytest.mark.parametrize(
    ("used", "statuses"), [(0, ["Unused"]), (28800, ["Used"]), (99999, ["Used"]), (None, ["Unused"])]
)
def test_a_reservations_hour_wholly_used_or_unused_is_one_row(used: int | None, statuses: list[str]) -> None:
    extra = {} if used is None else {focus.USED_GPU_SECONDS_KEY: used}
    lines = list(focus.billed_lines("alloc-week-1", _reservation_descriptor(**extra), [_segment(28800)]))
    assert [line.capacity_reservation_status for line in lines] == statuses
    assert [line.cost for line in lines] == [Decimal("20.000000")]


def test_an_odd_split_never_bills_a_micro_unit_more_than_the_hour() -> None:
    # 1 device-second used of 3 at a price whose thirds have no finite decimal
    descriptor = _reservation_descriptor(**{focus.USED_GPU_SECONDS_KEY: 1})
    lines = list(focus.billed_lines("a", descriptor, [_segment(3, price="1")]))
    assert [line.cost for line in lines] == [Decimal("0.000278"), Decimal("0.000555")]
    assert sum(line.cost for line in lines) == _cost(3, Decimal(1))


def test_a_job_in_a_reservation_is_used_capacity_billed_nothing_more() -> None:
    row = focus_row(charge(name="in-week-1", service="jobs", node="dgx-2", reservation=RESERVATION_ID,
                           status="Used", used=14400, price="0"))  # fmt: skip
    assert (row["CapacityReservationId"], row["CapacityReservationStatus"], row["BilledCost"]) == (
        RESERVATION_ID,
        "Used",
        "0.000000",
    )
    assert row["ChargeDescription"] == (
        "GPU time of job in-week-1 on node dgx-2 (DGX-H100-8GPU) in capacity reservation week-1 "
        "(billed by the reservation)"
    )
    # and billed_lines says so from its descriptor alone
    stored = {**charge(service="jobs", reservation=RESERVATION_ID, status="Used").as_stored()}
    (line,) = focus.billed_lines("a", stored, [_segment(3600, price="0")])
    assert line.capacity_reservation_status == "Used"


def test_rows_of_no_reservation_have_both_columns_null(exported: Any) -> None:
    _, _, _, rows = exported
    plain = [r for r in rows if not r["CapacityReservationId"]]
    assert plain and all(r["CapacityReservationStatus"] == "" for r in plain)


@pytest.mark.parametrize(("reservation", "status"), [("", "Used"), (RESERVATION_ID, ""), (RESERVATION_ID, "Idle")])
def test_a_reservation_status_that_does_not_fit_its_id_is_refused(reservation: str, status: str) -> None:
    with pytest.raises(ValueError, match="capacity_reservation_status"):
        charge(service="jobs", reservation=reservation, status=status)


# ------------------------------------------------------------------------------------------------ (7) memory
class _Discard:
    def write(self, data: Any) -> int:
        return len(data)


def measure_writer_peaks() -> dict[int, int]:
    """Peak traced memory (bytes) of the FOCUS writer after 20,000, 100,000 and 200,000 lines: 48 distinct lines
    (24 windows x 2 services) cycled, so the writer's state, not the generator, is measured."""
    base = sample_lines()[0]
    lines = [
        replace(
            base,
            window_start=base.window_start + timedelta(hours=h),
            window_end=base.window_end + timedelta(hours=h),
            service=s,
            resource_name=f"r{h}-{s}",
        )
        for h in range(24)
        for s in ("instances", "jobs")
    ]
    peaks: dict[int, int] = {}

    def stream(count: int) -> Iterator[ChargeLine]:
        for i in range(count):
            if i in (20_000, 100_000):
                peaks[i] = tracemalloc.get_traced_memory()[1]
            yield lines[i % len(lines)]

    write_focus_csv_gz(iter(lines), _Discard())  # type: ignore[arg-type]  # warm the caches
    tracemalloc.start()
    try:
        summary = write_focus_csv_gz(stream(200_000), _Discard())  # type: ignore[arg-type]
        peaks[200_000] = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert summary.rows == 200_000
    return peaks


def test_memory_stays_flat_whatever_the_number_of_lines() -> None:
    # Measured in an interpreter of its own: tracemalloc counts every thread, and a test session has others (the
    # local runtime's stream poller, schedules, workflow executions) allocating beside the writer
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, tests.unit.test_focus_export as t; print(json.dumps(t.measure_writer_peaks()))",
        ],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    peaks = {int(k): v for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items()}
    # The peak after 200,000 lines is the peak after 20,000 (buffers, caches): nothing grows with the count.
    assert peaks[200_000] < peaks[20_000] * 1.10, peaks
    assert peaks[200_000] < 2 * 1024 * 1024, peaks


# ------------------------------------------------------------------------------------------------ docs
def test_billing_doc_lists_every_column_and_criterion() -> None:
    text = (REPO_ROOT / "docs" / "BILLING.md").read_text()
    documented = re.findall(r"^\| `([A-Za-z_]+)` \|", text, re.MULTILINE)
    assert documented == list(FOCUS_COLUMNS), "docs/BILLING.md's column table must list FOCUS_COLUMNS, in order"
    given = text.split("## Applicability criteria", 1)[1].split("Not given:", 1)[0]
    assert re.findall(r"`([A-Z_]+_SUPPORTED)`", given) == list(FOCUS_APPLICABILITY_CRITERIA)
