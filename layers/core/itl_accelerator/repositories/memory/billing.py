"""The billing export's bookkeeping in memory: the DynamoDB implementation's ``DynamoBillingRepository``
(repositories/dynamodb/billing.py) — the cursor (first day still open), day states, claims of usage records,
the correction queue, the correction lines of each day's export and each subscription's part of it (its bill
entries, kept with every claim)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from itl_accelerator.domain.usage import BillEntry, CorrectionDue, ExportDay, UsageRecord
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.memory.state import MemoryState
from itl_accelerator.repositories.memory.usage import usage_key


class MemoryBillingRepository:
    """:class:`~itl_accelerator.repositories.protocols.BillingRepository` in memory."""

    def __init__(self, state: MemoryState):
        self._s = state

    def export_cursor(self) -> str | None:
        with self._s.lock:
            return self._s.export_cursor

    def open_days_from(self, day: str) -> None:
        with self._s.lock:
            if self._s.export_cursor is None:
                self._s.export_cursor = day

    def export_day(self, day: str) -> ExportDay | None:
        with self._s.lock:
            found = self._s.export_days.get(day)
            return copy.deepcopy(found) if found else None

    def close_day(self, day: str, next_day: str) -> bool:
        """Move the cursor from ``day`` and mark ``day`` Closed, together: False when the cursor is elsewhere or
        ``day`` already has a state."""
        with self._s.lock:
            if self._s.export_cursor != day or day in self._s.export_days:
                return False
            self._s.export_cursor = next_day
            self._s.export_days[day] = ExportDay(day, "Closed", by_subscription=True)
            return True

    def claim(self, record: UsageRecord, day: str) -> bool:
        """Bill ``record`` (stored with its content hash, never claimed) in ``day``; ``record.billed`` is set on
        success, as in the DynamoDB implementation."""
        with self._s.lock:
            stored = self._s.usage.get(usage_key(record.allocation_id, record.window_start))
            if stored is None or stored.content_hash != record.content_hash or stored.billed is not None:
                return False
            billed = {
                "day": day,
                "segments": copy.deepcopy(record.segments),
                "hash": record.billing_hash,
                "descriptor": copy.deepcopy(record.descriptor),
            }
            stored.billed = copy.deepcopy(billed)
            record.billed = billed
            self._keep(record, day, keys.bill_usage_sk(record.hour, record.allocation_id), record.segments)
            return True

    def _keep(
        self, record: UsageRecord, day: str, key: str, segments: list[dict[str, Any]], correction: bool = False
    ) -> None:
        """Keep an entry of the subscription's part of ``day``'s bill (the lock held)."""
        entries = self._s.bill_entries.setdefault((str(record.descriptor["subscriptionId"]).lower(), day), {})
        entries[key] = BillEntry(
            key,
            record.allocation_id,
            record.window_start,
            copy.deepcopy(record.descriptor),
            copy.deepcopy(segments),
            correction,
        )

    def corrections_due(self, limit: int) -> list[CorrectionDue]:
        """Queued corrections in ``{hour}#{allocationId}`` order."""
        with self._s.lock:
            entries = sorted(self._s.correction_due.items(), key=lambda e: f"{e[0][0]}#{e[0][1]}")
            return [CorrectionDue(hour, allocation, version) for (hour, allocation), version in entries[:limit]]

    def claim_correction(self, record: UsageRecord, due: CorrectionDue, day: str, line: dict[str, Any] | None) -> bool:
        """Together, or not at all: the stored record (still ``record``: content hash and billing state) billed as it
        is now, its correction count moved on when a ``line`` goes out; the queue entry (still at ``due.version``)
        removed; ``line`` added to ``day``'s lines under a sequence number not taken."""
        with self._s.lock:
            stored = self._s.usage.get(usage_key(record.allocation_id, record.window_start))
            seq = record.corrections + (1 if line else 0)
            line_key = f"{record.hour}#{record.allocation_id}#{seq:04d}"
            if (
                stored is None
                or stored.content_hash != record.content_hash
                or (stored.billed != record.billed if record.billed else stored.billed is not None)
                or self._s.correction_due.get((due.hour, due.allocation_id)) != due.version
                or (line is not None and line_key in self._s.correction_lines.get(day, {}))
            ):
                return False
            stored.billed = {
                "day": (record.billed or {}).get("day", day),
                "segments": copy.deepcopy(record.segments),
                "hash": record.billing_hash,
                "descriptor": copy.deepcopy(record.descriptor),
            }
            stored.corrections = seq
            del self._s.correction_due[(due.hour, due.allocation_id)]
            if line is not None:
                self._s.correction_lines.setdefault(day, {})[line_key] = copy.deepcopy(line)
                sk = keys.bill_correction_sk(record.hour, record.allocation_id, seq)
                self._keep(record, day, sk, list(line.get("deltas") or []), correction=True)
            elif stored.billed["day"] == day == record.day:
                self._keep(record, day, keys.bill_usage_sk(record.hour, record.allocation_id), record.segments)
            return True

    def drop_correction(self, due: CorrectionDue) -> None:
        with self._s.lock:
            self._s.correction_due.pop((due.hour, due.allocation_id), None)

    def correction_lines(self, day: str) -> Iterator[dict[str, Any]]:
        """The lines of ``day`` in ``{hour}#{allocationId}#{seq}`` order (a snapshot taken when called)."""
        with self._s.lock:
            lines = [copy.deepcopy(line) for _, line in sorted(self._s.correction_lines.get(day, {}).items())]
        return iter(lines)

    def mark_exported(self, day: str, manifest: dict[str, Any]) -> None:
        with self._s.lock:
            closed = self._s.export_days.get(day)
            by_subscription = closed.by_subscription if closed else False
            self._s.export_days[day] = ExportDay(day, "Exported", copy.deepcopy(manifest), by_subscription)

    def bill_entries(
        self, subscription_id: str, day: str, after: str | None, limit: int
    ) -> tuple[list[BillEntry], str | None]:
        with self._s.lock:
            entries = self._s.bill_entries.get((subscription_id.lower(), day), {})
            keys_after = [k for k in sorted(entries) if after is None or k > after]
            page = [copy.deepcopy(entries[k]) for k in keys_after[:limit]]
        return page, (page[-1].key if len(keys_after) > limit else None)
