"""Usage records and hourly roll-ups in memory: the DynamoDB implementation's ``DynamoUsageRepository``
(repositories/dynamodb/usage.py). A record is keyed by its hour and allocation; it is written compare-and-set on
what was read (content hash and billing state), marking its hour's roll-up due, and — when its day is already
billed or closed — queued as a correction (billing.py reads the queue)."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator

from itl_accelerator.billing.rollup import CostDay, CostHour, CostMonth, Rollup, Totals
from itl_accelerator.domain.usage import UsageRecord, WriteOutcome, hour_key
from itl_accelerator.repositories.memory.state import MemoryState, check_size


def usage_key(allocation_id: str, window_start: int) -> tuple[str, str]:
    """Where a record is: its hour and allocation (two windows of one hour are one item, as in the table)."""
    return (hour_key(window_start), allocation_id)


def copy_totals(totals: Totals) -> Totals:
    """A copy of ``totals`` as stored (the table keeps :meth:`Totals.as_stored`)."""
    return Totals.from_stored(totals.as_stored())


class MemoryUsageRepository:
    """:class:`~itl_accelerator.repositories.protocols.UsageRepository` in memory."""

    def __init__(self, state: MemoryState):
        self._s = state

    # ------------------------------------------------------------------------------------------- usage records
    def records(self, allocation_id: str, window_starts: list[int]) -> dict[int, UsageRecord]:
        with self._s.lock:
            found: dict[int, UsageRecord] = {}
            for window_start in window_starts:
                stored = self._s.usage.get(usage_key(allocation_id, window_start))
                if stored is not None:
                    found[stored.window_start] = copy.deepcopy(stored)
            return found

    def get(self, allocation_id: str, window_start: int) -> UsageRecord | None:
        with self._s.lock:
            stored = self._s.usage.get(usage_key(allocation_id, window_start))
            return copy.deepcopy(stored) if stored is not None else None

    def write(self, record: UsageRecord, previous: UsageRecord | None) -> WriteOutcome:
        """``DynamoUsageRepository.write``: ``record`` takes ``previous``'s billing state (``billed``,
        ``corrections`` — set on the caller's object too, as there); ``conflict`` when the stored record is not
        ``previous`` any more (content hash, billing state); ``correction`` when ``previous`` was billed with other
        segments, or when the record's day is before the export cursor (closed); else ``written``. Every write marks
        its hour's roll-up due with a new version."""
        with self._s.lock:
            billed = previous.billed if previous else None
            record.billed, record.corrections = billed, previous.corrections if previous else 0
            check_size(record.descriptor, record.segments, record.metrics, record.billed)
            key = usage_key(record.allocation_id, record.window_start)
            stored = self._s.usage.get(key)
            if previous is None:
                unchanged = stored is None
            else:
                unchanged = (
                    stored is not None
                    and stored.content_hash == previous.content_hash
                    and stored.billed == previous.billed
                )
            if not unchanged:
                return "conflict"
            correction = billed is not None and billed["hash"] != record.billing_hash
            if billed is None and self._s.export_cursor is not None and self._s.export_cursor > record.day:
                correction = True  # the day closed: this usage goes out as a correction
            self._s.usage[key] = copy.deepcopy(record)
            self._s.rollup_due[record.hour] = uuid.uuid4().hex
            if correction:
                self._s.correction_due[(record.hour, record.allocation_id)] = uuid.uuid4().hex
            return "correction" if correction else "written"

    def hour_records(self, hour: str) -> Iterator[UsageRecord]:
        """The records of ``hour`` by allocation (a snapshot taken when iteration starts)."""
        with self._s.lock:
            found = [copy.deepcopy(r) for (h, _), r in sorted(self._s.usage.items(), key=lambda e: e[0]) if h == hour]
        yield from found

    # ------------------------------------------------------------------------------------------- roll-ups
    def due_rollups(self, limit: int) -> list[tuple[str, str]]:
        with self._s.lock:
            return sorted(self._s.rollup_due.items())[:limit]

    def put_rollups(self, rollups: list[Rollup]) -> None:
        with self._s.lock:
            for r in rollups:
                scope = self._s.rollups.setdefault((r.subscription_id.lower(), r.scope.lower()), {})
                scope[r.hour] = copy_totals(r.totals)

    def rollup_done(self, hour: str, version: str) -> bool:
        """Clear the hour's mark if it still has ``version``."""
        with self._s.lock:
            if self._s.rollup_due.get(hour) != version:
                return False
            del self._s.rollup_due[hour]
            return True

    def put_cost_hours(self, hours: list[CostHour]) -> None:
        """Each hour replaces only itself in its resource's day (``DynamoUsageRepository.put_cost_hours``)."""
        with self._s.lock:
            for hour in hours:
                key = (hour.subscription_id.lower(), hour.day, hour.dimensions.resource_scope.lower())
                day = self._s.cost_days.get(key)
                if day is None:
                    day = self._s.cost_days[key] = CostDay(hour.subscription_id, hour.day, hour.dimensions)
                day.dimensions = hour.dimensions
                day.hours[hour.hour] = copy.deepcopy(hour.totals)

    def put_cost_group_hours(self, hours: list[CostHour]) -> None:
        """``DynamoUsageRepository.put_cost_group_hours``: the hour replaces only itself in its group's day (whose
        revision goes up by one), and the day's total goes into the group's month unless the month holds a later
        revision of it."""
        with self._s.lock:
            for hour in hours:
                sub, scope = hour.subscription_id.lower(), hour.dimensions.resource_scope
                revision, day = self._s.cost_group_days.get((sub, hour.day, scope), (0, None))
                if day is None:
                    day = CostDay(hour.subscription_id, hour.day, hour.dimensions)
                day.dimensions = hour.dimensions
                day.hours[hour.hour] = copy_totals(hour.totals)
                self._s.cost_group_days[(sub, hour.day, scope)] = (revision + 1, day)
                total = Totals()
                for totals in day.hours.values():
                    total.merge(totals)
                key = (sub, hour.day[:7], scope)
                revisions, month = self._s.cost_group_months.get(key, ({}, None))
                if month is None:
                    month = CostMonth(hour.subscription_id, hour.day[:7], hour.dimensions)
                if revisions.get(hour.day, 0) < revision + 1:
                    month.dimensions = hour.dimensions
                    month.days[hour.day] = copy_totals(total)
                    revisions[hour.day] = revision + 1
                self._s.cost_group_months[key] = (revisions, month)

    def mark_cost_groups_since(self, hour: str) -> str:
        with self._s.lock:
            if self._s.cost_groups_since is None:
                self._s.cost_groups_since = hour
            return self._s.cost_groups_since

    def cost_groups_since(self) -> str | None:
        with self._s.lock:
            return self._s.cost_groups_since

    def cost_group_days(self, subscription_id: str, first_day: str, last_day: str) -> Iterator[CostDay]:
        """By day, then group scope (the table's sort key)."""
        with self._s.lock:
            found = sorted(
                (key, copy.deepcopy(day))
                for key, (_, day) in self._s.cost_group_days.items()
                if key[0] == subscription_id.lower() and first_day <= key[1] <= last_day
            )
        for _, day in found:
            day.subscription_id = subscription_id
            yield day

    def cost_group_months(self, subscription_id: str, month: str) -> Iterator[CostMonth]:
        """By group scope (the table's sort key)."""
        with self._s.lock:
            found = sorted(
                (key, copy.deepcopy(m))
                for key, (_, m) in self._s.cost_group_months.items()
                if key[0] == subscription_id.lower() and key[1] == month
            )
        for _, m in found:
            m.subscription_id = subscription_id
            yield m

    def cost_days(self, subscription_id: str, first_day: str, last_day: str) -> Iterator[CostDay]:
        """By day, then resource scope (the table's sort key)."""
        with self._s.lock:
            found = sorted(
                (key, copy.deepcopy(day))
                for key, day in self._s.cost_days.items()
                if key[0] == subscription_id.lower() and first_day <= key[1] <= last_day
            )
        for _, day in found:
            day.subscription_id = subscription_id
            yield day

    def rollups(self, subscription_id: str, scope: str, first_hour: str, last_hour: str) -> dict[str, Totals]:
        with self._s.lock:
            hours = self._s.rollups.get((subscription_id.lower(), scope.lower()), {})
            return {h: copy_totals(t) for h, t in sorted(hours.items()) if first_hour <= h <= last_hour}
