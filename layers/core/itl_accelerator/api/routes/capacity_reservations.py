"""Capacity reservation routes (services/api/reservations.py): ``.../capacityReservations[/{reservationName}]`` under
a resource group, and the subscription's list. Booking is synchronous (201 with the nodes that hold it, or 409 with
those that block it); DELETE cancels. Thin: parse, call the service, render."""

from __future__ import annotations

from typing import Any

from fastapi import Request
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
from itl_accelerator.models.reservations import CapacityReservation, CapacityReservationWrite

router = DeferredRouter(tags=["capacityReservations"], route_class=ArmRoute)

READ_ERRORS = errors(e.InvalidParameter, e.AuthorizationFailed, e.ResourceNotFound)
BOOK_ERRORS = errors(
    e.InvalidParameter,
    e.AuthorizationFailed,
    e.Conflict,
    e.InsufficientCapacity,
    e.QuotaExceeded,
    e.BudgetExceeded,
    e.BudgetCurrencyMismatch,
    e.PropertyChangeNotAllowed,
    e.PreconditionFailed,
    e.ReadOnlyDisabledSubscription,
    e.SubscriptionNotRegistered,
)


@router.get(
    paths.RESERVATION,
    operation_id="CapacityReservations_Get",
    openapi_extra=requires(rbac.RESERVATIONS_READ),
    response_model=CapacityReservation,
    responses=READ_ERRORS,
    summary="A capacity reservation: what it books, on which nodes, its window, locked price and state.",
)
def get(subscriptionId: str, resourceGroupName: str, reservationName: str, ctx: ContextDep, c: WiringDep,
        api_version: ApiVersion = None) -> Any:  # fmt: skip
    return resource_response(c.reservations.get(ctx, subscriptionId, resourceGroupName, reservationName))


@router.get(
    paths.RESERVATIONS,
    operation_id="CapacityReservations_ListByResourceGroup",
    openapi_extra=requires(rbac.RESERVATIONS_READ),
    response_model=Page[CapacityReservation],
    responses=errors(e.AuthorizationFailed),
    summary="The capacity reservations of a resource group the caller may see.",
)
def list_by_resource_group(request: Request, subscriptionId: str, resourceGroupName: str, ctx: ContextDep,
                           c: WiringDep, top: Top = None, skip_token: SkipToken = None,
                           api_version: ApiVersion = None) -> Any:  # fmt: skip
    items, token = c.reservations.in_scope(
        ctx, subscriptionId, resourceGroupName, top=top or c.settings.default_page_size, skip_token=skip_token
    )
    return page_response(items, next_link(request, c, token, top))


@router.get(
    paths.RESERVATIONS_OF_SUBSCRIPTION,
    operation_id="CapacityReservations_ListBySubscription",
    openapi_extra=requires(rbac.RESERVATIONS_READ),
    response_model=Page[CapacityReservation],
    responses=errors(e.AuthorizationFailed),
    summary="The capacity reservations of a subscription the caller may see.",
)
def list_by_subscription(request: Request, subscriptionId: str, ctx: ContextDep, c: WiringDep, top: Top = None,
                         skip_token: SkipToken = None, api_version: ApiVersion = None) -> Any:  # fmt: skip
    items, token = c.reservations.in_scope(
        ctx, subscriptionId, None, top=top or c.settings.default_page_size, skip_token=skip_token
    )
    return page_response(items, next_link(request, c, token, top))


@router.put(
    paths.RESERVATION,
    operation_id="CapacityReservations_CreateOrUpdate",
    openapi_extra=requires(rbac.RESERVATIONS_WRITE),
    response_model=CapacityReservation,
    responses={201: {"model": CapacityReservation, "description": "Booked."}, **BOOK_ERRORS},
    summary="Book devices of one kind on one node or several (a gang's) for a window on whole UTC hours, at the "
    "nodes' price locked now; billed for every hour of the window, used or not. 409 names the nodes that block it.",
)
def create_or_update(subscriptionId: str, resourceGroupName: str, reservationName: str,
                     body: CapacityReservationWrite, ctx: ContextDep, c: WiringDep, if_match: IfMatch = None,
                     if_none_match: IfNoneMatch = None, api_version: ApiVersion = None) -> Any:  # fmt: skip
    reservation, created = c.reservations.book(
        ctx, subscriptionId, resourceGroupName, reservationName, body, if_match=if_match, if_none_match=if_none_match
    )
    return resource_response(reservation, 201 if created else 200)


@router.delete(
    paths.RESERVATION,
    operation_id="CapacityReservations_Delete",
    openapi_extra=requires(rbac.RESERVATIONS_DELETE),
    status_code=200,
    response_class=Response,
    responses={
        204: {"description": "There was no such reservation."},
        **errors(e.AuthorizationFailed, e.Conflict, e.PreconditionFailed),
    },
    summary="Cancel a capacity reservation: before its window nothing is billed; once begun, the window is billed "
    "whole and its devices are free for others. 200, or 204 when there was none.",
)
def delete(subscriptionId: str, resourceGroupName: str, reservationName: str, ctx: ContextDep, c: WiringDep,
           if_match: IfMatch = None, api_version: ApiVersion = None) -> Any:  # fmt: skip
    gone = c.reservations.cancel(ctx, subscriptionId, resourceGroupName, reservationName, if_match=if_match)
    return empty(200 if gone else 204)
