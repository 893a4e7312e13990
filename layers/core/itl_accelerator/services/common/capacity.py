"""Capacity arithmetic of nodes, in one place: accelerator devices of the node's one kind and their memory (GiB),
total, allocated and free (stored and shown under the GPU names of old: ``gpuTotal``, ``totalGpus``)."""

from __future__ import annotations

from dataclasses import dataclass

from itl_accelerator.domain.accelerators import GPU
from itl_accelerator.domain.records import Node
from itl_accelerator.errors import InsufficientCapacity


@dataclass(frozen=True)
class Capacity:
    """A node's capacity: totals and what its instances and jobs hold. Devices (of ``kind``) are counts; memory is
    GiB of device memory."""

    total_devices: int = 0
    allocated_devices: int = 0
    total_memory_gb: int = 0
    allocated_memory_gb: int = 0
    kind: str = GPU

    @classmethod
    def of(cls, node: Node) -> Capacity:
        """The capacity of ``node`` as read."""
        return cls(node.device_total, node.devices_allocated, node.memory_gb_total, node.memory_gb_allocated, node.kind)

    @property
    def free_devices(self) -> int:
        return self.total_devices - self.allocated_devices

    @property
    def free_memory_gb(self) -> int:
        return self.total_memory_gb - self.allocated_memory_gb

    def fits(self, devices: int, memory_gb: int) -> bool:
        """Whether ``devices`` and ``memory_gb`` are free now."""
        return devices <= self.free_devices and memory_gb <= self.free_memory_gb

    def as_properties(self) -> dict[str, int]:
        """The read-only ``properties.capacity`` of a node: its devices (``*Accelerators``) and, on a GPU node, the
        same counts under the seed's names (``*Gpus``)."""
        devices = (
            {"totalGpus": self.total_devices, "allocatedGpus": self.allocated_devices, "freeGpus": self.free_devices}
            if self.kind == GPU
            else {}
        )
        return {
            "totalAccelerators": self.total_devices,
            "allocatedAccelerators": self.allocated_devices,
            "freeAccelerators": self.free_devices,
            **devices,
            "totalMemoryGb": self.total_memory_gb,
            "allocatedMemoryGb": self.allocated_memory_gb,
            "freeMemoryGb": self.free_memory_gb,
        }


def insufficient(
    node: str, free_devices: int, free_memory_gb: int, devices: int, memory_gb: int, kind: str = GPU
) -> InsufficientCapacity:
    """409 ``InsufficientCapacity`` saying what is free on ``node`` (of its ``kind``) and what was asked."""
    return InsufficientCapacity(
        f"The node '{node}' has {free_devices} free {kind}s and {free_memory_gb} GiB free {kind} memory; "
        f"the request needs {devices} {kind}s and {memory_gb} GiB."
    )
