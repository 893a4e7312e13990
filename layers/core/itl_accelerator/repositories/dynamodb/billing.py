"""The billing export's bookkeeping in the table (key formats: keys.py; the export:
services/schedules/billing_export.py).

The export *claims* each usage record for the day it bills (``billed``: what went out, and ``billedDay``); a record
that changes after it was claimed — or that arrives for a day already closed — is queued as a correction
(``SYS#CORRECTIONDUE``) and goes out as ``Correction`` lines in a later day's export (``SYS#BILL#{day}``). The cursor
(``SYS#EXPORT`` / ``CURSOR``, ``nextDay``) is the first day still open; every usage record write checks it in the
same transaction (usage.py) — one of its copies (``SYS#EXPORT#{shard}``, moved with it in the transaction that closes
a day), so no single item is read by every write — and no record can slip between a day's closing and its export.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from itl_accelerator.domain.usage import (
    USAGE_RETENTION_SECONDS,
    BillEntry,
    CorrectionDue,
    ExportDay,
    UsageRecord,
    bill_expires,
)
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import plain, to_json, typed
from itl_accelerator.repositories.dynamodb.table import Table, TransactionFailed
from itl_accelerator.repositories.dynamodb.usage import correction_due_sk, record_key


class DynamoBillingRepository:
    """:class:`~itl_accelerator.repositories.protocols.BillingRepository` over the table."""

    def __init__(self, table: Table):
        self._t = table

    def export_cursor(self) -> str | None:
        item = self._t.get_item(keys.EXPORT_PK, keys.EXPORT_CURSOR_SK)
        return str(item["nextDay"]) if item and item.get("nextDay") else None

    def open_days_from(self, day: str) -> None:
        """The cursor at ``day`` unless it exists; then each shard's copy at the cursor where the copy is missing or
        behind it (a table from before the copies gets them here, and a day closed by an export of before the copies
        reaches them; the usage sync calls this before its first write of every run). A copy a concurrent
        ``close_day`` moved on is left as it is."""
        response = self._t.client.update_item(
            TableName=self._t.name,
            Key=typed({"PK": keys.EXPORT_PK, "SK": keys.EXPORT_CURSOR_SK}),
            UpdateExpression="SET nextDay = if_not_exists(nextDay, :d)",
            ExpressionAttributeValues=typed({":d": day}),
            ReturnValues="ALL_NEW",
        )
        cursor = plain(response["Attributes"])["nextDay"]
        for shard in range(keys.WRITE_PATH_SHARDS):
            try:
                self._t.client.update_item(
                    TableName=self._t.name,
                    Key=typed({"PK": keys.export_cursor_copy_pk(shard), "SK": keys.EXPORT_CURSOR_SK}),
                    UpdateExpression="SET nextDay = :d",
                    ConditionExpression="attribute_not_exists(nextDay) OR nextDay < :d",
                    ExpressionAttributeValues=typed({":d": cursor}),
                )
            except self._t.client.exceptions.ConditionalCheckFailedException:
                pass  # the copy is there, and not behind

    def export_day(self, day: str) -> ExportDay | None:
        item = self._t.get_item(keys.EXPORT_PK, keys.export_day_sk(day))
        if item is None:
            return None
        manifest = json.loads(item["manifest"]) if item.get("manifest") else None
        exported = item.get("state") == "Exported"
        return ExportDay(
            day, "Exported" if exported else "Closed", manifest, by_subscription=bool(item.get("bySubscription"))
        )

    def close_day(self, day: str, next_day: str) -> bool:
        try:
            self._t.transact(
                [
                    {
                        "Update": {
                            "TableName": self._t.name,
                            "Key": typed({"PK": keys.EXPORT_PK, "SK": keys.EXPORT_CURSOR_SK}),
                            "UpdateExpression": "SET nextDay = :n",
                            "ConditionExpression": "nextDay = :d",
                            "ExpressionAttributeValues": typed({":d": day, ":n": next_day}),
                        }
                    },
                    {
                        "Put": {
                            "TableName": self._t.name,
                            "Item": typed(
                                {
                                    "PK": keys.EXPORT_PK,
                                    "SK": keys.export_day_sk(day),
                                    "state": "Closed",
                                    "bySubscription": True,
                                }
                            ),
                            "ConditionExpression": "attribute_not_exists(PK)",
                        }
                    },
                    *(
                        {
                            "Put": {
                                "TableName": self._t.name,
                                "Item": typed(
                                    {
                                        "PK": keys.export_cursor_copy_pk(s),
                                        "SK": keys.EXPORT_CURSOR_SK,
                                        "nextDay": next_day,
                                    }
                                ),
                            }
                        }
                        for s in range(keys.WRITE_PATH_SHARDS)
                    ),
                ]
            )
        except TransactionFailed:
            return False
        return True

    def claim(self, record: UsageRecord, day: str) -> bool:
        billed = {"day": day, "segments": record.segments, "hash": record.billing_hash, "descriptor": record.descriptor}
        try:
            self._t.transact(
                [
                    {
                        "Update": {
                            "TableName": self._t.name,
                            "Key": typed(record_key(record)),
                            "UpdateExpression": "SET billed = :b, billedDay = :d",
                            "ConditionExpression": "contentHash = :h AND attribute_not_exists(billed)",
                            "ExpressionAttributeValues": typed(
                                {":b": to_json(billed), ":d": day, ":h": record.content_hash}
                            ),
                        }
                    },
                    self._bill_put(record, day, keys.bill_usage_sk(record.hour, record.allocation_id), record.segments),
                ]
            )
        except TransactionFailed:
            return False
        record.billed = billed
        return True

    def _bill_put(
        self, record: UsageRecord, day: str, sk: str, segments: list[dict[str, Any]], correction: bool = False
    ) -> dict[str, Any]:
        """The transaction item keeping an entry of the subscription's part of ``day``'s bill (module docstring)."""
        entry = {
            "PK": keys.bill_pk(str(record.descriptor["subscriptionId"]), day),
            "SK": sk,
            "allocationId": record.allocation_id,
            "windowStart": record.window_start,
            "descriptor": to_json(record.descriptor),
            "segments": to_json(segments),
            "ttl": bill_expires(day),  # a day's entries expire together: its file is whole, or gone
        }
        if correction:
            entry["correction"] = True
        return {"Put": {"TableName": self._t.name, "Item": typed(entry)}}

    def corrections_due(self, limit: int) -> list[CorrectionDue]:
        response = self._t.client.query(
            TableName=self._t.name,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues=typed({":pk": keys.CORRECTION_DUE_PK}),
            ConsistentRead=True,
            Limit=limit,
        )
        due = []
        for item in map(plain, response.get("Items", [])):
            hour, _, allocation_id = str(item["SK"]).partition(keys.SEP)
            due.append(CorrectionDue(hour, allocation_id, str(item.get("version", ""))))
        return due

    def claim_correction(self, record: UsageRecord, due: CorrectionDue, day: str, line: dict[str, Any] | None) -> bool:
        billed = {
            "day": (record.billed or {}).get("day", day),
            "segments": record.segments,
            "hash": record.billing_hash,
            "descriptor": record.descriptor,
        }
        seq = record.corrections + (1 if line else 0)
        condition = "contentHash = :h AND " + ("billed = :old" if record.billed else "attribute_not_exists(billed)")
        values: dict[str, Any] = {":h": record.content_hash, ":b": to_json(billed), ":d": billed["day"], ":n": seq}
        if record.billed:
            values[":old"] = to_json(record.billed)
        items: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self._t.name,
                    "Key": typed(record_key(record)),
                    "UpdateExpression": "SET billed = :b, billedDay = :d, corrections = :n",
                    "ConditionExpression": condition,
                    "ExpressionAttributeValues": typed(values),
                }
            },
            {
                "Delete": {
                    "TableName": self._t.name,
                    "Key": typed({"PK": keys.CORRECTION_DUE_PK, "SK": correction_due_sk(due.hour, due.allocation_id)}),
                    "ConditionExpression": "version = :v",
                    "ExpressionAttributeValues": typed({":v": due.version}),
                }
            },
        ]
        if line is not None:
            items.append(
                {
                    "Put": {
                        "TableName": self._t.name,
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
            sk = keys.bill_correction_sk(record.hour, record.allocation_id, seq)
            items.append(self._bill_put(record, day, sk, list(line.get("deltas") or []), correction=True))
        elif billed["day"] == day == record.day:
            # usage of the day being exported, claimed again as it is now: its entry is what the day bills
            items.append(
                self._bill_put(record, day, keys.bill_usage_sk(record.hour, record.allocation_id), record.segments)
            )
        try:
            self._t.transact(items)
        except TransactionFailed:
            return False
        return True

    def drop_correction(self, due: CorrectionDue) -> None:
        self._t.client.delete_item(
            TableName=self._t.name,
            Key=typed({"PK": keys.CORRECTION_DUE_PK, "SK": correction_due_sk(due.hour, due.allocation_id)}),
        )

    def correction_lines(self, day: str) -> Iterator[dict[str, Any]]:
        items = self._t.query_all(
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues=typed({":pk": keys.correction_lines_pk(day)}),
            ConsistentRead=True,
        )
        return (dict(json.loads(item["line"])) for item in items)

    def mark_exported(self, day: str, manifest: dict[str, Any]) -> None:
        self._t.client.update_item(  # an update: the day keeps what its closing recorded (``bySubscription``)
            TableName=self._t.name,
            Key=typed({"PK": keys.EXPORT_PK, "SK": keys.export_day_sk(day)}),
            UpdateExpression="SET #s = :s, manifest = :m",
            ExpressionAttributeNames={"#s": "state"},
            ExpressionAttributeValues=typed({":s": "Exported", ":m": to_json(manifest)}),
        )

    def bill_entries(
        self, subscription_id: str, day: str, after: str | None, limit: int
    ) -> tuple[list[BillEntry], str | None]:
        kwargs: dict[str, Any] = {
            "TableName": self._t.name,
            "KeyConditionExpression": "PK = :pk",
            "ExpressionAttributeValues": typed({":pk": keys.bill_pk(subscription_id, day)}),
            "Limit": limit,
            "ConsistentRead": True,  # the entries the export wrote just before marking the day exported
        }
        if after:
            kwargs["ExclusiveStartKey"] = typed({"PK": keys.bill_pk(subscription_id, day), "SK": after})
        response = self._t.client.query(**kwargs)
        entries = [
            BillEntry(
                key=str(item["SK"]),
                allocation_id=str(item["allocationId"]),
                window_start=int(item["windowStart"]),
                descriptor=dict(json.loads(item["descriptor"])),
                segments=list(json.loads(item["segments"])),
                correction=bool(item.get("correction")),
            )
            for item in map(plain, response.get("Items", []))
        ]
        last = response.get("LastEvaluatedKey")
        return entries, (str(plain(last)["SK"]) if last else None)
