"""The meter of a workload: what its usage records and its FOCUS charge lines say about the allocation, and the
billing terms it bills by — the ones it locked when it reserved its GPUs (services/api/instances.py,
services/common/placement.py), never the node's prices now (billing/metering.py)."""

from __future__ import annotations

from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.records import Job, Node, ResourceKey, Workload
from itl_accelerator.domain.retries import attempt_id
from itl_accelerator.domain.usage import Meter
from itl_accelerator.resources import NODES


def part_id(meter_id: str, part: int) -> str:
    """The meter id of a gang job's ``part`` (1-based; the first part's is the attempt's own id): each node part of
    a multi-node job is metered on its own, under the job's allocation id."""
    return meter_id if part <= 1 else f"{meter_id}.part-{part}"


def part_meter_ids(job: Job) -> list[str]:
    """The meters of a gang job's other parts while it runs (none for a job of one node)."""
    return [part_id(str(job.meter_id), k) for k in range(2, len(job.gang_nodes) + 2)] if job.meter_id else []


def locked_terms(workload: Workload) -> BillingTerms:
    """The billing terms ``workload`` locked when it reserved its GPUs. ``ValueError`` for a workload that never
    reserved any (nothing of it is billable)."""
    if workload.billing_terms is None:
        raise ValueError(f"{workload.arm_id} never locked billing terms")
    return workload.billing_terms


def meter_for(
    workload: Workload,
    node: Node | None,
    *,
    service: str,
    resource_type: str,
    start: int,
    dgx_id: str,
    attempt: int = 1,
    part: int = 1,
    where: ResourceKey | None = None,
) -> Meter:
    """The meter of a workload that starts holding GPUs at ``start`` (epoch s) on ``node`` (None when the node is
    gone: the meter then names the node by its key), billed by the terms the workload locked. Its allocation id is
    the workload's operation id, so a retried step writes the same meter; its supplier is the node's owner when the
    workload reserved its GPUs (what it earns is that supplier's). A job's later ``attempt`` (domain/retries.py) has
    its own meter, billed under the job's allocation id with its number; so has each further ``part`` of a gang job
    (on its node ``where``, earning for that node's owner), billed under the job's allocation id too."""
    where = where or workload.node_key
    meter_id = attempt_id(str(workload.operation_id), attempt)
    return Meter(
        allocation_id=part_id(meter_id, part),
        attempt=attempt,
        job_allocation_id=str(workload.operation_id) if attempt > 1 or part > 1 else "",
        subscription_id=workload.key.subscription_id,
        resource_group=workload.key.resource_group,
        resource_id=workload.arm_id,
        resource_name=str(workload.document["name"]),
        resource_type=resource_type,
        service=service,
        node_resource_group=where.resource_group,
        node_name=node.name if node else where.name,
        node_id=node.arm_id if node else NODES.id(where.subscription_id, where.resource_group, where.names),
        supplier=(workload.node_owner if part == 1 else None) or (node.owner if node else "") or "unknown",
        region=(node.location if node else workload.location) or "unknown",
        sku=node.sku_name if node else "unknown",
        gpus=workload.gpus,
        terms=locked_terms(workload),
        start=int(start),
        dgx_id=dgx_id,
        tags=dict(workload.document.get("tags") or {}),
        resource_created_at=workload.created_at,
        node_created_at=node.created_at if node else "",
        submitted_by=_submitter(workload),
        accelerator_kind=node.kind if node else getattr(workload, "kind", "GPU"),
        accelerator_model=(node.accelerator.model if node else "") or "",
    )


def _submitter(workload: Workload) -> str:
    """Who asked for the work: a job's submitter, an instance's creator (``systemData.createdBy``)."""
    if isinstance(workload, Job):
        return workload.submitted_by
    return str((workload.document.get("systemData") or {}).get("createdBy", ""))
