"""The billing export's bookkeeping in the table (key formats: store/keys.py; the export: services/billing_export.py).

The export *claims* each usage record for the day it bills (``billed``: what went out, and ``billedDay``); a record
that changes after it was claimed — or that arrives for a day already closed — is queued as a correction
(``SYS#CORRECTIONDUE``) and goes out as ``Correction`` lines in a later day's export (``SYS#BILL#{day}``). The cursor
(``SYS#EXPORT`` / ``CURSOR``, ``nextDay``) is the first day still open; every usage record write checks it in the
same transaction (store/usage.py), so no record can slip between a day's closing and its export.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from itl_accelerator.store import keys
from itl_accelerator.store.codec import plain, to_json, typed
from itl_accelerator.store.errors import TransactionFailed
from itl_accelerator.store.records import USAGE_RETENTION_SECONDS, UsageRecord
from itl_accelerator.store.table import Table


class CorrectionDue:
    """A queued correction: the record's key and the marker's version."""

    def __init__(self, item: dict[str, Any]):
        self.hour, _, self.allocation_id = str(item["SK"]).partition(keys.SEP)
        self.version = str(item.get("version", ""))


class BillingStore(Table):
    """The export cursor, day states, claims and correction lines (module docstring)."""

    def export_cursor(self) -> dict[str, Any] | None:
        """The export cursor (``nextDay``: the first day still open), or None before any usage."""
        return self.get_item(keys.EXPORT_PK, keys.EXPORT_CURSOR_SK)

    def open_days_from(self, day: str) -> None:
        """Start the cursor at ``day`` unless it already exists (the first usage ever recorded starts it)."""
        self._db.update_item(
            TableName=self._table,
            Key=typed({"PK": keys.EXPORT_PK, "SK": keys.EXPORT_CURSOR_SK}),
            UpdateExpression="SET nextDay = if_not_exists(nextDay, :d)",
            ExpressionAttributeValues=typed({":d": day}),
        )

    def export_day(self, day: str) -> dict[str, Any] | None:
        """The export state of ``day`` (``state`` Closed or Exported, and the manifest once exported)."""
        return self.get_item(keys.EXPORT_PK, keys.export_day_sk(day))

    def close_day(self, day: str, next_day: str) -> bool:
        """Close ``day`` for new usage (cursor ``day`` → ``next_day``) and record it as being exported — one
        transaction; False when the cursor is elsewhere (another run closed it)."""
        try:
            self.transact(
                [
                    {
                        "Update": {
                            "TableName": self._table,
                            "Key": typed({"PK": keys.EXPORT_PK, "SK": keys.EXPORT_CURSOR_SK}),
                            "UpdateExpression": "SET nextDay = :n",
                            "ConditionExpression": "nextDay = :d",
                            "ExpressionAttributeValues": typed({":d": day, ":n": next_day}),
                        }
                    },
                    {
                        "Put": {
                            "TableName": self._table,
                            "Item": typed({"PK": keys.EXPORT_PK, "SK": keys.export_day_sk(day), "state": "Closed"}),
                            "ConditionExpression": "attribute_not_exists(PK)",
                        }
                    },
                ]
            )
        except TransactionFailed:
            return False
        return True

    def claim(self, record: UsageRecord, day: str) -> bool:
        """Bill ``record`` in ``day``'s export as it is now (its segments); False when it changed since it was read
        or another run claimed it."""
        billed = {"day": day, "segments": record.segments, "hash": record.billing_hash}
        try:
            self._db.update_item(
                TableName=self._table,
                Key=typed(record.key),
                UpdateExpression="SET billed = :b, billedDay = :d",
                ConditionExpression="contentHash = :h AND attribute_not_exists(billed)",
                ExpressionAttributeValues=typed({":b": to_json(billed), ":d": day, ":h": record.content_hash}),
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return False
        record.billed = billed
        return True

    def corrections_due(self, limit: int) -> list[CorrectionDue]:
        """At most ``limit`` queued corrections, oldest hour first."""
        response = self._db.query(
            TableName=self._table,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues=typed({":pk": keys.CORRECTION_DUE_PK}),
            ConsistentRead=True,
            Limit=limit,
        )
        return [CorrectionDue(plain(i)) for i in response.get("Items", [])]

    def claim_correction(self, record: UsageRecord, due: CorrectionDue, day: str, line: dict[str, Any] | None) -> bool:
        """Bill what changed in ``record`` since it was billed as correction ``line`` (plain values; None when the
        bill did not change) of ``day``'s export: the record's ``billed`` becomes what it is now, the line is
        stored under the day, the queue entry goes — one transaction. False when the record or the queue entry
        changed meanwhile (read again)."""
        billed = {
            "day": (record.billed or {}).get("day", day),
            "segments": record.segments,
            "hash": record.billing_hash,
        }
        seq = record.corrections + (1 if line else 0)
        condition = "contentHash = :h AND " + ("billed = :old" if record.billed else "attribute_not_exists(billed)")
        values: dict[str, Any] = {":h": record.content_hash, ":b": to_json(billed), ":d": billed["day"], ":n": seq}
        if record.billed:
            values[":old"] = to_json(record.billed)
        items: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": typed(record.key),
                    "UpdateExpression": "SET billed = :b, billedDay = :d, corrections = :n",
                    "ConditionExpression": condition,
                    "ExpressionAttributeValues": typed(values),
                }
            },
            {
                "Delete": {
                    "TableName": self._table,
                    "Key": typed({"PK": keys.CORRECTION_DUE_PK, "SK": f"{due.hour}{keys.SEP}{due.allocation_id}"}),
                    "ConditionExpression": "version = :v",
                    "ExpressionAttributeValues": typed({":v": due.version}),
                }
            },
        ]
        if line is not None:
            items.append(
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": typed(
                            {
                                "PK": keys.correction_lines_pk(day),
                                "SK": f"{record.hour}{keys.SEP}{record.allocation_id}{keys.SEP}{seq:04d}",
                                "line": to_json(line),
                                "ttl": record.window_start + USAGE_RETENTION_SECONDS,
                            }
                        ),
                        "ConditionExpression": "attribute_not_exists(PK)",
                    }
                }
            )
        try:
            self.transact(items)
        except TransactionFailed:
            return False
        return True

    def drop_correction(self, due: CorrectionDue) -> None:
        """Remove a queue entry whose record no longer exists (it expired)."""
        self._db.delete_item(
            TableName=self._table,
            Key=typed({"PK": keys.CORRECTION_DUE_PK, "SK": f"{due.hour}{keys.SEP}{due.allocation_id}"}),
        )

    def correction_lines(self, day: str) -> Iterator[dict[str, Any]]:
        """The correction lines of ``day``'s export, in key order (consistent pages)."""
        items = self.query_all(
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues=typed({":pk": keys.correction_lines_pk(day)}),
            ConsistentRead=True,
        )
        return (json.loads(item["line"]) for item in items)

    def mark_exported(self, day: str, manifest: dict[str, Any]) -> None:
        """Record ``day`` as exported with its manifest (after the object and the manifest are in S3)."""
        self._db.put_item(
            TableName=self._table,
            Item=typed(
                {
                    "PK": keys.EXPORT_PK,
                    "SK": keys.export_day_sk(day),
                    "state": "Exported",
                    "manifest": to_json(manifest),
                }
            ),
        )
