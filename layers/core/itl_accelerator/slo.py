"""The API's service level objectives and the error-budget arithmetic behind their alarms and their report — pure
functions, no I/O.

Two objectives, both request-based and both over the API as a whole (every tenant's requests: the SLO is the
provider's promise to all of them):

- **availability**: the share of API requests not answered with a 5xx (API Gateway's ``5XXError`` over ``Count``),
  goal 99.9 %;
- **latency**: the share of API requests answered within the threshold (API Gateway's ``Latency``, the time from
  receiving the request to sending the answer, authorizer included), goal 99 % — i.e. p99 under the threshold.

The error budget is what the goal leaves: 0.1 % of the requests (or, read as time, 0.1 % of 30 days = 43.2 minutes of
full outage) for availability, 1 % for latency. A *burn rate* is how fast a window spends it: the window's bad share
divided by the budget (1.0 spends exactly the whole budget over the SLO period, 14.4 spends 2 % of a 30-day budget
in one hour).

Alerting follows the Google SRE workbook, chapter 5 ("Alerting on SLOs"), table 5-8 "Recommended parameters for an
SLO of 99.9 %", multiwindow, multi-burn-rate alerts: page when the burn rate exceeds 14.4 over 1 h *and* over 5 min
(2 % of the budget in an hour), or 6 over 6 h and 30 min (5 % in six hours); open a ticket when it exceeds 1 over 3
days and 6 h (10 % in three days). The short window (1/12 of the long one) makes an alert stop soon after the
problem does. :data:`BURN_RATE_ALERTS` is that table; template.yaml's alarms are built from the same numbers and
tests/unit/test_slo_template.py checks that they agree.
"""

from __future__ import annotations

import calendar
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_HALF_EVEN, Decimal

#: The period an SLO is stated over by default (seconds): 30 days, the workbook's.
SLO_PERIOD_SECONDS = 30 * 24 * 3600
MINUTE, HOUR, DAY = 60, 3600, 86400


@dataclass(frozen=True)
class BurnRateAlert:
    """One row of the workbook's table: alert ``severity`` (``page`` or ``ticket``) when the burn rate exceeds
    ``burn_rate`` over both ``long_window`` and ``short_window`` (seconds)."""

    severity: str
    burn_rate: Decimal
    long_window: int
    short_window: int

    @property
    def budget_spent(self) -> Decimal:
        """The share of a 30-day budget the long window spends at this burn rate when the alert fires (0.02 =
        2 %)."""
        return budget_spent(self.burn_rate, self.long_window)


#: Google SRE workbook, table 5-8: (severity, burn rate, long window, short window).
BURN_RATE_ALERTS: tuple[BurnRateAlert, ...] = (
    BurnRateAlert("page", Decimal("14.4"), 1 * HOUR, 5 * MINUTE),
    BurnRateAlert("page", Decimal("6"), 6 * HOUR, 30 * MINUTE),
    BurnRateAlert("ticket", Decimal("1"), 3 * DAY, 6 * HOUR),
)


def _percent(value: Decimal | str | float) -> Decimal:
    goal = Decimal(str(value))
    if not Decimal(0) < goal < Decimal(100):
        raise ValueError(f"an SLO goal is a percentage strictly between 0 and 100, not {value}")
    return goal


def error_budget(goal_percent: Decimal | str | float) -> Decimal:
    """The share of requests the goal allows to be bad: ``99.9`` → ``0.001``. Raises ``ValueError`` for a goal
    outside (0, 100)."""
    return (Decimal(100) - _percent(goal_percent)) / Decimal(100)


def budget_minutes(goal_percent: Decimal | str | float, period_seconds: int = SLO_PERIOD_SECONDS) -> Decimal:
    """The error budget read as minutes of full outage over ``period_seconds``: ``99.9`` over 30 days → ``43.2``."""
    return error_budget(goal_percent) * Decimal(period_seconds) / Decimal(MINUTE)


def burn_rate(bad: int, total: int, goal_percent: Decimal | str | float) -> Decimal:
    """How fast ``bad`` of ``total`` requests spend the budget: the bad share over the budget (1 = exactly the
    budget over the SLO period; 0 when there were no requests). Raises ``ValueError`` when ``bad`` is negative or
    above ``total``."""
    if bad < 0 or total < 0 or bad > total:
        raise ValueError(f"bad requests must be between 0 and the total ({bad} of {total})")
    if total == 0:
        return Decimal(0)
    return Decimal(bad) / Decimal(total) / error_budget(goal_percent)


