"""ARM error types. Each carries its HTTP status and stable PascalCase code (ARM_CONTRACT.md line 22).

Routes never build error bodies by hand: they raise one of these and the app's exception handler renders
``{"error": {"code", "message", "target"?, "details"?[]}}``.
"""

from __future__ import annotations

from typing import Any


class ArmError(Exception):
    """Base class: ``status`` (HTTP), ``code`` (stable ARM code), human ``message``, optional ``target``/``details``."""

    status: int = 500
    code: str = "InternalServerError"

    def __init__(
        self,
        message: str,
        *,
        target: str | None = None,
        details: list[dict[str, Any]] | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.target = target
        self.details = details or []
        self.headers = headers or {}
        if code:
            self.code = code

    def body(self) -> dict[str, Any]:
        """The ARM error body."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.target:
            error["target"] = self.target
        if self.details:
            error["details"] = self.details
        return {"error": error}


class BadRequest(ArmError):
    """400; default code ``InvalidRequestContent``."""

    status = 400
    code = "InvalidRequestContent"


class InvalidParameter(BadRequest):
    """400 ``InvalidParameter``: a query/path/body value is out of its domain."""

    code = "InvalidParameter"


class InvalidResourceName(BadRequest):
    """400 ``InvalidResourceName``."""

    code = "InvalidResourceName"


class UnsupportedApiVersion(BadRequest):
    """400 ``UnsupportedApiVersionValue``."""

    code = "UnsupportedApiVersionValue"


class MissingApiVersion(BadRequest):
    """400 ``MissingApiVersionParameter``: ``api-version`` present but empty."""

    code = "MissingApiVersionParameter"


class AuthenticationFailed(ArmError):
    """401 ``AuthenticationFailed``."""

    status = 401
    code = "AuthenticationFailed"


class AuthorizationFailed(ArmError):
    """403 ``AuthorizationFailed``: the caller may see the scope but its roles lack the action."""

    status = 403
    code = "AuthorizationFailed"


class ResourceNotFound(ArmError):
    """404 ``ResourceNotFound`` (also for anything outside the caller's scopes: existence is not leaked)."""

    status = 404
    code = "ResourceNotFound"


class Conflict(ArmError):
    """409 ``Conflict``."""

    status = 409
    code = "Conflict"


class AnotherOperationInProgress(Conflict):
    """409 ``AnotherOperationInProgress``."""

    code = "AnotherOperationInProgress"


class SubscriptionStateConflict(Conflict):
    """409 ``ReadOnlyDisabledSubscription`` (Warned/Suspended) or ``SubscriptionNotRegistered``."""

    code = "ReadOnlyDisabledSubscription"


class PreconditionFailed(ArmError):
    """412 ``PreconditionFailed`` (If-Match / If-None-Match)."""

    status = 412
    code = "PreconditionFailed"


class RequestTooLarge(ArmError):
    """413 ``RequestEntityTooLarge``: body above ``MAX_BODY_BYTES``."""

    status = 413
    code = "RequestEntityTooLarge"


class InternalServerError(ArmError):
    """500 with a fixed message: internals never reach the caller."""

    status = 500
    code = "InternalServerError"


def invalid_content(errors: list[dict[str, Any]]) -> BadRequest:
    """400 ``InvalidRequestContent`` from pydantic / FastAPI validation errors: one detail per problem, ``target``
    the dotted JSON path (``properties.hardwareSpecs.gpuCount``); the message of the first problem leads."""
    details = []
    for err in errors[:20]:
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body",)]
        target = ".".join(loc) or None
        message = str(err.get("msg", "Invalid value.")).removeprefix("Value error, ")
        details.append({"code": "InvalidRequestContent", "target": target, "message": message})
    first = details[0] if details else {"message": "The request content is not valid.", "target": None}
    where = f" at '{first['target']}'" if first.get("target") else ""
    return BadRequest(f"The request content is not valid{where}: {first['message']}", details=details)
