"""sparkNodes routes (ARM paths; the seed's POST-to-collection form too). Thin: parse, call the service, render."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body, Query, Request
from fastapi.responses import Response

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
from itl_accelerator.api.responses import empty, errors, page_response, resource_response
from itl_accelerator.api.routing import ArmRoute, DeferredRouter, requires
from itl_accelerator.auth import rbac
from itl_accelerator.models.common import Page
from itl_accelerator.models.nodes import SparkNode, SparkNodeCreate, SparkNodePatch, SparkNodeWrite

#: ``?force=true``: a change that takes the node out of service ends the capacity reservations booked on it (billed
#: only for what they served) instead of being refused with 409 ``NodeReserved``.
Force = Annotated[
    bool,
    Query(
        description="End the capacity reservations booked on the node that the change would break (billed only for "
        "what they served), instead of 409 NodeReserved."
    ),
]

router = DeferredRouter(tags=["sparkNodes"], route_class=ArmRoute)

RG_COLLECTION = paths.NODES
SUB_COLLECTION = paths.NODES_OF_SUBSCRIPTION
ITEM = paths.NODE


PATCH_EXAMPLE = {
    "properties": {"pricing": {"pricePerGpuHour": 2.75}, "availability": "Cordoned"},
    "tags": {"env": "prod"},
}


@router.post(
    RG_COLLECTION,
    operation_id="SparkNodes_Create",
    openapi_extra=requires(rbac.NODES_WRITE),
    status_code=201,
    response_model=SparkNode,
    responses=errors(
        e.AuthorizationFailed,
        e.ResourceNotFound,
        e.Conflict,
        e.ReadOnlyDisabledSubscription,
        e.SubscriptionNotRegistered,
    ),
    summary="Register a node (ITL form: name in the body); 409 when the name exists.",
)
def create(
    subscriptionId: str,
    resourceGroupName: str,
    body: SparkNodeCreate,
    ctx: ContextDep,
    c: WiringDep,
    api_version: ApiVersion = None,
) -> Any:
    return resource_response(c.nodes.create(ctx, subscriptionId, resourceGroupName, body), 201)


@router.put(
    ITEM,
    operation_id="SparkNodes_CreateOrUpdate",
    openapi_extra=requires(rbac.NODES_WRITE, rbac.NODES_PRICING_WRITE),
    response_model=SparkNode,
    responses={
        201: {"model": SparkNode, "description": "Created."},
        **errors(
            e.AuthorizationFailed,
            e.ResourceNotFound,
            e.Conflict,
            e.SlurmNodeTaken,
            e.NodeReserved,
            e.ReadOnlyDisabledSubscription,
            e.SubscriptionNotRegistered,
            e.PreconditionFailed,
        ),
    },
    summary="Create or replace a node (ARM PUT): 201 when created, 200 when replaced.",
)
def create_or_update(
    subscriptionId: str,
    resourceGroupName: str,
    nodeName: str,
    body: SparkNodeWrite,
    ctx: ContextDep,
    c: WiringDep,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
    force: Force = False,
    api_version: ApiVersion = None,
) -> Any:
    node, created = c.nodes.put(
        ctx,
        subscriptionId,
        resourceGroupName,
        nodeName,
        body,
        if_match=if_match,
        if_none_match=if_none_match,
        force=force,
    )
    return resource_response(node, 201 if created else 200)


@router.get(
    ITEM,
    operation_id="SparkNodes_Get",
    response_model=SparkNode,
    responses=errors(e.AuthorizationFailed, e.ResourceNotFound),
)
def get(
    subscriptionId: str,
    resourceGroupName: str,
    nodeName: str,
    ctx: ContextDep,
    c: WiringDep,
    api_version: ApiVersion = None,
) -> Any:
    return resource_response(c.nodes.get(ctx, subscriptionId, resourceGroupName, nodeName))


@router.patch(
    ITEM,
    operation_id="SparkNodes_Update",
    openapi_extra=requires(rbac.NODES_WRITE, rbac.NODES_PRICING_WRITE),
    response_model=SparkNode,
    responses=errors(
        e.AuthorizationFailed,
        e.ResourceNotFound,
        e.Conflict,
        e.SlurmNodeTaken,
        e.NodeReserved,
        e.ReadOnlyDisabledSubscription,
        e.SubscriptionNotRegistered,
        e.PreconditionFailed,
    ),
    summary="Update a node: JSON merge patch of properties and sku; tags replace the whole set.",
)
def update(
    subscriptionId: str,
    resourceGroupName: str,
    nodeName: str,
    ctx: ContextDep,
    c: WiringDep,
    body: Annotated[SparkNodePatch, Body(openapi_examples={"pricing": {"value": PATCH_EXAMPLE}})],
    if_match: IfMatch = None,
    force: Force = False,
    api_version: ApiVersion = None,
) -> Any:
    node = c.nodes.patch(
        ctx, subscriptionId, resourceGroupName, nodeName, body.as_merge_patch(), if_match=if_match, force=force
    )
    return resource_response(node)


@router.delete(
    ITEM,
    operation_id="SparkNodes_Delete",
    openapi_extra=requires(rbac.NODES_DELETE),
    status_code=200,
    response_class=Response,
    responses={
        204: {"description": "The node did not exist."},
        **errors(e.AuthorizationFailed, e.ResourceNotFound, e.Conflict, e.NodeReserved, e.PreconditionFailed),
    },
    summary="Delete a node (synchronous): 200, or 204 when it did not exist; 409 while it holds allocations, or "
    "(NodeReserved) while capacity reservations not yet over are booked on it unless force=true ends them.",
)
def delete(
    subscriptionId: str,
    resourceGroupName: str,
    nodeName: str,
    ctx: ContextDep,
    c: WiringDep,
    if_match: IfMatch = None,
    force: Force = False,
    api_version: ApiVersion = None,
) -> Any:
    deleted = c.nodes.delete(ctx, subscriptionId, resourceGroupName, nodeName, if_match=if_match, force=force)
    return empty(200 if deleted else 204)


@router.get(
    RG_COLLECTION,
    operation_id="SparkNodes_ListByResourceGroup",
    response_model=Page[SparkNode],
    responses=errors(e.AuthorizationFailed),
)
def list_by_resource_group(
    request: Request,
    subscriptionId: str,
    resourceGroupName: str,
    ctx: ContextDep,
    c: WiringDep,
    top: Top = None,
    skip_token: SkipToken = None,
    api_version: ApiVersion = None,
) -> Any:
    items, token = c.nodes.list(
        ctx, subscriptionId, resourceGroupName, top=top or c.settings.default_page_size, skip_token=skip_token
    )
    return page_response(items, next_link(request, c, token, top))


@router.get(
    SUB_COLLECTION,
    operation_id="SparkNodes_ListBySubscription",
    response_model=Page[SparkNode],
    responses=errors(e.AuthorizationFailed),
)
def list_by_subscription(
    request: Request,
    subscriptionId: str,
    ctx: ContextDep,
    c: WiringDep,
    top: Top = None,
    skip_token: SkipToken = None,
    api_version: ApiVersion = None,
) -> Any:
    items, token = c.nodes.list(
        ctx, subscriptionId, None, top=top or c.settings.default_page_size, skip_token=skip_token
    )
    return page_response(items, next_link(request, c, token, top))
