"""What the work a budget covers has spent this month, as of now — the figure budgets are evaluated by.

spend(budget, month, now) = the spend *settled* in the budget's scopes that month (each allocation's charges of the
month, added once when its meter closed: repositories ``MeterRepository.settle``)
+ the charges that month of every meter *still open* that the budget covers, computed from its locked terms and the
time it ran up to ``now`` (domain/usage.py ``Meter.month_charges``: the same window charges the usage sync records).

So the figure does not wait for the usage sync, the roll-up or the export (issue 26: a ``StopAll`` budget, evaluated
from the 15-minute roll-ups of a 5-minute sync, stopped 300 USD at 3,230 USD); an allocation is counted once (open
until settled, then settled); and it costs one ``Query`` (+ a consistent read per 100) of the subscription's open
meters — which grows with the allocations running, never with the month's history — and one read of the settled
spend per budget.

The two reads are not one snapshot: settled spend is read first, then the open meters (consistently), so a meter
closing in between is missed by that one evaluation (never counted twice): an evaluation is at most that closing
allocation's charges low, and the next one is exact.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from decimal import Decimal

from itl_accelerator.domain.budgets import Budget, Spend, month_bounds, period_of
from itl_accelerator.repositories.protocols import MeterRepository


def _add(total: dict[str, Decimal], costs: dict[str, Decimal]) -> None:
    for currency, amount in costs.items():
        total[currency] = total.get(currency, Decimal(0)) + amount


class SpendReader:
    """Month-to-date spend of budgets (module docstring) over the meter repository."""

    def __init__(self, meters: MeterRepository):
        self._meters = meters

    def spend(self, budget: Budget, now: datetime) -> Spend:
        """The spend of ``budget`` in the month of ``now`` (UTC), by currency, as of ``now``."""
        return self.spend_of([budget], now)[budget.name]

    def spend_of(self, budgets: Iterable[Budget], now: datetime) -> dict[str, Spend]:
        """:meth:`spend` of several budgets of one subscription: every settled spend read first, then the open meters
        once (module docstring: never counted twice)."""
        budgets = list(budgets)
        if not budgets:
            return {}
        month = period_of(now)
        start, end = month_bounds(month)
        at = now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        epoch = int(now.timestamp())
        totals: dict[str, dict[str, Decimal]] = {}
        for budget in budgets:
            settled = self._meters.settled(budget.subscription_id, month, budget.filter.scopes)
            totals[budget.name] = {}
            for costs in settled.values():
                _add(totals[budget.name], costs)
        for meter in self._meters.open_in(budgets[0].subscription_id):
            if month in meter.settled_months:
                continue  # in the settled spend already
            charges: dict[str, Decimal] | None = None
            for budget in budgets:
                if budget.filter.covers(meter.resource_group, meter.tags):
                    charges = charges if charges is not None else meter.month_charges(start, end, epoch)
                    _add(totals[budget.name], charges)
        return {name: Spend(costs, at) for name, costs in totals.items()}
