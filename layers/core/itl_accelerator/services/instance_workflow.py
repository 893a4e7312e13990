"""The steps of the provision and deprovision state machines (statemachines/*.asl.json), one method per Task.

Every change a step makes is one transaction with its audit item (actor type ``SYSTEM``). Steps are safe to retry:
each transition is conditioned on the state it expects, DGX creates carry the operation id as idempotency key, and
capacity is released by the transaction that clears ``capacityReserved`` — so exactly once, and only once the DGX
Platform has confirmed that nothing it runs for the instance is left (or that it never existed): a compensation
asks for the deletion, waits for it, then releases. While a workflow owns an instance its item carries a lease;
each step that makes progress renews it and the final transition ends it, so the reconciler
(services/reconciler.py) can tell a stalled operation from a running one and finish it with these same steps.
DGX failures surface as :class:`DgxTransientError` (retried by the state machine) or :class:`DgxPermanentError`
(caught → compensation).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from itl_accelerator.auth import rbac
from itl_accelerator.auth.principal import Principal
from itl_accelerator.dgx.client import DgxPlatformClient
from itl_accelerator.dgx.errors import DgxNotFound
from itl_accelerator.observability import logger
from itl_accelerator.resources import INSTANCES
from itl_accelerator.services import arm_rules
from itl_accelerator.services.context import CallContext
from itl_accelerator.services.kernel import ResourceKernel
from itl_accelerator.services.operations import finished
from itl_accelerator.services.usage import meter_for
from itl_accelerator.store.errors import StoreBusy, WorkloadChanged
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.workloads import NO_LEASE, Release, WorkloadRecord

WORKFLOW_PRINCIPAL = Principal(
    subject="ITL.Accelerator/workflows", display_name="ITL Accelerator workflows", actor_type="Application"
)
IN_FLIGHT = ("Accepted", "Provisioning")


class WorkflowInput(BaseModel):
    """The execution input the API writes (and the state machine passes to every Task). Seconds for times."""

    model_config = ConfigDict(extra="allow")

    operationId: str
    subscriptionId: str
    resourceGroup: str
    nodeName: str
    instanceName: str
    correlationId: str = ""
    pollIntervalSeconds: int = 10
    timeoutSeconds: int = 900

    @property
    def key(self) -> ResourceKey:
        return ResourceKey(
            self.subscriptionId, self.resourceGroup, INSTANCES.segment, (self.nodeName, self.instanceName)
        )


def error_from_catch(caught: dict[str, Any] | None) -> dict[str, str]:
    """ARM ``error`` from a Step Functions Catch result (``{"Error", "Cause"}``); internals stay out."""
    if not caught:
        return {"code": "ProvisioningFailed", "message": "Provisioning failed."}
    name = str(caught.get("Error", "ProvisioningFailed"))
    try:
        cause = json.loads(caught.get("Cause") or "{}")
        message = str(cause.get("errorMessage", ""))[:500] if isinstance(cause, dict) else ""
    except ValueError:
        message = ""
    if name == "DgxPermanentError":
        return {"code": "DgxPlatformRefused", "message": message or "The DGX Platform refused the request."}
    if name == "DgxTransientError":
        return {"code": "DgxPlatformUnavailable", "message": "The DGX Platform stayed unavailable; retries ran out."}
    return {"code": "ProvisioningFailed", "message": "Provisioning failed because of an internal error."}


def _poll_result(status: str, *, endpoint: str | None = None, error: dict[str, str] | None = None) -> dict[str, Any]:
    return {"status": status, "endpoint": endpoint, "error": error}


def workflow_context(operation_id: str, correlation_id: str) -> CallContext:
    """The caller of changes made by workflows and the reconciler: audited as ``SYSTEM``."""
    return CallContext(
        principal=WORKFLOW_PRINCIPAL,
        request_id=f"workflow-{operation_id}",
        correlation_id=correlation_id or operation_id,
        audit_actor_type="SYSTEM",
    )


class InstanceWorkflow:
    """Task implementations. ``dgx`` is the DGX Platform client (the container makes it on its first call); ``clock`` returns epoch seconds;
    ``lease_grace_seconds`` is added to a step's own deadline for the lease it writes."""

    def __init__(
        self,
        kernel: ResourceKernel,
        dgx: DgxPlatformClient,
        *,
        lease_grace_seconds: int = 120,
        clock: Callable[[], float] = time.time,
    ):
        self._kernel = kernel
        self._store = kernel.store
        self.dgx = dgx
        self._grace = lease_grace_seconds
        self._clock = clock
        #: Told ``(context, subscription id)`` after a step gave GPUs back (placement serves the waiting jobs).
        self.on_release: Callable[[CallContext, str], Any] | None = None

    def _released(self, inp: WorkflowInput) -> None:
        if self.on_release is not None:
            try:
                self.on_release(workflow_context(inp.operationId, inp.correlationId), inp.subscriptionId)
            except Exception:  # noqa: BLE001 - the release is done; waiting jobs are also retried periodically
                logger.exception("Serving the waiting jobs after a release failed")

    # ----------------------------------------------------------------------------------------------- helpers
    def _lease(self, inp: WorkflowInput) -> float:
        """Epoch seconds by which the next step must have made progress: the step's timeout plus the grace."""
        return self._clock() + inp.timeoutSeconds + self._grace

    def _operation(
        self, inp: WorkflowInput, operation_id: str, status: str, error: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """The operation's status body moved to ``status`` (and ``error``)."""
        found = self._store.get_operation(inp.subscriptionId, operation_id)
        operation = found[0] if found else {"name": operation_id, "id": operation_id}
        now = workflow_context(inp.operationId, inp.correlationId).now_iso()
        return finished(operation, status, now, error)

    def _transition(
        self,
        inp: WorkflowInput,
        record: WorkloadRecord,
        *,
        state: str,
        summary: str,
        action: rbac.Operation,
        expect: dict[str, Any],
        extra_set: dict[str, Any] | None = None,
        properties: dict[str, Any] | None = None,
        operation_status: str | None = None,
        operation_id: str | None = None,
        error: dict[str, str] | None = None,
        release: bool = False,
        remove: tuple[str, ...] = (),
        lease_until: float | None = None,
        extra: tuple[dict[str, Any], ...] = (),
    ) -> None:
        """One transaction: instance to ``state`` (if ``expect`` holds), optional operation update, optional
        capacity release, lease, ``extra`` items (its meter) and the SYSTEM audit item. Raises
        :class:`WorkloadChanged`."""
        ctx = workflow_context(inp.operationId, inp.correlationId)
        props = {**record.document["properties"], "provisioningState": state, **(properties or {})}
        props = {k: v for k, v in props.items() if v is not None}
        document = {
            **record.document,
            "properties": props,
            "systemData": arm_rules.stamp_system_data(ctx, record.document["systemData"]),
        }
        self._store.transition(
            record.key,
            expect=expect,
            set_values={
                "document": document,
                "etag": arm_rules.new_etag(),
                "provisioningState": state,
                **(extra_set or {}),
            },
            remove=remove,
            audit=self._kernel.audit(ctx, INSTANCES, record.key, action, summary, record.document, document),
            operation=(
                self._operation(inp, operation_id or inp.operationId, operation_status, error)
                if operation_status
                else None
            ),
            release=Release(record.node_key, record.gpus, record.memory_gb) if release else None,
            lease_until=lease_until,
            extra=extra,
        )

    def _finish_operation(
        self, inp: WorkflowInput, operation_id: str | None, status: str, error: dict[str, str] | None = None
    ) -> None:
        """Best effort, on its own: move an operation to a final status unless it already is final."""
        if operation_id:
            self._store.finish_operation(inp.subscriptionId, self._operation(inp, operation_id, status, error))

    def _dgx_ids(self, record: WorkloadRecord) -> list[str]:
        """Every DGX instance this resource may own: the one recorded and the one its create key made."""
        ids = [record.dgx_id] if record.dgx_id else []
        if record.operation_id:
            found = self.dgx.find_instance(record.operation_id)
            if found and found.id not in ids:
                ids.append(found.id)
        return ids

    def _remaining_on_dgx(self, record: WorkloadRecord) -> list[str]:
        """The DGX instances of ``record`` that still exist (asking again to delete any not yet being deleted).
        Empty once the DGX Platform confirms that none is left (404 or ``Deleted``)."""
        remaining = []
        for dgx_id in self._dgx_ids(record):
            try:
                instance = self.dgx.get_instance(dgx_id)
            except DgxNotFound:
                continue
            if instance.status != "Deleted":
                remaining.append(dgx_id)
                if instance.status != "Deleting":
                    self.dgx.delete_instance(dgx_id)
        return remaining

    # ----------------------------------------------------------------------------------------------- provision
    def request(self, inp: WorkflowInput) -> dict[str, Any]:
        """Ask the DGX Platform for the instance (idempotency key = operation id); → Provisioning.
        Returns ``{"canceled", "dgxInstanceId", "deadline"}`` (deadline: epoch seconds)."""
        record = self._store.get_workload(inp.key)
        deadline = self._clock() + inp.timeoutSeconds
        if record is None or record.operation_id != inp.operationId or record.state == "Deleting":
            return {"canceled": True, "dgxInstanceId": None, "deadline": deadline}
        if record.state == "Provisioning" and record.dgx_id:
            return {"canceled": False, "dgxInstanceId": record.dgx_id, "deadline": deadline}
        node = self._store.get_resource(record.node_key)
        node_id = node.document["id"] if node else f"sparkNodes/{inp.nodeName}"
        created = self.dgx.create_instance(
            idempotency_key=inp.operationId,
            name=record.document["id"],  # unique across tenants; readable on the platform's side
            node_id=node_id,
            model=record.document["properties"]["model"],
            gpus=record.gpus,
            memory_gb=record.memory_gb,
        )
        try:
            self._transition(
                inp,
                record,
                state="Provisioning",
                action=rbac.INSTANCES_WRITE,
                summary=f"DGX Platform accepted instance {created.id}",
                expect={"provisioningState": "Accepted", "operationId": inp.operationId},
                extra_set={"dgxId": created.id},
                operation_status="Running",
                lease_until=self._lease(inp),
            )
        except WorkloadChanged:
            current = self._store.get_workload(inp.key)
            if current is None or current.state == "Deleting" or current.operation_id != inp.operationId:
                # overtaken (deleted, or deleted and made again by a newer operation): what this operation made
                # on the DGX Platform belongs to nobody now
                self.dgx.delete_instance(created.id)
                return {"canceled": True, "dgxInstanceId": created.id, "deadline": deadline}
        return {"canceled": False, "dgxInstanceId": created.id, "deadline": deadline}

    def poll(self, inp: WorkflowInput, dgx_instance_id: str, deadline: float) -> dict[str, Any]:
        """``{"status": Running|Provisioning|Failed|TimedOut|Canceled, "endpoint", "error"}`` (always all three
        keys, null when not applicable: the state machine selects them by path)."""
        record = self._store.get_workload(inp.key)
        if record is None or record.state == "Deleting" or record.operation_id != inp.operationId:
            return _poll_result("Canceled")
        try:
            instance = self.dgx.get_instance(dgx_instance_id)
        except DgxNotFound:
            return _poll_result(
                "Failed", error={"code": "InstanceLost", "message": "The DGX Platform no longer knows the instance."}
            )
        if instance.status == "Running" and instance.endpoint:
            return _poll_result("Running", endpoint=instance.endpoint)
        if instance.status in ("Failed", "Deleting", "Deleted"):
            return _poll_result(
                "Failed",
                error={
                    "code": instance.error_code or "ProvisioningFailed",
                    "message": instance.error_message or f"The DGX Platform reports the instance {instance.status}.",
                },
            )
        if self._clock() > deadline:
            return _poll_result(
                "TimedOut",
                error={
                    "code": "ProvisioningTimedOut",
                    "message": f"The instance was not ready within {inp.timeoutSeconds} seconds.",
                },
            )
        return _poll_result("Provisioning")

    def complete(self, inp: WorkflowInput, dgx_instance_id: str, endpoint: str) -> dict[str, Any]:
        """→ Succeeded with ``properties.endpoint``; the lease ends. ``{"canceled": True}`` when a delete came
        first."""
        record = self._store.get_workload(inp.key)
        if record is None or record.state == "Deleting":
            return {"canceled": True}
        if record.state == "Succeeded":
            return {"canceled": False}
        # billing starts now: the instance's meter is written with its Succeeded state (services/usage.py)
        ready = int(workflow_context(inp.operationId, inp.correlationId).clock().timestamp())
        meter = meter_for(
            record,
            self._store.get_resource(record.node_key),
            service="instances",
            resource_type=INSTANCES.type_name,
            start=ready,
            dgx_id=dgx_instance_id,
        )
        try:
            self._transition(
                inp,
                record,
                state="Succeeded",
                action=rbac.INSTANCES_WRITE,
                summary=f"Instance ready at {endpoint}",
                properties={"endpoint": endpoint},
                expect={"provisioningState": "Provisioning", "dgxId": dgx_instance_id, "operationId": inp.operationId},
                operation_status="Succeeded",
                lease_until=NO_LEASE,
                extra_set={"meterId": meter.allocation_id},
                extra=(self._store.meter_start_item(meter, due=ready),),
            )
        except WorkloadChanged:
            current = self._store.get_workload(inp.key)
            return {"canceled": current is None or current.state == "Deleting"}
        return {"canceled": False}

    # ----------------------------------------------------------------------------------------------- compensation
    def compensate(self, inp: WorkflowInput, error: dict[str, str]) -> dict[str, Any]:
        """Begin undoing a failed provisioning: ask the DGX Platform to delete what it made and record the failure
        to report (``error``: ``{"code", "message"}``) with a lease; the GPUs stay reserved until
        :meth:`release_after_removal`. Returns ``{"outcome": Removing|Canceled|AlreadyDone, "deadline"}``."""
        deadline = self._clock() + inp.timeoutSeconds
        for _ in range(3):
            record = self._store.get_workload(inp.key)
            if record is None or record.operation_id != inp.operationId:
                # not ours any more: remove only what this operation's create made, then end it Canceled
                self._delete_made_by(inp.operationId)
                self._finish_operation(inp, inp.operationId, "Canceled")
                return {"outcome": "Canceled", "deadline": deadline}
            if record.state == "Deleting":
                self._finish_operation(inp, inp.operationId, "Canceled")  # the deprovision workflow cleans up
                return {"outcome": "Canceled", "deadline": deadline}
            if not record.capacity_reserved or record.state not in IN_FLIGHT:
                # e.g. CompleteInstance committed Succeeded and only its answer was lost: leave the live instance be
                return {"outcome": "AlreadyDone", "deadline": deadline}
            for dgx_id in self._dgx_ids(record):
                self.dgx.delete_instance(dgx_id)
            if record.extra.get("compensationError") is not None:
                return {"outcome": "Removing", "deadline": deadline}
            try:
                self._store.transition(
                    record.key,
                    expect={
                        "operationId": inp.operationId,
                        "provisioningState": record.state,
                        "capacityReserved": True,
                    },
                    set_values={"compensationError": json.dumps(error)},
                    audit=self._kernel.audit(
                        workflow_context(inp.operationId, inp.correlationId),
                        INSTANCES,
                        record.key,
                        rbac.INSTANCES_WRITE,
                        f"Provisioning failed ({error['code']}); removing it from the DGX Platform before its "
                        "capacity is released",
                        record.document,
                        record.document,
                    ),
                    lease_until=self._lease(inp),
                )
            except WorkloadChanged:
                continue  # re-read: a delete or the end may have come first
            return {"outcome": "Removing", "deadline": deadline}
        raise StoreBusy("the instance kept changing during compensation")

    def removal_status(self, inp: WorkflowInput, deadline: float) -> dict[str, Any]:
        """``{"gone", "timedOut", "canceled"}`` of a compensation: gone once the DGX Platform holds none of the
        instance's DGX instances; canceled when a delete took the instance over (its workflow cleans up)."""
        record = self._store.get_workload(inp.key)
        if record is None or record.operation_id != inp.operationId or record.state == "Deleting":
            self._finish_operation(inp, inp.operationId, "Canceled")
            return {"gone": False, "timedOut": False, "canceled": True}
        remaining = self._remaining_on_dgx(record)
        return {"gone": not remaining, "timedOut": bool(remaining) and self._clock() > deadline, "canceled": False}

    def release_after_removal(self, inp: WorkflowInput) -> dict[str, Any]:
        """The DGX Platform confirmed the instance gone: → Failed with the recorded error, capacity released, the
        operation Failed, the lease ended — one transaction, conditioned on the capacity still being held.
        ``{"outcome": Failed|Canceled|AlreadyDone}``."""
        record = self._store.get_workload(inp.key)
        if record is None or record.operation_id != inp.operationId:
            return {"outcome": "AlreadyDone"}
        if record.state == "Deleting":
            self._finish_operation(inp, inp.operationId, "Canceled")
            return {"outcome": "Canceled"}
        if not record.capacity_reserved or record.state not in IN_FLIGHT:
            return {"outcome": "AlreadyDone"}
        error = json.loads(record.extra.get("compensationError") or "null") or {
            "code": "ProvisioningFailed",
            "message": "Provisioning failed.",
        }
        try:
            self._transition(
                inp,
                record,
                state="Failed",
                action=rbac.INSTANCES_WRITE,
                summary=f"Provisioning failed ({error['code']}); the DGX Platform confirmed removal, capacity released",
                properties={"error": error, "endpoint": None},
                expect={
                    "operationId": inp.operationId,
                    "provisioningState": IN_FLIGHT,
                    "capacityReserved": True,
                },
                extra_set={"capacityReserved": False},
                remove=("dgxId", "compensationError"),
                operation_status="Failed",
                error=error,
                release=True,
                lease_until=NO_LEASE,
            )
        except WorkloadChanged:
            current = self._store.get_workload(inp.key)
            if current is not None and current.state == "Deleting":
                self._finish_operation(inp, inp.operationId, "Canceled")
                return {"outcome": "Canceled"}
            return {"outcome": "AlreadyDone"}
        self._released(inp)
        return {"outcome": "Failed"}

    def cancel(self, inp: WorkflowInput) -> dict[str, Any]:
        """The provisioning was overtaken by a delete: its operation ends ``Canceled``. The deprovision workflow
        cleans up while the record still names this operation; once it does not, whatever this operation's create
        made on the DGX Platform is removed here."""
        record = self._store.get_workload(inp.key)
        if record is None or record.operation_id != inp.operationId:
            self._delete_made_by(inp.operationId)
        self._finish_operation(inp, inp.operationId, "Canceled")
        return {"outcome": "Canceled"}

    def _delete_made_by(self, operation_id: str) -> None:
        """Delete the DGX instance a create with this operation id (idempotency key) made, if any."""
        made = self.dgx.find_instance(operation_id)
        if made is not None:
            self.dgx.delete_instance(made.id)

    # ----------------------------------------------------------------------------------------------- deprovision
    def deprovision_start(self, inp: WorkflowInput) -> dict[str, Any]:
        """Ask the DGX Platform to delete every instance this resource owns; renew the lease. ``{"deadline"}``."""
        record = self._store.get_workload(inp.key)
        if record is not None:
            for dgx_id in self._dgx_ids(record):
                self.dgx.delete_instance(dgx_id)
            if record.state == "Deleting" and record.delete_operation_id == inp.operationId:
                self._store.renew_lease(record.key, self._lease(inp), expect={"deleteOperationId": inp.operationId})
        return {"deadline": self._clock() + inp.timeoutSeconds}

    def deprovision_poll(self, inp: WorkflowInput, deadline: float) -> dict[str, Any]:
        """``{"gone": bool, "timedOut": bool}``: gone once the DGX Platform holds none of its instances."""
        record = self._store.get_workload(inp.key)
        remaining = self._remaining_on_dgx(record) if record is not None else []
        return {"gone": not remaining, "timedOut": bool(remaining) and self._clock() > deadline}

    def deprovision_finish(self, inp: WorkflowInput) -> dict[str, Any]:
        """Remove the instance item, release what it still holds, end the delete operation — one transaction."""
        record = self._store.get_workload(inp.key)
        if record is None:
            self._finish_operation(inp, inp.operationId, "Succeeded")
            return {"outcome": "AlreadyDone"}
        ctx = workflow_context(inp.operationId, inp.correlationId)
        gpus, memory = (record.gpus, record.memory_gb) if record.capacity_reserved else (0, 0)
        try:
            self._store.remove(
                record.key,
                expect={
                    "provisioningState": "Deleting",
                    "deleteOperationId": inp.operationId,
                    "capacityReserved": record.capacity_reserved,
                },
                audit=self._kernel.audit(
                    ctx,
                    INSTANCES,
                    record.key,
                    rbac.INSTANCES_DELETE,
                    f"Deleted instance; released {gpus} GPUs and {memory} GiB",
                    record.document,
                    None,
                ),
                operation=self._operation(inp, inp.operationId, "Succeeded"),
                release=Release(record.node_key, gpus, memory, child=-1),
            )
        except WorkloadChanged:
            logger.info("Instance already removed", extra={"operation": inp.operationId})
            return {"outcome": "AlreadyDone"}
        if record.cancel_requested:
            self._finish_operation(inp, record.operation_id, "Canceled")
        if gpus or memory:
            self._released(inp)
        return {"outcome": "Deleted"}

    def release_failed(self, inp: WorkflowInput, record: WorkloadRecord) -> bool:
        """A Failed instance that still holds its GPUs (its deprovisioning timed out) and that the DGX Platform now
        confirms gone: release the capacity and end its lease; it stays Failed until it is deleted. Returns whether
        this call released it (False: someone else did, or it changed)."""
        try:
            self._transition(
                inp,
                record,
                state="Failed",
                action=rbac.INSTANCES_DELETE,
                summary="The DGX Platform confirmed the instance gone; capacity released",
                expect={"provisioningState": "Failed", "capacityReserved": True, "etag": record.etag},
                extra_set={"capacityReserved": False},
                remove=("dgxId",),
                release=True,
                lease_until=NO_LEASE,
            )
        except WorkloadChanged:
            return False
        self._released(inp)
        return True

    def deprovision_fail(self, inp: WorkflowInput, error: dict[str, str]) -> dict[str, Any]:
        """The DGX Platform did not delete the instance in time: → Failed (capacity stays reserved, as the GPUs may
        still be busy); the delete operation ends Failed. A later DELETE tries again, and the reconciler releases
        the capacity once the DGX Platform confirms the instance gone (the instance keeps a lease for that)."""
        record = self._store.get_workload(inp.key)
        if record is None:
            return {"outcome": "AlreadyDone"}
        error = {"code": "DeprovisioningFailed", "message": error.get("message", "Deprovisioning failed.")}
        try:
            self._transition(
                inp,
                record,
                state="Failed",
                action=rbac.INSTANCES_DELETE,
                summary="Deprovisioning failed",
                properties={"error": error},
                expect={"deleteOperationId": inp.operationId},
                operation_status="Failed",
                error=error,
                operation_id=inp.operationId,
                lease_until=self._clock() + self._grace,
            )
        except WorkloadChanged:
            return {"outcome": "AlreadyDone"}
        return {"outcome": "Failed"}
