"""A fake of the ITL Control Plane's API gateway, as far as a provider sees it: ``GET /health`` and ``POST
/providers/register``. It records every registration it is sent; its behaviour is set per test:

- ``down_for``: the next N ``/health`` requests answer 503 (a gateway still starting);
- ``strict``: ``"released"`` or ``"main"`` — it takes only that spelling of the body and refuses any other field
  with 422, as a pydantic model with ``extra="forbid"`` would (``None``: it ignores unknown fields, FastAPI's
  default, and needs the fields of either spelling);
- ``refuse_with``: answer every registration with this status.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

RELEASED = {"name", "namespace", "base_url", "resource_types", "version", "health_endpoint"}
MAIN = {"name", "namespace", "baseUrl", "resourceTypes", "healthCheckEndpoint", "description"}
REQUIRED = {"released": {"name", "namespace", "base_url"}, "main": {"name", "namespace", "baseUrl"}}


@dataclass
class FakeItlGateway:
    """The fake's state and its ASGI app (``.app``); ``.url`` once served."""

    registrations: list[dict[str, Any]] = field(default_factory=list)
    health_checks: int = 0
    down_for: int = 0
    strict: str | None = None
    refuse_with: int | None = None
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.app = Starlette(
            routes=[
                Route("/health", self._health),
                Route("/providers/register", self._register, methods=["POST"]),
            ]
        )

    def reset(self) -> None:
        with self.lock:
            self.registrations.clear()
            self.health_checks, self.down_for, self.strict, self.refuse_with = 0, 0, None, None

    async def _health(self, _: Request) -> JSONResponse:
        with self.lock:
            self.health_checks += 1
            if self.down_for > 0:
                self.down_for -= 1
                return JSONResponse({"status": "starting"}, status_code=503)
        return JSONResponse({"status": "healthy"})

    async def _register(self, request: Request) -> JSONResponse:
        body = await request.json()
        if self.refuse_with is not None:
            return JSONResponse({"detail": "refused"}, status_code=self.refuse_with)
        fields = set(body)
        if self.strict is not None:
            allowed = RELEASED if self.strict == "released" else MAIN
            if not fields <= allowed or not REQUIRED[self.strict] <= fields:
                return JSONResponse({"detail": f"extra or missing fields: {sorted(fields ^ allowed)}"}, 422)
        elif not (REQUIRED["released"] <= fields or REQUIRED["main"] <= fields):
            return JSONResponse({"detail": "name, namespace and a base URL are required"}, 422)
        with self.lock:
            self.registrations.append(body)
        return JSONResponse({"registered": body["namespace"]}, status_code=201)
