"""Provider-level routes: the operations list, subscription registration, and the admin audit query."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from pydantic import BaseModel

from itl_accelerator import errors as e
from itl_accelerator.api.deps import ApiVersion, ContextDep, SkipToken, Top, WiringDep, next_link
from itl_accelerator.api.responses import errors, page_response
from itl_accelerator.api.routing import ArmRoute, DeferredRouter, requires
from itl_accelerator.auth import rbac
from itl_accelerator.auth.rbac import PERMISSIONS
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.models.common import Page
from itl_accelerator.models.subscriptions import Subscription, SubscriptionWrite

router = DeferredRouter(tags=["provider"], route_class=ArmRoute)


class OperationDisplay(BaseModel):
    """Display text of one permission."""

    provider: str
    resource: str
    operation: str
    description: str


class OperationEntry(BaseModel):
    """One entry of ``GET /providers/ITL.Accelerator/operations``."""

    name: str
    isDataAction: bool
    origin: str
    display: OperationDisplay


@router.get(
    "/providers/ITL.Accelerator/operations",
    operation_id="Operations_List",
    response_model=Page[OperationEntry],
    responses=errors(),
)
def list_operations(ctx: ContextDep, api_version: ApiVersion = None) -> Any:
    """Every permission string this provider enforces, with display text (ARM_CONTRACT.md line 26)."""
    return {
        "value": [
            {
                "name": op.name,
                "isDataAction": False,
                "origin": "user,system",
                "display": {
                    "provider": "ITL Accelerator",
                    "resource": op.resource,
                    "operation": op.operation,
                    "description": op.description,
                },
            }
            for op in PERMISSIONS
        ],
        "nextLink": None,
    }


@router.put(
    "/subscriptions/{subscriptionId}",
    operation_id="Subscriptions_CreateOrUpdate",
    openapi_extra=requires(rbac.REGISTER, scope="subscription"),
    response_model=Subscription,
    responses=errors(e.AuthorizationFailed, e.ResourceNotFound),
)
def put_subscription(
    subscriptionId: str, body: SubscriptionWrite, ctx: ContextDep, c: WiringDep, api_version: ApiVersion = None
) -> Any:
    """Set the subscription's registration state (idempotent)."""
    return c.subscriptions.put(ctx, subscriptionId, body)


@router.get(
    "/subscriptions/{subscriptionId}",
    operation_id="Subscriptions_Get",
    response_model=Subscription,
    responses=errors(e.AuthorizationFailed, e.ResourceNotFound),
)
def get_subscription(subscriptionId: str, ctx: ContextDep, c: WiringDep, api_version: ApiVersion = None) -> Any:
    """The subscription's registration record."""
    return c.subscriptions.get(ctx, subscriptionId)


@router.get(
    "/subscriptions/{subscriptionId}/providers/ITL.Accelerator/auditEvents",
    operation_id="AuditEvents_List",
    response_model=Page[AuditEvent],
    responses=errors(e.AuthorizationFailed, e.ResourceNotFound),
)
def list_audit_events(
    request: Request,
    subscriptionId: str,
    ctx: ContextDep,
    c: WiringDep,
    start_time: Annotated[str | None, Query(alias="startTime", description="ISO 8601, inclusive.")] = None,
    end_time: Annotated[str | None, Query(alias="endTime", description="ISO 8601, inclusive.")] = None,
    resource_id: Annotated[str | None, Query(alias="resourceId", max_length=1024)] = None,
    actor: Annotated[
        str | None, Query(max_length=256, description="Only the events of this actorId (a subject, or SYSTEM).")
    ] = None,
    order_by: Annotated[
        str | None,
        Query(alias="$orderby", max_length=32, description="'timestamp asc' (the default) or 'timestamp desc'."),
    ] = None,
    top: Top = None,
    skip_token: SkipToken = None,
    api_version: ApiVersion = None,
) -> Any:
    """Audit events of a subscription (admins) by time range, optionally of one resource id and one actor, oldest
    first or (``$orderby=timestamp desc``) newest first."""
    events, token = c.audit.list_events(
        ctx,
        subscriptionId,
        start_time=start_time,
        end_time=end_time,
        resource_id=resource_id,
        top=top or c.settings.default_page_size,
        skip_token=skip_token,
        actor=actor,
        order_by=order_by,
    )
    return page_response([e.model_dump() for e in events], next_link(request, c, token, top))
