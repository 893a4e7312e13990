"""The budget monitor: the schedule that evaluates every budget (every 15 minutes; template.yaml
``BudgetMonitorFunction``), right behind the roll-ups it reads.

For each active budget it sums its scope's cost this month from the hourly roll-ups (billing/rollup.py: per
subscription, resource group or tag), in the budget's currency, exactly (``Decimal``), and compares it with the
amount: every threshold reached for the first time this month is notified — an audit item written with the
budget's new state, conditioned on the state it read (so a threshold is notified once however often or
concurrently the monitor runs), then an event; a budget spent for the first time this month with the action
``StopAll`` stops what it covers: its running and waiting jobs are canceled and its instances deleted, as an operator
would (audited as SYSTEM), each billed up to that moment. ``RefuseNewAllocations`` (and ``StopAll``) refuse new work
from then on (services/common/budgets.py). A new month starts afresh.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from itl_accelerator.auth.principal import ArmScope, Principal
from itl_accelerator.auth.rbac import ROLE_ADMIN
from itl_accelerator.domain.budgets import Budget, BudgetAction, BudgetState, period_of
from itl_accelerator.domain.states import ACTIVE_JOB_STATUSES, ProvisioningState
from itl_accelerator.domain.usage import hour_key
from itl_accelerator.errors import ArmError
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.observability import logger
from itl_accelerator.repositories.protocols import Repositories, Scope
from itl_accelerator.services.api.instances import SparkOllamaInstanceService
from itl_accelerator.services.api.jobs import SparkJobService
from itl_accelerator.services.common.audit_events import build_event
from itl_accelerator.services.common.context import CallContext

#: Who stops work when a budget says so.
BUDGET_PRINCIPAL_SUBJECT = "ITL.Accelerator/budgets"
#: A run stops starting new budgets when less than this is left of its Lambda's time (seconds).
TIME_RESERVE_SECONDS = 20.0

#: ``(detail type, detail)`` → publishes an event (EventBridge); None: events are not published.
Publish = Callable[[str, dict[str, Any]], None]


@dataclass
class BudgetReport:
    """What one run did: budgets evaluated, thresholds notified, budgets newly spent, jobs canceled and instances
    deleted by ``StopAll``, budgets whose evaluation failed (logged; evaluated again next run)."""

    evaluated: int = 0
    notified: int = 0
    exceeded: int = 0
    jobs_canceled: int = 0
    instances_deleted: int = 0
    errors: int = 0
    stopped_early: bool = False

    def as_metrics(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.__dict__.items()}


def budget_context(subscription_id: str, budget: str, clock: Callable[[], float]) -> CallContext:
    """The caller a budget's ``StopAll`` acts as: an operator of the subscription, audited as SYSTEM."""
    principal = Principal(
        subject=BUDGET_PRINCIPAL_SUBJECT,
        display_name=f"Budget {budget}",
        roles=[ROLE_ADMIN],
        scopes=[ArmScope(subscription_id=subscription_id)],
        actor_type="Application",
    )
    return CallContext(
        principal=principal,
        request_id=f"budget-{budget}",
        correlation_id=f"budget-{subscription_id}-{budget}",
        audit_actor_type="SYSTEM",
        clock=lambda: datetime.fromtimestamp(clock(), UTC),
    )


