"""Usage records and hourly roll-ups in the table (key formats: keys.py). What the figures are is computed elsewhere
(billing/metering.py, billing/rollup.py); this module stores them so that each is written once.

A **usage record** (``SYS#USAGE#{hour}#{shard}`` / ``{allocationId}``) is one allocation's usage in one UTC hour: its
key is deterministic, so a repeated or concurrent sync rewrites the same item; it is written compare-and-set on what
was read (content and billing state), so nothing is lost between concurrent writers; each write marks its hour's
roll-up due (``SYS#ROLLUPDUE#{shard}``) and either checks that its day is still open (its shard's copy of the export
cursor) or queues a correction (billing.py) — the shard a hash of the allocation, so no single item takes every
write (keys.py ``WRITE_PATH_SHARDS``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from itl_accelerator.billing.rollup import CostDay, CostDimensions, CostHour, CostMonth, Rollup, Totals
from itl_accelerator.domain.usage import USAGE_RETENTION_SECONDS, UsageRecord, WriteOutcome, hour_key
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import plain, to_json, typed
from itl_accelerator.repositories.dynamodb.table import BUSY_ERROR_CODES, Table, TransactionFailed
from itl_accelerator.repositories.errors import StoreBusy


def usage_key(allocation_id: str, window_start: int) -> dict[str, str]:
    """The deterministic key of an allocation's record for a window (allocation + window start)."""
    hour = hour_key(window_start)
    return {"PK": keys.usage_pk(hour, keys.shard_of(allocation_id, keys.USAGE_SHARDS)), "SK": allocation_id}


def record_key(record: UsageRecord) -> dict[str, str]:
    """The key of a record."""
    return usage_key(record.allocation_id, record.window_start)


def record_from_item(item: dict[str, Any]) -> UsageRecord:
    """A usage record from its item (plain values)."""
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


def correction_due_sk(hour: str, allocation_id: str) -> str:
    """Sort key of a queued correction (``SYS#CORRECTIONDUE``)."""
    return f"{hour}{keys.SEP}{allocation_id}"


#: ``BatchWriteItem`` calls of one batch of roll-ups while DynamoDB leaves some unprocessed (throttling), before
#: ``StoreBusy``.
ROLLUP_WRITE_ATTEMPTS = 8


class _Unprocessed(Exception):
    """DynamoDB left some items of a ``BatchWriteItem`` unprocessed: they are sent again."""


