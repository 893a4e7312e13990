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
