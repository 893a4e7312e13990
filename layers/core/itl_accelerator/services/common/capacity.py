"""Capacity arithmetic of nodes, in one place: GPUs and GPU memory (GiB), total, allocated and free."""

from __future__ import annotations

from dataclasses import dataclass

from itl_accelerator.domain.records import Node
from itl_accelerator.errors import InsufficientCapacity


@dataclass(frozen=True)
class Capacity:
    """A node's capacity: totals and what its instances and jobs hold. GPUs are counts; memory is GiB of GPU
    memory."""

    total_gpus: int = 0
    allocated_gpus: int = 0
    total_memory_gb: int = 0
    allocated_memory_gb: int = 0

    @classmethod
    def of(cls, node: Node) -> Capacity:
        """The capacity of ``node`` as read."""
        return cls(node.gpu_total, node.gpu_allocated, node.memory_gb_total, node.memory_gb_allocated)

    @property
    def free_gpus(self) -> int:
        return self.total_gpus - self.allocated_gpus

    @property
    def free_memory_gb(self) -> int:
        return self.total_memory_gb - self.allocated_memory_gb

    def fits(self, gpus: int, memory_gb: int) -> bool:
        """Whether ``gpus`` and ``memory_gb`` are free now."""
        return gpus <= self.free_gpus and memory_gb <= self.free_memory_gb

    def as_properties(self) -> dict[str, int]:
        """The read-only ``properties.capacity`` of a node."""
        return {
            "totalGpus": self.total_gpus,
            "allocatedGpus": self.allocated_gpus,
            "freeGpus": self.free_gpus,
            "totalMemoryGb": self.total_memory_gb,
            "allocatedMemoryGb": self.allocated_memory_gb,
            "freeMemoryGb": self.free_memory_gb,
        }


def insufficient(node: str, free_gpus: int, free_memory_gb: int, gpus: int, memory_gb: int) -> InsufficientCapacity:
    """409 ``InsufficientCapacity`` saying what is free on ``node`` and what was asked."""
    return InsufficientCapacity(
        f"The node '{node}' has {free_gpus} free GPUs and {free_memory_gb} GiB free GPU memory; "
        f"the request needs {gpus} GPUs and {memory_gb} GiB."
    )
