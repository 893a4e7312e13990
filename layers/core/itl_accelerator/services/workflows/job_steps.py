"""The steps of the job lifecycle state machine (statemachines/job_lifecycle.asl.json); their inputs and outputs are
services/workflows/io.py.

admit and place (or wait for capacity) → submit to the DGX Platform (idempotency key = the job's operation id) →
track → (stop on the DGX Platform) → finish. Waiting costs no execution history: a job that does not fit waits on a
task token that placement completes when capacity frees (services/common/placement.py); a running job waits on a
task token that the tracker (a schedule: services/schedules/job_tracker.py) completes when the DGX Platform reports
it ended or it exceeded ``maxDurationMinutes`` — so an execution's history has the same few dozen events whether
the job runs a minute or 7 days. A cancel completes whichever token the job waits on at once, and every step reads
the job before it acts, so a cancel is seen at every step.

Every step reports ``end`` null to go on, or how the job must end (:class:`~.io.JobEnd`); :meth:`JobSteps.finish`
makes the one final transition: status, end time, GPU-seconds and cost at the terms the job locked, capacity
released (conditioned on being held: exactly once), both operations ended, lease gone — then serves the jobs waiting
in the subscription. All changes are audited as ``SYSTEM`` with the request's correlation id.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from itl_accelerator.billing.job_charges import job_charges
from itl_accelerator.dgx.errors import DgxError
from itl_accelerator.dgx.models import DgxJob
from itl_accelerator.domain import retries
from itl_accelerator.domain.accelerators import GPU
from itl_accelerator.domain.records import Job, Lease, Node, Operation, Release, gang_releases
from itl_accelerator.domain.retries import attempt_id
from itl_accelerator.domain.runs import Attempt
from itl_accelerator.domain.states import JobStatus, OperationKind, OperationStatus, ProvisioningState
from itl_accelerator.domain.usage import Meter, MeterEnd
from itl_accelerator.observability import logger
from itl_accelerator.platforms.router import platform_job_number, platform_name
from itl_accelerator.repositories.errors import StoreBusy, WorkloadChanged
from itl_accelerator.repositories.protocols import Effects, Expect
from itl_accelerator.resources import JOBS, NODES
from itl_accelerator.services.common import arm_rules
from itl_accelerator.services.common.context import CallContext, system_context
from itl_accelerator.services.common.kernel import ResourceKernel
from itl_accelerator.services.common.lro import placeholder_operation
from itl_accelerator.services.common.metering import meter_for, part_meter_ids
from itl_accelerator.services.common.placement import Placement
from itl_accelerator.services.common.reattempt import reattempt
from itl_accelerator.services.workflows.io import (
    CaughtError,
    FinishResult,
    JobEnd,
    JobStepInput,
    StepOutcome,
    StopResult,
)
from itl_accelerator.settings import Settings
from itl_accelerator.state_machines import StateMachines

if TYPE_CHECKING:  # a platform's client (httpx, tenacity) loads when it is made, on its first call
    from itl_accelerator.platforms.router import Platforms


def iso(epoch: float) -> str:
    """UTC ISO 8601 with microseconds and ``Z``."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _with_exit_code(outcome: JobEnd) -> str:
    """The reason of an end, with its exit code when it has one (once: not when the reason says it already)."""
    reason = outcome.reason.rstrip(".") or str(outcome.status)
    return with_exit_code(reason, outcome.exitCode)


def with_exit_code(reason: str, exit_code: int | None) -> str:
    """``reason`` with ``(exit code N)`` before its full stop (``The job ended Succeeded on the DGX Platform (exit code
    0).``) — unless there is none, or the reason already names that code (the platform's "The container exited with
    code 1.")."""
    if exit_code is None or f"code {exit_code}" in reason:
        return reason
    stop = "." if reason.endswith(".") else ""
    return f"{reason.removesuffix('.')} (exit code {exit_code}){stop}"


def released_words(job: Job) -> str:
    """What a job's end gives back, in an audit summary: ``released 1 GPU and 80 GiB``."""
    devices = job.devices * (1 + len(job.gang_nodes))
    memory = job.memory_gb * (1 + len(job.gang_nodes))
    return f"released {devices} {job.kind}{'' if devices == 1 else 's'} and {memory} GiB"


def cancel_wins(job: Job, outcome: JobEnd) -> JobEnd:
    """A job its consumer (or an admin) canceled while it was being preempted ends ``Canceled``, not ``Preempted``:
    the user's word is the last one — it is not requeued, and its reason says both. It still stops as the preemption
    began (SIGTERM, then the kill after the grace period), billed until it stopped. Any other end is as it is."""
    if outcome.status != JobStatus.PREEMPTED or not job.canceled_by:
        return outcome
    reason = f"Canceled by {job.canceled_by} during its preemption's grace period (the cancel wins: not preempted)."
    return outcome.model_copy(update={"status": JobStatus.CANCELED, "reason": reason})


