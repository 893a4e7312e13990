"""Response helpers: ARM JSON with ``ETag`` headers, empty bodies, and the OpenAPI error responses of a route."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse, Response

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


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries for ARM errors: the given statuses plus those every route can return."""
    described = {
        400: "Invalid request (InvalidRequestContent, InvalidParameter, InvalidResourceName, UnsupportedApiVersionValue).",
        401: "AuthenticationFailed.",
        403: "AuthorizationFailed.",
        404: "ResourceNotFound (or NotFound: no such route).",
        409: "Conflict.",
        412: "PreconditionFailed.",
        413: "RequestEntityTooLarge.",
        500: "InternalServerError.",
    }
    # 404 on every route: API Gateway answers NotFound itself for a path it cannot route (e.g. a control
    # character in a path segment), before any function runs.
    wanted = {400, 401, 404, 413, 500, *codes}
    return {code: {"model": ErrorResponse, "description": described[code]} for code in sorted(wanted)}
