"""Capacity offers route (services/api/offers.py): ``GET .../locations/{location}/offers[?resourceGroup=rg]``.
Thin: call the service, answer an ARM list."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query

from itl_accelerator import errors as e
from itl_accelerator.api import paths
from itl_accelerator.api.deps import ApiVersion, ContextDep, WiringDep
from itl_accelerator.api.responses import errors, page_response
from itl_accelerator.api.routing import ArmRoute, DeferredRouter, requires
from itl_accelerator.auth import rbac
from itl_accelerator.models.offers import OfferList
from itl_accelerator.services.api.offers import WindowAsked

router = DeferredRouter(tags=["offers"], route_class=ArmRoute)

ResourceGroup = Annotated[
    str | None,
    Query(
        alias="resourceGroup",
        max_length=90,
        description="The resource group the job would go to: the budgets covering work there decide what is allowed.",
    ),
]

#: The longest ``durationMinutes``: a job's longest ``maxDurationMinutes`` (models/jobs.py ``MAX_DURATION_MINUTES``, 30
#: days; not imported: this route's function loads no job model — tests/unit/test_cold_start_imports.py)
MAX_DURATION_MINUTES = 30 * 24 * 60

Devices = Annotated[
    int | None,
    Query(
        ge=1, le=64, description="Devices per node of the job the earliest window is asked for (with durationMinutes)."
    ),
]
DurationMinutes = Annotated[
    int | None,
    Query(
        alias="durationMinutes",
        ge=1,
        le=MAX_DURATION_MINUTES,
        description="How long that job runs (its maxDurationMinutes): each offer then says its earliestStart.",
    ),
]
Nodes = Annotated[int | None, Query(ge=1, le=16, description="Nodes of that job (a gang's; default 1).")]


@router.get(
    paths.OFFERS,
    operation_id="Offers_List",
    openapi_extra=requires(rbac.JOBS_WRITE),
    response_model=OfferList,
    responses=errors(e.InvalidParameter, e.AuthorizationFailed, e.ResourceNotFound),
    summary="What a job submitted now could get in a location, per accelerator kind and model: the largest request "
    "placed at once on one node, nodes, prices per device-hour, and what quotas and budgets allow; with devices and "
    "durationMinutes, the earliest a job of that shape and duration would start (earliestStart).",
)
def list_offers(
    subscriptionId: str,
    location: str,
    ctx: ContextDep,
    c: WiringDep,
    resource_group: ResourceGroup = None,
    devices: Devices = None,
    duration_minutes: DurationMinutes = None,
    nodes: Nodes = None,
    api_version: ApiVersion = None,
) -> Any:
    window = WindowAsked.of(devices, duration_minutes, nodes)
    return page_response(c.offers.in_location(ctx, subscriptionId, location, resource_group, window), None)
