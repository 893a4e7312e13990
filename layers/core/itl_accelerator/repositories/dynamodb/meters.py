"""Meters in the table (item type ``Meter``: ``SUB#{sub}`` / ``METER#{allocationId}``): one allocation of GPUs,
started in the same transaction as the state change that starts its billing (an instance becomes ``Succeeded``, a
job starts ``Running``) and ended in the one that stops it (repositories/dynamodb/workloads.py builds those items
from here). It carries the billing terms the allocation locked. While it may still produce usage it sits in the
sparse index GSI2 (``METER#{shard}``, sorted by when it is next due for a sync) and in GSI3 (``SUB#{sub}#METERS``:
its subscription's open meters, which budgets add up live).

When a meter closes, its charges of each month are *settled*: added, once, to the subscription's spend of that
month per budget scope (item type ``SpendMonth``: ``SUB#{sub}#SPEND#{YYYY-MM}`` / ``{scope}``, one number attribute
per currency), in one transaction with the month's mark on the meter (``settledMonths``) — so a budget's spend is
the settled spend plus its open meters' charges, each allocation counted once.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.usage import Meter, MeterEnd, MeterRef
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import plain, to_json, typed
from itl_accelerator.repositories.dynamodb.table import Table, TransactionFailed

#: Partitions of the meter index (GSI2 ``METER#{shard}``).
METER_SHARDS = 4


def open_meters_partition(subscription_id: str) -> str:
    """GSI3 partition of a subscription's meters not closed yet (``SUB#{sub}#METERS``): what budgets add up live."""
    return f"{keys.subscription_pk(subscription_id)}{keys.SEP}METERS"


def spend_pk(subscription_id: str, month: str) -> str:
    """Partition of a subscription's settled spend in one month (``SUB#{sub}#SPEND#{YYYY-MM}``; sort key: the
    budget scope, billing/rollup.py)."""
    return f"{keys.subscription_pk(subscription_id)}{keys.SEP}SPEND{keys.SEP}{month}"


def _meter_index(pk: str, sk: str, due: int) -> dict[str, Any]:
    return {"GSI2PK": f"METER{keys.SEP}{keys.shard_of(pk + sk, METER_SHARDS)}", "GSI2SK": f"{int(due):012d}#{pk}#{sk}"}


def meter_start_item(table: str, meter: Meter) -> dict[str, Any]:
    """Transaction item that starts a meter (idempotent: a retried step writes the same meter, keeping the first
    start) and puts it in the meter index, due for its first sync at its start."""
    pk, sk = keys.subscription_pk(meter.subscription_id), keys.meter_sk(meter.allocation_id)
    values = {
        "entityType": "meter",
        "descriptor": to_json(meter.descriptor()),
        "gpus": meter.gpus,
        "dgxId": meter.dgx_id,
        "pricing": to_json(meter.terms.as_stored()),
        "meteredUntil": meter.start,
        **({"end": int(meter.end)} if meter.end is not None else {}),
        **_meter_index(pk, sk, meter.start),
        "GSI3PK": open_meters_partition(meter.subscription_id),
        "GSI3SK": meter.allocation_id,
    }
    names = {f"#a{i}": k for i, k in enumerate(values)}
    expression = ", ".join(f"#a{i} = if_not_exists(#a{i}, :v{i})" for i in range(len(values)))
    attribute_values = {f":v{i}": v for i, v in enumerate(values.values())}
    return {
        "Update": {
            "TableName": table,
            "Key": typed({"PK": pk, "SK": sk}),
            "UpdateExpression": f"SET #start = if_not_exists(#start, :start), {expression}",
            "ExpressionAttributeNames": {"#start": "start", **names},
            "ExpressionAttributeValues": typed({":start": int(meter.start), **attribute_values}),
        }
    }


