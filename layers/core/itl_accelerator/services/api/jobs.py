"""sparkJobs service (API side): submit, read, list, cancel and delete jobs.

Rules (issue: sparkJobs; ARM_CONTRACT.md 1-18): a submission is a long-running operation that ends with the job
(202 with ``status_url`` for the seed's POST, 201 for PUT); the job lifecycle state machine admits, places, runs
and ends it (services/workflows/job_steps.py). ``submittedBy`` is the token's subject. Consumers see, cancel and
delete only their own jobs (another user's job is 404, existence not leaked); suppliers see the jobs placed on their
nodes, read only; admins everything. Cancel is honoured in every non-final state and answers 202 with a
``Location``; cancel of a finished job is 409 naming its status, which stays as it was. Only a finished job can be
deleted (otherwise 409); its name can then be submitted again and runs afresh.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from itl_accelerator.arm import normalize_location
from itl_accelerator.auth import rbac
from itl_accelerator.billing.metering import MAX_MINIMUM_BILLABLE_SECONDS, BillingTerms
from itl_accelerator.domain.accelerators import GPU, accelerator_key, job_vendor
from itl_accelerator.domain.pricing import ANY_INCREMENT, CeilingBasis, PriceCeiling, undominated
from itl_accelerator.domain.records import Job, Lease, Operation, ResourceKey, reservation_key
from itl_accelerator.domain.retries import RetryStrategy
from itl_accelerator.domain.runs import JobRun
from itl_accelerator.domain.scheduling import reservation_misfit, utc
from itl_accelerator.domain.states import (
    ACTIVE_JOB_STATUSES,
    FINAL_JOB_STATUSES,
    JobStatus,
    OperationKind,
    ProvisioningState,
)
from itl_accelerator.errors import (
    AnotherOperationInProgress,
    BadRequest,
    Conflict,
    InvalidParameter,
    PropertyChangeNotAllowed,
)
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.models.jobs import (
    SECRET_MASK,
    SparkJobPropertiesWrite,
    SparkJobWrite,
    masked_workload,
    spec_fingerprint,
)
from itl_accelerator.repositories.errors import SubscriptionNotWritable, WorkloadChanged
from itl_accelerator.repositories.protocols import Effects, Expect, Page, Scope
from itl_accelerator.resources import JOBS
from itl_accelerator.services.common import arm_rules
from itl_accelerator.services.common.budgets import view as budget_view
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.services.common.job_access import may_change, render_job, visible_to
from itl_accelerator.services.common.kernel import ResourceKernel
from itl_accelerator.services.common.lro import CANCEL_POLL_SECONDS, Accepted, new_operation, poll_after
from itl_accelerator.services.common.reattempt import reattempt
from itl_accelerator.services.workflows.io import JobEnd, JobStepInput, StepOutcome
from itl_accelerator.settings import Settings
from itl_accelerator.state_machines import StateMachines

#: Operations of jobs are addressed under this location when the job names none (ARM needs one in the path).
GLOBAL_LOCATION = "global"
#: How many times a cancel reads and decides again when the job changed meanwhile (a workflow step, the tracker).
CANCEL_ATTEMPTS = 3


def check_status_sent(sent: str | None, existing: Job | None) -> None:
    """``properties.status`` is read-only (ARM_CONTRACT.md, "Create / update" 3): a body may say ``Pending`` (the
    seed's form of a new job) or the status the job has (a job sent back as it was read); any other is 400."""
    if sent is None or sent == JobStatus.PENDING or (existing is not None and sent == existing.status):
        return
    if existing is None:
        raise BadRequest(
            f"'status' is set by the provider; a new job may only say 'Pending', not '{sent}'.",
            target="properties.status",
        )
    raise BadRequest(
        f"'status' is read-only: the job '{existing.key.name}' is {existing.status}, not {sent} (send what you read "
        "again, or leave status out).",
        target="properties.status",
    )


def submitted_run(spec: dict[str, Any], gang_size: int | None) -> JobRun:
    """The run a job starts with, from its spec (wire names: models/jobs.py ``SparkJobWrite.spec``): its retry
    strategy (its first attempt then shown as 1), whether it may be preempted and how, and its gang's size
    (``accelerator.nodes``; None: one node)."""
    strategy = spec.get("retryStrategy")
    preemptible = bool(spec.get("preemptible"))
    return JobRun(
        retry_strategy=RetryStrategy.of_properties(strategy) if strategy else None,
        attempt=1 if strategy else None,
        preemptible=preemptible,
        preempt_mode=spec["preemptMode"] if preemptible else None,
        gang_size=gang_size or 1,
    )


def _with_stored_secrets(spec: dict[str, Any], existing: Job) -> dict[str, Any]:
    """``spec`` with every ``secretEnv`` value sent as the mask (a job echoed back from a GET) replaced by the value
    stored for that name, so an echoed job is recognised as the same job."""
    sent = spec["workload"].get("secretEnv") or {}
    if SECRET_MASK not in sent.values():
        return spec
    stored = existing.secret_env
    kept = {name: stored.get(name, value) if value == SECRET_MASK else value for name, value in sent.items()}
    return {**spec, "workload": {**spec["workload"], "secretEnv": kept}}


class SparkJobService:
    """Job operations over the shared kernel; ``state_machines`` starts executions and resumes waiting ones."""

    def __init__(
        self,
        kernel: ResourceKernel,
        state_machines: StateMachines,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ):
        self._kernel = kernel
        self._reservations = kernel.repositories.reservations
        self._clock = clock
        self._jobs = kernel.repositories.jobs
        self._jobs_budgets = kernel.repositories.budgets
        self._state_machines = state_machines
        self._settings = settings

    def key(self, subscription_id: str, resource_group: str, name: str) -> ResourceKey:
        """Validated key (400 on bad names)."""
        return self._kernel.key(JOBS, subscription_id, resource_group, name)

    # ----------------------------------------------------------------------------------------------- who sees what
    def _visible(self, ctx: CallContext, key: ResourceKey, *, to_change: bool = False) -> Job:
        """The job if the caller may see it (services/common/job_access.py) — and, ``to_change``, change it; 404
        (as if missing) when it is another user's: a supplier reads the jobs on its nodes, never changes them. The
        caller's permission is the caller's to check first."""
        job = self._jobs.get(key)
        if job is None or not visible_to(ctx.principal, job):
            raise JOBS.not_found(key.names, key.resource_group)
        if to_change and not may_change(ctx.principal, job):
            raise JOBS.not_found(key.names, key.resource_group)
        return job

    # ----------------------------------------------------------------------------------------------- reads
    def get(self, ctx: CallContext, subscription_id: str, resource_group: str, name: str) -> dict[str, Any]:
        """The job; 404 when missing, outside the caller's scopes, or not the caller's to see."""
        key = self.key(subscription_id, resource_group, name)
        self._kernel.require(ctx, JOBS, key, JOBS.read)
        return render_job(self._visible(ctx, key), ctx.principal, ctx.clock())

    def list(
        self,
        ctx: CallContext,
        subscription_id: str,
        resource_group: str | None,
        *,
        submitted_by: str | None,
        top: int,
        skip_token: str | None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of jobs of a resource group (or of the subscription), only those the caller may see: an admin's
        (all, or ``submitted_by``'s from the submitter index), a consumer's (its own, from the same index: another
        user's ``submitted_by`` lists nothing), a supplier's (those on its nodes). Full pages: one ``Query`` each
        (one per visible resource group visited)."""
        principal = ctx.principal
        by: str | None = None
        on_nodes_of: str | None = None
        if rbac.ROLE_ADMIN in principal.roles:
            by = submitted_by
        elif rbac.ROLE_CONSUMER in principal.roles:
            if submitted_by is not None and submitted_by != principal.subject:
                JOBS.validate_collection(subscription_id, resource_group)
                return [], None
            by = principal.subject
        else:
            on_nodes_of = principal.subject

        def fetch(scope: Scope, token: str | None) -> Page[Job]:
            return self._jobs.page(scope, top, token, submitted_by=by, node_owner=on_nodes_of)

        page = self._kernel.list_page(ctx, JOBS, subscription_id, resource_group, fetch, skip_token=skip_token)
        jobs = page.items
        if on_nodes_of is not None and submitted_by is not None:
            jobs = [j for j in jobs if j.submitted_by == submitted_by]
        return [render_job(j, principal, ctx.clock()) for j in jobs], page.token

    # ----------------------------------------------------------------------------------------------- submit
    def submit(
        self,
        ctx: CallContext,
        subscription_id: str,
        resource_group: str,
        name: str,
        body: SparkJobWrite,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
        create_only: bool = False,
    ) -> tuple[Accepted | None, dict[str, Any]]:
        """Submit a job. Returns ``(accepted, job)``; ``accepted`` is None when nothing new was started (the same
        job submitted again: PUT 200). Errors: 400 (names, body), 403, 409 (``Conflict``: the name is taken — by a
        POST, or by another user's job; ``AnotherOperationInProgress``: a different job of that name is active;
        ``PropertyChangeNotAllowed``: it has finished — delete it to submit again), 412; ``SettingMissing`` (before
        any write) when the job workflow's ARN is not set."""
        key = self.key(subscription_id, resource_group, name)
        self._kernel.require(ctx, JOBS, key, JOBS.write)
        arm_rules.check_body_name(body.name, name)
        self._settings.require("job_state_machine_arn")  # before anything is written
        existing = self._jobs.get(key)
        if existing is None or may_change(ctx.principal, existing):
            check_status_sent(body.properties.status, existing)
        if existing is not None and not may_change(ctx.principal, existing):
            # job names are unique in a resource group (ARM): the caller learns the name is taken, nothing more
            raise Conflict(
                f"The job name '{name}' is taken in this resource group; job names are unique in a resource group."
            )
        spec = body.spec()
        if existing is not None:
            spec = _with_stored_secrets(spec, existing)
        fingerprint = spec_fingerprint(spec)
        arm_rules.check_preconditions(
            existing.etag if existing else None, if_match=if_match, if_none_match=if_none_match
        )
        if existing is not None:
            if create_only:
                raise Conflict(f"A sparkJob named '{name}' already exists in this resource group.")
            if existing.spec_hash == fingerprint:
                return None, render_job(existing, ctx.principal, ctx.clock())
            if existing.status in ACTIVE_JOB_STATUSES:
                raise AnotherOperationInProgress(
                    f"The job '{name}' is {existing.status}; a different job of that name cannot be "
                    "submitted until it ends and is deleted."
                )
            raise PropertyChangeNotAllowed(
                f"The job '{name}' has finished ({existing.status}): delete it, then submit it again."
            )
        return self._accept(ctx, key, body, spec, fingerprint), {}

    def _accept(
        self, ctx: CallContext, key: ResourceKey, body: SparkJobWrite, spec: dict[str, Any], fingerprint: str
    ) -> Accepted:
        """Submit the job: its budgets must allow it (the refusing budget's 409 otherwise), then the Pending job,
        its operation and its audit event in one transaction, then its workflow started (or left to the
        reconciler). 409 ``Conflict`` when a job of this name was submitted at the same moment."""
        moment = datetime.fromtimestamp(self._clock(), UTC)
        tags = dict(body.tags or {})
        said = budget_view(self._jobs_budgets.in_subscription(key.subscription_id), moment, key.resource_group, tags)
        if said.refusal is not None:
            raise said.refusal
        job, operation, audit = self._submitted(ctx, key, body, spec, fingerprint, said.currencies)
        self._check_reservation(job, ctx)
        try:
            self._jobs.submit(job, operation, audit)
        except WorkloadChanged as exc:
            raise Conflict("Another request submitted a job of this name at the same time; retry.") from exc
        except SubscriptionNotWritable as exc:
            raise self._kernel.write_error(exc) from exc
        operation_id = operation.operation_id
        self._state_machines.start_or_defer(
            self._settings.require("job_state_machine_arn"),
            operation_id,
            JobStepInput.starting(
                self._settings, key, operation_id, ctx.correlation_id, job.max_duration_seconds // 60
            ).execution_input(),
        )
        return Accepted(
            render_job(job, ctx.principal, ctx.clock()),
            operation_id,
            job.document.get("location") or GLOBAL_LOCATION,
            poll_after(OperationKind.JOB, 0, self._settings),
            True,
        )

    def _check_reservation(self, job: Job, ctx: CallContext) -> None:
        """A job naming a capacity reservation (issue 44, "Jobs in a reservation"): 400 ``InvalidParameter`` (target
        ``properties.capacityReservationId``) when the id is not a ``capacityReservations`` resource's of the job's
        subscription, or — the reservation read (one ``GetItem``) — it does not exist or is not the caller's (an
        admin may name any; a consumer only one it booked: as services/api/reservations.py ``may_change``), its window
        is over, or the job asks for more than it books (domain/scheduling.py ``reservation_misfit``: kind, model, devices and GiB per
        node, nodes)."""
        named = job.capacity_reservation_id
        if named is None:
            return
        target = "properties.capacityReservationId"
        key = reservation_key(named)
        if key is None or key.subscription_id.lower() != job.key.subscription_id.lower():
            raise InvalidParameter(
                f"{target} must be the ARM id of a capacity reservation of the job's subscription "
                f"(/subscriptions/{job.key.subscription_id}/resourceGroups/{{resourceGroup}}/providers/"
                "ITL.Accelerator/capacityReservations/{name}).",
                target=target,
            )
        found = self._reservations.get(key)
        principal = ctx.principal
        if found is None or not (rbac.ROLE_ADMIN in principal.roles or found.booked_by == principal.subject):
            # another consumer's: run there, the job would be billed nothing on what its booker pays for
            raise InvalidParameter(f"The capacity reservation '{key.name}' does not exist.", target=target)
        if self._clock() >= found.end:
            raise InvalidParameter(
                f"The window of the capacity reservation '{key.name}' ended at {utc(found.end)}.", target=target
            )
        if (misfit := reservation_misfit(job, found)) is not None:
            raise InvalidParameter(
                f"The job asks for more than the capacity reservation '{key.name}' books: {misfit}.", target=target
            )

    def _submitted(
        self,
        ctx: CallContext,
        key: ResourceKey,
        body: SparkJobWrite,
        spec: dict[str, Any],
        fingerprint: str,
        budget_currencies: frozenset[str] | None,
    ) -> tuple[Job, Operation, AuditEvent]:
        """The records a submission writes: the Pending job (its price ceiling fixed now, in the currencies its
        budgets allow; its secret values kept apart from the document), its JOB operation and its audit event."""
        props = body.properties
        wanted = props.wanted
        operation_id = str(uuid.uuid4())
        now = ctx.now_iso()
        location = body.location
        ceiling = self._ceiling(
            key,
            props,
            normalize_location(location) if location else "",
            now,
            budget_currencies,
            ctx.principal.resource_groups_in(key.subscription_id),
        )
        job = Job(
            key=key,
            # what only its document holds; its typed values (what it asks for, who submitted it, its status and
            # operation) become properties below, from the record (Job.arm_properties)
            document=JOBS.envelope(
                key.subscription_id,
                key.resource_group,
                key.names,
                location=location or None,
                tags=body.tags or {},
                system_data=arm_rules.stamp_system_data(ctx, None),
                properties={
                    "jobType": spec["jobType"],
                    "workload": masked_workload(spec["workload"], reveal_env=True),  # secret values live apart
                    "accelerator": wanted.model_dump(mode="json", by_alias=True, exclude_none=True),
                    **({"gpuModel": props.gpu_model} if props.gpu_model and wanted.kind == GPU else {}),
                    **({"maxPrice": spec["maxPrice"]} if spec.get("maxPrice") else {}),
                    **(
                        {"capacityReservationId": props.capacity_reservation_id}
                        if props.capacity_reservation_id
                        else {}
                    ),
                    "priceCeiling": ceiling.as_properties(wanted.kind),
                    "statusReason": "Submitted; waiting for admission.",
                    "gpuSeconds": 0,
                },
            ),
            etag="",
            state=ProvisioningState.ACCEPTED,
            operation_id=operation_id,
            spec_hash=fingerprint,
            devices=wanted.count,
            memory_gb=wanted.memory_gb or 0,
            location=normalize_location(location) if location else "",
            lease=Lease.owned(self._clock() + self._settings.workflow_start_grace_seconds),
            status=JobStatus.PENDING,
            kind=wanted.kind,
            priority=props.priority,
            submitted_by=ctx.principal.subject,
            submitted_at=now,
            max_duration_seconds=props.max_duration_minutes * 60,
            gpu_model=accelerator_key(wanted.kind, wanted.model),
            secret_env=dict(spec["workload"].get("secretEnv") or {}),
            run=submitted_run(spec, wanted.nodes),
        )
        job = arm_rules.changed(ctx, job)  # its typed values written into its document, and its etag
        document = job.document
        operation = new_operation(
            ctx,
            key,
            kind=OperationKind.JOB,
            location=location or GLOBAL_LOCATION,
            operation_id=operation_id,
            resource_id=document["id"],
            owner=ctx.principal.subject,
        )
        audit = self._kernel.audit(
            ctx,
            JOBS,
            key,
            JOBS.write,
            f"Submitted {spec['jobType']} job ({wanted.count} {wanted.kind}s, {wanted.memory_gb or 0} GiB"
            + (f", on each of {wanted.nodes} nodes)" if wanted.nodes else ")"),
            None,
            document,
        )
        return job, operation, audit

    def _ceiling(
        self,
        key: ResourceKey,
        props: SparkJobPropertiesWrite,
        location: str,
        now: str,
        allowed: frozenset[str] | None,
        groups: Sequence[str] | None,
    ) -> PriceCeiling:
        """The job's price ceiling (domain/pricing.py): its ``maxPrice`` (rounding left out: any), or the terms of
        every node the submitter can see (in ``groups``; None: the whole subscription) that could take the job now —
        ``Available``, in a currency its budgets count (``allowed``; None: any) — or, when no such node is
        ``Available``, of every such node. One read of the fleet's shapes."""
        wanted = props.wanted
        stated = props.max_price
        if stated is not None:
            bound = BillingTerms(
                stated.price,
                stated.currency,
                stated.billing_increment_seconds or ANY_INCREMENT,
                stated.minimum_billable_seconds
                if stated.minimum_billable_seconds is not None
                else MAX_MINIMUM_BILLABLE_SECONDS,
            )
            return PriceCeiling(CeilingBasis.MAX_PRICE, (bound,), now)
        able = [
            shape
            for shape in self._kernel.repositories.nodes.fleet_shapes(key.subscription_id)
            if shape.terms is not None
            and (groups is None or shape.resource_group in {g.lower() for g in groups})
            and (allowed is None or shape.terms.currency in allowed)
            and shape.matches(
                accelerator_key(wanted.kind, wanted.model),
                location,
                wanted.kind,
                job_vendor(wanted.kind, wanted.model, wanted.vendor),
            )
            and shape.could_hold(wanted.count, wanted.memory_gb or 0)
        ]
        seen = [s.terms for s in able if s.available] or [s.terms for s in able]
        return PriceCeiling(CeilingBasis.PRICES_AT_SUBMISSION, undominated(t for t in seen if t is not None), now)

    # ----------------------------------------------------------------------------------------------- cancel
    def cancel(self, ctx: CallContext, subscription_id: str, resource_group: str, name: str) -> Accepted:
        """Ask for the job to be canceled (202 + Location). The same cancel again → the same operation. 409 when
        it has already ended (its status named, and left as it was). A job that waits (for capacity, or while it
        runs) has its execution resumed at once."""
        key = self.key(subscription_id, resource_group, name)
        self._kernel.require(ctx, JOBS, key, rbac.JOBS_CANCEL)  # once, not again on each read
        # a workflow step or the tracker changed the job since it was read: decide again on the job as it is now
        return reattempt(
            lambda: self._cancel_once(ctx, key),
            on=WorkloadChanged,
            attempts=CANCEL_ATTEMPTS,
            exhausted=lambda: AnotherOperationInProgress(
                "The job kept changing while being canceled; retry the request."
            ),
        )

    def _cancel_once(self, ctx: CallContext, key: ResourceKey) -> Accepted:
        """One read-decide-write of :meth:`cancel`. Raises :class:`WorkloadChanged` when the job changed since it was
        read (nothing written)."""
        name = key.name
        job = self._visible(ctx, key, to_change=True)
        location = job.document.get("location") or GLOBAL_LOCATION
        if job.status in FINAL_JOB_STATUSES:
            raise Conflict(f"The job '{name}' has already ended: {job.status}. Nothing was changed.")
        if job.cancel_requested and job.cancel_operation_id:
            return Accepted(
                render_job(job, ctx.principal, ctx.clock()), job.cancel_operation_id, location, CANCEL_POLL_SECONDS
            )
        operation_id = str(uuid.uuid4())
        operation = new_operation(
            ctx,
            key,
            kind=OperationKind.CANCEL,
            location=location,
            operation_id=operation_id,
            resource_id=job.document["id"],
            owner=job.submitted_by or ctx.principal.subject,
        )
        now = ctx.now_iso()
        stopping = "stopping it on the DGX Platform." if job.status == JobStatus.RUNNING else "it will not run."
        if job.cancel_requested and job.preempted_by:
            # being preempted (stopping within its grace period): the cancel wins (job_steps.py ``cancel_wins``)
            stopping = "it is stopping within its preemption's grace period and ends Canceled, not Preempted."
        canceling = arm_rules.changed(
            ctx,
            job,
            {
                "cancelRequestedAt": now,
                "statusReason": f"Cancel requested by {ctx.principal.subject} at {now}; {stopping}",
            },
            cancel_requested=True,
            canceled_by=ctx.principal.subject,
            cancel_operation_id=operation_id,
        )
        summary = f"Cancel requested by {ctx.principal.subject}"
        audit = self._kernel.audit(ctx, JOBS, key, rbac.JOBS_CANCEL, summary, job.document, canceling.document)
        self._jobs.update(
            job,
            canceling,
            audit,
            expect=Expect(etag=job.etag, status=ACTIVE_JOB_STATUSES),
            effects=Effects(new_operation=operation),
        )
        if job.task_token:  # waiting for capacity or running: resume its execution at once
            outcome = StepOutcome(
                end=JobEnd(status=JobStatus.CANCELED, reason=f"Canceled by {ctx.principal.subject}.", stop=True)
            )
            self._state_machines.complete_task(job.task_token, outcome.as_output())
        return Accepted(render_job(canceling, ctx.principal, ctx.clock()), operation_id, location, CANCEL_POLL_SECONDS)

    # ----------------------------------------------------------------------------------------------- delete
    def delete(self, ctx: CallContext, subscription_id: str, resource_group: str, name: str) -> bool:
        """Delete a finished job (audited). False when there was none (ARM RPC: 204); 409 while it is active."""
        key = self.key(subscription_id, resource_group, name)
        self._kernel.require(ctx, JOBS, key, JOBS.delete)
        job = self._jobs.get(key)
        if job is None or not may_change(ctx.principal, job):
            return False  # another user's job answers as a missing one: nothing to delete (ARM RPC: 204)
        if job.status not in FINAL_JOB_STATUSES:
            raise Conflict(f"The job '{name}' is {job.status}: cancel it and wait for it to end before deleting it.")
        try:
            self._jobs.remove(
                job,
                self._kernel.audit(ctx, JOBS, key, JOBS.delete, f"Deleted job ({job.status})", job.document, None),
                expect=Expect(etag=job.etag, status=FINAL_JOB_STATUSES, capacity_reserved=False),
            )
        except WorkloadChanged as exc:
            raise Conflict("The job changed while being deleted; retry the request.") from exc
        return True
