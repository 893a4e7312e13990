"""sparkOllamaInstances service (API side): accept provisioning and deprovisioning as long-running operations.

Rules: ARM_CONTRACT.md 11-18 and DESIGN.md capacity: accepting a create reserves GPUs and GPU memory on the node
(conditional update) in the same transaction as the instance item, its operation and its audit item; a request that
cannot fit → 409 ``InsufficientCapacity`` with what is free; a node that is not ``Available`` → 409; a write while an
operation runs → 409 ``AnotherOperationInProgress``; an identical retry of a create → the same operation.
The work itself is done by the provision/deprovision state machines (services/instance_workflow.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.arm import (
    SPARK_NODES,
    SPARK_NODES_TYPE,
    resource_id,
    validate_resource_group,
    validate_resource_name,
    validate_subscription_id,
)
from itl_accelerator.auth import rbac
from itl_accelerator.errors import (
    AnotherOperationInProgress,
    ArmError,
    Conflict,
    InvalidParameter,
    ResourceNotFound,
)
from itl_accelerator.models.instances import SparkOllamaInstanceWrite
from itl_accelerator.services import arm_rules
from itl_accelerator.services.access import Access
from itl_accelerator.services.audit_log import build_event
from itl_accelerator.services.context import CallContext
from itl_accelerator.services.nodes import subscription_conflict
from itl_accelerator.services.operations import FINAL_STATUSES, new_operation
from itl_accelerator.settings import Settings
from itl_accelerator.store.dynamodb import (
    InvalidSkipToken,
    SubscriptionNotWritable,
    TransactionFailed,
)
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.workloads import InstanceRecord, WorkloadStore
from itl_accelerator.workflows import WorkflowStarter

INSTANCES = "sparkOllamaInstances"
INSTANCES_TYPE = f"{PROVIDER_NAMESPACE}/{SPARK_NODES}/{INSTANCES}"
IN_FLIGHT = ("Accepted", "Provisioning")


class InsufficientCapacity(Conflict):
    """409 ``InsufficientCapacity``: the node cannot hold the request; the message says what is free."""

    code = "InsufficientCapacity"


class ParentResourceNotFound(ResourceNotFound):
    """404 ``ParentResourceNotFound``: the node named in the path does not exist (or is outside the scopes)."""

    code = "ParentResourceNotFound"


@dataclass
class Accepted:
    """What an accepted long-running request returns: the resource, the operation id, its location, the
    Retry-After hint (seconds), and whether the resource was created by this request (ARM: PUT 201) rather than
    existing already (an identical retry, or the re-provisioning of a Failed instance: PUT 200)."""

    resource: dict[str, Any]
    operation_id: str
    location: str
    retry_after: int
    created: bool = False


def key_of_node(subscription_id: str, resource_group: str, node: str) -> ResourceKey:
    """Key of a node (the parent of instances)."""
    return ResourceKey(subscription_id, resource_group, SPARK_NODES, (node,))


def instance_id(key: ResourceKey) -> str:
    """ARM id of an instance."""
    return resource_id(key.subscription_id, key.resource_group, (SPARK_NODES, key.names[0]), (INSTANCES, key.names[1]))


def render(record: InstanceRecord) -> dict[str, Any]:
    """The instance as returned: stored envelope plus ``etag``."""
    return {**record.document, "etag": record.etag}


def _free(counters: dict[str, Any]) -> tuple[int, int]:
    """Free GPUs and free GPU memory (GiB) from a node's capacity counters."""
    c = {k: int(counters.get(k, 0)) for k in ("gpuTotal", "gpuAllocated", "memoryGbTotal", "memoryGbAllocated")}
    return c["gpuTotal"] - c["gpuAllocated"], c["memoryGbTotal"] - c["memoryGbAllocated"]


