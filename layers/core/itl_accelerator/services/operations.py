"""Long-running operations: status resources (Azure-AsyncOperation) and results (Location).

Rules: ARM_CONTRACT.md 11-18 — status always 200 with ``status`` ending in ``Succeeded``, ``Failed`` or
``Canceled`` (``error`` on Failed), kept at least 24 h; the Location URL answers 202 while running and, when done,
what the synchronous call would have returned; an operation of another subscription, or unknown, is 404.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.arm import normalize_location, parse_resource_id, validate_subscription_id
from itl_accelerator.auth import rbac
from itl_accelerator.errors import ResourceNotFound
from itl_accelerator.resources import RESOURCE_TYPES
from itl_accelerator.services.access import Access
from itl_accelerator.services.context import CallContext
from itl_accelerator.services.job_access import render_job, visible_to
from itl_accelerator.services.kernel import with_etag
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.workloads import FINAL_OPERATION_STATUSES, StoredOperation, WorkloadStore


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


FINAL_STATUSES = FINAL_OPERATION_STATUSES
_OPERATION_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")


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
    ctx: CallContext, *, subscription_id: str, location: str, operation_id: str, resource_id: str
) -> dict[str, Any]:
    """A fresh operation status body: ``Accepted``, started now."""
    return {
        "id": operation_status_path(subscription_id, location, operation_id),
        "name": operation_id,
        "status": "Accepted",
        "startTime": ctx.now_iso(),
        "percentComplete": 0.0,
        "resourceId": resource_id,
    }


def finished(
    operation: dict[str, Any], status: str, now_iso: str, error: dict[str, str] | None = None
) -> dict[str, Any]:
    """The operation body moved to a final (or running) ``status``, with ``endTime`` and ``error`` when final."""
    updated = {**operation, "status": status}
    if status in FINAL_STATUSES:
        updated["endTime"] = now_iso
        updated["percentComplete"] = 100.0
    if error:
        updated["error"] = error
    return updated


#: Operation kinds that belong to a job (its submission and its cancels); the others belong to an instance.
JOB_KINDS = ("job", "cancel")


class OperationService:
    """Reads operation status items, with the permission of the resource each belongs to (ARM: an operation is
    read by whoever may read its resource): an instance's operations by whoever may read the instance; a job's by
    whoever may see the job (services/job_access.py) — and, once the job is gone, by its submitter and admins. For
    anyone else an operation is exactly as missing as an unknown id: 404, the refusal audited."""

    def __init__(self, store: WorkloadStore, access: Access):
        self._store = store
        self._access = access

    def get(
        self, ctx: CallContext, subscription_id: str, location: str, operation_id: str
    ) -> tuple[dict[str, Any], str]:
        """``(operation status body, kind)``. 404 when unknown, of another location, or not the caller's to read
        (outside its scopes, or on a resource it may not see): neither existence nor resource group is revealed."""
        validate_subscription_id(subscription_id)
        missing = ResourceNotFound(f"The operation '{operation_id}' was not found.")
        if not _OPERATION_ID.match(operation_id) or not ctx.principal.can_see(subscription_id, None):
            raise missing
        found = self._store.get_operation(subscription_id, operation_id)
        if found is None or f"/locations/{normalize_location(location)}/" not in found.body["id"]:
            raise missing
        target = {
            "subscription_id": subscription_id,
            "resource_group": found.rg_key,
            "resource_id": found.body["id"],
            "resource_type": f"{PROVIDER_NAMESPACE}/locations/operationStatuses",
            "resource_name": operation_id,
            "missing": missing,
        }
        read = rbac.JOBS_READ if found.kind in JOB_KINDS else rbac.INSTANCES_READ
        for action in (rbac.OPERATIONS_READ, read):
            self._access.require_hidden(ctx, action, **target)
        if found.kind in JOB_KINDS and not self._job_visible(ctx, subscription_id, operation_id, found):
            self._access.refuse_hidden(ctx, rbac.JOBS_READ, **target)
        return found.body, found.kind

    def _job_visible(self, ctx: CallContext, subscription_id: str, operation_id: str, found: StoredOperation) -> bool:
        """Whether the caller may see the job this operation belongs to: the job as it is now when the operation is
        still its own (a supplier sees the jobs on its nodes), else — the job deleted, its name reused — only its
        submitter and admins."""
        principal = ctx.principal
        if rbac.ROLE_ADMIN in principal.roles or (found.owner is not None and found.owner == principal.subject):
            return True
        key = self._resource_key(subscription_id, found.body)
        record = self._store.get_workload(key) if key is not None else None
        ours = record is not None and operation_id.lower() in {
            str(record.operation_id).lower(),
            str(record.extra.get("cancelOperationId", "")).lower(),
        }
        return record is not None and ours and visible_to(principal, record)

    @staticmethod
    def _resource_key(subscription_id: str, operation: dict[str, Any]) -> ResourceKey | None:
        parsed = parse_resource_id(operation.get("resourceId") or "")
        if parsed is None or parsed[0].lower() != subscription_id.lower():
            return None
        _, resource_group, segments = parsed
        rtype = RESOURCE_TYPES.get(segments[-1][0])
        if rtype is None or [t.segment for t in rtype.lineage] != [t for t, _ in segments]:
            return None
        return ResourceKey(subscription_id, resource_group, rtype.segment, tuple(n for _, n in segments))

    def resource_of(self, ctx: CallContext, subscription_id: str, operation: dict[str, Any]) -> dict[str, Any] | None:
        """The current representation of the operation's resource (an instance, or a job as the caller may see it:
        its workload masked for that viewer), or None when it is gone."""
        key = self._resource_key(subscription_id, operation)
        record = self._store.get_workload(key) if key is not None else None
        if record is None:
            return None
        if key is not None and key.type_segment == "sparkJobs":
            return render_job(record, ctx.principal) if visible_to(ctx.principal, record) else None
        return with_etag(record.document, record.etag)
