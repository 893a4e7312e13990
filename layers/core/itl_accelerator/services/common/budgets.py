"""What budgets refuse (domain/budgets.py), where new work is decided: new instances, new jobs and the placement of
waiting ones, in each budget's scope.

- **A spent budget** whose action refuses (``RefuseNewAllocations``, ``StopAll``) refuses new work it covers for
  the rest of its month: 409 ``BudgetExceeded`` naming the budget and its amount (not the spend, which only those
  who may read the budget see: docs/RBAC.md). A budget that does not apply now (its ``startDate`` is later, or its
  ``endDate`` passed) refuses nothing.
- **A budget counts one currency** (issue 26: spend in another currency was silently ignored, so a 100 USD
  ``StopAll`` budget let a job run up 1,000,000 EUR). So work a budget covers may allocate only in that currency: an
  instance on a node priced in another is 409 ``BudgetCurrencyMismatch``, and a waiting job is placed only on nodes
  priced in it (it waits, saying so). Two budgets covering the same work in two currencies admit no allocation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from itl_accelerator.domain.budgets import Budget, period_of
from itl_accelerator.errors import BudgetCurrencyMismatch, BudgetExceeded


def covering(budgets: Iterable[Budget], now: datetime, resource_group: str, tags: dict[str, str]) -> list[Budget]:
    """The budgets among ``budgets`` (a subscription's) that apply at ``now`` and cover work in ``resource_group``
    with ``tags``."""
    return [b for b in budgets if b.active(now) and b.filter.covers(resource_group, tags)]


@dataclass(frozen=True)
class BudgetView:
    """The budgets covering some work now, the refusal of a spent one among them (None: none), and the currencies they
    let it be billed in (None: any)."""

    budgets: list[Budget]
    refusal: BudgetExceeded | None
    currencies: frozenset[str] | None


def view(budgets: Iterable[Budget], now: datetime, resource_group: str, tags: dict[str, str]) -> BudgetView:
    """What ``budgets`` (a subscription's) say of new work in ``resource_group`` with ``tags`` at ``now``: those
    covering it (:func:`covering`), whether one refuses it (:func:`refusal`), and its currencies (:func:`currencies`).
    Placement, job submission and the capacity offers ask it."""
    found = covering(budgets, now, resource_group, tags)
    return BudgetView(found, refusal(found, now, resource_group, tags), currencies(found))


def refusal(
    budgets: Iterable[Budget], now: datetime, resource_group: str, tags: dict[str, str]
) -> BudgetExceeded | None:
    """The 409 ``BudgetExceeded`` of new work in ``resource_group`` with ``tags`` at ``now``, when a budget among
    ``budgets`` (a subscription's) covering it is spent this month and refuses new allocations; None otherwise."""
    period = period_of(now)
    for budget in covering(budgets, now, resource_group, tags):
        if budget.blocks(period):
            return BudgetExceeded(
                f"The budget '{budget.name}' ({format(budget.amount, 'f')} {budget.currency} a month) is spent for "
                f"{period}; it refuses new allocations until next month or a larger amount."
            )
    return None


def currencies(budgets: Iterable[Budget]) -> frozenset[str] | None:
    """The currencies work covered by ``budgets`` may allocate in: each budget's own (their intersection: empty when
    two differ); None when no budget covers it (any currency)."""
    found: frozenset[str] | None = None
    for budget in budgets:
        found = frozenset({budget.currency}) if found is None else found & {budget.currency}
    return found


def currency_refusal(covering_budgets: list[Budget], currency: str) -> BudgetCurrencyMismatch | None:
    """The 409 ``BudgetCurrencyMismatch`` of an allocation billed in ``currency`` that a budget among
    ``covering_budgets`` counts in another currency; None otherwise."""
    for budget in covering_budgets:
        if budget.currency != currency:
            return BudgetCurrencyMismatch(
                f"The budget '{budget.name}' counts {budget.currency} and covers this work; the node bills in "
                f"{currency}. Use a node priced in {budget.currency}, or change the budget."
            )
    return None
