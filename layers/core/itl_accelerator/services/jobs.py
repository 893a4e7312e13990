"""sparkJobs service (API side): submit, read, list, cancel and delete jobs.

Rules (issue: sparkJobs; ARM_CONTRACT.md 1-18): a submission is a long-running operation that ends with the job
(202 with ``status_url`` for the seed's POST, 201 for PUT); the job lifecycle state machine admits, places, runs
and ends it (services/job_workflow.py). ``submittedBy`` is the token's subject. Consumers see, cancel and delete
only their own jobs (another user's job is 404, existence not leaked); suppliers see the jobs placed on their
nodes, read only; admins everything. Cancel is honoured in every non-final state and answers 202 with a
``Location``; cancel of a finished job is 409 naming its status, which stays as it was. Only a finished job can be
deleted (otherwise 409); its name can then be submitted again and runs afresh.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from itl_accelerator.arm import normalize_location
from itl_accelerator.auth import rbac
from itl_accelerator.errors import AnotherOperationInProgress, Conflict, PropertyChangeNotAllowed
from itl_accelerator.models.jobs import (
    ACTIVE_JOB_STATUSES,
    FINAL_JOB_STATUSES,
    SECRET_MASK,
    SparkJobWrite,
    masked_job_document,
    masked_workload,
    spec_fingerprint,
)
from itl_accelerator.observability import logger
from itl_accelerator.resources import JOBS
from itl_accelerator.services import arm_rules
from itl_accelerator.services.context import CallContext
from itl_accelerator.services.job_access import may_change, render_job, reveals_env, submitted_by, visible_to
from itl_accelerator.services.kernel import ResourceKernel, with_etag
from itl_accelerator.services.nodes import gpu_model_key
from itl_accelerator.services.operations import Accepted, new_operation
from itl_accelerator.settings import Settings
from itl_accelerator.store.codec import to_json
from itl_accelerator.store.errors import SubscriptionNotWritable, WorkloadChanged
from itl_accelerator.store.jobs import JobStore, job_index_values, node_owner_view, submitter_view
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.workloads import WorkloadRecord
from itl_accelerator.workflows import WorkflowStarter

#: Operations of jobs are addressed under this location when the job names none (ARM needs one in the path).
GLOBAL_LOCATION = "global"


def _with_stored_secrets(spec: dict[str, Any], existing: WorkloadRecord) -> dict[str, Any]:
    """``spec`` with every ``secretEnv`` value sent as the mask (a job echoed back from a GET) replaced by the value
    stored for that name, so an echoed job is recognised as the same job."""
    sent = spec["workload"].get("secretEnv") or {}
    if SECRET_MASK not in sent.values():
        return spec
    stored = json.loads(existing.extra.get("secretEnv") or "{}")
    kept = {name: stored.get(name, value) if value == SECRET_MASK else value for name, value in sent.items()}
    return {**spec, "workload": {**spec["workload"], "secretEnv": kept}}


def job_execution_input(
    settings: Settings, key: ResourceKey, operation_id: str, correlation_id: str, max_minutes: int
) -> dict[str, Any]:
    """The input of a job lifecycle execution (seconds for every time)."""
    return {
        "operationId": operation_id,
        "subscriptionId": key.subscription_id,
        "resourceGroup": key.resource_group,
        "jobName": key.names[-1],
        "correlationId": correlation_id,
        "pollIntervalSeconds": settings.job_poll_interval_seconds,
        "pendingTimeoutSeconds": settings.job_pending_timeout_seconds,
        "trackTimeoutSeconds": max_minutes * 60 + settings.job_track_margin_seconds,
        "stopTimeoutSeconds": settings.job_stop_timeout_seconds,
    }


class SparkJobService:
    """Job operations over the shared kernel; ``workflows`` starts executions and resumes waiting ones."""

    def __init__(self, kernel: ResourceKernel, workflows: WorkflowStarter, settings: Settings):
        self._kernel = kernel
        self._store: JobStore = kernel.store  # type: ignore[assignment]
        self._workflows = workflows
        self._settings = settings

    def key(self, subscription_id: str, resource_group: str, name: str) -> ResourceKey:
        """Validated key (400 on bad names)."""
        return self._kernel.key(JOBS, subscription_id, resource_group, name)

    # ----------------------------------------------------------------------------------------------- who sees what
    def _read(self, ctx: CallContext, key: ResourceKey, *actions: rbac.Operation) -> WorkloadRecord:
        """The job if the caller may act on it (services/job_access.py); 404 (as if missing) when it is another
        user's — a supplier reads the jobs on its nodes, never changes them."""
        self._kernel.require(ctx, JOBS, key, *(actions or (JOBS.read,)))
        record = self._store.get_workload(key)
        if record is None or not visible_to(ctx.principal, record):
            raise JOBS.not_found(key.names, key.resource_group)
        if actions and actions[0] != JOBS.read and not may_change(ctx.principal, record):
            raise JOBS.not_found(key.names, key.resource_group)
        return record

    # ----------------------------------------------------------------------------------------------- reads
    def get(self, ctx: CallContext, subscription_id: str, resource_group: str, name: str) -> dict[str, Any]:
        """The job; 404 when missing, outside the caller's scopes, or not the caller's to see."""
        return render_job(self._read(ctx, self.key(subscription_id, resource_group, name)), ctx.principal)

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
        if rbac.ROLE_ADMIN in principal.roles:
            view = submitter_view(subscription_id, submitted_by) if submitted_by is not None else None
        elif rbac.ROLE_CONSUMER in principal.roles:
            if submitted_by is not None and submitted_by != principal.subject:
                JOBS.validate_collection(subscription_id, resource_group)
                return [], None
            view = submitter_view(subscription_id, principal.subject)
        else:
            view = node_owner_view(subscription_id, principal.subject)
        items, token = self._kernel.list_page(
            ctx, JOBS, subscription_id, resource_group, top=top, skip_token=skip_token, view=view
        )
        if view is not None and submitted_by is not None and rbac.ROLE_ADMIN not in principal.roles:
            items = [i for i in items if i.document["properties"].get("submittedBy") == submitted_by]
        shown = []
        for item in items:
            owner = item.document["properties"].get("submittedBy")
            document = masked_job_document(item.document, reveal_env=reveals_env(principal, owner))
            shown.append(with_etag(document or item.document, item.etag))
        return shown, token

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
        ``PropertyChangeNotAllowed``: it has finished — delete it to submit again), 412."""
        key = self.key(subscription_id, resource_group, name)
        self._kernel.require(ctx, JOBS, key, JOBS.write)
        arm_rules.check_body_name(body.name, name)
        existing = self._store.get_workload(key)
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
                return None, render_job(existing, ctx.principal)
            if existing.extra.get("status") in ACTIVE_JOB_STATUSES:
                raise AnotherOperationInProgress(
                    f"The job '{name}' is {existing.extra.get('status')}; a different job of that name cannot be "
                    "submitted until it ends and is deleted."
                )
            raise PropertyChangeNotAllowed(
                f"The job '{name}' has finished ({existing.extra.get('status')}): delete it, then submit it again."
            )
        return self._accept(ctx, key, body, spec, fingerprint), {}

    def _accept(
        self, ctx: CallContext, key: ResourceKey, body: SparkJobWrite, spec: dict[str, Any], fingerprint: str
    ) -> Accepted:
        props = body.properties
        secrets = spec["workload"].get("secretEnv") or {}
        operation_id = str(uuid.uuid4())
        now = ctx.now_iso()
        location = body.location
        document: dict[str, Any] = {
            "id": JOBS.id(key.subscription_id, key.resource_group, key.names),
            "name": key.names[-1],
            "type": JOBS.type_name,
            **({"location": location} if location else {}),
            "tags": body.tags or {},
            "systemData": arm_rules.stamp_system_data(ctx, None),
            "properties": {
                "jobType": spec["jobType"],
                "workload": masked_workload(spec["workload"], reveal_env=True),  # secret values live apart
                "requestedGpus": props.requested_gpus,
                "requestedMemoryGb": props.requested_memory_gb,
                **({"gpuModel": props.gpu_model} if props.gpu_model else {}),
                "priority": props.priority,
                "maxDurationMinutes": props.max_duration_minutes,
                "status": "Pending",
                "statusReason": "Submitted; waiting for admission.",
                "submittedBy": ctx.principal.subject,
                "submittedAt": now,
                "gpuSeconds": 0,
                "provisioningState": "Accepted",
                "operationId": operation_id,
            },
        }
        record = WorkloadRecord(
            key=key,
            document=document,
            etag=arm_rules.new_etag(),
            state="Accepted",
            operation_id=operation_id,
            spec_hash=fingerprint,
            gpus=props.requested_gpus,
            memory_gb=props.requested_memory_gb,
            location=normalize_location(location) if location else "",
            lease_until=time.time() + self._settings.workflow_start_grace_seconds,
            extra={
                "status": "Pending",
                "priority": props.priority,
                "submittedBy": ctx.principal.subject,
                "submittedAt": now,
                "maxDurationSeconds": props.max_duration_minutes * 60,
                "gpuModelKey": gpu_model_key(props.gpu_model),
                **({"secretEnv": to_json(secrets)} if secrets else {}),
                **job_index_values(key, submitted_by=ctx.principal.subject),
            },
        )
        operation = new_operation(
            ctx,
            subscription_id=key.subscription_id,
            location=location or GLOBAL_LOCATION,
            operation_id=operation_id,
            resource_id=document["id"],
        )
        audit = self._kernel.audit(
            ctx,
            JOBS,
            key,
            JOBS.write,
            f"Submitted {spec['jobType']} job ({props.requested_gpus} GPUs, {props.requested_memory_gb} GiB)",
            None,
            document,
        )
        try:
            self._store.accept(
                record,
                replacing_etag=None,
                operation=operation,
                operation_kind="job",
                operation_owner=ctx.principal.subject,
                audit=audit,
            )
        except WorkloadChanged as exc:
            raise Conflict("Another request submitted a job of this name at the same time; retry.") from exc
        except SubscriptionNotWritable as exc:
            raise self._kernel.write_error(exc) from exc
        self._start(ctx, key, operation_id, props.max_duration_minutes)
        return Accepted(
            render_job(record, ctx.principal),
            operation_id,
            location or GLOBAL_LOCATION,
            self._settings.job_poll_interval_seconds,
            True,
        )

    def _start(self, ctx: CallContext, key: ResourceKey, operation_id: str, max_minutes: int) -> None:
        """Start the job's execution; a failure is logged (the reconciler starts it when its lease ends)."""
        try:
            self._workflows.start(
                self._settings.job_state_machine_arn,
                operation_id,
                job_execution_input(self._settings, key, operation_id, ctx.correlation_id, max_minutes),
            )
        except Exception:  # noqa: BLE001 - the job is stored and answered 202; the reconciler starts it
            logger.exception("Could not start the job workflow; the reconciler will", extra={"operation": operation_id})

    # ----------------------------------------------------------------------------------------------- cancel
    def cancel(self, ctx: CallContext, subscription_id: str, resource_group: str, name: str) -> Accepted:
        """Ask for the job to be canceled (202 + Location). The same cancel again → the same operation. 409 when
        it has already ended (its status named, and left as it was)."""
        key = self.key(subscription_id, resource_group, name)
        for _ in range(3):
            record = self._read(ctx, key, rbac.JOBS_CANCEL)
            status = record.extra.get("status")
            location = record.document.get("location") or GLOBAL_LOCATION
            if status in FINAL_JOB_STATUSES:
                raise Conflict(f"The job '{name}' has already ended: {status}. Nothing was changed.")
            if record.cancel_requested and record.extra.get("cancelOperationId"):
                return Accepted(render_job(record, ctx.principal), record.extra["cancelOperationId"], location, 2)
            operation_id = str(uuid.uuid4())
            operation = new_operation(
                ctx,
                subscription_id=subscription_id,
                location=location,
                operation_id=operation_id,
                resource_id=record.document["id"],
            )
            now = ctx.now_iso()
            document = {
                **record.document,
                "systemData": arm_rules.stamp_system_data(ctx, record.document["systemData"]),
                "properties": {
                    **record.document["properties"],
                    "cancelRequestedBy": ctx.principal.subject,
                    "cancelRequestedAt": now,
                    "statusReason": (
                        f"Cancel requested by {ctx.principal.subject} at {now}; "
                        + ("stopping it on the DGX Platform." if status == "Running" else "it will not run.")
                    ),
                },
            }
            etag = arm_rules.new_etag()
            try:
                self._store.transition(
                    key,
                    expect={"etag": record.etag, "status": ACTIVE_JOB_STATUSES},
                    set_values={
                        "document": document,
                        "etag": etag,
                        "cancelRequested": True,
                        "canceledBy": ctx.principal.subject,
                        "cancelOperationId": operation_id,
                    },
                    new_operation=(operation, "cancel", submitted_by(record) or ctx.principal.subject),
                    audit=self._kernel.audit(
                        ctx,
                        JOBS,
                        key,
                        rbac.JOBS_CANCEL,
                        f"Cancel requested by {ctx.principal.subject}",
                        record.document,
                        document,
                    ),
                )
            except WorkloadChanged:
                continue
            token = record.extra.get("taskToken")
            if token:  # waiting for capacity or running: resume its execution at once
                self._workflows.complete_task(
                    token,
                    {"end": {"status": "Canceled", "reason": f"Canceled by {ctx.principal.subject}.", "stop": True}},
                )
            record.document, record.etag = document, etag
            return Accepted(render_job(record, ctx.principal), operation_id, location, 2)
        raise AnotherOperationInProgress("The job kept changing while being canceled; retry the request.")

    # ----------------------------------------------------------------------------------------------- delete
    def delete(self, ctx: CallContext, subscription_id: str, resource_group: str, name: str) -> bool:
        """Delete a finished job (audited). False when there was none (ARM RPC: 204); 409 while it is active."""
        key = self.key(subscription_id, resource_group, name)
        self._kernel.require(ctx, JOBS, key, JOBS.delete)
        record = self._store.get_workload(key)
        if record is None or not may_change(ctx.principal, record):
            return False  # another user's job answers as a missing one: nothing to delete (ARM RPC: 204)
        status = record.extra.get("status")
        if status not in FINAL_JOB_STATUSES:
            raise Conflict(f"The job '{name}' is {status}: cancel it and wait for it to end before deleting it.")
        try:
            self._store.remove(
                key,
                expect={"etag": record.etag, "status": FINAL_JOB_STATUSES, "capacityReserved": False},
                audit=self._kernel.audit(ctx, JOBS, key, JOBS.delete, f"Deleted job ({status})", record.document, None),
            )
        except WorkloadChanged as exc:
            raise Conflict("The job changed while being deleted; retry the request.") from exc
        return True
