"""The audit archive: audit events leave the table when their retention ends, and are kept in S3 for good.

An audit event carries a DynamoDB TTL ``AUDIT_RETENTION_DAYS`` after it happened (repositories/dynamodb/table.py
``audit_item``; 0: none, it stays in the table). DynamoDB deletes it some time after (typically within days), and
the deletion reaches this service through the table's stream (template.yaml ``StateEventsFunction``, the stream's
second and last reader: its third filter passes only ``REMOVE`` records by DynamoDB's TTL of ``AuditEvent`` items).
Each batch's events are written, per subscription and UTC day of the events, as one gzip JSON Lines object:

``{AUDIT_ARCHIVE_PREFIX}{subscription}/{YYYY}/{MM}/{DD}/{digest}.jsonl.gz``

one event per line as the table held it (the ITL SDK's ``AuditEvent`` fields; states as JSON text, plus ``ttl``),
sorted by time and id; ``digest`` is a SHA-256 of the event ids, so a batch delivered again whole (the stream
delivers at least once) writes the same object again. A batch that fails (S3 refused) raises: the stream retries it,
split in halves, then sends its position to the dead-letter queue — an event is never dropped silently; but a split
batch's halves are new objects, so an event may be in two objects: a reader keeps one line per ``event_id``. Why this
shape: the table's audit items were two thirds of what a job stored, for ever (issue 27); AWS CloudTrail's own
answer is a short in-service history and the trail in S3.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal
from itertools import groupby
from typing import Any


@dataclass
class ArchiveReport:
    """What one batch did: events archived, objects written."""

    events: int = 0
    objects: int = 0

    def as_metrics(self) -> dict[str, int]:
        return {"events": self.events, "objects": self.objects}


def _json(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


class AuditArchive:
    """Writes expired audit events (module docstring) to ``bucket`` under ``prefix`` through ``s3`` (a boto3 S3
    client)."""

    def __init__(self, s3: Any, bucket: str, prefix: str):
        if not bucket:
            raise ValueError("AUDIT_ARCHIVE_BUCKET is not set")
        self._s3 = s3
        self._bucket = bucket
        self._prefix = prefix

    def archive(self, events: list[dict[str, Any]]) -> ArchiveReport:
        """One object per subscription and day of ``events`` (as stored: ``subscription_id``, ``timestamp``,
        ``event_id``, ...). Raises what S3 raises (the batch comes again)."""
        report = ArchiveReport()

        def where(event: dict[str, Any]) -> tuple[str, str]:
            return str(event["subscription_id"]).lower(), str(event["timestamp"])[:10]

        ordered = sorted(events, key=lambda e: (*where(e), str(e["timestamp"]), str(e["event_id"])))
        for (subscription, day), group in groupby(ordered, key=where):
            batch = list(group)
            digest = hashlib.sha256("\n".join(str(e["event_id"]) for e in batch).encode()).hexdigest()[:32]
            key = f"{self._prefix}{subscription}/{day[:4]}/{day[5:7]}/{day[8:10]}/{digest}.jsonl.gz"
            lines = "".join(json.dumps(e, sort_keys=True, default=_json, ensure_ascii=False) + "\n" for e in batch)
            self._s3.put_object(
                Bucket=self._bucket,
                Key=key,
                Body=gzip.compress(lines.encode(), mtime=0),
                ContentType="application/x-ndjson",
                ContentEncoding="gzip",
            )
            report.events += len(batch)
            report.objects += 1
        return report
