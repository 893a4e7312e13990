"""Usage metering in the table: meters, node price history, usage records, and the bookkeeping of roll-ups and of
the daily billing export (key formats: store/keys.py). What the figures are is computed elsewhere
(services/metering.py); this module stores them so that each is written once and billed once.

- A **meter** (``SUB#{sub}`` / ``METER#{allocationId}``) is one allocation of GPUs: written in the same transaction
  as the state change that starts it (an instance becomes ``Succeeded``, a job starts ``Running``) and ended in the
  one that stops it (an instance's deletion is accepted, a job finishes). While it may still produce usage it sits
  in the sparse index GSI2 (``METER#{shard}``, sorted by when it is next due for a sync).
- A **price point** (``SUB#{sub}#PRICE#{rg}#{node}`` / ``{effectiveFrom}``) is written with every node write that
  sets or changes the node's pricing, in the same transaction: usage is priced by the price in force at the time.
- A **usage record** (``SYS#USAGE#{hour}#{shard}`` / ``{allocationId}``) is one allocation's usage in one UTC hour:
  its id is deterministic, so a repeated or concurrent sync rewrites the same item; it is only written when its
  content changed (``contentHash``), compare-and-set on what was read, so nothing is lost between concurrent writers.
- Billing: the export *claims* each record for the day it bills (``billed``: what went out, and ``billedDay``); a
  record that changes after it was claimed — or that arrives for a day already closed — is queued as a correction
  (``SYS#CORRECTIONDUE``) and goes out as ``Correction`` lines in a later day's export. The cursor
  (``SYS#EXPORT`` / ``CURSOR``, ``nextDay``) is the first day still open; every record write checks it in the same
  transaction, so no record can slip between a day's closing and its export.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from itl_accelerator.billing.metering import HOUR, PricePoint
from itl_accelerator.store import keys
from itl_accelerator.store.codec import plain, to_json, typed
from itl_accelerator.store.errors import StoreBusy, TransactionFailed
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.table import Table

#: Partitions of the meter index (GSI2 ``METER#{shard}``).
METER_SHARDS = 4
#: Usage records, roll-ups and price points are kept this long (TTL), then DynamoDB removes them.
USAGE_RETENTION_SECONDS = 400 * 24 * 3600


def hour_key(window_start: int) -> str:
    """``YYYY-MM-DDTHH`` (UTC) of a window start (epoch seconds)."""
    return datetime.fromtimestamp(window_start, UTC).strftime("%Y-%m-%dT%H")


def day_of(window_start: int) -> str:
    """``YYYY-MM-DD`` (UTC) of a moment (epoch seconds)."""
    return datetime.fromtimestamp(window_start, UTC).strftime("%Y-%m-%d")


def _shard(value: str, shards: int) -> int:
    return int(hashlib.sha256(value.encode()).hexdigest(), 16) % shards


def _hash(value: Any) -> str:
    return hashlib.sha256(to_json(value).encode()).hexdigest()[:32]


@dataclass
class Meter:
    """One allocation of GPUs: who holds them (the ARM resource, its subscription and group, tags), where (the
        node, its supplier, region and SKU), how many (``gpus``), and when (``start``/``end``, epoch seconds; ``end``
        None while it runs). ``pricing``: the node's pricing when it started (used only for a node without price
    history). ``metered_until``: usage is recorded up to there (epoch seconds). ``service``: the
        provider's service the allocation is billed under (``instances`` or ``jobs``)."""

    allocation_id: str
    subscription_id: str
    resource_group: str
    resource_id: str
    resource_name: str
    resource_type: str
    service: str
    node_resource_group: str
    node_name: str
    node_id: str
    supplier: str
    region: str
    sku: str
    gpus: int
    start: int
    end: int | None = None
    dgx_id: str = ""
    tags: dict[str, str] = field(default_factory=dict)
    pricing: dict[str, Any] = field(default_factory=dict)
    resource_created_at: str = ""
    node_created_at: str = ""
    metered_until: int = 0
    metrics_retry_from: int | None = None
    active: bool = True

    @property
    def node_key(self) -> ResourceKey:
        return ResourceKey(self.subscription_id, self.node_resource_group, "sparkNodes", (self.node_name,))

    def descriptor(self) -> dict[str, Any]:
        """What every usage record of this allocation says about it (the FOCUS export's resource columns)."""
        return {
            "subscriptionId": self.subscription_id,
            "resourceGroup": self.resource_group,
            "resourceId": self.resource_id,
            "resourceName": self.resource_name,
            "resourceType": self.resource_type,
            "service": self.service,
            "nodeResourceGroup": self.node_resource_group,
            "nodeName": self.node_name,
            "nodeId": self.node_id,
            "supplier": self.supplier,
            "region": self.region,
            "sku": self.sku,
            "gpus": self.gpus,
            "tags": self.tags,
            "resourceCreatedAt": self.resource_created_at,
            "nodeCreatedAt": self.node_created_at,
        }


