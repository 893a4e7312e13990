"""sparkJobs routes: submit (the seed's POST → 202 with ``status_url``; ARM PUT → 201), read, list (``?submitted_by=``
as the seed), cancel (POST action → 202 with ``Location``) and delete (a finished job)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Query, Request
from fastapi.responses import JSONResponse, Response

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
from itl_accelerator.api.lro import ASYNC_HEADERS, async_headers
from itl_accelerator.api.responses import empty, errors, page_response, resource_response
from itl_accelerator.api.routing import ArmRoute, DeferredRouter, requires
from itl_accelerator.auth import rbac
from itl_accelerator.models.common import Page
from itl_accelerator.models.jobs import AcceptedJob, SparkJob, SparkJobCreate, SparkJobWrite

router = DeferredRouter(tags=["sparkJobs"], route_class=ArmRoute)

RG_COLLECTION = paths.JOBS
SUB_COLLECTION = paths.JOBS_OF_SUBSCRIPTION
ITEM = paths.JOB

SUBMIT_ERRORS = (
    e.AuthorizationFailed,
    e.ResourceNotFound,
    e.Conflict,
    e.AnotherOperationInProgress,
    e.PropertyChangeNotAllowed,
    e.BudgetExceeded,
    e.ReadOnlyDisabledSubscription,
    e.SubscriptionNotRegistered,
)
SubmittedBy = Annotated[
    str | None,
    Query(
        alias="submitted_by",
        min_length=1,
        max_length=255,
        description="Only the jobs this user (a token subject) submitted (the seed's spelling).",
    ),
]
SubmittedByCamel = Annotated[
    str | None,
    Query(
        alias="submittedBy",
        min_length=1,
        max_length=255,
        description="The same as submitted_by, in the API's camelCase; both with different values → 400.",
    ),
]


def _submitter(seed: str | None, camel: str | None) -> str | None:
    """The submitter filter, whichever spelling was used; two different values are refused (400)."""
    if seed is not None and camel is not None and seed != camel:
        raise e.InvalidParameter(
            "submitted_by and submittedBy name the same filter with different values.", target="submittedBy"
        )
    return seed if seed is not None else camel


@router.post(
    RG_COLLECTION,
    operation_id="SparkJobs_Create",
    openapi_extra=requires(rbac.JOBS_WRITE),
    status_code=202,
    response_model=AcceptedJob,
    responses={
        202: {"headers": ASYNC_HEADERS, "description": "Accepted: the job is submitted."},
        **errors(*SUBMIT_ERRORS),
    },
    summary="Submit a job (seed form: name, status Pending, requested_gpus, requested_memory_gb) → 202 with status_url.",
)
def create(
    request: Request,
    subscriptionId: str,
    resourceGroupName: str,
    body: SparkJobCreate,
    ctx: ContextDep,
    c: WiringDep,
    api_version: ApiVersion = None,
) -> Any:
    accepted, _ = c.jobs.submit(ctx, subscriptionId, resourceGroupName, body.name, body, create_only=True)
    assert accepted is not None
    headers = async_headers(request, c, subscriptionId, accepted)
    return JSONResponse(
        {**accepted.resource, "status_url": headers["Azure-AsyncOperation"]},
        status_code=202,
        headers={**headers, "ETag": accepted.resource["etag"]},
    )


@router.put(
    ITEM,
    operation_id="SparkJobs_CreateOrUpdate",
    openapi_extra=requires(rbac.JOBS_WRITE),
    status_code=201,
    response_model=SparkJob,
    responses={
        201: {"headers": ASYNC_HEADERS, "description": "Created: the job is submitted."},
        200: {"model": SparkJob, "description": "The same job was submitted already."},
        **errors(*SUBMIT_ERRORS, e.PreconditionFailed),
    },
    summary="Submit a job (ARM PUT) → 201 with provisioningState Accepted; the same job again → 200.",
)
def create_or_update(
    request: Request,
    subscriptionId: str,
    resourceGroupName: str,
    jobName: str,
    body: SparkJobWrite,
    ctx: ContextDep,
    c: WiringDep,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
    api_version: ApiVersion = None,
) -> Any:
    accepted, existing = c.jobs.submit(
        ctx, subscriptionId, resourceGroupName, jobName, body, if_match=if_match, if_none_match=if_none_match
    )
    if accepted is None:
        return resource_response(existing, 200)
    return resource_response(accepted.resource, 201, async_headers(request, c, subscriptionId, accepted))


@router.get(
    ITEM,
    operation_id="SparkJobs_Get",
    response_model=SparkJob,
    responses=errors(e.AuthorizationFailed, e.ResourceNotFound),
)
def get(
    subscriptionId: str,
    resourceGroupName: str,
    jobName: str,
    ctx: ContextDep,
    c: WiringDep,
    api_version: ApiVersion = None,
) -> Any:
    return resource_response(c.jobs.get(ctx, subscriptionId, resourceGroupName, jobName))


@router.post(
    ITEM + "/cancel",
    operation_id="SparkJobs_Cancel",
    openapi_extra=requires(rbac.JOBS_CANCEL),
    status_code=202,
    response_model=SparkJob,
    responses={
        202: {
            "headers": ASYNC_HEADERS,
            "description": "Accepted: the job is being canceled (Location: the outcome). The body is the job, with "
            "cancelRequestedBy, cancelRequestedAt and the reason saying so until it ends.",
        },
        **errors(e.AuthorizationFailed, e.ResourceNotFound, e.Conflict, e.AnotherOperationInProgress),
    },
    summary="Cancel a job in any state before it ends → 202; a finished job → 409 naming its status.",
)
def cancel(
    request: Request,
    subscriptionId: str,
    resourceGroupName: str,
    jobName: str,
    ctx: ContextDep,
    c: WiringDep,
    api_version: ApiVersion = None,
) -> Any:
    accepted = c.jobs.cancel(ctx, subscriptionId, resourceGroupName, jobName)
    return resource_response(accepted.resource, 202, async_headers(request, c, subscriptionId, accepted))


@router.delete(
    ITEM,
    operation_id="SparkJobs_Delete",
    openapi_extra=requires(rbac.JOBS_DELETE),
    status_code=200,
    response_class=Response,
    responses={
        204: {"description": "The job did not exist."},
        **errors(e.AuthorizationFailed, e.ResourceNotFound, e.Conflict),
    },
    summary="Delete a finished job: 200, or 204 when there was none; 409 while it is active.",
)
def delete(
    subscriptionId: str,
    resourceGroupName: str,
    jobName: str,
    ctx: ContextDep,
    c: WiringDep,
    api_version: ApiVersion = None,
) -> Any:
    return empty(200 if c.jobs.delete(ctx, subscriptionId, resourceGroupName, jobName) else 204)


@router.get(
    RG_COLLECTION,
    operation_id="SparkJobs_ListByResourceGroup",
    response_model=Page[SparkJob],
    responses=errors(e.AuthorizationFailed),
    summary="Jobs of a resource group the caller may see; ?submitted_by= those of one user.",
)
def list_by_resource_group(
    request: Request,
    subscriptionId: str,
    resourceGroupName: str,
    ctx: ContextDep,
    c: WiringDep,
    submitted_by: SubmittedBy = None,
    submitted_by_camel: SubmittedByCamel = None,
    top: Top = None,
    skip_token: SkipToken = None,
    api_version: ApiVersion = None,
) -> Any:
    items, token = c.jobs.list(
        ctx,
        subscriptionId,
        resourceGroupName,
        submitted_by=_submitter(submitted_by, submitted_by_camel),
        top=top or c.settings.default_page_size,
        skip_token=skip_token,
    )
    return page_response(items, next_link(request, c, token, top))


@router.get(
    SUB_COLLECTION,
    operation_id="SparkJobs_ListBySubscription",
    response_model=Page[SparkJob],
    responses=errors(e.AuthorizationFailed),
    summary="Jobs of a subscription the caller may see; ?submitted_by= those of one user.",
)
def list_by_subscription(
    request: Request,
    subscriptionId: str,
    ctx: ContextDep,
    c: WiringDep,
    submitted_by: SubmittedBy = None,
    submitted_by_camel: SubmittedByCamel = None,
    top: Top = None,
    skip_token: SkipToken = None,
    api_version: ApiVersion = None,
) -> Any:
    items, token = c.jobs.list(
        ctx,
        subscriptionId,
        None,
        submitted_by=_submitter(submitted_by, submitted_by_camel),
        top=top or c.settings.default_page_size,
        skip_token=skip_token,
    )
    return page_response(items, next_link(request, c, token, top))
