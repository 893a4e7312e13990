"""Placement of jobs onto nodes: admission, best fit, and serving the jobs that wait for capacity.

Rules (issue: sparkJobs, Placement):

- **Admission.** A job that no node of its subscription could ever hold — more GPUs or GPU memory than the largest
  node matching its ``gpuModel``/``location`` has, more memory than its GPUs carry, or a model or location no node
  offers — is inadmissible and fails at once, saying why. Read from the subscription's fleet shapes (one ``Query``).
- **Best fit.** A job goes to an ``Available`` node of its subscription that meets its constraints and has room,
  choosing the one left with the fewest free GPUs after placing it. Candidates come from the placement index
  (GSI5, by free GPUs; a constant number of requests whatever the fleet size); the index is never trusted alone:
  the reservation is the same conditional update as an instance's, so concurrent placements never over-commit,
  and a candidate that turned out full (a stale index) is simply passed over for the next.
- **Price ceiling.** A node whose pricing is above the job's ceiling (domain/pricing.py: its ``maxPrice``, or the
  prices in force when it was submitted) never takes it, and neither does a node billing in another currency than a
  budget covering the job counts (services/common/budgets.py). Both are part of the placement index's filter, so
  the pages it reads hold only eligible nodes; a job that only such nodes could take now waits, saying so.
- **Waiting jobs** are served in priority order (9 first), then submission order, whenever capacity frees (a job or
  instance releases GPUs) and periodically. A job that does not fit now does not hold back the jobs behind it that
  do (backfill). **No starvation:** once the first job in that order has waited ``JOB_STARVATION_SECONDS`` without
  fitting, one node that could hold it — the one nearest to fitting — is drained for it: no other job is placed
  there until it is, so it starts at the latest when that node's current work ends (jobs end by their
  ``maxDurationMinutes``).
- **Gangs.** A job of ``accelerator.nodes`` > 1 (Slurm's ``--nodes``, a Kubernetes JobSet/Kueue gang) holds one
  part — ``count`` devices, ``memoryGb`` GiB — on each of that many nodes of one accelerator model, one location
  (its interconnect domain: a multi-node job never spans regions) and one price (so it locks one set of terms),
  all reserved in one transaction or none: never half placed, nothing held while it waits. The candidates are the
  same bounded reads of the placement index (a gang of *n* needs *n* of them in one page); its quota is counted
  once, for all its devices. A gang neither preempts nor is preempted (a part stopped stops the whole).
- **Capacity reservations** (issue 44; the pure rules: domain/scheduling.py ``room``). A node's room for a job is
  what is free now less every other reservation's booking in force at any time of the job's run (until its maximum
  duration; from now on without one): a job that ends before a window opens may use its devices (backfill), one that
  would run into it waits, saying so. A job that names a reservation (``capacityReservationId``) goes only to its
  nodes, inside its window, out of its booking (its hold says so, so the calendar does not count it twice), for at
  most the rest of the window (``capacityReservationEndsAt``: the tracker stops it then), billed nothing more
  (terms priced 0 in the reservation's currency; its meter names the reservation). Read: the reservation (one
  ``GetItem``) and its nodes (one each) — or, with no reservation store wired, the index's candidates holding its
  booking.
- **Preemption.** Before that drain, the first waiting jobs in that order that may preempt (at most
  :data:`PREEMPTION_TRIES`: not a gang, not priority 0, not refused by a budget — so such a job never shields the work
  behind it) may stop lower-priority jobs of their subscription that agreed to it (domain/preemption.py: the rules),
  on a node then held for the one that preempted, the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from decimal import Decimal
from typing import TypeVar

from itl_accelerator.billing.metering import BillingTerms, terms_properties
from itl_accelerator.domain import calendar, preemption, scheduling
from itl_accelerator.domain.budgets import Budget, period_of
from itl_accelerator.domain.records import (
    GANG_CANDIDATE_PAGES,
    Demand,
    FleetShape,
    Job,
    Lease,
    Node,
    Reservation,
    ResourceKey,
    reservation_key,
)
from itl_accelerator.domain.scheduling import (
    Budgets,
    PreemptionTargets,
    Read,
    ReadBudgets,
    ReadCandidates,
    ReadNode,
    ReadPreemptible,
    ReadQuotas,
    ReadReservation,
    ReadShapes,
    ReservationSeen,
    Snapshot,
    Unread,
    WaitingReason,
    Within,
    fit_key,
    gist,
    may_preempt,
    render,
)
from itl_accelerator.domain.states import JobStatus
from itl_accelerator.observability import logger
from itl_accelerator.repositories.errors import (
    CapacityShortfall,
    NodeChanged,
    NodeMissing,
    NodeUnavailable,
    QuotaExceeded,
    StoreBusy,
    WorkloadChanged,
)
from itl_accelerator.repositories.protocols import Effects, Expect
from itl_accelerator.resources import JOBS
from itl_accelerator.services.common import arm_rules
from itl_accelerator.services.common.budgets import BudgetView
from itl_accelerator.services.common.budgets import view as budget_view
from itl_accelerator.services.common.capacity import Capacity
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.services.common.kernel import ResourceKernel
from itl_accelerator.services.workflows.io import JobEnd, StepOutcome
from itl_accelerator.settings import Settings
from itl_accelerator.state_machines import StateMachines

_Decided = TypeVar("_Decided")

#: Candidates tried per placement before the job waits (each a conditional transaction).
MAX_ATTEMPTS = 5
#: Waiting jobs served per dispatch.
DISPATCH_BATCH = 25
#: Waiting jobs, in queue order, that may try to preempt per dispatch (each one bounded Query and its few reads).
PREEMPTION_TRIES = 3


@dataclass(frozen=True)
class Dispatched:
    """What serving a subscription's queue did: jobs ``placed``, and waiting jobs ``told`` a new reason."""

    placed: int = 0
    told: int = 0


