"""Shape of ``GET /subscriptions/{sub}/providers/ITL.Accelerator/slo?month=YYYY-MM`` (services/api/slo_report.py).

Units: percent for goals and attainment; a share (1 = all) for ``remainingFraction``; minutes for the budget read as
time (0.1 % of a 30-day month is 43.2 minutes of full outage); milliseconds for the latency threshold.
"""

from __future__ import annotations

from pydantic import Field

from itl_accelerator.models.common import ApiModel


class ErrorBudget(ApiModel):
    """What the goal leaves to spend over the month, and what is left of it."""

    allowed_bad_requests: float = Field(description="Bad requests the goal allows among those made so far.")
    remaining_fraction: float = Field(description="Share of the budget left: 1 untouched, 0 spent, below 0 overspent.")
    minutes: float = Field(description="The month's budget as minutes of full outage (43.2 for 99.9 % of 30 days).")
    remaining_minutes: float = Field(description="What is left of those minutes (negative: overspent).")


class ObjectiveReport(ApiModel):
    """One SLO over the month."""

    name: str = Field(description="availability or latency")
    goal_percent: float
    bad_when: str = Field(description="What makes a request count against the objective.")
    threshold_ms: int | None = Field(default=None, description="Latency only: the threshold, milliseconds.")
    requests: int
    bad_requests: int
    attainment_percent: float | None = Field(description="Share of good requests; null when there were none.")
    met: bool = Field(description="Whether attainment is at or above the goal so far (no requests: met).")
    burn_rate: float = Field(description="How fast the month spent its budget: 1 = exactly all of it by its end.")
    error_budget: ErrorBudget


class SloReport(ApiModel):
    """The API's SLOs over one UTC calendar month (the current one: so far)."""

    month: str = Field(examples=["2026-11"])
    start: str = Field(description="The month's first instant (UTC).")
    end: str = Field(description="The instant after the month (UTC).")
    until: str = Field(description="Where the figures stop: the end, or now for the running month.")
    complete: bool
    scope: str = Field(description="Whose requests: the provider's whole API.")
    source: str = Field(description="Where the requests were counted.")
    objectives: list[ObjectiveReport]
