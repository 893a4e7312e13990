"""Ollama instances in the table (item type ``SparkOllamaInstance``: ``SUB#{sub}`` /
``INSTANCE#{rg}#{node}#{name}``), under their node; the shared workload machinery is workloads.py."""

from __future__ import annotations

import json
from typing import Any

from itl_accelerator.domain.records import Instance, Node, Operation, Reservation, ResourceKey
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.dynamodb.listing import Lister
from itl_accelerator.repositories.dynamodb.table import Table
from itl_accelerator.repositories.dynamodb.workloads import WorkloadTable, common_attributes, common_fields
from itl_accelerator.repositories.protocols import Page, Scope

TYPE = "sparkOllamaInstances"


def instance_attributes(instance: Instance) -> dict[str, Any]:
    """The item attributes of an instance (None: absent)."""
    return {
        **common_attributes(instance),
        "deleteOperationId": instance.delete_operation_id or None,
        "compensationError": json.dumps(instance.compensation_error) if instance.compensation_error else None,
        "taskToken": instance.task_token or None,
        "readySignal": True if instance.ready_signal else None,
    }


def instance_from_item(key: ResourceKey, item: dict[str, Any]) -> Instance:
    """An instance from its item (plain values)."""
    return Instance(
        **common_fields(key, item),
        delete_operation_id=item.get("deleteOperationId"),
        compensation_error=json.loads(item["compensationError"]) if item.get("compensationError") else None,
        task_token=item.get("taskToken"),
        ready_signal=bool(item.get("readySignal", False)),
    )


class DynamoInstanceRepository(WorkloadTable[Instance]):
    """:class:`~itl_accelerator.repositories.protocols.InstanceRepository` over the table: a workload table of
    instances (``get``, ``update``, ``remove``, ``note`` are its own), listed under their node."""

    def __init__(self, table: Table):
        super().__init__(table, instance_attributes, instance_from_item)
        self._lister = Lister(table, TYPE, instance_from_item)

    def get_with_node(self, key: ResourceKey) -> tuple[Instance | None, Node | None]:
        return self.get_with(key, key.parent())

    def page(self, node: ResourceKey, limit: int, token: str | None) -> Page[Instance]:
        scope = Scope(node.subscription_id, node.resource_group)
        return self._lister.page(scope, limit, token, parent_names=node.names)

    def accept(
        self,
        instance: Instance,
        operation: Operation,
        audit: AuditEvent,
        reservation: Reservation,
        *,
        replacing: Instance | None = None,
    ) -> None:
        self.put_new(
            instance, operation, audit, reservation=reservation, replacing_etag=replacing.etag if replacing else None
        )
