"""GPU jobs in memory: the DynamoDB implementation's ``DynamoJobRepository`` (repositories/dynamodb/jobs.py) — by
submitter (GSI3), by the owner of the node they are placed on (GSI4), and the queue of those waiting for capacity
(GSI4 ``PENDING``, ordered by ``{9 - priority}#{submittedAt}#{rg}#{name}``). The shared workload machinery is
workloads.py."""

from __future__ import annotations

from itl_accelerator.domain.records import Job, ResourceKey
from itl_accelerator.repositories.memory.state import MemoryState, sort_key
from itl_accelerator.repositories.memory.workloads import WorkloadTable, listed_key
from itl_accelerator.repositories.protocols import Page, Scope

TYPE = "sparkJobs"


def pending_sort_key(job: Job) -> str:
    """Where a waiting job is in its queue: higher priority first, then earlier submission, then its key."""
    return "#".join([str(9 - job.priority), job.submitted_at, sort_key(job.key)])


class MemoryJobRepository(WorkloadTable[Job]):
    """:class:`~itl_accelerator.repositories.protocols.JobRepository` in memory: the workload table of jobs (``get``,
    ``update``, ``remove``, ``note`` are its own), with the jobs' lists and queue."""

    def __init__(self, state: MemoryState):
        super().__init__(state, Job)

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
            return self.listed(scope, f"jobs|by:{user}", limit, token, keep=lambda j: j.submitted_by == user)
        if node_owner is not None:
            owner = node_owner
            return self.listed(scope, f"jobs|owner:{owner}", limit, token, keep=lambda j: j.node_owner == owner)
        return self.listed(scope, "jobs", limit, token)

    #: the protocol's ``submit``: a new job, with no reservation (GPUs are reserved when it is placed)
    submit = WorkloadTable.put_new

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
