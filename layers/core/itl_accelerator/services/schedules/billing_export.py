"""The daily billing export: one FOCUS 1.2 file per UTC day in S3 (billing/focus.py writes it), with its manifest.

A day is exported in four steps, each safe to repeat, so a run cut off anywhere resumes where it stopped:

1. **Close** the day (repositories/dynamodb/billing.py: the cursor moves past it in the same transaction that records it as
   ``Closed``); from then on usage for it can only arrive as a correction.
2. **Claim** every usage record of the day for this export (``billed`` = what it is now: its segments and
   descriptor; a capacity reservation's hour also with the device-seconds jobs in it used on its node then, read
   from the same hour's records: :func:`as_claimed`, docs/BILLING.md "Capacity reservations"), and every queued
   correction: what changed in a record since it was billed becomes a *correction line* of this day.
3. **Write** the object from the claims alone — never from records as they are now — streamed through a temporary
   file (constant memory) and uploaded; then the manifest (rows, totals, SHA-256) is written **last**. A rerun
   before the manifest writes the same bytes again; a manifest already in S3 is adopted as it is.
4. **Mark** the day ``Exported``. A rerun of an exported day changes nothing and returns its manifest, so a complete
   export is never replaced by an empty or partial one.

Days are exported in order: the next day is the cursor's. The schedule runs every hour at :30 and exports each day
once it ended ``billing_export_grace_seconds`` ago (90 minutes: at 01:30 UTC the next day), so a run that was cut
off resumes within the hour; one run at a time (reserved concurrency 1). An operator may export today early (its
later usage then goes out as corrections tomorrow).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from itl_accelerator.billing.focus import (
    RESERVATIONS,
    USED_GPU_SECONDS_KEY,
    ChargeLine,
    billed_lines,
    manifest,
    write_focus_csv_gz,
)
from itl_accelerator.billing.metering import HOUR
from itl_accelerator.domain.usage import CorrectionDue, UsageRecord, day_of, hours_of_day
from itl_accelerator.repositories.protocols import BillingRepository, UsageRepository
from itl_accelerator.services.common.reattempt import reattempt
from itl_accelerator.settings import Settings

#: A run stops starting a new day when less than this is left of its Lambda's time (seconds).
TIME_RESERVE_SECONDS = 60.0
#: Claims of a queued correction while its usage keeps changing (:class:`CorrectionRequeued`); then it stays queued.
CLAIM_ATTEMPTS = 5


class OutOfTime(Exception):
    """The run's time ran short; what it did is stored and the next run resumes."""


def _check_time(time_left: Callable[[], float] | None) -> None:
    if time_left is not None and time_left() < TIME_RESERVE_SECONDS:
        raise OutOfTime


class CorrectionRequeued(Exception):
    """A correction's claim failed: its usage changed and it was queued again as ``due`` meanwhile."""

    def __init__(self, due: CorrectionDue):
        super().__init__(f"correction {due.allocation_id}@{due.hour} was queued again")
        self.due = due


class ExportRefused(Exception):
    """A day that cannot be exported now: not a day, not begun yet, or not the next one (days are closed and
    exported one after the other)."""


def reservations_used(records: Iterable[UsageRecord]) -> dict[tuple[str, str], int]:
    """Device-seconds that jobs in capacity reservations used in an hour, from the hour's usage ``records``: per
    (reservation ARM id, node ARM id), the sum of the records of allocations running in a reservation (a
    ``capacityReservationId`` on a descriptor of another service than the reservations' own)."""
    used: dict[tuple[str, str], int] = {}
    for record in records:
        d = record.descriptor
        reservation = d.get("capacityReservationId")
        if reservation and d.get("service") != RESERVATIONS and record.gpu_seconds > 0:
            where = (str(reservation), str(d.get("nodeId", "")))
            used[where] = used.get(where, 0) + record.gpu_seconds
    return used


def as_claimed(record: UsageRecord, used: dict[tuple[str, str], int]) -> UsageRecord:
    """``record`` as the export claims it: a capacity reservation's own hour with the device-seconds jobs in it used
    on its node then (``used``: :func:`reservations_used` of the hour), at most its own, in its claimed descriptor
    (billing/focus.py :data:`USED_GPU_SECONDS_KEY`: what splits its FOCUS rows into Used and Unused); any other
    record as it is. The descriptor is no part of the record's content or billing hash, so the claim's checks and
    later corrections see the record they would without it."""
    d = record.descriptor
    if d.get("service") != RESERVATIONS or not d.get("capacityReservationId"):
        return record
    seconds = min(used.get((str(d["capacityReservationId"]), str(d.get("nodeId", ""))), 0), record.gpu_seconds)
    return replace(record, descriptor={**d, USED_GPU_SECONDS_KEY: seconds})


