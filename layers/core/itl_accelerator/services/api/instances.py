"""sparkOllamaInstances service (API side): accept provisioning and deprovisioning as long-running operations.

Rules: ARM_CONTRACT.md 11-18 and DESIGN.md capacity: accepting a create reserves GPUs and GPU memory on the node
(conditional update) in the same transaction as the instance, its operation and its audit event; a request that
cannot fit → 409 ``InsufficientCapacity`` with what is free; one that fits now but would take devices a capacity
reservation booked for a window to come (an instance holds its devices open-ended) → 409 ``CapacityReserved`` naming
the windows (issue 44); a node that is not ``Available`` → 409
``NodeNotAvailable``; a write while an operation runs → 409 ``AnotherOperationInProgress``; an identical retry of a
create → the same operation. The work itself is done by the provision/deprovision state machines
(services/workflows/instance_steps.py). Once the accepting transaction has committed the answer is 202 whatever
happens next: an execution that could not be started is started by the reconciler when the instance's lease runs
out.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from itl_accelerator.billing.metering import terms_properties
from itl_accelerator.domain.accelerators import ollama_kinds_text, runs_ollama
from itl_accelerator.domain.records import (
    Instance,
    Lease,
    Node,
    Operation,
    Reservation,
    ResourceKey,
    node_key,
)
from itl_accelerator.domain.scheduling import open_ended_refusal, utc
from itl_accelerator.domain.states import INSTANCE_IN_FLIGHT, Availability, OperationKind, ProvisioningState
from itl_accelerator.domain.usage import MeterEnd
from itl_accelerator.errors import (
    AcceleratorNotSupported,
    AnotherOperationInProgress,
    CapacityReserved,
    Conflict,
    InvalidParameter,
    NodeNotAvailable,
    PropertyChangeNotAllowed,
)
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.models.instances import InstanceSpec, SparkOllamaInstanceWrite
from itl_accelerator.repositories.errors import (
    CapacityShortfall,
    NodeChanged,
    NodeMissing,
    NodeUnavailable,
    QuotaExceeded,
    SubscriptionNotWritable,
    WorkloadChanged,
)
from itl_accelerator.repositories.protocols import Effects, Expect
from itl_accelerator.resources import INSTANCES
from itl_accelerator.services.common import arm_rules
from itl_accelerator.services.common.budgets import covering, currency_refusal, refusal
from itl_accelerator.services.common.capacity import Capacity, insufficient
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.services.common.kernel import ResourceKernel, with_etag
from itl_accelerator.services.common.lro import Accepted, new_operation, poll_after
from itl_accelerator.services.common.reattempt import reattempt
from itl_accelerator.services.workflows.io import InstanceStepInput
from itl_accelerator.settings import Settings
from itl_accelerator.state_machines import StateMachines

#: How many times a create reads the node and tries its accepting transaction when the node is written meanwhile
#: (its pricing or shape changed: the terms it locks must be the ones in force), before 409
#: ``AnotherOperationInProgress``.
NODE_WRITE_ATTEMPTS = 3
#: How many times a delete reads and decides again when a workflow step changed the instance meanwhile (without
#: ``If-Match``; with it, a changed etag is 412), before 409 ``AnotherOperationInProgress``.
DELETE_ATTEMPTS = 3


@dataclass(frozen=True)
class _PutRequest:
    """A validated PUT of an instance: its key, body, spec and the spec's fingerprint, and the request's
    conditions."""

    key: ResourceKey
    body: SparkOllamaInstanceWrite
    spec: InstanceSpec
    fingerprint: str
    if_match: str | None
    if_none_match: str | None
    create_only: bool


def render(instance: Instance) -> dict[str, Any]:
    """The instance as returned: stored envelope plus ``etag``."""
    return with_etag(instance.document, instance.etag)


class SparkOllamaInstanceService:
    """Instance operations. ``state_machines`` starts executions; ``settings`` gives the state machine ARNs, the poll
    interval / timeout that go into each execution's input, and the lease a new operation starts with."""

    def __init__(
        self,
        kernel: ResourceKernel,
        state_machines: StateMachines,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ):
        self._kernel = kernel
        self._clock = clock
        self._instances = kernel.repositories.instances
        self._operations = kernel.repositories.operations
        self._state_machines = state_machines
        self._settings = settings

    # ----------------------------------------------------------------------------------------------- helpers
    def key(self, subscription_id: str, resource_group: str, node: str, name: str) -> ResourceKey:
        """Validated key (400 on bad names)."""
        return self._kernel.key(INSTANCES, subscription_id, resource_group, node, name)

    def _accepted(self, instance: Instance, operation_id: str, *, created: bool = False) -> Accepted:
        return Accepted(
            render(instance),
            operation_id,
            instance.location,
            poll_after(OperationKind.PROVISION, 0, self._settings),
            created,
        )

    def _start_lease(self) -> Lease:
        """The lease a new operation starts with: its workflow must make its first step by then."""
        return Lease.owned(self._clock() + self._settings.workflow_start_grace_seconds)

    # ----------------------------------------------------------------------------------------------- reads
    def get(self, ctx: CallContext, subscription_id: str, resource_group: str, node: str, name: str) -> dict[str, Any]:
        """The instance; 404 when missing or outside the caller's scopes."""
        key = self.key(subscription_id, resource_group, node, name)
        self._kernel.require(ctx, INSTANCES, key)
        instance = self._instances.get(key)
        if instance is None:
            raise INSTANCES.not_found(key.names, resource_group)
        return render(instance)

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
        parent = node_key(subscription_id, resource_group, node)
        page = self._kernel.list_page(
            ctx,
            INSTANCES,
            subscription_id,
            resource_group,
            lambda scope, token: self._instances.page(parent, top, token),
            (node,),
            skip_token=skip_token,
        )
        return [render(i) for i in page.items], page.token

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
        nothing was started (an identical PUT of a Succeeded instance → 200). The instance locks the node's pricing
        as its ``billingTerms`` in the transaction that reserves its GPUs (billing/metering.py); a node written
        meanwhile is read again (:data:`NODE_WRITE_ATTEMPTS` in all). Raises ``SettingMissing`` before anything is
        written when the provisioning workflow's ARN is not set.

        Errors: 400 (names, body, provisioningState), 403, 404 (node), 409 ``AnotherOperationInProgress`` /
        ``InsufficientCapacity`` / ``NodeNotAvailable`` / ``PropertyChangeNotAllowed`` / ``Conflict`` (POST of an
        existing name), 412.
        """
        key = self.key(subscription_id, resource_group, node, name)
        self._kernel.require(ctx, INSTANCES, key, INSTANCES.write)
        arm_rules.check_body_name(body.name, name)
        self._settings.require("provision_state_machine_arn")
        spec = body.spec()
        request = _PutRequest(key, body, spec, spec.fingerprint(), if_match, if_none_match, create_only)
        # a node repriced or reshaped since it was read: decide again on the node as it is now
        return reattempt(
            lambda: self._put_once(ctx, request),
            on=NodeChanged,
            attempts=NODE_WRITE_ATTEMPTS,
            exhausted=lambda: AnotherOperationInProgress(f"The node '{node}' kept changing; retry the request."),
        )

    def _put_once(self, ctx: CallContext, request: _PutRequest) -> tuple[Accepted | None, dict[str, Any]]:
        """One read-decide-write of :meth:`put`. Raises ``NodeChanged`` when the node was written since it was read
        (nothing was written)."""
        key, spec = request.key, request.spec
        existing, node_record = self._instances.get_with_node(key)
        arm_rules.check_preconditions(
            existing.etag if existing else None, if_match=request.if_match, if_none_match=request.if_none_match
        )
        if existing is not None:
            answer = self._against_existing(ctx, request, existing)
            if answer is not None:
                return answer
        else:
            requested = request.body.properties.provisioning_state if request.body.properties else None
            if requested not in (None, ProvisioningState.ACCEPTED):
                arm_rules.check_provisioning_state(requested, ProvisioningState.ACCEPTED)
        if node_record is None:
            raise self._kernel.parent_missing(INSTANCES, (key.names[0],))
        self._check_fits(key, node_record, spec)
        instance, operation, audit = self._accepting(ctx, request, existing, node_record)
        # an instance holds its devices open-ended (until it is deleted): the node's calendar says so
        reservation = Reservation.on(
            node_record, spec.gpus, spec.memory_gb, child=1 if existing is None else 0, holder=key
        )
        try:
            self._instances.accept(instance, operation, audit, reservation, replacing=existing)
        except WorkloadChanged as exc:
            winner = self._instances.get(key) if existing is None else None
            if (
                winner
                and winner.operation_id
                and winner.state in INSTANCE_IN_FLIGHT
                and winner.spec_hash == request.fingerprint
            ):
                # a concurrent identical create won the race: answer with its operation (ARM_CONTRACT.md 17)
                return self._accepted(winner, winner.operation_id), render(winner)
            raise AnotherOperationInProgress("Another request changed this instance at the same time; retry.") from exc
        except (SubscriptionNotWritable, CapacityShortfall, NodeUnavailable, NodeMissing, QuotaExceeded) as exc:
            raise self._kernel.write_error(exc, node=key.names[0], devices=spec.gpus, memory_gb=spec.memory_gb) from exc
        operation_id = str(instance.operation_id)
        self._start_provision(ctx, key, operation_id)
        return self._accepted(instance, operation_id, created=existing is None), render(instance)

    def _against_existing(
        self, ctx: CallContext, request: _PutRequest, existing: Instance
    ) -> tuple[Accepted | None, dict[str, Any]] | None:
        """What a PUT over ``existing`` answers without a new operation - the running one again (an identical
        retry while it is in flight), or 200 for an identical PUT of a Succeeded instance - or None when a new
        provisioning may start (a Failed instance that released its GPUs). Raises the 409s of a write that may not
        happen now and 400 for a provisioningState the body may not set."""
        name, fingerprint = request.key.names[-1], request.fingerprint
        requested = request.body.properties.provisioning_state if request.body.properties else None
        if requested not in (None, existing.state):
            arm_rules.check_provisioning_state(requested, existing.state)
        if existing.state in INSTANCE_IN_FLIGHT and existing.operation_id:
            if existing.spec_hash != fingerprint:
                raise AnotherOperationInProgress(
                    f"The instance '{name}' is being provisioned (operation {existing.operation_id}); "
                    "wait for it to finish."
                )
            self._start_provision(ctx, request.key, existing.operation_id)
            return self._accepted(existing, existing.operation_id), render(existing)
        if existing.state == ProvisioningState.DELETING:
            raise AnotherOperationInProgress(f"The instance '{name}' is being deleted.")
        if request.create_only:
            raise Conflict(f"A sparkOllamaInstance named '{existing.document['name']}' already exists on this node.")
        if existing.state == ProvisioningState.FAILED and existing.capacity_reserved:
            raise Conflict(
                f"The instance '{name}' failed to deprovision and still holds its GPUs: delete it again first."
            )
        if existing.state == ProvisioningState.SUCCEEDED:
            if existing.spec_hash == fingerprint:
                return None, render(existing)
            raise PropertyChangeNotAllowed(
                "A running instance cannot change model, gpus or memory: delete it and create it again."
            )
        return None

    def _check_fits(self, key: ResourceKey, node_record: Node, spec: InstanceSpec) -> None:
        """The node as read can take ``spec`` now and the subscription's budgets allow it: 409
        ``AcceleratorNotSupported`` (Ollama runs on NVIDIA and AMD GPUs only) / ``NodeNotAvailable`` /
        ``InsufficientCapacity`` / the budget's refusal, 400 for more memory than the GPUs hold."""
        node = key.names[0]
        held = node_record.accelerator
        if not runs_ollama(held.kind, held.vendor):
            raise AcceleratorNotSupported(
                f"Ollama runs on {ollama_kinds_text()}; the node '{node}' holds {held.vendor} {held.kind}s"
                f"{f' ({held.model})' if held.model else ''}."
            )
        if node_record.availability != Availability.AVAILABLE:
            raise self._kernel.write_error(NodeUnavailable(node_record.availability), node=node)
        if (
            not node_record.backend_placeable
        ):  # its Slurm cluster takes no work on it (services/schedules/node_health.py)
            status = node_record.backend_status or {}
            raise NodeNotAvailable(
                f"Slurm cluster '{node_record.backend.cluster}' reports the node '{node}' {status.get('state')}"
                f"{': ' + str(status['reason']) if status.get('reason') else ''}; it takes no new work."
            )
        per_gpu = node_record.memory_gb_per_device
        if per_gpu and spec.memory_gb > spec.gpus * per_gpu:
            raise InvalidParameter(
                f"{spec.gpus} GPUs of '{node}' hold {spec.gpus * per_gpu} GiB; memoryGb {spec.memory_gb} cannot fit.",
                target="properties.memoryGb",
            )
        capacity = Capacity.of(node_record)
        if not capacity.fits(spec.gpus, spec.memory_gb):
            raise insufficient(node, capacity.free_devices, capacity.free_memory_gb, spec.gpus, spec.memory_gb)
        booked = open_ended_refusal(node_record, spec.gpus, spec.memory_gb, self._clock())
        if booked:  # an instance holds its devices open-ended: never into a capacity reservation's window (issue 44)
            windows = ", ".join(f"{utc(b.start)} to {utc(b.end)} ({b.devices} GPUs)" for b in booked)
            raise CapacityReserved(
                f"The node '{node}' has {spec.gpus} GPUs free now, but capacity reservations booked its devices from "
                f"{windows}; an instance holds its GPUs until it is deleted, so it cannot take them."
            )
        now = datetime.fromtimestamp(self._clock(), UTC)
        budgets = covering(
            self._kernel.repositories.budgets.in_subscription(key.subscription_id), now, key.resource_group, {}
        )
        refused = refusal(budgets, now, key.resource_group, {}) or currency_refusal(budgets, node_record.terms.currency)
        if refused is not None:
            raise refused

    def _accepting(
        self, ctx: CallContext, request: _PutRequest, existing: Instance | None, node_record: Node
    ) -> tuple[Instance, Operation, AuditEvent]:
        """The records the accepting transaction writes: the Accepted instance (its node's terms locked, a start
        lease), its PROVISION operation and its audit event."""
        key, spec = request.key, request.spec
        operation_id = str(uuid.uuid4())
        terms = node_record.terms
        instance = Instance(
            key=key,
            # what only its document holds; its GPUs, memory, state and operation become properties from the record
            # (Instance.arm_properties)
            document=INSTANCES.envelope(
                key.subscription_id,
                key.resource_group,
                key.names,
                system_data=arm_rules.stamp_system_data(ctx, existing.document["systemData"] if existing else None),
                properties={"model": spec.model, "billingTerms": terms_properties(terms, ctx.now_iso())},
            ),
            etag="",
            state=ProvisioningState.ACCEPTED,
            operation_id=operation_id,
            spec_hash=request.fingerprint,
            devices=spec.gpus,
            memory_gb=spec.memory_gb,
            capacity_reserved=True,
            location=node_record.location,
            node_owner=node_record.owner,
            billing_terms=terms,
            lease=self._start_lease(),
        )
        instance = arm_rules.changed(ctx, instance)  # its typed values written into its document, and its etag
        document = instance.document
        operation = new_operation(
            ctx,
            key,
            kind=OperationKind.PROVISION,
            location=node_record.location,
            operation_id=operation_id,
            resource_id=document["id"],
        )
        audit = self._kernel.audit(
            ctx,
            INSTANCES,
            key,
            INSTANCES.write,
            f"Accepted provisioning of {spec.model} ({spec.gpus} GPUs, {spec.memory_gb} GiB) on '{key.names[0]}'",
            existing.document if existing else None,
            document,
        )
        return instance, operation, audit

    def _start(self, arn: str, ctx: CallContext, key: ResourceKey, operation_id: str) -> None:
        """Start (or harmlessly restart, by name) the execution of an accepted operation; one Step Functions could
        not take now is left to the reconciler (state_machines.py ``start_or_defer``)."""
        inp = InstanceStepInput.starting(self._settings, key, operation_id, ctx.correlation_id)
        self._state_machines.start_or_defer(arn, operation_id, inp.execution_input())

    def _start_provision(self, ctx: CallContext, key: ResourceKey, operation_id: str) -> None:
        self._start(self._settings.require("provision_state_machine_arn"), ctx, key, operation_id)

    def _start_deprovision(self, ctx: CallContext, key: ResourceKey, operation_id: str) -> None:
        self._start(self._settings.require("deprovision_state_machine_arn"), ctx, key, operation_id)

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
        self._settings.require("deprovision_state_machine_arn")
        # a workflow step changed the instance since it was read: decide again on the instance as it is now
        return reattempt(
            lambda: self._delete_once(ctx, key, if_match),
            on=WorkloadChanged,
            attempts=DELETE_ATTEMPTS,
            exhausted=lambda: AnotherOperationInProgress(
                "The instance kept changing while being deleted; retry the request."
            ),
        )

    def _delete_once(self, ctx: CallContext, key: ResourceKey, if_match: str | None) -> Accepted | None:
        """One read-decide-write of :meth:`delete`. Raises :class:`WorkloadChanged` when the instance changed since
        it was read (nothing written)."""
        existing = self._instances.get(key)
        if existing is None:
            if if_match is not None:
                arm_rules.check_preconditions(None, if_match=if_match, if_none_match=None)
            return None
        arm_rules.check_preconditions(existing.etag, if_match=if_match, if_none_match=None)
        if existing.state == ProvisioningState.DELETING and existing.delete_operation_id:
            found = self._operations.get(key.subscription_id, existing.delete_operation_id)
            if found is None or not found.status.final:
                # the same delete, still running: the same operation (and a harmless restart by name)
                self._start_deprovision(ctx, key, existing.delete_operation_id)
                return self._accepted(existing, existing.delete_operation_id)
            # its workflow ended without removing the instance: a new delete operation tries again
        return self._begin_delete(ctx, key, existing)

    def _begin_delete(self, ctx: CallContext, key: ResourceKey, existing: Instance) -> Accepted:
        """Instance -> Deleting (cancel requested when in flight), delete operation, audit, and — for a serving
        instance — the end of its billing (its meter ends when the deletion is accepted); then start the deprovision
        workflow. Raises :class:`WorkloadChanged` when the instance changed since it was read."""
        operation_id = str(uuid.uuid4())
        cancel = existing.state in INSTANCE_IN_FLIGHT
        deleting = arm_rules.changed(
            ctx,
            existing,
            state=ProvisioningState.DELETING,
            delete_operation_id=operation_id,
            cancel_requested=cancel,
            lease=self._start_lease(),
        )
        document = deleting.document
        operation = new_operation(
            ctx,
            key,
            kind=OperationKind.DEPROVISION,
            location=existing.location,
            operation_id=operation_id,
            resource_id=document["id"],
        )
        summary = f"Accepted deletion of instance '{key.names[1]}'" + (" (cancels provisioning)" if cancel else "")
        now = int(ctx.clock().timestamp())
        billed = existing.meter_id is not None and existing.state == ProvisioningState.SUCCEEDED
        self._instances.update(
            existing,
            deleting,
            self._kernel.audit(ctx, INSTANCES, key, INSTANCES.delete, summary, existing.document, document),
            expect=Expect(etag=existing.etag),
            effects=Effects(
                new_operation=operation,
                meter_end=MeterEnd(key.subscription_id, existing.meter_id, now, now)
                if billed and existing.meter_id
                else None,
            ),
        )
        self._start_deprovision(ctx, key, operation_id)
        return self._accepted(deleting, operation_id)
