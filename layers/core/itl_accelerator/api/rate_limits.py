"""Request rate limits at the API: which requests count, and the ARM headers that tell a client what is left.

:func:`count_request` runs in :class:`~itl_accelerator.api.routing.ArmRoute` before anything else a route does
(authorisation, parameters, body): once the caller is known (the authorizer's principal) and the path's
subscription id is valid. Not counted: a request without a principal (the route answers 401), one whose subscription
id is invalid (the route answers 400), routes without a subscription (``GET /providers/ITL.Accelerator/operations``)
— and, never reaching a function, CORS preflights and whatever API Gateway refuses itself.

Headers (ARM's names; "Understand how Azure Resource Manager throttles requests", "Remaining requests"): a read
carries the reads ones, a write the writes ones, on every answer of a counted request, the 429 and any error
included:

- ``x-ms-ratelimit-remaining-subscription-reads`` / ``-writes``: what the caller may still send in this subscription
  this minute (ARM scopes these "to the security principal making the requests and the subscription ID");
- ``x-ms-ratelimit-remaining-subscription-global-reads`` / ``-global-writes``: what the subscription, every caller
  together, may still send (ARM's "global" limits), only to a caller holding a scope in it.
"""

from __future__ import annotations

from starlette.requests import Request

from itl_accelerator.api.deps import get_context, get_wiring
from itl_accelerator.api.protocol import RESPONSE_HEADERS
from itl_accelerator.arm import validate_subscription_id
from itl_accelerator.domain.rate_limits import RequestKind
from itl_accelerator.errors import ArmError
from itl_accelerator.services.api.rate_limits import Allowance

CALLER_REMAINING = "x-ms-ratelimit-remaining-subscription-{kind}"
SUBSCRIPTION_REMAINING = "x-ms-ratelimit-remaining-subscription-global-{kind}"
#: Every rate-limit header name (the CORS exposed headers: the portal may read them).
HEADER_NAMES = tuple(
    name.format(kind=kind.value) for name in (CALLER_REMAINING, SUBSCRIPTION_REMAINING) for kind in RequestKind
)


def allowance_headers(allowance: Allowance) -> list[tuple[bytes, bytes]]:
    """The ARM headers of what ``allowance`` leaves (none for a limit that is off or was not counted)."""
    headers = []
    if allowance.caller_remaining is not None:
        headers.append((CALLER_REMAINING.format(kind=allowance.kind.value), allowance.caller_remaining))
    if allowance.subscription_remaining is not None:
        headers.append((SUBSCRIPTION_REMAINING.format(kind=allowance.kind.value), allowance.subscription_remaining))
    return [(name.encode(), str(value).encode()) for name, value in headers]


def count_request(request: Request) -> None:
    """Count ``request`` against its subscription's and its caller's limits (module docstring), remember the
    headers for its response, and raise the 429 ``TooManyRequests`` when a limit is exceeded."""
    subscription_id = request.path_params.get("subscriptionId")
    if subscription_id is None:
        return
    try:
        validate_subscription_id(subscription_id)
        ctx = get_context(request)
    except ArmError:
        return  # not counted: the route refuses it itself (400, 401)
    principal = ctx.principal
    allowance = get_wiring(request).rate_limiter.admit(
        principal.subject,
        subscription_id,
        RequestKind.of(request.method),
        in_scope=principal.can_see(subscription_id),
    )
    request.scope.setdefault("state", {})[RESPONSE_HEADERS] = allowance_headers(allowance)
    if allowance.refusal is not None:
        raise allowance.refusal
