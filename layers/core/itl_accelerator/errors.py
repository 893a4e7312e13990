"""Every error code the API answers with, one class each: its HTTP status and stable PascalCase code
(ARM_CONTRACT.md line 22).

This module is the only place a code is written. Routes never build error bodies by hand: they raise one of these
and the app's exception handler renders ``{"error": {"code", "message", "target"?, "details"?[]}}``; each route
documents the classes it raises (``api/responses.errors``), and tests/unit/test_error_codes.py fails when a code
here is missing from docs/openapi.json or a code is spelled anywhere else. API Gateway's own answers (the
template's ``GatewayResponses``) are classes here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.target = target
        self.details = details or []
        self.headers = headers or {}

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


class ParentResourceNotFound(ResourceNotFound):
    """404 ``ParentResourceNotFound``: the parent named in the path (a node) does not exist or is out of scope."""

    code = "ParentResourceNotFound"


class RequestBlocked(ArmError):
    """403 ``RequestBlocked``: the API's web application firewall refused the request (template.yaml ``ApiWebAcl``:
    too many requests from one address, or a known-bad input); API Gateway's WAF_FILTERED answer, never a function's."""

    status = 403
    code = "RequestBlocked"


class BillingExportNotFound(ResourceNotFound):
    """404 ``BillingExportNotFound``: a day whose billing file does not exist yet (not exported: a day is exported
    after it ends) or never will through the API (exported before per-subscription billing files existed)."""

    code = "BillingExportNotFound"


class NotFound(ArmError):
    """404 ``NotFound``: no route matches the path and method (API Gateway answers it before any function)."""

    status = 404
    code = "NotFound"


class Conflict(ArmError):
    """409 ``Conflict``."""

    status = 409
    code = "Conflict"


class AnotherOperationInProgress(Conflict):
    """409 ``AnotherOperationInProgress``."""

    code = "AnotherOperationInProgress"


class ReadOnlyDisabledSubscription(Conflict):
    """409 ``ReadOnlyDisabledSubscription``: the subscription is Warned or Suspended (GET and DELETE only)."""

    code = "ReadOnlyDisabledSubscription"


class SubscriptionNotRegistered(Conflict):
    """409 ``SubscriptionNotRegistered``: the subscription is Unregistered or Deleted for this provider."""

    code = "SubscriptionNotRegistered"


class InsufficientCapacity(Conflict):
    """409 ``InsufficientCapacity``: the node cannot hold the request now; the message says what is free."""

    code = "InsufficientCapacity"


class CapacityReserved(Conflict):
    """409 ``CapacityReserved``: the node has the devices free now, but capacity reservations booked them for a window
    to come, and what was asked holds them open-ended (an instance); the message names the windows (issue 44)."""

    code = "CapacityReserved"


class AcceleratorNotSupported(Conflict):
    """409 ``AcceleratorNotSupported``: what was asked cannot run on the node's kind of accelerator — an Ollama
    instance on a node that holds no NVIDIA or AMD GPUs (domain/accelerators.py ``runs_ollama``); the message says
    which accelerators it runs on and what the node holds."""

    code = "AcceleratorNotSupported"


class QuotaExceeded(Conflict):
    """409 ``QuotaExceeded``: the allocation would take the subscription past a GPU quota; the message names the
    quota, its limit and what is in use."""

    code = "QuotaExceeded"


class BudgetExceeded(Conflict):
    """409 ``BudgetExceeded``: a budget of the subscription is spent this month and refuses new allocations; the
    message names it and its amount."""

    code = "BudgetExceeded"


class BudgetCurrencyMismatch(Conflict):
    """409 ``BudgetCurrencyMismatch``: a budget covering the work counts another currency than the node bills in (a
    budget sees all the spend it covers, in its one currency: services/common/budgets.py)."""

    code = "BudgetCurrencyMismatch"


class NodeNotAvailable(Conflict):
    """409 ``NodeNotAvailable``: the node is Cordoned, in Maintenance or Offline and takes no new work."""

    code = "NodeNotAvailable"


class NodeReserved(Conflict):
    """409 ``NodeReserved``: the change would take a node out of service (delete it, make it unavailable, shrink or
    change its devices) under capacity reservations not yet over; the message names them. ``?force=true`` ends them,
    billed only for what they served."""

    code = "NodeReserved"


class LogsNotAvailable(Conflict):
    """409 ``LogsNotAvailable``: the job runs on a platform that serves no logs (a Slurm cluster: slurmrestd serves
    no output files; the message names the cluster and where the output is, docs/SLURM.md "Logs")."""

    code = "LogsNotAvailable"


class SlurmNodeTaken(Conflict):
    """409 ``SlurmNodeTaken``: the Slurm node a node's ``properties.backend`` names is another provider node's already
    (one Slurm node is one provider node: a second would sell, drain and resume what another supplier registered).
    The message names the cluster and the Slurm node, never the other node."""

    code = "SlurmNodeTaken"


class PropertyChangeNotAllowed(Conflict):
    """409 ``PropertyChangeNotAllowed``: a property that cannot change after creation was changed."""

    code = "PropertyChangeNotAllowed"


#: Codes of a failed long-running operation's ``error`` (the operation status body, and the Location URL's 409
#: through :meth:`OperationFailed.of`); a failure the DGX Platform reports keeps the platform's own code.
OPERATION_ERROR_CODES: dict[str, str] = {
    "ProvisioningFailed": "Provisioning failed for a reason the provider could not name (an internal error).",
    "DgxPlatformRefused": "The DGX Platform refused the request (its message follows).",
    "DgxPlatformUnavailable": "The DGX Platform stayed unavailable; retries ran out.",
    "ProvisioningTimedOut": "The instance was not ready within the provisioning timeout.",
    "ProvisioningInterrupted": "The provisioning workflow ended before the instance was ready (the reconciler ended it).",
    "InstanceLost": "The platform (the DGX Platform, or a Slurm cluster) no longer knows the instance.",
    "DeprovisioningFailed": "The DGX Platform did not delete the instance.",
    "DeprovisioningTimedOut": "The instance was not deleted within the timeout.",
    "JobFailed": "The job ended Failed (its statusReason says why: inadmissible, DGX error, exit code, max duration).",
    "JobCanceled": "The job was canceled.",
    "JobAlreadyFinished": "A cancel came after the job had ended otherwise.",
}


class OperationFailed(Conflict):
    """409 from a Location URL: the long-running operation failed. Built with :meth:`of`, its ``code`` is the
    operation's own error code (one of :data:`OPERATION_ERROR_CODES`, or the DGX Platform's) — what the synchronous
    call would have answered (ARM_CONTRACT.md line 15); ``OperationFailed`` when the operation gave none."""

    code = "OperationFailed"

    @classmethod
    def of(cls, error: dict[str, Any] | None) -> OperationFailed:
        """The 409 of an operation whose status body holds ``error`` (``{"code", "message"}``)."""
        failed = cls(str((error or {}).get("message") or "The operation failed."))
        failed.code = str((error or {}).get("code") or cls.code)
        return failed


class OperationCanceled(Conflict):
    """409 ``OperationCanceled`` from a Location URL: the long-running operation was canceled."""

    code = "OperationCanceled"


class PreconditionFailed(ArmError):
    """412 ``PreconditionFailed`` (If-Match / If-None-Match)."""

    status = 412
    code = "PreconditionFailed"


class RequestTooLarge(ArmError):
    """413 ``RequestEntityTooLarge``: body above ``MAX_BODY_BYTES``."""

    status = 413
    code = "RequestEntityTooLarge"


class TooManyRequests(ArmError):
    """429 ``TooManyRequests`` with ``Retry-After`` (seconds): a request rate limit of the subscription or of the
    caller in it is reached (services/api/rate_limits.py), or API Gateway's stage throttle refused the call (its
    ``THROTTLED`` gateway response)."""

    status = 429
    code = "TooManyRequests"


class ServiceUnavailable(ArmError):
    """503 ``ServiceUnavailable``: the token could not be verified now (the issuer's keys are unreachable), or a DGX
    callback could not be handled now (the platform sends it again)."""

    status = 503
    code = "ServiceUnavailable"


class InternalServerError(ArmError):
    """500 with a fixed message: internals never reach the caller."""

    status = 500
    code = "InternalServerError"


def all_error_types() -> list[type[ArmError]]:
    """Every error class of this module (the documented codes)."""
    found: list[type[ArmError]] = []
    pending: list[type[ArmError]] = [ArmError]
    while pending:
        cls = pending.pop()
        if cls.__module__ == __name__ and cls not in found:
            found.append(cls)
        pending.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: (c.status, c.code))


def invalid_content(errors: Sequence[Mapping[str, Any]]) -> BadRequest:
    """400 ``InvalidRequestContent`` from pydantic / FastAPI validation errors: one detail per problem, ``target``
    the dotted JSON path (``properties.hardwareSpecs.gpuCount``); the message of the first problem leads."""
    details = []
    for err in errors[:20]:
        loc = [str(p) for p in err.get("loc", ()) if p not in ("body",)]
        target = ".".join(loc) or None
        message = str(err.get("msg", "Invalid value.")).removeprefix("Value error, ")
        if tuple(err.get("loc", ())) == ("body",) and err.get("type") == "missing":
            message = "The request has no body: a JSON object is required"  # not pydantic's bare "Field required"
        details.append({"code": "InvalidRequestContent", "target": target, "message": message})
    first = details[0] if details else {"message": "The request content is not valid.", "target": None}
    where = f" at '{first['target']}'" if first.get("target") else ""
    return BadRequest(f"The request content is not valid{where}: {first['message']}", details=details)
