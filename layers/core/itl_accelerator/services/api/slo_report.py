"""The SLO report: the API's attainment of its service level objectives over a UTC calendar month, and the error
budget left (itl_accelerator/slo.py for the arithmetic and the burn-rate alerting it shares with template.yaml).

The objectives are the provider's, over every tenant's requests: availability (requests not answered 5xx, goal
``SLO_AVAILABILITY_PERCENT``) and latency (requests answered within ``SLO_LATENCY_THRESHOLD_MS``, goal
``SLO_LATENCY_PERCENT``), counted where the alarms count them (itl_accelerator/api_metrics.py: CloudWatch in AWS,
the emulator's request log locally). Who may read it is the route's concern (admins of the subscription the path
names, ``ITL.Accelerator/slo/read``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from itl_accelerator.api_metrics import ApiMetrics
from itl_accelerator.errors import InvalidParameter
from itl_accelerator.settings import Settings
from itl_accelerator.slo import Objective, current_month, month_period

SCOPE = "The provider's whole API: every tenant's requests (the SLOs are the provider's promise to all of them)."


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SloReportService:
    """``metrics``: where the requests are counted; ``settings``: the goals and the threshold; ``clock``: epoch s."""

    def __init__(self, metrics: ApiMetrics, settings: Settings, clock: Callable[[], float] = time.time):
        self._metrics = metrics
        self._settings = settings
        self._clock = clock

    def objectives(self) -> tuple[Objective, Objective]:
        """(availability, latency) as configured."""
        threshold = self._settings.slo_latency_threshold_ms
        return (
            Objective("availability", self._settings.slo_availability_percent, "answered with a 5xx status"),
            Objective("latency", self._settings.slo_latency_percent, f"answered later than {threshold} ms"),
        )

    def month(self, month: str | None) -> dict[str, Any]:
        """The report of ``month`` (``YYYY-MM``, UTC; default: the current month, so far). Raises 400
        ``InvalidParameter`` (target ``month``) for another format or a month that has not begun."""
        now = self._clock()
        try:
            period = month_period(month or current_month(now), now)
        except ValueError as exc:
            raise InvalidParameter(f"month: {exc}; got '{(month or '')[:20]}'.", target="month") from None
        totals = self._metrics.totals(period.start, period.until)
        availability, latency = self.objectives()
        latency_report = latency.evaluate(totals.slow, totals.requests, period)
        latency_report["thresholdMs"] = self._settings.slo_latency_threshold_ms
        return {
            "month": period.month,
            "start": _iso(period.start),
            "end": _iso(period.end),
            "until": _iso(period.until),
            "complete": period.complete,
            "scope": SCOPE,
            "source": self._metrics.description,
            "objectives": [availability.evaluate(totals.server_errors, totals.requests, period), latency_report],
        }
