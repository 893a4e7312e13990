"""Meters in memory: the DynamoDB implementation's ``DynamoMeterRepository`` (repositories/dynamodb/meters.py).
Meters start and end in the workloads' transactions (workloads.py ``start_meter``/``end_meter``); here the usage
sync finds those due and records its progress. Allocation ids match exactly (the table does not lower-case them)."""

from __future__ import annotations

import copy
from decimal import Decimal

from itl_accelerator.domain.usage import Meter, MeterRef
from itl_accelerator.repositories.memory.state import MemoryState, StoredMeter
from itl_accelerator.repositories.memory.workloads import meter_key


def meter_of(stored: StoredMeter) -> Meter:
    """The meter a stored one reads as (its descriptor's fields; ``active`` while it is in the due index)."""
    return Meter.described(
        stored.allocation_id,
        copy.deepcopy(stored.descriptor),
        gpus=stored.gpus,
        terms=stored.terms,
        start=stored.start,
        end=stored.end,
        dgx_id=stored.dgx_id,
        metered_until=stored.metered_until,
        metrics_retry_from=stored.metrics_retry_from,
        active=stored.due is not None,
        settled_months=frozenset(stored.settled_months),
    )


class MemoryMeterRepository:
    """:class:`~itl_accelerator.repositories.protocols.MeterRepository` in memory."""

    def __init__(self, state: MemoryState):
        self._s = state

    def oldest_due(self) -> int | None:
        with self._s.lock:
            due = [m.due for m in self._s.meters.values() if m.due is not None]
            return min(due) if due else None

    def due(self, now: float, limit: int) -> list[MeterRef]:
        """Meters due at or before ``now``'s whole second, most overdue first. (The DynamoDB implementation reads a
        share of ``limit`` from each of its index partitions, so it may return fewer than ``limit`` when more are
        due; both return at most ``limit``.) The subscription comes back lower-cased, as the table's key has it."""
        with self._s.lock:
            found: list[tuple[int, tuple[str, str]]] = []
            for key, meter in self._s.meters.items():
                if meter.due is not None and meter.due <= int(now):
                    found.append((meter.due, key))
            found.sort()
            return [MeterRef(sub, allocation) for _, (sub, allocation) in found[:limit]]

    def get(self, ref: MeterRef) -> Meter | None:
        with self._s.lock:
            stored = self._s.meters.get(meter_key(ref.subscription_id, ref.allocation_id))
            return meter_of(stored) if stored else None

    def advance(self, meter: Meter, metered_until: int, due: int | None, metrics_retry_from: int | None = None) -> None:
        """Record the sync's progress; a meter that is gone is left alone (the table's update requires it)."""
        with self._s.lock:
            stored = self._s.meters.get(meter_key(meter.subscription_id, meter.allocation_id))
            if stored is None:
                return
            stored.metered_until = int(metered_until)
            stored.metrics_retry_from = int(metrics_retry_from) if metrics_retry_from is not None else None
            stored.due = int(due) if due is not None else None

    # ----------------------------------------------------------------------------------------------- spend
    def open_in(self, subscription_id: str) -> list[Meter]:
        """The subscription's meters not closed (in the due index), by allocation id."""
        with self._s.lock:
            subscription = subscription_id.lower()
            return sorted(
                (meter_of(m) for (sub, _), m in self._s.meters.items() if sub == subscription and m.due is not None),
                key=lambda m: m.allocation_id,
            )

    def settle(self, meter: Meter, month: str, costs: dict[str, dict[str, Decimal]]) -> bool:
        """Add ``costs`` to the month's settled spend and mark the month on the meter, once (the DynamoDB
        implementation's transaction)."""
        with self._s.lock:
            stored = self._s.meters.get(meter_key(meter.subscription_id, meter.allocation_id))
            if stored is None or month in stored.settled_months:
                return False
            stored.settled_months.add(month)
            for scope, by_currency in costs.items():
                key = (meter.subscription_id.lower(), month, scope)
                spent = self._s.spend.setdefault(key, {})
                for currency, amount in by_currency.items():
                    if amount:
                        spent[currency] = spent.get(currency, Decimal(0)) + amount
            return True

    def settled(self, subscription_id: str, month: str, scopes: tuple[str, ...]) -> dict[str, dict[str, Decimal]]:
        with self._s.lock:
            return {s: dict(self._s.spend.get((subscription_id.lower(), month, s), {})) for s in scopes}
