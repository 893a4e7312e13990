"""What an allocation costs, window by window (billing/metering.py): exact GPU-seconds and money for known start and
stop times, across hour and day boundaries, under the terms it locked, and their rounding rule."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from itl_accelerator.billing.metering import (
    BillingTerms,
    allocation_charges,
    billable_seconds,
    cost_of,
    window_charge,
    windows,
)


def t(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


USD_240 = BillingTerms(Decimal("2.40"), "USD", billing_increment_seconds=60, minimum_billable_seconds=60)


def test_an_allocation_over_midnight_is_charged_per_hour_and_rounded_once_at_its_end():
    # Given 2 GPUs from 23:40:10 to 01:05:00 the next day, at 2.40 USD per GPU-hour, billed per started minute
    start, end = t("2026-03-01T23:40:10"), t("2026-03-02T01:05:00")
    # When it is charged window by window
    charges = allocation_charges(USD_240, gpus=2, start=start, end=end, now=end)
    # Then each hour holds the GPU-seconds it covered, and only the last carries the rounding (5090 s → 5100 s)
    assert [c.window_start for c in charges] == [t("2026-03-01T23:00"), t("2026-03-02T00:00"), t("2026-03-02T01:00")]
    assert [c.gpu_seconds for c in charges] == [1190 * 2, 3600 * 2, 300 * 2]
    assert [c.billable_gpu_seconds for c in charges] == [2380, 7200, 620]
    assert [str(c.cost) for c in charges] == ["1.586667", "4.800000", "0.413333"]
    # And the total is the exact price of the rounded time: 10200 GPU-seconds at 2.40 per GPU-hour
    assert sum((c.cost for c in charges), Decimal(0)) == Decimal("6.800000")


def test_an_allocation_is_charged_one_segment_per_window_at_its_locked_price():
    terms = BillingTerms(Decimal("4.50"), "EUR", billing_increment_seconds=1, minimum_billable_seconds=0)
    charge = window_charge(
        terms,
        gpus=1,
        start=t("2026-03-01T10:10"),
        end=t("2026-03-01T10:50"),
        now=0,
        window_start=t("2026-03-01T10:00"),
    )
    assert [(s.gpu_seconds, str(s.price_per_gpu_hour), str(s.cost)) for s in charge.segments] == [
        (2400, "4.50", "3.000000")
    ]
    assert charge.cost == Decimal("3.000000") and charge.currency == "EUR"


def test_terms_round_trip_through_their_stored_form_exactly():
    terms = BillingTerms.from_pricing(
        {"pricePerGpuHour": 3.6, "currency": "EUR", "billingIncrementSeconds": 60, "minimumBillableSeconds": 300}
    )
    assert terms == BillingTerms(Decimal("3.6"), "EUR", 60, 300)
    assert BillingTerms.from_pricing(terms.as_stored()) == terms
    assert terms.as_stored()["pricePerGpuHour"] == "3.6"


def test_a_running_allocation_is_counted_up_to_now_without_rounding():
    start = t("2026-03-01T10:00:30")
    charges = allocation_charges(USD_240, gpus=4, start=start, end=None, now=t("2026-03-01T10:00:45"))
    assert [(c.gpu_seconds, c.billable_gpu_seconds) for c in charges] == [(60, 60)]


def test_the_minimum_applies_to_a_short_allocation():
    rule = BillingTerms(Decimal("1.00"), "USD", billing_increment_seconds=1, minimum_billable_seconds=300)
    start = t("2026-03-01T10:00")
    (charge,) = allocation_charges(rule, gpus=1, start=start, end=start + 7, now=start + 7)
    assert (charge.gpu_seconds, charge.billable_gpu_seconds, str(charge.cost)) == (7, 300, "0.083333")


def test_nothing_ran_costs_nothing():
    start = t("2026-03-01T10:00")
    assert allocation_charges(USD_240, gpus=8, start=start, end=start, now=start) == []
    assert billable_seconds(0, 60, 60) == 0


@pytest.mark.parametrize(
    ("gpu_seconds", "price", "expected"),
    [(1, "0.10", "0.000028"), (3600, "0.30", "0.300000"), (18, "0.10", "0.000500"), (9, "0.10", "0.000250")],
)
def test_money_is_decimal_rounded_half_up_to_six_places(gpu_seconds, price, expected):
    assert str(cost_of(gpu_seconds, Decimal(price))) == expected


def test_windows_are_utc_hours_start_inclusive_end_exclusive():
    assert list(windows(t("2026-03-01T10:00"), t("2026-03-01T11:00"))) == [t("2026-03-01T10:00")]
    assert list(windows(t("2026-03-01T10:59:59"), t("2026-03-01T11:00:01"))) == [
        t("2026-03-01T10:00"),
        t("2026-03-01T11:00"),
    ]


@pytest.mark.parametrize(
    ("start", "end", "now"),
    [
        ("2026-03-01T23:40:10", "2026-03-02T01:05:00", "2026-03-03T00:00:00"),
        ("2026-02-27T10:15:00", None, "2026-03-02T08:20:31"),  # running across the month's start
        ("2026-03-31T22:10:00", "2026-04-01T03:00:07", "2026-04-02T00:00:00"),  # ending after the month
        ("2026-03-05T10:00:00", "2026-03-05T10:00:40", "2026-03-06T00:00:00"),  # shorter than its minimum
        ("2026-03-05T10:00:00", None, "2026-03-05T10:00:00"),  # nothing yet
    ],
)
def test_a_meters_month_charges_are_the_sum_of_its_window_charges_in_that_month(start, end, now):
    """Budgets price open allocations by Meter.month_charges in three window charges; it must be exactly what the
    usage sync records, window by window, for the month's hours."""
    from itl_accelerator.domain.budgets import month_bounds
    from itl_accelerator.domain.usage import Meter

    meter = Meter(allocation_id="a", subscription_id="sub", resource_group="rg", resource_id="/id", resource_name="j",
                  resource_type="t", service="jobs", node_resource_group="rg", node_name="n", node_id="/n",
                  supplier="s", region="eastus", sku="sku", gpus=3, terms=USD_240,
                  start=t(start), end=t(end) if end else None)  # fmt: skip
    lo, hi = month_bounds("2026-03")
    expected = sum(
        (
            window_charge(USD_240, gpus=3, start=meter.start, end=meter.end, now=t(now), window_start=w).cost
            for w in windows(max(meter.start, lo), min(meter.end or t(now), hi))
        ),
        Decimal(0),
    )
    assert meter.month_charges(lo, hi, t(now)).get("USD", Decimal(0)) == expected
