"""The repositories in memory: the same semantics as ``repositories/dynamodb`` — conditional writes, all-or-nothing
changes across repositories, the same typed errors — over one lock-protected state (state.py), for tests of the
services in milliseconds. Both implementations pass the scenario table of tests/contract."""

from __future__ import annotations

from itl_accelerator.repositories.memory.audit import MemoryAuditRepository
from itl_accelerator.repositories.memory.billing import MemoryBillingRepository
from itl_accelerator.repositories.memory.budgets import MemoryBudgetRepository
from itl_accelerator.repositories.memory.instances import MemoryInstanceRepository
from itl_accelerator.repositories.memory.jobs import MemoryJobRepository
from itl_accelerator.repositories.memory.meters import MemoryMeterRepository
from itl_accelerator.repositories.memory.nodes import MemoryNodeRepository
from itl_accelerator.repositories.memory.operations import MemoryLeaseIndex, MemoryOperationRepository
from itl_accelerator.repositories.memory.quotas import MemoryQuotaRepository
from itl_accelerator.repositories.memory.rate_limits import MemoryRateLimitRepository
from itl_accelerator.repositories.memory.reservations import MemoryCapacityReservationRepository
from itl_accelerator.repositories.memory.state import MemoryState
from itl_accelerator.repositories.memory.subscriptions import MemorySubscriptionRepository
from itl_accelerator.repositories.memory.usage import MemoryUsageRepository
from itl_accelerator.repositories.protocols import Repositories

__all__ = ["MemoryState", "memory_repositories"]


def memory_repositories(state: MemoryState | None = None) -> Repositories:
    """Every repository over one in-memory store (``state``; a new, empty one by default)."""
    state = state if state is not None else MemoryState()
    return Repositories(
        nodes=MemoryNodeRepository(state),
        instances=MemoryInstanceRepository(state),
        jobs=MemoryJobRepository(state),
        leases=MemoryLeaseIndex(state),
        quotas=MemoryQuotaRepository(state),
        budgets=MemoryBudgetRepository(state),
        reservations=MemoryCapacityReservationRepository(state),
        rate_limits=MemoryRateLimitRepository(state),
        operations=MemoryOperationRepository(state),
        audit=MemoryAuditRepository(state),
        subscriptions=MemorySubscriptionRepository(state),
        meters=MemoryMeterRepository(state),
        usage=MemoryUsageRepository(state),
        billing=MemoryBillingRepository(state),
        probe=MemoryProbe(),
    )


class MemoryProbe:
    """:class:`~itl_accelerator.repositories.protocols.StoreProbe` in memory: the store always answers."""

    def reachable(self) -> tuple[bool, str]:
        return True, ""
