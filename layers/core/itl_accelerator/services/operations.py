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
from itl_accelerator.services.kernel import with_etag
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.workloads import FINAL_OPERATION_STATUSES, WorkloadStore


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


class OperationService:
    """Reads operation status items, confined to the caller's scopes."""

    def __init__(self, store: WorkloadStore, access: Access):
        self._store = store
        self._access = access

    def get(
        self, ctx: CallContext, subscription_id: str, location: str, operation_id: str
    ) -> tuple[dict[str, Any], str]:
        """``(operation status body, kind)``. 404 when unknown, of another location, or on a resource outside the
        caller's scopes (existence not leaked)."""
        validate_subscription_id(subscription_id)
        missing = ResourceNotFound(f"The operation '{operation_id}' was not found.")
        if not _OPERATION_ID.match(operation_id) or not ctx.principal.can_see(subscription_id, None):
            raise missing
        found = self._store.get_operation(subscription_id, operation_id)
        if found is None:
            raise missing
        operation, rg_key, kind = found
        if f"/locations/{normalize_location(location)}/" not in operation["id"]:
            raise missing
        if not ctx.principal.can_see(subscription_id, rg_key):
            raise missing  # the same answer as an unknown id: neither existence nor resource group is revealed
        self._access.require(
            ctx,
            rbac.OPERATIONS_READ,
            subscription_id=subscription_id,
            resource_group=rg_key,
            resource_id=operation["id"],
            resource_type=f"{PROVIDER_NAMESPACE}/locations/operationStatuses",
            resource_name=operation_id,
        )
        return operation, kind

    def resource_of(self, ctx: CallContext, subscription_id: str, operation: dict[str, Any]) -> dict[str, Any] | None:
        """The current representation of the operation's resource (an instance or a job), or None when it is
        gone."""
        parsed = parse_resource_id(operation.get("resourceId") or "")
        if parsed is None or parsed[0].lower() != subscription_id.lower():
            return None
        _, resource_group, segments = parsed
        rtype = RESOURCE_TYPES.get(segments[-1][0])
        if rtype is None or [t.segment for t in rtype.lineage] != [t for t, _ in segments]:
            return None
        key = ResourceKey(subscription_id, resource_group, rtype.segment, tuple(n for _, n in segments))
        record = self._store.get_workload(key)
        return with_etag(record.document, record.etag) if record else None
