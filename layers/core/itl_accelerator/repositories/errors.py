"""The repositories' typed failures, the same from every implementation (DynamoDB, in memory). Services map them to ARM
errors by type — never by position or message."""

from __future__ import annotations


class StoreError(Exception):
    """Base of the repositories' typed failures."""


class ItemExists(StoreError):
    """A create found the key taken."""


class ItemMissing(StoreError):
    """The item to replace or delete is gone."""


class EtagMismatch(StoreError):
    """The item changed since it was read (optimistic concurrency)."""


class CapacityInUse(StoreError):
    """The write would leave allocations above capacity, or delete a node holding allocations or instances:
    ``devices`` and ``memory_gb`` allocated (GPUs, GiB) and ``instances`` on the node, as stored."""

    def __init__(self, devices: int, memory_gb: int, instances: int):
        super().__init__(f"allocated: {devices} GPUs, {memory_gb} GiB, {instances} instances")
        self.devices = devices
        self.memory_gb = memory_gb
        self.instances = instances


class SubscriptionNotWritable(StoreError):
    """The subscription's registration state (``state``) forbids writes."""

    def __init__(self, state: str):
        super().__init__(state)
        self.state = state


class WorkloadChanged(StoreError):
    """A workload (instance, job) or its operation was not in the state a transition expected — or the name of a new
    one was taken: another request or workflow step got there first. Read it again to see how it is now."""

    def __init__(self) -> None:
        super().__init__("workload changed")


class StateMoved(StoreError):
    """A budget's state was written (an evaluation) since it was read: read it again."""


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
    """The node cannot hold the reservation: ``free_devices`` GPUs and ``free_memory_gb`` GiB are free (as stored at
    the moment of the refusal)."""

    def __init__(self, free_devices: int, free_memory_gb: int):
        super().__init__(f"free: {free_devices} GPUs, {free_memory_gb} GiB")
        self.free_devices = free_devices
        self.free_memory_gb = free_memory_gb


class QuotaExceeded(StoreError):
    """The allocation would take the subscription past a GPU quota: quota ``name`` in ``location`` allows ``limit``
    GPUs and ``current`` are held (as stored at the moment of the refusal)."""

    def __init__(self, location: str, name: str, limit: int, current: int):
        super().__init__(f"quota {name} in {location}: {current} of {limit} GPUs held")
        self.location = location
        self.name = name
        self.limit = limit
        self.current = current


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