class DynamoUsageRepository:
    """:class:`~itl_accelerator.repositories.protocols.UsageRepository` over the table."""

    def __init__(self, table: Table):
        self._t = table

    # ------------------------------------------------------------------------------------------- usage records
    def records(self, allocation_id: str, window_starts: list[int]) -> dict[int, UsageRecord]:
        """``BatchGetItem``s of 100 keys, consistent."""
        found: dict[int, UsageRecord] = {}
        for item in self._t.batch_get([usage_key(allocation_id, w) for w in window_starts]):
            record = record_from_item(item)
            found[record.window_start] = record
        return found

    def get(self, allocation_id: str, window_start: int) -> UsageRecord | None:
        key = usage_key(allocation_id, window_start)
        item = self._t.get_item(key["PK"], key["SK"])
        return record_from_item(item) if item else None

    def write(self, record: UsageRecord, previous: UsageRecord | None) -> WriteOutcome:
        """One transaction: the record (compare-and-set), its hour's roll-up marked due, and the open-day check —
        or, when its day is billed or closed, its correction queued."""
        billed = previous.billed if previous else None
        record.billed, record.corrections = billed, previous.corrections if previous else 0
        correction = billed is not None and billed["hash"] != record.billing_hash
        for attempt in ("check", "correction"):
            if attempt == "correction":
                correction = True
            shard = keys.shard_of(record.allocation_id, keys.WRITE_PATH_SHARDS)
            items = [self._usage_put(record, previous), self._rollup_due_put(record.hour, shard)]
            if correction:
                items.append(self._correction_due_put(record))
            elif billed is None:
                items.append(self._day_open_check(record.day, shard))
            try:
                self._t.transact(items)
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
            **record_key(record),
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
        put: dict[str, Any] = {"TableName": self._t.name, "Item": typed(item)}
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

    def _rollup_due_put(self, hour: str, shard: int) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self._t.name,
                "Item": typed({"PK": keys.rollup_due_pk(shard), "SK": hour, "version": uuid.uuid4().hex}),
            }
        }

    def _correction_due_put(self, record: UsageRecord) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self._t.name,
                "Item": typed(
                    {
                        "PK": keys.CORRECTION_DUE_PK,
                        "SK": correction_due_sk(record.hour, record.allocation_id),
                        "version": uuid.uuid4().hex,
                    }
                ),
            }
        }

    def _day_open_check(self, day: str, shard: int) -> dict[str, Any]:
        """The day is still open by the shard's copy of the export cursor (billing.py keeps the copies equal to the
        cursor; none: no day closed yet). The usage sync makes sure of the copies (``open_days_from``) before its
        first write of every run, so a table from before the copies, or a day closed by an export of before them,
        never has a write check a missing or stale copy."""
        return {
            "ConditionCheck": {
                "TableName": self._t.name,
                "Key": typed({"PK": keys.export_cursor_copy_pk(shard), "SK": keys.EXPORT_CURSOR_SK}),
                "ConditionExpression": "attribute_not_exists(nextDay) OR nextDay <= :d",
                "ExpressionAttributeValues": typed({":d": day}),
            }
        }

    def hour_records(self, hour: str) -> Iterator[UsageRecord]:
        """Shard by shard in key order: consistent ``Query`` pages, so memory stays one page whatever the count."""
        for shard in range(keys.USAGE_SHARDS):
            items = self._t.query_all(
                KeyConditionExpression="PK = :pk",
                ExpressionAttributeValues=typed({":pk": keys.usage_pk(hour, shard)}),
                ConsistentRead=True,
            )
            yield from map(record_from_item, items)

    # ------------------------------------------------------------------------------------------- roll-ups
    def due_rollups(self, limit: int) -> list[tuple[str, str]]:
        """One consistent ``Query`` (``Limit``) per shard of the marks and the pre-shard partition; the oldest
        ``limit`` hours of their union, each with a token naming every mark of it that was read
        (``{partition}={version}``, ``;``-separated) — the oldest ``limit`` of each shard hold the oldest ``limit``
        of all."""
        marks: dict[str, list[str]] = {}
        partitions = [keys.ROLLUP_DUE_PK] + [keys.rollup_due_pk(s) for s in range(keys.WRITE_PATH_SHARDS)]
        for pk in partitions:
            response = self._t.client.query(
                TableName=self._t.name,
                KeyConditionExpression="PK = :pk",
                ExpressionAttributeValues=typed({":pk": pk}),
                ConsistentRead=True,
                Limit=limit,
            )
            for item in map(plain, response.get("Items", [])):
                marks.setdefault(str(item["SK"]), []).append(f"{pk}={item['version']}")
        return [(hour, ";".join(marks[hour])) for hour in sorted(marks)[:limit]]

    def put_rollups(self, rollups: list[Rollup]) -> None:
        """``BatchWriteItem``s of 25, retrying what DynamoDB leaves unprocessed."""
        items = [
            {
                "PK": keys.rollup_pk(r.subscription_id, r.scope),
                "SK": r.hour,
                "ttl": r.ttl,
                **r.totals.as_stored(),
            }
            for r in rollups
        ]
        for i in range(0, len(items), 25):
            self._put_batch({self._t.name: [{"PutRequest": {"Item": typed(item)}} for item in items[i : i + 25]]})

    def _put_batch(self, request: dict[str, Any]) -> None:
        """One ``BatchWriteItem``, and again (at once, tenacity's retry) with what DynamoDB left unprocessed,
        :data:`ROLLUP_WRITE_ATTEMPTS` calls in all; then ``StoreBusy``."""
        pending = request

        def write() -> None:
            nonlocal pending
            pending = self._t.client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            if pending:
                raise _Unprocessed

        def ran_out(state: RetryCallState) -> None:
            raise StoreBusy("roll-up writes stayed unprocessed")

        Retrying(
            retry=retry_if_exception_type(_Unprocessed),
            stop=stop_after_attempt(ROLLUP_WRITE_ATTEMPTS),
            sleep=lambda seconds: None,
            retry_error_callback=ran_out,
        )(write)

    def rollup_done(self, hour: str, version: str) -> bool:
        """Delete each mark the token names (:meth:`due_rollups`) that still has its version; True when all did."""
        done = True
        for mark in version.split(";"):
            pk, _, v = mark.rpartition("=")
            if not pk.startswith(keys.ROLLUP_DUE_PK):
                return False  # not a token of due_rollups
            try:
                self._t.client.delete_item(
                    TableName=self._t.name,
                    Key=typed({"PK": pk, "SK": hour}),
                    ConditionExpression="version = :v",
                    ExpressionAttributeValues=typed({":v": v}),
                )
            except self._t.client.exceptions.ConditionalCheckFailedException:
                done = False  # newer usage marked it again: the hour stays due
        return done

    # ------------------------------------------------------------------------------------------- cost days
    def put_cost_hours(self, hours: list[CostHour]) -> None:
        """One ``UpdateItem`` each: the hour's totals in attribute ``h{HH}`` of the resource's day item, its
        dimensions beside them — so an hour rolled up again replaces only itself, and no read is needed."""
        for hour in hours:
            d = hour.dimensions
            values = {
                **_dimension_values(d),
                ":t": "CostDay",
                ":rid": d.resource_id,
                ":rname": d.resource_name,
                ":h": _cost_measures(hour.totals),
                ":ttl": hour.ttl,
            }
            self._update(
                Key=typed({"PK": keys.cost_pk(hour.subscription_id, hour.day[:7]), "SK": _cost_sk(hour.day, d)}),
                UpdateExpression=f"SET {_DIMENSIONS_SET}, resourceId = :rid, resourceName = :rname, "
                f"h{hour.hour[11:13]} = :h, #ttl = :ttl",
                ExpressionAttributeNames={"#ttl": "ttl"},
                ExpressionAttributeValues=typed(values),
            )

    def put_cost_group_hours(self, hours: list[CostHour]) -> None:
        """Per group: one ``UpdateItem`` of its day item (attribute ``h{HH}``, ``rev`` added 1, the item returned),
        then one of its month item: ``d{DD}`` = the day's hours summed, written only while the month holds an older
        revision of that day (``r{DD}``) — so two runs rolling up two hours of one day concurrently leave the day
        total of the later revision, never one missing an hour."""
        for hour in hours:
            d, day = hour.dimensions, hour.day
            pk = keys.cost_group_pk(hour.subscription_id, day[:7])
            group = _dimension_values(d)
            stored = self._update(
                Key=typed({"PK": pk, "SK": f"D{keys.SEP}{day}{keys.SEP}{d.resource_scope}"}),
                UpdateExpression=f"SET {_DIMENSIONS_SET}, #h = :h, #ttl = :ttl ADD rev :one",
                ExpressionAttributeNames={"#ttl": "ttl", "#h": f"h{hour.hour[11:13]}"},
                ExpressionAttributeValues=typed(
                    {**group, ":t": "CostGroupDay", ":h": _cost_measures(hour.totals), ":ttl": hour.ttl, ":one": 1}
                ),
                ReturnValues="ALL_NEW",
            )
            total = Totals()
            for totals in _hours_of(day, stored).values():
                total.merge(totals)
            try:
                self._update(
                    Key=typed({"PK": pk, "SK": f"M{keys.SEP}{d.resource_scope}"}),
                    UpdateExpression=f"SET {_DIMENSIONS_SET}, #d = :d, #r = :rev, #ttl = :ttl",
                    ConditionExpression="attribute_not_exists(#r) OR #r < :rev",
                    ExpressionAttributeNames={"#ttl": "ttl", "#d": f"d{day[8:10]}", "#r": f"r{day[8:10]}"},
                    ExpressionAttributeValues=typed(
                        {
                            **group,
                            ":t": "CostGroupMonth",
                            ":d": _cost_measures(total),
                            ":rev": int(stored["rev"]),
                            ":ttl": hour.ttl + 31 * 86400,
                        }
                    ),
                )
            except self._t.client.exceptions.ConditionalCheckFailedException:
                pass  # a later revision of the day is in the month already

    def _update(self, **request: Any) -> dict[str, Any]:
        """One ``UpdateItem`` (``StoreBusy`` when throttled); the item's new attributes when asked for (plain)."""
        try:
            response = self._t.client.update_item(TableName=self._t.name, **request)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in BUSY_ERROR_CODES:
                raise StoreBusy("cost writes throttled") from exc
            raise
        return plain(response.get("Attributes") or {})

    def mark_cost_groups_since(self, hour: str) -> str:
        """``UpdateItem SET hour = if_not_exists(hour, :h)`` on ``SYS#COSTGROUPS`` / ``SINCE``."""
        stored = self._update(
            Key=typed({"PK": keys.COST_GROUPS_PK, "SK": keys.COST_GROUPS_SINCE_SK}),
            UpdateExpression="SET #h = if_not_exists(#h, :h)",
            ExpressionAttributeNames={"#h": "hour"},
            ExpressionAttributeValues=typed({":h": hour}),
            ReturnValues="ALL_NEW",
        )
        return str(stored["hour"])

    def cost_groups_since(self) -> str | None:
        """One consistent ``GetItem``."""
        item = self._t.get_item(keys.COST_GROUPS_PK, keys.COST_GROUPS_SINCE_SK)
        return str(item["hour"]) if item else None

    def cost_group_days(self, subscription_id: str, first_day: str, last_day: str) -> Iterator[CostDay]:
        """One ``Query`` per month (paged), ``SK BETWEEN D#{first}`` and ``D#{last}#~``."""
        for month in _months(first_day, last_day):
            items = self._t.query_all(
                KeyConditionExpression="PK = :pk AND SK BETWEEN :a AND :b",
                ExpressionAttributeValues=typed(
                    {
                        ":pk": keys.cost_group_pk(subscription_id, month),
                        ":a": f"D{keys.SEP}{first_day}",
                        ":b": f"D{keys.SEP}{last_day}{keys.SEP}~",
                    }
                ),
            )
            for item in items:
                day, _, scope = str(item["SK"]).partition(keys.SEP)[2].partition(keys.SEP)
                yield CostDay(subscription_id, day, _dimensions_of(item, scope), _hours_of(day, item))

    def cost_group_months(self, subscription_id: str, month: str) -> Iterator[CostMonth]:
        """One ``Query`` (paged), ``SK begins_with M#``."""
        items = self._t.query_all(
            KeyConditionExpression="PK = :pk AND begins_with(SK, :m)",
            ExpressionAttributeValues=typed({":pk": keys.cost_group_pk(subscription_id, month), ":m": f"M{keys.SEP}"}),
        )
        for item in items:
            scope = str(item["SK"]).partition(keys.SEP)[2]
            days = {f"{month}-{dd}": totals for dd, totals in _numbered(item, "d").items()}
            yield CostMonth(subscription_id, month, _dimensions_of(item, scope), days)

    def cost_days(self, subscription_id: str, first_day: str, last_day: str) -> Iterator[CostDay]:
        """One ``Query`` per month (paged), ``SK BETWEEN`` the days."""
        for month in _months(first_day, last_day):
            items = self._t.query_all(
                KeyConditionExpression="PK = :pk AND SK BETWEEN :a AND :b",
                ExpressionAttributeValues=typed(
                    {":pk": keys.cost_pk(subscription_id, month), ":a": first_day, ":b": last_day + "#~"}
                ),
            )
            for item in items:
                yield _cost_day(subscription_id, item)

    def rollups(self, subscription_id: str, scope: str, first_hour: str, last_hour: str) -> dict[str, Totals]:
        """One ``Query`` (paged; at most 720 hours)."""
        items = self._t.query_all(
            KeyConditionExpression="PK = :pk AND SK BETWEEN :a AND :b",
            ExpressionAttributeValues=typed(
                {":pk": keys.rollup_pk(subscription_id, scope), ":a": first_hour, ":b": last_hour}
            ),
        )
        return {str(item["SK"]): Totals.from_stored(item) for item in items}


