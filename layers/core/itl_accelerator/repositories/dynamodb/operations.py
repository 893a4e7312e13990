"""Operation status items (``SUB#{sub}`` / ``OP#{operationId}``; started and moved on in the workloads'
transactions, workloads.py) and the lease index GSI2 (``LEASE#{shard}`` / ``TRACK#{shard}``) the reconciler and the
job tracker read."""

from __future__ import annotations

import json
from typing import Any

from itl_accelerator.domain.records import Operation, ResourceKey
from itl_accelerator.domain.states import LeaseKind, OperationKind
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import plain, typed
from itl_accelerator.repositories.dynamodb.table import Table, TransactionFailed
from itl_accelerator.repositories.dynamodb.workloads import operation_update
from itl_accelerator.repositories.leases import LeaseRead
from itl_accelerator.repositories.protocols import Page


def operation_from_item(item: dict[str, Any]) -> Operation:
    """An operation from its item (plain values); its resource group as stored for comparison (lower case)."""
    return Operation(
        body=json.loads(item["doc"]),
        kind=OperationKind(item.get("kind") or OperationKind.PROVISION),
        resource_group=str(item.get("rgKey", "")),
        owner=item.get("owner"),
    )


class DynamoOperationRepository:
    """:class:`~itl_accelerator.repositories.protocols.OperationRepository` over the table."""

    def __init__(self, table: Table):
        self._t = table

    def get(self, subscription_id: str, operation_id: str) -> Operation | None:
        item = self._t.get_item(keys.subscription_pk(subscription_id), keys.operation_sk(operation_id))
        return operation_from_item(item) if item else None

    def finish(self, subscription_id: str, operation: Operation) -> bool:
        try:
            self._t.transact([operation_update(self._t.name, operation, subscription_id)])
        except TransactionFailed:
            return False
        return True


class DynamoLeaseIndex:
    """:class:`~itl_accelerator.repositories.protocols.LeaseIndex` over GSI2: per page, one ``Query`` of each
    partition not read to its end, for its share of the page (repositories/leases.py)."""

    def __init__(self, table: Table):
        self._t = table

    def expired(
        self, now: float, limit: int, kind: LeaseKind = LeaseKind.LEASE, token: str | None = None
    ) -> Page[ResourceKey]:
        read = LeaseRead.decode(token)
        found: list[ResourceKey] = []
        for shard, share in read.shares(limit):
            request: dict[str, Any] = {
                "TableName": self._t.name,
                "IndexName": "GSI2",
                "KeyConditionExpression": "GSI2PK = :p AND GSI2SK < :now",
                "ExpressionAttributeValues": typed({":p": f"{kind}#{shard}", ":now": f"{int(now):012d}#"}),
                "Limit": share,
            }
            after = read.after.get(shard)
            if after:
                pk, sk, gsi = after
                request["ExclusiveStartKey"] = typed({"PK": pk, "SK": sk, "GSI2PK": f"{kind}#{shard}", "GSI2SK": gsi})
            response = self._t.client.query(**request)
            items = list(map(plain, response.get("Items", [])))
            for item in items:
                subscription = str(item["PK"]).split(keys.SEP)[1]
                names = tuple(json.loads(item["names"]))
                found.append(ResourceKey(subscription, item["resourceGroup"], item["entityType"], names))
            last = response.get("LastEvaluatedKey")
            read = read.advanced(
                shard,
                (str(items[-1]["PK"]), str(items[-1]["SK"]), str(items[-1]["GSI2SK"])) if last and items else None,
            )
        return Page(found, read.encode())
