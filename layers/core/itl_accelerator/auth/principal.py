"""The authenticated caller: who it is, its roles, and the ARM scopes it may act in.

The authorizer builds a :class:`Principal` from a validated token and hands it to the function through the API
Gateway authorizer context (as JSON, since context values must be flat strings).
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

ActorType = Literal["User", "Application"]

_SCOPE = re.compile(r"^/subscriptions/(?P<sub>[^/]+)(?:/resourceGroups/(?P<rg>[^/]+))?/?$", re.IGNORECASE)


class ArmScope(BaseModel):
    """An ARM scope the caller holds: a whole subscription (``resource_group`` None) or one resource group."""

    subscription_id: str
    resource_group: str | None = None

    @classmethod
    def parse(cls, value: str) -> ArmScope | None:
        """``/subscriptions/{sub}`` or ``/subscriptions/{sub}/resourceGroups/{rg}`` → scope; anything else → None."""
        match = _SCOPE.match(value.strip()) if isinstance(value, str) else None
        if not match:
            return None
        return cls(subscription_id=match["sub"], resource_group=match["rg"])

    def covers(self, subscription_id: str, resource_group: str | None) -> bool:
        """True when this scope includes the subscription (and resource group, if given); names case-insensitive."""
        if self.subscription_id.lower() != subscription_id.lower():
            return False
        if self.resource_group is None:
            return True
        return resource_group is not None and self.resource_group.lower() == resource_group.lower()


class Principal(BaseModel):
    """The caller. ``subject`` is the token's ``sub``; ``roles`` are the ITL role names it carries."""

    subject: str
    display_name: str = ""
    actor_type: ActorType = "User"
    roles: list[str] = Field(default_factory=list)
    scopes: list[ArmScope] = Field(default_factory=list)

    def can_see(self, subscription_id: str, resource_group: str | None = None) -> bool:
        """Whether any held scope covers the subscription / resource group (None: the subscription at all)."""
        if resource_group is None:
            return any(s.subscription_id.lower() == subscription_id.lower() for s in self.scopes)
        return any(s.covers(subscription_id, resource_group) for s in self.scopes)

    def holds_subscription(self, subscription_id: str) -> bool:
        """Whether the caller holds the whole subscription (not only some of its resource groups)."""
        return any(s.covers(subscription_id, None) for s in self.scopes)

    def resource_groups_in(self, subscription_id: str) -> list[str] | None:
        """The resource groups the caller may see in a subscription; None when it holds the whole subscription."""
        if self.holds_subscription(subscription_id):
            return None
        return [
            s.resource_group
            for s in self.scopes
            if s.resource_group and s.subscription_id.lower() == subscription_id.lower()
        ]

    def to_context(self) -> str:
        """Serialise for the API Gateway authorizer context (a single string value)."""
        return self.model_dump_json()

    @classmethod
    def from_context(cls, value: str) -> Principal:
        """Inverse of :meth:`to_context`."""
        return cls.model_validate(json.loads(value))


def _claim_at(claims: dict[str, Any], path: str) -> Any:
    """Value at a dotted claim path (``realm_access.roles``); keys may contain '-' but not '.'."""
    node: Any = claims
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def principal_from_claims(
    claims: dict[str, Any], *, roles_claim_paths: list[str], subscriptions_claim: str
) -> Principal:
    """Map validated JWT claims to a :class:`Principal`.

    Roles are the union of every string list found at ``roles_claim_paths`` (default Keycloak realm and client
    roles). Scopes come from ``subscriptions_claim``: a list of ARM scope strings (or one space-separated string);
    malformed entries are dropped. Keycloak service accounts (``preferred_username`` ``service-account-*``) are
    actor type ``Application``.
    """
    roles: list[str] = []
    for path in roles_claim_paths:
        value = _claim_at(claims, path)
        if isinstance(value, list):
            roles.extend(r for r in value if isinstance(r, str) and r not in roles)
    raw_scopes = _claim_at(claims, subscriptions_claim)
    if isinstance(raw_scopes, str):
        raw_scopes = raw_scopes.split()
    scopes = [s for s in (ArmScope.parse(v) for v in (raw_scopes or []) if isinstance(v, str)) if s]
    username = str(claims.get("preferred_username") or "")
    return Principal(
        subject=str(claims["sub"]),
        display_name=str(claims.get("name") or username or claims["sub"]),
        actor_type="Application" if username.startswith("service-account-") else "User",
        roles=roles,
        scopes=scopes,
    )
