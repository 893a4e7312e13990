"""Meters in the table (item type ``Meter``: ``SUB#{sub}`` / ``METER#{allocationId}``): one allocation of GPUs,
started in the same transaction as the state change that starts its billing (an instance becomes ``Succeeded``, a
job starts ``Running``) and ended in the one that stops it (repositories/dynamodb/workloads.py builds those items
from here). It carries the billing terms the allocation locked. While it may still produce usage it sits in the
sparse index GSI2 (``METER#{shard}``, sorted by when it is next due for a sync).
"""

from __future__ import annotations

import json
from typing import Any

from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.usage import Meter, MeterEnd, MeterRef
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import plain, to_json, typed
from itl_accelerator.repositories.dynamodb.table import Table

#: Partitions of the meter index (GSI2 ``METER#{shard}``).
METER_SHARDS = 4


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
        **_meter_index(pk, sk, meter.start),
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
        if item is None:
            return None
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
            removes += ["GSI2PK", "GSI2SK"]
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