def _next_day(day: str) -> str:
    return (date.fromisoformat(day) + timedelta(days=1)).isoformat()


def correction_line(record: UsageRecord) -> dict[str, Any] | None:
    """What changed in ``record``'s bill since it was billed: per (price, currency), the difference in GPU-seconds,
    billable GPU-seconds and cost; None when nothing billed changed (e.g. only late metrics arrived)."""

    def grouped(segments: list[dict[str, Any]]) -> dict[tuple[str, str], list[Decimal]]:
        sums: dict[tuple[str, str], list[Decimal]] = {}
        for s in segments:
            totals = sums.setdefault((s["pricePerGpuHour"], s["currency"]), [Decimal(0), Decimal(0), Decimal(0)])
            totals[0] += int(s["gpuSeconds"])
            totals[1] += int(s["billableGpuSeconds"])
            totals[2] += Decimal(s["cost"])
        return sums

    before = grouped(record.billed["segments"] if record.billed else [])
    after = grouped(record.segments)
    deltas = []
    for price, currency in sorted(set(before) | set(after)):
        b = before.get((price, currency), [Decimal(0)] * 3)
        a = after.get((price, currency), [Decimal(0)] * 3)
        diff = [a[i] - b[i] for i in range(3)]
        if any(diff):
            deltas.append(
                {
                    "pricePerGpuHour": price,
                    "currency": currency,
                    "gpuSeconds": int(diff[0]),
                    "billableGpuSeconds": int(diff[1]),
                    "cost": format(diff[2], "f"),
                }
            )
    if not deltas:
        return None
    return {
        "windowStart": record.window_start,
        "descriptor": record.descriptor,
        "allocationId": record.allocation_id,
        "deltas": deltas,
    }


@dataclass
class DayExport:
    """One day's outcome: its manifest, and whether this run wrote it (False: it was exported before)."""

    day: str
    manifest: dict[str, Any]
    written: bool
    claimed: int = 0
    corrections: int = 0


@dataclass
class ExportReport:
    """What one run did, day by day."""

    days: list[DayExport] = field(default_factory=list)
    stopped_early: bool = False

    def as_metrics(self) -> dict[str, int]:
        written = [d for d in self.days if d.written]
        return {
            "DaysExported": len(written),
            "Rows": sum(int(d.manifest["rows"]) for d in written),
            "Corrections": sum(d.corrections for d in written),
        }


