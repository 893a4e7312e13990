"""The steps of the job lifecycle state machine (statemachines/job_lifecycle.asl.json) and the job tracker.

admit → place (or wait for capacity) → submit to the DGX Platform (idempotency key = the job's operation id) →
track → (stop on the DGX Platform) → finish. Waiting costs no execution history: a job that does not fit waits on a
task token that placement completes when capacity frees (services/placement.py); a running job waits on a task
token that the tracker (a schedule, :class:`JobTracker`) completes when the DGX Platform reports it ended or it
exceeded ``maxDurationMinutes`` — so an execution's history has the same few dozen events whether the job runs a
minute or 7 days. A cancel completes whichever token the job waits on at once, and every step reads the job
before it acts, so a cancel is seen at every step.

Every step reports ``{"end": null}`` to go on, or ``{"end": {"status", "reason", "stop", ...}}`` when the job must
end; :meth:`JobWorkflow.finish` makes the one final transition: status, end time, GPU-seconds and cost at the
node's price, capacity released (conditioned on being held: exactly once), both operations ended, lease gone —
then serves the jobs waiting in the subscription. All changes are audited as ``SYSTEM`` with the request's
correlation id.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from pydantic import BaseModel, ConfigDict

from itl_accelerator.billing.metering import allocation_charges
from itl_accelerator.dgx.client import DgxPlatformClient
from itl_accelerator.dgx.errors import DgxNotFound
from itl_accelerator.dgx.models import DgxJob
from itl_accelerator.models.jobs import FINAL_JOB_STATUSES
from itl_accelerator.observability import logger
from itl_accelerator.resources import JOBS
from itl_accelerator.services import arm_rules
from itl_accelerator.services.instance_workflow import workflow_context
from itl_accelerator.services.kernel import ResourceKernel
from itl_accelerator.services.operations import finished
from itl_accelerator.services.placement import Placement, end
from itl_accelerator.services.usage import locked_terms, meter_for
from itl_accelerator.settings import Settings
from itl_accelerator.store.errors import StoreBusy, WorkloadChanged
from itl_accelerator.store.jobs import JobStore, pending_index_values
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.workloads import NO_LEASE, TRACK, Release, WorkloadRecord
from itl_accelerator.workflows import WorkflowStarter


class JobInput(BaseModel):
    """The execution input (services/jobs.py ``job_execution_input``) as every Task receives it. Seconds."""

    model_config = ConfigDict(extra="allow")

    operationId: str
    subscriptionId: str
    resourceGroup: str
    jobName: str
    correlationId: str = ""
    pollIntervalSeconds: int = 30
    pendingTimeoutSeconds: int = 7 * 24 * 3600
    trackTimeoutSeconds: int = 7 * 24 * 3600
    stopTimeoutSeconds: int = 300

    @property
    def key(self) -> ResourceKey:
        return ResourceKey(self.subscriptionId, self.resourceGroup, JOBS.segment, (self.jobName,))


def iso(epoch: float) -> str:
    """UTC ISO 8601 with microseconds and ``Z``."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def epoch(value: str) -> float:
    """Inverse of :func:`iso`."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def platform_workload(record: WorkloadRecord) -> dict[str, Any]:
    """The workload as the DGX Platform runs it: ``env`` with the ``secretEnv`` values (kept apart from the job's
    document, never shown) merged in. Only this is sent; nothing of it is logged."""
    workload = record.document["properties"]["workload"]
    secrets = json.loads(str(record.extra.get("secretEnv") or "{}"))
    return {
        "image": workload["image"],
        "command": workload.get("command", []),
        "env": {**(workload.get("env") or {}), **secrets},
    }


def platform_end(job: DgxJob) -> dict[str, Any]:
    """The end the DGX Platform recorded for a job that ended there: its status (Succeeded, Failed or Canceled), why,
    its exit code and when it ended (``endedAt`` epoch seconds, None when the platform did not say)."""
    status = job.status if job.status in ("Succeeded", "Canceled") else "Failed"
    return end(
        status,
        job.error_message or f"The job ended {job.status} on the DGX Platform.",
        exitCode=job.exit_code,
        endedAt=epoch(job.ended_at) if job.ended_at else None,
        onPlatform=True,
    )


def settle(requested: dict[str, Any], platform: dict[str, Any] | None) -> dict[str, Any]:
    """The job's end when a step asked for ``requested`` (a cancel, a max duration passed, a lost tracking) and the
    platform recorded ``platform`` on stopping it. The platform's outcome and end time are the truth: a job that
    had already ended on its own (Succeeded or Failed) keeps that end, whatever was asked — a cancel that came too
    late changes nothing of it (its operation ends Failed, ``JobAlreadyFinished``). A job the stop ended
    (Canceled there) ends as asked, billed until the time asked for (a max duration's deadline) or else until the
    platform stopped it."""
    if platform is None or requested.get("onPlatform"):
        return requested
    if platform["status"] != "Canceled":
        reason = platform["reason"]
        if requested["status"] == "Canceled":
            reason = f"{reason} It had ended before the cancel reached the DGX Platform."
        return {**platform, "reason": reason}
    return {**requested, "endedAt": requested.get("endedAt") or platform.get("endedAt")}


def error_end(caught: dict[str, Any]) -> dict[str, Any]:
    """The end of a job whose step failed (a Step Functions Catch result ``{"Error", "Cause"}``)."""
    name = str(caught.get("Error", ""))
    try:
        cause = json.loads(caught.get("Cause") or "{}")
        message = str(cause.get("errorMessage", ""))[:300] if isinstance(cause, dict) else ""
    except ValueError:
        message = ""
    if name == "DgxPermanentError":
        return end("Failed", f"The DGX Platform refused the job: {message}", stop=True)
    if name == "DgxTransientError":
        return end("Failed", "The DGX Platform stayed unavailable; retries ran out.", stop=True)
    if name == "States.Timeout":
        return end("Failed", "The job's workflow timed out.", stop=True)
    return end("Failed", "The job failed because of an internal error.", stop=True)


class JobWorkflow:
    """Task implementations. ``dgx`` is the DGX Platform client (the container makes it on its first call); ``clock`` returns epoch seconds."""

    def __init__(
        self,
        kernel: ResourceKernel,
        placement: Placement,
        workflows: WorkflowStarter,
        dgx: DgxPlatformClient,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ):
        self._kernel = kernel
        self._store: JobStore = kernel.store  # type: ignore[assignment]
        self._placement = placement
        self._workflows = workflows
        self.dgx = dgx
        self._settings = settings
        self._clock = clock

    # ----------------------------------------------------------------------------------------------- helpers
    def _current(self, inp: JobInput) -> WorkloadRecord | None:
        """The job this execution runs (None when it is gone, or the name now holds another submission)."""
        record = self._store.get_workload(inp.key)
        return record if record is not None and record.operation_id == inp.operationId else None

    def _note(
        self,
        inp: JobInput,
        record: WorkloadRecord,
        *,
        reason: str,
        expect: dict[str, Any],
        status: str | None = None,
        set_values: dict[str, Any] | None = None,
        properties: dict[str, Any] | None = None,
        remove: tuple[str, ...] = (),
        lease_until: float | None = None,
        lease_kind: str = "LEASE",
        extra: tuple[dict[str, Any], ...] = (),
        operation: dict[str, Any] | None = None,
    ) -> None:
        """One audited transition of the job (status and reason in its document), with ``extra`` transaction items
        (its meter) and its operation moved on (``operation``). Raises :class:`WorkloadChanged`."""
        ctx = workflow_context(inp.operationId, inp.correlationId)
        props = {**record.document["properties"], "statusReason": reason, **(properties or {})}
        if status:
            props["status"] = status
        document = {
            **record.document,
            "properties": {k: v for k, v in props.items() if v is not None},
            "systemData": arm_rules.stamp_system_data(ctx, record.document["systemData"]),
        }
        self._store.transition(
            record.key,
            expect={"operationId": inp.operationId, **expect},
            set_values={
                "document": document,
                "etag": arm_rules.new_etag(),
                **({"status": status} if status else {}),
                **(set_values or {}),
            },
            remove=remove,
            audit=self._kernel.audit(ctx, JOBS, record.key, JOBS.write, reason, record.document, document),
            lease_until=lease_until,
            lease_kind=lease_kind,
            extra=extra,
            operation=operation,
        )

    def _canceled(self, record: WorkloadRecord) -> dict[str, Any] | None:
        if record.cancel_requested:
            return end("Canceled", f"Canceled by {record.extra.get('canceledBy', 'the submitter')}.", stop=True)
        return None

    def _lease(self, seconds: float) -> float:
        return self._clock() + seconds + self._settings.workflow_lease_grace_seconds

    # ----------------------------------------------------------------------------------------------- admit
    def admit(self, inp: JobInput) -> dict[str, Any]:
        """Could any node of the subscription ever hold the job? ``{"end": null}`` to place it; an end (Failed,
        inadmissible, with why) otherwise."""
        record = self._current(inp)
        if record is None:
            return {"end": end("Canceled", "The job is gone.")}
        if (canceled := self._canceled(record)) is not None:
            return {"end": canceled}
        if (reason := self._placement.inadmissible(record)) is not None:
            return {"end": end("Failed", f"Inadmissible: {reason}")}
        try:
            self._note(
                inp,
                record,
                reason="Admitted; looking for a node.",
                expect={"status": "Pending"},
                lease_until=self._lease(60),
            )
        except WorkloadChanged:
            return self.admit(inp) if self._current(inp) else {"end": end("Canceled", "The job is gone.")}
        return {"end": None}

    # ----------------------------------------------------------------------------------------------- place
    def place(self, inp: JobInput) -> dict[str, Any]:
        """Place the job on the best-fitting node now: ``{"end": null, "placed": bool}`` (not placed: it waits)."""
        record = self._current(inp)
        if record is None:
            return {"end": end("Canceled", "The job is gone."), "placed": False}
        if (canceled := self._canceled(record)) is not None:
            return {"end": canceled, "placed": False}
        if record.extra.get("status") != "Pending":
            return {"end": None, "placed": True}  # placed already (a retried step)
        placed = self._placement.place(workflow_context(inp.operationId, inp.correlationId), record)
        return {"end": None, "placed": placed is not None}

    def await_capacity(self, inp: JobInput, token: str) -> dict[str, Any]:
        """The job waits for capacity: record the task token placement resumes it with, enter the waiting queue
        (priority, then submission order) and say why it waits; then try once more (capacity may have freed in
        between). The state machine waits until the token is completed (placed, or canceled)."""
        record = self._current(inp)
        if record is None:
            self._workflows.complete_task(token, {"end": end("Canceled", "The job is gone."), "placed": False})
            return {}
        if (canceled := self._canceled(record)) is not None:
            self._workflows.complete_task(token, {"end": canceled, "placed": False})
            return {}
        if record.extra.get("status") != "Pending":
            self._workflows.complete_task(token, {"end": None, "placed": True})
            return {}
        reason = (
            f"Waiting for capacity: no node of the subscription has {record.gpus} free GPUs and {record.memory_gb} "
            "GiB of GPU memory now."
        )
        try:
            self._note(
                inp,
                record,
                reason=reason,
                expect={"status": "Pending", "cancelRequested": False},
                set_values={
                    "taskToken": token,
                    **pending_index_values(
                        record.key,
                        priority=int(record.extra.get("priority", 5)),
                        submitted_at=str(record.extra["submittedAt"]),
                    ),
                },
                lease_until=self._clock() + self._settings.job_placement_retry_seconds,
            )
        except WorkloadChanged:
            if self._current(inp) is None:
                return {}
            return self.await_capacity(inp, token)  # a cancel came, or it was placed: the checks above decide
        self._placement.dispatch(workflow_context(inp.operationId, inp.correlationId), inp.subscriptionId)
        return {}

    # ----------------------------------------------------------------------------------------------- submit
    def submit(self, inp: JobInput) -> dict[str, Any]:
        """Submit the job to the DGX Platform on its node (idempotency key = operation id); → Running."""
        record = self._current(inp)
        if record is None:
            return {"end": end("Canceled", "The job is gone.")}
        if (canceled := self._canceled(record)) is not None:
            return {"end": canceled}
        if record.extra.get("status") == "Running" and record.dgx_id:
            return {"end": None}
        node = self._store.get_resource(record.node_key)
        job = self.dgx.submit_job(
            idempotency_key=inp.operationId,
            name=record.document["id"],
            node_id=node.document["id"] if node else record.node_key.sk,
            gpus=record.gpus,
            memory_gb=record.memory_gb,
            workload=platform_workload(record),
            max_duration_seconds=int(record.extra.get("maxDurationSeconds", 0)),
        )
        started = float(int(self._clock()))  # whole seconds: what the meter bills from (billing/metering.py)
        # billing starts now: the job's meter is written with its Running state (services/usage.py)
        meter = meter_for(record, node, service="jobs", resource_type=JOBS.type_name, start=int(started), dgx_id=job.id)
        found = self._store.get_operation(inp.subscriptionId, inp.operationId)
        running = finished(found.body, "Running", iso(started)) if found is not None else None
        try:
            self._note(
                inp,
                record,
                reason=f"Running on the DGX Platform (job {job.id}).",
                expect={"status": "Scheduled", "cancelRequested": False},
                status="Running",
                set_values={
                    "dgxId": job.id,
                    "startedAt": iso(started),
                    "provisioningState": "Running",
                    "meterId": meter.allocation_id,
                },
                properties={"startedAt": iso(started), "provisioningState": "Running", "logsUrl": job.logs_url},
                lease_until=self._lease(0),
                extra=(self._store.meter_start_item(meter, due=int(started)),),
                operation=running,  # ARM: the operation is Running while the job runs, then ends with it
            )
        except WorkloadChanged:
            current = self._current(inp)
            if current is not None and current.cancel_requested:
                self.dgx.cancel_job(job.id)
                return {"end": self._canceled(current)}
            return {"end": end("Canceled", "The job is gone.", stop=True)}
        return {"end": None}

    # ----------------------------------------------------------------------------------------------- track
    def track(self, inp: JobInput, token: str) -> dict[str, Any]:
        """The job runs: record the task token the tracker (or a cancel) resumes it with, and when it is first due
        to be checked. The state machine waits until the token is completed with the job's end."""
        record = self._current(inp)
        if record is None:
            self._workflows.complete_task(token, {"end": end("Canceled", "The job is gone.", stop=True)})
            return {}
        if (canceled := self._canceled(record)) is not None:
            self._workflows.complete_task(token, {"end": canceled})
            return {}
        try:
            self._note(
                inp,
                record,
                reason=record.document["properties"].get("statusReason", "Running."),
                expect={"status": "Running", "cancelRequested": False},
                set_values={"taskToken": token, "trackChecks": 0},
                lease_until=self._clock() + self._settings.job_poll_interval_seconds,
                lease_kind=TRACK,
            )
        except WorkloadChanged:
            return self.track(inp, token)
        return {}

    # ----------------------------------------------------------------------------------------------- stop
    def stop(self, inp: JobInput, deadline: float | None) -> dict[str, Any]:
        """Stop the job on the DGX Platform (idempotent) and say whether it has stopped: ``{"stopped", "timedOut",
        "deadline", "platform"}`` (``deadline`` epoch seconds, set by the first call). ``platform`` is the end the
        platform recorded once the job stopped (:func:`platform_end`; None before, or when the platform never ran
        it): a job that had already ended on its own keeps that end, whatever asked for the stop."""
        deadline = deadline or self._clock() + inp.stopTimeoutSeconds
        record = self._store.get_workload(inp.key)
        dgx_id = record.dgx_id if record is not None and record.operation_id == inp.operationId else None
        if dgx_id is None:
            found = self.dgx.find_job(inp.operationId)  # a submit whose answer was lost
            dgx_id = found.id if found else None
        if dgx_id is None:
            return {"stopped": True, "timedOut": False, "deadline": deadline, "platform": None}
        job = self.dgx.cancel_job(dgx_id)
        stopped = job is None or job.ended
        return {
            "stopped": stopped,
            "timedOut": not stopped and self._clock() > deadline,
            "deadline": deadline,
            "platform": platform_end(job) if job is not None and job.ended else None,
        }

    # ----------------------------------------------------------------------------------------------- finish
    def finish(
        self, inp: JobInput, outcome: dict[str, Any], platform: dict[str, Any] | None = None, attempt: int = 0
    ) -> dict[str, Any]:
        """The one final transition (module docstring). ``outcome``: the end a step asked for (``status``,
        ``reason``, and ``endedAt`` epoch seconds when billing stops earlier than now, ``exitCode``); ``platform``:
        the end the DGX Platform recorded when the job was stopped there (:meth:`stop`), which decides where it
        differs (:func:`settle`). Returns ``{"status"}``."""
        record = self._current(inp)
        if record is None:
            self._end_operations(inp, None, "Canceled")
            return {"status": "Canceled"}
        status = str(record.extra.get("status"))
        if status in FINAL_JOB_STATUSES:
            return {"status": status}
        outcome = settle(outcome, platform)
        final = outcome["status"]
        started = record.extra.get("startedAt")
        now = self._clock()
        ended = float(int(outcome.get("endedAt") or now))
        if started:  # billing runs from the start to the end; an end the platform reported is never past now
            ended = max(ended, float(int(epoch(str(started)))))
            if outcome.get("onPlatform"):
                ended = min(ended, float(int(now)))
        gpu_seconds, billable, cost, currency = self._charges(record, ended)
        reason = outcome.get("reason") or final
        if outcome.get("exitCode") is not None:
            reason = f"{reason} (exit code {outcome['exitCode']})"
        ctx = workflow_context(inp.operationId, inp.correlationId)
        properties = {
            "status": final,
            "statusReason": reason,
            "provisioningState": final,
            "endedAt": iso(ended),
            "gpuSeconds": gpu_seconds,
            "billableGpuSeconds": billable if started else None,
            "cost": {"amount": format(cost, "f"), "currency": currency} if started else None,
        }
        document = {
            **record.document,
            "properties": {k: v for k, v in {**record.document["properties"], **properties}.items() if v is not None},
            "systemData": arm_rules.stamp_system_data(ctx, record.document["systemData"]),
        }
        error = {
            "Failed": {"code": "JobFailed", "message": reason},
            "Canceled": {"code": "JobCanceled", "message": reason},
        }.get(final)
        operations = self._operations(inp, record, final, error)
        try:
            self._store.transition(
                record.key,
                expect={
                    "operationId": inp.operationId,
                    "status": record.extra.get("status"),
                    "capacityReserved": record.capacity_reserved,
                    # a cancel accepted after the read above started an operation this write must end too
                    "cancelRequested": record.cancel_requested,
                },
                set_values={
                    "document": document,
                    "etag": arm_rules.new_etag(),
                    "status": final,
                    "provisioningState": final,
                    "endedAt": iso(ended),
                    "gpuSeconds": gpu_seconds,
                    "billableGpuSeconds": billable,
                    "cost": format(cost, "f"),
                    "capacityReserved": False,
                },
                remove=(
                    "taskToken",
                    "trackChecks",
                    *(("GSI4PK", "GSI4SK") if not record.extra.get("nodeOwner") else ()),
                ),
                operation=operations[0],
                more_operations=tuple(operations[1:]),
                release=Release(record.node_key, record.gpus, record.memory_gb) if record.capacity_reserved else None,
                # billing stops with the job: its meter ends in the same transaction (services/usage.py)
                extra=(
                    (
                        self._store.meter_end_item(
                            inp.subscriptionId, str(record.extra["meterId"]), end=int(ended), due=int(self._clock())
                        ),
                    )
                    if record.extra.get("meterId")
                    else ()
                ),
                audit=self._kernel.audit(
                    ctx,
                    JOBS,
                    record.key,
                    JOBS.write,
                    f"Job {final}: {reason}"
                    + (f"; released {record.gpus} GPUs and {record.memory_gb} GiB" if record.capacity_reserved else ""),
                    record.document,
                    document,
                ),
                lease_until=NO_LEASE,
            )
        except WorkloadChanged:
            if attempt >= 4:
                raise StoreBusy("the job kept changing while it was being finished") from None
            return self.finish(inp, outcome, platform, attempt + 1)  # re-read: a cancel or the tracker changed it
        if record.extra.get("drainNode"):
            group, _, name = str(record.extra["drainNode"]).partition("/")
            self._store.set_draining(ResourceKey(inp.subscriptionId, group, "sparkNodes", (name,)), None)
        if record.capacity_reserved:
            self._placement.dispatch(ctx, inp.subscriptionId)  # capacity freed: serve the waiting jobs
        return {"status": final}

    def _charges(self, record: WorkloadRecord, ended: float) -> tuple[int, int, Decimal, str]:
        """``(GPU-seconds, billable GPU-seconds, cost, currency)`` of the job's run up to ``ended`` under the terms it
        locked when it was placed — computed window by window exactly as its usage records are
        (billing/metering.py), so the job's cost is the sum of what the billing export bills for it. Nothing when it
        never started."""
        started = record.extra.get("startedAt")
        if not started or "billingTerms" not in record.extra:
            return 0, 0, Decimal(0), ""
        terms = locked_terms(record)
        start = int(epoch(str(started)))
        end = max(start, int(ended))
        charges = allocation_charges(terms, gpus=record.gpus, start=start, end=end, now=end)
        return (
            sum(c.gpu_seconds for c in charges),
            sum(c.billable_gpu_seconds for c in charges),
            sum((c.cost for c in charges), Decimal(0)),
            terms.currency,
        )

    def _operations(
        self, inp: JobInput, record: WorkloadRecord, final: str, error: dict[str, str] | None
    ) -> list[dict[str, Any]]:
        """The job's operation (ends with the job) and its cancel operation, if any (Succeeded when the job ended
        Canceled; Failed with the job's status otherwise)."""
        now = workflow_context(inp.operationId, inp.correlationId).now_iso()
        found = self._store.get_operation(inp.subscriptionId, inp.operationId)
        operations = [
            finished(found[0] if found else {"name": inp.operationId, "id": inp.operationId}, final, now, error)
        ]
        cancel_id = record.extra.get("cancelOperationId")
        if cancel_id:
            cancel = self._store.get_operation(inp.subscriptionId, str(cancel_id))
            if cancel is not None and cancel[0]["status"] not in FINAL_JOB_STATUSES:
                cancel_error = (
                    None
                    if final == "Canceled"
                    else {
                        "code": "JobAlreadyFinished",
                        "message": f"The job ended {final} before the cancel took effect.",
                    }
                )
                operations.append(
                    finished(cancel[0], "Succeeded" if final == "Canceled" else "Failed", now, cancel_error)
                )
        return operations

    def _end_operations(self, inp: JobInput, record: WorkloadRecord | None, status: str) -> None:
        found = self._store.get_operation(inp.subscriptionId, inp.operationId)
        if found is not None:
            self._store.finish_operation(
                inp.subscriptionId,
                finished(found[0], status, workflow_context(inp.operationId, inp.correlationId).now_iso()),
            )


class JobTracker:
    """The schedule that watches running jobs (every minute): for each job due for a check (its ``TRACK`` lease
    ran out) it asks the DGX Platform how the job is and either resumes the job's execution with its end — ended
    on the platform, or past ``maxDurationMinutes`` (billing stops at that moment) — or sets the next check,
    waiting twice as long as the last time, up to ``JOB_POLL_MAX_INTERVAL_SECONDS`` and never past the job's
    deadline. A job whose execution no longer waits is finished here."""

    def __init__(
        self,
        store: JobStore,
        workflow: JobWorkflow,
        workflows: WorkflowStarter,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ):
        self._store = store
        self._workflow = workflow
        self._workflows = workflows
        self._settings = settings
        self._clock = clock

    def run(self, *, now: float | None = None, limit: int | None = None) -> dict[str, int]:
        """One pass; returns counts: ``checked``, ``ended`` (resumed with an end), ``finished`` (ended here)."""
        now = self._clock() if now is None else now
        counts = {"checked": 0, "ended": 0, "finished": 0}
        for key in self._store.expired_leases(now, limit or self._settings.job_track_batch_size, TRACK):
            record = self._store.get_workload(key)
            if record is None or record.extra.get("status") != "Running" or (record.lease_until or 0) > now:
                continue
            counts["checked"] += 1
            outcome = self._check(record, now)
            if outcome is None:
                continue
            token = record.extra.get("taskToken")
            if token and self._workflows.complete_task(str(token), {"end": outcome}):
                counts["ended"] += 1
                # checked again after the stop's time, in case its execution cannot finish it
                recheck = now + self._settings.job_stop_timeout_seconds + self._settings.workflow_lease_grace_seconds
                self._store.renew_lease(key, recheck, expect={"etag": record.etag}, kind=TRACK)
                continue
            inp = JobInput(
                operationId=str(record.operation_id),
                subscriptionId=key.subscription_id,
                resourceGroup=key.resource_group,
                jobName=key.names[-1],
            )
            stopped = self._workflow.stop(inp, None) if outcome.get("stop") else None
            if stopped is not None and not stopped["stopped"]:
                self._store.renew_lease(
                    key, now + self._settings.job_poll_interval_seconds, expect={"etag": record.etag}, kind=TRACK
                )
                continue  # not confirmed stopped: the GPUs stay reserved until it is
            self._workflow.finish(inp, outcome, stopped["platform"] if stopped else None)
            counts["finished"] += 1
        return counts

    def _check(self, record: WorkloadRecord, now: float) -> dict[str, Any] | None:
        """The job's end if it has one now, else None (after setting its next check)."""
        if record.cancel_requested:
            return end("Canceled", f"Canceled by {record.extra.get('canceledBy', 'the submitter')}.", stop=True)
        started = epoch(str(record.extra["startedAt"]))
        limit = int(record.extra.get("maxDurationSeconds", 0))
        deadline = started + limit if limit else None
        try:
            job = self._workflow.dgx.get_job(str(record.dgx_id))
        except DgxNotFound:
            return end("Failed", "The DGX Platform no longer knows the job.")
        if job.ended:
            # billing stops when the job ended on the platform, not when the tracker noticed (finish bounds it)
            return platform_end(job)
        if deadline is not None and now >= deadline:
            return end(
                "Failed",
                f"The job exceeded its max duration of {limit // 60} minutes and was stopped.",
                stop=True,
                endedAt=deadline,
            )
        checks = int(record.extra.get("trackChecks", 0)) + 1
        wait = min(self._settings.job_poll_interval_seconds * 2**checks, self._settings.job_poll_max_interval_seconds)
        due = min(now + wait, deadline) if deadline is not None else now + wait
        self._store.renew_lease(
            record.key, due, expect={"etag": record.etag}, kind=TRACK, also_set={"trackChecks": checks}
        )
        logger.debug("Job still running", extra={"job": record.document["id"], "next_check": due})
        return None
