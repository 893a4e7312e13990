"""The web portal locally: its built files (``portal/dist``, made by ``./dev``) and its ``config.json``, served at
``/portal/`` on the API's own port, in front of the API Gateway emulator — the local stand-in for the CloudFront
distribution that serves the portal in AWS (template.yaml's ``PortalDistribution``).

Only ``/portal`` and what lies below it is the portal's; every other path goes to the emulator unchanged, so the
API still serves exactly the routes template.yaml declares. :func:`publish` puts the same files in the deployed
stack's portal bucket (``itl-local portal-publish``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from starlette.exceptions import HTTPException
from starlette.middleware.gzip import GZipMiddleware
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

#: Where ``./dev`` builds the portal (``portal/build.mjs``).
PORTAL_DIST = Path(__file__).resolve().parents[2] / "portal" / "dist"
#: The URL path the portal is served under.
PORTAL_PATH = "/portal"


def portal_config(*, api_base_url: str, authority: str, client_id: str) -> dict[str, Any]:
    """The portal's ``config.json``: the API's base URL (``""``: the portal's own origin), the OIDC issuer
    (``authority``) and the public client id it logs in as."""
    return {"apiBaseUrl": api_base_url, "authority": authority, "clientId": client_id, "scope": "openid profile"}


class PortalSite:
    """ASGI app for ``/portal/...``: ``config.json`` from ``config``, everything else from ``dist`` (index.html
    for the directory). Without a built ``dist`` it answers 503 with a page saying how to build it. A file that
    is not there (or a path outside ``dist``) answers 404 ``Not Found``, as the portal's bucket behind CloudFront
    does; the portal routes by the URL's fragment, so no deep link names a file."""

    def __init__(self, config: dict[str, Any], dist: Path = PORTAL_DIST):
        self.config = config
        self.dist = dist
        self.files = StaticFiles(directory=dist, html=True, check_dir=False)
        # compressed as CloudFront's `Compress: true` serves them (files of 1,000 bytes and more, gzip when accepted)
        self.compressed_files = GZipMiddleware(self.files, minimum_size=1000)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope["path"]
        if path == PORTAL_PATH:
            response: Any = RedirectResponse(f"{PORTAL_PATH}/", status_code=308)
        elif path == f"{PORTAL_PATH}/config.json":
            response = JSONResponse(self.config, headers={"Cache-Control": "no-store"})
        elif not (self.dist / "index.html").is_file():
            response = HTMLResponse(
                "<!doctype html><title>Portal not built</title><p role='alert'>The portal is not built: "
                "<code>./dev up</code> builds it (or <code>cd portal &amp;&amp; npm ci &amp;&amp; node build.mjs</code>).</p>",
                status_code=503,
            )
        else:
            sub = {**scope, "path": path[len(PORTAL_PATH) :], "root_path": scope.get("root_path", "") + PORTAL_PATH}
            try:
                # StaticFiles raises its 404 (and 405) for an app's ExceptionMiddleware to answer; none wraps it here.
                await self.compressed_files(sub, receive, send)
                return
            except HTTPException as error:
                response = PlainTextResponse(error.detail, status_code=error.status_code, headers=error.headers)
        await response(scope, receive, send)


def with_portal(api: ASGIApp, site: PortalSite) -> ASGIApp:
    """One ASGI app: ``/portal`` and below → ``site``; anything else (lifespan included) → ``api``."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == PORTAL_PATH or path.startswith(f"{PORTAL_PATH}/")):
            await site(scope, receive, send)
        else:
            await api(scope, receive, send)

    return app


#: Content types of what the portal's build writes.
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}


def publish(
    s3: Any,
    bucket: str,
    config: dict[str, Any],
    *,
    dist: Path = PORTAL_DIST,
    cloudfront: Any = None,
    distribution_id: str | None = None,
) -> list[str]:
    """Upload the built portal (``dist``) and its ``config.json`` to ``bucket`` (the template's ``PortalBucket``),
    then, given ``cloudfront`` and ``distribution_id``, invalidate the distribution's cache of ``/*``. index.html
    and config.json are sent with ``Cache-Control: no-cache`` (the bundle's name is fixed, so it is revalidated
    too). Returns the object keys written. Raises ``FileNotFoundError`` when the portal is not built."""
    if not (dist / "index.html").is_file():
        raise FileNotFoundError(f"{dist}/index.html: build the portal first (./dev portal)")
    written = []
    for path in sorted(p for p in dist.rglob("*") if p.is_file() and not p.name.startswith(".")):
        key = path.relative_to(dist).as_posix()
        content_type = CONTENT_TYPES.get(path.suffix, "application/octet-stream")
        s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes(), ContentType=content_type, CacheControl="no-cache")
        written.append(key)
    body = json.dumps(config, indent=2).encode()
    s3.put_object(Bucket=bucket, Key="config.json", Body=body, ContentType="application/json", CacheControl="no-cache")
    written.append("config.json")
    if cloudfront is not None and distribution_id:
        cloudfront.create_invalidation(
            DistributionId=distribution_id,
            InvalidationBatch={"Paths": {"Quantity": 1, "Items": ["/*"]}, "CallerReference": str(time.time_ns())},
        )
    return written
