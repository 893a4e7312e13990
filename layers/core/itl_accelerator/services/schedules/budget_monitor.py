"""The budget monitor: evaluates every budget (every 5 minutes; template.yaml ``BudgetMonitorFunction``) and each
budget as soon as it changes (the table's stream: services/streams/fleet.py calls :meth:`BudgetMonitor.on_change`).

For each active budget it reads what the work it covers has spent this month, as of now (services/common/spend.py:
settled spend plus its open allocations' charges from their locked terms — not the roll-ups), and evaluates it
(domain/budgets.py ``evaluate``): every threshold reached for the first time this month is notified — an audit item
written with the budget's new state, conditioned on the state it read (so a threshold is notified once however often
or concurrently the monitor runs), then a ``Budget Threshold Crossed`` event — and a budget spent for the first time
this month says so (``Budget Exceeded``). While a budget is spent, ``RefuseNewAllocations`` and ``StopAll`` refuse new
work (services/common/budgets.py), and **every evaluation** of a spent ``StopAll`` budget stops what it covers that
is still active — its running and waiting jobs are canceled and its instances deleted, as an operator would (audited
as SYSTEM), each billed up to that moment — so a budget switched to ``StopAll`` after it was spent stops its work at
its next evaluation, which its change triggers. A new month starts afresh.

**Overshoot** (docs/BILLING.md, "Budgets"): spend is exact at each evaluation, so a ``StopAll`` budget stops its work
at most one evaluation period (:data:`EVALUATION_PERIOD_SECONDS`) after its spend reached the amount: the overshoot is
at most the covered work's spend rate over that period, plus each stopped allocation's own rounding (its billing
increment or minimum), plus the seconds the stop takes.

Work per run: one read of each page of budgets from the sweep's cursor (``SYS#BUDGETSWEEP``) on; per subscription with budgets, one read of its open meters (the
allocations running: never the month's history) and of the settled spend of each budget's scopes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from itertools import groupby
from typing import TYPE_CHECKING, Any

from itl_accelerator.auth.principal import ArmScope, Principal
from itl_accelerator.auth.rbac import ROLE_ADMIN
from itl_accelerator.domain.budgets import Budget, BudgetAction, Spend, Threshold, evaluate
from itl_accelerator.domain.records import LimitChange, ResourceKey
from itl_accelerator.domain.states import ACTIVE_JOB_STATUSES
from itl_accelerator.errors import ArmError
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.observability import logger
from itl_accelerator.repositories.errors import InvalidSkipToken
from itl_accelerator.repositories.protocols import Repositories
from itl_accelerator.services.common.audit_events import build_event
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.services.common.spend import SpendReader

if TYPE_CHECKING:  # made on first use by the wiring: a run that stops nothing never loads them
    from itl_accelerator.services.api.instances import SparkOllamaInstanceService
    from itl_accelerator.services.api.jobs import SparkJobService

#: Who stops work when a budget says so (``ITL.Accelerator/budgets/{name}``: a job canceled names its budget).
BUDGET_PRINCIPAL_SUBJECT = "ITL.Accelerator/budgets"
#: A run stops starting new budgets when less than this is left of its Lambda's time (seconds).
TIME_RESERVE_SECONDS = 20.0
#: Budgets read per page of the ``SYS#BUDGETS`` index.
BUDGET_PAGE = 100
#: How often the schedule evaluates every budget (template.yaml ``BudgetMonitorFunction``: rate(5 minutes)).
EVALUATION_PERIOD_SECONDS = 300

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
        subject=f"{BUDGET_PRINCIPAL_SUBJECT}/{budget}",  # what a job it stops says canceled it
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
        self._spend = SpendReader(repositories.meters)
        self._publish = publish
        self._clock = clock

    def run(self, *, time_left: Callable[[], float] | None = None) -> BudgetReport:
        """Evaluate every budget, a page at a time (the budgets of one subscription together), from where the last
        run's time ran short (the sweep's cursor) to the end — so however many budgets there are, each is
        evaluated in turn, the ones at the end too (issue 27: every run started again at the first page, and past
        about 7,000 budgets the last were never evaluated). A run cut short saves the page it was on (its early
        subscriptions are evaluated again: an evaluation is idempotent); one that reaches the end starts the next
        from the beginning."""
        report = BudgetReport()
        token = self._repos.budgets.sweep_cursor()
        resumed = token
        while True:
            try:
                page = self._repos.budgets.every(BUDGET_PAGE, token)
            except InvalidSkipToken:  # a cursor from another shape of the index: sweep from the start
                token = None
                page = self._repos.budgets.every(BUDGET_PAGE, None)
            for _, group in groupby(page.items, key=lambda b: b.subscription_id.lower()):
                if time_left is not None and time_left() < TIME_RESERVE_SECONDS:
                    report.stopped_early = True
                    self._repos.budgets.save_sweep_cursor(token)
                    logger.warning(
                        "The budget monitor ran out of time; the next run goes on", extra=report.as_metrics()
                    )
                    return report
                self._evaluate_all(list(group), report)
            token = page.token
            if token is None:
                if resumed is not None:
                    self._repos.budgets.save_sweep_cursor(None)
                return report

    def on_change(self, changes: list[LimitChange]) -> BudgetReport:
        """Evaluate at once each budget a change names (created or changed; a deleted one is gone)."""
        report = BudgetReport()
        for change in changes:
            if change.kind != "budget":
                continue
            budget = self._repos.budgets.get(change.subscription_id, change.name)
            if budget is not None:
                self._evaluate_all([budget], report)
        return report

    def _evaluate_all(self, budgets: list[Budget], report: BudgetReport) -> None:
        """Evaluate budgets of one subscription (their spend read together: the open meters once)."""
        now = datetime.fromtimestamp(self._clock(), UTC)
        active = [b for b in budgets if b.active(now)]
        try:
            spends = self._spend.spend_of(active, now)
        except Exception:  # noqa: BLE001 - one subscription that fails must not keep the others from being watched
            logger.exception("Reading budgets' spend failed", extra={"budgets": [b.name for b in active]})
            report.errors += len(active)
            return
        for budget in active:
            try:
                self.evaluate(budget, spends[budget.name], now, report)
            except Exception:  # noqa: BLE001 - one budget that fails must not keep the others from being watched
                logger.exception("Evaluating a budget failed", extra={"budget": budget.name})
                report.errors += 1

    def evaluate(self, budget: Budget, spend: Spend, now: datetime, report: BudgetReport) -> None:
        """One budget with its ``spend`` at ``now`` (module docstring)."""
        report.evaluated += 1
        found = evaluate(budget, spend, now)
        state = found.state
        if replace(state, evaluated_at="") != replace(budget.state, evaluated_at="") or found.crossed:
            audits = [self._threshold_audit(budget, t, state.spend, now) for t in found.crossed]
            if found.newly_exceeded:
                audits.append(
                    self._audit(
                        budget,
                        f"Budget {budget.name} spent for {state.period}: {state.spend} of {format(budget.amount, 'f')} "
                        f"{budget.currency}; action: {budget.action}",
                        now,
                    )
                )
            if not self._repos.budgets.record(budget, state, audits):
                return  # another evaluation was written meanwhile: it notified what there was
            report.notified += len(found.crossed)
            for threshold in found.crossed:
                self._event("Budget Threshold Crossed", budget, state, threshold=format(threshold.percent, "f"))
            if found.newly_exceeded:
                report.exceeded += 1
                self._event("Budget Exceeded", budget, state, action=str(budget.action))
        if state.exceeded and budget.action is BudgetAction.STOP_ALL:
            self._stop_all(budget, report)

    # ----------------------------------------------------------------------------------------------- stop all
    def _stop_all(self, budget: Budget, report: BudgetReport) -> None:
        """Stop what a spent ``StopAll`` budget covers that is still active: each allocation still billing (its open
        meter, not ended: a running job, a serving instance) and each job waiting in the queue — one read of each,
        whatever the subscription's history. Each failure is logged and the rest go on; a job placed but not yet
        running is caught by the next evaluation (placement refuses the budget's work meanwhile)."""
        ctx = budget_context(budget.subscription_id, budget.name, self._clock)
        sub = budget.subscription_id
        for meter in self._repos.meters.open_in(sub):
            if meter.end is not None or not budget.filter.covers(meter.resource_group, meter.tags):
                continue
            try:
                if meter.service == "jobs":
                    job = self._repos.jobs.get(
                        ResourceKey(sub, meter.resource_group, "sparkJobs", (meter.resource_name,))
                    )
                    if job is not None and job.status in ACTIVE_JOB_STATUSES and not job.cancel_requested:
                        self._jobs.cancel(ctx, sub, meter.resource_group, meter.resource_name)
                        report.jobs_canceled += 1
                else:
                    self._instances.delete(ctx, sub, meter.resource_group, meter.node_name, meter.resource_name)
                    report.instances_deleted += 1
            except ArmError as exc:
                logger.warning(
                    "A budget could not stop an allocation", extra={"id": meter.resource_id, "why": exc.code}
                )
        for key in self._repos.jobs.waiting(sub, 1000):
            job = self._repos.jobs.get(key)
            if job is None or job.status not in ACTIVE_JOB_STATUSES or job.cancel_requested:
                continue
            if not budget.filter.covers(job.key.resource_group, dict(job.document.get("tags") or {})):
                continue
            try:
                self._jobs.cancel(ctx, sub, job.key.resource_group, job.key.name)
                report.jobs_canceled += 1
            except ArmError as exc:
                logger.warning("A budget could not cancel a job", extra={"job": job.arm_id, "why": exc.code})

    def _threshold_audit(self, budget: Budget, threshold: Threshold, spend: Any, now: datetime) -> AuditEvent:
        sign = ">" if threshold.strictly_above else ">="
        return self._audit(
            budget,
            f"Budget {budget.name} reached {sign} {format(threshold.percent, 'f')} % ({spend} of "
            f"{format(budget.amount, 'f')} {budget.currency})",
            now,
        )

    def _audit(self, budget: Budget, summary: str, now: datetime) -> AuditEvent:
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

    def _event(self, detail_type: str, budget: Budget, state: Any, **more: str) -> None:
        """An event naming the budget, its amount, currency, spend, period and contact e-mails (docs/EVENTS.md)."""
        if self._publish is None:
            return
        detail = {
            "subscriptionId": budget.subscription_id,
            "budget": budget.name,
            "budgetId": budget.document["id"],
            "amount": format(budget.amount, "f"),
            "currency": budget.currency,
            "spend": format(state.spend, "f"),
            "period": state.period,
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
