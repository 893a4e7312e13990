"""Budgets (domain/budgets.py) as the API serves them: operators set them on a subscription; callers read those within
their scope. ``PUT`` is idempotent (the same budget again writes nothing) and honours ``If-Match``; ``DELETE`` answers
204 when there was none. Refusing new work once one is spent is services/common/budgets.py's, which the instance and
job services and placement call.

Every change is evaluated at once (issue 26): the ``PUT`` writes the budget with its state as of now — its spend this
month (services/common/spend.py), and whether it is spent under the new amount — so raising a spent budget's amount
lifts its refusal in the same write, a budget moved to a later month refuses nothing now, and the answer shows the
fresh figures. Its notifications and ``StopAll`` follow within seconds: the change reaches the budget monitor through
the table's stream (services/streams/fleet.py), which also serves the jobs waiting on it.

Who sees what (docs/RBAC.md, "Budgets"; the cost query's rule, services/api/costs.py): reading needs
``budgets/read``; a caller sees a budget only when its scope holds the budget's whole scope (a budget of the
subscription, or of a tag, to callers holding the subscription; one of resource groups to callers holding each of
them); and only admins — who see every charge in their scope — see its spend, status and contact e-mails. Writing
needs ``budgets/write`` over the whole subscription (admins).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.arm import validate_subscription_id
from itl_accelerator.auth import rbac
from itl_accelerator.auth.principal import Principal
from itl_accelerator.billing.metering import COST_QUANTUM
from itl_accelerator.domain.budgets import Budget, BudgetAction, BudgetFilter, BudgetState, Threshold, quietly
from itl_accelerator.errors import AnotherOperationInProgress, InvalidParameter, ResourceNotFound
from itl_accelerator.models.budgets import BudgetWrite
from itl_accelerator.repositories.errors import EtagMismatch, ItemExists, ItemMissing, StateMoved
from itl_accelerator.repositories.protocols import BudgetRepository
from itl_accelerator.services.common import arm_rules
from itl_accelerator.services.common.access import Access, Target
from itl_accelerator.services.common.audit_events import build_event
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.services.common.kernel import ResourceKernel
from itl_accelerator.services.common.reattempt import reattempt
from itl_accelerator.services.common.spend import SpendReader

TYPE = f"{PROVIDER_NAMESPACE}/budgets"
#: Reads-and-judgements of a budget PUT while it is evaluated meanwhile (``StateMoved``), before 409.
PUT_ATTEMPTS = 5
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")


def budget_id(subscription_id: str, name: str) -> str:
    return f"/subscriptions/{subscription_id}/providers/{PROVIDER_NAMESPACE}/budgets/{name}"


def sees(principal: Principal, budget: Budget) -> bool:
    """Whether ``principal`` (holding a scope in the budget's subscription) may see ``budget``: it holds the whole
    subscription, or the budget covers resource groups only, each of them held."""
    groups = principal.resource_groups_in(budget.subscription_id)
    if groups is None:
        return True
    held = {g.lower() for g in groups}
    return bool(budget.filter.resource_groups) and all(g.lower() in held for g in budget.filter.resource_groups)


def sees_spend(principal: Principal) -> bool:
    """Whether ``principal`` sees a visible budget's spend, status and contact e-mails: admins (who see every charge
    in their scope); consumers see their own work's cost only, suppliers their earnings (the cost query's rule)."""
    return rbac.ROLE_ADMIN in principal.roles


def _money(amount: Decimal) -> str:
    return format(amount.quantize(COST_QUANTUM), "f")


def standing(budget: Budget) -> dict[str, Any]:
    """Where a budget stands, without its spend (what a caller who may not see every charge it counts is shown, so
    it knows how near the budget that may refuse its work is): the share of the amount left this period in whole
    percent (rounded down, 0 once spent), whether it is exceeded, and when that was evaluated."""
    state = budget.state
    used = state.spend * 100 / budget.amount if budget.amount else Decimal(100)
    left = max(0, min(100, int((Decimal(100) - used).to_integral_value(rounding=ROUND_FLOOR))))
    return {"remainingPercent": left, "exceeded": state.exceeded, "evaluatedAt": state.evaluated_at or None}


def render(budget: Budget, *, full: bool = True) -> dict[str, Any]:
    """A budget as returned: its envelope and what was set — and, when ``full``, its spend this period and where it
    stands; otherwise without them and without its notifications' contact e-mails, but with its ``standing`` (the
    share left: :func:`standing`)."""
    props = dict(budget.document["properties"])
    if not full:
        props["notifications"] = {
            name: {k: v for k, v in n.items() if k != "contactEmails"}
            for name, n in (props.get("notifications") or {}).items()
        }
        props["standing"] = standing(budget)
        return {**budget.document, "etag": budget.etag, "properties": props}
    state = budget.state
    return {
        **budget.document,
        "etag": budget.etag,
        "properties": {
            **props,
            "currentSpend": {"amount": _money(state.spend), "unit": budget.currency},
            "status": {
                "period": state.period,
                "evaluatedAt": state.evaluated_at or None,
                "thresholdsCrossed": [float(t) for t in state.notified],
                "exceeded": state.exceeded,
                "spendInOtherCurrencies": [{"amount": _money(a), "currency": c} for c, a in state.other],
            },
        },
    }


class BudgetService:
    """Budget operations over the budget repository; ``spend`` reads what budgets have spent; ``clock`` returns epoch
    seconds."""

    def __init__(
        self, budgets: BudgetRepository, spend: SpendReader, access: Access, clock: Callable[[], float] = time.time
    ):
        self._budgets = budgets
        self._spend = spend
        self._access = access
        self._clock = clock

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
            Target.of_subscription(subscription_id, budget_id(subscription_id, name), TYPE, name),
        )

    def get(self, ctx: CallContext, subscription_id: str, name: str) -> dict[str, Any]:
        """The budget; 404 when missing or outside the caller's scope (existence not leaked)."""
        self._read(ctx, subscription_id, self._name(name))
        budget = self._budgets.get(subscription_id, name)
        if budget is None or not sees(ctx.principal, budget):
            raise ResourceNotFound(f"The budget '{name}' was not found.")
        return render(budget, full=sees_spend(ctx.principal))

    def in_subscription(self, ctx: CallContext, subscription_id: str) -> list[dict[str, Any]]:
        """The budgets of the subscription the caller may see, by name."""
        self._read(ctx, subscription_id)
        full = sees_spend(ctx.principal)
        return [render(b, full=full) for b in self._budgets.in_subscription(subscription_id) if sees(ctx.principal, b)]

    def put(
        self, ctx: CallContext, subscription_id: str, name: str, body: BudgetWrite, *, if_match: str | None = None
    ) -> tuple[dict[str, Any], bool]:
        """Create or replace a budget, evaluated as of now (module docstring): ``(budget, created)`` (201/200).
        A budget evaluated meanwhile is read and judged again, :data:`PUT_ATTEMPTS` times in all.
        Errors: 400, 403, 404, 409 (created meanwhile; ``AnotherOperationInProgress`` when it kept changing), 412."""
        validate_subscription_id(subscription_id)
        self._name(name)
        self._access.require_subscription(ctx, subscription_id, rbac.BUDGETS_WRITE)
        settings = body.properties.model_dump(mode="json", by_alias=True, exclude_none=True)
        return reattempt(
            lambda: self._put_once(ctx, subscription_id, name, body, settings, if_match),
            on=StateMoved,
            attempts=PUT_ATTEMPTS,
            exhausted=lambda: AnotherOperationInProgress(f"The budget '{name}' kept changing; retry the request."),
        )

    def _put_once(
        self,
        ctx: CallContext,
        subscription_id: str,
        name: str,
        body: BudgetWrite,
        settings: dict[str, Any],
        if_match: str | None,
    ) -> tuple[dict[str, Any], bool]:
        """One read-decide-write of :meth:`put`. Raises ``StateMoved`` when the budget was evaluated since it was
        read (nothing was written)."""
        previous = self._budgets.get(subscription_id, name)
        arm_rules.check_preconditions(previous.etag if previous else None, if_match=if_match, if_none_match=None)
        if previous is not None and previous.document["properties"] == settings:
            return render(previous), False
        budget = self._budget(ctx, subscription_id, name, body, settings, previous)
        now = datetime.fromtimestamp(self._clock(), UTC)
        budget.state = quietly(budget, self._spend.spend(budget, now), now)
        audit = build_event(
            ctx,
            subscription_id=subscription_id,
            action=rbac.BUDGETS_WRITE.name,
            resource_id=budget_id(subscription_id, budget.name),
            resource_type=TYPE,
            resource_name=budget.name,
            change_summary=f"Budget {budget.name}: {format(budget.amount, 'f')} {budget.currency} a month, at the "
            f"limit: {budget.action}",
            previous_state=previous.document if previous else None,
            new_state=budget.document,
        )
        read_version = previous.state.version if previous else 0
        try:
            self._budgets.put(
                budget, audit, expected_etag=previous.etag if previous else None, read_version=read_version
            )
        except (ItemExists, EtagMismatch, ItemMissing) as exc:
            raise ResourceKernel.write_error(exc, if_match=if_match) from exc
        return render(budget), previous is None

    @staticmethod
    def _budget(
        ctx: CallContext,
        subscription_id: str,
        name: str,
        body: BudgetWrite,
        settings: dict[str, Any],
        previous: Budget | None,
    ) -> Budget:
        """The budget ``body`` sets (its state still the one read)."""
        props = body.properties
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
        thresholds = sorted(
            (Threshold(n.threshold, n.operator == "GreaterThan") for n in props.notifications.values() if n.enabled),
            key=lambda t: t.percent,
        )
        return Budget(
            subscription_id=subscription_id,
            name=shown,
            document=document,
            etag=arm_rules.new_etag(),
            amount=props.amount,
            currency=props.currency,
            thresholds=tuple(thresholds),
            action=BudgetAction(props.action_at_limit),
            filter=budget_filter,
            start=props.time_period.start_date.astimezone(UTC),
            end=props.time_period.end_date.astimezone(UTC) if props.time_period.end_date else None,
            state=previous.state if previous else BudgetState(),
        )

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
