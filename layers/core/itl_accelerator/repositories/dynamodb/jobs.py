"""Jobs in the table (item type ``SparkJob``: ``SUB#{sub}`` / ``JOB#{rg}#{name}``) and their access paths:

- one user's jobs: GSI3 (``GSI3PK = SUB#{sub}#SUBMITTER#{user}``, ``GSI3SK = {rg}#{name}``) — full pages, no filter;
- the jobs placed on one supplier's nodes: GSI4 (``GSI4PK = SUB#{sub}#NODEOWNER#{owner}``);
- the jobs waiting for capacity, in the order placement serves them: GSI4 (``GSI4PK = SUB#{sub}#PENDING``,
  ``GSI4SK = {9 - priority}#{submittedAt}#{rg}#{name}``) — a job is either waiting or placed, never both.

Indexes are eventually consistent; none decides anything: a job's state is judged by its item, a placement by the
conditional reservation on the node item. The shared workload machinery is workloads.py.
"""

from __future__ import annotations

import json
from typing import Any

from itl_accelerator.domain.accelerators import GPU, stored_kind
from itl_accelerator.domain.records import Job, ResourceKey, StartEstimate
from itl_accelerator.domain.states import JobStatus
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import plain, typed
from itl_accelerator.repositories.dynamodb.listing import IndexView, Lister, key_of
from itl_accelerator.repositories.dynamodb.table import Table
from itl_accelerator.repositories.dynamodb.workloads import WorkloadTable, common_attributes, common_fields
from itl_accelerator.repositories.protocols import Page, Scope

TYPE = "sparkJobs"


def _group_name(key: ResourceKey) -> str:
    return f"{key.resource_group.lower()}{keys.SEP}{key.name.lower()}"


def pending_sort_key(job: Job) -> str:
    """GSI4 sort key of a waiting job: higher priority first, then earlier submission (ISO times sort as text)."""
    return keys.SEP.join([str(9 - job.priority), job.submitted_at, _group_name(job.key)])


def job_attributes(job: Job) -> dict[str, Any]:
    """The item attributes of a job (None: absent), its index keys derived from its state."""
    key = job.key
    gsi4: tuple[str | None, str | None]
    if job.node_owner:
        gsi4 = (keys.node_owner_partition(key.subscription_id, job.node_owner), _group_name(key))
    elif job.queued:
        gsi4 = (keys.pending_partition(key.subscription_id), pending_sort_key(job))
    else:
        gsi4 = (None, None)
    return {
        **common_attributes(job),
        "status": str(job.status),
        "priority": job.priority,
        "submittedBy": job.submitted_by,
        "submittedAt": job.submitted_at,
        "maxDurationSeconds": job.max_duration_seconds,
        "gpuModelKey": job.gpu_model,
        # absent on a GPU job (as on every job stored before kinds existed: they are GPU jobs)
        "acceleratorKind": job.kind if job.kind != GPU else None,
        "secretEnv": json.dumps(job.secret_env, separators=(",", ":")) if job.secret_env else None,
        "taskToken": job.task_token or None,
        "trackChecks": job.track_checks or None,
        "submitting": job.submitting or None,
        "startedAt": job.started_at or None,
        "endedAt": job.ended_at or None,
        "gpuSeconds": job.gpu_seconds,
        "billableGpuSeconds": job.billable_gpu_seconds,
        "cost": job.cost,
        "canceledBy": job.canceled_by or None,
        "cancelOperationId": job.cancel_operation_id or None,
        "drainNode": f"{job.drain_node.resource_group}/{job.drain_node.name}" if job.drain_node else None,
        # when it is expected to start, while it waits (gone once it leaves Pending)
        "startEstimate": estimate_attribute(job.start_estimate) if job.status == JobStatus.PENDING else None,
        # a gang job's other nodes ("rg/name", in order), while it holds them
        "gangNodes": json.dumps([f"{n.resource_group}/{n.name}" for n in job.gang_nodes]) if job.gang_nodes else None,
        "GSI3PK": keys.submitter_partition(key.subscription_id, job.submitted_by),
        "GSI3SK": _group_name(key),
        "GSI4PK": gsi4[0],
        "GSI4SK": gsi4[1],
        # the preemption candidates (sparse: only while one)
        "GSI1PK": keys.preemptible_partition(key.subscription_id, job.kind) if job.preemption_candidate else None,
        "GSI1SK": job.preemption_order if job.preemption_candidate else None,
    }


