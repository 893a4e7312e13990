"""API Gateway Lambda REQUEST authorizer: bearer JWT → principal in the authorizer context.

A refused token raises ``Unauthorized`` (API Gateway's contract for a 401; the UNAUTHORIZED gateway response in
template.yaml renders the ARM error body). The reason is logged, never returned. An accepted token yields an Allow
policy for the whole API (authorisation per operation is the routes' RBAC) and ``context.principal`` (JSON).
"""

from __future__ import annotations

from typing import Any

from itl_accelerator.auth.principal import principal_from_claims
from itl_accelerator.auth.tokens import TokenValidator
from itl_accelerator.errors import AuthenticationFailed
from itl_accelerator.observability import logger, tracer
from itl_accelerator.settings import get_settings

_validators: list[TokenValidator] = []


def _validator() -> TokenValidator:
    if not _validators:
        _validators.append(TokenValidator(get_settings()))
    return _validators[0]


def _api_wide(method_arn: str) -> str:
    """``arn:...:{apiId}/{stage}/{verb}/{path}`` → ``arn:...:{apiId}/{stage}/*`` so a cached policy fits every route."""
    prefix, _, rest = method_arn.partition(":execute-api:")
    parts = rest.split("/")
    return f"{prefix}:execute-api:{'/'.join(parts[:2])}/*" if len(parts) >= 2 else method_arn


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """REQUEST authorizer event (``headers``, ``methodArn``) → IAM policy with ``context.principal``.

    Raises ``Exception("Unauthorized")`` for any failed check (API Gateway answers 401); lets
    :class:`IssuerUnavailable` escape when the issuer's keys cannot be had (API Gateway's AUTHORIZER_FAILURE, 503)."""
    headers = {k.lower(): v for k, v in (event.get("headers") or {}).items()}
    settings = get_settings()
    try:
        claims = _validator().validate(headers.get("authorization"))
    except AuthenticationFailed as exc:
        logger.info("Token refused", extra={"reason": exc.message, "source_ip": _source_ip(event)})
        raise Exception("Unauthorized") from None
    principal = principal_from_claims(
        claims, roles_claim_paths=settings.roles_claim_paths, subscriptions_claim=settings.subscriptions_claim
    )
    return {
        "principalId": principal.subject,
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {"Action": "execute-api:Invoke", "Effect": "Allow", "Resource": _api_wide(event.get("methodArn", "*"))}
            ],
        },
        "context": {"principal": principal.to_context()},
    }


def _source_ip(event: dict[str, Any]) -> str | None:
    return ((event.get("requestContext") or {}).get("identity") or {}).get("sourceIp")
