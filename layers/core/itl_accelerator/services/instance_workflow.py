"""The steps of the provision and deprovision state machines (statemachines/*.asl.json), one method per Task.

Every change a step makes is one transaction with its audit item (actor type ``SYSTEM``). Steps are safe to retry:
each transition is conditioned on the state it expects, DGX creates carry the operation id as idempotency key, and
capacity is released by the transaction that clears ``capacityReserved`` — so exactly once.
DGX failures surface as :class:`DgxTransientError` (retried by the state machine) or :class:`DgxPermanentError`
(caught → compensation).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from itl_accelerator.arm import SPARK_NODES
from itl_accelerator.auth import rbac
from itl_accelerator.auth.principal import Principal
from itl_accelerator.dgx.client import DgxPlatformClient
from itl_accelerator.dgx.errors import DgxNotFound
from itl_accelerator.observability import logger
from itl_accelerator.services import arm_rules
from itl_accelerator.services.audit_log import build_event
from itl_accelerator.services.context import CallContext
from itl_accelerator.services.instances import INSTANCES, INSTANCES_TYPE, instance_id
from itl_accelerator.services.operations import finished
from itl_accelerator.store.dynamodb import TransactionFailed
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.workloads import InstanceRecord, WorkloadStore

WORKFLOW_PRINCIPAL = Principal(
    subject="ITL.Accelerator/workflows", display_name="ITL Accelerator workflows", actor_type="Application"
)


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
        return ResourceKey(self.subscriptionId, self.resourceGroup, INSTANCES, (self.nodeName, self.instanceName))


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


class InstanceWorkflow:
    """Task implementations. ``dgx`` builds the DGX client (on first use); ``clock`` returns epoch seconds."""

    def __init__(
        self, store: WorkloadStore, dgx: Callable[[], DgxPlatformClient], clock: Callable[[], float] = time.time
    ):
        self._store = store
        self._dgx_factory = dgx
        self._dgx: DgxPlatformClient | None = None
        self._clock = clock

    @property
    def dgx(self) -> DgxPlatformClient:
        if self._dgx is None:
            self._dgx = self._dgx_factory()
        return self._dgx

    # ----------------------------------------------------------------------------------------------- helpers
    @staticmethod
    def _ctx(inp: WorkflowInput) -> CallContext:
        return CallContext(
            principal=WORKFLOW_PRINCIPAL,
            request_id=f"workflow-{inp.operationId}",
            correlation_id=inp.correlationId or inp.operationId,
            audit_actor_type="SYSTEM",
        )

    def _transition(
        self,
        inp: WorkflowInput,
        record: InstanceRecord,
        *,
        state: str,
        summary: str,
        action: rbac.Operation,
        condition: str,
        condition_values: dict[str, Any],
        extra_set: dict[str, Any] | None = None,
        properties: dict[str, Any] | None = None,
        operation_status: str | None = None,
        operation_id: str | None = None,
        error: dict[str, str] | None = None,
        release: bool = False,
        remove: tuple[str, ...] = (),
    ) -> None:
        """One transaction: instance to ``state`` (if ``condition``), optional operation update, optional capacity
        release, and the SYSTEM audit item. Raises :class:`TransactionFailed`."""
        ctx = self._ctx(inp)
        props = {**record.document["properties"], "provisioningState": state, **(properties or {})}
        props = {k: v for k, v in props.items() if v is not None}
        document = {
            **record.document,
            "properties": props,
            "systemData": arm_rules.stamp_system_data(ctx, record.document["systemData"]),
        }
        items = [
            self._store.instance_update(
                record.key,
                set_values={
                    "document": document,
                    "etag": arm_rules.new_etag(),
                    "provisioningState": state,
                    **(extra_set or {}),
                },
                remove=remove,
                condition=condition,
                condition_values=condition_values,
            ),
            self._store.audit_put(
                build_event(
                    ctx,
                    subscription_id=inp.subscriptionId,
                    action=action.name,
                    resource_id=instance_id(record.key),
                    resource_type=INSTANCES_TYPE,
                    resource_name=inp.instanceName,
                    change_summary=summary,
                    previous_state=record.document,
                    new_state=document,
                )
            ),
        ]
        if operation_status:
            items.append(self._operation_item(inp, operation_id or inp.operationId, operation_status, error))
        if release:
            items.append(
                self._store.node_release(
                    record.node_key, gpus=record.gpus, memory_gb=record.memory_gb, remove_child=False
                )
            )
        self._store.transact(items)

    def _operation_item(
        self, inp: WorkflowInput, operation_id: str, status: str, error: dict[str, str] | None
    ) -> dict[str, Any]:
        found = self._store.get_operation(inp.subscriptionId, operation_id)
        operation = found[0] if found else {"name": operation_id, "id": operation_id}
        return self._store.operation_update(
            inp.subscriptionId, finished(operation, status, self._ctx(inp).now_iso(), error)
        )

    def _finish_operation(
        self, inp: WorkflowInput, operation_id: str | None, status: str, error: dict[str, str] | None = None
    ) -> None:
        """Best effort, on its own: move an operation to a final status unless it already is final."""
        if not operation_id:
            return
        try:
            self._store.transact([self._operation_item(inp, operation_id, status, error)])
        except TransactionFailed:
            pass

    def _dgx_ids(self, record: InstanceRecord) -> list[str]:
        """Every DGX instance this resource may own: the one recorded and the one its create key made."""
        ids = [record.dgx_instance_id] if record.dgx_instance_id else []
        if record.operation_id:
            found = self.dgx.find_instance(record.operation_id)
            if found and found.id not in ids:
                ids.append(found.id)
        return ids

    # ----------------------------------------------------------------------------------------------- provision
    def request(self, inp: WorkflowInput) -> dict[str, Any]:
        """Ask the DGX Platform for the instance (idempotency key = operation id); → Provisioning.
        Returns ``{"canceled", "dgxInstanceId", "deadline"}`` (deadline: epoch seconds)."""
        record = self._store.get_instance(inp.key)
        deadline = self._clock() + inp.timeoutSeconds
        if record is None or record.operation_id != inp.operationId or record.state == "Deleting":
            return {"canceled": True, "dgxInstanceId": None, "deadline": deadline}
        if record.state == "Provisioning" and record.dgx_instance_id:
            return {"canceled": False, "dgxInstanceId": record.dgx_instance_id, "deadline": deadline}
        node = self._store.get_resource(record.node_key)
        node_id = node.document["id"] if node else f"{SPARK_NODES}/{inp.nodeName}"
        created = self.dgx.create_instance(
            idempotency_key=inp.operationId,
            name=instance_id(record.key),  # unique across tenants; readable on the platform's side
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
                condition="provisioningState = :accepted AND operationId = :op",
                condition_values={":accepted": "Accepted", ":op": inp.operationId},
                extra_set={"dgxInstanceId": created.id},
                operation_status="Running",
            )
        except TransactionFailed:
            current = self._store.get_instance(inp.key)
            if current is None or current.state == "Deleting" or current.operation_id != inp.operationId:
                # overtaken (deleted, or deleted and made again by a newer operation): what this operation made
                # on the DGX Platform belongs to nobody now
                self.dgx.delete_instance(created.id)
                return {"canceled": True, "dgxInstanceId": created.id, "deadline": deadline}
        return {"canceled": False, "dgxInstanceId": created.id, "deadline": deadline}

    def poll(self, inp: WorkflowInput, dgx_instance_id: str, deadline: float) -> dict[str, Any]:
        """``{"status": Running|Provisioning|Failed|TimedOut|Canceled, "endpoint", "error"}`` (always all three
        keys, null when not applicable: the state machine selects them by path)."""
        record = self._store.get_instance(inp.key)
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
        """→ Succeeded with ``properties.endpoint``. ``{"canceled": True}`` when a delete came first."""
        record = self._store.get_instance(inp.key)
        if record is None or record.state == "Deleting":
            return {"canceled": True}
        if record.state == "Succeeded":
            return {"canceled": False}
        try:
            self._transition(
                inp,
                record,
                state="Succeeded",
                action=rbac.INSTANCES_WRITE,
                summary=f"Instance ready at {endpoint}",
                properties={"endpoint": endpoint},
                condition="provisioningState = :provisioning AND dgxInstanceId = :dgx AND operationId = :op",
                condition_values={":provisioning": "Provisioning", ":dgx": dgx_instance_id, ":op": inp.operationId},
                operation_status="Succeeded",
            )
        except TransactionFailed:
            current = self._store.get_instance(inp.key)
            return {"canceled": current is None or current.state == "Deleting"}
        return {"canceled": False}

    def compensate(self, inp: WorkflowInput, error: dict[str, str]) -> dict[str, Any]:
        """Undo a failed provisioning: delete on DGX, release the capacity, → Failed with ``error``
        (``{"code", "message"}``). Returns ``{"outcome": Failed|Canceled|AlreadyDone}``."""
        record = self._store.get_instance(inp.key)
        if record is None or record.operation_id != inp.operationId:
            # not ours any more: remove only what this operation's create made, then end it Canceled
            self._delete_made_by(inp.operationId)
            self._finish_operation(inp, inp.operationId, "Canceled")
            return {"outcome": "Canceled"}
        if record.state == "Deleting":
            self._finish_operation(inp, inp.operationId, "Canceled")  # the deprovision workflow cleans up
            return {"outcome": "Canceled"}
        if not record.capacity_reserved or record.state not in ("Accepted", "Provisioning"):
            # e.g. CompleteInstance committed Succeeded and only its answer was lost: leave the live instance be
            return {"outcome": "AlreadyDone"}
        for dgx_id in self._dgx_ids(record):
            self.dgx.delete_instance(dgx_id)
        try:
            self._transition(
                inp,
                record,
                state="Failed",
                action=rbac.INSTANCES_WRITE,
                summary=f"Provisioning failed ({error['code']}); capacity released",
                properties={"error": error, "endpoint": None},
                condition="operationId = :op AND provisioningState IN (:accepted, :provisioning) AND capacityReserved = :yes",
                condition_values={
                    ":op": inp.operationId,
                    ":accepted": "Accepted",
                    ":provisioning": "Provisioning",
                    ":yes": True,
                },
                extra_set={"capacityReserved": False},
                remove=("dgxInstanceId",),
                operation_status="Failed",
                error=error,
                release=True,
            )
        except TransactionFailed:
            current = self._store.get_instance(inp.key)
            if current is not None and current.state == "Deleting":
                self._finish_operation(inp, inp.operationId, "Canceled")
                return {"outcome": "Canceled"}
            return {"outcome": "AlreadyDone"}
        return {"outcome": "Failed"}

    def cancel(self, inp: WorkflowInput) -> dict[str, Any]:
        """The provisioning was overtaken by a delete: its operation ends ``Canceled``. The deprovision workflow
        cleans up while the record still names this operation; once it does not, whatever this operation's create
        made on the DGX Platform is removed here."""
        record = self._store.get_instance(inp.key)
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
        """Ask the DGX Platform to delete every instance this resource owns. ``{"deadline"}``."""
        record = self._store.get_instance(inp.key)
        if record is not None:
            for dgx_id in self._dgx_ids(record):
                self.dgx.delete_instance(dgx_id)
        return {"deadline": self._clock() + inp.timeoutSeconds}

    def deprovision_poll(self, inp: WorkflowInput, deadline: float) -> dict[str, Any]:
        """``{"gone": bool, "timedOut": bool}``: gone once the DGX Platform holds none of its instances."""
        record = self._store.get_instance(inp.key)
        remaining = []
        if record is not None:
            for dgx_id in self._dgx_ids(record):
                try:
                    instance = self.dgx.get_instance(dgx_id)
                except DgxNotFound:
                    continue
                if instance.status != "Deleted":
                    remaining.append(dgx_id)
                    if instance.status != "Deleting":
                        self.dgx.delete_instance(dgx_id)
        return {"gone": not remaining, "timedOut": bool(remaining) and self._clock() > deadline}

    def deprovision_finish(self, inp: WorkflowInput) -> dict[str, Any]:
        """Remove the instance item, release what it still holds, end the delete operation — one transaction."""
        record = self._store.get_instance(inp.key)
        if record is None:
            self._finish_operation(inp, inp.operationId, "Succeeded")
            return {"outcome": "AlreadyDone"}
        ctx = self._ctx(inp)
        gpus, memory = (record.gpus, record.memory_gb) if record.capacity_reserved else (0, 0)
        try:
            self._store.transact(
                [
                    self._store.instance_delete(
                        record.key,
                        condition="provisioningState = :deleting AND deleteOperationId = :op AND capacityReserved = :held",
                        condition_values={
                            ":deleting": "Deleting",
                            ":op": inp.operationId,
                            ":held": record.capacity_reserved,
                        },
                    ),
                    self._store.node_release(record.node_key, gpus=gpus, memory_gb=memory, remove_child=True),
                    self._operation_item(inp, inp.operationId, "Succeeded", None),
                    self._store.audit_put(
                        build_event(
                            ctx,
                            subscription_id=inp.subscriptionId,
                            action=rbac.INSTANCES_DELETE.name,
                            resource_id=instance_id(record.key),
                            resource_type=INSTANCES_TYPE,
                            resource_name=inp.instanceName,
                            change_summary=f"Deleted instance; released {gpus} GPUs and {memory} GiB",
                            previous_state=record.document,
                            new_state=None,
                        )
                    ),
                ]
            )
        except TransactionFailed:
            logger.info("Instance already removed", extra={"operation": inp.operationId})
            return {"outcome": "AlreadyDone"}
        if record.cancel_requested:
            self._finish_operation(inp, record.operation_id, "Canceled")
        return {"outcome": "Deleted"}

    def deprovision_fail(self, inp: WorkflowInput, error: dict[str, str]) -> dict[str, Any]:
        """The DGX Platform did not delete the instance: → Failed (capacity stays reserved, as the GPUs may still
        be busy); the delete operation ends Failed. A later DELETE tries again."""
        record = self._store.get_instance(inp.key)
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
                condition="deleteOperationId = :op",
                condition_values={":op": inp.operationId},
                operation_status="Failed",
                error=error,
                operation_id=inp.operationId,
            )
        except TransactionFailed:
            return {"outcome": "AlreadyDone"}
        return {"outcome": "Failed"}
