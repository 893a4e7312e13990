"""Budgets: an amount a subscription (or some of its resource groups, or the work carrying a tag) may spend per calendar
month (UTC) in one currency, with thresholds that notify once each per month when reached, and an optional action once
it is spent — refuse new allocations, or stop everything it covers (RunPod's spend limit; Azure Cost Management
budgets' shape).

**Spend** is what the work a budget covers has cost this month, in the budget's currency, exact in ``Decimal``, as of
the evaluation (services/common/spend.py: the charges of every allocation of the month — those settled when their
meter closed, plus those still open computed from their locked terms and the time they ran, up to now). Work billed
in another currency is shown beside it (``other``), never added; new allocations in another currency than a
budget covering them are refused (services/common/budgets.py).

**Evaluation** (:func:`evaluate`) is a pure function of the budget, its spend and the time: a new month starts afresh;
each threshold reached (``GreaterThanOrEqualTo``, or ``GreaterThan``) and not yet notified this month is to be
notified; a threshold no longer reached (the amount was raised) is forgotten, so it notifies again when it is; the
budget is *exceeded* while its spend is at least its amount, and the ``Budget Exceeded`` notice goes out once per
month (again after it was lifted and reached anew).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from itl_accelerator.billing.rollup import SUBSCRIPTION_SCOPE, resource_group_scope, tag_scope


class BudgetAction(StrEnum):
    """What happens once a budget is spent: ``None`` (notify only), ``RefuseNewAllocations`` (new instances and jobs,
    and waiting jobs' placements, are refused until the next month or a larger amount), ``StopAll`` (as well, every
    running job it covers is canceled and every instance deleted, billed up to that moment)."""

    NONE = "None"
    REFUSE_NEW = "RefuseNewAllocations"
    STOP_ALL = "StopAll"

    @property
    def refuses(self) -> bool:
        return self is not BudgetAction.NONE


@dataclass(frozen=True)
class BudgetFilter:
    """What a budget covers: the whole subscription (nothing set), some ``resource_groups``, or the work whose tag
    ``tag_key`` has one of ``tag_values`` (compared case-insensitively, as the roll-ups fold them)."""

    resource_groups: tuple[str, ...] = ()
    tag_key: str | None = None
    tag_values: tuple[str, ...] = ()

    @property
    def scopes(self) -> tuple[str, ...]:
        """The spend scopes whose costs add up to the spend (disjoint: each allocation counts once)."""
        if self.resource_groups:
            return tuple(dict.fromkeys(resource_group_scope(g) for g in self.resource_groups))
        if self.tag_key is not None:
            return tuple(dict.fromkeys(tag_scope(self.tag_key, v) for v in self.tag_values))
        return (SUBSCRIPTION_SCOPE,)

    def covers(self, resource_group: str, tags: dict[str, str]) -> bool:
        """Whether work in ``resource_group`` with ``tags`` counts against the budget."""
        if self.resource_groups:
            return resource_group.lower() in {g.lower() for g in self.resource_groups}
        if self.tag_key is not None:
            value = next((v for k, v in tags.items() if k.lower() == self.tag_key.lower()), None)
            return value is not None and value.lower() in {v.lower() for v in self.tag_values}
        return True


@dataclass(frozen=True)
class Threshold:
    """A notification's threshold: ``percent`` of the amount, reached when the spend is at least it
    (``GreaterThanOrEqualTo``) or above it (``GreaterThan``)."""

    percent: Decimal
    strictly_above: bool = False

    def reached(self, percent: Decimal) -> bool:
        return percent > self.percent if self.strictly_above else percent >= self.percent


@dataclass(frozen=True)
class BudgetState:
    """Where a budget stands in ``period`` (``YYYY-MM``) as of its last evaluation (``evaluated_at``, UTC ISO 8601):
    the ``spend`` in its currency and in ``other`` currencies (currency → amount), the thresholds (percent) whose
    notification went out, whether the amount is spent (``exceeded``) and whether that was notified this month
    (``exceeded_notified``). ``version`` counts the writes of the state (each conditioned on the one read)."""

    period: str = ""
    spend: Decimal = Decimal(0)
    other: tuple[tuple[str, Decimal], ...] = ()
    notified: tuple[Decimal, ...] = ()
    exceeded: bool = False
    exceeded_notified: bool = False
    evaluated_at: str = ""
    version: int = 0


@dataclass
class Budget:
    """A budget of a subscription: its ARM envelope ``document`` and ``etag``; ``amount`` per month in ``currency``;
    its notification ``thresholds``; the ``action`` once spent; what it covers; from ``start`` (first month) to
    ``end`` (None: open-ended); and its :class:`BudgetState`."""

    subscription_id: str
    name: str
    document: dict[str, Any]
    etag: str
    amount: Decimal
    currency: str
    thresholds: tuple[Threshold, ...]
    action: BudgetAction
    filter: BudgetFilter
    start: datetime
    end: datetime | None = None
    state: BudgetState = field(default_factory=BudgetState)

    def active(self, now: datetime) -> bool:
        """Whether the budget applies at ``now`` (UTC)."""
        return self.start <= now and (self.end is None or now < self.end)

    def blocks(self, period: str) -> bool:
        """Whether the budget refuses new work it covers in ``period`` (``YYYY-MM``): its action refuses and its last
        evaluation found it spent in that period (whether it applies now, and to what: :meth:`active`,
        :attr:`filter`)."""
        return self.action.refuses and self.state.exceeded and self.state.period == period


@dataclass(frozen=True)
class Spend:
    """What the work a budget covers cost in a month: by currency (``costs``), as of ``at`` (UTC ISO 8601)."""

    costs: dict[str, Decimal]
    at: str

    def of(self, currency: str) -> Decimal:
        return self.costs.get(currency, Decimal(0))


@dataclass(frozen=True)
class Evaluation:
    """What one evaluation found: the new ``state``, the thresholds ``crossed`` (to notify now) and whether the
    budget became spent and must say so (``newly_exceeded``)."""

    state: BudgetState
    crossed: tuple[Threshold, ...]
    newly_exceeded: bool


def evaluate(budget: Budget, spend: Spend, now: datetime) -> Evaluation:
    """Evaluate ``budget`` with its ``spend`` at ``now`` (module docstring); the state's version is left as read."""
    period = period_of(now)
    state = budget.state if budget.state.period == period else BudgetState(period=period, version=budget.state.version)
    if not budget.active(now):  # before its start or after its end: it counts nothing and stands nowhere
        quiet = BudgetState(period=period, evaluated_at=spend.at, version=budget.state.version)
        return Evaluation(quiet, (), False)
    amount = spend.of(budget.currency)
    percent = amount * 100 / budget.amount
    reached = {t.percent for t in budget.thresholds if t.reached(percent)}
    crossed = tuple(t for t in budget.thresholds if t.percent in reached and t.percent not in state.notified)
    exceeded = amount >= budget.amount
    newly_exceeded = exceeded and not state.exceeded_notified
    fresh = replace(
        state,
        spend=amount,
        other=tuple(sorted((c, a) for c, a in spend.costs.items() if c != budget.currency and a)),
        notified=tuple(sorted(reached)),
        exceeded=exceeded,
        exceeded_notified=exceeded,
        evaluated_at=spend.at,
    )
    return Evaluation(fresh, crossed, newly_exceeded)


def quietly(budget: Budget, spend: Spend, now: datetime) -> BudgetState:
    """The state of ``budget`` evaluated at ``now`` without notifying anything: its spend, whether it is spent, and
    what was notified this month less what is no longer reached — what a change of the budget writes at once, so a
    raised amount lifts its refusals in the same write, leaving the notices to :func:`evaluate`."""
    found = evaluate(budget, spend, now).state
    state = budget.state if budget.state.period == found.period else BudgetState()
    return replace(
        found,
        notified=tuple(t for t in found.notified if t in state.notified),
        exceeded_notified=found.exceeded and state.exceeded_notified,
    )


def period_of(now: datetime) -> str:
    """The budget period (calendar month, UTC) of ``now``: ``YYYY-MM``."""
    return now.astimezone(UTC).strftime("%Y-%m")


def month_bounds(period: str) -> tuple[int, int]:
    """``[start, end)`` of a month ``YYYY-MM`` (UTC), epoch seconds."""
    year, month = int(period[:4]), int(period[5:7])
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return int(start.timestamp()), int(end.timestamp())