class SparkOllamaInstanceService:
    """Instance operations. ``workflows`` starts executions; ``settings`` gives the state machine ARNs and the
    poll interval / timeout that go into each execution's input."""

    def __init__(self, store: WorkloadStore, access: Access, workflows: WorkflowStarter, settings: Settings):
        self._store = store
        self._access = access
        self._workflows = workflows
        self._settings = settings

    # ----------------------------------------------------------------------------------------------- helpers
    @staticmethod
    def key(subscription_id: str, resource_group: str, node: str, name: str) -> ResourceKey:
        """Validated key (400 on bad names)."""
        validate_subscription_id(subscription_id)
        validate_resource_group(resource_group)
        validate_resource_name(node, target="nodeName")
        validate_resource_name(name)
        return ResourceKey(subscription_id, resource_group, INSTANCES, (node, name))

    def _require(self, ctx: CallContext, key: ResourceKey, action: rbac.Operation) -> None:
        self._access.require(
            ctx,
            action,
            subscription_id=key.subscription_id,
            resource_group=key.resource_group,
            resource_id=instance_id(key),
            resource_type=INSTANCES_TYPE,
            resource_name=key.names[1],
        )

    def _audit(
        self,
        ctx: CallContext,
        key: ResourceKey,
        action: rbac.Operation,
        summary: str,
        previous: dict[str, Any] | None,
        new: dict[str, Any] | None,
    ) -> Any:
        return build_event(
            ctx,
            subscription_id=key.subscription_id,
            action=action.name,
            resource_id=instance_id(key),
            resource_type=INSTANCES_TYPE,
            resource_name=key.names[1],
            change_summary=summary,
            previous_state=previous,
            new_state=new,
        )

    def _execution_input(self, ctx: CallContext, key: ResourceKey, operation_id: str) -> dict[str, Any]:
        return {
            "operationId": operation_id,
            "subscriptionId": key.subscription_id,
            "resourceGroup": key.resource_group,
            "nodeName": key.names[0],
            "instanceName": key.names[1],
            "correlationId": ctx.correlation_id,
            "pollIntervalSeconds": self._settings.instance_poll_interval_seconds,
            "timeoutSeconds": self._settings.instance_provision_timeout_seconds,
        }

    def _accepted(self, record: InstanceRecord, operation_id: str, *, created: bool = False) -> Accepted:
        return Accepted(
            render(record), operation_id, record.location, self._settings.instance_poll_interval_seconds, created
        )

    # ----------------------------------------------------------------------------------------------- reads
    def get(self, ctx: CallContext, subscription_id: str, resource_group: str, node: str, name: str) -> dict[str, Any]:
        """The instance; 404 when missing or outside the caller's scopes."""
        key = self.key(subscription_id, resource_group, node, name)
        self._require(ctx, key, rbac.INSTANCES_READ)
        record = self._store.get_instance(key)
        if record is None:
            raise ResourceNotFound(
                f"The Resource '{SPARK_NODES_TYPE}/{node}/{INSTANCES}/{name}' under resource group "
                f"'{resource_group}' was not found."
            )
        return render(record)

    def list(
        self,
        ctx: CallContext,
        subscription_id: str,
        resource_group: str,
        node: str,
        *,
        top: int,
        skip_token: str | None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of the node's instances (empty outside the caller's scopes). 404 ``ParentResourceNotFound`` when
        the node does not exist (one extra ``GetItem``, only for an empty first page)."""
        validate_subscription_id(subscription_id)
        validate_resource_group(resource_group)
        validate_resource_name(node, target="nodeName")
        if not ctx.principal.can_see(subscription_id, resource_group):
            return [], None
        self._require(ctx, ResourceKey(subscription_id, resource_group, INSTANCES, (node, "*")), rbac.INSTANCES_READ)
        try:
            items, token = self._store.list_resources(
                subscription_id=subscription_id,
                type_segment=INSTANCES,
                resource_group=resource_group,
                parent_names=(node,),
                limit=top,
                skip_token=skip_token,
            )
        except InvalidSkipToken as exc:
            raise InvalidParameter("The $skipToken is not valid for this list.", target="$skipToken") from exc
        if (
            not items
            and skip_token is None
            and self._store.get_resource(key_of_node(subscription_id, resource_group, node)) is None
        ):
            # an empty first page may mean a missing parent (a node with instances always exists): ARM's 404
            raise ParentResourceNotFound(f"The parent resource '{SPARK_NODES}/{node}' was not found.")
        return [{**i.document, "etag": i.etag} for i in items], token

    # ----------------------------------------------------------------------------------------------- create
    def put(
        self,
        ctx: CallContext,
        subscription_id: str,
        resource_group: str,
        node: str,
        name: str,
        body: SparkOllamaInstanceWrite,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
        create_only: bool = False,
    ) -> tuple[Accepted | None, dict[str, Any]]:
        """Create (or re-provision a Failed) instance. Returns ``(accepted, resource)``: ``accepted`` is None when
        nothing was started (an identical PUT of a Succeeded instance → 200).

        Errors: 400 (names, body, provisioningState), 403, 404 (node), 409 ``AnotherOperationInProgress`` /
        ``InsufficientCapacity`` / ``Conflict`` (node not Available, spec change of a running instance, POST of an
        existing name), 412.
        """
        key = self.key(subscription_id, resource_group, node, name)
        self._require(ctx, key, rbac.INSTANCES_WRITE)
        arm_rules.check_body_name(body.name, name)
        spec = body.spec()
        fingerprint = spec.fingerprint()
        existing, node_item = self._store.get_instance_and_node(key)
        arm_rules.check_preconditions(
            existing.etag if existing else None, if_match=if_match, if_none_match=if_none_match
        )
        assert body.properties is not None
        if existing is not None:
            if body.properties.provisioning_state not in (None, existing.state):
                arm_rules.check_provisioning_state(body.properties.provisioning_state, existing.state)
            if existing.state in IN_FLIGHT and existing.operation_id:
                if existing.spec_hash != fingerprint:
                    raise AnotherOperationInProgress(
                        f"The instance '{name}' is being provisioned (operation {existing.operation_id}); "
                        "wait for it to finish."
                    )
                self._start_provision(ctx, key, existing.operation_id)
                return self._accepted(existing, existing.operation_id), render(existing)
            if existing.state == "Deleting":
                raise AnotherOperationInProgress(f"The instance '{name}' is being deleted.")
            if create_only:
                raise Conflict(
                    f"A sparkOllamaInstance named '{existing.document['name']}' already exists on this node."
                )
            if existing.state == "Failed" and existing.capacity_reserved:
                raise Conflict(
                    f"The instance '{name}' failed to deprovision and still holds its GPUs: delete it again first."
                )
            if existing.state == "Succeeded":
                if existing.spec_hash == fingerprint:
                    return None, render(existing)
                raise Conflict(
                    "A running instance cannot change model, gpus or memory: delete it and create it again.",
                    code="PropertyChangeNotAllowed",
                )
        elif body.properties.provisioning_state not in (None, "Accepted"):
            arm_rules.check_provisioning_state(body.properties.provisioning_state, "Accepted")
        if node_item is None:
            raise ParentResourceNotFound(f"The parent resource '{SPARK_NODES}/{node}' was not found.")
        availability = node_item.document["properties"]["availability"]
        if availability != "Available":
            raise Conflict(f"The node '{node}' is {availability} and takes no new instances.", code="NodeNotAvailable")
        per_gpu = int((node_item.document["properties"].get("hardwareSpecs") or {}).get("gpuMemoryGb") or 0)
        if per_gpu and spec.memory_gb > spec.gpus * per_gpu:
            raise InvalidParameter(
                f"{spec.gpus} GPUs of '{node}' hold {spec.gpus * per_gpu} GiB; memory_gb {spec.memory_gb} cannot fit.",
                target="properties.memoryGb",
            )
        free_gpus, free_memory = _free(node_item.counters)
        if spec.gpus > free_gpus or spec.memory_gb > free_memory:
            raise InsufficientCapacity(
                f"The node '{node}' has {free_gpus} free GPUs and {free_memory} GiB free GPU memory; "
                f"the request needs {spec.gpus} GPUs and {spec.memory_gb} GiB."
            )
        operation_id = str(uuid.uuid4())
        location = node_item.document["location"]
        document = {
            "id": instance_id(key),
            "name": name,
            "type": INSTANCES_TYPE,
            "systemData": arm_rules.stamp_system_data(ctx, existing.document["systemData"] if existing else None),
            "properties": {
                "model": spec.model,
                "gpus": spec.gpus,
                "memoryGb": spec.memory_gb,
                "provisioningState": "Accepted",
                "operationId": operation_id,
            },
        }
        record = InstanceRecord(
            key=key,
            document=document,
            etag=arm_rules.new_etag(),
            state="Accepted",
            operation_id=operation_id,
            delete_operation_id=None,
            spec_hash=fingerprint,
            gpus=spec.gpus,
            memory_gb=spec.memory_gb,
            capacity_reserved=True,
            cancel_requested=False,
            dgx_instance_id=None,
            location=location,
        )
        operation = new_operation(
            ctx,
            subscription_id=subscription_id,
            location=location,
            operation_id=operation_id,
            resource_id=document["id"],
        )
        audit = self._audit(
            ctx,
            key,
            rbac.INSTANCES_WRITE,
            f"Accepted provisioning of {spec.model} ({spec.gpus} GPUs, {spec.memory_gb} GiB) on '{node}'",
            existing.document if existing else None,
            document,
        )
        totals = {"gpuTotal": node_item.counters["gpuTotal"], "memoryGbTotal": node_item.counters["memoryGbTotal"]}
        try:
            self._store.transact(
                [
                    self._store.instance_put(record, replacing_etag=existing.etag if existing else None),
                    self._store.node_reserve(
                        node_item.key,
                        gpus=spec.gpus,
                        memory_gb=spec.memory_gb,
                        totals=totals,
                        new_child=existing is None,
                    ),
                    self._store.operation_put(subscription_id, resource_group, operation, kind="provision"),
                    self._store.audit_put(audit),
                    self._store.subscription_check(subscription_id),
                ]
            )
        except TransactionFailed as exc:
            if 0 in exc.failed and existing is None:
                # a concurrent identical create won the race: answer with its operation (ARM_CONTRACT.md 17)
                winner = self._store.get_instance(key)
                if winner and winner.state in IN_FLIGHT and winner.spec_hash == fingerprint and winner.operation_id:
                    return self._accepted(winner, winner.operation_id), render(winner)
            raise self._reservation_error(exc, ctx, key, fingerprint, spec.gpus, spec.memory_gb) from exc
        self._start_provision(ctx, key, operation_id)
        return self._accepted(record, operation_id, created=existing is None), render(record)

    def _reservation_error(
        self, exc: TransactionFailed, ctx: CallContext, key: ResourceKey, fingerprint: str, gpus: int, memory_gb: int
    ) -> ArmError:
        if 4 in exc.failed:
            return subscription_conflict(SubscriptionNotWritable(str(exc.failed[4].get("state", "Unregistered"))))
        if 0 in exc.failed:
            return AnotherOperationInProgress("Another request changed this instance at the same time; retry.")
        node = exc.failed.get(1) or {}
        if not node:
            return ParentResourceNotFound(f"The parent resource '{SPARK_NODES}/{key.names[0]}' was not found.")
        if node.get("availability") != "Available":
            return Conflict(
                f"The node '{key.names[0]}' is {node.get('availability')} and takes no new instances.",
                code="NodeNotAvailable",
            )
        free_gpus, free_memory = _free(node)
        return InsufficientCapacity(
            f"The node '{key.names[0]}' has {free_gpus} free GPUs and {free_memory} GiB free GPU memory; "
            f"the request needs {gpus} GPUs and {memory_gb} GiB."
        )

    def _start_provision(self, ctx: CallContext, key: ResourceKey, operation_id: str) -> None:
        self._workflows.start(
            self._settings.provision_state_machine_arn, operation_id, self._execution_input(ctx, key, operation_id)
        )

    # ----------------------------------------------------------------------------------------------- delete
    def delete(
        self,
        ctx: CallContext,
        subscription_id: str,
        resource_group: str,
        node: str,
        name: str,
        *,
        if_match: str | None = None,
    ) -> Accepted | None:
        """Start deprovisioning (202). None when there is nothing to delete (ARM RPC: 204). Deleting an instance
        that is still provisioning cancels its provisioning. A repeated DELETE returns the same operation.

        Without ``If-Match`` a concurrent workflow step (e.g. Accepted -> Provisioning) does not refuse the delete:
        it is re-read and tried again (at most 3 times); with ``If-Match`` a changed etag is 412."""
        key = self.key(subscription_id, resource_group, node, name)
        self._require(ctx, key, rbac.INSTANCES_DELETE)
        for _ in range(3):
            existing = self._store.get_instance(key)
            if existing is None:
                if if_match is not None:
                    arm_rules.check_preconditions(None, if_match=if_match, if_none_match=None)
                return None
            arm_rules.check_preconditions(existing.etag, if_match=if_match, if_none_match=None)
            if existing.state == "Deleting" and existing.delete_operation_id:
                found = self._store.get_operation(subscription_id, existing.delete_operation_id)
                if found is None or found[0]["status"] not in FINAL_STATUSES:
                    # the same delete, still running: the same operation (and a harmless restart by name)
                    self._start_deprovision(ctx, key, existing.delete_operation_id)
                    return self._accepted(existing, existing.delete_operation_id)
                # its workflow ended without removing the instance: a new delete operation tries again
            try:
                return self._begin_delete(ctx, key, existing)
            except TransactionFailed:
                continue
        raise AnotherOperationInProgress("The instance kept changing while being deleted; retry the request.")

    def _begin_delete(self, ctx: CallContext, key: ResourceKey, existing: InstanceRecord) -> Accepted:
        """Instance -> Deleting (cancel requested when in flight), delete operation, audit; then start the
        deprovision workflow. Raises :class:`TransactionFailed` when the instance changed since it was read."""
        operation_id = str(uuid.uuid4())
        cancel = existing.state in IN_FLIGHT
        document = {
            **existing.document,
            "systemData": arm_rules.stamp_system_data(ctx, existing.document["systemData"]),
            "properties": {
                **existing.document["properties"],
                "provisioningState": "Deleting",
                "operationId": operation_id,
            },
        }
        etag = arm_rules.new_etag()
        operation = new_operation(
            ctx,
            subscription_id=key.subscription_id,
            location=existing.location,
            operation_id=operation_id,
            resource_id=document["id"],
        )
        summary = f"Accepted deletion of instance '{key.names[1]}'" + (" (cancels provisioning)" if cancel else "")
        audit = self._audit(ctx, key, rbac.INSTANCES_DELETE, summary, existing.document, document)
        self._store.transact(
            [
                self._store.instance_update(
                    key,
                    set_values={
                        "document": document,
                        "etag": etag,
                        "provisioningState": "Deleting",
                        "deleteOperationId": operation_id,
                        "cancelRequested": cancel,
                    },
                    condition="etag = :expected",
                    condition_values={":expected": existing.etag},
                ),
                self._store.operation_put(key.subscription_id, key.resource_group, operation, kind="deprovision"),
                self._store.audit_put(audit),
            ]
        )
        self._start_deprovision(ctx, key, operation_id)
        existing.document, existing.etag = document, etag
        return self._accepted(existing, operation_id)

    def _start_deprovision(self, ctx: CallContext, key: ResourceKey, operation_id: str) -> None:
        self._workflows.start(
            self._settings.deprovision_state_machine_arn, operation_id, self._execution_input(ctx, key, operation_id)
        )
