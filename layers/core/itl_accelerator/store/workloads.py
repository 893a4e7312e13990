"""Store operations of workloads placed on nodes (instances now; jobs later): capacity reservations, state
transitions and operation status items, composed by the services into single transactions.

Capacity is never over-committed: a reservation is a conditional ``ADD`` on the node item
(``allocated <= total - requested`` against totals read in the same request, and ``availability = Available``);
a release is conditioned on the workload still holding its reservation, so it happens exactly once.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from itl_accelerator.store import keys
from itl_accelerator.store.dynamodb import (
    CHILD_COUNT,
    DynamoStore,
    ResourceWrite,
    _plain,
    _typed,
    to_json,
)
from itl_accelerator.store.keys import ResourceKey

#: Operation status items are kept at least 24 h (ARM_CONTRACT.md line 14); here 7 days, then TTL removes them.
OPERATION_RETENTION_SECONDS = 7 * 24 * 3600


@dataclass
class InstanceRecord:
    """An instance item: envelope ``document`` and its workflow attributes (GPUs, GiB)."""

    key: ResourceKey
    document: dict[str, Any]
    etag: str
    state: str
    operation_id: str | None
    delete_operation_id: str | None
    spec_hash: str
    gpus: int
    memory_gb: int
    capacity_reserved: bool
    cancel_requested: bool
    dgx_instance_id: str | None
    location: str

    @property
    def node_key(self) -> ResourceKey:
        """Key of the parent node."""
        return self.key.parent()


class WorkloadStore(DynamoStore):
    """:class:`DynamoStore` plus instance/operation items and capacity updates."""

    # ----------------------------------------------------------------------------------------------- instances
    def get_instance(self, key: ResourceKey) -> InstanceRecord | None:
        """One consistent ``GetItem``."""
        response = self._db.get_item(
            TableName=self._table, Key=_typed({"PK": key.pk, "SK": key.sk}), ConsistentRead=True
        )
        item = response.get("Item")
        return self._instance(key, _plain(item)) if item else None

    @staticmethod
    def _instance(key: ResourceKey, item: dict[str, Any]) -> InstanceRecord:
        return InstanceRecord(
            key=key,
            document=json.loads(item["doc"]),
            etag=item["etag"],
            state=item["provisioningState"],
            operation_id=item.get("operationId"),
            delete_operation_id=item.get("deleteOperationId"),
            spec_hash=item.get("specHash", ""),
            gpus=int(item.get("gpus", 0)),
            memory_gb=int(item.get("memoryGb", 0)),
            capacity_reserved=bool(item.get("capacityReserved", False)),
            cancel_requested=bool(item.get("cancelRequested", False)),
            dgx_instance_id=item.get("dgxInstanceId"),
            location=item.get("location", ""),
        )

    def instance_put(self, record: InstanceRecord, *, replacing_etag: str | None) -> dict[str, Any]:
        """Transaction item: write the whole instance item. New (``replacing_etag`` None) → must not exist;
        otherwise the stored etag must still be ``replacing_etag``."""
        item = self._resource_item(ResourceWrite(record.key, record.document, record.etag))
        item.update(
            {
                "provisioningState": record.state,
                "specHash": record.spec_hash,
                "gpus": record.gpus,
                "memoryGb": record.memory_gb,
                "capacityReserved": record.capacity_reserved,
                "cancelRequested": record.cancel_requested,
                "location": record.location,
            }
        )
        for attr, value in (("operationId", record.operation_id), ("dgxInstanceId", record.dgx_instance_id)):
            if value:
                item[attr] = value
        put: dict[str, Any] = {
            "TableName": self._table,
            "Item": _typed(item),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if replacing_etag is None:
            put["ConditionExpression"] = "attribute_not_exists(PK)"
        else:
            put["ConditionExpression"] = "etag = :expected"
            put["ExpressionAttributeValues"] = _typed({":expected": replacing_etag})
        return {"Put": put}

    def instance_update(
        self,
        key: ResourceKey,
        *,
        set_values: dict[str, Any],
        remove: tuple[str, ...] = (),
        condition: str,
        condition_values: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Transaction item: ``SET`` attributes (a ``document`` value is stored as the JSON envelope) if
        ``condition`` holds (attribute names in it are written plainly, values as ``:name``)."""
        values = dict(set_values)
        if "document" in values:
            values["doc"] = to_json(values.pop("document"))
        names = {f"#s{i}": k for i, k in enumerate(values)}
        expression = "SET " + ", ".join(f"#s{i} = :s{i}" for i in range(len(values)))
        if remove:
            expression += " REMOVE " + ", ".join(remove)
        return {
            "Update": {
                "TableName": self._table,
                "Key": _typed({"PK": key.pk, "SK": key.sk}),
                "UpdateExpression": expression,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": _typed(
                    {**{f":s{i}": v for i, v in enumerate(values.values())}, **(condition_values or {})}
                ),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def instance_delete(self, key: ResourceKey, *, condition: str, condition_values: dict[str, Any]) -> dict[str, Any]:
        """Transaction item: remove the instance item if ``condition`` holds."""
        return {
            "Delete": {
                "TableName": self._table,
                "Key": _typed({"PK": key.pk, "SK": key.sk}),
                "ConditionExpression": condition,
                "ExpressionAttributeValues": _typed(condition_values),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    # ----------------------------------------------------------------------------------------------- capacity
    def node_reserve(
        self, node_key: ResourceKey, *, gpus: int, memory_gb: int, totals: dict[str, int], new_child: bool
    ) -> dict[str, Any]:
        """Transaction item: reserve ``gpus``/``memory_gb`` on an ``Available`` node whose totals are still
        ``totals`` (``gpuTotal``, ``memoryGbTotal`` as read), without exceeding them."""
        add = "gpuAllocated :g, memoryGbAllocated :m" + (f", {CHILD_COUNT} :one" if new_child else "")
        return {
            "Update": {
                "TableName": self._table,
                "Key": _typed({"PK": node_key.pk, "SK": node_key.sk}),
                "UpdateExpression": f"ADD {add}",
                "ConditionExpression": (
                    "attribute_exists(PK) AND availability = :available AND gpuTotal = :gt AND memoryGbTotal = :mt "
                    "AND gpuAllocated <= :gmax AND memoryGbAllocated <= :mmax"
                ),
                "ExpressionAttributeValues": _typed(
                    {
                        ":g": gpus,
                        ":m": memory_gb,
                        ":available": "Available",
                        ":gt": totals["gpuTotal"],
                        ":mt": totals["memoryGbTotal"],
                        ":gmax": totals["gpuTotal"] - gpus,
                        ":mmax": totals["memoryGbTotal"] - memory_gb,
                        **({":one": 1} if new_child else {}),
                    }
                ),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def node_release(self, node_key: ResourceKey, *, gpus: int, memory_gb: int, remove_child: bool) -> dict[str, Any]:
        """Transaction item: give back a reservation (and/or a child count) to the node."""
        add = "gpuAllocated :g, memoryGbAllocated :m" + (f", {CHILD_COUNT} :minus_one" if remove_child else "")
        return {
            "Update": {
                "TableName": self._table,
                "Key": _typed({"PK": node_key.pk, "SK": node_key.sk}),
                "UpdateExpression": f"ADD {add}",
                "ConditionExpression": "attribute_exists(PK)",
                "ExpressionAttributeValues": _typed(
                    {":g": -gpus, ":m": -memory_gb, **({":minus_one": -1} if remove_child else {})}
                ),
            }
        }

    # ----------------------------------------------------------------------------------------------- operations
    def operation_put(
        self, subscription_id: str, resource_group: str, operation: dict[str, Any], *, kind: str
    ) -> dict[str, Any]:
        """Transaction item: a new operation status item (``operation`` is the ARM operation status body;
        ``kind`` says what its result is: ``provision`` → the resource, ``deprovision`` → nothing)."""
        item = {
            "kind": kind,
            "PK": keys.subscription_pk(subscription_id),
            "SK": keys.operation_sk(operation["name"]),
            "entityType": "OperationStatus",
            "rgKey": resource_group.lower(),
            "status": operation["status"],
            "doc": to_json(operation),
            "ttl": int(time.time()) + OPERATION_RETENTION_SECONDS,
        }
        return {
            "Put": {"TableName": self._table, "Item": _typed(item), "ConditionExpression": "attribute_not_exists(PK)"}
        }

    def operation_update(self, subscription_id: str, operation: dict[str, Any]) -> dict[str, Any]:
        """Transaction item: replace an operation's status body unless it is already final."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": _typed(
                    {"PK": keys.subscription_pk(subscription_id), "SK": keys.operation_sk(operation["name"])}
                ),
                "UpdateExpression": "SET #st = :status, doc = :doc",
                "ConditionExpression": "attribute_exists(PK) AND NOT #st IN (:ok, :failed, :canceled)",
                "ExpressionAttributeNames": {"#st": "status"},
                "ExpressionAttributeValues": _typed(
                    {
                        ":status": operation["status"],
                        ":doc": to_json(operation),
                        ":ok": "Succeeded",
                        ":failed": "Failed",
                        ":canceled": "Canceled",
                    }
                ),
            }
        }

    def get_operation(self, subscription_id: str, operation_id: str) -> tuple[dict[str, Any], str, str] | None:
        """``(operation status body, resource group key, kind)`` or None. One ``GetItem``."""
        response = self._db.get_item(
            TableName=self._table,
            Key=_typed({"PK": keys.subscription_pk(subscription_id), "SK": keys.operation_sk(operation_id)}),
            ConsistentRead=True,
        )
        item = response.get("Item")
        if not item:
            return None
        plain = _plain(item)
        return json.loads(plain["doc"]), plain["rgKey"], plain.get("kind", "")

    def get_instance_and_node(self, key: ResourceKey) -> tuple[InstanceRecord | None, Any]:
        """The instance and its parent node in one ``BatchGetItem`` (consistent reads)."""
        node_key = key.parent()
        wanted = [{"PK": key.pk, "SK": key.sk}, {"PK": node_key.pk, "SK": node_key.sk}]
        response = self._db.batch_get_item(
            RequestItems={self._table: {"Keys": [_typed(k) for k in wanted], "ConsistentRead": True}}
        )
        found = {(i["PK"]["S"], i["SK"]["S"]): _plain(i) for i in response.get("Responses", {}).get(self._table, [])}
        unprocessed = response.get("UnprocessedKeys", {}).get(self._table, {}).get("Keys", [])
        if unprocessed:  # rare (throttling): fall back to point reads
            instance = self.get_instance(key)
            return instance, self.get_resource(node_key)
        instance_item = found.get((key.pk, key.sk))
        node_item = found.get((node_key.pk, node_key.sk))
        instance = self._instance(key, instance_item) if instance_item else None
        node = self._resource_from_item(node_key, node_item) if node_item else None
        return instance, node
