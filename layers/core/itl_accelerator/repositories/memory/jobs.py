"""GPU jobs in memory: the DynamoDB implementation's ``DynamoJobRepository`` (repositories/dynamodb/jobs.py) — by
submitter (GSI3), by the owner of the node they are placed on (GSI4), and the queue of those waiting for capacity
(GSI4 ``PENDING``, ordered by ``{9 - priority}#{submittedAt}#{rg}#{name}``). The shared workload machinery is
workloads.py."""

from __future__ import annotations

from itl_accelerator.domain.records import Job, Operation, ResourceKey
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.memory.state import MemoryState, sort_key
from itl_accelerator.repositories.memory.workloads import WorkloadTable, listed_key
from itl_accelerator.repositories.protocols import Effects, Expect, Page, Scope

TYPE = "sparkJobs"


def pending_sort_key(job: Job) -> str:
    """Where a waiting job is in its queue: higher priority first, then earlier submission, then its key."""
    return "#".join([str(9 - job.priority), job.submitted_at, sort_key(job.key)])


class MemoryJobRepository:
    """:class:`~itl_accelerator.repositories.protocols.JobRepository` in memory."""

    def __init__(self, state: MemoryState):
        self._s = state
        self._w = WorkloadTable(state, Job)

    def get(self, key: ResourceKey) -> Job | None:
        return self._w.get(key)

    def page(
        self,
        scope: Scope,
        limit: int,
        token: str | None,
        *,
        submitted_by: str | None = None,
        node_owner: str | None = None,
    ) -> Page[Job]:
        """All jobs of ``scope``, or those ``submitted_by`` one user (exact id), or else those placed on the nodes of
        ``node_owner`` (exact id) — each its own list for tokens."""
        if submitted_by is not None:
            user = submitted_by
            return self._w.page(scope, f"jobs|by:{user}", limit, token, keep=lambda j: j.submitted_by == user)
        if node_owner is not None:
            owner = node_owner
            return self._w.page(scope, f"jobs|owner:{owner}", limit, token, keep=lambda j: j.node_owner == owner)
        return self._w.page(scope, "jobs", limit, token)

    def submit(self, job: Job, operation: Operation, audit: AuditEvent) -> None:
        self._w.put_new(job, operation, audit)

    def update(
        self, before: Job, after: Job, audit: AuditEvent, *, expect: Expect, effects: Effects = Effects()
    ) -> None:
        self._w.update(before, after, audit, expect, effects)

    def remove(self, job: Job, audit: AuditEvent, *, expect: Expect) -> None:
        self._w.remove(job, audit, expect, Effects())

    def note(self, before: Job, after: Job, *, expect: Expect) -> bool:
        return self._w.note(before, after, expect)

    def preemptible(self, subscription_id: str, kind: str, below_priority: int, limit: int) -> list[Job]:
        """The first ``limit`` preemption candidates of the subscription and kind below ``below_priority``."""
        with self._s.lock:
            subscription = subscription_id.lower()
            found = sorted(
                (
                    w
                    for k, w in self._s.workloads.items()
                    if k[0] == subscription
                    and isinstance(w, Job)
                    and w.preemption_candidate
                    and w.kind.lower() == kind.lower()
                    and w.priority < below_priority
                ),
                key=lambda w: w.preemption_order,
            )
        return [j for j in (self.get(w.key) for w in found[:limit]) if j is not None]

    def waiting(self, subscription_id: str, limit: int) -> list[ResourceKey]:
        """The first ``limit`` jobs of the subscription's queue (waiting, with no node owner)."""
        with self._s.lock:
            subscription = subscription_id.lower()
            queued = sorted(
                (
                    (pending_sort_key(w), listed_key(w, subscription_id))
                    for k, w in self._s.workloads.items()
                    if k[0] == subscription and isinstance(w, Job) and w.queued
                ),
                key=lambda entry: entry[0],
            )
            return [key for _, key in queued[:limit]]
