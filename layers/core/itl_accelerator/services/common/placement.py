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

from itl_accelerator.arm import normalize_location
from itl_accelerator.billing.metering import (
    MAX_MINIMUM_BILLABLE_SECONDS,
    MAX_PRICE_PER_GPU_HOUR,
    BillingTerms,
    terms_properties,
)
from itl_accelerator.domain import preemption
from itl_accelerator.domain.accelerators import model_of_key, vendor_key
from itl_accelerator.domain.budgets import Budget
from itl_accelerator.domain.pricing import ANY_INCREMENT, CeilingBasis, describe_terms
from itl_accelerator.domain.pricing import within as within_terms
from itl_accelerator.domain.quotas import QuotaUsage, quota_names
from itl_accelerator.domain.records import (
    GANG_CANDIDATE_PAGES,
    FleetShape,
    Job,
    Lease,
    Node,
    Reservation,
    ResourceKey,
    per_gpu_memory_fits,
)
from itl_accelerator.domain.states import Availability, JobStatus
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
    """What a waiting reason says, without its figures: its kind (the text before the first ':') and the first name
    it quotes (a budget's, a quota's)."""
    kind, _, rest = reason.partition(":")
    named = rest.split("'")[1] if rest.count("'") >= 2 else ""
    return kind, named


def _quota_wait(job: Job, quota: QuotaUsage, needs: str) -> str:
    """The reason of a job a full ``quota`` holds back, which ``needs`` devices (as said: ``8``, ``16 (2 nodes of
    8)``)."""
    return (
        f"Waiting for quota: the {job.kind} quota '{quota.name}' of the subscription in '{quota.location}' allows "
        f"{quota.limit} {job.kind}s and {quota.current} are in use; the job needs {needs}."
    )


def _budget_words(view: BudgetView) -> str:
    """What the budgets covering a job allow, in words (``the budget 'b' covering it counts USD only``); "" when they
    allow every currency."""
    if view.currencies is None:
        return ""
    counted = ", ".join(sorted(view.currencies)) or "no single currency"
    names = ", ".join(f"'{b.name}'" for b in view.budgets)
    return f"the budget {names} covering it counts {counted} only"


def best_fit_key(capacity: Capacity, gpus: int, memory_gb: int) -> tuple[int, int]:
    """Sort key of best fit: the node left with the fewest free GPUs after placing ``gpus``, then the least free
    GPU memory (GiB) after ``memory_gb``."""
    return capacity.free_gpus - gpus, capacity.free_memory_gb - memory_gb


