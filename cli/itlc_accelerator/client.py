"""The HTTP client of the commands: one bearer token, one API base URL, ARM errors raised as :class:`ApiError`.

- Paths (``/subscriptions/...``) are joined to the API URL; absolute URLs the API returned (``nextLink``,
  ``Azure-AsyncOperation``, ``Location``) are followed as given — on the API URL's origin only: the bearer token is
  never sent anywhere else (another origin is a usage error, exit 2).
- Every request names ``api-version`` (:data:`paths.API_VERSION`) unless its URL does already.
- A status >= 400 raises :class:`ApiError` with the ARM body's ``error.code`` and ``error.message``; a connection
  failure or timeout raises ``ConnectionFailed``. Both exit 1.
- :meth:`Client.list` follows ``nextLink`` to the end, or until ``max_items`` (then asks each page for no more than
  it still needs, so the ``nextLink`` it returns resumes exactly after the last item).
"""

from __future__ import annotations

from typing import Any

import click
import httpx

from itlc_accelerator import __version__
from itlc_accelerator.errors import ApiError
from itlc_accelerator.paths import API_VERSION

#: The largest page the API serves (``$top`` 1-1000).
MAX_PAGE = 1000


class Client:
    """``Client(api_url, token)``; ``transport`` is for tests (``httpx.MockTransport``)."""

    def __init__(
        self,
        api_url: str,
        token: str | None,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
    ):
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
        """The response (status < 400), or :class:`ApiError`."""
        url = self.url(path_or_url)
        if params:
            url = url.copy_merge_params({k: v for k, v in params.items() if v is not None})
        try:
            response = self._http.request(method, url, json=json, headers=headers)
        except httpx.TransportError as exc:
            raise ApiError(
                "ConnectionFailed",
                f"could not reach {url.scheme}://{url.netloc.decode()} ({exc or type(exc).__name__}). Is the API "
                "running (./dev up), and is --api-url (CONTROLPLANE_API_URL) right?",
            ) from None
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
