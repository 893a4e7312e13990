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
from itl_accelerator.repositories.protocols import Effects, Expect, Page, Scope

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


class DynamoInstanceRepository:
    """:class:`~itl_accelerator.repositories.protocols.InstanceRepository` over the table."""

    def __init__(self, table: Table):
        self._w = WorkloadTable(table, instance_attributes, instance_from_item)
        self._lister = Lister(table, TYPE, instance_from_item)

    def get(self, key: ResourceKey) -> Instance | None:
        found: Instance | None = self._w.get(key)
        return found

    def get_with_node(self, key: ResourceKey) -> tuple[Instance | None, Node | None]:
        return self._w.get_with_node(key, key.parent())

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
        self._w.put_new(
            instance, operation, audit, reservation=reservation, replacing_etag=replacing.etag if replacing else None
        )

    def update(
        self, before: Instance, after: Instance, audit: AuditEvent, *, expect: Expect, effects: Effects = Effects()
    ) -> None:
        self._w.update(before, after, audit, expect, effects)

    def remove(self, instance: Instance, audit: AuditEvent, *, expect: Expect, effects: Effects = Effects()) -> None:
        self._w.remove(instance, audit, expect, effects)

    def note(self, before: Instance, after: Instance, *, expect: Expect) -> bool:
        return self._w.note(before, after, expect)
