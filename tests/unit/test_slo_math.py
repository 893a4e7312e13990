"""The error-budget arithmetic (itl_accelerator/slo.py): the numbers the SLO alarms and the SLO report rest on."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from itl_accelerator import slo


def test_a_999_goal_leaves_43_2_minutes_of_a_30_day_month():
    assert slo.error_budget("99.9") == Decimal("0.001")
    assert slo.budget_minutes("99.9") == Decimal("43.2")
    assert slo.budget_minutes(Decimal("99.9"), 31 * 86400) == Decimal("44.64")
    assert slo.budget_minutes(99) == Decimal("432")


def test_burn_rate_is_the_bad_share_over_the_budget():
    assert slo.burn_rate(1, 1000, "99.9") == Decimal(1)
    assert slo.burn_rate(144, 10_000, "99.9") == Decimal("14.4")
    assert slo.burn_rate(0, 0, "99.9") == Decimal(0)  # no requests: nothing spent
    assert slo.burn_rate(5, 100, "99") == Decimal(5)


@pytest.mark.parametrize(("bad", "total"), [(-1, 10), (11, 10), (1, -1)])
def test_impossible_counts_are_refused(bad, total):
    with pytest.raises(ValueError):
        slo.burn_rate(bad, total, "99.9")


@pytest.mark.parametrize("goal", ["0", "100", "101", "-5"])
def test_a_goal_outside_0_to_100_is_refused(goal):
    with pytest.raises(ValueError):
        slo.error_budget(goal)


def test_the_workbook_table_spends_2_5_and_10_percent_of_a_30_day_budget():
    # Google SRE workbook, table 5-8: 14.4 over 1 h, 6 over 6 h (page), 1 over 3 days (ticket)
    spent = [(a.severity, a.budget_spent) for a in slo.BURN_RATE_ALERTS]
    assert spent == [("page", Decimal("0.02")), ("page", Decimal("0.05")), ("ticket", Decimal("0.1"))]
    # and each short window is 1/12 of its long one
    assert all(a.long_window == 12 * a.short_window for a in slo.BURN_RATE_ALERTS)


def test_attainment_and_remaining_budget():
    assert slo.attainment(1, 1000) == Decimal("99.9")
    assert slo.attainment(0, 0) is None
    assert slo.budget_remaining(0, 1000, "99.9") == Decimal(1)
    assert slo.budget_remaining(1, 2000, "99.9") == Decimal("0.5")
    assert slo.budget_remaining(3, 1000, "99.9") == Decimal(-2)  # overspent


def test_a_month_is_its_utc_calendar_month_cut_at_now():
    now = datetime(2026, 11, 10, 12, tzinfo=UTC).timestamp()
    running = slo.month_period("2026-11", now)
    assert running.start == datetime(2026, 11, 1, tzinfo=UTC).timestamp()
    assert running.end == datetime(2026, 12, 1, tzinfo=UTC).timestamp()
    assert running.until == now and not running.complete and running.seconds == 30 * 86400
    past = slo.month_period("2026-02", now)
    assert past.complete and past.seconds == 28 * 86400
    assert slo.current_month(now) == "2026-11"


@pytest.mark.parametrize(
    "month", ["2026-13", "2026-1", "26-11", "2026-11-01", "", "2026-00", "\uff12\uff10\uff12\uff16-11"]
)
def test_a_month_not_written_yyyy_mm_is_refused(month):
    with pytest.raises(ValueError, match="YYYY-MM"):
        slo.month_period(month, datetime(2026, 11, 10, tzinfo=UTC).timestamp())


def test_a_month_that_has_not_begun_is_refused():
    with pytest.raises(ValueError, match="not begun"):
        slo.month_period("2026-12", datetime(2026, 11, 10, tzinfo=UTC).timestamp())


def test_an_objective_reports_attainment_burn_and_budget_left():
    period = slo.month_period("2026-11", datetime(2026, 12, 5, tzinfo=UTC).timestamp())
    availability = slo.Objective("availability", Decimal("99.9"), "answered 5xx")
    figures = availability.evaluate(bad=5, total=10_000, period=period)
    assert figures["attainmentPercent"] == 99.95 and figures["met"] is True
    assert figures["burnRate"] == 0.5
    assert figures["errorBudget"] == {
        "allowedBadRequests": 10.0,
        "remainingFraction": 0.5,
        "minutes": 43.2,
        "remainingMinutes": 21.6,
    }
    overspent = availability.evaluate(bad=20, total=10_000, period=period)
    assert overspent["met"] is False and overspent["errorBudget"]["remainingFraction"] == -1.0
    quiet = availability.evaluate(bad=0, total=0, period=period)
    assert quiet["attainmentPercent"] is None and quiet["met"] is True
    assert quiet["errorBudget"]["remainingMinutes"] == 43.2
