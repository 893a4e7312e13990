"""Meters in the table (key formats: store/keys.py).

A **meter** (``SUB#{sub}`` / ``METER#{allocationId}``) is one allocation of GPUs: written in the same transaction as
the state change that starts it (an instance becomes ``Succeeded``, a job starts ``Running``) and ended in the one
that stops it (an instance's deletion is accepted, a job finishes). It carries the billing terms the allocation
locked when it reserved its GPUs (billing/metering.py), so its usage is priced by them whatever the node's pricing
says later. While it may still produce usage it sits in the sparse index GSI2 (``METER#{shard}``, sorted by when
it is next due for a sync).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.store import keys
from itl_accelerator.store.codec import plain, to_json, typed
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.table import Table

#: Partitions of the meter index (GSI2 ``METER#{shard}``).
METER_SHARDS = 4


@dataclass
class Meter:
    """One allocation of GPUs: who holds them (the ARM resource, its subscription and group, tags), where (the
    node, its supplier, region and SKU), how many (``gpus``), under which locked ``terms``, and when
    (``start``/``end``, epoch seconds; ``end`` None while it runs). ``metered_until``: usage is recorded up to there
    (epoch seconds). ``service``: the provider's service the allocation is billed under (``instances`` or
    ``jobs``). ``supplier`` is the node's owner when the allocation began: what it earns is that supplier's."""

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
    terms: BillingTerms
    start: int
    end: int | None = None
    dgx_id: str = ""
    tags: dict[str, str] = field(default_factory=dict)
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
    return {"GSI2PK": f"METER{keys.SEP}{keys.shard_of(pk + sk, METER_SHARDS)}", "GSI2SK": f"{int(due):012d}#{pk}#{sk}"}


class MeterStore(Table):
    """Meters (module docstring)."""

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
            "pricing": to_json(meter.terms.as_stored()),
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
            terms=BillingTerms.from_pricing(json.loads(item.get("pricing") or "{}")),
            start=int(item["start"]),
            end=int(item["end"]) if item.get("end") is not None else None,
            dgx_id=str(item.get("dgxId", "")),
            tags=d.get("tags") or {},
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
