"""ARM long-running operations as the services start them: the Azure-AsyncOperation status body, its paths, and
what an accepted request answers (:class:`Accepted`).

Rules: ARM_CONTRACT.md 11-18 — a status body starts ``Accepted`` at 0 %, moves to ``Running``, and ends exactly once
in ``Succeeded``, ``Failed`` (with ``error``) or ``Canceled`` (``endTime``, 100 %: domain/records.py
``Operation.moved``); its Location (result) URL answers 202 while it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.arm import normalize_location
from itl_accelerator.domain.records import Operation, ResourceKey
from itl_accelerator.domain.states import OperationKind, OperationStatus
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.settings import Settings


@dataclass
class Accepted:
    """What an accepted long-running request returns: the resource, the operation id, its location, the
    Retry-After hint (seconds), and whether the resource was created by this request (ARM: PUT 201) rather than
    existing already (an identical retry, or the re-provisioning of a Failed instance: PUT 200)."""

    resource: dict[str, Any]
    operation_id: str
    location: str
    retry_after: int
    created: bool = False


#: ``Retry-After`` of a job's cancel operation (seconds): a stop on the DGX Platform takes seconds.
CANCEL_POLL_SECONDS = 2


def poll_after(kind: OperationKind, running_seconds: float, settings: Settings) -> int:
    """The ``Retry-After`` (seconds) of an operation of ``kind`` that has run ``running_seconds``, the same on the
    accepting response, its status (Azure-AsyncOperation) and its result (Location) URL — ARM RPC: a client polls
    after Retry-After, so the provider sets how often it is asked.

    An instance's provisioning or deletion takes minutes: ``INSTANCE_POLL_INTERVAL_SECONDS``. A job's operation
    ends with the job (its ``provisioningState`` is ``Running`` while it runs: docs/API_REFERENCE.md, "Jobs"), which
    may take days, so its hint grows as the job's own checks do: half the time it has run so far, from
    ``JOB_POLL_INTERVAL_SECONDS`` up to ``JOB_POLL_MAX_INTERVAL_SECONDS`` (issue 27: a fixed 30 s made 3,000 running
    jobs' pollers fill the stage's 100 requests a second). A cancel: :data:`CANCEL_POLL_SECONDS`."""
    if kind == OperationKind.CANCEL:
        return CANCEL_POLL_SECONDS
    if kind == OperationKind.JOB:
        grown = max(settings.job_poll_interval_seconds, int(max(0.0, running_seconds)) // 2)
        return min(settings.job_poll_max_interval_seconds, grown)
    return settings.instance_poll_interval_seconds


def operation_status_path(subscription_id: str, location: str, operation_id: str) -> str:
    """Path of the Azure-AsyncOperation resource."""
    return (
        f"/subscriptions/{subscription_id}/providers/{PROVIDER_NAMESPACE}/locations/{normalize_location(location)}"
        f"/operationStatuses/{operation_id}"
    )


def operation_result_path(subscription_id: str, location: str, operation_id: str) -> str:
    """Path of the Location (operation result) URL."""
    return operation_status_path(subscription_id, location, operation_id).replace(
        "/operationStatuses/", "/operationResults/"
    )


def new_operation(
    ctx: CallContext,
    key: ResourceKey,
    *,
    kind: OperationKind,
    location: str,
    operation_id: str,
    resource_id: str,
    owner: str | None = None,
) -> Operation:
    """A fresh operation of ``kind`` on the resource at ``key``: ``Accepted``, started now, 0 %. ``owner``: for a
    job's operations, the job's submitter (who may read it once the job is gone)."""
    body = {
        "id": operation_status_path(key.subscription_id, location, operation_id),
        "name": operation_id,
        "status": str(OperationStatus.ACCEPTED),
        "startTime": ctx.now_iso(),
        "percentComplete": 0.0,
        "resourceId": resource_id,
    }
    return Operation(body, kind, key.resource_group, owner)


def placeholder_operation(operation_id: str, kind: OperationKind, resource_group: str) -> Operation:
    """An operation known only by its id (its status item already expired): enough to move it on, which the
    repository refuses for an operation that is gone or has ended."""
    body = {"id": operation_id, "name": operation_id, "status": str(OperationStatus.ACCEPTED)}
    return Operation(body, kind, resource_group)
