"""Operations and the lease index in memory: the DynamoDB implementation's ``DynamoOperationRepository`` and
``DynamoLeaseIndex`` (repositories/dynamodb/operations.py). Operations start and move on in the workloads'
transactions (workloads.py); here they are read and finished on their own."""

from __future__ import annotations

import copy

from itl_accelerator.domain.records import Operation, ResourceKey
from itl_accelerator.domain.states import LeaseKind
from itl_accelerator.repositories.memory.state import FoldKey, MemoryState
from itl_accelerator.repositories.memory.workloads import move_operation, operation_key, operation_moves


class MemoryOperationRepository:
    """:class:`~itl_accelerator.repositories.protocols.OperationRepository` in memory. Operation ids match
    case-insensitively; an operation's resource group reads back lower-cased (the table's ``rgKey``)."""

    def __init__(self, state: MemoryState):
        self._s = state

    def get(self, subscription_id: str, operation_id: str) -> Operation | None:
        with self._s.lock:
            found = self._s.operations.get(operation_key(subscription_id, operation_id))
            return copy.deepcopy(found) if found else None

    def finish(self, subscription_id: str, operation: Operation) -> bool:
        """Move ``operation`` unless it is gone or has ended (``operation_update``'s condition)."""
        with self._s.lock:
            if not operation_moves(self._s, subscription_id, operation):
                return False
            move_operation(self._s, subscription_id, operation)
            return True


class MemoryLeaseIndex:
    """:class:`~itl_accelerator.repositories.protocols.LeaseIndex` in memory: the workloads whose ``kind`` lease ends
    on a whole second before ``now``'s (the index sorts ``{leaseUntil:012d}#...`` below ``{int(now):012d}#``),
    soonest first. Keys come back as the index gives them: the subscription lower-cased, resource group and names as
    stored."""

    def __init__(self, state: MemoryState):
        self._s = state

    def expired(self, now: float, limit: int, kind: LeaseKind = LeaseKind.LEASE) -> list[ResourceKey]:
        with self._s.lock:
            found: list[tuple[int, FoldKey, ResourceKey]] = []
            for key, w in self._s.workloads.items():
                if w.lease is not None and w.lease.kind == kind and int(w.lease.until) < int(now):
                    resource = ResourceKey(key[0], w.key.resource_group, w.key.type_segment, w.key.names)
                    found.append((int(w.lease.until), key, resource))
            found.sort(key=lambda entry: (entry[0], entry[1]))
            return [resource for _, _, resource in found[:limit]]