class Placement:
    """See the module docstring. ``clock`` returns epoch seconds."""

    def __init__(
        self,
        kernel: ResourceKernel,
        state_machines: StateMachines,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ):
        self._kernel = kernel
        self._jobs = kernel.repositories.jobs
        self._nodes = kernel.repositories.nodes
        self._quotas = kernel.repositories.quotas
        self._budgets = kernel.repositories.budgets
        self._state_machines = state_machines
        self._settings = settings
        self._clock = clock

    # ----------------------------------------------------------------------------------------------- admission
    def inadmissible(self, job: Job, shapes: list[FleetShape] | None = None) -> str | None:
        """Why no node of the subscription could ever hold ``job`` (None when one could), judged on the
        subscription's fleet ``shapes`` (read when not given: one ``Query``)."""
        key, location, kind, vendor = job.gpu_model, job.location, job.kind, job.vendor
        if shapes is None:
            shapes = self._nodes.fleet_shapes(job.key.subscription_id)
        if not shapes:
            return "The subscription has no nodes."
        matching = [s for s in shapes if s.matches(key, location, kind, vendor)]
        model = model_of_key(key)
        if model:
            held = f"{kind} model '{model}'"
        elif not any(s.matches(key, "", kind, vendor) for s in shapes):
            held = f"{vendor} {kind}s" if vendor else f"{kind}s"
        else:
            held = ""
        wanted = " and ".join(part for part in (held, f"location '{location}'" if location else "") if part)
        if not matching:
            return f"No node of the subscription has {wanted}."
        fits = [s for s in matching if s.could_hold(job.gpus, job.memory_gb)]
        if fits and job.gang_size > 1:
            together: dict[tuple[str, str, BillingTerms | None], int] = {}
            for shape in fits:
                group = (shape.gpu_model, shape.location, shape.terms)
                together[group] = together.get(group, 0) + shape.nodes
            if max(together.values()) < job.gang_size:
                return (
                    f"The job asks for {job.gang_size} nodes with {job.gpus} {kind}s and {job.memory_gb} GiB each, of "
                    f"one model, in one location, at one price; the subscription has at most {max(together.values())} "
                    "such nodes."
                )
            return self._beyond_quota(job, fits) or self._priced_nowhere(job)
        if fits:
            return self._beyond_quota(job, fits) or self._priced_nowhere(job)
        largest = max(matching, key=lambda s: (s.gpu_total, s.memory_gb_total))
        return (
            f"The job asks for {job.gpus} {kind}s and {job.memory_gb} GiB of {kind} memory; the largest node"
            f"{' with ' + wanted if wanted else ''} has {largest.gpu_total} {kind}s and "
            f"{largest.memory_gb_total} GiB."
        )

    def _priced_nowhere(self, job: Job) -> str | None:
        """Why ``job`` can never run when its price ceiling admits no node (domain/pricing.py): no node that could hold
        it was among those its submitter could see (its resource groups), in a currency its budgets count, when it was
        submitted — so nothing admits it, whatever frees up later. None when its ceiling admits some terms (or it has
        none). Reads the budgets covering it (one ``Query``) to say which one narrowed the currencies."""
        ceiling = job.price_ceiling
        if ceiling is None or ceiling.terms or ceiling.basis != CeilingBasis.PRICES_AT_SUBMISSION:
            return None
        counted = _budget_words(self._budget_view(job))
        return (
            "No node that could hold the job was in the submitter's resource groups"
            + (f" and billing in a currency its budget counts ({counted})" if counted else "")
            + f" when it was submitted ({ceiling.fixed_at}), so its price ceiling admits no price. Submit it again "
            "with properties.maxPrice to let it run on any node of the subscription billing within that price."
        )

    def _limits(self, subscription_id: str, location: str) -> dict[str, QuotaUsage]:
        return {u.name: u for u in self._quotas.in_location(subscription_id, location) if u.limit is not None}

    def _beyond_quota(self, job: Job, fits: list[FleetShape]) -> str | None:
        """Why no quota would ever let ``job`` run on any of the shapes that could hold it (None when one would): a
        limit below what it asks. One read of the quotas per location of those shapes."""
        refusals: list[str] = []
        limits: dict[str, dict[str, QuotaUsage]] = {}
        for shape in fits:
            if shape.location not in limits:
                limits[shape.location] = self._limits(job.key.subscription_id, shape.location)
            total = job.gpus * job.gang_size  # a gang's quota counts all its parts
            blocking = [
                limits[shape.location][name]
                for name in quota_names(shape.gpu_model)
                if name in limits[shape.location] and (limits[shape.location][name].limit or 0) < total
            ]
            if not blocking:
                return None
            quota = blocking[0]
            refusals.append(f"the {job.kind} quota '{quota.name}' in '{quota.location}' allows {quota.limit}")
        return f"The job asks for {job.gpus * job.gang_size} {job.kind}s; " + "; ".join(dict.fromkeys(refusals)) + "."

    def waiting_reason(self, job: Job, view: BudgetView | None = None) -> str:
        """Why ``job`` waits: a spent budget; or every node with room now above its price ceiling or in a currency
        its budget does not count (saying which, and the ceiling); or every node that could take it now held back by a
        full GPU quota (saying which); or no node with room. ``view``: the budgets covering it, when read already."""
        view = view or self._budget_view(job)
        if view.refusal is not None:
            return f"Waiting for budget: {view.refusal.message}"
        if job.gang_size > 1:
            room_for_all = [
                g for g in self._gang_groups(job, self._within(job, view.currencies)) if len(g) >= job.gang_size
            ]
            total = job.gpus * job.gang_size
            for group in room_for_all[:1]:  # nodes enough have room: a quota holds it back
                if (quota := self._full_quota(job, group[0].shape, total, {})) is not None:
                    return _quota_wait(job, quota, f"{total} ({job.gang_size} nodes of {job.gpus})")
            if not room_for_all and (walls := self._quota_wherever(job, total, {})):
                return _quota_wait(job, walls[0], f"{total} ({job.gang_size} nodes of {job.gpus})")
            return (
                f"Waiting for capacity: the job needs {job.gang_size} nodes with {job.gpus} free {job.kind}s and "
                f"{job.memory_gb} GiB of {job.kind} memory each, of one model, in one location, at one price, at "
                "once; fewer have room now."
            )
        room = [
            n
            for n in self._nodes.candidates(job.key.subscription_id, job.demand, for_job=job.key)
            if per_gpu_memory_fits(n.gpu_total, n.memory_gb_total, job.gpus, job.memory_gb)
        ]
        within = self._within(job, view.currencies)
        if room and within is not None:
            priced = [n for n in room if within_terms(n.terms, within)]
            if not priced:
                return self._priced_out(job, room, view)
            room = priced
        full: list[QuotaUsage] = []
        limits: dict[str, dict[str, QuotaUsage]] = {}
        for node in room:
            if (blocking := self._full_quota(job, node.shape, job.gpus, limits)) is None:
                break
            full.append(blocking)
        else:
            if full or (not room and (full := self._quota_wherever(job, job.gpus, limits))):
                return _quota_wait(job, full[0], str(job.gpus))
        made = f"{job.vendor} " if job.vendor else ""  # a job of one vendor's devices: say whose (not AMD's)
        return (
            f"Waiting for capacity: no node of the subscription has {job.gpus} free {made}{job.kind}s and "
            f"{job.memory_gb} GiB of {job.kind} memory now."
        )

    def _quota_wherever(self, job: Job, need: int, limits: dict[str, dict[str, QuotaUsage]]) -> list[QuotaUsage]:
        """When no node has room for ``job`` now: the full quotas (less headroom than ``need`` devices: a gang's are
        all its parts') that would hold it back on every shape of node that
        could ever hold it (one ``Query`` of the fleet's shapes, one of the quotas per location) — so a job a full
        quota holds back is told of the quota, not of the capacity its own work takes. Empty when some shape's quotas
        have room (capacity is what it waits for)."""
        able = [
            shape
            for shape in self._nodes.fleet_shapes(job.key.subscription_id)
            if shape.matches(job.gpu_model, job.location, job.kind, job.vendor)
            and shape.could_hold(job.gpus, job.memory_gb)
        ]
        blocking = [self._full_quota(job, shape, need, limits) for shape in able]
        return [q for q in blocking if q is not None] if able and all(blocking) else []

    def _full_quota(
        self, job: Job, shape: FleetShape, need: int, limits: dict[str, dict[str, QuotaUsage]]
    ) -> QuotaUsage | None:
        """The first quota ``job`` counts in on a node of ``shape`` (domain/quotas.py ``quota_names``: its kind's and
        its model's, in its location) with less headroom than ``need`` devices; None when none. ``limits``: the
        limited quotas read so far, by location (one Query per location, read here when missing)."""
        if shape.location not in limits:
            limits[shape.location] = self._limits(job.key.subscription_id, shape.location)
        here = limits[shape.location]
        return next(
            (here[n] for n in quota_names(shape.gpu_model) if n in here and (here[n].headroom or 0) < need), None
        )

    def _priced_out(self, job: Job, room: list[Node], view: BudgetView) -> str:
        """The reason of a job that only nodes above its ceiling (or in a currency its budget does not count) could
        take now: how many, the lowest terms among them (no node named: it may lie outside the submitter's scope),
        and the ceiling."""
        terms = min((n.terms for n in room), key=lambda t: (t.price_per_gpu_hour, t.currency))
        ceiling = job.price_ceiling
        why = f"the job's price ceiling is {ceiling.describe(job.kind)}" if ceiling is not None else ""
        if view.currencies is not None and terms.currency not in view.currencies:
            why = _budget_words(view) + (f", and {why}" if why else "")
        many = len(room) != 1
        nodes = f"{len(room)} node{'s' if many else ''} with room now bill{'' if many else 's'}"
        return (
            f"Waiting for a node within its price ceiling: {nodes} above it (the lowest: {describe_terms(terms, job.kind)}); "
            f"{why}."
        )

    # ----------------------------------------------------------------------------------------------- best fit
    def candidates(self, job: Job, within: tuple[BillingTerms, ...] | None = None) -> list[Node]:
        """Nodes that can take ``job`` now, billing within ``within`` when given (:meth:`_within`), best fit first
        (fewest free GPUs left, then least free memory)."""
        demand = replace(job.demand, within=within)
        nodes = self._nodes.candidates(job.key.subscription_id, demand, for_job=job.key)
        fitting = [n for n in nodes if per_gpu_memory_fits(n.gpu_total, n.memory_gb_total, job.gpus, job.memory_gb)]
        return sorted(fitting, key=lambda n: best_fit_key(Capacity.of(n), job.gpus, job.memory_gb))

    @staticmethod
    def _matches(job: Job, node: Node, within: tuple[BillingTerms, ...] | None) -> bool:
        """Whether ``node`` (as read now) still meets the job's constraints: accelerator kind, vendor and model, location,
        device memory per device, its pricing within ``within`` (its free capacity is judged by the reservation itself)."""
        return (
            node.backend_placeable  # its platform takes work on it (a Slurm node DOWN or drained does not)
            and node.kind.lower() == job.kind.lower()
            and (job.vendor is None or vendor_key(node.accelerator.vendor) == vendor_key(job.vendor))
            and (not model_of_key(job.gpu_model) or node.accelerator.key == job.gpu_model)
            and (not job.location or normalize_location(node.location) == job.location)
            and per_gpu_memory_fits(node.gpu_total, node.memory_gb_total, job.gpus, job.memory_gb)
            and within_terms(node.terms, within)
        )

    @staticmethod
    def _within(job: Job, currencies: frozenset[str] | None) -> tuple[BillingTerms, ...] | None:
        """The terms a node taking ``job`` must bill within: its price ceiling, in the ``currencies`` its budgets
        count (None: no constraint — a job from before ceilings, with no budget)."""
        ceiling = job.price_ceiling
        if ceiling is not None:
            return ceiling.in_currencies(currencies).terms
        if currencies is None:
            return None
        top = Decimal(MAX_PRICE_PER_GPU_HOUR)
        return tuple(BillingTerms(top, c, ANY_INCREMENT, MAX_MINIMUM_BILLABLE_SECONDS) for c in sorted(currencies))

    def _budget_view(self, job: Job, budgets: list[Budget] | None = None) -> BudgetView:
        """The budgets covering ``job`` now, among ``budgets`` (its subscription's; read when not given: one
        ``Query``): whether one refuses it, and the currencies they let it be billed in."""
        now = datetime.fromtimestamp(self._clock(), UTC)
        tags = dict(job.document.get("tags") or {})
        if budgets is None:
            budgets = self._budgets.in_subscription(job.key.subscription_id)
        return budget_view(budgets, now, job.key.resource_group, tags)

    def place(self, ctx: CallContext, job: Job, view: BudgetView | None = None) -> Placed | None:
        """Reserve ``job``'s GPUs on the best-fitting node within its price ceiling and move it Pending → Scheduled,
        one transaction (the node's conditional update judges). None when no candidate could take it now, a spent
        budget holds it back, or the job changed (e.g. a cancel came). ``view``: the budgets covering it, when read
        already."""
        view = view or self._budget_view(job)
        if view.refusal is not None:
            return None
        within = self._within(job, view.currencies)
        if job.gang_size > 1:
            return self._place_gang(ctx, job, within)
        for node in self.candidates(job, within)[:MAX_ATTEMPTS]:
            for _ in range(3):  # again on a busy store, or on the node as it is now
                try:
                    if not self._matches(job, node, within):
                        break  # the index was behind the node's pricing
                    return self._reserve(ctx, job, node)
                except StoreBusy:
                    continue
                except NodeChanged:
                    refreshed = self._nodes.get(node.key)
                    if refreshed is None or not self._matches(job, refreshed, within):
                        break
                    node = refreshed  # its pricing or shape changed since it was read: lock what is in force now
                except (CapacityShortfall, NodeUnavailable, NodeMissing, QuotaExceeded):
                    break  # the index was behind, or the node's quotas are full: the next candidate
                except WorkloadChanged:
                    return None
        return None

    def _place_gang(self, ctx: CallContext, job: Job, within: tuple[BillingTerms, ...] | None) -> Placed | None:
        """Gangs (module docstring): reserve one part of ``job`` on each of ``job.gang_size`` nodes at once — nodes of
        one accelerator model, one location and one price (so the job locks one set of terms), best fit first —
        in one transaction, or nothing. None when no such set has room now, or the job changed."""
        wanted = job.gang_size
        for _ in range(3):  # again on a busy store, or on the nodes as they are now
            chosen = next((nodes[:wanted] for nodes in self._gang_groups(job, within) if len(nodes) >= wanted), None)
            if chosen is None:
                return None
            try:
                return self._reserve(ctx, job, chosen[0], more=tuple(chosen[1:]))
            except (StoreBusy, NodeChanged, CapacityShortfall, NodeUnavailable, NodeMissing):
                continue  # one of them changed since it was read: read the candidates again
            except (QuotaExceeded, WorkloadChanged):
                return None
        return None

    def _gang_groups(self, job: Job, within: tuple[BillingTerms, ...] | None) -> list[list[Node]]:
        """The candidates a part of ``job`` fits on now (a gang's bounded read: :data:`GANG_CANDIDATE_PAGES` pages of
        the placement index), grouped as a gang must be placed — one accelerator model, location and price — each
        group best fit first, the groups in the order of their best node."""
        demand = replace(job.demand, within=within)
        nodes = self._nodes.candidates(job.key.subscription_id, demand, for_job=job.key, pages=GANG_CANDIDATE_PAGES)
        fitting = sorted(
            (n for n in nodes if self._matches(job, n, within)),
            key=lambda n: best_fit_key(Capacity.of(n), job.gpus, job.memory_gb),
        )
        groups: dict[tuple[str, str, BillingTerms, str, str, str], list[Node]] = {}
        for node in fitting:  # one platform too: a gang runs as one job (on a Slurm cluster, one job of one partition)
            where = (node.backend.type, node.backend.cluster, node.backend.partition)
            groups.setdefault((node.accelerator.key, normalize_location(node.location), node.terms, *where), []).append(
                node
            )
        return list(groups.values())

    def _reserve(self, ctx: CallContext, job: Job, node: Node, more: tuple[Node, ...] = ()) -> Placed:
        """Reserve on ``node`` as read (and, for a gang, on each of ``more`` too, in the same transaction): the
        reservation is conditioned on the node's etag, so the billing terms the job locks are the ones in force at
        the moment of the reservation (billing/metering.py). Raises the repositories' typed errors
        (:class:`NodeChanged` when the node was written since it was read)."""
        placed = Placed(node=node.key, node_id=node.arm_id, owner=node.owner, terms=node.terms)
        parts = (node, *more)
        names = ", ".join(n.name for n in parts)
        reason = f"Placed on {names}; submitting to the DGX Platform."
        scheduled = arm_rules.changed(
            ctx,
            job,
            {
                "statusReason": reason,
                "assignedNode": placed.node_id,
                "billingTerms": terms_properties(placed.terms, ctx.now_iso(), node.kind),
                **({"assignedNodes": [n.arm_id for n in parts]} if more else {}),
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
            Reservation.on(node, job.gpus, job.memory_gb, for_job=job.key),
            quota_gpus=job.gpus * len(parts) if more else None,
        )
        others = tuple(replace(Reservation.on(n, job.gpus, job.memory_gb, for_job=job.key), quota=None) for n in more)
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
            if self.place(ctx, job, view) is not None:
                placed += 1
                if not self._state_machines.complete_task(job.task_token, StepOutcome(placed=True).as_output()):
                    logger.warning(
                        "A placed job's execution no longer waits; the reconciler ends it", extra={"job": job.arm_id}
                    )
                continue
            waiting.append((job, view))
        told = sum(self._tell(ctx, job, view, refresh) for job, view in waiting)  # after every placement
        # preemption for the first waiting jobs in order that may preempt (a gang, a job of priority 0 or one its
        # budget refuses never does: it must not shield the work behind it), at most PREEMPTION_TRIES of them
        tries = [(job, view) for job, view in waiting if self._may_preempt(job, view)][:PREEMPTION_TRIES]
        preempted = any(self.preempt_for(ctx, job, view) for job, view in tries)
        if waiting and not preempted:
            self._drain_for_if_starving(waiting[0][0])
        return Dispatched(placed, told)

    # ----------------------------------------------------------------------------------------------- preemption
    def preempt_for(self, ctx: CallContext, job: Job, view: BudgetView) -> bool:
        """Preempt lower-priority preemptible jobs of the subscription for ``job`` (waiting, at the head of its queue,
        as read; ``view``: the budgets covering it) when stopping them gives it room on a node it may use
        (domain/preemption.py: the rules and the bound on reads): the node is drained for it, so the capacity the
        victims free is its, and each victim is told to stop (:meth:`_preempt`). False when nothing was preempted."""
        if not self._may_preempt(job, view):
            return False
        subscription = job.key.subscription_id
        # as the index holds them (one Query): a victim's preemption is conditioned on its etag, so a stale one is
        # passed over
        victims = [
            found
            for found in self._jobs.preemptible(subscription, job.kind, job.priority, preemption.MAX_CANDIDATES)
            if found.preemption_candidate
            and found.priority < job.priority
            and found.status in (JobStatus.SCHEDULED, JobStatus.RUNNING)
        ]
        within = self._within(job, view.currencies)
        rooms: list[preemption.Room] = []
        limits: dict[str, dict[str, QuotaUsage]] = {}
        # the nodes of the candidates, in their order, until MAX_NODES the job may use (at most twice that read)
        for node_key in list(dict.fromkeys(v.node_key for v in victims))[: 2 * preemption.MAX_NODES]:
            if len(rooms) == preemption.MAX_NODES:
                break
            node = self._nodes.get(node_key)
            if node is None or node.availability != Availability.AVAILABLE or not self._matches(job, node, within):
                continue
            shape = node.shape
            if shape.location not in limits:
                limits[shape.location] = self._limits(subscription, shape.location)
            headrooms = [
                limits[shape.location][name].headroom or 0
                for name in quota_names(shape.gpu_model)
                if name in limits[shape.location]
            ]
            shortfall = max([job.gpus - h for h in headrooms if h < job.gpus], default=0)
            rooms.append(preemption.Room(node.key, node.free_gpus, node.free_memory_gb, shortfall))
        candidates = [preemption.Victim(v.key, v.node_key, v.gpus, v.memory_gb, v.priority) for v in victims]
        chosen = preemption.choose(job.gpus, job.memory_gb, rooms, candidates)
        if chosen is None:
            return False
        room, taken = chosen
        # the node is held for the job (not when it is held for another already: a starving job, a preemption
        # under way), and the job records the hold (not when another dispatch gave it one meanwhile)
        if not self._nodes.set_draining(room.node, job.key, unless_held=True):
            return False
        held = replace(job, drain_node=room.node)
        if not self._jobs.note(job, held, expect=Expect(etag=job.etag, status=(JobStatus.PENDING,))):
            self._nodes.set_draining(room.node, None)
            return False
        by_key = {v.key: v for v in victims}
        stopped = sum(self._preempt(ctx, by_key[v.key], job) for v in taken)
        if not stopped:  # every victim changed meanwhile (a stale index entry, a cancel): let the node go again
            self._nodes.set_draining(room.node, None)
            self._jobs.note(held, replace(held, drain_node=None), expect=Expect(etag=job.etag))
            return False
        logger.info(
            "Preempted jobs for a higher-priority one",
            extra={"job": job.arm_id, "node": room.node.name, "victims": stopped},
        )
        return True

    @staticmethod
    def _may_preempt(job: Job, view: BudgetView) -> bool:
        """Whether ``job`` (waiting, as read) may preempt now: of one node, priority above 0 (nothing is lower), its
        budgets allowing it, no node held for it already."""
        return (
            job.drain_node is None
            and view.refusal is None
            and job.status == JobStatus.PENDING
            and job.priority > 0
            and job.gang_size == 1
        )

    def _preempt(self, ctx: CallContext, victim: Job, job: Job) -> bool:
        """Tell ``victim`` (as read) it is preempted by ``job``: an audited change saying by which job and why, its
        grace period and when (``preemptedBy``, ``preemptedAt``, ``statusReason``), conditioned on the victim as
        read and on no cancel being under way; then its execution is resumed at once with its end, ``Preempted``
        (stopped on the DGX Platform with the grace period, billed until it stopped there: job_steps.py). False when
        it changed meanwhile (it ended, or a cancel came)."""
        grace = self._settings.job_preemption_grace_seconds
        # the job that preempted it is named in preemptedBy, which only admins see (services/common/job_access.py):
        # a consumer may not learn of another user's job; its priority is what the rule needs said
        reason = (
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

    def _tell(self, ctx: CallContext, job: Job, view: BudgetView, refresh: bool) -> int:
        """Write why ``job`` (waiting, as read) waits now, when that changed in kind or in what it names (a budget,
        a quota) — or, with ``refresh``, at all: an audited change of its ``statusReason``, conditioned on the job as
        read. Otherwise figures in a reason (GPUs in use, the lowest price above the ceiling) are as of when it was
        told: they alone do not rewrite the job on every release of GPUs (each rewrite is an audit item and a new
        etag). 1 when told, 0 otherwise."""
        reason = self.waiting_reason(job, view)
        told = job.properties.get("statusReason") or ""
        if told == reason or (not refresh and reason_gist(told) == reason_gist(reason)):
            return 0
        told_now = arm_rules.changed(ctx, job, {"statusReason": reason})
        try:
            self._jobs.update(
                job,
                told_now,
                self._kernel.audit(ctx, JOBS, job.key, JOBS.write, reason, job.document, told_now.document),
                expect=Expect(etag=job.etag, status=(JobStatus.PENDING,), cancel_requested=False),
            )
        except WorkloadChanged:
            return 0  # placed, canceled or told meanwhile: its own step says why now
        return 1

    def _drain_for_if_starving(self, job: Job) -> None:
        if job.drain_node is not None or job.status.final or job.gang_size > 1:
            return  # (a gang cannot use one drained node: holding one for it would only keep it idle)
        submitted = datetime.fromisoformat(job.submitted_at.replace("Z", "+00:00")).timestamp()
        if self._clock() - submitted < self._settings.job_starvation_seconds:
            return
        nodes = self._nodes.candidates(
            job.key.subscription_id, replace(job.demand, gpus=0, memory_gb=0), for_job=job.key
        )
        able = [
            n
            for n in nodes
            if n.gpu_total >= job.gpus and per_gpu_memory_fits(n.gpu_total, n.memory_gb_total, job.gpus, job.memory_gb)
        ]
        if not able:
            return
        nearest = max(able, key=lambda n: n.free_gpus)
        self._nodes.set_draining(nearest.key, job.key)
        # the drain is recorded on the job (cleared when it is placed or ends)
        self._jobs.note(
            job,
            replace(job, drain_node=nearest.key, lease=job.lease or Lease.owned(self._clock())),
            expect=Expect(status=(JobStatus.PENDING,)),
        )
        logger.info("Draining a node for a starving job", extra={"job": job.arm_id, "node": nearest.arm_id})
