"""The HTTP client of the commands: one bearer token, one API base URL, ARM errors raised as :class:`ApiError`.

- Paths (``/subscriptions/...``) are joined to the API URL; absolute URLs the API returned (``nextLink``,
  ``Azure-AsyncOperation``, ``Location``) are followed as given — on the API URL's origin only: the bearer token is
  never sent anywhere else (another origin is a usage error, exit 2).
- Every request names ``api-version`` (:data:`paths.API_VERSION`) unless its URL does already.
- A status >= 400 raises :class:`ApiError` with the ARM body's ``error.code`` and ``error.message``; a connection
  failure or timeout raises ``ConnectionFailed``. Both exit 1.
- 429 (``TooManyRequests``: the API's rate limits, or API Gateway's throttling) is retried: after the response's
  ``Retry-After`` seconds (at most :data:`MAX_THROTTLE_WAIT`), or without one after a back-off doubling from
  :data:`THROTTLE_BACKOFF` seconds, each wait said on stderr; after :data:`THROTTLE_ATTEMPTS` attempts, the 429 is
  the command's error. Retrying any method is safe: a throttled request was refused before the API did anything
  (docs/API_REFERENCE.md, "Rate limits").
- :meth:`Client.list` follows ``nextLink`` to the end, or until ``max_items`` (then asks each page for no more than
  it still needs, so the ``nextLink`` it returns resumes exactly after the last item).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import click
import httpx

from itlc_accelerator import __version__
from itlc_accelerator.errors import ApiError
from itlc_accelerator.paths import API_VERSION

#: The largest page the API serves (``$top`` 1-1000).
MAX_PAGE = 1000
#: Attempts of a throttled request (429), the first included.
THROTTLE_ATTEMPTS = 4
#: The first wait (seconds) after a 429 without ``Retry-After``; it doubles on each further one.
THROTTLE_BACKOFF = 1.0
#: The longest wait (seconds) honoured after a 429, whatever ``Retry-After`` says (the API's windows are a minute).
MAX_THROTTLE_WAIT = 60.0


class Client:
    """``Client(api_url, token)``; ``transport`` is for tests (``httpx.MockTransport``). ``sleep`` waits out a 429
    (seconds) and ``notice`` says so (default: a line on stderr)."""

    def __init__(
        self,
        api_url: str,
        token: str | None,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
        sleep: Callable[[float], None] | None = None,
        notice: Callable[[str], None] | None = None,
    ):
        self._sleep = sleep or time.sleep
        self._notice = notice or (lambda text: click.echo(text, err=True))
        self.api_url = api_url.rstrip("/")
        headers = {"Accept": "application/json", "User-Agent": f"itlc-accelerator/{__version__}"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(headers=headers, transport=transport, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def url(self, path_or_url: str) -> httpx.URL:
        """The absolute URL of a path, or the URL itself; with ``api-version`` unless it has one.

        The bearer token goes to ``--api-url``'s origin only (scheme, host and port): an absolute URL elsewhere —
        given on the command line or returned by a server — raises ``click.UsageError`` (exit 2) before anything
        is sent."""
        url = httpx.URL(path_or_url if "://" in path_or_url else self.api_url + path_or_url)
        if _origin(url) != _origin(httpx.URL(self.api_url)):
            raise click.UsageError(
                f"{str(url.copy_with(query=None))[:200]} is not on --api-url's origin ({_origin(httpx.URL(self.api_url))}):"
                " the token is sent only there."
            )
        return url if "api-version" in url.params else url.copy_add_param("api-version", API_VERSION)

    def send(
        self,
        method: str,
        path_or_url: str,
        *,
        json: Any = None,
        params: dict[str, str | None] | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """The response (status < 400), or :class:`ApiError`; a 429 is retried first (module docstring)."""
        url = self.url(path_or_url)
        if params:
            url = url.copy_merge_params({k: v for k, v in params.items() if v is not None})
        waited = 0.0
        for attempt in range(1, THROTTLE_ATTEMPTS + 1):
            try:
                response = self._http.request(method, url, json=json, headers=headers)
            except httpx.TransportError as exc:
                raise ApiError(
                    "ConnectionFailed",
                    f"could not reach {url.scheme}://{url.netloc.decode()} ({exc or type(exc).__name__}). Is the API "
                    "running (./dev up), and is --api-url (CONTROLPLANE_API_URL) right?",
                ) from None
            if response.status_code != 429 or attempt == THROTTLE_ATTEMPTS:
                break
            delay = throttle_delay(response, attempt)
            self._notice(
                f"throttled: the API answered 429 TooManyRequests to {method} {url.path}; retrying in {delay:g}s"
                f" ({'as its Retry-After says' if 'Retry-After' in response.headers else 'back-off'}, attempt"
                f" {attempt + 1} of {THROTTLE_ATTEMPTS})"
            )
            self._sleep(delay)
            waited += delay
        if response.status_code == 429:
            error = ApiError.from_body(429, _json_or_none(response), response.text)
            raise ApiError(
                error.code,
                f"{error.message} (still throttled after {THROTTLE_ATTEMPTS} attempts over {waited:g}s: the "
                "subscription's or your request rate limit is reached; try again later)",
                429,
            )
        if response.status_code >= 400:
            raise ApiError.from_body(response.status_code, _json_or_none(response), response.text)
        return response

    def get(self, path_or_url: str, **params: str | None) -> Any:
        """GET → the JSON body (None when empty)."""
        return _json_or_none(self.send("GET", path_or_url, params=dict(params)))

    def list(self, path: str, params: dict[str, str] | None = None, max_items: int | None = None) -> dict[str, Any]:
        """Every item of a collection, following ``nextLink``: ``{"value": [...], "nextLink": url-or-None}`` (the
        API's own list shape; ``nextLink`` is not None only when ``max_items`` stopped it early)."""
        items: list[Any] = []
        url, query = path, dict[str, str | None](params or {})
        while True:
            if max_items is not None:
                query["$top"] = str(min(max_items - len(items), MAX_PAGE))
            page = _json_or_none(self.send("GET", url, params=query)) or {}
            items.extend(page.get("value") or [])
            next_link = page.get("nextLink")
            if not next_link or (max_items is not None and len(items) >= max_items):
                return {"value": items if max_items is None else items[:max_items], "nextLink": next_link}
            url, query = next_link, {}


def throttle_delay(response: httpx.Response, attempt: int) -> float:
    """Seconds to wait before attempt ``attempt + 1`` of a request answered 429 by ``response``: its
    ``Retry-After`` (whole seconds, capped at :data:`MAX_THROTTLE_WAIT`), else :data:`THROTTLE_BACKOFF` doubled
    for each attempt made."""
    try:
        return min(max(float(response.headers["Retry-After"]), 0.0), MAX_THROTTLE_WAIT)
    except (KeyError, ValueError):
        return float(min(THROTTLE_BACKOFF * 2 ** (attempt - 1), MAX_THROTTLE_WAIT))


def _origin(url: httpx.URL) -> str:
    """``scheme://host:port`` of a URL (the port made explicit: ``http://a`` and ``http://a:80`` are one origin)."""
    port = url.port or {"http": 80, "https": 443}.get(url.scheme, 0)
    return f"{url.scheme}://{url.host}:{port}"


def _json_or_none(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return None