#: How many times the final transition reads and decides again when the job changed meanwhile (a cancel, the
#: tracker) before the step fails with ``StoreBusy`` for its own retry.
FINISH_ATTEMPTS = 5


def epoch(value: str) -> float:
    """Inverse of :func:`iso`."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def gone() -> JobEnd:
    """The end of a job whose execution finds it gone (deleted, or its name holds another submission)."""
    return JobEnd(status=JobStatus.CANCELED, reason="The job is gone.")


def canceled_end(job: Job) -> JobEnd | None:
    """The end of a job whose cancel was asked for — or that is preempted for a higher-priority job (its
    ``preemptedBy``: the rules are domain/preemption.py, placement writes it — services/common/placement.py):
    ``Preempted``, saying by which job and why (None when neither)."""
    if job.cancel_requested:
        if job.preempted_by:
            preempted = JobEnd(status=JobStatus.PREEMPTED, reason=str(job.status_reason), stop=True)
            return cancel_wins(job, preempted)
        return JobEnd(status=JobStatus.CANCELED, reason=f"Canceled by {job.canceled_by or 'the submitter'}.", stop=True)
    return None


def platform_workload(job: Job) -> dict[str, Any]:
    """The workload as the DGX Platform runs it: ``env`` with the ``secretEnv`` values (kept apart from the job's
    document, never shown) merged in. Only this is sent; nothing of it is logged."""
    workload = job.document["properties"]["workload"]
    return {
        "image": workload["image"],
        "command": workload.get("command", []),
        "env": {**(workload.get("env") or {}), **job.secret_env},
    }


def platform_end(job: DgxJob) -> JobEnd:
    """The end the DGX Platform recorded for a job that ended there: its status (Succeeded, Failed or Canceled), why,
    its exit code and when it ended (``endedAt`` epoch seconds, None when the platform did not say)."""
    status = JobStatus(job.status) if job.status in ("Succeeded", "Canceled") else JobStatus.FAILED
    return JobEnd(
        status=status,
        reason=job.error_message or f"The job ended {job.status} on {platform_name(job.id)}.",
        exitCode=job.exit_code,
        endedAt=epoch(job.ended_at) if job.ended_at else None,
        onPlatform=True,
        retryable=status == JobStatus.FAILED,
    )


def settle(requested: JobEnd, platform: JobEnd | None) -> JobEnd:
    """The job's end when a step asked for ``requested`` (a cancel, a max duration passed, a lost tracking) and the
    platform recorded ``platform`` on stopping it. The platform's outcome and end time are the truth: a job that
    had already ended on its own (Succeeded or Failed) keeps that end, whatever was asked — a cancel that came too
    late changes nothing of it (its operation ends Failed, ``JobAlreadyFinished``). A job the stop ended
    (Canceled there) ends as asked, billed until the time asked for (a max duration's deadline) or else until the
    platform stopped it."""
    if platform is None or requested.onPlatform:
        return requested
    if requested.status == JobStatus.PREEMPTED and platform.status != JobStatus.SUCCEEDED:
        # a preempted container that exits non-zero on SIGTERM is still preempted (billed until it stopped)
        return requested.model_copy(update={"endedAt": requested.endedAt or platform.endedAt})
    if platform.status != JobStatus.CANCELED:
        reason = platform.reason
        if requested.status == JobStatus.CANCELED:
            reason = f"{reason} It had ended before the cancel reached the DGX Platform."
        return platform.model_copy(update={"reason": reason})
    return requested.model_copy(update={"endedAt": requested.endedAt or platform.endedAt})


def error_end(caught: CaughtError | None) -> JobEnd:
    """The end of a job whose step failed (a Step Functions Catch result)."""
    caught = caught or CaughtError()
    message = caught.message[:300]
    if caught.Error == "DgxPermanentError":
        reason = f"The DGX Platform refused the job: {message}"
    elif caught.Error == "DgxTransientError":
        reason = "The DGX Platform stayed unavailable; retries ran out."
    elif caught.Error == "States.Timeout":
        reason = "The job's workflow timed out."
    else:
        reason = "The job failed because of an internal error."
    return JobEnd(status=JobStatus.FAILED, reason=reason, stop=True)


class JobSteps:
    """Task implementations. ``dgx`` is the DGX Platform client (made on its first call); ``clock`` returns epoch
    seconds."""

    def __init__(
        self,
        kernel: ResourceKernel,
        placement: Placement,
        state_machines: StateMachines,
        platforms: Platforms,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ):
        self._kernel = kernel
        self._jobs = kernel.repositories.jobs
        self._nodes = kernel.repositories.nodes
        self._operations = kernel.repositories.operations
        self._placement = placement
        self._state_machines = state_machines
        self.platforms = platforms
        self._settings = settings
        self._clock = clock

    # ----------------------------------------------------------------------------------------------- helpers
    def _context(self, inp: JobStepInput) -> CallContext:
        """The SYSTEM caller of this execution's changes, dated by the steps' clock."""
        return system_context(inp.operationId, inp.correlationId, self._clock)

    def _current(self, inp: JobStepInput) -> Job | None:
        """The job this execution runs (None when it is gone, or the name now holds another submission)."""
        job = self._jobs.get(inp.key)
        return job if job is not None and job.operation_id == inp.operationId else None

    def _note(
        self,
        inp: JobStepInput,
        job: Job,
        *,
        reason: str,
        expect: Expect,
        status: JobStatus | None = None,
        properties: dict[str, Any] | None = None,
        effects: Effects = Effects(),
        **changes: Any,
    ) -> None:
        """One audited transition of the job (status and reason in its document) with ``changes`` to its record and
        ``effects`` (its meter, its operation moved on), if ``expect`` holds and the job is still this execution's.
        Raises :class:`WorkloadChanged`."""
        ctx = self._context(inp)
        if status:
            changes["status"] = status
        after = arm_rules.changed(ctx, job, {"statusReason": reason, **(properties or {})}, **changes)
        self._jobs.update(
            job,
            after,
            self._kernel.audit(ctx, JOBS, job.key, JOBS.write, reason, job.document, after.document),
            expect=replace(expect, operation_id=inp.operationId),
            effects=effects,
        )

    def _lease(self, seconds: float) -> Lease:
        return Lease.owned(self._clock() + seconds + self._settings.workflow_lease_grace_seconds)

    def _moved(
        self,
        inp: JobStepInput,
        operation_id: str,
        status: OperationStatus,
        now: str,
        error: dict[str, str] | None = None,
        kind: OperationKind = OperationKind.JOB,
    ) -> Operation:
        found = self._operations.get(inp.subscriptionId, operation_id) or placeholder_operation(
            operation_id, kind, inp.resourceGroup
        )
        return found.moved(status, now, error)

    # ----------------------------------------------------------------------------------------------- place
    def place(self, inp: JobStepInput) -> StepOutcome:
        """Admit the job, then place it on the best-fitting node now: ``placed`` False when it must wait.

        Admission first: could any node of the subscription ever hold the job (placement.py ``inadmissible``, one
        Query of the fleet's shapes)? If not, ``end`` is Failed, "Inadmissible: <why>". Both in one step, so a job
        placed at once enters 7 states of the state machine, the control plane's largest cost per job
        (benchmarks/control_plane_cost.py)."""
        job = self._current(inp)
        if job is None:
            return StepOutcome(end=gone(), placed=False)
        if (canceled := canceled_end(job)) is not None:
            return StepOutcome(end=canceled, placed=False)
        if job.status != JobStatus.PENDING:
            return StepOutcome(placed=True)  # placed already (a retried step)
        if (reason := self._placement.inadmissible(job)) is not None:
            return StepOutcome(end=JobEnd(status=JobStatus.FAILED, reason=f"Inadmissible: {reason}"), placed=False)
        placed = self._placement.place(self._context(inp), job)
        return StepOutcome(placed=placed is not None)

    def await_capacity(self, inp: JobStepInput, token: str) -> None:
        """The job waits for capacity: record the task token placement resumes it with, enter the waiting queue
        (priority, then submission order) and say why it waits; then try once more (capacity may have freed in
        between). The state machine waits until the token is completed (placed, or canceled)."""
        job = self._current(inp)
        if job is None:
            self._state_machines.complete_task(token, StepOutcome(end=gone(), placed=False).as_output())
            return
        if (canceled := canceled_end(job)) is not None:
            self._state_machines.complete_task(token, StepOutcome(end=canceled, placed=False).as_output())
            return
        if job.status != JobStatus.PENDING:
            self._state_machines.complete_task(token, StepOutcome(placed=True).as_output())
            return
        reason = self._placement.waiting_reason(job)
        try:
            self._note(
                inp,
                job,
                reason=reason,
                expect=Expect(status=(JobStatus.PENDING,), cancel_requested=False),
                task_token=token,
                queued=True,
                lease=Lease.owned(self._clock() + self._settings.job_placement_retry_seconds),
            )
        except WorkloadChanged:
            if self._current(inp) is None:
                return
            self.await_capacity(inp, token)  # a cancel came, or it was placed: the checks above decide
            return
        self._placement.dispatch(self._context(inp), inp.subscriptionId)

    # ----------------------------------------------------------------------------------------------- submit
    def submit(self, inp: JobStepInput) -> StepOutcome:
        """Submit the job to the DGX Platform on its node (idempotency key = operation id); → Running. Billing
        starts now: the job's meter is written with its Running state, and its operation is Running while it runs
        (ARM), then ends with it."""
        job = self._current(inp)
        if job is None:
            return StepOutcome(end=gone())
        if (canceled := canceled_end(job)) is not None:
            return StepOutcome(end=canceled)
        if job.status == JobStatus.RUNNING and job.dgx_id:
            return StepOutcome()
        node = self._nodes.get(job.node_key)
        parts = [self._nodes.get(k) for k in job.gang_nodes]  # a gang's other nodes
        key = attempt_id(inp.operationId, job.run.attempt_number)
        recover = job.submitting == key
        if not recover and node is not None and node.backend.is_slurm:
            # a Slurm cluster cannot de-duplicate by the key: say it is being sent, so a run again looks first
            marked = replace(job, submitting=key)
            if not self._jobs.note(job, marked, expect=Expect(etag=job.etag)):
                raise StoreBusy("The job changed while its submit was being recorded; run the step again.")
            job = marked
        submitted = self._send(job, node, parts, key, recover=recover)
        # billing starts when the platform started it (Slurm's own start time), else now — in whole seconds, never in
        # the future (billing/metering.py)
        now = float(int(self._clock()))
        started = min(now, float(int(epoch(submitted.started_at)))) if submitted.started_at else now
        return self._running(inp, job, submitted, started, self._meters(job, node, parts, submitted, started))

    def _send(self, job: Job, node: Node | None, parts: list[Node | None], key: str, *, recover: bool) -> DgxJob:
        """Submit ``job``'s attempt (idempotency ``key``) to the platform of its ``node`` (None: gone meanwhile),
        with a gang's other ``parts`` (None: one gone); ``recover``: the key was recorded as sent before (look for
        its job first). Raises the platform's ``DgxError``."""
        part_ids = [
            p.arm_id if p else NODES.id(k.subscription_id, k.resource_group, k.names)
            for p, k in zip(parts, job.gang_nodes, strict=True)
        ]
        return self.platforms.for_node(node).submit_job(
            idempotency_key=key,
            name=job.arm_id,
            node_id=node.arm_id
            if node
            else NODES.id(job.key.subscription_id, job.node_key.resource_group, job.node_key.names),
            devices=job.devices,
            memory_gb=job.memory_gb,
            workload=platform_workload(job),
            max_duration_seconds=job.max_duration_seconds,
            callback_url=self._settings.dgx_callback_url or None,
            # the node's devices; a node gone meanwhile: the job's kind (the platform reads none as NVIDIA GPUs)
            accelerator=node.accelerator.for_platform() if node else ({"kind": job.kind} if job.kind != GPU else None),
            node_ids=[str(job.assigned_node), *part_ids] if job.gang_nodes else None,
            # the hosts the node's platform places by (a Slurm node's name; the DGX Platform places by node id)
            targets=[n.backend.target if n else "" for n in (node, *parts)],
            partition=(node.backend.partition or None) if node else None,
            recover=recover,
        )

    def _meters(
        self, job: Job, node: Node | None, parts: list[Node | None], submitted: DgxJob, started: float
    ) -> tuple[Meter, ...]:
        """The meters of ``job``'s attempt, started at ``started`` (epoch s, whole): its first part's, which reads
        the platform's metrics of the whole job, then one per other part of a gang, on its node, under the job's
        allocation id (services/common/metering.py ``meter_for``)."""
        attempt = job.run.attempt_number
        first = meter_for(
            job,
            node,
            service="jobs",
            resource_type=JOBS.type_name,
            start=int(started),
            dgx_id=submitted.id,
            attempt=attempt,
        )
        more = (
            meter_for(
                job,
                part,
                service="jobs",
                resource_type=JOBS.type_name,
                start=int(started),
                dgx_id="",  # the platform's metrics are the whole job's: read once, by the first part's meter
                attempt=attempt,
                part=number,
                where=key,
            )
            for number, (part, key) in enumerate(zip(parts, job.gang_nodes, strict=True), start=2)
        )
        return first, *more

    def _running(
        self, inp: JobStepInput, job: Job, submitted: DgxJob, started: float, meters: tuple[Meter, ...]
    ) -> StepOutcome:
        """Record ``job`` Running on its platform since ``started`` (epoch s), its ``meters`` started and its
        operation Running, in one transaction. A job canceled meanwhile is stopped on the platform at once (its end:
        canceled); one gone, too."""
        found = self._operations.get(inp.subscriptionId, inp.operationId)
        try:
            self._note(
                inp,
                job,
                reason=f"Running on {platform_name(submitted.id)} (job {platform_job_number(submitted.id)}).",
                expect=Expect(status=(JobStatus.SCHEDULED,), cancel_requested=False),
                status=JobStatus.RUNNING,
                properties={"logsUrl": submitted.logs_url},
                effects=Effects(
                    meter_start=meters[0],
                    more_meter_starts=meters[1:],
                    operation=found.moved(OperationStatus.RUNNING, iso(started)) if found is not None else None,
                ),
                dgx_id=submitted.id,
                started_at=iso(started),
                state=ProvisioningState.RUNNING,
                meter_id=meters[0].allocation_id,
                lease=self._lease(0),
            )
        except WorkloadChanged:
            current = self._current(inp)
            if current is not None and current.cancel_requested:
                self.platforms.cancel_job(submitted.id)
                return StepOutcome(end=canceled_end(current))
            return StepOutcome(end=gone().model_copy(update={"stop": True}))
        return StepOutcome()

    # ----------------------------------------------------------------------------------------------- track
    def track(self, inp: JobStepInput, token: str) -> None:
        """The job runs: record the task token the tracker (or a cancel) resumes it with, and when it is first due
        to be checked, as bookkeeping (nothing a user sees changes: no audit item, no new etag). The state machine
        waits until the token is completed with the job's end."""
        job = self._current(inp)
        if job is None:
            self._state_machines.complete_task(
                token, StepOutcome(end=gone().model_copy(update={"stop": True})).as_output()
            )
            return
        if (canceled := canceled_end(job)) is not None:
            self._state_machines.complete_task(token, StepOutcome(end=canceled).as_output())
            return
        tracked = replace(
            job,
            task_token=token,
            track_checks=0,
            lease=Lease.tracked(self._clock() + self._settings.job_poll_interval_seconds),
        )
        expect = Expect(status=(JobStatus.RUNNING,), cancel_requested=False, operation_id=inp.operationId)
        if not self._jobs.note(job, tracked, expect=expect):  # bookkeeping: no audit item, no new etag
            self.track(inp, token)

    # ----------------------------------------------------------------------------------------------- retry
    def await_retry(self, inp: JobStepInput, token: str) -> None:
        """A failed attempt the job's ``retryStrategy`` runs again waits out its backoff (the state machine's
        ``AwaitRetry``, whose timeout is the backoff): record the task token a cancel resumes the execution with at
        once, as bookkeeping (no audit item, no new etag)."""
        job = self._current(inp)
        if job is None:
            self._state_machines.complete_task(token, StepOutcome(end=gone()).as_output())
            return
        if (canceled := canceled_end(job)) is not None:
            self._state_machines.complete_task(token, StepOutcome(end=canceled).as_output())
            return
        if job.status != JobStatus.PENDING:
            self._state_machines.complete_task(token, StepOutcome().as_output())  # the next attempt's steps decide
            return
        expect = Expect(status=(JobStatus.PENDING,), cancel_requested=False, operation_id=inp.operationId)
        if not self._jobs.note(job, replace(job, task_token=token), expect=expect):
            self.await_retry(inp, token)

    # ----------------------------------------------------------------------------------------------- stop
    def stop(self, inp: JobStepInput, deadline: float | None) -> StopResult:
        """Stop the job on the DGX Platform (idempotent) and say whether it has stopped (``deadline`` set by the
        first call). ``platform`` is the end the platform recorded once the job stopped (:func:`platform_end`; None
        before, or when the platform never ran it): a job that had already ended on its own keeps that end,
        whatever asked for the stop."""
        job = self._jobs.get(inp.key)
        ours = job is not None and job.operation_id == inp.operationId
        # a preempted job is told to stop and given its grace period (SIGTERM, then SIGKILL): the stop waits for it;
        # so is one whose capacity reservation's window ended (issue 44: stopped with the preemption grace period)
        window_over = job is not None and job.window_end is not None and self._clock() >= job.window_end
        grace = self._settings.job_preemption_grace_seconds if job and ours and (job.preempted_by or window_over) else 0
        deadline = deadline or self._clock() + inp.stopTimeoutSeconds + grace
        # what is left of the grace period, counted from the first call (the stop's deadline): a platform that keeps
        # no deadline of its own (a Slurm cluster) is told to kill once none is left
        left = math.ceil(max(0.0, deadline - inp.stopTimeoutSeconds - self._clock())) if grace else 0
        dgx_id = job.dgx_id if job is not None and ours else None
        if dgx_id is None:
            # a submit whose answer was lost (of the attempt the job is at), on its node's platform
            attempt = job.run.attempt_number if job is not None and ours else 1
            node = self._nodes.get(job.node) if job is not None and job.node is not None else None
            found = self.platforms.for_node(node).find_job(attempt_id(inp.operationId, attempt))
            dgx_id = found.id if found else None
        if dgx_id is None:
            return StopResult(stopped=True, timedOut=False, deadline=deadline, platform=None)
        reason = str(job.status_reason) if grace and job is not None else None
        stopped_job = self.platforms.cancel_job(dgx_id, grace_period_seconds=min(grace, left), reason=reason)
        stopped = stopped_job is None or stopped_job.ended
        return StopResult(
            stopped=stopped,
            timedOut=not stopped and self._clock() > deadline,
            deadline=deadline,
            platform=platform_end(stopped_job) if stopped_job is not None and stopped_job.ended else None,
        )

    # ----------------------------------------------------------------------------------------------- finish
    def finish(
        self, inp: JobStepInput, outcome: JobEnd, platform: JobEnd | None = None, *, retry: bool = False
    ) -> FinishResult:
        """The one final transition (module docstring). ``outcome``: the end a step asked for; ``platform``: the
        end the DGX Platform recorded when the job was stopped there (:meth:`stop`), which decides where it
        differs (:func:`settle`). ``retry``: the job's execution goes on after this step (the state machine's
        ``Finish``; not the tracker's or the reconciler's), so a failed attempt the job's ``retryStrategy`` runs
        again becomes ``Pending`` for its next attempt instead (:meth:`_retry_once`). A job changed meanwhile (a
        cancel, the tracker) is read and decided again, at most :data:`FINISH_ATTEMPTS` times; then ``StoreBusy``
        (the step's retry runs it again)."""
        return reattempt(
            lambda: self._finish_once(inp, settle(outcome, platform), retry=retry),
            on=WorkloadChanged,
            attempts=FINISH_ATTEMPTS,
            exhausted=lambda: StoreBusy("the job kept changing while it was being finished"),
        )

    def _cancel_unrecorded_submit(self, job: Job) -> None:
        """A submit the job recorded sending (``submitting``: a Slurm cluster's) whose answer it never recorded — its
        Submit step's retries ran out while the cluster could not be reached — may have made a job all the same: look
        for it by its key and cancel it, so nothing runs on the cluster that the provider neither tracks nor bills.
        Best effort: a cluster still unreachable is logged (the job of that name is then the cluster's to clean)."""
        if not job.submitting or job.dgx_id:
            return
        platform = self.platforms.for_node(self._nodes.get(job.node_key))
        try:
            found = platform.find_job(job.submitting)
            if found is not None and found.status in ("Queued", "Running"):
                platform.cancel_job(found.id)
                logger.warning("Canceled a platform job whose submit was never recorded", extra={"id": found.id})
        except DgxError as exc:
            logger.warning(
                "A submit never recorded could not be looked for", extra={"key": job.submitting, "error": str(exc)}
            )

    def _finish_once(self, inp: JobStepInput, outcome: JobEnd, *, retry: bool = False) -> FinishResult:
        """One read-decide-write of :meth:`finish`. Raises ``WorkloadChanged`` when the job was written since it
        was read (nothing was written)."""
        job = self._current(inp)
        if job is None:
            self._end_operation(inp, OperationStatus.CANCELED)
            return FinishResult(status=JobStatus.CANCELED)
        if job.status.final:
            return FinishResult(status=job.status)
        self._cancel_unrecorded_submit(job)  # the job as read here: no read of its own on every Finish
        outcome = cancel_wins(job, outcome)
        ctx = self._context(inp)
        if retry and (
            retried := self._retry_once(ctx, inp, job, outcome) or self._requeue_once(ctx, inp, job, outcome)
        ):
            return retried
        ended_job, summary, ended = self._ended(ctx, job, outcome)
        final = ended_job.status
        error = {
            JobStatus.FAILED: {"code": "JobFailed", "message": ended_job.document["properties"]["statusReason"]},
            JobStatus.CANCELED: {"code": "JobCanceled", "message": ended_job.document["properties"]["statusReason"]},
            JobStatus.PREEMPTED: {"code": "JobPreempted", "message": ended_job.document["properties"]["statusReason"]},
        }.get(final)
        operations = self._operations_ended(inp, job, final, error)
        self._jobs.update(
            job,
            ended_job,
            self._kernel.audit(ctx, JOBS, job.key, JOBS.write, summary, job.document, ended_job.document),
            # a cancel accepted after the read above started an operation this write must end too
            expect=self._as_read(inp, job),
            # billing stops with the job: its meters end in the same transaction
            effects=replace(
                self._let_go(inp, job, ended), operation=operations[0], more_operations=tuple(operations[1:])
            ),
        )
        if job.drain_node is not None:
            self._nodes.set_draining(job.drain_node, None)
        if job.capacity_reserved or job.drain_node is not None:
            # capacity freed, or a node drained for this job takes others again: serve the waiting jobs
            self._placement.dispatch(ctx, inp.subscriptionId)
        return FinishResult(status=final)

    def _retry_once(self, ctx: CallContext, inp: JobStepInput, job: Job, outcome: JobEnd) -> FinishResult | None:
        """A failed attempt the job's ``retryStrategy`` runs again (domain/retries.py) after its backoff
        (:meth:`_again`). None when the attempt is not retried. Raises ``WorkloadChanged``."""
        strategy = job.run.retry_strategy
        if strategy is None or outcome.status != JobStatus.FAILED or not outcome.retryable or job.cancel_requested:
            return None
        failures = 1 + job.run.failures
        if job.status == JobStatus.PENDING and job.run.attempt_number > 1:  # written already: run again
            return FinishResult(status=JobStatus.PENDING, retryInSeconds=retries.delay_seconds(strategy, failures - 1))
        if job.started_at is None or not retries.should_retry(strategy, failures, outcome.exitCode, outcome.reason):
            return None
        delay = retries.delay_seconds(strategy, failures)
        attempt = job.run.attempt_number
        why = (
            f"Attempt {attempt} failed ({failures} of the {strategy.attempts} runs its retryStrategy allows): "
            f"{_with_exit_code(outcome)}. Attempt {attempt + 1} starts in {delay} s, then waits for capacity like "
            "any job."
        )
        return self._again(ctx, inp, job, outcome, delay=delay, reason=why)

    def _requeue_once(self, ctx: CallContext, inp: JobStepInput, job: Job, outcome: JobEnd) -> FinishResult | None:
        """A preempted job that asked to be requeued (``preemptMode`` ``Requeue``, Slurm's word) goes back to the
        queue as a new attempt at once (:meth:`_again`), in its place by priority and submission — behind the job
        that preempted it. Not when its consumer canceled it meanwhile. None otherwise. Raises ``WorkloadChanged``."""
        if outcome.status != JobStatus.PREEMPTED or not job.run.requeues:
            return None
        if job.status == JobStatus.PENDING and not job.cancel_requested:  # written already: run again
            return FinishResult(status=JobStatus.PENDING, retryInSeconds=1)
        if job.cancel_operation_id or not job.run.may_run_again:
            return None  # its consumer canceled it; or it ran as often as any job may: it ends Preempted
        why = f"{outcome.reason} Requeued, as it asked (preemptMode Requeue): it waits for capacity again."
        return self._again(ctx, inp, job, outcome, delay=1, reason=why)

    def _again(
        self, ctx: CallContext, inp: JobStepInput, job: Job, outcome: JobEnd, *, delay: int, reason: str
    ) -> FinishResult:
        """The job's attempt ended as ``outcome`` says and the job runs again after ``delay`` seconds: in one
        transaction the attempt is recorded (:meth:`_next_attempt`), its meter ends, its GPUs and quotas are
        released, and the job is ``Pending`` for its next attempt; then the waiting jobs are served. A Finish run
        again after this was written (a lost answer) answers it again (the callers' checks). Raises
        ``WorkloadChanged``."""
        ended = self._end_time(job, outcome)
        again = self._next_attempt(ctx, job, outcome, ended, delay=delay, reason=reason)
        self._jobs.update(
            job,
            again,
            self._kernel.audit(ctx, JOBS, job.key, JOBS.write, reason, job.document, again.document),
            expect=self._as_read(inp, job),
            effects=self._let_go(inp, job, ended),
        )
        if job.capacity_reserved:
            self._placement.dispatch(ctx, inp.subscriptionId)  # its GPUs are free: serve the waiting jobs
        return FinishResult(status=JobStatus.PENDING, retryInSeconds=delay)

    def _next_attempt(
        self, ctx: CallContext, job: Job, outcome: JobEnd, ended: float, *, delay: int, reason: str
    ) -> Job:
        """``job`` ``Pending`` for its next attempt, its lease ``delay`` seconds on: the attempt it was at recorded
        among its ``attempts`` (how it ended, its node, times, usage and cost; an attempt that never ran is not) and
        the job's usage and cost their sum; its hold on a node, its token and a preemption request cleared; its
        price ceiling narrowed to the currency the attempt was billed in, so every attempt of a job bills in one
        currency and the job's cost is their sum."""
        record = self._attempt(job, outcome, ended) if job.started_at is not None else None
        # a new number even for an attempt that never ran (preempted while Scheduled): it may have reached the
        # platform under its own id, which the next attempt must not reuse
        run = job.run.next_attempt(record)
        # between attempts the job holds no node (the attempts say where each ran): it is in its subscription's queue
        # again, not among a supplier's jobs
        properties: dict[str, Any] = {
            "statusReason": reason,
            "startedAt": None,
            "preemptedBy": None,
            "preemptedAt": None,
            "assignedNode": None,
            "assignedNodes": None,
        }
        if record is not None:
            properties.update(run.charges().as_properties())
            ceiling = job.price_ceiling
            narrowed = ceiling.in_currencies(frozenset({record.charges.currency})) if ceiling else None
            if narrowed is not None and narrowed.terms:
                properties["priceCeiling"] = narrowed.as_properties(job.kind)
        return arm_rules.changed(
            ctx,
            job,
            properties,
            run=run,
            status=JobStatus.PENDING,
            state=ProvisioningState.ACCEPTED,
            capacity_reserved=False,
            quota=None,
            dgx_id=None,
            started_at=None,
            meter_id=None,
            task_token=None,
            track_checks=0,
            queued=False,
            cancel_requested=False,
            canceled_by=None,
            node=None,
            node_owner=None,
            gang_nodes=(),
            lease=self._lease(delay),
        )

    @staticmethod
    def _as_read(inp: JobStepInput, job: Job) -> Expect:
        """The job still as read, of this execution: the write that ends its run is conditioned on it."""
        return Expect(
            operation_id=inp.operationId,
            status=(job.status,),
            capacity_reserved=job.capacity_reserved,
            cancel_requested=job.cancel_requested,
        )

    def _let_go(self, inp: JobStepInput, job: Job, ended: float) -> Effects:
        """What the transition ending ``job``'s run gives back with it: its devices and quota on every node it holds
        (a gang's every part), and its meters ended at ``ended`` (epoch seconds)."""
        held = job.capacity_reserved
        meters = [job.meter_id, *part_meter_ids(job)] if job.meter_id else []
        ends = [MeterEnd(inp.subscriptionId, m, int(ended), int(self._clock())) for m in meters]
        return Effects(
            release=Release.of(job) if held else None,
            more_releases=gang_releases(job) if held else (),
            meter_end=ends[0] if ends else None,
            more_meter_ends=tuple(ends[1:]),
        )

    def _end_time(self, job: Job, outcome: JobEnd) -> float:
        """When the job's run ends as ``outcome`` says (epoch seconds, whole): its end time (billing runs from its
        start to its end), never before it started, and an end the platform reported never past now."""
        now = self._clock()
        ended = float(int(outcome.endedAt or now))
        if job.started_at:
            ended = max(ended, float(int(epoch(job.started_at))))
            if outcome.onPlatform:
                ended = min(ended, float(int(now)))
        return ended

    def _attempt(self, job: Job, outcome: JobEnd, ended: float) -> Attempt:
        """The attempt ``job`` is at, ended as ``outcome`` says at ``ended`` (epoch s), with its charges."""
        return Attempt(
            number=job.run.attempt_number,
            status=outcome.status,
            status_reason=outcome.reason,
            ended_at=iso(ended),
            charges=job_charges(job, ended),
            exit_code=outcome.exitCode,
            assigned_node=job.assigned_node,
            assigned_nodes=job.assigned_nodes,
            started_at=job.started_at,
        )

    def _ended(self, ctx: CallContext, job: Job, outcome: JobEnd) -> tuple[Job, str, float]:
        """``job`` as ``outcome`` ends it, the audit summary and the end (epoch seconds, whole): its end time
        (:meth:`_end_time`), GPU-seconds, billable GPU-seconds and cost under its locked terms — with those of its
        earlier attempts, and this one added to ``attempts``, on a job with a ``retryStrategy`` or earlier attempts
        (``JobRun.last_attempt``) — its reason (with the exit code), its capacity, lease and token let go."""
        final = outcome.status
        ended = self._end_time(job, outcome)
        reason = with_exit_code(outcome.reason or str(final), outcome.exitCode)
        started = job.started_at is not None
        last = self._attempt(job, outcome.model_copy(update={"reason": outcome.reason or str(final)}), ended)
        run = job.run.last_attempt(last if started else None)
        charges = last.charges  # of the run it is at (none when it never started)
        if run.ended:  # the job's usage and cost are its attempts' (one currency: _retry_once)
            charges, started = run.charges(), True
        properties: dict[str, Any] = {
            "statusReason": reason,
            "gpuSeconds": charges.gpu_seconds,
            "billableGpuSeconds": charges.billable_gpu_seconds if started else None,
            "cost": charges.cost_properties() if started else None,
        }
        ended_job = arm_rules.changed(
            ctx,
            job,
            properties,
            run=run,
            status=final,
            state=ProvisioningState(final.provisioning_state),
            ended_at=iso(ended),
            gpu_seconds=charges.gpu_seconds,
            billable_gpu_seconds=charges.billable_gpu_seconds,
            cost=format(charges.cost, "f"),
            capacity_reserved=False,
            quota=None,
            task_token=None,
            track_checks=0,
            queued=False,
            lease=None,
        )
        summary = f"Job {final}: {reason.rstrip('.')}" + (f"; {released_words(job)}" if job.capacity_reserved else "")
        return ended_job, summary, ended

    def _operations_ended(
        self, inp: JobStepInput, job: Job, final: JobStatus, error: dict[str, str] | None
    ) -> list[Operation]:
        """The job's operation (ends with the job) and its cancel operation, if any (Succeeded when the job ended
        Canceled; Failed with the job's status otherwise)."""
        now = self._context(inp).now_iso()
        operations = [self._moved(inp, inp.operationId, OperationStatus(final.provisioning_state), now, error)]
        if job.cancel_operation_id:
            cancel = self._operations.get(inp.subscriptionId, job.cancel_operation_id)
            if cancel is not None and not cancel.status.final:
                if final in (JobStatus.CANCELED, JobStatus.PREEMPTED):  # stopped as asked
                    operations.append(cancel.moved(OperationStatus.SUCCEEDED, now))
                else:
                    already = {
                        "code": "JobAlreadyFinished",
                        "message": f"The job ended {final} before the cancel took effect.",
                    }
                    operations.append(cancel.moved(OperationStatus.FAILED, now, already))
        return operations

    def _end_operation(self, inp: JobStepInput, status: OperationStatus) -> None:
        found = self._operations.get(inp.subscriptionId, inp.operationId)
        if found is not None:
            now = self._context(inp).now_iso()
            self._operations.finish(inp.subscriptionId, found.moved(status, now))