def _meter_index(pk: str, sk: str, due: int) -> dict[str, Any]:
    return {"GSI2PK": f"METER{keys.SEP}{_shard(pk + sk, METER_SHARDS)}", "GSI2SK": f"{int(due):012d}#{pk}#{sk}"}


@dataclass
class UsageRecord:
    """One allocation's usage in one UTC hour window (``window_start``, epoch seconds).

    ``segments``: the charge at each price in force in the window — ``start``/``end`` (epoch s), ``gpuSeconds``,
    ``billableGpuSeconds``, ``pricePerGpuHour`` and ``cost`` (decimal strings), ``currency``; ``metrics``: what
    the DGX Platform measured (``gpuUtilizationPercent``, ``gpuMemoryGb``, ``energyWh``, ``requests``,
    ``tokensIn``, ``tokensOut``), None when it could not be read; ``final``: the allocation's time in this window
    will not change any more. ``billed``: what an export billed (``day``, ``segments``, ``hash``), None before.
    """

    allocation_id: str
    window_start: int
    descriptor: dict[str, Any]
    segments: list[dict[str, Any]]
    metrics: dict[str, Any] | None
    final: bool
    billed: dict[str, Any] | None = None
    corrections: int = 0
    content_hash: str = ""

    def __post_init__(self) -> None:
        if not self.content_hash:
            self.content_hash = _hash([self.segments, self.metrics, self.final])

    @property
    def hour(self) -> str:
        return hour_key(self.window_start)

    @property
    def day(self) -> str:
        return day_of(self.window_start)

    @property
    def billing_hash(self) -> str:
        """Hash of what is billed (the segments): metrics arriving late change the record, not the bill."""
        return _hash(self.segments)

    @property
    def gpu_seconds(self) -> int:
        return sum(int(s["gpuSeconds"]) for s in self.segments)

    @property
    def billable_gpu_seconds(self) -> int:
        return sum(int(s["billableGpuSeconds"]) for s in self.segments)

    @property
    def cost(self) -> Decimal:
        return sum((Decimal(s["cost"]) for s in self.segments), Decimal(0))

    @property
    def currency(self) -> str:
        return self.segments[-1]["currency"] if self.segments else ""

    @property
    def costs(self) -> dict[str, Decimal]:
        """Cost by currency (one, unless the node changed currency within the hour)."""
        found: dict[str, Decimal] = {}
        for s in self.segments:
            found[s["currency"]] = found.get(s["currency"], Decimal(0)) + Decimal(s["cost"])
        return found

    @property
    def key(self) -> dict[str, str]:
        return {"PK": keys.usage_pk(self.hour, _shard(self.allocation_id, keys.USAGE_SHARDS)), "SK": self.allocation_id}


def usage_key(allocation_id: str, window_start: int) -> dict[str, str]:
    """The deterministic key of an allocation's record for a window (allocation + window start)."""
    hour = hour_key(window_start)
    return {"PK": keys.usage_pk(hour, _shard(allocation_id, keys.USAGE_SHARDS)), "SK": allocation_id}


def _record(item: dict[str, Any]) -> UsageRecord:
    return UsageRecord(
        allocation_id=item["SK"],
        window_start=int(item["windowStart"]),
        descriptor=json.loads(item["descriptor"]),
        segments=json.loads(item["segments"]),
        metrics=json.loads(item["metrics"]) if item.get("metrics") else None,
        final=bool(item.get("final", False)),
        billed=json.loads(item["billed"]) if item.get("billed") else None,
        corrections=int(item.get("corrections", 0)),
        content_hash=item["contentHash"],
    )


class CorrectionDue:
    """A queued correction: the record's key and the marker's version."""

    def __init__(self, item: dict[str, Any]):
        self.hour, _, self.allocation_id = str(item["SK"]).partition(keys.SEP)
        self.version = str(item.get("version", ""))


