"""Fleet and limit changes: what a node registered, changed or removed — or a GPU quota or a budget set, changed or
removed — means for the jobs waiting for capacity, at once.

Triggered by the table's stream (DynamoDB Streams, ``NEW_AND_OLD_IMAGES``; template.yaml's event source mapping
passes node, quota and budget items only), so no API function does placement work and no change is missed: a stream
record is delivered at least once, after its transaction committed, and every step here is idempotent.

Rules (issue 14, item 4 — waiting jobs must not wait for the next periodic retry, nor for their pending timeout):

- A node that is ``Available`` after a write of the node itself (registered, uncordoned, enlarged, repriced) —
  the waiting jobs of its subscription are served now (services/common/placement.py ``dispatch``: best fit, priority
  order, backfill).
- A node removed, or changed in a way that may leave a waiting job with no node that could ever hold it (fewer
  GPUs or less memory, another GPU model or location) — every waiting job of its
  subscription is admitted again, and one that no node could ever hold now fails at once, saying why, instead of
  waiting days for its pending timeout. A job that only waits for capacity (the node is cordoned, busy) waits on.

- A quota's limit or a budget set, changed or removed (issue 26: a raised, lowered or deleted limit re-evaluates the
  waiting jobs at once, not at their next placement retry) — a changed budget is evaluated first (its notices, and a
  spent ``StopAll`` budget's stop: services/schedules/budget_monitor.py), then every waiting job of its subscription
  is admitted again (a job no quota could ever hold now fails at once), the queue is served (a raised limit, a budget
  no longer spent), and each job still waiting is told why as of now (its ``statusReason``).

Reservations and releases change a node's or a quota's counters, never its ``etag``, and a budget's evaluation
leaves its etag too: those records are not changes (the workflow that releases GPUs serves the queue itself).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from itl_accelerator.domain.records import LimitChange, NodeChange, NodeState
from itl_accelerator.domain.states import Availability, JobStatus
from itl_accelerator.observability import logger
from itl_accelerator.repositories.protocols import Repositories
from itl_accelerator.services.common.context import CallContext, system_context
from itl_accelerator.services.common.placement import DISPATCH_BATCH, Placement
from itl_accelerator.services.workflows.io import JobEnd, StepOutcome
from itl_accelerator.state_machines import StateMachines


@dataclass
class FleetReport:
    """What one batch of stream records did: node and limit changes seen, waiting jobs placed, jobs failed as no
    longer admissible, waiting jobs told a new reason."""

    changes: int = 0
    placed: int = 0
    failed: int = 0
    reasons: int = 0

    def as_metrics(self) -> dict[str, int]:
        return {"changes": self.changes, "placed": self.placed, "failed": self.failed, "reasons": self.reasons}


class FleetChanges:
    """See the module docstring."""

    def __init__(
        self,
        placement: Placement,
        repositories: Repositories,
        state_machines: StateMachines,
        *,
        on_budgets: Callable[[list[LimitChange]], Any] | None = None,
    ):
        self._placement = placement
        self._jobs = repositories.jobs
        self._nodes = repositories.nodes
        self._state_machines = state_machines
        self._on_budgets = on_budgets

    def on_changes(self, changes: list[NodeChange], limits: list[LimitChange] | None = None) -> FleetReport:
        """Handle a batch of node and limit changes (repositories/dynamodb/streams.py reads them from the stream's
        records). Raises on a failure (the batch is delivered again; everything here is idempotent)."""
        report = FleetReport()
        limited: dict[str, str] = {}
        for limit in limits or ():
            report.changes += 1
            limited.setdefault(limit.subscription_id, limit.event_id)
        budgets = [c for c in limits or () if c.kind == "budget"]
        if budgets and self._on_budgets is not None:
            self._on_budgets(budgets)  # evaluated at once: notices, a spent StopAll budget's stop
        grown: dict[str, str] = {}
        shrunk: dict[str, str] = {}
        for change in changes:
            old, new = change.before, change.after
            if old is not None and new is not None and old.etag == new.etag:
                continue  # a reservation, a release or a drain: capacity bookkeeping, not a change of the fleet
            report.changes += 1
            if new is not None and new.availability == Availability.AVAILABLE:
                grown.setdefault(change.subscription_id, change.event_id)
            if old is not None and (new is None or _may_shrink(old, new)):
                shrunk.setdefault(change.subscription_id, change.event_id)
        for subscription, event_id in {**shrunk, **limited}.items():
            report.failed += self.readmit(self._context(event_id), subscription)
        for subscription, event_id in {**shrunk, **grown, **limited}.items():
            served = self._placement.dispatch(self._context(event_id), subscription, refresh=subscription in limited)
            report.placed += served.placed
            report.reasons += served.told
        if report.changes:
            logger.info(
                "Fleet or limits changed",
                extra={"report": report.as_metrics(), "subscriptions": sorted(grown | shrunk | limited)},
            )
        return report

    def readmit(self, ctx: CallContext, subscription_id: str) -> int:
        """Admit every waiting job of the subscription again; end each that no node could ever hold now (Failed,
        inadmissible, saying why). Returns how many ended. One read of the queue and one of the fleet's shapes,
        then one of each waiting job."""
        shapes = self._nodes.fleet_shapes(subscription_id)
        failed = 0
        for key in self._jobs.waiting(subscription_id, DISPATCH_BATCH):
            job = self._jobs.get(key)
            if job is None or job.status != JobStatus.PENDING or not job.task_token or job.cancel_requested:
                continue
            reason = self._placement.inadmissible(job, shapes)
            if reason is None:
                continue
            outcome = StepOutcome(end=JobEnd(status=JobStatus.FAILED, reason=f"Inadmissible: {reason}"), placed=False)
            if self._state_machines.complete_task(job.task_token, outcome.as_output()):
                failed += 1
                logger.info("A waiting job can no longer be held", extra={"job": job.arm_id, "why": reason})
        return failed

    @staticmethod
    def _context(event_id: str) -> CallContext:
        return system_context(f"fleet-{event_id}", f"fleet-{event_id}")


def _may_shrink(old: NodeState, new: NodeState) -> bool:
    """Whether a node's change may leave a waiting job with no node that could ever hold it: its shape changed
    (a cordoned node still counts: it may take the job once it is uncordoned)."""
    return old.shape != new.shape
