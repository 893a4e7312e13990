"""Long-running operations: waiting for one, with progress, and what a command prints at the end.

An accepted request (202, or 201 for an ARM PUT) carries ``Azure-AsyncOperation`` (the operation status URL,
``{"status": "Accepted"|"Running"|"Succeeded"|"Failed"|"Canceled", "error"?: {"code", "message"}}``), ``Location``
(the result URL: the resource when done, 204 after a delete) and ``Retry-After`` (seconds). :class:`Waiter` polls the
status URL, pausing as long as the server's latest ``Retry-After`` says (:data:`DEFAULT_RETRY_AFTER` without one).
A poll answered 429 (throttled) is retried by the client (client.py) after its ``Retry-After``; when the retries
run out, the wait stops with the 429 and says how to wait again — the operation itself goes on.

Progress goes to stderr: on a terminal one line redrawn in place (spinner, state, elapsed time); otherwise a plain
line each time the state changes. Ctrl-C stops waiting, not the operation: it prints how to wait again
(``operation wait URL``) and exits 130.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
import httpx

from itlc_accelerator.errors import ApiError, interrupted
from itlc_accelerator.output import emit
from itlc_accelerator.session import Session

FINAL_STATUSES = ("Succeeded", "Failed", "Canceled", "Preempted")  # a job's own status may be Preempted
#: Seconds between polls when the server names none.
DEFAULT_RETRY_AFTER = 5.0
#: The longest pause honoured between two polls, whatever ``Retry-After`` says.
MAX_RETRY_AFTER = 120.0
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
#: How often the terminal line is redrawn (seconds).
FRAME = 0.1


@dataclass(frozen=True)
class Operation:
    """Where an accepted request's operation can be followed."""

    status_url: str
    result_url: str | None = None
    retry_after: float | None = None

    @classmethod
    def from_response(cls, response: httpx.Response) -> Operation | None:
        """From the LRO headers of an accepted request; None when it carries none (nothing runs)."""
        status_url = response.headers.get("Azure-AsyncOperation")
        if not status_url:
            return None
        return cls(status_url, response.headers.get("Location"), retry_after(response))


def retry_after(response: httpx.Response) -> float | None:
    """The ``Retry-After`` seconds of a response (capped at :data:`MAX_RETRY_AFTER`), None without a number."""
    try:
        return min(max(float(response.headers["Retry-After"]), 0.0), MAX_RETRY_AFTER)
    except (KeyError, ValueError):
        return None


def elapsed(seconds: float) -> str:
    """``7s``, ``2m05s``, ``1h02m``."""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


#: One poll: ``(state, body, seconds until the next poll or None)``.
Probe = Callable[[], tuple[str, dict[str, Any], float | None]]


def status_probe(session: Session, status_url: str) -> Probe:
    """Polls an operation status URL: its ``status``, its body, the response's ``Retry-After``."""

    def probe() -> tuple[str, dict[str, Any], float | None]:
        response = session.client.send("GET", status_url)
        body = response.json()
        return str(body.get("status") or "Unknown"), body, retry_after(response)

    return probe


class Waiter:
    """Polls something to its end (Succeeded, Failed or Canceled) for ``label`` (``instance llama-1``), showing
    progress on stderr; ``resume`` is the command that waits again, printed when Ctrl-C stops the waiting."""

    def __init__(self, session: Session, label: str, resume: str):
        self.session = session
        self.label = label
        self.resume = resume
        self.runtime = session.runtime
        self.tty = self.runtime.is_tty(err=True)
        self._frame = 0
        self._shown: str | None = None

    def wait(self, probe: Probe, first_delay: float | None = None, every: float | None = None) -> dict[str, Any]:
        """The last body ``probe`` returned, once its state is final. Pauses ``first_delay`` before the first poll,
        then what the server said (``Retry-After``), else ``every``, else :data:`DEFAULT_RETRY_AFTER`. Ctrl-C:
        :func:`interrupted` (exit 130) naming :attr:`resume`."""
        start = self.runtime.clock()
        status, body = "Accepted", dict[str, Any]()
        delay = first_delay or 0.0
        try:
            while True:
                self._pause(delay, status, start)
                status, body, server_delay = probe()
                self._show(status, start)
                if status in FINAL_STATUSES:
                    break
                delay = server_delay or every or first_delay or DEFAULT_RETRY_AFTER
        except KeyboardInterrupt:
            self._clear()
            raise interrupted(
                f"Stopped waiting; {self.label} goes on ({status}). To wait again:\n  {self.resume}"
            ) from None
        except ApiError as error:
            if error.status != 429:
                raise
            # the client's retries of a throttled poll ran out: the operation is not affected, only the watching
            self._clear()
            raise ApiError(
                error.code, f"{error.message}. {self.label} goes on ({status}); to wait again:\n  {self.resume}", 429
            ) from None
        self._clear()
        click.echo(f"{self.label}: {status} ({elapsed(self.runtime.clock() - start)})", err=True)
        return body

    def _pause(self, seconds: float, status: str, start: float) -> None:
        if not self.tty:
            self.runtime.sleep(seconds)
            return
        until = self.runtime.clock() + seconds
        while True:
            self._draw(status, start)
            left = until - self.runtime.clock()
            if left <= 0:
                return
            self.runtime.sleep(min(FRAME, left))

    def _show(self, status: str, start: float) -> None:
        if self.tty:
            self._draw(status, start)
        elif status != self._shown and status not in FINAL_STATUSES:
            click.echo(f"{self.label}: {status} ({elapsed(self.runtime.clock() - start)})", err=True)
        self._shown = status

    def _draw(self, status: str, start: float) -> None:
        self._frame += 1
        spin = SPINNER[self._frame % len(SPINNER)]
        line = f"{spin} {self.label}: {status} {elapsed(self.runtime.clock() - start)}"
        click.echo(f"\r{line}\x1b[K", err=True, nl=False)

    def _clear(self) -> None:
        if self.tty:
            click.echo("\r\x1b[K", err=True, nl=False)


def raise_unless_succeeded(body: dict[str, Any]) -> None:
    """An operation that ended Failed or Canceled → :class:`ApiError` with its ``error`` (exit 1)."""
    status = body.get("status")
    if status == "Succeeded":
        return
    error = body.get("error") or {}
    if status == "Canceled":
        raise ApiError(error.get("code") or "OperationCanceled", error.get("message") or "The operation was canceled.")
    raise ApiError(error.get("code") or "OperationFailed", error.get("message") or f"The operation ended {status}.")


def finish(session: Session, response: httpx.Response, *, label: str, kind: str, wait: bool) -> None:
    """What every long-running command does with its accepted ``response``.

    ``wait`` False (``--no-wait``): print the operation (its status body) at once. Otherwise wait for it; when it
    succeeded print its result (``Location``: the resource, nothing after a delete) as ``kind``; when it failed or
    was canceled, exit 1 with its error. A response without the LRO headers has nothing to wait for: its own body
    is printed."""
    operation = Operation.from_response(response)
    if operation is None:
        emit(session.output, kind, response.json() if response.content else None)
        return
    if not wait:
        emit(session.output, "operation", session.client.get(operation.status_url))
        return
    resume = f"{session.prog} operation wait '{operation.status_url}'"
    waiter = Waiter(session, label, resume)
    raise_unless_succeeded(waiter.wait(status_probe(session, operation.status_url), operation.retry_after))
    if operation.result_url:
        result = session.client.send("GET", operation.result_url)
        emit(session.output, kind, result.json() if result.status_code == 200 and result.content else None)
