"""What the provision and deprovision steps share (services/workflows/instance_steps.py, deprovision_steps.py):
the SYSTEM context of an execution, the lease a step writes, the one-transaction transition of an instance with its
audit event, its operation moved on, and the DGX instances a resource may own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from itl_accelerator.auth import rbac
from itl_accelerator.dgx.errors import DgxNotFound
from itl_accelerator.domain.records import Instance, Lease, Operation, Release, node_key
from itl_accelerator.domain.states import OperationKind, OperationStatus, ProvisioningState
from itl_accelerator.domain.usage import Meter, MeterEnd
from itl_accelerator.observability import logger
from itl_accelerator.repositories.protocols import Effects, Expect
from itl_accelerator.resources import INSTANCES
from itl_accelerator.services.common import arm_rules
from itl_accelerator.services.common.context import CallContext, system_context
from itl_accelerator.services.common.kernel import ResourceKernel
from itl_accelerator.services.common.lro import placeholder_operation
from itl_accelerator.services.workflows.io import (
    ErrorBody,
    InstanceStepInput,
)
from itl_accelerator.state_machines import StateMachines

if TYPE_CHECKING:  # a platform's client (httpx, tenacity) loads when it is made, on its first call
    from itl_accelerator.platforms.protocol import ExecutionPlatform
    from itl_accelerator.platforms.router import Platforms


class InstanceWorkflowSteps:
    """What both instance workflows' steps hold and share. ``platforms``: the execution platforms (the DGX Platform,
    the Slurm clusters: each client made on its first call); ``state_machines`` completes the readiness wait's token when a callback came first; ``clock`` returns epoch
    seconds; ``lease_grace_seconds`` is added to a step's own deadline for the lease it writes; ``callback_url``: where
    the DGX Platform is asked to announce readiness (None: it is not asked; polling alone)."""

    def __init__(
        self,
        kernel: ResourceKernel,
        platforms: Platforms,
        state_machines: StateMachines,
        *,
        lease_grace_seconds: int = 120,
        callback_url: str | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self._kernel = kernel
        self._instances = kernel.repositories.instances
        self._nodes = kernel.repositories.nodes
        self._operations = kernel.repositories.operations
        self.platforms = platforms
        self._state_machines = state_machines
        self._grace = lease_grace_seconds
        self._callback_url = callback_url or None
        self._clock = clock
        #: Told ``(context, subscription id)`` after a step gave GPUs back (placement serves the waiting jobs).
        self.on_release: Callable[[CallContext, str], Any] | None = None

    def _context(self, inp: InstanceStepInput) -> CallContext:
        """The SYSTEM caller of this execution's changes, dated by the steps' clock."""
        return system_context(inp.operationId, inp.correlationId, self._clock)

    def _released(self, inp: InstanceStepInput) -> None:
        if self.on_release is not None:
            try:
                self.on_release(self._context(inp), inp.subscriptionId)
            except Exception:  # noqa: BLE001 - the release is done; waiting jobs are also retried periodically
                logger.exception("Serving the waiting jobs after a release failed")

    # ----------------------------------------------------------------------------------------------- helpers
    def _lease(self, inp: InstanceStepInput) -> Lease:
        """The lease the next step must make progress within: the step's timeout plus the grace."""
        return Lease.owned(self._clock() + inp.timeoutSeconds + self._grace)

    def _operation(
        self,
        inp: InstanceStepInput,
        operation_id: str,
        status: OperationStatus,
        error: ErrorBody | None = None,
        kind: OperationKind = OperationKind.PROVISION,
    ) -> Operation:
        """The operation moved to ``status`` (and ``error``)."""
        found = self._operations.get(inp.subscriptionId, operation_id) or placeholder_operation(
            operation_id, kind, inp.resourceGroup
        )
        now = self._context(inp).now_iso()
        return found.moved(status, now, error.as_dict() if error else None)

    def _transition(
        self,
        inp: InstanceStepInput,
        instance: Instance,
        *,
        state: ProvisioningState,
        summary: str,
        action: rbac.Permission,
        expect: Expect,
        properties: dict[str, Any] | None = None,
        operation: Operation | None = None,
        release: bool = False,
        meter_start: Meter | None = None,
        meter_end: MeterEnd | None = None,
        **changes: Any,
    ) -> None:
        """One transaction: the instance to ``state`` (if ``expect`` holds) with ``changes`` to its record and
        ``properties`` in its document, its operation moved on, its capacity released, its meter started or ended,
        and the SYSTEM audit event. Raises :class:`WorkloadChanged`."""
        ctx = self._context(inp)
        after = arm_rules.changed(ctx, instance, properties, state=state, **changes)
        self._instances.update(
            instance,
            after,
            self._kernel.audit(ctx, INSTANCES, instance.key, action, summary, instance.document, after.document),
            expect=expect,
            effects=Effects(
                operation=operation,
                release=Release.of(instance) if release else None,
                meter_start=meter_start,
                meter_end=meter_end,
            ),
        )

    def _finish_operation(
        self,
        inp: InstanceStepInput,
        operation_id: str | None,
        status: OperationStatus,
        kind: OperationKind = OperationKind.PROVISION,
    ) -> None:
        """Best effort, on its own: move an operation to a final status unless it already has ended."""
        if operation_id:
            self._operations.finish(inp.subscriptionId, self._operation(inp, operation_id, status, kind=kind))

    def _dgx_ids(self, instance: Instance) -> list[str]:
        """Every DGX instance this resource may own: the one recorded and the one its create key made."""
        ids = [instance.dgx_id] if instance.dgx_id else []
        if instance.operation_id:
            found = self.platform_of(instance).find_instance(instance.operation_id)
            if found and found.id not in ids:
                ids.append(found.id)
        return ids

    def _remaining_on_dgx(self, instance: Instance) -> list[str]:
        """The DGX instances of ``instance`` that still exist (asking again to delete any not yet being deleted).
        Empty once the DGX Platform confirms that none is left (404 or ``Deleted``)."""
        remaining = []
        for dgx_id in self._dgx_ids(instance):
            try:
                found = self.platforms.get_instance(dgx_id)
            except DgxNotFound:
                continue
            if found.status != "Deleted":
                remaining.append(dgx_id)
                if found.status != "Deleting":
                    self.platforms.delete_instance(dgx_id)
        return remaining

    def _delete_made_by(self, inp: InstanceStepInput) -> None:
        """Delete the platform instance a create with the execution's operation id (idempotency key) made on its
        node's platform, if any."""
        node = self._nodes.get(node_key(inp.subscriptionId, inp.resourceGroup, inp.nodeName))
        made = self.platforms.for_node(node).find_instance(inp.operationId)
        if made is not None:
            self.platforms.delete_instance(made.id)

    def platform_of(self, instance: Instance) -> ExecutionPlatform:
        """The platform ``instance``'s node runs on (one read of the node; a node gone: the DGX Platform)."""
        return self.platforms.for_node(self._nodes.get(instance.node_key))
