"""Job log route: ``GET .../sparkJobs/{jobName}/logs?tail=N&since=...&$top=N&$skipToken=...`` (services/api/job_logs.py).
Thin: parse the parameters (``tail`` 1-10000, ``since`` ISO 8601 with a zone, ``$top`` 1-1000 lines a page, default
1000; anything else 400 ``InvalidParameter``), call the service, render the page with its ``nextLink``.

The ``nextLink`` keeps ``since``, ``$top`` and ``api-version`` and drops ``tail`` (it chose the first page's lines;
the following pages are those after it)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Query, Request
from fastapi.responses import JSONResponse

from itl_accelerator import errors as e
from itl_accelerator.api import paths
from itl_accelerator.api.deps import ApiVersion, ContextDep, SkipToken, Top, WiringDep, public_base_url
from itl_accelerator.api.responses import errors
from itl_accelerator.api.routing import ArmRoute, DeferredRouter
from itl_accelerator.models.job_logs import JobLogPage
from itl_accelerator.services.api.job_logs import parse_after, parse_since, parse_tail

router = DeferredRouter(tags=["sparkJobs"], route_class=ArmRoute)

Tail = Annotated[
    str | None,
    Query(description="Only the last N lines (1-10000) of those selected: the first page.", examples=["100"]),
]
Since = Annotated[
    str | None,
    Query(
        description="Only the lines written at or after this time (ISO 8601 with a zone).",
        examples=["2026-12-01T10:00:00Z"],
    ),
]


@router.get(
    paths.JOB + "/logs",
    operation_id="SparkJobs_GetLogs",
    response_model=JobLogPage,
    responses=errors(
        e.InvalidParameter, e.AuthorizationFailed, e.ResourceNotFound, e.LogsNotAvailable, e.ServiceUnavailable
    ),
    summary="A page of the job's log (whoever may read the job); follow nextLink for the lines that follow, "
    "while the job runs too.",
)
def get_logs(
    request: Request,
    subscriptionId: str,
    resourceGroupName: str,
    jobName: str,
    ctx: ContextDep,
    c: WiringDep,
    tail: Tail = None,
    since: Since = None,
    top: Top = None,
    skip_token: SkipToken = None,
    api_version: ApiVersion = None,
) -> Any:
    page = c.job_logs.page(
        ctx,
        subscriptionId,
        resourceGroupName,
        jobName,
        after=parse_after(skip_token),
        since=parse_since(since),
        tail=parse_tail(tail),
        top=top or 1000,
    )
    next_link = None
    if page.next is not None:
        kept = [(k, v) for k, v in request.query_params.multi_items() if k in ("since", "$top", "api-version")]
        query = urlencode([*kept, ("$skipToken", str(page.next))])
        next_link = f"{public_base_url(request, c.settings.public_base_url)}{request.url.path}?{query}"
    return JSONResponse(
        {"value": page.lines, "nextLink": next_link, "jobStatus": page.job_status, "complete": page.complete}
    )
