"""The reconciler: ends every operation whose workflow stalled, so nothing stays ``Accepted`` or holds GPUs.

Run by an EventBridge schedule (template.yaml, ``ReconcilerFunction``). Each run reads every workload whose lease
ran out (the sparse lease index, page by page, each page a fair share of every index partition — repositories/
leases.py — until none is left or its time runs short), reads each again consistently, and drives it to an end:

==========================================  ================================================================
found                                        action
==========================================  ================================================================
in flight, its execution never started       start it (a ``StartExecution`` that failed after the API committed)
in flight, its execution still running       renew the lease (a slow DGX Platform, not a stall)
in flight, its execution ended (failed)      compensate: ask the DGX Platform to delete; release the capacity
                                             once it confirms the instance gone (possibly on a later run)
compensating (a compensation that failed)    as above: check the DGX Platform, release once confirmed gone
``Deleting``, execution never started        start the deprovisioning
``Deleting``, execution ended                deprovision here: DGX delete, and once gone remove and release
``Failed`` still holding capacity            (a deprovisioning that timed out, or a live instance the platform
                                             reported failed) release once confirmed gone
==========================================  ================================================================

It changes state only through the workflow steps' own conditional transitions (services/workflows/instance_steps.py, job_steps.py), so
overlapping or repeated runs are harmless and capacity is released exactly once. Changes are audited as
``SYSTEM``; a restart is audited too. What a run did is returned as a :class:`ReconcileReport` (the handler
publishes it as metrics).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace

from itl_accelerator.domain.records import Instance, Job, Lease, ResourceKey, Workload
from itl_accelerator.domain.states import INSTANCE_IN_FLIGHT, JobStatus, ProvisioningState
from itl_accelerator.observability import logger
from itl_accelerator.repositories.protocols import Expect
from itl_accelerator.resources import INSTANCES, JOBS, RESOURCE_TYPES
from itl_accelerator.services.common.context import system_context
from itl_accelerator.services.common.kernel import ResourceKernel
from itl_accelerator.services.common.placement import Placement
from itl_accelerator.services.workflows.deprovision_steps import DeprovisionSteps
from itl_accelerator.services.workflows.instance_steps import InstanceSteps
from itl_accelerator.services.workflows.io import ErrorBody, InstanceStepInput, JobEnd, JobStepInput
from itl_accelerator.services.workflows.job_steps import JobSteps
from itl_accelerator.settings import Settings
from itl_accelerator.state_machines import StateMachines

#: A compensation or deletion waiting on the DGX Platform is looked at again after this long (seconds).
RECHECK_SECONDS = 60


@dataclass
class ReconcileReport:
    """Counts of one run (each workload counts once, under what was done to it), and ``repaired``: the ARM id and
    outcome of each workload the run acted on (not those it skipped); ``failed``: workloads whose repair raised
    (logged; looked at again next run, without holding back the others); ``left``: 1 when the run's time ran short
    with leases still to look at."""

    examined: int = 0
    restarted: int = 0
    still_running: int = 0
    awaiting_removal: int = 0
    released: int = 0
    deleted: int = 0
    ended: int = 0
    skipped: int = 0
    failed: int = 0
    left: int = 0
    repaired: list[dict[str, str]] = field(default_factory=list)

    def as_metrics(self) -> dict[str, int]:
        """Metric name → value (CamelCase names, counts)."""
        counts = {k: v for k, v in asdict(self).items() if isinstance(v, int)}
        return {"".join(p.capitalize() for p in k.split("_")): v for k, v in counts.items()}


class Reconciler:
    """See the module docstring. ``clock`` returns epoch seconds."""

    def __init__(
        self,
        kernel: ResourceKernel,
        instance_steps: InstanceSteps,
        deprovision_steps: DeprovisionSteps,
        job_steps: JobSteps,
        placement: Placement,
        state_machines: StateMachines,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ):
        self._kernel = kernel
        self._repos = kernel.repositories
        self._steps = instance_steps
        self._deprovision = deprovision_steps
        self._jobs = job_steps
        self._placement = placement
        self._state_machines = state_machines
        self._settings = settings
        self._clock = clock

    def run(
        self, *, now: float | None = None, limit: int | None = None, time_left: Callable[[], float] | None = None
    ) -> ReconcileReport:
        """One pass over every lease expired as of ``now`` (epoch seconds, default the clock), read ``limit``
        (default ``RECONCILE_BATCH_SIZE``) a page, stopping early when ``time_left()`` (seconds) drops below 10
        (``report.left`` is then 1: the next run goes on)."""
        now = self._clock() if now is None else now
        report = ReconcileReport()
        dispatched: set[str] = set()
        for key in self._expired(now, limit or self._settings.reconcile_batch_size, time_left, report):
            report.examined += 1
            try:
                if key.type_segment == INSTANCES.segment:
                    outcome = self._reconcile(key, now)
                elif key.type_segment == JOBS.segment:
                    outcome = self._reconcile_job(key, now, dispatched)
                else:
                    outcome = "skipped"
            except Exception:  # noqa: BLE001 - one workload that cannot be repaired now must not hold back the others
                logger.exception(
                    "Reconciling a workload failed; it is looked at again next run", extra={"key": key.name}
                )
                outcome = "failed"
            setattr(report, outcome, getattr(report, outcome) + 1)
            if outcome not in ("skipped", "failed"):
                resource = RESOURCE_TYPES[key.type_segment].id(key.subscription_id, key.resource_group, key.names)
                report.repaired.append({"resource": resource, "outcome": outcome})
        return report

    def _expired(
        self, now: float, page: int, time_left: Callable[[], float] | None, report: ReconcileReport
    ) -> Iterator[ResourceKey]:
        """Every workload whose lease ran out by ``now``, page by page of the lease index (``page`` a page, a fair
        share of each of its partitions: a partition of many healthy leases renewing never keeps another's stalled
        ones from a run), until none is left or ``time_left()`` (seconds) drops below 10 (``report.left`` then)."""
        token: str | None = None
        while True:
            found = self._repos.leases.expired(now, page, token=token)
            for key in found.items:
                if time_left is not None and time_left() < 10:
                    report.left = 1
                    return
                yield key
            token = found.token
            if token is None:
                return

    @staticmethod
    def _lease_ran_out(workload: Workload | None, now: float) -> bool:
        """Whether ``workload`` still has a lease that ran out (the index may lag: its workflow may have renewed it)."""
        return workload is not None and workload.lease is not None and workload.lease.until <= now

    # ----------------------------------------------------------------------------------------------- instances
    def _reconcile(self, key: ResourceKey, now: float) -> str:
        instance = self._repos.instances.get(key)
        if instance is None or not self._lease_ran_out(instance, now):
            return "skipped"  # gone, or its workflow renewed the lease since the index was read
        if instance.state in INSTANCE_IN_FLIGHT:
            if instance.compensation_error is not None:
                return self._finish_compensation(self._input(instance, instance.operation_id), instance, now)
            return self._provisioning(instance, now)
        if instance.state == ProvisioningState.DELETING:
            return self._deleting(instance, now)
        if instance.state == ProvisioningState.FAILED and instance.capacity_reserved:
            return self._release_failed(instance, now)
        # nothing owns it: a stale lease; a live instance goes back to the job tracker's watch (due now)
        watch = Lease.tracked(now) if instance.state == ProvisioningState.SUCCEEDED else None
        self._repos.instances.note(instance, replace(instance, lease=watch), expect=Expect(etag=instance.etag))
        return "skipped"

    def _input(self, instance: Instance, operation_id: str | None) -> InstanceStepInput:
        return InstanceStepInput.starting(
            self._settings, instance.key, operation_id or "", f"reconciler-{uuid.uuid4()}"
        )

    def _provisioning(self, instance: Instance, now: float) -> str:
        arn = self._settings.require("provision_state_machine_arn")
        status = self._state_machines.status(arn, instance.operation_id or "")
        inp = self._input(instance, instance.operation_id)
        if status == "NOT_FOUND":
            return self._restart(arn, instance, inp, now, "provisioning")
        if status == "RUNNING":
            self._renew(instance, now + inp.timeoutSeconds + self._settings.workflow_lease_grace_seconds)
            return "still_running"
        # the execution ended without finishing the instance: compensate here
        self._steps.compensate(
            inp,
            ErrorBody.of(
                "ProvisioningInterrupted",
                f"The provisioning workflow ended ({status}) before the instance was ready.",
            ),
        )
        current = self._repos.instances.get(instance.key)
        if current is None or current.compensation_error is None:
            return "skipped"  # a delete or the workflow itself got there first
        return self._finish_compensation(inp, current, now)

    def _finish_compensation(self, inp: InstanceStepInput, instance: Instance, now: float) -> str:
        removal = self._steps.check_removal(inp, float("inf"))
        if removal.canceled:
            return "skipped"
        if removal.gone:
            outcome = self._steps.release_capacity(inp).outcome
            return "released" if outcome == "Failed" else "skipped"
        self._renew(instance, now + RECHECK_SECONDS)
        return "awaiting_removal"

    def _deleting(self, instance: Instance, now: float) -> str:
        arn = self._settings.require("deprovision_state_machine_arn")
        status = self._state_machines.status(arn, instance.delete_operation_id or "")
        inp = self._input(instance, instance.delete_operation_id)
        if status == "NOT_FOUND":
            return self._restart(arn, instance, inp, now, "deprovisioning")
        if status == "RUNNING":
            self._renew(instance, now + inp.timeoutSeconds + self._settings.workflow_lease_grace_seconds)
            return "still_running"
        self._deprovision.start(inp)
        if not self._deprovision.poll(inp, float("inf")).gone:
            self._renew(instance, now + RECHECK_SECONDS)
            return "awaiting_removal"
        return "deleted" if self._deprovision.finish(inp).outcome == "Deleted" else "skipped"

    def _release_failed(self, instance: Instance, now: float) -> str:
        """A deprovisioning that timed out left the instance Failed with its GPUs: give them back once the DGX
        Platform confirms the instance gone (the instance stays, Failed, until it is deleted)."""
        inp = self._input(instance, instance.delete_operation_id or instance.operation_id)
        if self._deprovision.poll(inp, float("inf")).gone:
            return "released" if self._deprovision.release_failed(inp, instance) else "skipped"
        self._renew(instance, now + RECHECK_SECONDS)
        return "awaiting_removal"

    def _restart(self, arn: str, instance: Instance, inp: InstanceStepInput, now: float, what: str) -> str:
        """Start the execution that never started, audited as SYSTEM, and give it a fresh start lease."""
        self._state_machines.start(arn, inp.operationId, inp.execution_input())
        self._renew(instance, now + self._settings.workflow_start_grace_seconds)
        ctx = system_context(inp.operationId, inp.correlationId)
        self._repos.audit.append(
            self._kernel.audit(
                ctx,
                INSTANCES,
                instance.key,
                INSTANCES.write if what == "provisioning" else INSTANCES.delete,
                f"Reconciler started the {what} workflow of operation {inp.operationId}, which had not started",
                instance.document,
                instance.document,
            )
        )
        return "restarted"

    def _renew(self, workload: Instance | Job, until: float) -> None:
        """Renew a workload's lease (bookkeeping: no audit, no new etag) unless it changed since it was read."""
        if isinstance(workload, Job):
            self._repos.jobs.note(
                workload, replace(workload, lease=Lease.owned(until)), expect=Expect(etag=workload.etag)
            )
        else:
            self._repos.instances.note(
                workload, replace(workload, lease=Lease.owned(until)), expect=Expect(etag=workload.etag)
            )

    # ----------------------------------------------------------------------------------------------- jobs
    def _reconcile_job(self, key: ResourceKey, now: float, dispatched: set[str]) -> str:
        """A job whose lease ran out: start its execution if it never started; if it runs, serve the waiting jobs
        of its subscription (the periodic retry of placement) and renew the lease; if its execution ended
        without finishing the job, end the job here (stop it on the DGX Platform, release what it holds)."""
        job = self._repos.jobs.get(key)
        if job is None or not self._lease_ran_out(job, now):
            return "skipped"
        if job.status.final:
            self._repos.jobs.note(job, replace(job, lease=None), expect=Expect(etag=job.etag))
            return "skipped"
        arn = self._settings.require("job_state_machine_arn")
        inp = JobStepInput.starting(
            self._settings, key, job.operation_id or "", f"reconciler-{uuid.uuid4()}", job.max_duration_seconds // 60
        )
        execution = self._state_machines.status(arn, inp.operationId)
        if execution == "NOT_FOUND":
            self._state_machines.start(arn, inp.operationId, inp.execution_input())
            self._renew(job, now + self._settings.workflow_start_grace_seconds)
            self._repos.audit.append(
                self._kernel.audit(
                    system_context(inp.operationId, inp.correlationId),
                    JOBS,
                    key,
                    JOBS.write,
                    f"Reconciler started the job workflow of operation {inp.operationId}, which had not started",
                    job.document,
                    job.document,
                )
            )
            return "restarted"
        if execution == "RUNNING":
            if job.status == JobStatus.PENDING and key.subscription_id.lower() not in dispatched:
                dispatched.add(key.subscription_id.lower())
                self._placement.dispatch(system_context(inp.operationId, inp.correlationId), key.subscription_id)
            if job.status == JobStatus.PENDING:  # the periodic retry of placement: look again after the interval
                self._renew(job, now + self._settings.job_placement_retry_seconds)
            else:
                self._renew(job, now + inp.stopTimeoutSeconds + self._settings.workflow_lease_grace_seconds)
            return "still_running"
        held = job.capacity_reserved
        if job.status in (JobStatus.SCHEDULED, JobStatus.RUNNING) and not self._jobs.stop(inp, None).stopped:
            self._renew(job, now + RECHECK_SECONDS)  # GPUs stay reserved until the platform confirms the stop
            return "awaiting_removal"
        self._jobs.finish(
            inp,
            JobEnd(
                status=JobStatus.FAILED,
                reason=f"The job's workflow ended ({execution}) before the job did.",
                stop=True,
            ),
        )
        return "released" if held else "ended"