def _cost_measures(totals: Totals) -> str:
    """What a cost query sums of an hour (models/costs.py ``Measure``), and no more, as one short string:
    ``"{gpuSeconds} {billableGpuSeconds} {currency}={amount}..."`` (amounts exact, as decimal strings). A day item
    holds 24 of these and every query reads and decodes each whole, so the utilisation, energy and token figures the
    roll-ups keep are left out and no JSON is parsed: about 30 bytes an hour instead of 230, and a split instead of
    a JSON decode (``./dev bench``, benchmarks/limits.py)."""
    costs = " ".join(f"{c}={format(a, 'f')}" for c, a in sorted(totals.costs.items()))
    return f"{totals.gpu_seconds} {totals.billable_gpu_seconds} {costs}".rstrip()


def _hour_of(text: str) -> Totals:
    """Inverse of :func:`_cost_measures`."""
    gpu, billable, *costs = text.split(" ")
    return Totals(
        gpu_seconds=int(gpu),
        billable_gpu_seconds=int(billable),
        costs={c: Decimal(a) for c, _, a in (x.partition("=") for x in costs)},
    )


def _cost_sk(day: str, d: CostDimensions) -> str:
    return f"{day}{keys.SEP}{d.resource_scope}"


#: What a cost group's items set of its dimensions (:func:`_dimension_values`).
_DIMENSIONS_SET = (
    "entityType = :t, resourceType = :rtype, resourceGroup = :rg, submittedBy = :by, nodeId = :node, "
    "supplier = :supplier, tags = :tags, acceleratorKind = :kind, acceleratorModel = :model"
)


