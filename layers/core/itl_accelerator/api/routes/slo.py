"""The SLO report route: ``GET /subscriptions/{sub}/providers/ITL.Accelerator/slo?month=YYYY-MM`` (admins holding
the whole subscription; services/api/slo_report.py). Thin: ``month`` in, the report out."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query
from fastapi.responses import JSONResponse

from itl_accelerator import errors as e
from itl_accelerator.api import paths
from itl_accelerator.api.deps import ApiVersion, ContextDep, WiringDep
from itl_accelerator.api.responses import errors
from itl_accelerator.api.routing import ArmRoute, DeferredRouter, requires
from itl_accelerator.auth import rbac
from itl_accelerator.models.slo import SloReport

router = DeferredRouter(tags=["slo"], route_class=ArmRoute)

Month = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=20,
        description="A UTC calendar month, YYYY-MM; the current month (so far) when absent.",
        examples=["2026-11"],
    ),
]


@router.get(
    paths.SUBSCRIPTION + "/slo",
    operation_id="Slo_Get",
    openapi_extra=requires(rbac.SLO_READ, scope="subscription"),
    response_model=SloReport,
    responses=errors(e.InvalidParameter, e.AuthorizationFailed, e.ResourceNotFound),
    summary="The API's SLO attainment and error budget left over a month (admins; the provider's whole API).",
)
def get(subscriptionId: str, ctx: ContextDep, c: WiringDep, month: Month = None, api_version: ApiVersion = None) -> Any:
    return JSONResponse(c.slo_report.month(month))
