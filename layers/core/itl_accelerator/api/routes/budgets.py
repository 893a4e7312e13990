"""Budget routes (services/api/budgets.py): ``.../providers/ITL.Accelerator/budgets[/{budgetName}]``, in the shape
of Azure Cost Management's budgets. Thin: parse, call the service, render."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse, Response

from itl_accelerator import errors as e
from itl_accelerator.api import paths
from itl_accelerator.api.deps import ApiVersion, ContextDep, IfMatch, WiringDep
from itl_accelerator.api.responses import empty, errors, resource_response
from itl_accelerator.api.routing import ArmRoute, DeferredRouter, requires
from itl_accelerator.auth import rbac
from itl_accelerator.models.budgets import Budget, BudgetList, BudgetWrite

router = DeferredRouter(tags=["budgets"], route_class=ArmRoute)

READ_ERRORS = errors(e.InvalidParameter, e.AuthorizationFailed, e.ResourceNotFound)
WRITE_ERRORS = errors(e.InvalidParameter, e.AuthorizationFailed, e.ResourceNotFound, e.PreconditionFailed)


@router.get(
    paths.BUDGET,
    operation_id="Budgets_Get",
    openapi_extra=requires(rbac.BUDGETS_READ),
    response_model=Budget,
    responses=READ_ERRORS,
    summary="A budget of the subscription, with this month's spend and the thresholds it crossed.",
)
def get(subscriptionId: str, budgetName: str, ctx: ContextDep, c: WiringDep,
        api_version: ApiVersion = None) -> Any:  # fmt: skip
    return resource_response(c.budgets.get(ctx, subscriptionId, budgetName))


@router.get(
    paths.BUDGETS,
    operation_id="Budgets_List",
    openapi_extra=requires(rbac.BUDGETS_READ),
    response_model=BudgetList,
    responses=READ_ERRORS,
    summary="The budgets of the subscription.",
)
def list_budgets(subscriptionId: str, ctx: ContextDep, c: WiringDep,
                 api_version: ApiVersion = None) -> Any:  # fmt: skip
    return JSONResponse({"value": c.budgets.in_subscription(ctx, subscriptionId)})


@router.put(
    paths.BUDGET,
    operation_id="Budgets_CreateOrUpdate",
    openapi_extra=requires(rbac.BUDGETS_WRITE, scope="subscription"),
    response_model=Budget,
    responses={201: {"model": Budget, "description": "Created."}, **WRITE_ERRORS},
    summary="Create or replace a monthly budget: an amount in one currency over the subscription, some resource "
    "groups or a tag; notifications at thresholds (percent); at the limit, refuse new allocations or stop all "
    "(the provider's operators).",
)
def put(subscriptionId: str, budgetName: str, body: BudgetWrite, ctx: ContextDep, c: WiringDep,
        if_match: IfMatch = None, api_version: ApiVersion = None) -> Any:  # fmt: skip
    budget, created = c.budgets.put(ctx, subscriptionId, budgetName, body, if_match=if_match)
    return resource_response(budget, 201 if created else 200)


@router.delete(
    paths.BUDGET,
    operation_id="Budgets_Delete",
    openapi_extra=requires(rbac.BUDGETS_WRITE, scope="subscription"),
    status_code=200,
    response_class=Response,
    responses={204: {"description": "There was no such budget."}, **WRITE_ERRORS},
    summary="Delete a budget: 200, or 204 when there was none.",
)
def delete(subscriptionId: str, budgetName: str, ctx: ContextDep, c: WiringDep,
           if_match: IfMatch = None, api_version: ApiVersion = None) -> Any:  # fmt: skip
    return empty(200 if c.budgets.delete(ctx, subscriptionId, budgetName, if_match=if_match) else 204)