@dataclass(frozen=True)
class Placed:
    """Where a job went: the node's key and ARM id, its owner (the supplier the job's earnings go to), and the
    billing terms the job locked there."""

    node: ResourceKey
    node_id: str
    owner: str
    terms: BillingTerms


def reason_gist(reason: str) -> tuple[str, str]:
    """What a waiting reason as stored says, without its figures: its kind (the text before the first ':') and the
    first name it quotes (a budget's, a quota's). A job keeps only the words it was told (``statusReason``), so these
    are read back from them; a reason decided now says the same by its type (domain/scheduling.py ``gist``, which
    agrees with this on every reason ``render`` makes: tests/unit/test_scheduling_properties.py)."""
    kind, _, rest = reason.partition(":")
    named = rest.split("'")[1] if rest.count("'") >= 2 else ""
    return kind, named


def best_fit_key(capacity: Capacity, devices: int, memory_gb: int) -> tuple[int, int]:
    """Sort key of best fit (domain/scheduling.py ``fit_key``, the one ordering) for a node of ``capacity``: the node
    left with the fewest free GPUs after placing ``devices``, then the least free GPU memory (GiB) after ``memory_gb``."""
    return fit_key(capacity.free_devices, capacity.free_memory_gb, devices, memory_gb)


class Placement:
    """See the module docstring: reads a :class:`~itl_accelerator.domain.scheduling.Snapshot` (each part when a
    decision first needs it, :meth:`_decide`), asks domain/scheduling.py to decide, and writes what it decided.
    ``clock`` returns epoch seconds; ``reservations``: the capacity reservations jobs may name (None: not wired — a
    job's reservation is then known only by the bookings on the index's candidates)."""

    def __init__(
        self,
        kernel: ResourceKernel,
        state_machines: StateMachines,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ):
        self._kernel = kernel
        self._reservations = kernel.repositories.reservations
        self._jobs = kernel.repositories.jobs
        self._nodes = kernel.repositories.nodes
        self._quotas = kernel.repositories.quotas
        self._budgets = kernel.repositories.budgets
        self._state_machines = state_machines
        self._settings = settings
        self._clock = clock

    # ----------------------------------------------------------------------------------------------- the snapshot
    def _decide(self, decision: Callable[[Snapshot], _Decided], snapshot: Snapshot) -> _Decided:
        """``decision`` over ``snapshot``, each part it needs read when it first does (domain/scheduling.py: it
        raises :class:`Unread` naming the part; the part is read and it is asked again)."""
        while True:
            try:
                return decision(snapshot)
            except Unread as unread:
                snapshot = self._read(snapshot, unread.part)

    def _read(self, snapshot: Snapshot, part: Read) -> Snapshot:
        """``snapshot`` with ``part`` read: one request each (the same as placement has always made for it)."""
        job = snapshot.job
        subscription = job.key.subscription_id
        match part:
            case ReadBudgets():
                return replace(snapshot, budgets=self._seen(self._budget_view(job)))
            case ReadShapes():
                return replace(snapshot, shapes=tuple(self._nodes.fleet_shapes(subscription)))
            case ReadQuotas(location=location):
                return snapshot.with_quotas(location, self._quotas.in_location(subscription, location))
            case ReadCandidates(within=terms, pages=pages):
                demand = replace(job.demand, within=terms)
                if pages is None:
                    nodes = self._nodes.candidates(subscription, demand, for_job=job.key)
                else:
                    nodes = self._nodes.candidates(subscription, demand, for_job=job.key, pages=pages)
                return snapshot.with_candidates(part, nodes)
            case ReadNode(key=key):
                return snapshot.with_node(key, self._nodes.get(key))
            case ReadPreemptible():
                below = scheduling.ANY_PRIORITY if job.reservation else job.priority
                found = self._jobs.preemptible(subscription, job.kind, below, preemption.MAX_CANDIDATES)
                return replace(snapshot, preemptible=tuple(found))
            case ReadReservation():
                named = reservation_key(job.capacity_reservation_id)
                if named is None:
                    return replace(snapshot, reservation=ReservationSeen(None, known=False))
                return replace(snapshot, reservation=ReservationSeen(self._reservations.get(named)))

    def _snapshot(
        self, job: Job, *, budgets: Budgets | None = None, shapes: tuple[FleetShape, ...] | None = None
    ) -> Snapshot:
        """A snapshot of ``job`` at the clock's now, with its ``budgets`` or fleet ``shapes`` read already."""
        return Snapshot(job, budgets=budgets, shapes=shapes, now=self._clock())

    def _seen(self, view: BudgetView) -> Budgets:
        """``view`` as the scheduler sees it (domain/scheduling.py ``Budgets``): the refusing budget named."""
        refused_by = ""
        if view.refusal is not None:
            period = period_of(datetime.fromtimestamp(self._clock(), UTC))
            refused_by = next((b.name for b in view.budgets if b.blocks(period)), "")
        refusal = view.refusal.message if view.refusal is not None else None
        return Budgets(refusal, refused_by, view.currencies, tuple(b.name for b in view.budgets))

    def _budget_view(self, job: Job, budgets: list[Budget] | None = None) -> BudgetView:
        """The budgets covering ``job`` now, among ``budgets`` (its subscription's; read when not given: one
        ``Query``): whether one refuses it, and the currencies they let it be billed in."""
        now = datetime.fromtimestamp(self._clock(), UTC)
        tags = dict(job.document.get("tags") or {})
        if budgets is None:
            budgets = self._budgets.in_subscription(job.key.subscription_id)
        return budget_view(budgets, now, job.key.resource_group, tags)

    # ----------------------------------------------------------------------------------------------- admission
    def inadmissible(self, job: Job, shapes: list[FleetShape] | None = None) -> str | None:
        """Why no node of the subscription could ever hold ``job`` (None when one could), judged on the
        subscription's fleet ``shapes`` (read when not given: one ``Query``; domain/scheduling.py ``inadmissible``)."""
        snapshot = self._snapshot(job, shapes=None if shapes is None else tuple(shapes))
        decided = self._decide(scheduling.inadmissible, snapshot)
        return None if decided is None else render(decided)

    def waiting_reason(self, job: Job, view: BudgetView | None = None) -> str:
        """Why ``job`` waits, in words (domain/scheduling.py ``waiting``). ``view``: the budgets covering it, when read
        already."""
        return render(self._why_waiting(job, view or self._budget_view(job)))

    def _why_waiting(self, job: Job, view: BudgetView) -> WaitingReason:
        return self._decide(scheduling.waiting, self._snapshot(job, budgets=self._seen(view)))

    # ----------------------------------------------------------------------------------------------- best fit
    def candidates(self, job: Job, within: Within = None) -> list[Node]:
        """Nodes that can take ``job`` now, billing within ``within`` when given (domain/scheduling.py ``within``),
        best fit first (domain/scheduling.py ``best_fit``)."""
        if job.reservation:
            return self._decide(scheduling.reservation_fit, self._snapshot(job))
        read = ReadCandidates(within)
        return self._decide(lambda s: scheduling.best_fit(job, s.candidates_for(read), now=s.now), self._snapshot(job))

    def place(self, ctx: CallContext, job: Job, view: BudgetView | None = None) -> Placed | None:
        """Reserve ``job``'s GPUs on the best-fitting node within its price ceiling and move it Pending → Scheduled,
        one transaction (the node's conditional update judges). None when no candidate could take it now, a spent
        budget holds it back, or the job changed (e.g. a cancel came). ``view``: the budgets covering it, when read
        already."""
        view = view or self._budget_view(job)
        if view.refusal is not None:
            return None
        # a job of a capacity reservation pays through it: any price of its nodes
        within = None if job.reservation else scheduling.within(job, view.currencies)
        if job.gang_size > 1:
            return self._place_gang(ctx, job, within)
        for node in self.candidates(job, within)[:MAX_ATTEMPTS]:
            for _ in range(3):  # again on a busy store, or on the node as it is now
                try:
                    if not scheduling.matches(job, node, within):
                        break  # the index was behind the node's pricing
                    return self._reserve(ctx, job, node)
                except StoreBusy:
                    continue
                except NodeChanged:
                    refreshed = self._nodes.get(node.key)
                    if refreshed is None or not scheduling.matches(job, refreshed, within):
                        break
                    if not scheduling.has_room(job, refreshed, self._clock()):
                        break  # a booking written since keeps its room (a reservation's window it would run into)
                    node = refreshed  # its pricing or shape changed since it was read: lock what is in force now
                except (CapacityShortfall, NodeUnavailable, NodeMissing, QuotaExceeded):
                    break  # the index was behind, or the node's quotas are full: the next candidate
                except WorkloadChanged:
                    return None
        return None

    def _place_gang(self, ctx: CallContext, job: Job, within: Within) -> Placed | None:
        """Gangs (module docstring): reserve one part of ``job`` on each of ``job.gang_size`` nodes at once — the
        nodes domain/scheduling.py ``gang_fit`` chose over a bounded read (:data:`GANG_CANDIDATE_PAGES` pages of the
        placement index) — in one transaction, or nothing. None when no such set has room now, or the job changed."""
        read = ReadCandidates(within, GANG_CANDIDATE_PAGES)
        for _ in range(3):  # again on a busy store, or on the nodes as they are now
            chosen = self._decide(lambda s: self._gang_fit(s, read, within), self._snapshot(job))
            if chosen is None:
                return None
            try:
                return self._reserve(ctx, job, chosen[0], more=tuple(chosen[1:]))
            except (StoreBusy, NodeChanged, CapacityShortfall, NodeUnavailable, NodeMissing):
                continue  # one of them changed since it was read: read the candidates again
            except (QuotaExceeded, WorkloadChanged):
                return None
        return None

    @staticmethod
    def _gang_fit(snapshot: Snapshot, read: ReadCandidates, within: Within) -> list[Node] | None:
        """A gang's nodes: its reservation's (domain/scheduling.py ``reservation_fit``) or the index's best group."""
        job = snapshot.job
        if job.reservation:
            return scheduling.reservation_fit(snapshot) or None
        return scheduling.gang_fit(job, snapshot.candidates_for(read), within, now=snapshot.now)

    def _reserve(self, ctx: CallContext, job: Job, node: Node, more: tuple[Node, ...] = ()) -> Placed:
        """Reserve on ``node`` as read (and, for a gang, on each of ``more`` too, in the same transaction): the
        reservation is conditioned on the node's etag, so the billing terms the job locks are the ones in force at
        the moment of the reservation (billing/metering.py). Raises the repositories' typed errors
        (:class:`NodeChanged` when the node was written since it was read)."""
        placed = Placed(node=node.key, node_id=node.arm_id, owner=node.owner, terms=self._terms(job, node))
        parts = (node, *more)
        names = ", ".join(n.name for n in parts)
        backend = node.backend  # a gang's nodes share one platform (domain/scheduling.py gang_groups)
        platform = f"Slurm cluster '{backend.cluster}'" if backend.is_slurm else "the DGX Platform"
        reason = f"Placed on {names}; submitting to {platform}."
        # the nodes' calendars: it holds them until its maximum duration from now (Slurm's start plus time limit;
        # open-ended without one) — what a waiting job's estimated start reads (domain/calendar.py); a job of a
        # capacity reservation at most until its window ends (it is stopped then)
        until = int(self._clock()) + job.max_duration_seconds if job.max_duration_seconds else 0
        window = scheduling.own_booking(node, job.reservation)
        if window is not None:
            until = min(until, window.end) if until else window.end
        scheduled = arm_rules.changed(
            ctx,
            job,
            {
                "statusReason": reason,
                "assignedNode": placed.node_id,
                "billingTerms": terms_properties(placed.terms, ctx.now_iso(), node.kind),
                **({"assignedNodes": [n.arm_id for n in parts]} if more else {}),
                **({"capacityReservationEndsAt": scheduling.utc(window.end)} if window is not None else {}),
            },
            status=JobStatus.SCHEDULED,
            capacity_reserved=True,
            node=node.key,
            node_owner=placed.owner,
            billing_terms=placed.terms,
            queued=False,
            task_token=None,
            drain_node=None,
            gang_nodes=tuple(n.key for n in more),
            lease=Lease.owned(self._clock() + self._settings.workflow_lease_grace_seconds),
        )
        # a gang's quota is counted once, by its first part, for all its devices
        reservation = replace(
            self._reservation_on(job, node, until), quota_devices=job.devices * len(parts) if more else None
        )
        others = tuple(replace(self._reservation_on(job, n, until), quota=None) for n in more)
        self._jobs.update(
            job,
            scheduled,
            self._kernel.audit(ctx, JOBS, job.key, JOBS.write, reason, job.document, scheduled.document),
            expect=Expect(status=(JobStatus.PENDING,), cancel_requested=False, operation_id=job.operation_id),
            effects=Effects(reservation=reservation, more_reservations=others),
        )
        if job.drain_node is not None:
            self._nodes.set_draining(job.drain_node, None)
        return placed

    @staticmethod
    def _reservation_on(job: Job, node: Node, until: int) -> Reservation:
        """``job``'s reservation of devices on ``node`` held ``until`` (epoch s; 0 open-ended); its hold names the
        capacity reservation it runs in, whose booking its devices come out of (domain/records.py ``Hold``)."""
        taken = Reservation.on(node, job.devices, job.memory_gb, for_job=job.key, until=until)
        if not job.reservation or taken.hold is None:
            return taken
        return replace(taken, hold=replace(taken.hold, reservation=job.reservation))

    def _terms(self, job: Job, node: Node) -> BillingTerms:
        """The terms ``job`` locks on ``node``: the node's — or, run in a capacity reservation, which bills its window
        whole, its terms priced 0 (in its currency: the reservation's, read once; the node's once it is gone)."""
        if not job.reservation:
            return node.terms
        key = reservation_key(job.capacity_reservation_id)
        found = self._reservations.get(key) if key is not None else None
        return replace(found.terms if found is not None else node.terms, price_per_gpu_hour=Decimal(0))

    # ----------------------------------------------------------------------------------------------- waiting jobs
    def dispatch(self, ctx: CallContext, subscription_id: str, *, refresh: bool = False) -> Dispatched:
        """Serve the subscription's waiting jobs (module docstring): place each that fits now, in order, and resume
        its execution; tell each that still waits why, when that changed in kind or in what it names (a node freed
        but above its price ceiling, a quota now full...) — or, with ``refresh`` (a limit changed), whenever its
        text did; drain a node for the first one if it starves."""
        placed = 0
        waiting: list[tuple[Job, BudgetView]] = []
        keys = self._jobs.waiting(subscription_id, DISPATCH_BATCH)
        budgets = self._budgets.in_subscription(subscription_id) if keys else []  # once for the whole queue
        for key in keys:
            job = self._jobs.get(key)
            if job is None or job.status != JobStatus.PENDING or not job.task_token or job.cancel_requested:
                continue
            view = self._budget_view(job, budgets)
            if job.reservation and self._end_if_reservation_gone(job):
                continue
            if self.place(ctx, job, view) is not None:
                placed += 1
                if not self._state_machines.complete_task(job.task_token, StepOutcome(placed=True).as_output()):
                    logger.warning(
                        "A placed job's execution no longer waits; the reconciler ends it", extra={"job": job.arm_id}
                    )
                continue
            waiting.append((job, view))
        told = 0
        for at, (job, view) in enumerate(waiting):  # after every placement
            now_told = self._tell(ctx, job, view, refresh)
            if now_told is not job:  # as written: what preempting for it is conditioned on
                told, waiting[at] = told + 1, (now_told, view)
        # preemption for the first waiting jobs in order that may preempt (a gang, a job of priority 0 or one its
        # budget refuses never does: it must not shield the work behind it), at most PREEMPTION_TRIES of them
        tries = [(job, view) for job, view in waiting if may_preempt(job, self._seen(view))][:PREEMPTION_TRIES]
        preempted = any(self.preempt_for(ctx, job, view) for job, view in tries)
        if waiting and not preempted:
            self._drain_for_if_starving(waiting[0][0])
        self.estimate_starts(waiting)
        return Dispatched(placed, told)

    def _reservation_nodes(self, job: Job) -> list[Node]:
        """The nodes of the capacity reservation ``job`` runs in, as they are now (none when it is gone)."""
        named = reservation_key(job.capacity_reservation_id)
        found = self._reservations.get(named) if named is not None else None
        return [n for k in (found.nodes if found is not None else ()) if (n := self._nodes.get(k)) is not None]

    def _end_if_reservation_gone(self, job: Job) -> bool:
        """A waiting job whose capacity reservation is gone (cancelled) or whose window ended before it got room can
        never run in it: its execution is resumed with its end, Failed, "Inadmissible: <why>" (as at admission,
        job_steps.py ``place``). True when so."""
        decided = self._decide(scheduling.reservation_refusal, self._snapshot(job))
        if decided is None or not job.task_token:
            return False
        end = JobEnd(status=JobStatus.FAILED, reason=f"Inadmissible: {render(decided)}")
        self._state_machines.complete_task(job.task_token, StepOutcome(end=end, placed=False).as_output())
        return True

    # ----------------------------------------------------------------------------------------------- start estimates
    def estimate_starts(self, waiting: list[tuple[Job, BudgetView]]) -> int:
        """Estimate when each of ``waiting`` (the subscription's waiting jobs as read, in the order they are served,
        each with the budgets covering it) will start (domain/calendar.py: the rules) and record each estimate that
        moved on its job — bookkeeping apart from its document and etag, only while it is still Pending. Reads the
        placement index's page of nodes once per distinct demand (kind, model, location, vendor, price terms),
        whatever their room — for a job of a capacity reservation, its reservation's nodes (its reservation and one
        ``GetItem`` per node, once per reservation). Returns how many estimates were written."""
        nodes: dict[ResourceKey, list[Node]] = {}
        read: dict[Demand, list[Node]] = {}
        queue: list[tuple[Job, Within]] = []
        booked: dict[str, list[Node]] = {}
        for job, view in waiting:
            terms = scheduling.within(job, view.currencies)
            if job.reservation:
                if job.reservation not in booked:
                    booked[job.reservation] = self._reservation_nodes(job)
                nodes[job.key] = booked[job.reservation]
                queue.append((job, terms))
                continue
            demand = replace(job.demand, devices=0, memory_gb=0, within=terms)
            if demand not in read:
                read[demand] = self._nodes.candidates(job.key.subscription_id, demand, for_job=job.key)
            nodes[job.key] = read[demand]
            queue.append((job, terms))
        now = self._clock()
        written = 0
        for (job, _), estimate in zip(queue, calendar.estimate_queue(queue, nodes, now), strict=True):
            stored = estimate.stored(now)
            if calendar.moved(job.start_estimate, stored):
                written += self._jobs.note(
                    job, replace(job, start_estimate=stored), expect=Expect(status=(JobStatus.PENDING,))
                )
        return written

    # ----------------------------------------------------------------------------------------------- preemption
    def preempt_for(self, ctx: CallContext, job: Job, view: BudgetView) -> bool:
        """Preempt lower-priority preemptible jobs of the subscription for ``job`` (waiting, at the head of its queue,
        as read; ``view``: the budgets covering it) when stopping them gives it room on a node it may use: the
        targets are domain/scheduling.py ``preemption_targets`` (the rules and the bound on reads:
        domain/preemption.py), then :meth:`_issue_preemptions` acts. False when nothing was preempted."""
        decided = self._decide(scheduling.preemption_targets, self._snapshot(job, budgets=self._seen(view)))
        return decided is not None and self._issue_preemptions(ctx, job, decided)

    def _issue_preemptions(self, ctx: CallContext, job: Job, targets: PreemptionTargets) -> bool:
        """Hold ``targets.node`` for ``job`` and tell each victim to stop (:meth:`_preempt`): the node is drained for
        it, so the capacity the victims free is its. False (the hold undone) when the node is held for another
        already (a starving job, a preemption under way), the job changed, or every victim did."""
        node = targets.node
        # the node is held for the job (not when it is held for another already), and the job records the hold
        # (not when another dispatch gave it one meanwhile)
        if not self._nodes.set_draining(node, job.key, unless_held=True):
            return False
        held = replace(job, drain_node=node)
        if not self._jobs.note(job, held, expect=Expect(etag=job.etag, status=(JobStatus.PENDING,))):
            self._nodes.set_draining(node, None)
            return False
        stopped = sum(self._preempt(ctx, victim, job, self._preempted_why(job, node)) for victim in targets.victims)
        if not stopped:  # every victim changed meanwhile (a stale index entry, a cancel): let the node go again
            self._nodes.set_draining(node, None)
            self._jobs.note(held, replace(held, drain_node=None), expect=Expect(etag=job.etag))
            return False
        logger.info(
            "Preempted jobs for a higher-priority one", extra={"job": job.arm_id, "node": node.name, "victims": stopped}
        )
        return True

    def _preempted_why(self, job: Job, node: ResourceKey) -> str | None:
        """What a victim of ``job`` is told when ``job`` runs in a capacity reservation (the window it booked on
        ``node``); None otherwise (:meth:`_preempt` says the priorities)."""
        if not job.reservation:
            return None
        held = self._nodes.get(node)
        booking = scheduling.own_booking(held, job.reservation) if held is not None else None
        window = f" from {scheduling.utc(booking.start)} to {scheduling.utc(booking.end)}" if booking else ""
        grace = self._settings.job_preemption_grace_seconds
        return (
            f"Preempted: the devices it holds are booked by a capacity reservation{window}, whose job needs them now: "
            f"asked to stop with a {grace} s grace period."
        )

    def _preempt(self, ctx: CallContext, victim: Job, job: Job, why: str | None = None) -> bool:
        """Tell ``victim`` (as read) it is preempted by ``job``: an audited change saying by which job and why, its
        grace period and when (``preemptedBy``, ``preemptedAt``, ``statusReason``), conditioned on the victim as
        read and on no cancel being under way; then its execution is resumed at once with its end, ``Preempted``
        (stopped on the DGX Platform with the grace period, billed until it stopped there: job_steps.py). False when
        it changed meanwhile (it ended, or a cancel came)."""
        grace = self._settings.job_preemption_grace_seconds
        # the job that preempted it is named in preemptedBy, which only admins see (services/common/job_access.py):
        # a consumer may not learn of another user's job; its priority is what the rule needs said
        reason = why or (
            f"Preempted by a job of priority {job.priority} of the subscription (this job's: {victim.priority}), which "
            f"needs its node: asked to stop with a {grace} s grace period."
        )
        # a running victim's next tracker check waits for its stop (grace and stop time), so the tracker does not end
        # it behind its execution's back (a requeue would be lost)
        settings = self._settings
        checked = self._clock() + grace + settings.job_stop_timeout_seconds + settings.workflow_lease_grace_seconds
        preempted = arm_rules.changed(
            ctx,
            victim,
            {"statusReason": reason, "preemptedBy": job.arm_id, "preemptedAt": ctx.now_iso()},
            cancel_requested=True,
            **({"lease": Lease.tracked(checked)} if victim.status == JobStatus.RUNNING else {}),
        )
        try:
            self._jobs.update(
                victim,
                preempted,
                # the audit trail (admins') names the job that preempted it
                self._kernel.audit(
                    ctx, JOBS, victim.key, JOBS.write, f"{reason} By {job.arm_id}.", victim.document, preempted.document
                ),
                expect=Expect(
                    etag=victim.etag, status=(JobStatus.SCHEDULED, JobStatus.RUNNING), cancel_requested=False
                ),
            )
        except WorkloadChanged:
            return False
        current = self._jobs.get(victim.key)  # the token it waits on now (the index's copy may predate it)
        if current is not None and current.task_token:
            end = JobEnd(status=JobStatus.PREEMPTED, reason=reason, stop=True)
            self._state_machines.complete_task(current.task_token, StepOutcome(end=end).as_output())
        return True

    def _tell(self, ctx: CallContext, job: Job, view: BudgetView, refresh: bool) -> Job:
        """Write why ``job`` (waiting, as read) waits now, when that changed in kind or in what it names (a budget,
        a quota) — or, with ``refresh``, at all: an audited change of its ``statusReason``, conditioned on the job as
        read. Otherwise figures in a reason (GPUs in use, the lowest price above the ceiling) are as of when it was
        told: they alone do not rewrite the job on every release of GPUs (each rewrite is an audit item and a new
        etag). The job as written when told, ``job`` itself otherwise."""
        decided = self._why_waiting(job, view)
        reason = render(decided)
        told = job.properties.get("statusReason") or ""  # a job keeps only the words it was told
        if told == reason or (not refresh and reason_gist(told) == gist(decided)):
            return job
        told_now = arm_rules.changed(ctx, job, {"statusReason": reason})
        try:
            self._jobs.update(
                job,
                told_now,
                self._kernel.audit(ctx, JOBS, job.key, JOBS.write, reason, job.document, told_now.document),
                expect=Expect(etag=job.etag, status=(JobStatus.PENDING,), cancel_requested=False),
            )
        except WorkloadChanged:
            return job  # placed, canceled or told meanwhile: its own step says why now
        return told_now

    def _drain_for_if_starving(self, job: Job) -> None:
        """No starvation (module docstring): when ``job`` (the first waiting, as read) starves, drain the node nearest
        to fitting it (domain/scheduling.py ``starving``, ``drain_target``) and record the drain on the job (cleared
        when it is placed or ends)."""
        if not scheduling.starving(job, self._clock(), self._settings.job_starvation_seconds):
            return
        nodes = self._nodes.candidates(
            job.key.subscription_id, replace(job.demand, devices=0, memory_gb=0), for_job=job.key
        )
        nearest = scheduling.drain_target(job, nodes)
        if nearest is None:
            return
        self._nodes.set_draining(nearest.key, job.key)
        self._jobs.note(
            job,
            replace(job, drain_node=nearest.key, lease=job.lease or Lease.owned(self._clock())),
            expect=Expect(status=(JobStatus.PENDING,)),
        )
        logger.info("Draining a node for a starving job", extra={"job": job.arm_id, "node": nearest.arm_id})
