"""Stats routes: ``GET {instance|job|node}/stats?hours=N`` (the seed's ``?hours=24``). Thin: parse ``hours`` (1 to
720, default 24; anything else 400 ``InvalidParameter``), call services/api/usage_stats.py, return its body."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query
from fastapi.responses import JSONResponse

from itl_accelerator import errors as e
from itl_accelerator.api import paths
from itl_accelerator.api.deps import ApiVersion, ContextDep, WiringDep
from itl_accelerator.api.responses import errors
from itl_accelerator.api.routing import ArmRoute, DeferredRouter
from itl_accelerator.models.usage import UsageStats
from itl_accelerator.services.api.usage_stats import parse_hours

router = DeferredRouter(tags=["usage"], route_class=ArmRoute)

Hours = Annotated[
    str | None,
    Query(
        description="How many UTC hours, up to and including the current one: a whole number from 1 to 720.",
        examples=["24"],
    ),
]
STATS_ERRORS = errors(e.InvalidParameter, e.AuthorizationFailed, e.ResourceNotFound)


@router.get(
    paths.INSTANCE + "/stats",
    operation_id="SparkOllamaInstances_GetStats",
    response_model=UsageStats,
    responses=STATS_ERRORS,
    summary="Per-hour GPU time, utilisation, requests, tokens and cost of an instance (whoever may read it).",
)
def instance_stats(
    subscriptionId: str,
    resourceGroupName: str,
    nodeName: str,
    instanceName: str,
    ctx: ContextDep,
    c: WiringDep,
    hours: Hours = None,
    api_version: ApiVersion = None,
) -> Any:
    count = parse_hours(hours)
    return JSONResponse(c.usage_stats.instance(ctx, subscriptionId, resourceGroupName, nodeName, instanceName, count))


@router.get(
    paths.JOB + "/stats",
    operation_id="SparkJobs_GetStats",
    response_model=UsageStats,
    responses=STATS_ERRORS,
    summary="Per-hour GPU time, utilisation and cost of a job (whoever may see it: consumers, their own jobs).",
)
def job_stats(
    subscriptionId: str,
    resourceGroupName: str,
    jobName: str,
    ctx: ContextDep,
    c: WiringDep,
    hours: Hours = None,
    api_version: ApiVersion = None,
) -> Any:
    count = parse_hours(hours)
    return JSONResponse(c.usage_stats.job(ctx, subscriptionId, resourceGroupName, jobName, count))


@router.get(
    paths.NODE + "/stats",
    operation_id="SparkNodes_GetStats",
    response_model=UsageStats,
    responses=STATS_ERRORS,
    summary="Per-hour utilisation and earnings of a node: its supplier and admins only (403 for consumers).",
)
def node_stats(
    subscriptionId: str,
    resourceGroupName: str,
    nodeName: str,
    ctx: ContextDep,
    c: WiringDep,
    hours: Hours = None,
    api_version: ApiVersion = None,
) -> Any:
    count = parse_hours(hours)
    return JSONResponse(c.usage_stats.node(ctx, subscriptionId, resourceGroupName, nodeName, count))
