"""What ``itl-local up`` shows while it serves, as ``sam local start-api`` does: one line per API request and per
workflow step, the functions' own (Powertools JSON) log lines at ``LOG_LEVEL``, and below a logged exception its
stack trace, readable. ``--quiet`` shows none of it.

    12:03:04 PUT /subscriptions/sub-123/.../sparkNodes/dgx-1 201 SparkNodesCreateOrUpdateFunction 43ms req=6f1c...
    12:03:06 step InstancePollFunction op=0d9e... ok 12ms
    12:03:08 GET /subscriptions/sub-123/.../unknownThings 404 - 1ms req=2b7a... (MISSING_AUTHENTICATION_TOKEN)
    12:03:09 event Job State Changed /subscriptions/sub-123/.../sparkJobs/job-1 Running -> Succeeded

Local runtime only: nothing here is shipped.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from typing import Any, TextIO


class Console:
    """Writes whole lines to ``stream`` (stdout), one write each, so threads never interleave within a line."""

    def __init__(self, stream: TextIO | None = None):
        self._out = stream or sys.stdout
        self._lock = threading.Lock()

    def write(self, text: str) -> None:
        with self._lock:
            self._out.write(text.rstrip("\n") + "\n")
            self._out.flush()

    def request(
        self,
        method: str,
        path: str,
        status: int,
        function: str | None,
        duration_ms: float,
        request_id: str | None,
        gateway_response: str | None = None,
    ) -> None:
        """One API request. ``function``: the route's logical id (None: no route); ``gateway_response``: the kind
        when API Gateway answered itself (UNAUTHORIZED, DEFAULT_5XX...)."""
        line = f"{_now()} {method} {path} {status} {function or '-'} {duration_ms:.0f}ms req={request_id or '-'}"
        self.write(line + (f" ({gateway_response})" if gateway_response else ""))

    def step(self, function: str, operation_id: str | None, outcome: str, duration_ms: float) -> None:
        """One workflow Task invocation: ``outcome`` is ``ok`` or the errorType the state machine sees."""
        self.write(f"{_now()} step {function} op={operation_id or '-'} {outcome} {duration_ms:.0f}ms")

    def schedule(self, name: str, outcome: str, duration_ms: float) -> None:
        """One firing of a template schedule: ``outcome`` is ``ok`` or the exception's type name."""
        self.write(f"{_now()} schedule {name} {outcome} {duration_ms:.0f}ms")

    def stream(self, function: str, records: int, outcome: str, duration_ms: float) -> None:
        """One batch of the table's stream delivered to a function: ``outcome`` is ``ok`` or the exception's type."""
        self.write(f"{_now()} stream {function} records={records} {outcome} {duration_ms:.0f}ms")

    def event(self, event: dict[str, Any]) -> None:
        """One event as a rule on the bus received it: its detail-type, then — a state change — the resource's ARM
        id and the change (``(new)`` before a resource's first state), or — a budget's notice — the budget, what it
        reached and its spend (docs/EVENTS.md)."""
        detail = event.get("detail") or {}
        if "budgetId" in detail:
            reached = f"threshold {detail['threshold']} %" if detail.get("threshold") else "the amount"
            action = f", action {detail['action']}" if detail.get("action") else ""
            what = (
                f"{detail.get('budgetId')} reached {reached}: {detail.get('spend')} of {detail.get('amount')} "
                f"{detail.get('currency')} in {detail.get('period')}{action}"
            )
        else:
            change = f"{detail.get('previousState') or '(new)'} -> {detail.get('state')}"
            what = f"{detail.get('resourceId')} {change}"
        self.write(f"{_now()} event {event.get('detail-type')} {what}")

    def note(self, text: str) -> None:
        """A line of the stack's own (the ITL gateway registration, for one)."""
        self.write(f"{_now()} {text}")

    def show_function_logs(self, logger: Any) -> logging.Handler:
        """Keep the functions' log lines (``logger``: the Powertools logger, at POWERTOOLS_LOG_LEVEL) and print the
        stack trace of each record that carries one (an unhandled error → 500, a crashed function → 502). Returns
        the handler, added beside Powertools' own."""
        handler = _TracebackHandler(self)
        logger.addHandler(handler)
        return handler

    @staticmethod
    def silence_function_logs(logger: Any) -> None:
        """``--quiet``: no function log lines either."""
        logger.addFilter(lambda record: False)


class _TracebackHandler(logging.Handler):
    """Beside Powertools' own handler (whose JSON line holds the trace as one escaped string): the trace as text."""

    def __init__(self, console: Console):
        super().__init__()
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.console.write("".join(traceback.format_exception(*record.exc_info)))


def _now() -> str:
    return time.strftime("%H:%M:%S")
