"""Turns one API operation into a Lambda handler (API Gateway REST proxy event → Mangum → FastAPI route)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from mangum import Mangum

from itl_accelerator.api.app import build_app
from itl_accelerator.observability import logger, tracer

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


_loops = threading.local()


def _ensure_event_loop() -> None:
    """Mangum drives the app with ``asyncio.get_event_loop()``, which (Python 3.12+) warns or fails where no loop
    was set: give each thread (Lambda's main thread, the local runtime's pool threads) its own loop, once."""
    if getattr(_loops, "loop", None) is None:
        _loops.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(_loops.loop)


def operation_handler(router: APIRouter, operation_id: str) -> LambdaHandler:
    """A Lambda handler serving only ``operation_id`` (e.g. ``"SparkNodes_Get"``) of ``router`` — the one router
    its module imports, so a function loads no other operation's routes, models or services.

    The app is built on the first invocation and kept for the life of the execution environment. Unknown ids
    fail at that first build with ``ValueError`` (a test builds every handler of template.yaml).
    """
    adapter: list[Mangum] = []

    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        if not adapter:
            adapter.append(Mangum(build_app(operation_ids={operation_id}, routers=[router]), lifespan="off"))
        _ensure_event_loop()
        return adapter[0](event, context)

    handler.operation_id = operation_id  # type: ignore[attr-defined]
    handler.router = router  # type: ignore[attr-defined]
    return handler
