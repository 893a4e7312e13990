"""Ollama instances in memory, under their node: the DynamoDB implementation's ``DynamoInstanceRepository``
(repositories/dynamodb/instances.py); the shared workload machinery is workloads.py."""

from __future__ import annotations

from itl_accelerator.domain.records import Instance, Node, Operation, Reservation, ResourceKey
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.memory import nodes as node_items
from itl_accelerator.repositories.memory.state import MemoryState, fold
from itl_accelerator.repositories.memory.workloads import WorkloadTable
from itl_accelerator.repositories.protocols import Page, Scope


class MemoryInstanceRepository(WorkloadTable[Instance]):
    """:class:`~itl_accelerator.repositories.protocols.InstanceRepository` in memory: the workload table of
    instances (``get``, ``update``, ``remove``, ``note`` are its own), listed under their node."""

    def __init__(self, state: MemoryState):
        super().__init__(state, Instance)

    def get_with_node(self, key: ResourceKey) -> tuple[Instance | None, Node | None]:
        """The instance and its node (``key.parent()``), read together under the lock."""
        parent = key.parent()
        with self._s.lock:
            stored_node = self._s.nodes.get(fold(parent))
            return self.get(key), node_items.present(stored_node.node, parent) if stored_node else None

    def page(self, node: ResourceKey, limit: int, token: str | None) -> Page[Instance]:
        """The instances of ``node`` (a list of its own: a token of another node's list is refused)."""
        scope = Scope(node.subscription_id, node.resource_group)
        list_id = f"instances|{'#'.join(n.lower() for n in node.names)}"
        return self.listed(scope, list_id, limit, token, parent=node)

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
