"""The steps of the provision state machine (statemachines/provision_instance.asl.json), one method per Task, and
the instance watch's health check; the deprovision steps are deprovision_steps.py, what both share
instance_base.py. Inputs and outputs are services/workflows/io.py.

Every change a step makes is one transaction with its audit event (actor type ``SYSTEM``). Steps are safe to retry:
each transition is conditioned on the state it expects, DGX creates carry the operation id as idempotency key, and
capacity is released by the transaction that clears ``capacity_reserved`` — so exactly once, and only once the DGX
Platform has confirmed that nothing it runs for the instance is left (or that it never existed): a compensation
asks for the deletion, waits for it, then releases. While a workflow owns an instance it holds a lease; each step
that makes progress renews it and the final transition ends it, so the reconciler
(services/schedules/reconciler.py) can tell a stalled operation from a running one and finish it with these same
steps. DGX failures surface as :class:`DgxTransientError` (retried by the state machine) or
:class:`DgxPermanentError` (caught → compensation).

Between polls the provisioning waits on a task token (:meth:`InstanceSteps.await_ready`) for at most the poll
interval: a DGX callback (services/workflows/callbacks.py) completes it as soon as the platform says the instance
is ready or failed, and the poll that follows decides either way — a callback only says *look now*.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from itl_accelerator.auth import rbac
from itl_accelerator.dgx.errors import DgxNotFound
from itl_accelerator.dgx.models import DgxInstance
from itl_accelerator.domain.records import Instance, Lease
from itl_accelerator.domain.states import INSTANCE_IN_FLIGHT, OperationStatus, ProvisioningState
from itl_accelerator.domain.usage import MeterEnd
from itl_accelerator.platforms.router import platform_name
from itl_accelerator.repositories.errors import StoreBusy, WorkloadChanged
from itl_accelerator.repositories.protocols import Expect
from itl_accelerator.resources import INSTANCES
from itl_accelerator.services.common.metering import meter_for
from itl_accelerator.services.common.reattempt import reattempt
from itl_accelerator.services.workflows.instance_base import InstanceWorkflowSteps
from itl_accelerator.services.workflows.io import (
    WOKEN,
    CaughtError,
    CompensationResult,
    CompletionResult,
    ErrorBody,
    InstanceStepInput,
    OutcomeResult,
    PollResult,
    RemovalResult,
    RequestResult,
)

#: Reads-and-decisions of a compensation while a delete or the end changes the instance (``WorkloadChanged``),
#: before ``StoreBusy`` (which the state machine retries).
COMPENSATE_ATTEMPTS = 3


def error_from_catch(caught: CaughtError | None) -> ErrorBody:
    """ARM ``error`` from a Step Functions Catch result; internals stay out."""
    if caught is None:
        return ErrorBody.of("ProvisioningFailed", "Provisioning failed.")
    message = caught.message[:500]
    if caught.Error == "DgxPermanentError":
        return ErrorBody.of("DgxPlatformRefused", message or "The DGX Platform refused the request.")
    if caught.Error == "DgxTransientError":
        return ErrorBody.of("DgxPlatformUnavailable", "The DGX Platform stayed unavailable; retries ran out.")
    return ErrorBody.of("ProvisioningFailed", "Provisioning failed because of an internal error.")


def instance_lost(platform_id: str) -> ErrorBody:
    """``InstanceLost``: the platform of ``platform_id`` answers 404 for an instance it made (while provisioning, or
    once live): "The DGX Platform no longer knows the instance." or "Slurm cluster 'c1' no longer knows ..."."""
    where = platform_name(platform_id)
    return ErrorBody.of("InstanceLost", f"{where[0].upper()}{where[1:]} no longer knows the instance.")


def platform_failure(found: DgxInstance, default_code: str) -> ErrorBody | None:
    """The error of a DGX instance the platform reports ``Failed``, ``Deleting`` or ``Deleted`` (its own code and
    message, else ``default_code`` and the status); None for any other status (it still runs, or is getting ready)."""
    if found.status not in ("Failed", "Deleting", "Deleted"):
        return None
    return ErrorBody.of(
        found.error_code or default_code,
        found.error_message or f"The DGX Platform reports the instance {found.status}.",
    )


class InstanceSteps(InstanceWorkflowSteps):
    """The provisioning steps (``request`` ... ``release_capacity``) and the watch's ``health`` / ``lost``."""

    def request(self, inp: InstanceStepInput) -> RequestResult:
        """Ask the DGX Platform for the instance (idempotency key = operation id); → Provisioning."""
        instance = self._instances.get(inp.key)
        deadline = self._clock() + inp.timeoutSeconds
        if instance is None or instance.operation_id != inp.operationId or instance.state == ProvisioningState.DELETING:
            return RequestResult(canceled=True, dgxInstanceId=None, deadline=deadline)
        if instance.state == ProvisioningState.PROVISIONING and instance.dgx_id:
            return RequestResult(canceled=False, dgxInstanceId=instance.dgx_id, deadline=deadline)
        node = self._nodes.get(instance.node_key)
        created = self.platforms.for_node(node).create_instance(
            idempotency_key=inp.operationId,
            name=instance.arm_id,  # unique across tenants; readable on the platform's side
            node_id=node.arm_id if node else f"sparkNodes/{inp.nodeName}",
            model=instance.model,
            devices=instance.devices,
            memory_gb=instance.memory_gb,
            callback_url=self._callback_url,
            accelerator=node.accelerator.for_platform() if node else None,
            targets=[node.backend.target] if node else None,
            partition=(node.backend.partition or None) if node else None,
        )
        try:
            self._transition(
                inp,
                instance,
                state=ProvisioningState.PROVISIONING,
                action=rbac.INSTANCES_WRITE,
                summary=f"DGX Platform accepted instance {created.id}",
                expect=Expect(state=(ProvisioningState.ACCEPTED,), operation_id=inp.operationId),
                operation=self._operation(inp, inp.operationId, OperationStatus.RUNNING),
                dgx_id=created.id,
                lease=self._lease(inp),
            )
        except WorkloadChanged:
            current = self._instances.get(inp.key)
            if (
                current is None
                or current.state == ProvisioningState.DELETING
                or current.operation_id != inp.operationId
            ):
                # overtaken (deleted, or deleted and made again by a newer operation): what this operation made
                # on the DGX Platform belongs to nobody now
                self.platforms.delete_instance(created.id)
                return RequestResult(canceled=True, dgxInstanceId=created.id, deadline=deadline)
        return RequestResult(canceled=False, dgxInstanceId=created.id, deadline=deadline)

    def await_ready(self, inp: InstanceStepInput, token: str) -> None:
        """The provisioning waits (``.waitForTaskToken``, timed out after the poll interval) for the DGX Platform's
        callback: record ``token`` on the instance, where a callback finds it. A callback that came before this
        wait had a token left a ``ready_signal``: then the wait ends at once (and the signal is taken). The token
        is recorded before the signal is read, and a callback sets the signal before it reads the token, so one of
        the two always completes the wait (services/workflows/callbacks.py). Not this operation's any more, or no
        longer provisioning: the wait ends at once and the poll that follows says why."""
        instance = self._instances.get(inp.key)
        if (
            instance is None
            or instance.operation_id != inp.operationId
            or instance.state != ProvisioningState.PROVISIONING
            or not self._instances.note(
                instance, replace(instance, task_token=token), expect=Expect(operation_id=inp.operationId)
            )
        ):
            self._state_machines.complete_task(token, WOKEN)
            return
        current = self._instances.get(inp.key)
        if current is not None and current.ready_signal:
            self._instances.note(current, replace(current, ready_signal=False), expect=Expect(task_token=token))
            self._state_machines.complete_task(token, WOKEN)

    def poll(self, inp: InstanceStepInput, dgx_instance_id: str, deadline: float) -> PollResult:
        """How the DGX instance is (io.py :class:`PollResult`)."""
        instance = self._instances.get(inp.key)
        if instance is None or instance.state == ProvisioningState.DELETING or instance.operation_id != inp.operationId:
            return PollResult(status="Canceled")
        try:
            found = self.platforms.get_instance(dgx_instance_id)
        except DgxNotFound:
            return PollResult(status="Failed", error=instance_lost(dgx_instance_id))
        if found.status == "Running" and found.endpoint:
            return PollResult(status="Running", endpoint=found.endpoint)
        if (failure := platform_failure(found, "ProvisioningFailed")) is not None:
            return PollResult(status="Failed", error=failure)
        if self._clock() > deadline:
            return PollResult(
                status="TimedOut",
                error=ErrorBody.of(
                    "ProvisioningTimedOut",
                    f"The instance was not ready within {inp.timeoutSeconds} seconds.",
                ),
            )
        return PollResult(status="Provisioning")

    def complete(self, inp: InstanceStepInput, dgx_instance_id: str, endpoint: str) -> CompletionResult:
        """→ Succeeded with ``properties.endpoint``; the lease ends; billing starts (its meter is written with the
        Succeeded state). ``canceled`` when a delete came first."""
        instance = self._instances.get(inp.key)
        if instance is None or instance.state == ProvisioningState.DELETING:
            return CompletionResult(canceled=True)
        if instance.state == ProvisioningState.SUCCEEDED:
            return CompletionResult(canceled=False)
        ready = int(self._clock())
        meter = meter_for(
            instance,
            self._nodes.get(instance.node_key),
            service="instances",
            resource_type=INSTANCES.type_name,
            start=ready,
            dgx_id=dgx_instance_id,
        )
        try:
            self._transition(
                inp,
                instance,
                state=ProvisioningState.SUCCEEDED,
                action=rbac.INSTANCES_WRITE,
                summary=f"Instance ready at {endpoint}",
                properties={"endpoint": endpoint},
                expect=Expect(
                    state=(ProvisioningState.PROVISIONING,), dgx_id=dgx_instance_id, operation_id=inp.operationId
                ),
                operation=self._operation(inp, inp.operationId, OperationStatus.SUCCEEDED),
                meter_start=meter,
                lease=Lease.tracked(ready + inp.pollIntervalSeconds),  # the job tracker watches it from now on
                meter_id=meter.allocation_id,
                task_token=None,
                ready_signal=False,
            )
        except WorkloadChanged:
            current = self._instances.get(inp.key)
            return CompletionResult(canceled=current is None or current.state == ProvisioningState.DELETING)
        return CompletionResult(canceled=False)

    # ----------------------------------------------------------------------------------------------- watch
    def health(self, instance: Instance, read: dict[str, DgxInstance] | None = None) -> tuple[ErrorBody, bool] | None:
        """Whether the DGX Platform still runs the ``Succeeded`` ``instance`` (asked by the job tracker,
        services/schedules/job_tracker.py), as a batch ``read`` found it (absent from it: unknown to the platform;
        None: read it now): None while it does (or while nothing names it there), else the error that ends it and
        whether the platform holds nothing of it any more — ``InstanceLost`` when the platform does not know it
        (``True``), or the platform's own error when it reports it ``Failed``, ``Deleting`` or ``Deleted`` (``True``
        only for ``Deleted``). Raises :class:`DgxTransientError` (checked again later)."""
        if not instance.dgx_id:
            return None
        if read is not None:
            found = read.get(instance.dgx_id)
            if found is None:
                return instance_lost(instance.dgx_id), True
        else:
            try:
                found = self.platforms.get_instance(instance.dgx_id)
            except DgxNotFound:
                return instance_lost(instance.dgx_id), True
        failure = platform_failure(found, "InstanceLost")
        return None if failure is None else (failure, found.status == "Deleted")

    def lost(self, instance: Instance, error: ErrorBody, *, gone: bool) -> bool:
        """The DGX Platform no longer runs the ``Succeeded`` ``instance`` (:meth:`health`): → ``Failed`` with
        ``error``, its endpoint removed and its billing ended now — one transaction, conditioned on the instance
        being unchanged since it was read. Its GPUs are released in the same transaction when the platform holds
        nothing of it (``gone``); otherwise it keeps them with a lease that is already due, and the reconciler
        releases them once the platform confirms it gone (as after a deprovisioning that timed out), so capacity
        is never given back while the platform may still use it. Returns whether this call ended it (False: it
        changed meanwhile, e.g. a delete came first)."""
        now = int(self._clock())
        key = instance.key
        inp = InstanceStepInput(
            operationId=instance.operation_id or "",
            subscriptionId=key.subscription_id,
            resourceGroup=key.resource_group,
            nodeName=key.names[0],
            instanceName=key.names[1],
        )
        meter_end = MeterEnd(key.subscription_id, instance.meter_id, now, now) if instance.meter_id else None
        released = "capacity released" if gone else "capacity released once the DGX Platform confirms it gone"
        # gone: the GPUs come back now; else they stay held under a lease already due (the reconciler's)
        held: dict[str, Any] = (
            {"release": True, "capacity_reserved": False, "quota": None, "dgx_id": None, "lease": None}
            if gone
            else {"lease": Lease.owned(now)}
        )
        try:
            self._transition(
                inp,
                instance,
                state=ProvisioningState.FAILED,
                action=rbac.INSTANCES_WRITE,
                summary=f"The DGX Platform no longer runs the instance ({error.code}); billing ended, {released}",
                properties={"error": error.as_dict(), "endpoint": None},
                expect=Expect(state=(ProvisioningState.SUCCEEDED,), etag=instance.etag, capacity_reserved=True),
                meter_end=meter_end,
                **held,
            )
        except WorkloadChanged:
            return False
        if gone:
            self._released(inp)
        return True

    # ----------------------------------------------------------------------------------------------- compensation
    def compensate(self, inp: InstanceStepInput, error: ErrorBody) -> CompensationResult:
        """Begin undoing a failed provisioning: ask the DGX Platform to delete what it made and record the failure
        to report (``error``) with a lease; the GPUs stay reserved until :meth:`release_capacity`."""
        deadline = self._clock() + inp.timeoutSeconds
        # a delete or the end may have come first: read the instance again and decide again
        return reattempt(
            lambda: self._compensate_once(inp, error, deadline),
            on=WorkloadChanged,
            attempts=COMPENSATE_ATTEMPTS,
            exhausted=lambda: StoreBusy("the instance kept changing during compensation"),
        )

    def _compensate_once(self, inp: InstanceStepInput, error: ErrorBody, deadline: float) -> CompensationResult:
        """One read-decide-write of :meth:`compensate`. Raises ``WorkloadChanged`` when the instance changed since
        it was read (nothing was written)."""
        instance = self._instances.get(inp.key)
        if instance is None or instance.operation_id != inp.operationId:
            # not ours any more: remove only what this operation's create made, then end it Canceled
            self._delete_made_by(inp)
            self._finish_operation(inp, inp.operationId, OperationStatus.CANCELED)
            return CompensationResult(outcome="Canceled", deadline=deadline)
        if instance.state == ProvisioningState.DELETING:
            self._finish_operation(inp, inp.operationId, OperationStatus.CANCELED)  # deprovisioning cleans up
            return CompensationResult(outcome="Canceled", deadline=deadline)
        if not instance.capacity_reserved or instance.state not in INSTANCE_IN_FLIGHT:
            # e.g. Complete committed Succeeded and only its answer was lost: leave the live instance be
            return CompensationResult(outcome="AlreadyDone", deadline=deadline)
        for dgx_id in self._dgx_ids(instance):
            self.platforms.delete_instance(dgx_id)
        if instance.compensation_error is not None:
            return CompensationResult(outcome="Removing", deadline=deadline)
        self._instances.update(
            instance,
            replace(instance, compensation_error=error.as_dict(), lease=self._lease(inp)),
            self._kernel.audit(
                self._context(inp),
                INSTANCES,
                instance.key,
                rbac.INSTANCES_WRITE,
                f"Provisioning failed ({error.code}); removing it from the DGX Platform before its "
                "capacity is released",
                instance.document,
                instance.document,
            ),
            expect=Expect(operation_id=inp.operationId, state=(instance.state,), capacity_reserved=True),
        )
        return CompensationResult(outcome="Removing", deadline=deadline)

    def check_removal(self, inp: InstanceStepInput, deadline: float) -> RemovalResult:
        """Gone once the DGX Platform holds none of the instance's DGX instances; canceled when a delete took the
        instance over (its workflow cleans up)."""
        instance = self._instances.get(inp.key)
        if instance is None or instance.operation_id != inp.operationId or instance.state == ProvisioningState.DELETING:
            self._finish_operation(inp, inp.operationId, OperationStatus.CANCELED)
            return RemovalResult(gone=False, timedOut=False, canceled=True)
        remaining = self._remaining_on_dgx(instance)
        return RemovalResult(gone=not remaining, timedOut=bool(remaining) and self._clock() > deadline)

    def release_capacity(self, inp: InstanceStepInput) -> OutcomeResult:
        """The DGX Platform confirmed the instance gone: → Failed with the recorded error, capacity released, the
        operation Failed, the lease ended — one transaction, conditioned on the capacity still being held.
        Outcome ``Failed``, ``Canceled`` or ``AlreadyDone``."""
        instance = self._instances.get(inp.key)
        if instance is None or instance.operation_id != inp.operationId:
            return OutcomeResult(outcome="AlreadyDone")
        if instance.state == ProvisioningState.DELETING:
            self._finish_operation(inp, inp.operationId, OperationStatus.CANCELED)
            return OutcomeResult(outcome="Canceled")
        if not instance.capacity_reserved or instance.state not in INSTANCE_IN_FLIGHT:
            return OutcomeResult(outcome="AlreadyDone")
        error = ErrorBody.model_validate(
            instance.compensation_error or {"code": "ProvisioningFailed", "message": "Provisioning failed."}
        )
        try:
            self._transition(
                inp,
                instance,
                state=ProvisioningState.FAILED,
                action=rbac.INSTANCES_WRITE,
                summary=f"Provisioning failed ({error.code}); the DGX Platform confirmed removal, capacity released",
                properties={"error": error.as_dict(), "endpoint": None},
                expect=Expect(operation_id=inp.operationId, state=INSTANCE_IN_FLIGHT, capacity_reserved=True),
                operation=self._operation(inp, inp.operationId, OperationStatus.FAILED, error),
                release=True,
                capacity_reserved=False,
                quota=None,
                dgx_id=None,
                compensation_error=None,
                lease=None,
            )
        except WorkloadChanged:
            current = self._instances.get(inp.key)
            if current is not None and current.state == ProvisioningState.DELETING:
                self._finish_operation(inp, inp.operationId, OperationStatus.CANCELED)
                return OutcomeResult(outcome="Canceled")
            return OutcomeResult(outcome="AlreadyDone")
        self._released(inp)
        return OutcomeResult(outcome="Failed")

    def cancel(self, inp: InstanceStepInput) -> OutcomeResult:
        """The provisioning was overtaken by a delete: its operation ends ``Canceled``. The deprovision workflow
        cleans up while the instance still names this operation; once it does not, whatever this operation's create
        made on the DGX Platform is removed here."""
        instance = self._instances.get(inp.key)
        if instance is None or instance.operation_id != inp.operationId:
            self._delete_made_by(inp)
        self._finish_operation(inp, inp.operationId, OperationStatus.CANCELED)
        return OutcomeResult(outcome="Canceled")
