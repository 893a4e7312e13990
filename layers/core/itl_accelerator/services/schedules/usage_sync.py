"""Usage metering: the sync that turns meters into usage records (every 5 minutes; the hourly roll-ups that sum them
are services/schedules/usage_rollups.py). Both run on EventBridge Scheduler schedules, which deliver at least once and may overlap, so
both are idempotent: a record's id is its allocation and window, it is written only when its content changed
(compare-and-set), and a roll-up is recomputed from the hour's records, never incremented.

A run reads every meter due, ``usage_sync_batch_size`` a page (a fair share of each index partition), until none is
due or its Lambda's time runs short (``time_left``: then ``stopped_early``, and ``UsageSyncLagSeconds`` shows the
backlog; an alarm fires on it), so nothing is silently left behind however many meters are due. A meter syncs at
most ``usage_max_windows_per_meter`` windows a run; the next run resumes from what is stored (each meter's
``meteredUntil``, the roll-up queue).

The DGX Platform is read for the work due, not on every run for every hour still open to late metrics: a live
meter's sync reads its current hour, and re-reads the last ``usage_late_windows`` hours only on its first sync of a
new hour — so an hour is read as final at most ``usage_late_windows + 1`` times (issue 27: 3 windows on every run,
about 48 reads an hour). An ended meter is synced once when its end is known and once more when its late period is
over, when it settles and closes (not every run in between).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from itl_accelerator.billing.metering import HOUR, WindowCharge, ended_by, iso, window_charge, window_of, windows
from itl_accelerator.dgx.errors import DgxError, DgxPermanentError
from itl_accelerator.domain.budgets import month_bounds
from itl_accelerator.domain.usage import Meter, MeterRef, UsageRecord, day_of
from itl_accelerator.observability import logger
from itl_accelerator.repositories.errors import StoreBusy
from itl_accelerator.repositories.protocols import Repositories
from itl_accelerator.services.common.reattempt import reattempt
from itl_accelerator.settings import Settings

if TYPE_CHECKING:  # a platform's client (httpx, tenacity) loads when it is made, on its first call
    from itl_accelerator.platforms.router import Platforms

#: A run stops starting new work when less than this is left of its Lambda's time (seconds).
TIME_RESERVE_SECONDS = 20.0
#: How long an hour whose metrics could not be read (the DGX Platform unavailable) is read again; then it keeps
#: what it has (its bill never depended on them).
METRICS_RETRY_SECONDS = 24 * HOUR
#: Judgements and writes of a usage window while others write it (:class:`WindowMoved`), before ``StoreBusy``.
WRITE_ATTEMPTS = 5


def segments_of(charge: WindowCharge) -> list[dict[str, Any]]:
    """A window charge as stored in a usage record (decimal strings for money; epoch seconds; GPU-seconds)."""
    return [
        {
            "start": s.start,
            "end": s.end,
            "gpuSeconds": s.gpu_seconds,
            "billableGpuSeconds": s.billable_gpu_seconds,
            "pricePerGpuHour": format(s.price_per_gpu_hour, "f"),
            "currency": s.currency,
            "cost": format(s.cost, "f"),
        }
        for s in charge.segments
    ]


@dataclass
class SyncReport:
    """What one sync run did: meters read, windows written (new or changed), unchanged, *late* (a window already
    final whose content changed: late metrics or a late end), corrections queued (usage of a day already billed or
    closed), DGX metric reads that failed (read again later), meters closed (ended, last window final), meters whose
    sync failed (logged; retried later), index pages read, and whether the run's time ran short with meters still
    due (``stopped_early``)."""

    meters: int = 0
    windows_written: int = 0
    windows_unchanged: int = 0
    late_windows: int = 0
    corrections: int = 0
    dgx_failures: int = 0
    meters_closed: int = 0
    errors: int = 0
    pages: int = 0
    stopped_early: bool = False

    def as_metrics(self) -> dict[str, int]:
        return {k: int(v) for k, v in asdict(self).items()}


class UsageSync:
    """Meters → usage records (module docstring). ``platforms``: the execution platforms, whose metrics each meter's
    allocation is read from (its platform id says which)."""

    def __init__(
        self,
        repositories: Repositories,
        platforms: Platforms,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ):
        self._meters = repositories.meters
        self._usage = repositories.usage
        self._billing = repositories.billing
        self.platforms = platforms
        self._settings = settings
        self._clock = clock

    def lag_seconds(self, now: float) -> int:
        """Seconds the most overdue meter has waited past its due time at ``now`` (0 while the sync keeps up):
        ``UsageSyncLagSeconds``."""
        oldest = self._meters.oldest_due()
        return max(0, int(now) - oldest) if oldest is not None else 0

    def run(self, *, now: float | None = None, time_left: Callable[[], float] | None = None) -> SyncReport:
        """One pass over every meter due now (epoch seconds), page after page (module docstring). A meter that
        fails is logged, counted and retried later; it never stops the others. Each synced meter's next due time
        lies after ``now``, so the next page is the meters not yet read; a meter the index still lists (it lags
        its table) is not read twice, and a page of nothing new ends the run."""
        now = int(self._clock() if now is None else now)
        report = SyncReport()
        # the export cursor and its copies made sure of before the run's first write (a table from before the
        # copies gets them here; repositories/dynamodb/billing.py open_days_from): once a run, a few writes
        cursor_known = False
        seen: set[MeterRef] = set()
        while True:
            page = [ref for ref in self._meters.due(now, self._settings.usage_sync_batch_size) if ref not in seen]
            report.pages += 1
            if not page:
                return report
            for ref in page:
                if time_left is not None and time_left() < TIME_RESERVE_SECONDS:
                    report.stopped_early = True
                    logger.warning("The usage sync ran out of time with meters still due", extra=report.as_metrics())
                    return report
                seen.add(ref)
                meter = self._meters.get(ref)
                if meter is None or not meter.active:
                    continue
                report.meters += 1
                try:
                    if not cursor_known:
                        self._billing.open_days_from(day_of(window_of(max(meter.start, meter.metered_until))))
                        cursor_known = True
                    self.sync_meter(meter, now, report)
                except Exception:  # noqa: BLE001 - one bad meter must not keep the others from being metered
                    logger.exception("Meter sync failed", extra={"allocation": meter.allocation_id})
                    report.errors += 1
                    later = now + self._settings.usage_sync_interval_seconds * 2
                    self._meters.advance(meter, meter.metered_until, later, meter.metrics_retry_from)

    def sync_meter(self, meter: Meter, now: int, report: SyncReport) -> None:
        """Record ``meter``'s usage from where it stopped up to its end or ``now``, re-reading the last
        ``usage_late_windows`` hours (late metrics), the hours after an end learned late (rewritten, empty), and
        hours whose metrics could not be read (for :data:`METRICS_RETRY_SECONDS`). Billing always advances: a
        metrics read that fails never holds usage back. Closes the meter once it ended and its last hour is past
        the late period. An end still ahead (a capacity reservation's window) is not an end yet: the meter is
        recorded up to ``now``, as a live one, until it passes (billing/metering.py ``ended_by``)."""
        late = self._settings.usage_late_windows
        ended = ended_by(meter.end, now)
        until = ended if ended is not None else now
        # Late hours are re-read on a meter's first sync of a new hour (and on every sync of an ended meter, which
        # has two: module docstring); between, a live meter's sync reads its current hour only.
        new_hour = ended is not None or window_of(now) > window_of(meter.metered_until)
        resync_from = meter.metered_until - late * HOUR if new_hour else meter.metered_until
        if ended is not None and ended < meter.metered_until:
            resync_from = min(resync_from, ended - 1)  # an end learned late: rewrite from its hour on
        retry = meter.metrics_retry_from
        if retry is not None and retry >= now - METRICS_RETRY_SECONDS:
            resync_from = min(resync_from, retry)
        first = window_of(max(meter.start, resync_from))
        starts = list(windows(first, max(until, meter.metered_until)))
        capped = len(starts) > self._settings.usage_max_windows_per_meter
        starts = starts[: self._settings.usage_max_windows_per_meter]
        stored = self._usage.records(meter.allocation_id, starts)
        failed_at: int | None = None
        for start in starts:
            charge = window_charge(
                meter.terms, gpus=meter.gpus, start=meter.start, end=ended, now=now, window_start=start
            )
            metrics, ok = self._metrics(meter, max(meter.start, start), min(until, start + HOUR))
            if not ok:
                report.dgx_failures += 1
                failed_at = start if failed_at is None else failed_at
            record = UsageRecord(
                allocation_id=meter.allocation_id,
                window_start=start,
                descriptor=meter.descriptor(),
                segments=segments_of(charge),
                metrics=metrics if ok else (stored[start].metrics if start in stored else None),
                final=ended is not None or start + HOUR <= now,
            )
            self._write(record, stored.get(start), report)
        reached = min(until, starts[-1] + HOUR) if capped and starts else until
        settled = ended is not None and not capped and now >= ended + late * HOUR
        closing = ended is not None and settled and (failed_at is None or now >= ended + METRICS_RETRY_SECONDS)
        due = None if closing else now + max(1, self._settings.usage_sync_interval_seconds // 2)
        if due is not None and ended is not None and not capped and failed_at is None and now >= ended:
            due = max(due, ended + late * HOUR)  # nothing more to read until its late period is over
        if closing:
            self._settle(meter, now)
        self._meters.advance(meter, max(meter.start, reached), due, failed_at)
        report.meters_closed += int(closing)

    def _settle(self, meter: Meter, now: int) -> None:
        """Settle a closing meter's charges month by month into its subscription's spend (what budgets read:
        services/common/spend.py), each month once, before the meter leaves the open meters."""
        for month in meter.months(now):
            if month in meter.settled_months:
                continue
            start, end = month_bounds(month)
            costs = meter.month_charges(start, end, now)
            self._meters.settle(meter, month, dict.fromkeys(meter.spend_scopes, costs))

    def _metrics(self, meter: Meter, start: int, end: int) -> tuple[dict[str, Any] | None, bool]:
        """The DGX metrics of the allocation over ``[start, end)``: ``(metrics, ok)``; ``ok`` False when the read
        failed for a transient reason (the window keeps what it had and is read again, for a day). A resource the
        platform does not know, or will not report on, has no metrics (not a failure)."""
        if not meter.dgx_id or end <= start:
            return None, True
        try:
            usage = self.platforms.get_usage(meter.dgx_id, iso(start), iso(end))
        except DgxPermanentError:  # it does not know the resource (404), or refuses to say: no metrics to wait for
            return None, True
        except DgxError as exc:
            logger.warning("DGX usage read failed", extra={"allocation": meter.allocation_id, "error": str(exc)})
            return None, False
        metrics = {
            "gpuUtilizationPercent": usage.gpu_utilization_percent,
            "gpuMemoryGb": usage.gpu_memory_gb,
            "energyWh": usage.energy_wh,
            "requests": usage.requests,
            "tokensIn": usage.tokens_in,
            "tokensOut": usage.tokens_out,
        }
        return {k: v for k, v in metrics.items() if v is not None}, True

    def _write(self, record: UsageRecord, previous: UsageRecord | None, report: SyncReport) -> None:
        """Write the window's ``record`` over ``previous`` (as the caller read it), unless it holds the same. A
        window written meanwhile (or a busy store) is read again and judged again, :data:`WRITE_ATTEMPTS` times in
        all; then ``StoreBusy``."""
        stored = self._as_stored(record, previous)
        reattempt(
            lambda: self._write_once(record, next(stored), report),
            on=WindowMoved,
            attempts=WRITE_ATTEMPTS,
            exhausted=lambda: StoreBusy(f"usage record {record.allocation_id}@{record.hour} kept changing"),
        )

    def _as_stored(self, record: UsageRecord, previous: UsageRecord | None) -> Iterator[UsageRecord | None]:
        """``previous`` first (the caller's read), then the window's record as stored now, at each later call."""
        yield previous
        while True:
            yield self._usage.get(record.allocation_id, record.window_start)

    def _write_once(self, record: UsageRecord, previous: UsageRecord | None, report: SyncReport) -> None:
        """One judgement and write of :meth:`_write`. Raises :class:`WindowMoved` when the window was written since
        ``previous`` was read, or the store was busy (nothing was written)."""
        if previous is not None and previous.content_hash == record.content_hash:
            report.windows_unchanged += 1
            return
        try:
            outcome = self._usage.write(record, previous)
        except StoreBusy as exc:
            raise WindowMoved(str(exc)) from exc
        if outcome == "conflict":
            raise WindowMoved(f"usage record {record.allocation_id}@{record.hour} was written meanwhile")
        report.windows_written += 1
        report.late_windows += int(previous is not None and previous.final)
        report.corrections += int(outcome == "correction")


class WindowMoved(Exception):
    """A usage window's record was written since it was read, or the store was busy: nothing was written; read it
    again and judge again."""


__all__ = ["SyncReport", "UsageSync", "segments_of"]
