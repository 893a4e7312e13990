"""The one access check every route goes through: tenant scope first, then the role's permission.

Rules: a resource outside the caller's scopes is 404 ``ResourceNotFound`` (existence is not leaked); inside its
scopes but without the action, 403 ``AuthorizationFailed``. Both refusals are audited (append-only ``Denied``
item) in the target subscription's trail, so a cross-tenant probe leaves a trace where it was aimed.
"""

from __future__ import annotations

from typing import NoReturn

from itl_accelerator.auth import rbac
from itl_accelerator.auth.rbac import Permission
from itl_accelerator.errors import ArmError, AuthorizationFailed, ResourceNotFound
from itl_accelerator.observability import logger
from itl_accelerator.repositories.protocols import AuditRepository
from itl_accelerator.services.common.audit_events import build_event, log_denied
from itl_accelerator.services.common.context import CallContext


def not_found(type_name: str, name: str, resource_group: str | None = None) -> ResourceNotFound:
    """ARM's 404 for a resource (same text whether missing or hidden by scope)."""
    where = f" under resource group '{resource_group}'" if resource_group else ""
    return ResourceNotFound(f"The Resource '{type_name}/{name}'{where} was not found.")


class Access:
    """Scope and permission checks; refusals are appended to the ``audit`` trail."""

    def __init__(self, audit: AuditRepository):
        self._audit = audit

    def require(
        self,
        ctx: CallContext,
        action: Permission,
        *,
        subscription_id: str,
        resource_group: str | None,
        resource_id: str,
        resource_type: str,
        resource_name: str,
        missing: ArmError | None = None,
    ) -> None:
        """Raise 404 when the target is outside the caller's scopes, 403 (audited) when its roles lack ``action``."""
        self.require_any(
            ctx,
            (action,),
            subscription_id=subscription_id,
            resource_group=resource_group,
            resource_id=resource_id,
            resource_type=resource_type,
            resource_name=resource_name,
            missing=missing,
        )

    def require_any(
        self,
        ctx: CallContext,
        actions: tuple[Permission, ...],
        *,
        subscription_id: str,
        resource_group: str | None,
        resource_id: str,
        resource_type: str,
        resource_name: str,
        missing: ArmError | None = None,
    ) -> None:
        """Like :meth:`require`, passing when the roles grant at least one of ``actions`` (refusal names the first).
        ``missing`` is the 404 a caller outside the scopes gets: the one a missing resource gets (default: a
        generic ``ResourceNotFound`` naming the type and name)."""
        target = {
            "subscription_id": subscription_id,
            "resource_id": resource_id,
            "resource_type": resource_type,
            "resource_name": resource_name,
        }
        if not ctx.principal.can_see(subscription_id, resource_group):
            self._record(ctx, actions[0], **target, why="outside the caller's scopes; answered 404")
            raise missing or not_found(resource_type, resource_name, resource_group)
        if not any(rbac.has_permission(ctx.principal, a) for a in actions):
            self.deny(ctx, actions[0], **target)

    def require_hidden(
        self,
        ctx: CallContext,
        action: Permission,
        *,
        subscription_id: str,
        resource_group: str | None,
        resource_id: str,
        resource_type: str,
        resource_name: str,
        missing: ArmError,
    ) -> None:
        """For what a caller may not even learn exists (an operation of a resource it may not read): ``missing``
        (404) both outside its scopes and when its roles lack ``action`` — the refusal audited either way."""
        if not ctx.principal.can_see(subscription_id, resource_group) or not rbac.has_permission(ctx.principal, action):
            self.refuse_hidden(
                ctx,
                action,
                subscription_id=subscription_id,
                resource_group=resource_group,
                resource_id=resource_id,
                resource_type=resource_type,
                resource_name=resource_name,
                missing=missing,
            )

    def refuse_hidden(
        self,
        ctx: CallContext,
        action: Permission,
        *,
        subscription_id: str,
        resource_group: str | None,
        resource_id: str,
        resource_type: str,
        resource_name: str,
        missing: ArmError,
    ) -> NoReturn:
        """Audit a refusal answered as if the target did not exist, and raise ``missing`` (404)."""
        self._record(
            ctx,
            action,
            subscription_id=subscription_id,
            resource_id=resource_id,
            resource_type=resource_type,
            resource_name=resource_name,
            why="not the caller's to see; answered 404",
        )
        raise missing

    def require_subscription(self, ctx: CallContext, subscription_id: str, action: Permission) -> None:
        """For subscription-level operations: 404 outside every scope of the subscription; 403 (audited) when the
        caller holds only resource groups of it, or its roles lack ``action``."""
        resource_id = f"/subscriptions/{subscription_id}"
        if not ctx.principal.can_see(subscription_id, None):
            self._record(
                ctx,
                action,
                subscription_id=subscription_id,
                resource_id=resource_id,
                resource_type="subscriptions",
                resource_name=subscription_id,
                why="outside the caller's scopes; answered 404",
            )
            raise ResourceNotFound(f"The subscription '{subscription_id}' was not found.")
        if not rbac.has_permission(ctx.principal, action):
            self.deny(
                ctx,
                action,
                subscription_id=subscription_id,
                resource_id=resource_id,
                resource_type="subscriptions",
                resource_name=subscription_id,
            )
        if not ctx.principal.holds_subscription(subscription_id):
            self.deny(
                ctx,
                action,
                subscription_id=subscription_id,
                resource_id=resource_id,
                resource_type="subscriptions",
                resource_name=subscription_id,
                why="its scope is only some resource groups of the subscription",
                message=(
                    f"The client '{ctx.principal.subject}' holds only resource groups of the subscription "
                    f"'{subscription_id}': action '{action.name}' needs a scope of the whole subscription "
                    f"('{resource_id}')."
                ),
            )

    def deny(
        self,
        ctx: CallContext,
        action: Permission,
        *,
        subscription_id: str,
        resource_id: str,
        resource_type: str,
        resource_name: str,
        why: str = "its roles lack the action",
        message: str | None = None,
    ) -> NoReturn:
        """Audit the refusal (``why``) and raise 403 ``AuthorizationFailed`` (``message``: ARM's text by default)."""
        self._record(
            ctx,
            action,
            subscription_id=subscription_id,
            resource_id=resource_id,
            resource_type=resource_type,
            resource_name=resource_name,
            why=why,
        )
        raise AuthorizationFailed(
            message
            or f"The client '{ctx.principal.subject}' does not have authorization to perform action '{action.name}' "
            f"over scope '{resource_id}'."
        )

    def _record(
        self,
        ctx: CallContext,
        action: Permission,
        *,
        subscription_id: str,
        resource_id: str,
        resource_type: str,
        resource_name: str,
        why: str,
    ) -> None:
        """Append a ``Denied`` audit item to the *target* subscription's trail (one ``PutItem``, best effort: a
        failed audit of a refusal must not change the answer). A probe outside the caller's scopes is recorded
        there too, though the caller only ever sees 404."""
        event = build_event(
            ctx,
            subscription_id=subscription_id,
            action=action.name,
            outcome="Denied",
            resource_id=resource_id,
            resource_type=resource_type,
            resource_name=resource_name,
            change_summary=f"Denied {action.name} to {ctx.principal.subject}: {why}",
        )
        log_denied(event)
        try:
            self._audit.append(event)
        except Exception:  # noqa: BLE001 - a failed audit of a refusal must not turn the 403/404 into a 500
            logger.exception("Could not audit a denied attempt")
