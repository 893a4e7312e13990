"""What a command ends with when it does not succeed, and its exit code.

- :class:`ApiError` (exit 1): the API answered with an error — stderr ``ERROR: <code>: <message>``, the ARM error body's
  ``error.code`` and ``error.message`` — or could not be reached (code ``ConnectionFailed``), or a long-running
  operation ended ``Failed``/``Canceled`` (its ``error``).
- click's usage errors (exit 2): a missing or bad option, as click reports them.
- :func:`interrupted` (exit 130): Ctrl-C while waiting; the operation goes on.
"""

from __future__ import annotations

from typing import IO, Any

import click

#: Exit codes (documented in docs/CLI.md).
OK, API_ERROR, USAGE_ERROR, INTERRUPTED = 0, 1, 2, 130


class ApiError(click.ClickException):
    """An error the API (or the way to it) reported: printed as ``ERROR: <code>: <message>``, exit 1."""

    exit_code = API_ERROR

    def __init__(self, code: str, message: str, status: int | None = None):
        super().__init__(message)
        self.code = code
        self.status = status

    def format_message(self) -> str:
        return f"{self.code}: {self.message}"

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"ERROR: {self.format_message()}", err=file is None, file=file)

    @classmethod
    def from_body(cls, status: int, body: Any, text: str) -> ApiError:
        """From an ARM error body ``{"error": {"code", "message"}}``; any other body becomes ``HttpError<status>``
        with the start of its text."""
        error = body.get("error") if isinstance(body, dict) else None
        if isinstance(error, dict) and error.get("code"):
            return cls(str(error["code"]), str(error.get("message") or ""), status)
        snippet = " ".join(text.split())[:300] or "(no body)"
        return cls(f"HttpError{status}", snippet, status)


def interrupted(message: str) -> click.exceptions.Exit:
    """Ctrl-C while waiting: ``message`` (how to resume) on stderr; the caller raises the result (exit 130)."""
    click.echo(message, err=True)
    return click.exceptions.Exit(INTERRUPTED)
