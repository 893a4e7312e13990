"""Response helpers: ARM JSON with ``ETag`` headers, empty bodies, and the OpenAPI error responses of a route."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse, Response

from itl_accelerator.errors import (
    ArmError,
    AuthenticationFailed,
    BadRequest,
    InternalServerError,
    InvalidParameter,
    InvalidResourceName,
    MissingApiVersion,
    NotFound,
    RequestBlocked,
    RequestTooLarge,
    ServiceUnavailable,
    TooManyRequests,
    UnsupportedApiVersion,
)
from itl_accelerator.models.common import ErrorResponse


def resource_response(
    resource: dict[str, Any], status_code: int = 200, headers: dict[str, str] | None = None
) -> JSONResponse:
    """A single resource; its ``ETag`` header equals the body's ``etag`` (ARM_CONTRACT.md line 21)."""
    all_headers = {"ETag": resource["etag"]} if "etag" in resource else {}
    all_headers.update(headers or {})
    return JSONResponse(resource, status_code=status_code, headers=all_headers)


def page_response(items: list[Any], next_link: str | None) -> JSONResponse:
    """An ARM list page ``{"value": [...], "nextLink": url-or-null}`` (ARM_CONTRACT.md line 10)."""
    return JSONResponse({"value": items, "nextLink": next_link})


def empty(status_code: int) -> Response:
    """A response without a body (204, or 200 after a synchronous delete)."""
    return Response(status_code=status_code)


#: What any route may answer whatever it does: bad parameters or body, no valid token, no such route (API Gateway
#: answers NotFound for a path it cannot route before any function runs), body too large, throttled, blocked by the
#: web application firewall (API Gateway's WAF_FILTERED), unexpected.
ALWAYS: tuple[type[ArmError], ...] = (
    BadRequest,
    InvalidParameter,
    InvalidResourceName,
    UnsupportedApiVersion,
    MissingApiVersion,
    AuthenticationFailed,
    NotFound,
    RequestTooLarge,
    TooManyRequests,
    RequestBlocked,
    InternalServerError,
    ServiceUnavailable,
)


def errors(*raised: type[ArmError]) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for the ARM errors a route raises (plus :data:`ALWAYS`): one entry per HTTP
    status whose description names every code of that status (errors.py is the one list of codes)."""
    by_status: dict[int, list[str]] = {}
    for error in (*ALWAYS, *raised):
        codes = by_status.setdefault(error.status, [])
        if error.code not in codes:
            codes.append(error.code)
    return {
        status: {"model": ErrorResponse, "description": f"ARM error; `error.code` one of: {', '.join(codes)}."}
        for status, codes in sorted(by_status.items())
    }