class BillingExport:
    """The export (module docstring). ``s3`` is a boto3 S3 client; the bucket and key prefix come from settings."""

    def __init__(
        self,
        usage: UsageRepository,
        billing: BillingRepository,
        s3: Any,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ):
        self._usage = usage
        self._billing = billing
        self._s3 = s3
        self._settings = settings
        self._clock = clock

    # ------------------------------------------------------------------------------------------- planning
    def days_due(self, now: float) -> list[str]:
        """The days to export now, in order: a day left ``Closed`` by a run that was cut off, then every open day
        that ended at least ``billing_export_grace_seconds`` ago (UTC), at most ``billing_export_max_days``."""
        next_day = self._billing.export_cursor()
        if next_day is None:
            return []  # no usage was ever recorded
        due = []
        previous = (date.fromisoformat(next_day) - timedelta(days=1)).isoformat()
        state = self._billing.export_day(previous)
        if state is not None and state.state == "Closed":
            due.append(previous)
        ended_by = day_of(int(now) - self._settings.billing_export_grace_seconds)  # the days before it are due
        day = next_day
        while day < ended_by and len(due) < self._settings.billing_export_max_days:
            due.append(day)
            day = _next_day(day)
        return due

    def run(
        self, *, now: float | None = None, day: str | None = None, time_left: Callable[[], float] | None = None
    ) -> ExportReport:
        """Export the days due (or just ``day``, ``YYYY-MM-DD``, not after today). Raises :class:`ExportRefused`
        for a day that is malformed, has not begun, or is not the next one."""
        now = self._clock() if now is None else now
        report = ExportReport()
        if day is not None:
            try:
                day = date.fromisoformat(day).isoformat()
            except (TypeError, ValueError):
                raise ExportRefused(f"{day!r} is not a day (YYYY-MM-DD)") from None
            if day > day_of(int(now)):
                raise ExportRefused(f"{day} has not begun yet (UTC)")
        for wanted in [day] if day is not None else self.days_due(now):
            if time_left is not None and time_left() < TIME_RESERVE_SECONDS:
                report.stopped_early = True
                break
            try:
                report.days.append(self.export(wanted, time_left))
            except OutOfTime:
                report.stopped_early = True
                break
        return report

    # ------------------------------------------------------------------------------------------- one day
    def export(self, day: str, time_left: Callable[[], float] | None = None) -> DayExport:
        """Export ``day`` (module docstring: close, claim, write, mark). Idempotent. Raises :class:`OutOfTime`
        when ``time_left()`` (seconds) runs short while claiming: what is claimed stays claimed, the next run
        resumes. One run at a time (template.yaml: the function's reserved concurrency is 1)."""
        state = self._billing.export_day(day)
        if state is not None and state.state == "Exported":
            return DayExport(day, state.manifest or {}, written=False)
        if state is None:
            next_day = self._billing.export_cursor()
            if next_day != day or not self._billing.close_day(day, _next_day(day)):
                if not next_day:
                    raise ExportRefused("no usage has been recorded yet")
                if day < next_day:  # not exported, and before where the exports begin: the first day with usage
                    raise ExportRefused(
                        f"{day} is before the first day with usage; it has nothing to bill and is never exported"
                    )
                raise ExportRefused(f"days are exported in order: {next_day} is to be exported before {day}")
        data_key, manifest_key = self.object_keys(day)
        existing = self._existing_manifest(manifest_key)
        if existing is not None:
            # a run wrote the object and its manifest, then stopped before marking the day: adopt them as they
            # are — claiming anything now would mark usage billed that the object does not hold
            self._billing.mark_exported(day, existing)
            return DayExport(day, existing, written=False)
        claimed = self._claim_usage(day, time_left)
        corrections = self._claim_corrections(day, time_left)
        with tempfile.TemporaryFile() as spool:
            summary = write_focus_csv_gz(self.lines(day), spool)
            spool.seek(0)
            self._s3.upload_fileobj(
                spool,
                self._settings.billing_export_bucket,
                data_key,
                # a checksum with every write: S3 requires one into a bucket under Object Lock (template.yaml)
                ExtraArgs={
                    "ContentType": "application/gzip",
                    "Metadata": {"sha256": summary.sha256},
                    "ChecksumAlgorithm": "SHA256",
                },
            )
        written = manifest(date.fromisoformat(day), summary, data_key)
        self._s3.put_object(  # last: a manifest means the object beside it is complete
            Bucket=self._settings.billing_export_bucket,
            Key=manifest_key,
            Body=json.dumps(written, indent=2).encode(),
            ContentType="application/json",
            ChecksumAlgorithm="SHA256",
        )
        self._billing.mark_exported(day, written)
        return DayExport(day, written, written=True, claimed=claimed, corrections=corrections)

    def object_keys(self, day: str) -> tuple[str, str]:
        """S3 keys of a day's data object and manifest: ``{prefix}{YYYY-MM}/{day}/...``."""
        base = f"{self._settings.billing_export_prefix}{day[:7]}/{day}/"
        return f"{base}itl-accelerator-focus-{day}.csv.gz", f"{base}manifest.json"

    def _existing_manifest(self, key: str) -> dict[str, Any] | None:
        try:
            body = self._s3.get_object(Bucket=self._settings.billing_export_bucket, Key=key)["Body"].read()
        except self._s3.exceptions.NoSuchKey:
            return None
        manifest: dict[str, Any] = json.loads(body)
        return manifest

    def _claim_usage(self, day: str, time_left: Callable[[], float] | None = None) -> int:
        """Claim every record of ``day`` not yet claimed (each as it is when claimed; a reservation's hour
        :func:`as_claimed`). An hour's records are read once and held while they are claimed (the use of each
        reservation is summed over them first): memory grows with the allocations of one hour, not of the day."""
        claimed = 0
        for hour in hours_of_day(day):
            _check_time(time_left)
            records = list(self._usage.hour_records(hour))
            used = reservations_used(records)
            for record in records:
                current: UsageRecord | None = record
                while current is not None and current.billed is None:
                    if self._billing.claim(as_claimed(current, used), day):
                        claimed += 1
                        break
                    current = self._usage.get(current.allocation_id, current.window_start)
        return claimed

    def _claim_corrections(self, day: str, time_left: Callable[[], float] | None = None) -> int:
        """Turn every queued correction into a correction line of ``day`` (or, for usage of ``day`` itself, into
        its claim: no line; or drop it when nothing billed changed)."""
        lines = 0
        while True:
            _check_time(time_left)
            queue = self._billing.corrections_due(100)
            if not queue:
                return lines
            for due in queue:
                lines += self._claim_one(due, day)

    def _claim_one(self, due: CorrectionDue, day: str) -> int:
        """Claim one queued correction (:meth:`_claim_corrections`): 1 when it made a correction line, else 0. A
        correction queued again since it was read (its usage changed meanwhile) is claimed again as queued now,
        :data:`CLAIM_ATTEMPTS` times in all; then it stays queued (0)."""

        def once() -> int:
            nonlocal due
            try:
                return self._claim_once(due, day)
            except CorrectionRequeued as requeued:
                due = requeued.due
                raise

        try:
            return reattempt(once, on=CorrectionRequeued, attempts=CLAIM_ATTEMPTS)
        except CorrectionRequeued:
            return 0

    def _claim_once(self, due: CorrectionDue, day: str) -> int:
        """One claim of :meth:`_claim_one`. Raises :class:`CorrectionRequeued` (with the correction as queued now)
        when the claim failed because it was queued again meanwhile; 0 when it is no longer queued."""
        window = int(datetime.strptime(due.hour, "%Y-%m-%dT%H").replace(tzinfo=UTC).timestamp())
        record = self._usage.get(due.allocation_id, window)
        if record is None:
            self._billing.drop_correction(due)
            return 0
        if record.descriptor.get("service") == RESERVATIONS:  # a reservation's hour: how much of it jobs used
            record = as_claimed(record, reservations_used(self._usage.hour_records(due.hour)))
        # usage of the day being exported (billed in it, or never billed) is claimed again as it is now and goes
        # out with the day's own rows; a line as well would bill the change twice
        # (usage of an earlier day billed by a correction line of this day is not: a change to it after that
        # claim is a second correction line, or the difference would never be billed)
        same_day = record.day == day and (record.billed or {}).get("day", day) == day
        line = None if same_day else correction_line(record)
        if self._billing.claim_correction(record, due, day, line):
            return int(line is not None)
        fresh = [
            d for d in self._billing.corrections_due(100) if (d.hour, d.allocation_id) == (due.hour, due.allocation_id)
        ]
        if not fresh:
            return 0
        raise CorrectionRequeued(fresh[0])

    # ------------------------------------------------------------------------------------------- lines
    def lines(self, day: str) -> Iterator[ChargeLine]:
        """The day's charge lines from its claims, in a fixed order (hour, shard, allocation; then the correction
        lines in key order): the usage billed in the day, one line per price segment, then its corrections."""
        for hour in hours_of_day(day):
            for record in self._usage.hour_records(hour):
                if record.billed is None or record.billed["day"] != day:
                    continue
                # as claimed: the descriptor too (a tag changed after the claim is not what this day billed), so the
                # file and each subscription's bill entries hold the same cells
                descriptor = record.billed.get("descriptor") or record.descriptor
                yield from billed_lines(record.allocation_id, descriptor, record.billed["segments"])
        for line in self._billing.correction_lines(day):
            allocation = str(line.get("allocationId") or "unknown")  # lines queued before the column existed
            yield from billed_lines(
                allocation, line["descriptor"], line["deltas"], correction_of=int(line["windowStart"])
            )

    def lag_hours(self, now: float) -> float | None:
        """Hours since the end of the last exported day (the missing-export alarm watches it); 0 once today was
        exported early (never negative); None before any usage."""
        next_day = self._billing.export_cursor()
        if next_day is None:
            return None
        start = datetime.fromisoformat(next_day).replace(tzinfo=UTC).timestamp()
        return max(0.0, round((now - start) / HOUR, 2))