def meter_end_item(table: str, end: MeterEnd) -> dict[str, Any]:
    """Transaction item that ends a meter (the first end written stands) and makes it due for the sync that closes
    its last window. Only for a meter that exists."""
    pk, sk = keys.subscription_pk(end.subscription_id), keys.meter_sk(end.allocation_id)
    index = _meter_index(pk, sk, end.due)
    return {
        "Update": {
            "TableName": table,
            "Key": typed({"PK": pk, "SK": sk}),
            "UpdateExpression": "SET #end = if_not_exists(#end, :end), GSI2PK = :p, GSI2SK = :s",
            "ConditionExpression": "attribute_exists(PK)",
            "ExpressionAttributeNames": {"#end": "end"},
            "ExpressionAttributeValues": typed({":end": int(end.end), ":p": index["GSI2PK"], ":s": index["GSI2SK"]}),
        }
    }


class DynamoMeterRepository:
    """:class:`~itl_accelerator.repositories.protocols.MeterRepository` over the table."""

    def __init__(self, table: Table):
        self._t = table

    def oldest_due(self) -> int | None:
        """One ``Query`` of one item per index partition (GSI2 ``METER#{0-3}``, sorted by due time): the sync leaves
        every meter it synced due again half a period later, so the oldest due time is about now while it keeps up
        and falls behind as soon as meters wait (a run cut short, a meter whose sync fails)."""
        found: list[int] = []
        for shard in range(METER_SHARDS):
            response = self._t.client.query(
                TableName=self._t.name,
                IndexName="GSI2",
                KeyConditionExpression="GSI2PK = :p",
                ExpressionAttributeValues=typed({":p": f"METER#{shard}"}),
                Limit=1,
            )
            found += [int(str(plain(item)["GSI2SK"])[:12]) for item in response.get("Items", [])]
        return min(found) if found else None

    def due(self, now: float, limit: int) -> list[MeterRef]:
        return [
            MeterRef(str(pk).split(keys.SEP, 1)[1], str(sk).split(keys.SEP, 1)[1])
            for pk, sk in self._due_keys(now, limit)
        ]

    def get(self, ref: MeterRef) -> Meter | None:
        return self._get(keys.subscription_pk(ref.subscription_id), keys.meter_sk(ref.allocation_id))

    def _due_keys(self, now: float, limit: int) -> list[tuple[str, str]]:
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
                    "TableName": self._t.name,
                    "IndexName": "GSI2",
                    "KeyConditionExpression": "GSI2PK = :p AND GSI2SK < :now",
                    "ExpressionAttributeValues": typed({":p": f"METER#{shard}", ":now": f"{int(now):012d}#~"}),
                    "Limit": min(limit, taken + quota) - len(found),
                }
                if start:
                    kwargs["ExclusiveStartKey"] = start
                response = self._t.client.query(**kwargs)
                found.extend((plain(i)["PK"], plain(i)["SK"]) for i in response.get("Items", []))
                start = response.get("LastEvaluatedKey")
                if not start:
                    break
        return found[:limit]

    def _get(self, pk: str, sk: str) -> Meter | None:
        """One meter, read consistently."""
        item = self._t.get_item(pk, sk)
        return self._meter(sk, item) if item is not None else None

    @staticmethod
    def _meter(sk: str, item: dict[str, Any]) -> Meter:
        return Meter.described(
            sk.split(keys.SEP, 1)[1],
            json.loads(item["descriptor"]),
            gpus=int(item["gpus"]),
            terms=BillingTerms.from_pricing(json.loads(item.get("pricing") or "{}")),
            start=int(item["start"]),
            end=int(item["end"]) if item.get("end") is not None else None,
            dgx_id=str(item.get("dgxId", "")),
            metered_until=int(item.get("meteredUntil", item["start"])),
            metrics_retry_from=int(item["metricsRetryFrom"]) if item.get("metricsRetryFrom") is not None else None,
            active="GSI2PK" in item,
            settled_months=frozenset(item.get("settledMonths") or ()),
        )

    def advance(self, meter: Meter, metered_until: int, due: int | None, metrics_retry_from: int | None = None) -> None:
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
            removes += ["GSI2PK", "GSI2SK", "GSI3PK", "GSI3SK"]
        else:
            index = _meter_index(pk, sk, due)
            sets += ["GSI2PK = :p", "GSI2SK = :s"]
            values.update({":p": index["GSI2PK"], ":s": index["GSI2SK"]})
        expression = "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else "")
        try:
            self._t.client.update_item(
                TableName=self._t.name,
                Key=typed({"PK": pk, "SK": sk}),
                UpdateExpression=expression,
                ConditionExpression="attribute_exists(PK)",
                ExpressionAttributeValues=typed(values),
            )
        except self._t.client.exceptions.ConditionalCheckFailedException:
            return

    # ----------------------------------------------------------------------------------------------- spend
    def open_in(self, subscription_id: str) -> list[Meter]:
        """The subscription's meters not closed: a ``Query`` of GSI3 (its keys), then ``BatchGetItem``s of 100,
        consistent — a meter closed since the index was read is left out (its charges are settled by then)."""
        found: list[Meter] = []
        refs = [
            str(item["SK"])
            for item in self._t.query_all(
                IndexName="GSI3",
                KeyConditionExpression="GSI3PK = :p",
                ExpressionAttributeValues=typed({":p": open_meters_partition(subscription_id)}),
            )
        ]
        pk = keys.subscription_pk(subscription_id)
        for item in self._t.batch_get([{"PK": pk, "SK": sk} for sk in refs]):
            if "GSI3PK" in item:
                found.append(self._meter(str(item["SK"]), item))
        return sorted(found, key=lambda m: m.allocation_id)

    def settle(self, meter: Meter, month: str, costs: dict[str, dict[str, Decimal]]) -> bool:
        """Add ``costs`` (budget scope → currency → amount) to the subscription's settled spend of ``month`` and mark
        the month settled on the meter — one transaction, once: False when the month was settled already."""
        pk, sk = keys.subscription_pk(meter.subscription_id), keys.meter_sk(meter.allocation_id)
        items: list[dict[str, Any]] = [
            {
                "Update": {
                    "TableName": self._t.name,
                    "Key": typed({"PK": pk, "SK": sk}),
                    "UpdateExpression": "ADD settledMonths :months",
                    "ConditionExpression": "attribute_exists(PK) AND NOT contains(settledMonths, :month)",
                    "ExpressionAttributeValues": {":months": {"SS": [month]}, ":month": {"S": month}},
                }
            }
        ]
        for scope, by_currency in sorted(costs.items()):
            amounts = {c: a for c, a in sorted(by_currency.items()) if a}
            if not amounts:
                continue
            names = {f"#c{i}": c for i, c in enumerate(amounts)}
            values = {f":v{i}": a for i, a in enumerate(amounts.values())}
            items.append(
                {
                    "Update": {
                        "TableName": self._t.name,
                        "Key": typed({"PK": spend_pk(meter.subscription_id, month), "SK": scope}),
                        "UpdateExpression": "SET entityType = :t ADD "
                        + ", ".join(f"#c{i} :v{i}" for i in range(len(amounts))),
                        "ExpressionAttributeNames": names,
                        "ExpressionAttributeValues": typed({":t": "SpendMonth", **values}),
                    }
                }
            )
        try:
            self._t.transact(items)
        except TransactionFailed:
            return False
        return True

    def settled(self, subscription_id: str, month: str, scopes: tuple[str, ...]) -> dict[str, dict[str, Decimal]]:
        """The settled spend of ``month`` in each of ``scopes`` (currency → amount; {} where nothing settled):
        ``BatchGetItem``s, consistent."""
        found: dict[str, dict[str, Decimal]] = {scope: {} for scope in scopes}
        wanted = [{"PK": spend_pk(subscription_id, month), "SK": sk} for sk in dict.fromkeys(scopes)]
        for item in self._t.batch_get(wanted):
            found[str(item["SK"])] = {
                k: Decimal(str(v)) for k, v in item.items() if k not in ("PK", "SK", "entityType")
            }
        return found
