"""Usage records and hourly roll-ups in the table (key formats: store/keys.py). What the figures are is computed
elsewhere (billing/metering.py, billing/rollup.py); this module stores them so that each is written once.

A **usage record** (``SYS#USAGE#{hour}#{shard}`` / ``{allocationId}``) is one allocation's usage in one UTC hour:
its id is deterministic, so a repeated or concurrent sync rewrites the same item; it is only written when its content
changed (``contentHash``), compare-and-set on what was read (content and billing state), so nothing is lost between
concurrent writers; each write marks its hour's roll-up due (``SYS#ROLLUPDUE``), and checks the export cursor or
queues a correction (store/billing.py). :class:`UsageStore` is the whole metering store: meters and prices
(store/meters.py), records and roll-ups (here), the export's bookkeeping (store/billing.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from itl_accelerator.store import keys
from itl_accelerator.store.billing import BillingStore, CorrectionDue
from itl_accelerator.store.codec import plain, to_json, typed
from itl_accelerator.store.errors import StoreBusy, TransactionFailed
from itl_accelerator.store.meters import Meter, MeterStore
from itl_accelerator.store.records import (
    USAGE_RETENTION_SECONDS,
    UsageRecord,
    day_of,
    hour_key,
    hours_of_day,
    record_from_item,
    usage_key,
)

__all__ = [
    "USAGE_RETENTION_SECONDS",
    "CorrectionDue",
    "Meter",
    "UsageRecord",
    "UsageStore",
    "day_of",
    "hour_key",
    "hours_of_day",
    "usage_key",
]


class UsageStore(MeterStore, BillingStore):
    """Meters, price points, usage records, roll-ups and the export's bookkeeping (module docstring)."""

    # ------------------------------------------------------------------------------------------- usage records
    def usage_records(self, allocation_id: str, window_starts: list[int]) -> dict[int, UsageRecord]:
        """The stored records of one allocation for the given windows (``BatchGetItem``, consistent)."""
        found: dict[int, UsageRecord] = {}
        for i in range(0, len(window_starts), 100):
            wanted = [usage_key(allocation_id, w) for w in window_starts[i : i + 100]]
            request: dict[str, Any] = {self._table: {"Keys": [typed(k) for k in wanted], "ConsistentRead": True}}
            while request:
                response = self._db.batch_get_item(RequestItems=request)
                for item in map(plain, response.get("Responses", {}).get(self._table, [])):
                    record = record_from_item(item)
                    found[record.window_start] = record
                request = response.get("UnprocessedKeys") or {}
        return found

    def get_usage(self, allocation_id: str, window_start: int) -> UsageRecord | None:
        """One record, read consistently."""
        key = usage_key(allocation_id, window_start)
        item = self.get_item(key["PK"], key["SK"])
        return record_from_item(item) if item else None

    def write_usage(self, record: UsageRecord, previous: UsageRecord | None) -> str:
        """Write ``record`` if the stored one is still ``previous`` (compare-and-set on its content and billing
        state), with the roll-up of its hour marked due — one transaction. When its day is already billed or
        closed the change is queued as a correction; otherwise the transaction checks the day is still open.

        Returns ``"written"``, ``"correction"`` (written and queued), or ``"conflict"`` (the stored record is no
        longer ``previous``: re-read and retry). Raises :class:`StoreBusy`."""
        billed = previous.billed if previous else None
        record.billed, record.corrections = billed, previous.corrections if previous else 0
        correction = billed is not None and billed["hash"] != record.billing_hash
        for attempt in ("check", "correction"):
            if attempt == "correction":
                correction = True
            items = [self._usage_put(record, previous), self._rollup_due_put(record.hour)]
            if correction:
                items.append(self._correction_due_put(record))
            elif billed is None:
                items.append(self._day_open_check(record.day))
            try:
                self.transact(items)
            except TransactionFailed as exc:
                if 0 in exc.failed:
                    return "conflict"
                if 2 in exc.failed and not correction:
                    continue  # the day closed: this usage goes out as a correction
                raise
            return "correction" if correction else "written"
        return "correction"  # pragma: no cover - the loop returns on its second pass

    def _usage_put(self, record: UsageRecord, previous: UsageRecord | None) -> dict[str, Any]:
        item = {
            **record.key,
            "windowStart": record.window_start,
            "descriptor": to_json(record.descriptor),
            "segments": to_json(record.segments),
            "gpuSeconds": record.gpu_seconds,
            "billableGpuSeconds": record.billable_gpu_seconds,
            "cost": format(record.cost, "f"),
            "currency": record.currency,
            "final": record.final,
            "contentHash": record.content_hash,
            "corrections": record.corrections,
            "ttl": record.window_start + USAGE_RETENTION_SECONDS,
        }
        if record.metrics is not None:
            item["metrics"] = to_json(record.metrics)
        if record.billed is not None:
            item["billed"] = to_json(record.billed)
            item["billedDay"] = record.billed["day"]
        put: dict[str, Any] = {"TableName": self._table, "Item": typed(item)}
        if previous is None:
            put["ConditionExpression"] = "attribute_not_exists(PK)"
        else:
            put["ConditionExpression"] = "contentHash = :h AND " + (
                "billed = :b" if previous.billed is not None else "attribute_not_exists(billed)"
            )
            values: dict[str, Any] = {":h": previous.content_hash}
            if previous.billed is not None:
                values[":b"] = to_json(previous.billed)
            put["ExpressionAttributeValues"] = typed(values)
        return {"Put": put}

    def _rollup_due_put(self, hour: str) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self._table,
                "Item": typed({"PK": keys.ROLLUP_DUE_PK, "SK": hour, "version": uuid.uuid4().hex}),
            }
        }

    def _correction_due_put(self, record: UsageRecord) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self._table,
                "Item": typed(
                    {
                        "PK": keys.CORRECTION_DUE_PK,
                        "SK": f"{record.hour}{keys.SEP}{record.allocation_id}",
                        "version": uuid.uuid4().hex,
                    }
                ),
            }
        }

    def _day_open_check(self, day: str) -> dict[str, Any]:
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": typed({"PK": keys.EXPORT_PK, "SK": keys.EXPORT_CURSOR_SK}),
                "ConditionExpression": "attribute_not_exists(nextDay) OR nextDay <= :d",
                "ExpressionAttributeValues": typed({":d": day}),
            }
        }

    def hour_records(self, hour: str) -> Iterator[UsageRecord]:
        """Every record of one UTC hour (``YYYY-MM-DDTHH``), shard by shard in key order: consistent ``Query``
        pages, so memory stays one page whatever the count."""
        for shard in range(keys.USAGE_SHARDS):
            items = self.query_all(
                KeyConditionExpression="PK = :pk",
                ExpressionAttributeValues=typed({":pk": keys.usage_pk(hour, shard)}),
                ConsistentRead=True,
            )
            yield from map(record_from_item, items)

    # ------------------------------------------------------------------------------------------- roll-ups
    def due_rollups(self, limit: int) -> list[tuple[str, str]]:
        """``(hour, version)`` of at most ``limit`` hours whose roll-ups are due, oldest first."""
        response = self._db.query(
            TableName=self._table,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues=typed({":pk": keys.ROLLUP_DUE_PK}),
            ConsistentRead=True,
            Limit=limit,
        )
        return [(str(i["SK"]), str(i["version"])) for i in map(plain, response.get("Items", []))]

    def put_rollups(self, items: list[dict[str, Any]]) -> None:
        """Write roll-up items (plain values; each overwrites the last roll-up of its scope and hour) in batches
        of 25, retrying what DynamoDB leaves unprocessed."""
        for i in range(0, len(items), 25):
            request = {self._table: [{"PutRequest": {"Item": typed(item)}} for item in items[i : i + 25]]}
            for _ in range(8):
                response = self._db.batch_write_item(RequestItems=request)
                request = response.get("UnprocessedItems") or {}
                if not request:
                    break
            if request:
                raise StoreBusy("roll-up writes stayed unprocessed")

    def rollup_done(self, hour: str, version: str) -> bool:
        """Clear an hour's due marker unless a newer usage write marked it again meanwhile."""
        try:
            self._db.delete_item(
                TableName=self._table,
                Key=typed({"PK": keys.ROLLUP_DUE_PK, "SK": hour}),
                ConditionExpression="version = :v",
                ExpressionAttributeValues=typed({":v": version}),
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def rollups(self, subscription_id: str, scope: str, first_hour: str, last_hour: str) -> list[dict[str, Any]]:
        """Roll-ups of one scope (:func:`keys.rollup_pk`) from ``first_hour`` to ``last_hour`` inclusive (at most
        720: one ``Query``, paged)."""
        return list(
            self.query_all(
                KeyConditionExpression="PK = :pk AND SK BETWEEN :a AND :b",
                ExpressionAttributeValues=typed(
                    {":pk": keys.rollup_pk(subscription_id, scope), ":a": first_hour, ":b": last_hour}
                ),
            )
        )
