"""Who calls: the subject a quote is bound to, and the roles and ARM scopes the caller's token carries.

Over HTTP (the Lambda function) the caller is the principal the API Gateway authorizer verified and put in the
event (``requestContext.authorizer.principal``). Over stdio it is read from the user's own token without verifying
it: the stdio server runs as the user, and every API call verifies the token anyway. Either way the API decides
what the caller may do; this is for binding quotes and for telling the assistant which subscriptions exist.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, field
from typing import Any

_SCOPE = re.compile(r"^/subscriptions/([^/]+)(?:/resourceGroups/([^/]+))?/?$", re.IGNORECASE)
#: Where the provider reads roles (its default ROLES_CLAIM_PATHS).
ROLE_CLAIM_PATHS = ("realm_access.roles", "resource_access.itl-accelerator.roles")


@dataclass(frozen=True)
class Caller:
    """``subject`` (the token's ``sub``), ``roles`` (ITL role names) and ``scopes`` (ARM scopes:
    ``/subscriptions/{sub}`` or ``/subscriptions/{sub}/resourceGroups/{rg}``)."""

    subject: str
    display_name: str = ""
    roles: tuple[str, ...] = ()
    scopes: tuple[str, ...] = field(default=())

    def subscriptions(self) -> list[str]:
        """The subscription ids the scopes name, in order, once each."""
        seen: list[str] = []
        for scope in self.scopes:
            match = _SCOPE.match(scope)
            if match and match[1] not in seen:
                seen.append(match[1])
        return seen

    def to_dict(self) -> dict[str, Any]:
        return {
            "subject": self.subject,
            "displayName": self.display_name,
            "roles": list(self.roles),
            "scopes": list(self.scopes),
        }


def from_authorizer_context(raw: str) -> Caller:
    """The authorizer's ``principal`` JSON (``{subject, display_name, roles, scopes: [{subscription_id,
    resource_group}]}``) → :class:`Caller`. ``ValueError`` when it is not that."""
    data = json.loads(raw)
    if not isinstance(data, dict) or not data.get("subject"):
        raise ValueError("the authorizer context names no subject")
    scopes = []
    for scope in data.get("scopes") or []:
        path = f"/subscriptions/{scope['subscription_id']}"
        if scope.get("resource_group"):
            path += f"/resourceGroups/{scope['resource_group']}"
        scopes.append(path)
    return Caller(
        subject=str(data["subject"]),
        display_name=str(data.get("display_name") or ""),
        roles=tuple(str(r) for r in data.get("roles") or []),
        scopes=tuple(scopes),
    )


def token_claims(token: str) -> dict[str, Any]:
    """The claims of a JWT, decoded without verifying it; ``ValueError`` when it is not a JWT."""
    parts = token.split(".")
    try:
        if len(parts) != 3:
            raise ValueError
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        raise ValueError("the token is not a JWT") from None
    if not isinstance(claims, dict):
        raise ValueError("the token is not a JWT")
    return claims


def _claim(claims: dict[str, Any], path: str) -> Any:
    node: Any = claims
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def from_token(token: str) -> Caller:
    """The caller a bearer token names (unverified: see the module docstring). ``ValueError`` when the token is not
    a JWT with a ``sub``."""
    claims = token_claims(token)
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise ValueError("the token has no 'sub' claim")
    roles: list[str] = []
    for path in ROLE_CLAIM_PATHS:
        value = _claim(claims, path)
        roles.extend(str(r) for r in value or [] if isinstance(value, list) and str(r) not in roles)
    scopes = claims.get("subscriptions") or []
    return Caller(
        subject=subject,
        display_name=str(claims.get("name") or claims.get("preferred_username") or ""),
        roles=tuple(roles),
        scopes=tuple(str(s) for s in scopes if isinstance(s, str)),
    )