def _dimension_values(d: CostDimensions) -> dict[str, Any]:
    return {
        ":rtype": d.resource_type,
        ":rg": d.resource_group,
        ":by": d.submitted_by,
        ":node": d.node_id,
        ":supplier": d.supplier,
        ":tags": to_json(dict(d.tags)),
        ":kind": d.accelerator_kind,
        ":model": d.accelerator_model,
    }


def _dimensions_of(item: dict[str, Any], scope: str) -> CostDimensions:
    """The dimensions a cost item holds (plain values; a cost group's have no resource id or name)."""
    return CostDimensions(
        resource_scope=scope,
        resource_id=str(item.get("resourceId", "")),
        resource_name=str(item.get("resourceName", "")),
        resource_type=str(item.get("resourceType", "")),
        resource_group=str(item.get("resourceGroup", "")),
        submitted_by=str(item.get("submittedBy", "")),
        node_id=str(item.get("nodeId", "")),
        supplier=str(item.get("supplier", "")),
        tags=tuple(sorted(json.loads(item.get("tags") or "{}").items())),
        accelerator_kind=str(item.get("acceleratorKind") or "GPU"),
        accelerator_model=str(item.get("acceleratorModel") or ""),
    )


def _numbered(item: dict[str, Any], prefix: str) -> dict[str, Totals]:
    """The totals a cost item holds in its attributes ``{prefix}{NN}`` (``h00``..``h23``, ``d01``..``d31``), by
    ``NN`` (plain values)."""
    return {
        name[1:]: _hour_of(value)
        for name, value in item.items()
        if len(name) == 3 and name[0] == prefix and name[1:].isdigit()
    }


def _hours_of(day: str, item: dict[str, Any]) -> dict[str, Totals]:
    """The hours (``YYYY-MM-DDTHH``) a day item holds (plain values)."""
    return {f"{day}T{hh}": totals for hh, totals in _numbered(item, "h").items()}


def _cost_day(subscription_id: str, item: dict[str, Any]) -> CostDay:
    """A resource's day from its item (plain values)."""
    day, _, scope = str(item["SK"]).partition(keys.SEP)
    return CostDay(subscription_id, day, _dimensions_of(item, scope), _hours_of(day, item))


def _months(first_day: str, last_day: str) -> list[str]:
    """The months (``YYYY-MM``) from ``first_day``'s to ``last_day``'s."""
    year, month = int(first_day[:4]), int(first_day[5:7])
    end = (int(last_day[:4]), int(last_day[5:7]))
    months = []
    while (year, month) <= end:
        months.append(f"{year:04d}-{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return months
