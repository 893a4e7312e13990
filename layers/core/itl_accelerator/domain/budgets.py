"""Budgets: an amount a subscription (or one of its resource groups, or the work carrying a tag) may spend per month
in one currency, with thresholds that notify once each per month when crossed, and an optional action once it is
spent — refuse new allocations, or stop everything it covers (RunPod's spend limit; Azure Cost Management budgets'
shape). Spend is the metered cost the roll-ups hold (billing/rollup.py: per subscription, per resource group, per
tag), in the budget's currency, exact in ``Decimal``; work billed in another currency does not count against it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
        """The roll-up scopes whose costs add up to the spend (disjoint: each allocation counts once)."""
        if self.resource_groups:
            return tuple(resource_group_scope(g) for g in self.resource_groups)
        if self.tag_key is not None:
            return tuple(tag_scope(self.tag_key, v) for v in self.tag_values)
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
class BudgetState:
    """Where a budget stands in ``period`` (``YYYY-MM``): the ``spend`` found by the last evaluation, the thresholds
    (percent) whose notification went out, and whether the amount is spent. ``version`` counts evaluations (each
    written only if none came between: a threshold is notified once however often the monitor runs)."""

    period: str = ""
    spend: Decimal = Decimal(0)
    notified: tuple[Decimal, ...] = ()
    exceeded: bool = False
    version: int = 0


@dataclass
class Budget:
    """A budget of a subscription: its ARM envelope ``document`` and ``etag``; ``amount`` per month in ``currency``;
    its notification ``thresholds`` (percent of the amount); the ``action`` once spent; what it covers; from
    ``start`` (first month) to ``end`` (None: open-ended); and its :class:`BudgetState`."""

    subscription_id: str
    name: str
    document: dict[str, Any]
    etag: str
    amount: Decimal
    currency: str
    thresholds: tuple[Decimal, ...]
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


def period_of(now: datetime) -> str:
    """The budget period (calendar month, UTC) of ``now``: ``YYYY-MM``."""
    return now.astimezone(UTC).strftime("%Y-%m")