class UsageStore(Table):
    """Meters, price points, usage records, roll-ups and export bookkeeping (module docstring)."""

    def _query(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Every item a ``Query`` matches (``kwargs``), page by page (plain values)."""
        start: dict[str, Any] | None = None
        while True:
            response = self._db.query(
                TableName=self._table, **kwargs, **({"ExclusiveStartKey": start} if start else {})
            )
            yield from map(plain, response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if not start:
                return

    # ------------------------------------------------------------------------------------------- price history
    @staticmethod
    def price_point_item(key: ResourceKey, pricing: dict[str, Any], effective_from: int) -> dict[str, Any]:
        """A node's price from ``effective_from`` (epoch s) on, as an item to write with the node (plain values;
        ``pricing`` as the API shows it: ``pricePerGpuHour``, ``currency``, ``billingIncrementSeconds``,
        ``minimumBillableSeconds``)."""
        return {
            "PK": keys.price_pk(key.subscription_id, key.resource_group, key.names[-1]),
            "SK": f"{int(effective_from):012d}",
            "pricePerGpuHour": str(pricing.get("pricePerGpuHour", 0)),
            "currency": str(pricing.get("currency", "USD")),
            "billingIncrementSeconds": int(pricing.get("billingIncrementSeconds", 1)),
            "minimumBillableSeconds": int(pricing.get("minimumBillableSeconds", 0)),
            "ttl": int(effective_from) + USAGE_RETENTION_SECONDS,
        }

    def price_points(self, node: ResourceKey) -> list[PricePoint]:
        """The node's price history, oldest first (one ``Query``, consistent; a node changes price rarely)."""
        items = self._query(
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues=typed(
                {":pk": keys.price_pk(node.subscription_id, node.resource_group, node.names[-1])}
            ),
            ConsistentRead=True,
        )
        return [
            PricePoint(
                effective_from=int(item["SK"]),
                price_per_gpu_hour=Decimal(str(item["pricePerGpuHour"])),
                currency=str(item["currency"]),
                billing_increment_seconds=int(item.get("billingIncrementSeconds", 1)),
                minimum_billable_seconds=int(item.get("minimumBillableSeconds", 0)),
            )
            for item in items
        ]

    # ------------------------------------------------------------------------------------------- meters
    def meter_start_item(self, meter: Meter, due: int) -> dict[str, Any]:
        """Transaction item that starts a meter (idempotent: a retried step writes the same meter, keeping the
        first start) and puts it in the meter index, due for its first sync at ``due`` (epoch s)."""
        pk, sk = keys.subscription_pk(meter.subscription_id), keys.meter_sk(meter.allocation_id)
        values = {
            "entityType": "meter",
            "descriptor": to_json(meter.descriptor()),
            "gpus": meter.gpus,
            "dgxId": meter.dgx_id,
            "pricing": to_json(meter.pricing),
            "meteredUntil": meter.start,
            **_meter_index(pk, sk, due),
        }
        names = {f"#a{i}": k for i, k in enumerate(values)}
        expression = ", ".join(f"#a{i} = if_not_exists(#a{i}, :v{i})" for i in range(len(values)))
        attribute_values = {f":v{i}": v for i, v in enumerate(values.values())}
        return {
            "Update": {
                "TableName": self._table,
                "Key": typed({"PK": pk, "SK": sk}),
                "UpdateExpression": f"SET #start = if_not_exists(#start, :start), {expression}",
                "ExpressionAttributeNames": {"#start": "start", **names},
                "ExpressionAttributeValues": typed({":start": int(meter.start), **attribute_values}),
            }
        }

    def meter_end_item(self, subscription_id: str, allocation_id: str, end: int, due: int) -> dict[str, Any]:
        """Transaction item that ends a meter at ``end`` (epoch s; the first end written stands) and makes it due
        for a sync at ``due``, which closes its last window. Only for a meter that exists."""
        pk, sk = keys.subscription_pk(subscription_id), keys.meter_sk(allocation_id)
        index = _meter_index(pk, sk, due)
        return {
            "Update": {
                "TableName": self._table,
                "Key": typed({"PK": pk, "SK": sk}),
                "UpdateExpression": "SET #end = if_not_exists(#end, :end), GSI2PK = :p, GSI2SK = :s",
                "ConditionExpression": "attribute_exists(PK)",
                "ExpressionAttributeNames": {"#end": "end"},
                "ExpressionAttributeValues": typed({":end": int(end), ":p": index["GSI2PK"], ":s": index["GSI2SK"]}),
            }
        }

    def due_meters(self, now: float, limit: int) -> list[tuple[str, str]]:
        """Keys (PK, SK) of at most ``limit`` meters due for a sync at ``now`` (epoch s): at most a quarter of
        ``limit`` from each index partition, most overdue first within it (GSI2, eventually consistent: the caller
        reads each meter consistently)."""
        found: list[tuple[str, str]] = []
        quota = -(-limit // METER_SHARDS)  # every partition gets its share, so none is starved by another
        for shard in range(METER_SHARDS):
            start: dict[str, Any] | None = None
            taken = len(found)
            while len(found) < min(limit, taken + quota):
                kwargs: dict[str, Any] = {
                    "TableName": self._table,
                    "IndexName": "GSI2",
                    "KeyConditionExpression": "GSI2PK = :p AND GSI2SK < :now",
                    "ExpressionAttributeValues": typed({":p": f"METER#{shard}", ":now": f"{int(now):012d}#~"}),
                    "Limit": min(limit, taken + quota) - len(found),
                }
                if start:
                    kwargs["ExclusiveStartKey"] = start
                response = self._db.query(**kwargs)
                found.extend((plain(i)["PK"], plain(i)["SK"]) for i in response.get("Items", []))
                start = response.get("LastEvaluatedKey")
                if not start:
                    break
        return found[:limit]

    def get_meter(self, pk: str, sk: str) -> Meter | None:
        """One meter, read consistently."""
        item = self.get_item(pk, sk)
        if item is None:
            return None
        d = json.loads(item["descriptor"])
        return Meter(
            allocation_id=sk.split(keys.SEP, 1)[1],
            subscription_id=d["subscriptionId"],
            resource_group=d["resourceGroup"],
            resource_id=d["resourceId"],
            resource_name=d["resourceName"],
            resource_type=d["resourceType"],
            service=d["service"],
            node_resource_group=d["nodeResourceGroup"],
            node_name=d["nodeName"],
            node_id=d["nodeId"],
            supplier=d["supplier"],
            region=d["region"],
            sku=d["sku"],
            gpus=int(item["gpus"]),
            start=int(item["start"]),
            end=int(item["end"]) if item.get("end") is not None else None,
            dgx_id=str(item.get("dgxId", "")),
            tags=d.get("tags") or {},
            pricing=json.loads(item.get("pricing") or "{}"),
            resource_created_at=str(d.get("resourceCreatedAt", "")),
            node_created_at=str(d.get("nodeCreatedAt", "")),
            metered_until=int(item.get("meteredUntil", item["start"])),
            metrics_retry_from=int(item["metricsRetryFrom"]) if item.get("metricsRetryFrom") is not None else None,
            active="GSI2PK" in item,
        )

    def advance_meter(
        self, meter: Meter, metered_until: int, due: int | None, metrics_retry_from: int | None = None
    ) -> None:
        """Record that usage is recorded up to ``metered_until``, from which hour metrics are still to be read
        again (``metrics_retry_from``; None: none), and when the meter is next due (``due`` epoch s); ``due``
        None takes it out of the index: an ended meter whose last window is closed."""
        pk, sk = keys.subscription_pk(meter.subscription_id), keys.meter_sk(meter.allocation_id)
        values: dict[str, Any] = {":m": int(metered_until)}
        sets, removes = ["meteredUntil = :m"], []
        if metrics_retry_from is None:
            removes.append("metricsRetryFrom")
        else:
            sets.append("metricsRetryFrom = :r")
            values[":r"] = int(metrics_retry_from)
        if due is None:
            removes += ["GSI2PK", "GSI2SK"]
        else:
            index = _meter_index(pk, sk, due)
            sets += ["GSI2PK = :p", "GSI2SK = :s"]
            values.update({":p": index["GSI2PK"], ":s": index["GSI2SK"]})
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        try:
            self._db.update_item(
                TableName=self._table,
                Key=typed({"PK": pk, "SK": sk}),
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(PK)",
                ExpressionAttributeValues=typed(values),
            )
        except self._db.exceptions.ConditionalCheckFailedException:
            return

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
                    record = _record(item)
                    found[record.window_start] = record
                request = response.get("UnprocessedKeys") or {}
        return found

    def get_usage(self, allocation_id: str, window_start: int) -> UsageRecord | None:
        """One record, read consistently."""
        key = usage_key(allocation_id, window_start)
        item = self.get_item(key["PK"], key["SK"])
        return _record(item) if item else None

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
            items = self._query(
                KeyConditionExpression="PK = :pk",
                ExpressionAttributeValues=typed({":pk": keys.usage_pk(hour, shard)}),
                ConsistentRead=True,
            )
            yield from map(_record, items)

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
            self._query(
                KeyConditionExpression="PK = :pk AND SK BETWEEN :a AND :b",
                ExpressionAttributeValues=typed(
                    {":pk": keys.rollup_pk(subscription_id, scope), ":a": first_hour, ":b": last_hour}
                ),
            )
        )

    # ------------------------------------------------------------------------------------------- billing export
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
        items = self._query(
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


def hours_of_day(day: str) -> list[str]:
    """The 24 hour keys of a UTC day."""
    start = int(datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp())
    return [hour_key(start + h * HOUR) for h in range(24)]
