"""The cost query route (services/api/costs.py): ``POST .../costQuery``. Thin: parse, call the service, answer."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Body
from fastapi.responses import JSONResponse

from itl_accelerator import errors as e
from itl_accelerator.api import paths
from itl_accelerator.api.deps import ApiVersion, ContextDep, WiringDep
from itl_accelerator.api.responses import errors
from itl_accelerator.api.routing import ArmRoute, DeferredRouter, requires
from itl_accelerator.auth import rbac
from itl_accelerator.models.costs import CostQuery, CostQueryResult

router = DeferredRouter(tags=["costs"], route_class=ArmRoute)

EXAMPLE = {
    "type": "ActualCost",
    "timeframe": "TheLastMonth",
    "dataset": {
        "granularity": "Daily",
        "aggregation": {"totalCost": {"name": "Cost", "function": "Sum"}},
        "grouping": [{"type": "Dimension", "name": "ResourceGroupName"}, {"type": "TagKey", "name": "team"}],
        "filter": {"dimensions": {"name": "ResourceType", "operator": "In", "values": ["ITL.Accelerator/sparkJobs"]}},
    },
}


@router.post(
    paths.COST_QUERY,
    operation_id="Costs_Query",
    openapi_extra=requires(rbac.COSTS_READ),
    response_model=CostQueryResult,
    responses=errors(e.InvalidParameter, e.AuthorizationFailed, e.ResourceNotFound),
    summary="What the subscription's work cost over a period, grouped and filtered by resource group, type, "
    "resource, submitter, node, supplier or tag — deleted resources included (consumers: their own work; "
    "suppliers: their nodes' earnings).",
)
def query(
    subscriptionId: str,
    body: Annotated[CostQuery, Body(openapi_examples={"byGroupAndTeam": {"value": EXAMPLE}})],
    ctx: ContextDep,
    c: WiringDep,
    api_version: ApiVersion = None,
) -> Any:
    return JSONResponse(c.costs.query(ctx, subscriptionId, body))
