"""The catch-all route (``ANY /{proxy+}``, no authorizer of its own): a request whose path matches a route of the
API only in another casing (``.../resourcegroups/rg1/providers/itl.accelerator/sparkNodes``; ARM treats these
segments case-insensitively, API Gateway does not) is sent again, unchanged but for its path, to the canonical path
of the same API — so it passes the authorizer and the operation's own function like any request — and that answer is
returned. Anything else is 404 ``NotFound``, the answer API Gateway gives a path no route matches.

It holds no permission and reads nothing: it is a client of its own API (the caller's own bearer token goes back to
the API's own domain, from API Gateway's request context). The standard library's HTTP client keeps its cold start
small (no web framework, no AWS SDK).
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from itl_accelerator.api.canonical import canonical_path
from itl_accelerator.observability import logger

#: Headers that describe one hop, not the request: never sent on.
_HOP_BY_HOP = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}
)
#: API Gateway ends an integration at 29 s: the answer must come back before.
TIMEOUT_SECONDS = 25.0


def _error(event: dict[str, Any], status: int, code: str, message: str) -> dict[str, Any]:
    """An ARM error answered here, with API Gateway's request id as ``x-ms-request-id`` (ARM_CONTRACT.md 23)."""
    request_id = str((event.get("requestContext") or {}).get("requestId") or "")
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", "x-ms-request-id": request_id},
        "body": json.dumps({"error": {"code": code, "message": message}}),
    }


def _api_base(event: dict[str, Any]) -> str:
    """``scheme://domain[/stage or base path]`` of the API as the caller addressed it."""
    context = event.get("requestContext") or {}
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    scheme = headers.get("x-forwarded-proto", "https")
    full, path = str(context.get("path") or ""), str(event.get("path") or "")
    prefix = full[: -len(path)] if path and full.endswith(path) else ""
    return f"{scheme}://{context['domainName']}{prefix}"


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """API Gateway REST proxy event in, proxy result out (module docstring)."""
    path = str(event.get("path") or "/")
    canonical = canonical_path(path)
    if canonical is None or canonical == path:
        return _error(event, 404, "NotFound", "No route matches the request path and method.")
    query = event.get("multiValueQueryStringParameters") or {}
    url = _api_base(event) + urllib.parse.quote(canonical, safe="/")
    if query:
        url += "?" + urllib.parse.urlencode([(k, v) for k, values in query.items() for v in values])
    body = event.get("body")
    data = None if body is None else (base64.b64decode(body) if event.get("isBase64Encoded") else body.encode())
    request = urllib.request.Request(url, data=data, method=str(event.get("httpMethod") or "GET"))  # noqa: S310 - https/http of its own API only
    for name, values in (event.get("multiValueHeaders") or {}).items():
        if name.lower() not in _HOP_BY_HOP:
            for value in values:
                request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:  # noqa: S310
            return _result(response.status, response.headers, response.read())
    except urllib.error.HTTPError as answer:  # a 4xx/5xx of the API is its answer, passed on as it is
        return _result(answer.code, answer.headers, answer.read())
    except (urllib.error.URLError, TimeoutError) as exc:
        logger.warning("Canonical path request failed", extra={"path": canonical, "error": str(exc)})
        return _error(event, 503, "ServiceUnavailable", "The request could not be completed now; retry it.")


def _result(status: int, headers: Any, body: bytes) -> dict[str, Any]:
    multi: dict[str, list[str]] = {}
    for name, value in headers.items():
        if name.lower() not in _HOP_BY_HOP:
            multi.setdefault(name, []).append(value)
    try:
        return {"statusCode": status, "multiValueHeaders": multi, "body": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {
            "statusCode": status,
            "multiValueHeaders": multi,
            "body": base64.b64encode(body).decode(),
            "isBase64Encoded": True,
        }
