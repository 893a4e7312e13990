"""The billing file route (services/api/billing_files.py): ``GET .../billingExports/{day}?$top=&$skipToken=``.
Thin: call the service, put the next page's link in the body."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import JSONResponse

from itl_accelerator import errors as e
from itl_accelerator.api import paths
from itl_accelerator.api.deps import ApiVersion, ContextDep, SkipToken, WiringDep, next_link
from itl_accelerator.api.responses import errors
from itl_accelerator.api.routing import ArmRoute, DeferredRouter, requires
from itl_accelerator.auth import rbac
from itl_accelerator.models.costs import BillingFile
from itl_accelerator.services.api.billing_files import MAX_TOP

router = DeferredRouter(tags=["costs"], route_class=ArmRoute)

#: Bill entries per page (services/api/billing_files.py MAX_TOP): an entry is an allocation-hour or a correction line.
EntriesTop = Annotated[
    int | None,
    Query(alias="$top", ge=1, le=MAX_TOP, description=f"Bill entries per page (1-{MAX_TOP}, default {MAX_TOP})."),
]


@router.get(
    paths.BILLING_EXPORT,
    operation_id="BillingExports_Get",
    openapi_extra=requires(rbac.COSTS_READ),
    response_model=BillingFile,
    responses=errors(e.InvalidParameter, e.AuthorizationFailed, e.ResourceNotFound, e.BillingExportNotFound),
    summary="A page of the subscription's FOCUS 1.2 billing file of a UTC day (YYYY-MM-DD): its rows of the day's "
    "export, as billed (consumers: their own work; suppliers: their nodes' earnings). Follow nextLink for the rest.",
)
def get(
    subscriptionId: str,
    day: str,
    request: Request,
    ctx: ContextDep,
    c: WiringDep,
    top: EntriesTop = None,
    skip_token: SkipToken = None,
    api_version: ApiVersion = None,
) -> Any:
    body, token = c.billing_files.page(ctx, subscriptionId, day, skip_token, top)
    body["properties"]["nextLink"] = next_link(request, c, token, top)
    return JSONResponse(body)
