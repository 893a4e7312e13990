"""Named DGX Platform failures. Step Functions ``Retry`` matches these class names (``errorType``)."""

from __future__ import annotations


class DgxError(Exception):
    """Base. ``status`` is the HTTP status when there was a response."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class DgxTransientError(DgxError):
    """Worth retrying: connection failure, timeout, 429 (``retry_after`` seconds when given) or 5xx."""


class DgxPermanentError(DgxError):
    """Not worth retrying: any other 4xx (bad request, unknown model, no capacity on the platform...)."""


class DgxNotFound(DgxPermanentError):
    """404: the instance or job does not exist (deleting it again is a success)."""
