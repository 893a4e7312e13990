"""Budgets (domain/budgets.py) as the API serves them: operators set them on a subscription; everyone in it reads them
and where they stand. ``PUT`` is idempotent (the same budget again writes nothing) and honours ``If-Match``;
``DELETE`` answers 204 when there was none. Evaluating them is the budget monitor's (services/schedules); refusing
new work once one is spent is :func:`refusal` here, which the instance and job services call.

Rules: reading needs ``budgets/read`` in the subscription (every role); writing ``budgets/write`` over the whole
subscription (admins).
"""

from __future__ import annotations

import re
from datetime import UTC
from decimal import Decimal
from typing import Any

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.arm import validate_subscription_id
from itl_accelerator.auth import rbac
from itl_accelerator.domain.budgets import Budget, BudgetAction, BudgetFilter, BudgetState
from itl_accelerator.errors import InvalidParameter, ResourceNotFound
from itl_accelerator.models.budgets import BudgetWrite
from itl_accelerator.repositories.errors import EtagMismatch, ItemExists, ItemMissing
from itl_accelerator.repositories.protocols import BudgetRepository
from itl_accelerator.services.common import arm_rules
from itl_accelerator.services.common.access import Access
from itl_accelerator.services.common.audit_events import build_event
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.services.common.kernel import ResourceKernel

TYPE = f"{PROVIDER_NAMESPACE}/budgets"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def budget_id(subscription_id: str, name: str) -> str:
    return f"/subscriptions/{subscription_id}/providers/{PROVIDER_NAMESPACE}/budgets/{name}"


def render(budget: Budget) -> dict[str, Any]:
    """A budget as returned: its envelope, what was set, its spend this period and where it stands."""
    state = budget.state
    return {
        **budget.document,
        "etag": budget.etag,
        "properties": {
            **budget.document["properties"],
            "currentSpend": {"amount": float(state.spend), "unit": budget.currency},
            "status": {
                "period": state.period,
                "thresholdsCrossed": [float(t) for t in state.notified],
                "exceeded": state.exceeded,
            },
        },
    }


class BudgetService:
    """Budget operations over the budget repository. ``clock`` returns epoch seconds."""

    def __init__(self, budgets: BudgetRepository, access: Access):
        self._budgets = budgets
        self._access = access

    def _name(self, name: str) -> str:
        if not _NAME.match(name):
            raise InvalidParameter(
                f"'{name}' is not a budget name (1-63 letters, digits, '_', '.', '-').", target="budgetName"
            )
        return name

    def _read(self, ctx: CallContext, subscription_id: str, name: str = "*") -> None:
        validate_subscription_id(subscription_id)
        self._access.require_any(
            ctx,
            (rbac.BUDGETS_READ,),
            subscription_id=subscription_id,
            resource_group=None,
            resource_id=budget_id(subscription_id, name),
            resource_type=TYPE,
            resource_name=name,
            missing=ResourceNotFound(f"The subscription '{subscription_id}' was not found."),
        )

    def get(self, ctx: CallContext, subscription_id: str, name: str) -> dict[str, Any]:
        self._read(ctx, subscription_id, self._name(name))
        budget = self._budgets.get(subscription_id, name)
        if budget is None:
            raise ResourceNotFound(f"The budget '{name}' was not found.")
        return render(budget)

    def in_subscription(self, ctx: CallContext, subscription_id: str) -> list[dict[str, Any]]:
        self._read(ctx, subscription_id)
        return [render(b) for b in self._budgets.in_subscription(subscription_id)]

    def put(
        self, ctx: CallContext, subscription_id: str, name: str, body: BudgetWrite, *, if_match: str | None = None
    ) -> tuple[dict[str, Any], bool]:
        """Create or replace a budget: ``(budget, created)`` (201/200). Errors: 400, 403, 404, 409 (created
        meanwhile), 412."""
        validate_subscription_id(subscription_id)
        self._name(name)
        self._access.require_subscription(ctx, subscription_id, rbac.BUDGETS_WRITE)
        previous = self._budgets.get(subscription_id, name)
        arm_rules.check_preconditions(previous.etag if previous else None, if_match=if_match, if_none_match=None)
        props = body.properties
        settings = props.model_dump(mode="json", by_alias=True, exclude_none=True)
        if previous is not None and previous.document["properties"] == settings:
            return render(previous), False
        f = props.filter
        budget_filter = BudgetFilter()
        if f is not None and f.dimensions is not None:
            budget_filter = BudgetFilter(resource_groups=tuple(f.dimensions.values))
        elif f is not None and f.tags is not None:
            budget_filter = BudgetFilter(tag_key=f.tags.name, tag_values=tuple(f.tags.values))
        shown = previous.name if previous else name
        document: dict[str, Any] = {
            "id": budget_id(subscription_id, shown),
            "name": shown,
            "type": TYPE,
            "systemData": arm_rules.stamp_system_data(ctx, previous.document.get("systemData") if previous else None),
            "properties": settings,
        }
        budget = Budget(
            subscription_id=subscription_id,
            name=shown,
            document=document,
            etag=arm_rules.new_etag(),
            amount=props.amount,
            currency=props.currency,
            thresholds=tuple(sorted(Decimal(n.threshold) for n in props.notifications.values() if n.enabled)),
            action=BudgetAction(props.action_at_limit),
            filter=budget_filter,
            start=props.time_period.start_date.astimezone(UTC),
            end=props.time_period.end_date.astimezone(UTC) if props.time_period.end_date else None,
            state=previous.state if previous else BudgetState(),
        )
        audit = build_event(
            ctx,
            subscription_id=subscription_id,
            action=rbac.BUDGETS_WRITE.name,
            resource_id=budget_id(subscription_id, shown),
            resource_type=TYPE,
            resource_name=budget.name,
            change_summary=f"Budget {budget.name}: {budget.amount} {budget.currency} a month, at the limit: "
            f"{budget.action}",
            previous_state=previous.document if previous else None,
            new_state=document,
        )
        try:
            self._budgets.put(budget, audit, expected_etag=previous.etag if previous else None)
        except (ItemExists, EtagMismatch, ItemMissing) as exc:
            raise ResourceKernel.write_error(exc, if_match=if_match) from exc
        return render(budget), previous is None

    def delete(self, ctx: CallContext, subscription_id: str, name: str, *, if_match: str | None = None) -> bool:
        validate_subscription_id(subscription_id)
        self._name(name)
        self._access.require_subscription(ctx, subscription_id, rbac.BUDGETS_WRITE)
        budget = self._budgets.get(subscription_id, name)
        if budget is None:
            if if_match is not None:
                arm_rules.check_preconditions(None, if_match=if_match, if_none_match=None)
            return False
        arm_rules.check_preconditions(budget.etag, if_match=if_match, if_none_match=None)
        audit = build_event(
            ctx,
            subscription_id=subscription_id,
            action=rbac.BUDGETS_WRITE.name,
            resource_id=budget.document["id"],
            resource_type=TYPE,
            resource_name=budget.name,
            change_summary=f"Deleted budget {budget.name}",
            previous_state=budget.document,
        )
        try:
            self._budgets.delete(budget, audit)
        except EtagMismatch as exc:
            raise ResourceKernel.write_error(exc, if_match=if_match) from exc
        return True