def job_from_item(key: ResourceKey, item: dict[str, Any]) -> Job:
    """A job from its item (plain values)."""
    drain = None
    if item.get("drainNode"):
        group, _, name = str(item["drainNode"]).partition("/")
        drain = ResourceKey(key.subscription_id, group, "sparkNodes", (name,))
    gang = tuple(
        ResourceKey(key.subscription_id, group, "sparkNodes", (name,))
        for group, _, name in (str(ref).partition("/") for ref in json.loads(item.get("gangNodes") or "[]"))
    )
    return Job(
        **common_fields(key, item),
        gang_nodes=gang,
        status=JobStatus(item.get("status", JobStatus.PENDING)),
        priority=int(item.get("priority", 5)),
        submitted_by=str(item.get("submittedBy", "")),
        submitted_at=str(item.get("submittedAt", "")),
        max_duration_seconds=int(item.get("maxDurationSeconds", 0)),
        gpu_model=str(item.get("gpuModelKey", "")),
        kind=stored_kind(item.get("acceleratorKind")),
        secret_env=json.loads(item["secretEnv"]) if item.get("secretEnv") else {},
        queued=str(item.get("GSI4PK", "")).endswith(f"{keys.SEP}PENDING"),
        task_token=item.get("taskToken"),
        track_checks=int(item.get("trackChecks", 0)),
        submitting=item.get("submitting"),
        started_at=item.get("startedAt"),
        ended_at=item.get("endedAt"),
        gpu_seconds=int(item["gpuSeconds"]) if item.get("gpuSeconds") is not None else None,
        billable_gpu_seconds=int(item["billableGpuSeconds"]) if item.get("billableGpuSeconds") is not None else None,
        cost=str(item["cost"]) if item.get("cost") is not None else None,
        canceled_by=item.get("canceledBy"),
        cancel_operation_id=item.get("cancelOperationId"),
        drain_node=drain,
        start_estimate=estimate_of(item.get("startEstimate")),
    )


def estimate_attribute(estimate: StartEstimate | None) -> str | None:
    """A job's start estimate as stored (JSON: ``at``, ``position``, ``estimatedAt`` in epoch seconds, ``why``)."""
    if estimate is None:
        return None
    stored = {"at": estimate.at, "position": estimate.position, "estimatedAt": estimate.estimated_at}
    return json.dumps({**stored, **({"why": estimate.why} if estimate.why else {})}, separators=(",", ":"))


def estimate_of(value: Any) -> StartEstimate | None:
    """The start estimate a job item records (None: none, or one it cannot read)."""
    if not value:
        return None
    try:
        stored = json.loads(str(value))
        at = stored.get("at")
        return StartEstimate(
            None if at is None else int(at),
            int(stored["position"]),
            int(stored["estimatedAt"]),
            str(stored.get("why", "")),
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


class DynamoJobRepository(WorkloadTable[Job]):
    """:class:`~itl_accelerator.repositories.protocols.JobRepository` over the table: a workload table of jobs
    (``get``, ``update``, ``remove``, ``note`` are its own), with the jobs' indexes."""

    def __init__(self, table: Table):
        super().__init__(table, job_attributes, job_from_item)
        self._lister = Lister(table, TYPE, job_from_item)

    def page(
        self,
        scope: Scope,
        limit: int,
        token: str | None,
        *,
        submitted_by: str | None = None,
        node_owner: str | None = None,
    ) -> Page[Job]:
        view = None
        if submitted_by is not None:
            view = IndexView(keys.submitter_partition(scope.subscription_id, submitted_by), "GSI3PK", "GSI3SK", "GSI3")
        elif node_owner is not None:
            view = IndexView(keys.node_owner_partition(scope.subscription_id, node_owner), "GSI4PK", "GSI4SK", "GSI4")
        return self._lister.page(scope, limit, token, view=view)

    #: the protocol's ``submit``: a new job, with no reservation (GPUs are reserved when it is placed)
    submit = WorkloadTable.put_new

    def preemptible(self, subscription_id: str, kind: str, below_priority: int, limit: int) -> list[Job]:
        response = self._t.client.query(
            TableName=self._t.name,
            IndexName="GSI1",
            KeyConditionExpression="GSI1PK = :p AND GSI1SK < :below",
            ExpressionAttributeValues=typed(
                {":p": keys.preemptible_partition(subscription_id, kind), ":below": str(below_priority)}
            ),
            Limit=limit,
        )
        items = [plain(i) for i in response.get("Items", [])]
        return [job_from_item(key_of(item, subscription_id, TYPE), item) for item in items]

    def waiting(self, subscription_id: str, limit: int) -> list[ResourceKey]:
        response = self._t.client.query(
            TableName=self._t.name,
            IndexName="GSI4",
            KeyConditionExpression="GSI4PK = :p",
            ExpressionAttributeValues=typed({":p": keys.pending_partition(subscription_id)}),
            Limit=limit,
        )
        return [key_of(plain(i), subscription_id, TYPE) for i in response.get("Items", [])]
