"""The provider's HTTP API as the MCP server calls it: the caller's own bearer token, ARM errors kept as they are.

Every request carries the caller's ``Authorization`` header unchanged, ``api-version`` (:data:`API_VERSION`), a
``User-Agent`` naming this server, its transport and the MCP client (``itl-accelerator-mcp/0.1.0 (mcp;
transport=http; client=Visual Studio Code/1.107.0)``: the API's audit trail records it as ``user_agent``, which is
how an audit item says it came through MCP), and one
``x-ms-correlation-request-id`` per tool call, so the API calls a tool makes share one correlation id.

A 429 (``TooManyRequests``: the API's rate limits, or API Gateway's throttling) is retried after its
``Retry-After`` seconds (a doubling back-off from 1 s without one), at most :data:`THROTTLE_ATTEMPTS` attempts per
request and ``throttle_budget`` seconds of waiting in all for the client: the Lambda function answers within API
Gateway's 29 s, so it waits a little and then hands the 429 to the MCP client as the tool's error, with
``retryAfter`` (seconds) for the assistant to tell the user. A throttled request was refused before the API did
anything, so retrying any method is safe.
"""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any
from urllib.parse import quote

import httpx

from itl_accelerator_mcp import __version__

#: The API version every request names (docs/openapi.json ``info.version``).
API_VERSION = "2026-11-01"
NAMESPACE = "ITL.Accelerator"
#: The largest page the API serves (``$top`` 1-1000).
MAX_PAGE = 1000
#: Attempts of a throttled request (429), the first included.
THROTTLE_ATTEMPTS = 3
#: Seconds a client may spend waiting out 429s in all, by transport: the Lambda function (``http``) must answer
#: within API Gateway's 29 s; on the user's machine (``stdio``) a minute's window may be waited out.
THROTTLE_BUDGETS = {"http": 8.0, "stdio": 60.0}


class ApiError(Exception):
    """The API answered ``status`` >= 400 with the ARM error ``code`` and ``message`` (``target`` when given;
    ``retry_after`` seconds from a 429's ``Retry-After``), or it could not be reached (``status`` 0, code
    ``ConnectionFailed``)."""

    def __init__(
        self, status: int, code: str, message: str, target: str | None = None, retry_after: float | None = None
    ):
        super().__init__(f"{code}: {message}")
        self.status, self.code, self.message, self.target = status, code, message, target
        self.retry_after = retry_after

    def to_dict(self) -> dict[str, Any]:
        """``{"status", "code", "message", "target"?, "retryAfter"?}``: what a tool's error result carries."""
        body: dict[str, Any] = {"status": self.status, "code": self.code, "message": self.message}
        if self.target:
            body["target"] = self.target
        if self.retry_after is not None:
            body["retryAfter"] = self.retry_after
        return body


def user_agent(transport: str, client: str | None = None) -> str:
    """The ``User-Agent`` of the MCP server's API calls: ``transport`` is ``http`` or ``stdio``; ``client`` the MCP
    client's name and version as it introduced itself (printable ASCII kept, at most 100 characters)."""
    text = f"itl-accelerator-mcp/{__version__} (mcp; transport={transport}"
    if client:
        cleaned = "".join(c for c in client if " " <= c <= "~" and c not in "();")[:100].strip()
        if cleaned:
            text += f"; client={cleaned}"
    return text + ")"


def seg(value: str) -> str:
    """One path segment, percent-encoded."""
    return quote(value, safe="")


def provider_path(subscription: str, resource_group: str | None = None) -> str:
    """``/subscriptions/{sub}[/resourceGroups/{rg}]/providers/ITL.Accelerator``."""
    scope = f"/subscriptions/{seg(subscription)}"
    if resource_group:
        scope += f"/resourceGroups/{seg(resource_group)}"
    return f"{scope}/providers/{NAMESPACE}"


@cache
def _tls() -> ssl.SSLContext:
    """One TLS context per process, made on first use: making one (loading the CA bundle) costs ~30 ms, and the
    Lambda function makes a client per invocation."""
    return httpx.create_ssl_context()


