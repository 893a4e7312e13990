"""Powertools observability objects, created once for the whole process.

Every module logs through :data:`logger`; handlers are wrapped with :data:`tracer` (X-Ray, loaded only when tracing
is on: :class:`LambdaTracer`); scheduled handlers publish
what operators watch through :data:`metrics` (CloudWatch embedded metric format). The service name, log level and
metrics namespace are Powertools' own variables — ``POWERTOOLS_SERVICE_NAME``, ``POWERTOOLS_LOG_LEVEL``,
``POWERTOOLS_METRICS_NAMESPACE`` (template.yaml Globals set them) — read here as Powertools reads them, at import
(the one read of the environment outside settings.py: these objects exist before any settings do), with the
provider's defaults where nothing sets them.

The log keys an invocation sets (``inject_lambda_context``'s ``function_name``, ``request_id``, ``operation_id``...)
belong to that invocation's context (:class:`InvocationLocalFormatter`). In Lambda a process runs one invocation
at a time, so this changes nothing there; in the local runtime many functions' handlers run side by side in one
process, and each line still names its own function and request.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from aws_lambda_powertools.logging import Logger
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.metrics import Metrics

from itl_accelerator.settings import get_settings

_INVOCATION_KEYS: ContextVar[dict[str, Any] | None] = ContextVar("itl_invocation_log_keys", default=None)


class InvocationLocalFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON formatter whose key set (``log_format``) lives in a :class:`~contextvars.ContextVar`
    instead of on the shared formatter: a thread (or asyncio task) starts from the keys given at construction and
    what it appends, removes or clears stays its own."""

    _base: dict[str, Any] | None = None

    @property
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


#: The service name in every log line, trace and metric dimension: ``POWERTOOLS_SERVICE_NAME``, else this default.
SERVICE = os.environ.get("POWERTOOLS_SERVICE_NAME") or "itl-accelerator"
#: CloudWatch namespace of the provider's metrics: ``POWERTOOLS_METRICS_NAMESPACE``, else this default (the
#: template's alarms read the namespace the stack sets).
METRICS_NAMESPACE = os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "ITL/Accelerator"

Handler = Callable[[dict[str, Any], Any], Any]


class LambdaTracer:
    """X-Ray tracing of handlers, through Powertools' ``Tracer`` — created at a handler's first invocation, and only
    when tracing is on, so the X-Ray SDK (about half a second of import) is never loaded where nothing is traced.

    Tracing is off when ``POWERTOOLS_TRACE_DISABLED`` is true (settings; the local runtime and tests set it), as
    for Powertools itself; template.yaml turns X-Ray on for every function (``Tracing: Active``), where this creates
    the ``Tracer`` on the first invocation.
    """

    def __init__(self, service: str):
        self._service = service
        self._tracer: Any = None

    @property
    def enabled(self) -> bool:
        return not get_settings().powertools_trace_disabled

    def capture_lambda_handler(self, capture_response: bool = True) -> Callable[[Handler], Handler]:
        """Decorator: the handler, traced (a subsegment per invocation, cold start annotated) when tracing is on."""

        def decorate(handler: Handler) -> Handler:
            traced: list[Handler] = []

            @functools.wraps(handler)
            def run(event: dict[str, Any], context: Any) -> Any:
                # Every invocation, not only the first: a misconfigured function fails each call naming the
                # variable (SettingMissing/SettingInvalid are never cached; a good read is an lru_cache hit).
                get_settings()
                if not traced:
                    traced.append(self._traced(handler, capture_response))
                return traced[0](event, context)

            return run

        return decorate

    def _traced(self, handler: Handler, capture_response: bool) -> Handler:
        if not self.enabled:
            return handler
        if self._tracer is None:
            from aws_lambda_powertools.tracing import Tracer

            self._tracer = Tracer(service=self._service)
        traced: Handler = self._tracer.capture_lambda_handler(handler, capture_response=capture_response)
        return traced


logger = Logger(service=SERVICE, logger_formatter=InvocationLocalFormatter())
tracer = LambdaTracer(SERVICE)
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE)


def publish_counts(target: Metrics, prefix: str, counts: Mapping[str, int | float]) -> None:
    """Each non-zero count of a run as the metric ``{prefix}{Name}`` (``windows_written`` →
    ``UsageSyncWindowsWritten``). A zero is left out: CloudWatch bills a custom metric for every hour it receives a
    value (0.30 USD a month for one published all month), and the idle runs of an unused deployment count only
    zeros (benchmarks/idle_cost.py). An alarm on such a count treats missing data as not breaching
    (tests/unit/test_slo_template.py keeps it so); a metric that must arrive every run is published by name."""
    from aws_lambda_powertools.metrics import MetricUnit

    for name, value in counts.items():
        if not value:
            continue
        camel = "".join(part[:1].upper() + part[1:] for part in name.split("_"))
        target.add_metric(name=f"{prefix}{camel}", unit=MetricUnit.Count, value=value)


def did_something(report: Any) -> bool:
    """Whether a scheduled run's report shows work done: a non-zero count (an int, not a bool) or a non-empty list
    anywhere in it. Floats (a lag in hours, a time) are readings, not work: an idle run reads them too."""
    if isinstance(report, dict):
        return any(did_something(v) for v in report.values())
    if isinstance(report, list):
        return bool(report)
    return isinstance(report, int) and not isinstance(report, bool) and report != 0


def log_metrics(handler: Callable[..., Any]) -> Callable[..., Any]:
    """Powertools' ``metrics.log_metrics`` (the run's metrics flushed as one EMF line when it ends), and then the
    metric set cleared whatever happened: with ``POWERTOOLS_METRICS_DISABLED`` (the local runtime, the tests)
    Powertools neither prints nor clears, so every run's metrics piled up in the process and came out at once as
    EMF lines when a metric reached 100 values — on a console that was to print nothing."""
    flushed = metrics.log_metrics(handler)
    # A run with nothing to count (an idle schedule, a warm call that added no metric) is normal here: Powertools'
    # UserWarning for it went to stderr (the local console, CloudWatch) with a venv path and said nothing useful.
    # The filter Powertools' documentation gives for it.
    warnings.filterwarnings("ignore", "No application metrics to publish")

    @functools.wraps(handler)
    def run(event: Any, context: Any) -> Any:
        try:
            return flushed(event, context)
        finally:
            metrics.clear_metrics()

    return run
