"""sparkOllamaInstances service (API side): accept provisioning and deprovisioning as long-running operations.

Rules: ARM_CONTRACT.md 11-18 and DESIGN.md capacity: accepting a create reserves GPUs and GPU memory on the node
(conditional update) in the same transaction as the instance item, its operation and its audit item; a request that
cannot fit → 409 ``InsufficientCapacity`` with what is free; a node that is not ``Available`` → 409
``NodeNotAvailable``; a write while an operation runs → 409 ``AnotherOperationInProgress``; an identical retry of a
create → the same operation. The work itself is done by the provision/deprovision state machines
(services/instance_workflow.py). Once the accepting transaction has committed the answer is 202 whatever happens
next: an execution that could not be started is started by the reconciler when the instance's lease runs out.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from itl_accelerator.billing.metering import BillingTerms, terms_properties
from itl_accelerator.errors import AnotherOperationInProgress, Conflict, InvalidParameter, PropertyChangeNotAllowed
from itl_accelerator.models.instances import SparkOllamaInstanceWrite
from itl_accelerator.observability import logger
from itl_accelerator.resources import INSTANCES
from itl_accelerator.services import arm_rules
from itl_accelerator.services.capacity import Capacity, insufficient
from itl_accelerator.services.context import CallContext
from itl_accelerator.services.kernel import ResourceKernel, with_etag
from itl_accelerator.services.operations import FINAL_STATUSES, Accepted, new_operation
from itl_accelerator.settings import Settings
from itl_accelerator.store.codec import to_json
from itl_accelerator.store.errors import (
    CapacityShortfall,
    NodeChanged,
    NodeMissing,
    NodeUnavailable,
    SubscriptionNotWritable,
    WorkloadChanged,
)
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.workloads import Reservation, WorkloadRecord
from itl_accelerator.workflows import WorkflowStarter

IN_FLIGHT = ("Accepted", "Provisioning")


def render(record: WorkloadRecord) -> dict[str, Any]:
    """The instance as returned: stored envelope plus ``etag``."""
    return with_etag(record.document, record.etag)


def execution_input(settings: Settings, key: ResourceKey, operation_id: str, correlation_id: str) -> dict[str, Any]:
    """The input of a provision or deprovision execution (poll interval and timeout in seconds)."""
    return {
        "operationId": operation_id,
        "subscriptionId": key.subscription_id,
        "resourceGroup": key.resource_group,
        "nodeName": key.names[0],
        "instanceName": key.names[1],
        "correlationId": correlation_id,
        "pollIntervalSeconds": settings.instance_poll_interval_seconds,
        "timeoutSeconds": settings.instance_provision_timeout_seconds,
    }


class SparkOllamaInstanceService:
    """Instance operations. ``workflows`` starts executions; ``settings`` gives the state machine ARNs, the poll
    interval / timeout that go into each execution's input, and the lease a new operation starts with."""

    def __init__(self, kernel: ResourceKernel, workflows: WorkflowStarter, settings: Settings):
        self._kernel = kernel
        self._store = kernel.store
        self._workflows = workflows
        self._settings = settings

    # ----------------------------------------------------------------------------------------------- helpers
    def key(self, subscription_id: str, resource_group: str, node: str, name: str) -> ResourceKey:
        """Validated key (400 on bad names)."""
        return self._kernel.key(INSTANCES, subscription_id, resource_group, node, name)

    def _accepted(self, record: WorkloadRecord, operation_id: str, *, created: bool = False) -> Accepted:
        return Accepted(
            render(record), operation_id, record.location, self._settings.instance_poll_interval_seconds, created
        )

    def _start_lease(self) -> float:
        """Epoch seconds by which a new operation's workflow must have made its first step."""
        return time.time() + self._settings.workflow_start_grace_seconds

    # ----------------------------------------------------------------------------------------------- reads
    def get(self, ctx: CallContext, subscription_id: str, resource_group: str, node: str, name: str) -> dict[str, Any]:
        """The instance; 404 when missing or outside the caller's scopes."""
        key = self.key(subscription_id, resource_group, node, name)
        self._kernel.require(ctx, INSTANCES, key)
        record = self._store.get_workload(key)
        if record is None:
            raise INSTANCES.not_found(key.names, resource_group)
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
        the node does not exist."""
        items, token = self._kernel.list_page(
            ctx, INSTANCES, subscription_id, resource_group, (node,), top=top, skip_token=skip_token
        )
        return [with_etag(i.document, i.etag) for i in items], token

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
        _attempt: int = 0,
    ) -> tuple[Accepted | None, dict[str, Any]]:
        """Create (or re-provision a Failed) instance. Returns ``(accepted, resource)``: ``accepted`` is None when
        nothing was started (an identical PUT of a Succeeded instance → 200). The instance locks the node's pricing
        as its ``billingTerms`` in the transaction that reserves its GPUs (billing/metering.py); a node written
        meanwhile is read again (at most 3 times).

        Errors: 400 (names, body, provisioningState), 403, 404 (node), 409 ``AnotherOperationInProgress`` /
        ``InsufficientCapacity`` / ``NodeNotAvailable`` / ``PropertyChangeNotAllowed`` / ``Conflict`` (POST of an
        existing name), 412.
        """
        key = self.key(subscription_id, resource_group, node, name)
        self._kernel.require(ctx, INSTANCES, key, INSTANCES.write)
        arm_rules.check_body_name(body.name, name)
        spec = body.spec()
        fingerprint = spec.fingerprint()
        existing, node_item = self._store.get_workload_and_node(key, key.parent())
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
                raise PropertyChangeNotAllowed(
                    "A running instance cannot change model, gpus or memory: delete it and create it again."
                )
        elif body.properties.provisioning_state not in (None, "Accepted"):
            arm_rules.check_provisioning_state(body.properties.provisioning_state, "Accepted")
        if node_item is None:
            raise self._kernel.parent_missing(INSTANCES, (node,))
        availability = node_item.document["properties"]["availability"]
        if availability != "Available":
            raise self._kernel.write_error(NodeUnavailable(availability), node=node)
        per_gpu = int((node_item.document["properties"].get("hardwareSpecs") or {}).get("gpuMemoryGb") or 0)
        if per_gpu and spec.memory_gb > spec.gpus * per_gpu:
            raise InvalidParameter(
                f"{spec.gpus} GPUs of '{node}' hold {spec.gpus * per_gpu} GiB; memory_gb {spec.memory_gb} cannot fit.",
                target="properties.memoryGb",
            )
        capacity = Capacity.of(node_item.counters)
        if not capacity.fits(spec.gpus, spec.memory_gb):
            raise insufficient(node, capacity.free_gpus, capacity.free_memory_gb, spec.gpus, spec.memory_gb)
        operation_id = str(uuid.uuid4())
        location = node_item.document["location"]
        terms = BillingTerms.from_pricing(node_item.document["properties"].get("pricing") or {})
        owner = str(node_item.document["properties"].get("owner", ""))
        document = {
            "id": INSTANCES.id(key.subscription_id, key.resource_group, key.names),
            "name": name,
            "type": INSTANCES.type_name,
            "systemData": arm_rules.stamp_system_data(ctx, existing.document["systemData"] if existing else None),
            "properties": {
                "model": spec.model,
                "gpus": spec.gpus,
                "memoryGb": spec.memory_gb,
                "billingTerms": terms_properties(terms, ctx.now_iso()),
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
            gpus=spec.gpus,
            memory_gb=spec.memory_gb,
            capacity_reserved=True,
            location=location,
            lease_until=self._start_lease(),
            extra={"billingTerms": to_json(terms.as_stored()), "nodeOwner": owner},
        )
        operation = new_operation(
            ctx,
            subscription_id=subscription_id,
            location=location,
            operation_id=operation_id,
            resource_id=document["id"],
        )
        audit = self._kernel.audit(
            ctx,
            INSTANCES,
            key,
            INSTANCES.write,
            f"Accepted provisioning of {spec.model} ({spec.gpus} GPUs, {spec.memory_gb} GiB) on '{node}'",
            existing.document if existing else None,
            document,
        )
        try:
            self._store.accept(
                record,
                replacing_etag=existing.etag if existing else None,
                operation=operation,
                operation_kind="provision",
                audit=audit,
                reservation=Reservation(
                    node_item.key,
                    spec.gpus,
                    spec.memory_gb,
                    capacity.totals,
                    etag=node_item.etag,
                    child=1 if existing is None else 0,
                ),
            )
        except WorkloadChanged as exc:
            if existing is None:
                # a concurrent identical create won the race: answer with its operation (ARM_CONTRACT.md 17)
                winner = self._store.get_workload(key)
                if winner and winner.state in IN_FLIGHT and winner.spec_hash == fingerprint and winner.operation_id:
                    return self._accepted(winner, winner.operation_id), render(winner)
            raise AnotherOperationInProgress("Another request changed this instance at the same time; retry.") from exc
        except NodeChanged as exc:
            if _attempt >= 2:
                raise AnotherOperationInProgress(f"The node '{node}' kept changing; retry the request.") from exc
            return self.put(
                ctx,
                subscription_id,
                resource_group,
                node,
                name,
                body,
                if_match=if_match,
                if_none_match=if_none_match,
                create_only=create_only,
                _attempt=_attempt + 1,
            )
        except (SubscriptionNotWritable, CapacityShortfall, NodeUnavailable, NodeMissing) as exc:
            raise self._kernel.write_error(exc, node=node, gpus=spec.gpus, memory_gb=spec.memory_gb) from exc
        self._start_provision(ctx, key, operation_id)
        return self._accepted(record, operation_id, created=existing is None), render(record)

    def _start(self, arn: str, ctx: CallContext, key: ResourceKey, operation_id: str) -> None:
        """Start (or harmlessly restart, by name) the execution of an accepted operation. A failure here is logged,
        not raised: the operation is stored and answered 202, and the reconciler starts it when its lease ends."""
        try:
            self._workflows.start(
                arn, operation_id, execution_input(self._settings, key, operation_id, ctx.correlation_id)
            )
        except Exception:  # noqa: BLE001 - the change is committed; the reconciler finishes what this began
            logger.exception("Could not start the workflow; the reconciler will", extra={"operation": operation_id})

    def _start_provision(self, ctx: CallContext, key: ResourceKey, operation_id: str) -> None:
        self._start(self._settings.provision_state_machine_arn, ctx, key, operation_id)

    def _start_deprovision(self, ctx: CallContext, key: ResourceKey, operation_id: str) -> None:
        self._start(self._settings.deprovision_state_machine_arn, ctx, key, operation_id)

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
        self._kernel.require(ctx, INSTANCES, key, INSTANCES.delete)
        for _ in range(3):
            existing = self._store.get_workload(key)
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
            except WorkloadChanged:
                continue
        raise AnotherOperationInProgress("The instance kept changing while being deleted; retry the request.")

    def _begin_delete(self, ctx: CallContext, key: ResourceKey, existing: WorkloadRecord) -> Accepted:
        """Instance -> Deleting (cancel requested when in flight), delete operation, audit; then start the
        deprovision workflow. Raises :class:`WorkloadChanged` when the instance changed since it was read."""
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
        meter = existing.extra.get("meterId")
        now = int(ctx.clock().timestamp())
        self._store.transition(
            key,
            expect={"etag": existing.etag},
            set_values={
                "document": document,
                "etag": etag,
                "provisioningState": "Deleting",
                "deleteOperationId": operation_id,
                "cancelRequested": cancel,
            },
            new_operation=(operation, "deprovision"),
            audit=self._kernel.audit(ctx, INSTANCES, key, INSTANCES.delete, summary, existing.document, document),
            lease_until=self._start_lease(),
            # billing stops when the deletion is accepted: the instance's meter ends in the same transaction
            extra=(
                (self._store.meter_end_item(key.subscription_id, str(meter), end=now, due=now),)
                if meter and existing.state == "Succeeded"
                else ()
            ),
        )
        self._start_deprovision(ctx, key, operation_id)
        existing.document, existing.etag = document, etag
        return self._accepted(existing, operation_id)
