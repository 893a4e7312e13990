"""The store's typed failures. Services map them to ARM errors by type — never by position or message."""

from __future__ import annotations

from typing import Any


class StoreError(Exception):
    """Base of the store's typed failures."""


class ItemExists(StoreError):
    """A create found the key taken."""


class ItemMissing(StoreError):
    """The item to replace or delete is gone."""


class EtagMismatch(StoreError):
    """The item changed since it was read (optimistic concurrency)."""


class CapacityInUse(StoreError):
    """The write would leave allocations above capacity, or delete a node holding allocations or children.
    ``allocated``: ``gpuAllocated``, ``memoryGbAllocated`` (GPUs, GiB) and ``childCount`` as stored."""

    def __init__(self, allocated: dict[str, int]):
        super().__init__(f"allocated: {allocated}")
        self.allocated = allocated


class SubscriptionNotWritable(StoreError):
    """The subscription's registration state (``state``) forbids writes."""

    def __init__(self, state: str):
        super().__init__(state)
        self.state = state


class WorkloadChanged(StoreError):
    """A workload (instance, job) or its operation was not in the state a transition expected: another request or
    workflow step got there first. ``current`` is the workload item as it was (``{}`` when it is gone)."""

    def __init__(self, current: dict[str, Any]):
        super().__init__("workload changed")
        self.current = current


class NodeMissing(StoreError):
    """The node a reservation names does not exist."""


class NodeUnavailable(StoreError):
    """The node is not ``Available`` (``availability``: Cordoned, Maintenance, Offline)."""

    def __init__(self, availability: str):
        super().__init__(availability)
        self.availability = availability


class NodeChanged(StoreError):
    """The node was written (its pricing, availability, shape or owner) since the reservation read it: read it again
    and reserve on what is in force now, so the billing terms a reservation locks are never stale."""


class CapacityShortfall(StoreError):
    """The node cannot hold the reservation: ``free_gpus`` GPUs and ``free_memory_gb`` GiB are free (as stored at
    the moment of the refusal)."""

    def __init__(self, free_gpus: int, free_memory_gb: int):
        super().__init__(f"free: {free_gpus} GPUs, {free_memory_gb} GiB")
        self.free_gpus = free_gpus
        self.free_memory_gb = free_memory_gb


class TransactionFailed(StoreError):
    """A transaction was cancelled by conditions: ``failed`` maps item position → the item as it was ({} if
    absent). Only the store reads positions; it raises the typed errors above."""

    def __init__(self, failed: dict[int, dict[str, Any]]):
        super().__init__(f"conditions failed at {sorted(failed)}")
        self.failed = failed


class StoreBusy(StoreError):
    """DynamoDB refused the write for now (a conflicting concurrent transaction, throttling): nothing was written,
    the same request may be retried. Step Functions retries it by this name."""


class InvalidSkipToken(StoreError):
    """A ``$skipToken`` that this store did not issue for this list."""


class ItemTooLarge(StoreError):
    """A write would make an item larger than DynamoDB allows (``codec.MAX_ITEM_BYTES``): refused before anything
    is sent, so nothing is written. ``size`` is the estimate in bytes."""

    def __init__(self, size: int):
        super().__init__(f"item of {size} bytes")
        self.size = size