def budget_spent(rate: Decimal | str | float, window_seconds: int, period_seconds: int = SLO_PERIOD_SECONDS) -> Decimal:
    """The share of a ``period_seconds`` budget that burning at ``rate`` for ``window_seconds`` spends:
    14.4 for 1 h of 30 days → ``0.02``."""
    return Decimal(str(rate)) * Decimal(window_seconds) / Decimal(period_seconds)


def attainment(bad: int, total: int) -> Decimal | None:
    """The share of good requests, in percent (None when there were none)."""
    if total == 0:
        return None
    return Decimal(100) * Decimal(total - bad) / Decimal(total)


def budget_remaining(bad: int, total: int, goal_percent: Decimal | str | float) -> Decimal:
    """The share of the budget still left (1 = untouched, 0 = spent, negative = overspent): ``1 - burn rate``
    over the whole period the requests cover."""
    return Decimal(1) - burn_rate(bad, total, goal_percent)


@dataclass(frozen=True)
class Period:
    """A calendar month in UTC: ``[start, end)`` in epoch seconds; ``until`` is where the figures stop (``end``,
    or now for the month that is still running)."""

    month: str
    start: int
    end: int
    until: int

    @property
    def seconds(self) -> int:
        """The whole month's length (seconds)."""
        return self.end - self.start

    @property
    def complete(self) -> bool:
        """Whether the month has ended (the figures cover all of it)."""
        return self.until >= self.end


_MONTH = re.compile(r"([0-9]{4})-(0[1-9]|1[0-2])")


def month_period(month: str, now: float) -> Period:
    """The UTC calendar month ``YYYY-MM`` as a :class:`Period`, cut at ``now`` (epoch seconds, rounded up to the
    second so that what happened during the current second is in) while it runs.
    Raises ``ValueError`` for another format, a month before 1970 or one that has not begun."""
    found = _MONTH.fullmatch(month)
    if found is None:
        raise ValueError("month must be YYYY-MM (a UTC calendar month)")
    year, number = int(found.group(1)), int(found.group(2))
    if year < 1970:
        raise ValueError("month must be 1970-01 or later (the API has no requests before 1970)")
    start = int(datetime(year, number, 1, tzinfo=UTC).timestamp())
    days = calendar.monthrange(year, number)[1]
    end = start + days * DAY
    if start > now:
        raise ValueError(f"the month {month} has not begun")
    return Period(month=month, start=start, end=end, until=min(end, math.ceil(now)))


def current_month(now: float) -> str:
    """``YYYY-MM`` of ``now`` (epoch seconds) in UTC."""
    return datetime.fromtimestamp(now, UTC).strftime("%Y-%m")


@dataclass(frozen=True)
class Objective:
    """One SLO: ``name``, ``goal_percent`` of requests good, and what makes a request bad (``bad_when``, text)."""

    name: str
    goal_percent: Decimal
    bad_when: str

    def evaluate(self, bad: int, total: int, period: Period) -> dict[str, object]:
        """The objective's figures for ``period``: requests, bad ones, attainment (percent, None without
        requests), whether the goal is met so far, the burn rate over the period, and the error budget — as a
        share of the requests, as minutes of full outage over the month (0.1 % of a 30-day month = 43.2), and
        what is left of both. Decimals are rounded half-even to 6 places (minutes to 2)."""
        budget_total = budget_minutes(self.goal_percent, period.seconds)
        remaining = budget_remaining(bad, total, self.goal_percent)
        reached = attainment(bad, total)
        return {
            "name": self.name,
            "goalPercent": float(self.goal_percent),
            "badWhen": self.bad_when,
            "requests": total,
            "badRequests": bad,
            "attainmentPercent": None if reached is None else _round(reached, 6),
            "met": reached is None or reached >= self.goal_percent,
            "burnRate": _round(burn_rate(bad, total, self.goal_percent), 6),
            "errorBudget": {
                "allowedBadRequests": _round(error_budget(self.goal_percent) * total, 6),
                "remainingFraction": _round(remaining, 6),
                "minutes": _round(budget_total, 2),
                "remainingMinutes": _round(budget_total * remaining, 2),
            },
        }


def _round(value: Decimal, places: int) -> float:
    return float(value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN))
