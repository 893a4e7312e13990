"""The hourly roll-ups: every hour whose usage records changed (marked due by each record write) is recomputed from
its records — per resource lifetime, per subscription, per node lifetime, per resource group and tag
(billing/rollup.py), and each resource's and each cost group's charges of the hour (with the group's day total in its
month, issue 27) for cost queries — never incremented, so a repeated or
overlapping run changes nothing. Bounded by ``rollup_batch_hours`` and the Lambda's time left; an
hour that fails is logged and stays due.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from itl_accelerator.billing.metering import HOUR
from itl_accelerator.billing.rollup import HourRollup
from itl_accelerator.domain.usage import USAGE_RETENTION_SECONDS, hour_key
from itl_accelerator.observability import logger
from itl_accelerator.repositories.protocols import UsageRepository
from itl_accelerator.settings import Settings

#: A run stops starting a new hour when less than this is left of its Lambda's time (seconds).
TIME_RESERVE_SECONDS = 20.0


@dataclass
class RollupReport:
    """What one roll-up run did: hours rolled up, records read, roll-up items written, hours left for later."""

    hours: int = 0
    records: int = 0
    items: int = 0
    requeued: int = 0
    errors: int = 0
    stopped_early: bool = False
    rolled: list[str] = field(default_factory=list)

    def as_metrics(self) -> dict[str, int]:
        return {
            "hours": self.hours,
            "records": self.records,
            "items": self.items,
            "requeued": self.requeued,
            "errors": self.errors,
        }


class UsageRollups:
    """The hourly roll-ups (module docstring): every hour marked due is recomputed from its records."""

    def __init__(self, usage: UsageRepository, settings: Settings, clock: Callable[[], float] = time.time):
        self._usage = usage
        self._settings = settings
        self._clock = clock

    def run(self, *, time_left: Callable[[], float] | None = None) -> RollupReport:
        """Roll up the hours due, oldest first. The first run ever records the hour after now as the first whose
        roll-ups hold its cost groups (every record of a later hour is written after it, so that hour is rolled up by
        a run that writes them): a table from before cost groups answers cost queries of earlier days from its
        resources' days (services/api/costs.py)."""
        report = RollupReport()
        if self._usage.cost_groups_since() is None:
            self._usage.mark_cost_groups_since(hour_key(int(self._clock()) + HOUR))
        for hour, version in self._usage.due_rollups(self._settings.rollup_batch_hours):
            if time_left is not None and time_left() < TIME_RESERVE_SECONDS:
                report.stopped_early = True
                break
            try:
                rollup = self.roll_up(hour)
            except Exception:  # noqa: BLE001 - one hour that fails must not keep the others from their roll-ups
                logger.exception("Roll-up failed", extra={"hour": hour})
                report.errors += 1
                continue
            report.hours += 1
            report.records += rollup.records
            report.items += len(rollup.scopes)
            report.rolled.append(hour)
            if not self._usage.rollup_done(hour, version):
                report.requeued += 1  # new usage arrived meanwhile: the hour stays due
        return report

    def roll_up(self, hour: str) -> HourRollup:
        """Recompute and store the roll-ups of one hour (``YYYY-MM-DDTHH``)."""
        rollup = HourRollup(hour)
        ttl = 0
        for record in self._usage.hour_records(hour):
            ttl = ttl or record.window_start + USAGE_RETENTION_SECONDS
            rollup.add(record.descriptor, record.gpu_seconds, record.billable_gpu_seconds, record.costs, record.metrics)
        self._usage.put_rollups(list(rollup.rollups(ttl)))
        self._usage.put_cost_hours(list(rollup.cost_hours(ttl)))
        self._usage.put_cost_group_hours(list(rollup.cost_group_hours(ttl)))
        return rollup
