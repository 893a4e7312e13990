"""GPU quota and usage routes (services/api/quotas.py): ``.../locations/{location}/quotas[/{quotaName}]`` and
``.../locations/{location}/usages``. Thin: parse, call the service, render."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse, Response

from itl_accelerator import errors as e
from itl_accelerator.api import paths
from itl_accelerator.api.deps import ApiVersion, ContextDep, IfMatch, WiringDep
from itl_accelerator.api.responses import empty, errors, resource_response
from itl_accelerator.api.routing import ArmRoute, DeferredRouter, requires
from itl_accelerator.auth import rbac
from itl_accelerator.models.quotas import Quota, QuotaList, QuotaWrite, UsageList

router = DeferredRouter(tags=["quotas"], route_class=ArmRoute)

READ_ERRORS = errors(e.InvalidParameter, e.AuthorizationFailed, e.ResourceNotFound)


@router.get(
    paths.QUOTA,
    operation_id="Quotas_Get",
    openapi_extra=requires(rbac.QUOTAS_READ),
    response_model=Quota,
    responses=READ_ERRORS,
    summary="A GPU quota of the subscription in a location (404 when no limit is set for it).",
)
def get(subscriptionId: str, location: str, quotaName: str, ctx: ContextDep, c: WiringDep,
        api_version: ApiVersion = None) -> Any:  # fmt: skip
    return resource_response(c.quotas.get(ctx, subscriptionId, location, quotaName))


@router.get(
    paths.QUOTAS,
    operation_id="Quotas_List",
    openapi_extra=requires(rbac.QUOTAS_READ),
    response_model=QuotaList,
    responses=READ_ERRORS,
    summary="The GPU quotas set for the subscription in a location.",
)
def list_quotas(subscriptionId: str, location: str, ctx: ContextDep, c: WiringDep,
                api_version: ApiVersion = None) -> Any:  # fmt: skip
    return JSONResponse({"value": c.quotas.in_location(ctx, subscriptionId, location)})


@router.put(
    paths.QUOTA,
    operation_id="Quotas_CreateOrUpdate",
    openapi_extra=requires(rbac.QUOTAS_WRITE, scope="subscription"),
    response_model=Quota,
    responses={
        201: {"model": Quota, "description": "Created: the quota had no limit."},
        **errors(e.InvalidParameter, e.AuthorizationFailed, e.ResourceNotFound, e.PreconditionFailed),
    },
    summary="Set a GPU quota: how many GPUs (of every model: 'gpus', or of one: 'gpus-{model}') the subscription "
    "may hold at once in the location (the provider's operators).",
)
def put(subscriptionId: str, location: str, quotaName: str, body: QuotaWrite, ctx: ContextDep, c: WiringDep,
        if_match: IfMatch = None, api_version: ApiVersion = None) -> Any:  # fmt: skip
    quota, created = c.quotas.put(ctx, subscriptionId, location, quotaName, body, if_match=if_match)
    return resource_response(quota, 201 if created else 200)


@router.delete(
    paths.QUOTA,
    operation_id="Quotas_Delete",
    openapi_extra=requires(rbac.QUOTAS_WRITE, scope="subscription"),
    status_code=200,
    response_class=Response,
    responses={
        204: {"description": "No limit was set."},
        **errors(e.InvalidParameter, e.AuthorizationFailed, e.ResourceNotFound, e.PreconditionFailed),
    },
    summary="Remove a GPU quota's limit: 200, or 204 when none was set.",
)
def delete(subscriptionId: str, location: str, quotaName: str, ctx: ContextDep, c: WiringDep,
           if_match: IfMatch = None, api_version: ApiVersion = None) -> Any:  # fmt: skip
    return empty(200 if c.quotas.delete(ctx, subscriptionId, location, quotaName, if_match=if_match) else 204)


@router.get(
    paths.USAGES,
    operation_id="Usages_List",
    openapi_extra=requires(rbac.QUOTAS_READ),
    response_model=UsageList,
    responses=READ_ERRORS,
    summary="The GPUs the subscription holds in a location against each quota ('limit' -1: none set).",
)
def usages(subscriptionId: str, location: str, ctx: ContextDep, c: WiringDep,
           api_version: ApiVersion = None) -> Any:  # fmt: skip
    return JSONResponse({"value": c.quotas.usages(ctx, subscriptionId, location)})
