"""The reconciler: ends every operation whose workflow stalled, so nothing stays ``Accepted`` or holds GPUs.

Run by an EventBridge schedule (template.yaml, ``ReconcilerFunction``). Each run reads the workloads whose lease
ran out (the sparse lease index, a bounded number per run), reads each again consistently, and drives it to an end:

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
``Failed`` still holding capacity            (a deprovisioning that timed out) release once confirmed gone
==========================================  ================================================================

It changes state only through the workflow steps' own conditional transitions (services/instance_workflow.py), so
overlapping or repeated runs are harmless and capacity is released exactly once. Changes are audited as
``SYSTEM``; a restart is audited too. What a run did is returned as a :class:`ReconcileReport` (the handler
publishes it as metrics).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from itl_accelerator.models.jobs import FINAL_JOB_STATUSES
from itl_accelerator.resources import INSTANCES, JOBS, RESOURCE_TYPES
from itl_accelerator.services.instance_workflow import (
    IN_FLIGHT,
    InstanceWorkflow,
    WorkflowInput,
    workflow_context,
)
from itl_accelerator.services.instances import execution_input
from itl_accelerator.services.job_workflow import JobInput, JobWorkflow
from itl_accelerator.services.jobs import job_execution_input
from itl_accelerator.services.kernel import ResourceKernel
from itl_accelerator.services.placement import Placement, end
from itl_accelerator.settings import Settings
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.workloads import NO_LEASE, WorkloadRecord
from itl_accelerator.workflows import WorkflowStarter

#: A compensation or deletion waiting on the DGX Platform is looked at again after this long (seconds).
RECHECK_SECONDS = 60


@dataclass
class ReconcileReport:
    """Counts of one run (each workload counts once, under what was done to it), and ``repaired``: the ARM id and
    outcome of each workload the run acted on (not those it skipped)."""

    examined: int = 0
    restarted: int = 0
    still_running: int = 0
    awaiting_removal: int = 0
    released: int = 0
    deleted: int = 0
    ended: int = 0
    skipped: int = 0
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
        instance_workflow: InstanceWorkflow,
        workflows: WorkflowStarter,
        settings: Settings,
        clock: Callable[[], float] = time.time,
        *,
        job_workflow: JobWorkflow | None = None,
        placement: Placement | None = None,
    ):
        self._kernel = kernel
        self._store = kernel.store
        self._steps = instance_workflow
        self._jobs = job_workflow  # type: ignore[assignment]
        self._placement = placement  # type: ignore[assignment]
        self._workflows = workflows
        self._settings = settings
        self._clock = clock

    def run(
        self, *, now: float | None = None, limit: int | None = None, time_left: Callable[[], float] | None = None
    ) -> ReconcileReport:
        """One pass over at most ``limit`` (default ``RECONCILE_BATCH_SIZE``) expired leases as of ``now`` (epoch
        seconds, default the clock), stopping early when ``time_left()`` (seconds) drops below 10."""
        now = self._clock() if now is None else now
        report = ReconcileReport()
        dispatched: set[str] = set()
        for key in self._store.expired_leases(now, limit or self._settings.reconcile_batch_size):
            if time_left is not None and time_left() < 10:
                break
            report.examined += 1
            if key.type_segment == INSTANCES.segment:
                outcome = self._reconcile(key, now)
            elif key.type_segment == JOBS.segment:
                outcome = self._reconcile_job(key, now, dispatched)
            else:
                outcome = "skipped"
            setattr(report, outcome, getattr(report, outcome) + 1)
            if outcome != "skipped":
                resource = RESOURCE_TYPES[key.type_segment].id(key.subscription_id, key.resource_group, key.names)
                report.repaired.append({"resource": resource, "outcome": outcome})
        return report

    # ----------------------------------------------------------------------------------------------- instances
    def _reconcile(self, key: ResourceKey, now: float) -> str:
        record = self._store.get_workload(key)
        if record is None or record.lease_until is None or record.lease_until > now:
            return "skipped"  # gone, or its workflow renewed the lease since the index was read
        if record.state in IN_FLIGHT:
            if record.extra.get("compensationError") is not None:
                return self._finish_compensation(self._input(record, record.operation_id), record, now)
            return self._provisioning(record, now)
        if record.state == "Deleting":
            return self._deleting(record, now)
        if record.state == "Failed" and record.capacity_reserved:
            return self._release_failed(record, now)
        self._store.renew_lease(key, NO_LEASE, expect={"etag": record.etag})  # nothing owns it: a stale lease
        return "skipped"

    def _input(self, record: WorkloadRecord, operation_id: str | None) -> WorkflowInput:
        return WorkflowInput.model_validate(
            execution_input(self._settings, record.key, operation_id or "", f"reconciler-{uuid.uuid4()}")
        )

    def _provisioning(self, record: WorkloadRecord, now: float) -> str:
        arn = self._settings.provision_state_machine_arn
        status = self._workflows.status(arn, record.operation_id or "")
        inp = self._input(record, record.operation_id)
        if status == "NOT_FOUND":
            return self._restart(arn, record, inp, now, "provisioning")
        if status == "RUNNING":
            self._renew(record, now + inp.timeoutSeconds + self._settings.workflow_lease_grace_seconds)
            return "still_running"
        # the execution ended without finishing the instance: compensate here
        self._steps.compensate(
            inp,
            {
                "code": "ProvisioningInterrupted",
                "message": f"The provisioning workflow ended ({status}) before the instance was ready.",
            },
        )
        current = self._store.get_workload(record.key)
        if current is None or current.extra.get("compensationError") is None:
            return "skipped"  # a delete or the workflow itself got there first
        return self._finish_compensation(inp, current, now)

    def _finish_compensation(self, inp: WorkflowInput, record: WorkloadRecord, now: float) -> str:
        removal = self._steps.removal_status(inp, float("inf"))
        if removal["canceled"]:
            return "skipped"
        if removal["gone"]:
            outcome = self._steps.release_after_removal(inp)["outcome"]
            return "released" if outcome == "Failed" else "skipped"
        self._renew(record, now + RECHECK_SECONDS)
        return "awaiting_removal"

    def _deleting(self, record: WorkloadRecord, now: float) -> str:
        arn = self._settings.deprovision_state_machine_arn
        status = self._workflows.status(arn, record.delete_operation_id or "")
        inp = self._input(record, record.delete_operation_id)
        if status == "NOT_FOUND":
            return self._restart(arn, record, inp, now, "deprovisioning")
        if status == "RUNNING":
            self._renew(record, now + inp.timeoutSeconds + self._settings.workflow_lease_grace_seconds)
            return "still_running"
        self._steps.deprovision_start(inp)
        if not self._steps.deprovision_poll(inp, float("inf"))["gone"]:
            self._renew(record, now + RECHECK_SECONDS)
            return "awaiting_removal"
        return "deleted" if self._steps.deprovision_finish(inp)["outcome"] == "Deleted" else "skipped"

    def _release_failed(self, record: WorkloadRecord, now: float) -> str:
        """A deprovisioning that timed out left the instance Failed with its GPUs: give them back once the DGX
        Platform confirms the instance gone (the instance item stays, Failed, until it is deleted)."""
        inp = self._input(record, record.delete_operation_id or record.operation_id)
        if self._steps.deprovision_poll(inp, float("inf"))["gone"]:
            return "released" if self._steps.release_failed(inp, record) else "skipped"
        self._renew(record, now + RECHECK_SECONDS)
        return "awaiting_removal"

    def _restart(self, arn: str, record: WorkloadRecord, inp: WorkflowInput, now: float, what: str) -> str:
        """Start the execution that never started, audited as SYSTEM, and give it a fresh start lease."""
        self._workflows.start(arn, inp.operationId, inp.model_dump())
        self._renew(record, now + self._settings.workflow_start_grace_seconds)
        ctx = workflow_context(inp.operationId, inp.correlationId)
        self._store.append_audit(
            self._kernel.audit(
                ctx,
                INSTANCES,
                record.key,
                INSTANCES.write if what == "provisioning" else INSTANCES.delete,
                f"Reconciler started the {what} workflow of operation {inp.operationId}, which had not started",
                record.document,
                record.document,
            )
        )
        return "restarted"

    def _renew(self, record: WorkloadRecord, until: float) -> None:
        self._store.renew_lease(record.key, until, expect={"etag": record.etag})

    # ----------------------------------------------------------------------------------------------- jobs
    def _reconcile_job(self, key: ResourceKey, now: float, dispatched: set[str]) -> str:
        """A job whose lease ran out: start its execution if it never started; if it runs, serve the waiting jobs
        of its subscription (the periodic retry of placement) and renew the lease; if its execution ended
        without finishing the job, end the job here (stop it on the DGX Platform, release what it holds)."""
        record = self._store.get_workload(key)
        if record is None or record.lease_until is None or record.lease_until > now:
            return "skipped"
        status = record.extra.get("status")
        if status in FINAL_JOB_STATUSES:
            self._store.renew_lease(key, NO_LEASE, expect={"etag": record.etag})
            return "skipped"
        arn = self._settings.job_state_machine_arn
        inp = JobInput.model_validate(
            job_execution_input(
                self._settings,
                key,
                record.operation_id or "",
                f"reconciler-{uuid.uuid4()}",
                int(record.extra.get("maxDurationSeconds", 60)) // 60,
            )
        )
        execution = self._workflows.status(arn, inp.operationId)
        if execution == "NOT_FOUND":
            self._workflows.start(arn, inp.operationId, inp.model_dump())
            self._renew(record, now + self._settings.workflow_start_grace_seconds)
            self._store.append_audit(
                self._kernel.audit(
                    workflow_context(inp.operationId, inp.correlationId),
                    JOBS,
                    key,
                    JOBS.write,
                    f"Reconciler started the job workflow of operation {inp.operationId}, which had not started",
                    record.document,
                    record.document,
                )
            )
            return "restarted"
        if execution == "RUNNING":
            if status == "Pending" and key.subscription_id.lower() not in dispatched:
                dispatched.add(key.subscription_id.lower())
                self._placement.dispatch(workflow_context(inp.operationId, inp.correlationId), key.subscription_id)
            if status == "Pending":  # the periodic retry of placement: look again after the retry interval
                self._renew(record, now + self._settings.job_placement_retry_seconds)
            else:
                self._renew(record, now + inp.stopTimeoutSeconds + self._settings.workflow_lease_grace_seconds)
            return "still_running"
        held = record.capacity_reserved
        if status in ("Scheduled", "Running") and not self._jobs.stop(inp, None)["stopped"]:
            self._renew(record, now + RECHECK_SECONDS)  # GPUs stay reserved until the platform confirms the stop
            return "awaiting_removal"
        self._jobs.finish(inp, end("Failed", f"The job's workflow ended ({execution}) before the job did.", stop=True))
        return "released" if held else "ended"