class BudgetMonitor:
    """See the module docstring. ``clock`` returns epoch seconds; ``publish`` sends an event (None: none)."""

    def __init__(
        self,
        repositories: Repositories,
        jobs: SparkJobService,
        instances: SparkOllamaInstanceService,
        *,
        publish: Publish | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self._repos = repositories
        self._jobs = jobs
        self._instances = instances
        self._publish = publish
        self._clock = clock

    def run(self, *, time_left: Callable[[], float] | None = None) -> BudgetReport:
        """Evaluate every budget, a page at a time."""
        report = BudgetReport()
        token: str | None = None
        while True:
            page = self._repos.budgets.every(100, token)
            for budget in page.items:
                if time_left is not None and time_left() < TIME_RESERVE_SECONDS:
                    report.stopped_early = True
                    return report
                try:
                    self.evaluate(budget, report)
                except Exception:  # noqa: BLE001 - one budget that fails must not keep the others from being watched
                    logger.exception("Evaluating a budget failed", extra={"budget": budget.name})
                    report.errors += 1
            token = page.token
            if token is None:
                return report

    def spend(self, budget: Budget, now: datetime) -> Decimal:
        """What the budget's scope spent in the month of ``now``, in its currency, up to the hour of ``now``."""
        period = period_of(now)
        total = Decimal(0)
        for scope in budget.filter.scopes:
            hours = self._repos.usage.rollups(
                budget.subscription_id, scope, f"{period}-01T00", hour_key(int(now.timestamp()))
            )
            total += sum((t.costs.get(budget.currency, Decimal(0)) for t in hours.values()), Decimal(0))
        return total

    def evaluate(self, budget: Budget, report: BudgetReport) -> None:
        """One budget (module docstring)."""
        now = datetime.fromtimestamp(self._clock(), UTC)
        if not budget.active(now):
            return
        report.evaluated += 1
        period = period_of(now)
        state = budget.state if budget.state.period == period else BudgetState(period=period)
        spend = self.spend(budget, now)
        percent = spend * 100 / budget.amount
        crossed = [t for t in budget.thresholds if percent >= t and t not in state.notified]
        exceeded = spend >= budget.amount
        newly_exceeded = exceeded and not state.exceeded
        if not crossed and not newly_exceeded and spend == state.spend and state.period == budget.state.period:
            return
        audits = [
            self._audit(budget, f"Budget {budget.name} reached {t} % ({spend} of {budget.amount} {budget.currency})")
            for t in crossed
        ]
        if newly_exceeded:
            audits.append(
                self._audit(
                    budget,
                    f"Budget {budget.name} spent for {period}: {spend} of {budget.amount} "
                    f"{budget.currency}; action: {budget.action}",
                )
            )
        fresh = replace(state, spend=spend, notified=tuple(sorted((*state.notified, *crossed))), exceeded=exceeded)
        if not self._repos.budgets.record(budget, fresh, audits):
            return  # another run evaluated it meanwhile: it notified what there was
        report.notified += len(crossed)
        for threshold in crossed:
            self._event("Budget Threshold Crossed", budget, spend, threshold=str(threshold))
        if newly_exceeded:
            report.exceeded += 1
            self._event("Budget Exceeded", budget, spend, action=str(budget.action))
            if budget.action is BudgetAction.STOP_ALL:
                self._stop_all(budget, report)

    # ----------------------------------------------------------------------------------------------- stop all
    def _stop_all(self, budget: Budget, report: BudgetReport) -> None:
        """Cancel the active jobs and delete the instances the budget covers (each failure logged, the rest go on)."""
        ctx = budget_context(budget.subscription_id, budget.name, self._clock)
        sub = budget.subscription_id
        token: str | None = None
        while True:
            page = self._repos.jobs.page(Scope(sub), 100, token)
            for job in page.items:
                tags = dict(job.document.get("tags") or {})
                if (
                    job.status in ACTIVE_JOB_STATUSES
                    and not job.cancel_requested
                    and budget.filter.covers(job.key.resource_group, tags)
                ):
                    try:
                        self._jobs.cancel(ctx, sub, job.key.resource_group, job.key.name)
                        report.jobs_canceled += 1
                    except ArmError as exc:
                        logger.warning("A budget could not cancel a job", extra={"job": job.arm_id, "why": exc.code})
            token = page.token
            if token is None:
                break
        token = None
        while True:
            nodes = self._repos.nodes.page(Scope(sub), 100, token)
            for node in nodes.items:
                instances = self._repos.instances.page(node.key, 1000, None)
                for instance in instances.items:
                    if instance.state == ProvisioningState.DELETING or not budget.filter.covers(
                        instance.key.resource_group, {}
                    ):
                        continue
                    try:
                        group, (node_name, name) = instance.key.resource_group, instance.key.names
                        self._instances.delete(ctx, sub, group, node_name, name)
                        report.instances_deleted += 1
                    except ArmError as exc:
                        logger.warning("A budget could not delete an instance", extra={"why": exc.code})
            token = nodes.token
            if token is None:
                return

    def _audit(self, budget: Budget, summary: str) -> AuditEvent:
        ctx = budget_context(budget.subscription_id, budget.name, self._clock)
        return build_event(
            ctx,
            subscription_id=budget.subscription_id,
            action="ITL.Accelerator/budgets/evaluate",
            resource_id=str(budget.document["id"]),
            resource_type="ITL.Accelerator/budgets",
            resource_name=budget.name,
            change_summary=summary,
        )

    def _event(self, detail_type: str, budget: Budget, spend: Decimal, **more: str) -> None:
        if self._publish is None:
            return
        detail = {
            "subscriptionId": budget.subscription_id,
            "budget": budget.name,
            "budgetId": budget.document["id"],
            "amount": str(budget.amount),
            "currency": budget.currency,
            "spend": str(spend),
            "period": budget.state.period or period_of(datetime.fromtimestamp(self._clock(), UTC)),
            "contactEmails": sorted(
                {
                    e
                    for n in (budget.document["properties"].get("notifications") or {}).values()
                    for e in n.get("contactEmails", [])
                }
            ),
            **more,
        }
        try:
            self._publish(detail_type, detail)
        except Exception:  # noqa: BLE001 - the audit item is the record; a lost event is logged
            logger.exception("Publishing a budget event failed", extra={"budget": budget.name})
