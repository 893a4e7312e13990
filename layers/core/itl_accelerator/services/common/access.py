"""The one access check every route goes through: tenant scope first, then the role's permission.

Once a request: the route checks before the body is read (api/routing.py) and hands the service a context holding
the checks it made (``CallContext.checked``); the service's own check of that permission over that scope — there
for every other caller of the service — is answered from them without asking again.

Rules: a resource outside the caller's scopes is 404 ``ResourceNotFound`` (existence is not leaked); inside its
scopes but without the action, 403 ``AuthorizationFailed``. Both refusals are audited (append-only ``Denied``
item) in the target subscription's trail, so a cross-tenant probe leaves a trace where it was aimed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NoReturn

from itl_accelerator.auth import rbac
from itl_accelerator.auth.rbac import Permission
from itl_accelerator.errors import ArmError, AuthorizationFailed, ResourceNotFound
from itl_accelerator.observability import logger
from itl_accelerator.repositories.protocols import AuditRepository
from itl_accelerator.services.common.audit_events import build_event, log_denied
from itl_accelerator.services.common.context import CallContext, Check


def not_found(type_name: str, name: str, resource_group: str | None = None) -> ResourceNotFound:
    """ARM's 404 for a resource (same text whether missing or hidden by scope)."""
    where = f" under resource group '{resource_group}'" if resource_group else ""
    return ResourceNotFound(f"The Resource '{type_name}/{name}'{where} was not found.")


@dataclass(frozen=True)
class Target:
    """What an access check is about: the subscription whose trail records a refusal, the resource group (None:
    the subscription's level), the resource's ARM id, type and name (``*`` for a collection), and ``missing``: the
    404 a caller who may not see it gets - the one a missing resource gets (None: a generic ``ResourceNotFound``
    naming the type and name)."""

    subscription_id: str
    resource_group: str | None
    resource_id: str
    resource_type: str
    resource_name: str
    missing: ArmError | None = None

    @classmethod
    def of_subscription(
        cls,
        subscription_id: str,
        resource_id: str,
        resource_type: str,
        resource_name: str,
        resource_group: str | None = None,
    ) -> Target:
        """A target of a subscription's own (a collection, a query, a file; ``resource_group``: the one the work is
        in, when it is): a caller who may not see it is told the subscription — or, when one is named, that resource
        group of it — was not found."""
        missing = (
            f"The resource group '{resource_group}' was not found in the subscription '{subscription_id}'."
            if resource_group
            else f"The subscription '{subscription_id}' was not found."
        )
        return cls(
            subscription_id, resource_group, resource_id, resource_type, resource_name, ResourceNotFound(missing)
        )

    def not_found(self) -> ArmError:
        """The 404 for a caller who may not see the target."""
        return self.missing or not_found(self.resource_type, self.resource_name, self.resource_group)


#: The role checks an access check made, in order: refused ones, then the one granted (last; its ``action`` is the
#: permission the caller acts with) — and, for a subscription-level operation, the whole subscription's.
Checks = tuple[Check, ...]


class Access:
    """Scope and permission checks; refusals are appended to the ``audit`` trail."""

    def __init__(self, audit: AuditRepository):
        self._audit = audit

    def require(self, ctx: CallContext, action: Permission, target: Target) -> Checks:
        """Raise 404 when the target is outside the caller's scopes, 403 (audited) when its roles lack ``action``;
        otherwise the checks made (:data:`Checks`)."""
        return self.require_any(ctx, (action,), target)

    def require_any(self, ctx: CallContext, actions: tuple[Permission, ...], target: Target) -> Checks:
        """Like :meth:`require`, passing when the roles grant at least one of ``actions`` (refusal names the
        first). Answered from ``ctx.checked`` without asking again when the request's route already checked them
        (the first granted, with each one before it refused)."""
        asked = [Check.of(a.name, target.subscription_id, target.resource_group) for a in actions]
        for check in asked:
            answer = ctx.answer(check)
            if answer is None:
                break
            if answer:
                return (check,)
        if not ctx.principal.can_see(target.subscription_id, target.resource_group):
            self._record(ctx, actions[0], target, "outside the caller's scopes; answered 404")
            raise target.not_found()
        made: list[Check] = []
        for check, action in zip(asked, actions, strict=True):
            made.append(check if rbac.has_permission(ctx.principal, action) else replace(check, granted=False))
            if made[-1].granted:
                return tuple(made)
        self.deny(ctx, actions[0], target)

    def require_hidden(self, ctx: CallContext, action: Permission, target: Target) -> None:
        """For what a caller may not even learn exists (an operation of a resource it may not read): the target's
        404 both outside its scopes and when its roles lack ``action`` — the refusal audited either way."""
        visible = ctx.principal.can_see(target.subscription_id, target.resource_group)
        if not visible or not rbac.has_permission(ctx.principal, action):
            self.refuse_hidden(ctx, action, target)

    def refuse_hidden(self, ctx: CallContext, action: Permission, target: Target) -> NoReturn:
        """Audit a refusal answered as if the target did not exist, and raise its 404."""
        self._record(ctx, action, target, "not the caller's to see; answered 404")
        raise target.not_found()

    def require_subscription(self, ctx: CallContext, subscription_id: str, action: Permission) -> Checks:
        """For subscription-level operations: 404 outside every scope of the subscription; 403 (audited) when the
        caller holds only resource groups of it, or its roles lack ``action``. Otherwise the checks made (none
        again when the request's route already made them: ``ctx.checked``)."""
        whole = Check.of(action.name, subscription_id, None, whole=True)
        if ctx.answer(whole):
            return (whole,)
        target = Target.of_subscription(
            subscription_id, f"/subscriptions/{subscription_id}", "subscriptions", subscription_id
        )
        made = self.require(ctx, action, target)
        if not ctx.principal.holds_subscription(subscription_id):
            self.deny(
                ctx,
                action,
                target,
                why="its scope is only some resource groups of the subscription",
                message=(
                    f"The client '{ctx.principal.subject}' holds only resource groups of the subscription "
                    f"'{subscription_id}': action '{action.name}' needs a scope of the whole subscription "
                    f"('{target.resource_id}')."
                ),
            )
        return (*made, whole)

    def deny(
        self,
        ctx: CallContext,
        action: Permission,
        target: Target,
        *,
        why: str = "its roles lack the action",
        message: str | None = None,
    ) -> NoReturn:
        """Audit the refusal (``why``) and raise 403 ``AuthorizationFailed`` (``message``: ARM's text by default)."""
        self._record(ctx, action, target, why)
        raise AuthorizationFailed(
            message
            or f"The client '{ctx.principal.subject}' does not have authorization to perform action '{action.name}' "
            f"over scope '{target.resource_id}'."
        )

    def _record(self, ctx: CallContext, action: Permission, target: Target, why: str) -> None:
        """Append a ``Denied`` audit item to the *target* subscription's trail (one ``PutItem``, best effort: a
        failed audit of a refusal must not change the answer). A probe outside the caller's scopes is recorded
        there too, though the caller only ever sees 404."""
        event = build_event(
            ctx,
            subscription_id=target.subscription_id,
            action=action.name,
            outcome="Denied",
            resource_id=target.resource_id,
            resource_type=target.resource_type,
            resource_name=target.resource_name,
            change_summary=f"Denied {action.name} to {ctx.principal.subject}: {why}",
        )
        log_denied(event)
        try:
            self._audit.append(event)
        except Exception:  # noqa: BLE001 - a failed audit of a refusal must not turn the 403/404 into a 500
            logger.exception("Could not audit a denied attempt")
