"""Operations and the lease index in memory: the DynamoDB implementation's ``DynamoOperationRepository`` and
``DynamoLeaseIndex`` (repositories/dynamodb/operations.py). Operations start and move on in the workloads'
transactions (workloads.py); here they are read and finished on their own."""

from __future__ import annotations

import copy

from itl_accelerator.domain.records import Operation, ResourceKey
from itl_accelerator.domain.states import LeaseKind
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.leases import LastRead, LeaseRead
from itl_accelerator.repositories.memory.state import MemoryState
from itl_accelerator.repositories.memory.workloads import move_operation, operation_key, operation_moves
from itl_accelerator.repositories.protocols import Page


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
    """:class:`~itl_accelerator.repositories.protocols.LeaseIndex` in memory, read exactly as the DynamoDB index is
    (repositories/leases.py): each workload's lease in the partition its key hashes to, sorted by the index's own sort
    key (``{leaseUntil:012d}#{PK}#{SK}``, a lease ending on a whole second before ``now``'s), a page a fair share of
    each partition not read to its end. Keys come back as the index gives them: the subscription lower-cased,
    resource group and names as stored."""

    def __init__(self, state: MemoryState):
        self._s = state

    def expired(
        self, now: float, limit: int, kind: LeaseKind = LeaseKind.LEASE, token: str | None = None
    ) -> Page[ResourceKey]:
        read = LeaseRead.decode(token)
        with self._s.lock:
            shards: dict[int, list[tuple[LastRead, ResourceKey]]] = {}
            for key, w in self._s.workloads.items():
                if w.lease is None or w.lease.kind != kind or int(w.lease.until) >= int(now):
                    continue
                pk, sk = keys.resource_pk(w.key), keys.resource_sk(w.key)
                resource = ResourceKey(key[0], w.key.resource_group, w.key.type_segment, w.key.names)
                entry = ((pk, sk, keys.lease_sort_key(pk, sk, int(w.lease.until))), resource)
                shards.setdefault(keys.lease_shard(pk, sk), []).append(entry)
        found: list[ResourceKey] = []
        for shard, share in read.shares(limit):
            entries = sorted(shards.get(shard, []), key=lambda e: e[0][2])
            after = read.after.get(shard)
            if after is not None:
                entries = [e for e in entries if e[0][2] > after[2]]
            page = entries[:share]
            found += [resource for _, resource in page]
            # as DynamoDB: a query that filled its Limit says where it stopped, even when nothing follows
            read = read.advanced(shard, page[-1][0] if len(page) == share else None)
        return Page(found, read.encode())
