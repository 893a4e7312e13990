"""sparkOllamaInstances routes: long-running create (seed POST → 202 with ``status_url``; ARM PUT → 201) and
delete (202), with Azure-AsyncOperation / Location / Retry-After headers; reads are synchronous."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from itl_accelerator import errors as e
from itl_accelerator.api import paths
from itl_accelerator.api.deps import (
    ApiVersion,
    ContextDep,
    IfMatch,
    IfNoneMatch,
    SkipToken,
    Top,
    WiringDep,
    next_link,
)
from itl_accelerator.api.lro import ASYNC_HEADERS, async_headers
from itl_accelerator.api.responses import empty, errors, page_response, resource_response
from itl_accelerator.api.routing import ArmRoute, DeferredRouter, requires
from itl_accelerator.auth import rbac
from itl_accelerator.models.common import Page
from itl_accelerator.models.instances import (
    AcceptedInstance,
    SparkOllamaInstance,
    SparkOllamaInstanceCreate,
    SparkOllamaInstanceWrite,
)

#: What a create can be refused with, besides the errors of every route.
CREATE_ERRORS = (
    e.AuthorizationFailed,
    e.ResourceNotFound,
    e.ParentResourceNotFound,
    e.Conflict,
    e.AnotherOperationInProgress,
    e.InsufficientCapacity,
    e.CapacityReserved,
    e.AcceleratorNotSupported,
    e.QuotaExceeded,
    e.BudgetExceeded,
    e.BudgetCurrencyMismatch,
    e.NodeNotAvailable,
    e.PropertyChangeNotAllowed,
    e.ReadOnlyDisabledSubscription,
    e.SubscriptionNotRegistered,
)

router = DeferredRouter(tags=["sparkOllamaInstances"], route_class=ArmRoute)

COLLECTION = paths.INSTANCES
ITEM = paths.INSTANCE


@router.post(
    COLLECTION,
    operation_id="SparkOllamaInstances_Create",
    openapi_extra=requires(rbac.INSTANCES_WRITE),
    status_code=202,
    response_model=AcceptedInstance,
    responses={
        202: {"headers": ASYNC_HEADERS, "description": "Accepted: provisioning started."},
        **errors(*CREATE_ERRORS),
    },
    summary="Provision an instance (ITL form: name, model, gpus, memory_gb in the body) → 202 with status_url.",
)
def create(
    request: Request,
    subscriptionId: str,
    resourceGroupName: str,
    nodeName: str,
    body: SparkOllamaInstanceCreate,
    ctx: ContextDep,
    c: WiringDep,
    api_version: ApiVersion = None,
) -> Any:
    accepted, resource = c.instances.put(
        ctx, subscriptionId, resourceGroupName, nodeName, body.name, body, create_only=True
    )
    assert accepted is not None
    headers = async_headers(request, c, subscriptionId, accepted)
    return JSONResponse(
        {**resource, "status_url": headers["Azure-AsyncOperation"]},
        status_code=202,
        headers={**headers, "ETag": resource["etag"]},
    )


@router.put(
    ITEM,
    operation_id="SparkOllamaInstances_CreateOrUpdate",
    openapi_extra=requires(rbac.INSTANCES_WRITE),
    status_code=201,
    response_model=SparkOllamaInstance,
    responses={
        201: {"headers": ASYNC_HEADERS, "description": "Created: provisioning started."},
        200: {"model": SparkOllamaInstance, "description": "Already provisioned with this spec."},
        **errors(*CREATE_ERRORS, e.PreconditionFailed),
    },
    summary="Provision an instance (ARM PUT) → 201 with provisioningState Accepted.",
)
def create_or_update(
    request: Request,
    subscriptionId: str,
    resourceGroupName: str,
    nodeName: str,
    instanceName: str,
    body: SparkOllamaInstanceWrite,
    ctx: ContextDep,
    c: WiringDep,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
    api_version: ApiVersion = None,
) -> Any:
    accepted, resource = c.instances.put(
        ctx,
        subscriptionId,
        resourceGroupName,
        nodeName,
        instanceName,
        body,
        if_match=if_match,
        if_none_match=if_none_match,
    )
    if accepted is None:
        return resource_response(resource, 200)
    status = 201 if accepted.created else 200  # ARM: an existing resource answers 200, still with the operation
    return resource_response(resource, status, async_headers(request, c, subscriptionId, accepted))


@router.get(
    ITEM,
    operation_id="SparkOllamaInstances_Get",
    response_model=SparkOllamaInstance,
    responses=errors(e.AuthorizationFailed, e.ResourceNotFound),
)
def get(
    subscriptionId: str,
    resourceGroupName: str,
    nodeName: str,
    instanceName: str,
    ctx: ContextDep,
    c: WiringDep,
    api_version: ApiVersion = None,
) -> Any:
    return resource_response(c.instances.get(ctx, subscriptionId, resourceGroupName, nodeName, instanceName))


@router.delete(
    ITEM,
    operation_id="SparkOllamaInstances_Delete",
    openapi_extra=requires(rbac.INSTANCES_DELETE),
    status_code=202,
    response_class=Response,
    responses={
        202: {"headers": ASYNC_HEADERS, "description": "Accepted: deprovisioning started."},
        204: {"description": "The instance did not exist."},
        **errors(e.AuthorizationFailed, e.ResourceNotFound, e.AnotherOperationInProgress, e.PreconditionFailed),
    },
    summary="Deprovision an instance → 202 (cancels a provisioning in progress); 204 when it does not exist.",
)
def delete(
    request: Request,
    subscriptionId: str,
    resourceGroupName: str,
    nodeName: str,
    instanceName: str,
    ctx: ContextDep,
    c: WiringDep,
    if_match: IfMatch = None,
    api_version: ApiVersion = None,
) -> Any:
    accepted = c.instances.delete(ctx, subscriptionId, resourceGroupName, nodeName, instanceName, if_match=if_match)
    if accepted is None:
        return empty(204)
    response = empty(202)
    response.headers.update(async_headers(request, c, subscriptionId, accepted))
    return response


@router.get(
    COLLECTION,
    operation_id="SparkOllamaInstances_ListByNode",
    response_model=Page[SparkOllamaInstance],
    responses=errors(e.AuthorizationFailed, e.ParentResourceNotFound),
)
def list_by_node(
    request: Request,
    subscriptionId: str,
    resourceGroupName: str,
    nodeName: str,
    ctx: ContextDep,
    c: WiringDep,
    top: Top = None,
    skip_token: SkipToken = None,
    api_version: ApiVersion = None,
) -> Any:
    items, token = c.instances.list(
        ctx, subscriptionId, resourceGroupName, nodeName, top=top or c.settings.default_page_size, skip_token=skip_token
    )
    return page_response(items, next_link(request, c, token, top))
