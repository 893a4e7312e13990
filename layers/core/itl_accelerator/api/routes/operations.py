"""Operation status (Azure-AsyncOperation) and operation result (Location) routes (ARM_CONTRACT.md 14-16)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

from itl_accelerator import errors as e
from itl_accelerator.api.deps import ApiVersion, ContextDep, WiringDep, public_base_url
from itl_accelerator.api.lro import ASYNC_HEADERS
from itl_accelerator.api.responses import empty, errors, resource_response
from itl_accelerator.api.routing import ArmRoute, DeferredRouter
from itl_accelerator.models.instances import OperationStatus, SparkOllamaInstance
from itl_accelerator.services.common.lro import operation_result_path

router = DeferredRouter(tags=["operations"], route_class=ArmRoute)

BASE = "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/locations/{location}"


@router.get(
    BASE + "/operationStatuses/{operationId}",
    operation_id="OperationStatuses_Get",
    response_model=OperationStatus,
    responses={
        200: {"headers": {"Retry-After": ASYNC_HEADERS["Retry-After"]}},
        **errors(e.AuthorizationFailed, e.ResourceNotFound),
    },
)
def get_status(
    subscriptionId: str,
    location: str,
    operationId: str,
    ctx: ContextDep,
    c: WiringDep,
    api_version: ApiVersion = None,
) -> Any:
    """Always 200 while known; ``status`` ends in Succeeded, Failed or Canceled. While it runs, ``Retry-After``
    says when to ask again (the same rule as the accepting response's: services/common/lro.py ``poll_after``)."""
    operation, kind = c.operations.get(ctx, subscriptionId, location, operationId)
    response = JSONResponse(operation)
    if operation["status"] not in ("Succeeded", "Failed", "Canceled"):
        response.headers["Retry-After"] = str(c.operations.retry_after(operation, kind))
    return response


@router.get(
    BASE + "/operationResults/{operationId}",
    operation_id="OperationResults_Get",
    response_model=SparkOllamaInstance,
    responses={
        202: {
            "description": "Still running; poll the Location header again.",
            "headers": {"Retry-After": ASYNC_HEADERS["Retry-After"]},
        },
        204: {"description": "Done: the resource was deleted."},
        **errors(e.AuthorizationFailed, e.ResourceNotFound, e.OperationFailed, e.OperationCanceled),
    },
)
def get_result(
    request: Request,
    subscriptionId: str,
    location: str,
    operationId: str,
    ctx: ContextDep,
    c: WiringDep,
    api_version: ApiVersion = None,
) -> Any:
    """202 while running; when done, what the synchronous call would have returned: the instance (200) after a
    provisioning, 204 after a delete, the operation's error otherwise."""
    operation, kind = c.operations.get(ctx, subscriptionId, location, operationId)
    status = operation["status"]
    if status not in ("Succeeded", "Failed", "Canceled"):
        response = empty(202)
        response.headers["Location"] = public_base_url(request, c.settings.public_base_url) + operation_result_path(
            subscriptionId, location, operationId
        )
        response.headers["Retry-After"] = str(c.operations.retry_after(operation, kind))
        return response
    if status == "Failed":
        raise e.OperationFailed.of(operation.get("error"))
    if status == "Canceled":
        raise e.OperationCanceled("The operation was canceled.")
    if kind == "deprovision":
        return empty(204)
    resource = c.operations.resource_of(ctx, subscriptionId, operation)
    return resource_response(resource) if resource is not None else empty(204)