class ApiClient:
    """``ApiClient(base_url, token, transport_name)``: the API at ``base_url`` (``scheme://host[/stage]``) as the
    holder of ``token``. ``http_transport`` and ``sleep`` are for tests; ``throttle_budget``: seconds it may wait
    out 429s in all (default: :data:`THROTTLE_BUDGETS` of the transport). Use as an async context manager, or call
    :meth:`aclose`."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        transport_name: str = "http",
        http_transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 25.0,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        throttle_budget: float | None = None,
    ):
        self._sleep = sleep
        self._throttle_left = THROTTLE_BUDGETS.get(transport_name, 8.0) if throttle_budget is None else throttle_budget
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.transport_name = transport_name
        headers = {"Accept": "application/json", "User-Agent": user_agent(transport_name)}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.AsyncClient(headers=headers, transport=http_transport, timeout=timeout, verify=_tls())
        self.correlation_id = str(uuid.uuid4())

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def name_client(self, client: str | None) -> None:
        """Name the MCP client (``"Visual Studio Code/1.107"``) in the ``User-Agent`` of the calls that follow."""
        self._http.headers["User-Agent"] = user_agent(self.transport_name, client)

    def new_correlation(self) -> str:
        """Start a new correlation id (one per tool call); returns it."""
        self.correlation_id = str(uuid.uuid4())
        return self.correlation_id

    def relative(self, path_or_url: str) -> str | None:
        """The API path (with its query) of a path or of an absolute URL of this API; None for a URL of any other
        host or base, so the caller's token is never sent anywhere but the API."""
        if "://" not in path_or_url:
            return path_or_url if path_or_url.startswith("/") else None
        if path_or_url.startswith(self.base_url + "/"):
            return path_or_url[len(self.base_url) :]
        return None

    def url(self, path_or_url: str) -> httpx.URL:
        """The absolute URL of an API path (or of an absolute URL of this API), with ``api-version``.
        ``ApiError`` ``InvalidParameter`` for a URL outside the API (see :meth:`relative`)."""
        path = self.relative(path_or_url)
        if path is None:
            raise ApiError(400, "InvalidParameter", f"'{path_or_url}' is not a URL of this API ({self.base_url}).")
        url = httpx.URL(self.base_url + path)
        return url if "api-version" in url.params else url.copy_add_param("api-version", API_VERSION)

    async def request(
        self, method: str, path_or_url: str, *, json: Any = None, params: dict[str, Any] | None = None
    ) -> httpx.Response:
        """The response (status < 400), or :class:`ApiError` with the API's own code and message."""
        url = self.url(path_or_url)
        if params:
            url = url.copy_merge_params({k: str(v) for k, v in params.items() if v is not None})
        headers = {"x-ms-correlation-request-id": self.correlation_id}
        for attempt in range(1, THROTTLE_ATTEMPTS + 1):
            try:
                response = await self._http.request(method, url, json=json, headers=headers)
            except httpx.TransportError as exc:
                raise ApiError(
                    0, "ConnectionFailed", f"could not reach the API at {self.base_url} ({exc or type(exc).__name__})"
                ) from None
            if response.status_code != 429 or attempt == THROTTLE_ATTEMPTS:
                break
            delay = _retry_after(response) or float(2 ** (attempt - 1))
            if delay > self._throttle_left:
                break  # not worth this answer's time: the 429 goes to the MCP client, with its retryAfter
            self._throttle_left -= delay
            await self._sleep(delay)
        if response.status_code >= 400:
            raise _error(response)
        return response

    async def get(self, path_or_url: str, **params: Any) -> Any:
        """GET → the JSON body (None when empty)."""
        return _json(await self.request("GET", path_or_url, params=params))

    async def list(self, path: str, params: dict[str, Any] | None = None, max_items: int = 100) -> dict[str, Any]:
        """Up to ``max_items`` items of a collection, following ``nextLink``: ``{"value": [...], "nextLink"}`` (the
        API's list shape; ``nextLink`` is set when more items remain)."""
        items: list[Any] = []
        url, query = path, dict(params or {})
        while True:
            query["$top"] = min(max_items - len(items), MAX_PAGE)
            page = _json(await self.request("GET", url, params=query)) or {}
            items.extend(page.get("value") or [])
            next_link = page.get("nextLink")
            if not next_link or len(items) >= max_items:
                return {"value": items[:max_items], "nextLink": next_link}
            url, query = next_link, {}


def _json(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _retry_after(response: httpx.Response) -> float | None:
    """A response's ``Retry-After`` seconds (a number; an HTTP date is not used by this API), None without one."""
    try:
        return max(float(response.headers["Retry-After"]), 0.0)
    except (KeyError, ValueError):
        return None


def _error(response: httpx.Response) -> ApiError:
    body = _json(response)
    error = body.get("error") if isinstance(body, dict) else None
    retry_after = _retry_after(response) if response.status_code == 429 else None
    if isinstance(error, dict) and error.get("code"):
        message = str(error.get("message") or "")
        return ApiError(response.status_code, str(error["code"]), message, error.get("target"), retry_after)
    return ApiError(response.status_code, f"HttpError{response.status_code}", response.text[:500], None, retry_after)
