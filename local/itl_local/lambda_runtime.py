"""What the Lambda service gives a handler, locally: a context object and a worker pool whose threads each have
an event loop (Mangum needs one), so invocations run concurrently like separate execution environments.

Every invocation runs with :func:`current_function` naming its function, so what a handler does (its AWS calls)
can be told apart by function although all of them share one process here (itl_local.iam records them).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any


@dataclass
class LambdaContext:
    """The attributes Powertools and Mangum read from the Lambda context object."""

    function_name: str
    memory_limit_in_mb: int = 512
    timeout_seconds: int = 10
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = "/aws/lambda/local"
    log_stream_name: str = "local"
    _deadline: float = field(default=0.0, repr=False)

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.timeout_seconds

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:123456789012:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _thread_loop() -> None:
    asyncio.set_event_loop(asyncio.new_event_loop())


#: Concurrent executions locally. In AWS every concurrent invocation gets an execution environment of its own (up
#: to the account's concurrency); a small shared pool made requests queue behind slow workflow steps instead.
DEFAULT_CONCURRENCY = 64


def invocation_pool(workers: int = DEFAULT_CONCURRENCY) -> ThreadPoolExecutor:
    """Threads for handler invocations (``workers`` = concurrent executions; threads start as needed)."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lambda", initializer=_thread_loop)


_function: ContextVar[str | None] = ContextVar("itl_local_function", default=None)
_observers: list[Callable[[str], None]] = []


def current_function() -> str | None:
    """The function (logical id) whose invocation runs in this context; None outside any invocation. Threads and
    tasks the handler starts through asyncio or anyio inherit it; a bare ``threading.Thread`` does not."""
    return _function.get()


def observe_invocations(observer: Callable[[str], None]) -> Callable[[], None]:
    """Call ``observer(function_name)`` as each invocation starts; returns the function that stops it."""
    _observers.append(observer)
    return lambda: _observers.remove(observer)


def invoke(handler: Any, event: dict[str, Any], function_name: str, timeout_seconds: int = 10) -> Any:
    """Call ``handler(event, context)`` as the Lambda runtime would, with ``timeout_seconds`` (the function's
    ``Timeout`` in template.yaml) as the time the context reports left."""
    token = _function.set(function_name)
    try:
        for observer in list(_observers):
            observer(function_name)
        return handler(event, LambdaContext(function_name=function_name, timeout_seconds=timeout_seconds))
    finally:
        _function.reset(token)
