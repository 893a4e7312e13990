"""The steps of the deprovision state machine (statemachines/deprovision_instance.asl.json), one method per Task
(``Start``, ``Poll``, ``Finish``, ``Fail``), and the reconciler's release of a Failed instance's capacity once the
DGX Platform confirms it gone. Capacity goes back only in the transaction that removes the instance (or clears its
``capacity_reserved``), so exactly once; what the steps share with the provisioning ones is instance_base.py.
"""

from __future__ import annotations

from dataclasses import replace

from itl_accelerator.auth import rbac
from itl_accelerator.domain.records import Instance, Lease, Release
from itl_accelerator.domain.states import OperationKind, OperationStatus, ProvisioningState
from itl_accelerator.observability import logger
from itl_accelerator.repositories.errors import WorkloadChanged
from itl_accelerator.repositories.protocols import Effects, Expect
from itl_accelerator.resources import INSTANCES
from itl_accelerator.services.workflows.instance_base import InstanceWorkflowSteps
from itl_accelerator.services.workflows.io import (
    DeadlineResult,
    ErrorBody,
    InstanceStepInput,
    OutcomeResult,
    RemovalResult,
)


class DeprovisionSteps(InstanceWorkflowSteps):
    """The deprovisioning steps and :meth:`release_failed`."""

    def start(self, inp: InstanceStepInput) -> DeadlineResult:
        """Ask the DGX Platform to delete every instance this resource owns; renew the lease."""
        instance = self._instances.get(inp.key)
        if instance is not None:
            for dgx_id in self._dgx_ids(instance):
                self.platforms.delete_instance(dgx_id)
            if instance.state == ProvisioningState.DELETING and instance.delete_operation_id == inp.operationId:
                self._instances.note(
                    instance,
                    replace(instance, lease=self._lease(inp)),
                    expect=Expect(delete_operation_id=inp.operationId),
                )
        return DeadlineResult(deadline=self._clock() + inp.timeoutSeconds)

    def poll(self, inp: InstanceStepInput, deadline: float) -> RemovalResult:
        """Gone once the DGX Platform holds none of its instances."""
        instance = self._instances.get(inp.key)
        remaining = self._remaining_on_dgx(instance) if instance is not None else []
        return RemovalResult(gone=not remaining, timedOut=bool(remaining) and self._clock() > deadline)

    def finish(self, inp: InstanceStepInput) -> OutcomeResult:
        """Remove the instance, release what it still holds, end the delete operation — one transaction."""
        instance = self._instances.get(inp.key)
        if instance is None:
            self._finish_operation(inp, inp.operationId, OperationStatus.SUCCEEDED, OperationKind.DEPROVISION)
            return OutcomeResult(outcome="AlreadyDone")
        ctx = self._context(inp)
        devices, memory = (instance.devices, instance.memory_gb) if instance.capacity_reserved else (0, 0)
        try:
            self._instances.remove(
                instance,
                self._kernel.audit(
                    ctx,
                    INSTANCES,
                    instance.key,
                    rbac.INSTANCES_DELETE,
                    f"Deleted instance; released {devices} GPUs and {memory} GiB",
                    instance.document,
                    None,
                ),
                expect=Expect(
                    state=(ProvisioningState.DELETING,),
                    delete_operation_id=inp.operationId,
                    capacity_reserved=instance.capacity_reserved,
                ),
                effects=Effects(
                    operation=self._operation(
                        inp, inp.operationId, OperationStatus.SUCCEEDED, kind=OperationKind.DEPROVISION
                    ),
                    release=Release.of(instance, child=-1, all_held=instance.capacity_reserved),
                ),
            )
        except WorkloadChanged:
            logger.info("Instance already removed", extra={"operation": inp.operationId})
            return OutcomeResult(outcome="AlreadyDone")
        if instance.cancel_requested:
            self._finish_operation(inp, instance.operation_id, OperationStatus.CANCELED)
        if devices or memory:
            self._released(inp)
        return OutcomeResult(outcome="Deleted")

    def release_failed(self, inp: InstanceStepInput, instance: Instance) -> bool:
        """A Failed instance that still holds its GPUs (its deprovisioning timed out) and that the DGX Platform now
        confirms gone: release the capacity and end its lease; it stays Failed until it is deleted. Returns whether
        this call released it (False: someone else did, or it changed)."""
        try:
            self._transition(
                inp,
                instance,
                state=ProvisioningState.FAILED,
                action=rbac.INSTANCES_DELETE,
                summary="The DGX Platform confirmed the instance gone; capacity released",
                expect=Expect(state=(ProvisioningState.FAILED,), capacity_reserved=True, etag=instance.etag),
                release=True,
                capacity_reserved=False,
                quota=None,
                dgx_id=None,
                lease=None,
            )
        except WorkloadChanged:
            return False
        self._released(inp)
        return True

    def fail(self, inp: InstanceStepInput, error: ErrorBody) -> OutcomeResult:
        """The DGX Platform did not delete the instance in time: → Failed (capacity stays reserved, as the GPUs may
        still be busy); the delete operation ends Failed. A later DELETE tries again, and the reconciler releases
        the capacity once the DGX Platform confirms the instance gone (the instance keeps a lease for that)."""
        instance = self._instances.get(inp.key)
        if instance is None:
            return OutcomeResult(outcome="AlreadyDone")
        failure = ErrorBody.of("DeprovisioningFailed", error.message or "Deprovisioning failed.")
        try:
            self._transition(
                inp,
                instance,
                state=ProvisioningState.FAILED,
                action=rbac.INSTANCES_DELETE,
                summary="Deprovisioning failed",
                properties={"error": failure.as_dict()},
                expect=Expect(delete_operation_id=inp.operationId),
                operation=self._operation(
                    inp, inp.operationId, OperationStatus.FAILED, failure, kind=OperationKind.DEPROVISION
                ),
                lease=Lease.owned(self._clock() + self._grace),
            )
        except WorkloadChanged:
            return OutcomeResult(outcome="AlreadyDone")
        return OutcomeResult(outcome="Failed")
