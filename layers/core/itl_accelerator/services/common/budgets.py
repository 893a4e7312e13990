"""What a spent budget refuses (domain/budgets.py): new instances, new jobs and the placement of waiting ones, in the
budget's scope, for the rest of the month — 409 ``BudgetExceeded`` naming the budget."""

from __future__ import annotations

from datetime import datetime

from itl_accelerator.domain.budgets import Budget, period_of
from itl_accelerator.errors import BudgetExceeded


def refusal(budgets: list[Budget], now: datetime, resource_group: str, tags: dict[str, str]) -> BudgetExceeded | None:
    """The 409 ``BudgetExceeded`` of new work in ``resource_group`` with ``tags`` at ``now``, when a budget among
    ``budgets`` (a subscription's) is spent this month and refuses new allocations; None otherwise."""
    period = period_of(now)
    for budget in budgets:
        if budget.blocks(period, resource_group, tags):
            return BudgetExceeded(
                f"The budget '{budget.name}' ({budget.amount} {budget.currency} a month) is spent for {period}: "
                f"{budget.state.spend} {budget.currency}; it refuses new allocations until next month or a larger "
                "amount."
            )
    return None
