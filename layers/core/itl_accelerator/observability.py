"""Powertools observability objects, created once for the whole process.

Every module logs through :data:`logger`; handlers are wrapped with :data:`tracer`; scheduled handlers publish
what operators watch through :data:`metrics` (CloudWatch embedded metric format). Service name and log level
come from ``POWERTOOLS_SERVICE_NAME`` / ``POWERTOOLS_LOG_LEVEL`` (set in template.yaml Globals).

The log keys an invocation sets (``inject_lambda_context``'s ``function_name``, ``request_id``, ``operation_id``...)
belong to that invocation's context (:class:`InvocationLocalFormatter`). In Lambda a process runs one invocation
at a time, so this changes nothing there; in the local runtime many functions' handlers run side by side in one
process, and each line still names its own function and request.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

_INVOCATION_KEYS: ContextVar[dict[str, Any] | None] = ContextVar("itl_invocation_log_keys", default=None)


class InvocationLocalFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON formatter whose key set (``log_format``) lives in a :class:`~contextvars.ContextVar`
    instead of on the shared formatter: a thread (or asyncio task) starts from the keys given at construction and
    what it appends, removes or clears stays its own."""

    _base: dict[str, Any] | None = None

    @property  # type: ignore[override]
    def log_format(self) -> dict[str, Any]:
        keys = _INVOCATION_KEYS.get()
        if keys is None:
            keys = dict(self._base or {})
            _INVOCATION_KEYS.set(keys)
        return keys

    @log_format.setter
    def log_format(self, value: dict[str, Any]) -> None:
        if self._base is None:  # the constructor's key set (with what the Logger adds): every context's start
            self._base = value
        _INVOCATION_KEYS.set(value)


SERVICE = "itl-accelerator"
#: CloudWatch namespace of the provider's metrics (EMF lines Powertools prints; template.yaml sets the same).
METRICS_NAMESPACE = "ITL/Accelerator"

logger = Logger(service=SERVICE, logger_formatter=InvocationLocalFormatter())
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE)
