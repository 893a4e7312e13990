"""FastAPI dependencies: the wiring, the caller's :class:`CallContext`, paging parameters, public URLs."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Depends, Header, Query, Request

from itl_accelerator.auth.principal import Principal
from itl_accelerator.errors import AuthenticationFailed
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.wiring import Wiring


def get_wiring(request: Request) -> Wiring:
    """The process's wiring (built on first request by the app factory's provider)."""
    wiring: Wiring = request.app.state.wiring()
    return wiring


def _authorizer_context(request: Request) -> dict[str, Any]:
    event = request.scope.get("aws.event") or {}
    return (event.get("requestContext") or {}).get("authorizer") or {}


#: Where a request's remembered context is kept in its ASGI scope's ``state``.
_CONTEXT = "itl_call_context"


def get_context(request: Request) -> CallContext:
    """The caller, as the API Gateway Lambda authorizer put it in ``requestContext.authorizer.principal`` — the
    request's one context, once its route has authorised it (:func:`remember_context`).

    401 ``AuthenticationFailed`` when absent (a request that did not pass the authorizer)."""
    remembered: CallContext | None = request.scope["state"].get(_CONTEXT)
    if remembered is not None:
        return remembered
    raw = _authorizer_context(request).get("principal")
    if not raw:
        raise AuthenticationFailed("Authentication failed: the request carries no authenticated principal.")
    identity = ((request.scope.get("aws.event") or {}).get("requestContext") or {}).get("identity") or {}
    return CallContext(
        principal=Principal.from_context(raw),
        request_id=request.scope["state"]["request_id"],
        correlation_id=request.scope["state"]["correlation_id"],
        source_ip=identity.get("sourceIp") or (request.client.host if request.client else None),
        user_agent=identity.get("userAgent") or request.headers.get("user-agent"),
    )


def remember_context(request: Request, ctx: CallContext) -> None:
    """Make ``ctx`` the request's context (what :func:`get_context` answers from now on): the route's, saying
    what it authorised (api/routing.py)."""
    request.scope["state"][_CONTEXT] = ctx


WiringDep = Annotated[Wiring, Depends(get_wiring)]
ContextDep = Annotated[CallContext, Depends(get_context)]
Top = Annotated[int | None, Query(alias="$top", ge=1, le=1000, description="Page size (1-1000).")]
SkipToken = Annotated[
    str | None, Query(alias="$skipToken", max_length=2048, description="Continuation token from `nextLink`.")
]
IfMatch = Annotated[str | None, Header(alias="If-Match", description="ETag the resource must still have.")]
IfNoneMatch = Annotated[str | None, Header(alias="If-None-Match", description="'*': only if it does not exist.")]
ApiVersion = Annotated[
    str | None,
    Query(alias="api-version", description="Optional; the newest stable version when absent (ITL)."),
]


def public_base_url(request: Request, configured: str) -> str:
    """``scheme://host[/stage]`` as the caller addressed the API: ``PUBLIC_BASE_URL`` when set, else derived
    from the request (API Gateway's stage prefix is recovered from ``requestContext.path``)."""
    if configured:
        return configured
    base = f"{request.url.scheme}://{request.url.netloc}"
    event = request.scope.get("aws.event") or {}
    full_path = (event.get("requestContext") or {}).get("path") or ""
    path = event.get("path") or ""
    if path and full_path.endswith(path) and len(full_path) > len(path):
        base += full_path[: -len(path)]
    return base


def next_link(request: Request, wiring: Wiring, skip_token: str | None, top: int | None) -> str | None:
    """Absolute ``nextLink`` carrying ``$skipToken`` (and ``$top``/``api-version`` as sent); None on the last page."""
    if not skip_token:
        return None
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in ("$skipToken", "$top")]
    if top is not None:
        params.append(("$top", str(top)))
    params.append(("$skipToken", skip_token))
    return f"{public_base_url(request, wiring.settings.public_base_url)}{request.url.path}?{urlencode(params)}"
