"""The meter of a workload: what it is billed as (billing/descriptor.py ``describe``), under the billing terms it
locked when it reserved its GPUs (services/api/instances.py, services/common/placement.py), never the node's prices
now (billing/metering.py), and the meter's id."""

from __future__ import annotations

from itl_accelerator.billing.descriptor import describe
from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.records import Job, Node, ResourceKey, Workload
from itl_accelerator.domain.retries import attempt_id
from itl_accelerator.domain.usage import Meter


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
    billed = describe(
        workload, node, service=service, resource_type=resource_type, attempt=attempt, part=part, where=where
    )
    return Meter(
        **billed.billed_fields(),
        allocation_id=part_id(attempt_id(str(workload.operation_id), attempt), part),
        terms=locked_terms(workload),
        start=int(start),
        dgx_id=dgx_id,
    )
