"""``GET .../stats?hours=N``: per-hour usage of an Ollama instance, a job, or a node, read from the hourly roll-ups
(billing/rollup.py), with the same access rules as reading the resource itself — plus, for a node, that a supplier
sees only its own earnings on it (what the allocations that began while it owned the node earned) and admins the
node's whole figures.

Figures are per *lifetime* of the resource (and of the node): a name deleted and created again starts with none of
the figures of the one before, whoever holds it now. The answer covers the last ``hours`` UTC hours up to and including the current one (Azure Monitor's shape:
``timespan``, ``interval`` ``PT1H``, ``value`` with one point per hour, oldest first, zeros where nothing ran) and
``totals`` over them. Units: seconds for ``gpuSeconds``, hours for ``gpuHours``, percent for utilisation (the mean
over the GPU-seconds the DGX Platform measured; null when nothing was measured), GiB for ``gpuMemoryGb``, Wh for
``energyWh``; money as ``cost``: a list of ``{"amount", "currency"}`` with the amount as an exact decimal string.
Figures are as fresh as the last roll-up (hourly, and on ``./dev schedule usage-rollup`` locally).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from itl_accelerator.auth import rbac
from itl_accelerator.billing.metering import HOUR, window_of
from itl_accelerator.billing.rollup import (
    SUBSCRIPTION_SCOPE,
    Totals,
    node_scope,
    resource_scope,
    supplier_node_scope,
)
from itl_accelerator.domain.usage import hour_key
from itl_accelerator.errors import InvalidParameter
from itl_accelerator.repositories.protocols import UsageRepository
from itl_accelerator.resources import NODES
from itl_accelerator.services.common.access import Target
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.services.common.kernel import ResourceKernel

if TYPE_CHECKING:
    from itl_accelerator.services.api.instances import SparkOllamaInstanceService
    from itl_accelerator.services.api.jobs import SparkJobService

MIN_HOURS, MAX_HOURS, DEFAULT_HOURS = 1, 720, 24
#: ASCII digits only (``str.isdigit`` also takes superscripts and fullwidth digits, which ``int`` refuses or reads), at most 4.
_HOURS = re.compile(r"[0-9]{1,4}")
_GPU_HOURS_QUANTUM = Decimal("0.000001")


def parse_hours(value: str | None) -> int:
    """``hours`` from the query string: an integer from 1 to 720 in ASCII digits, 24 when absent. Raises 400
    ``InvalidParameter`` for anything else (out of range, a fraction, a sign, spaces, other digits, text)."""
    if value is None:
        return DEFAULT_HOURS
    if _HOURS.fullmatch(value) is None or not MIN_HOURS <= int(value) <= MAX_HOURS:
        shown = value if len(value) <= 20 else value[:20] + "…"
        raise InvalidParameter(
            f"hours must be a whole number from {MIN_HOURS} to {MAX_HOURS}; got '{shown}'.", target="hours"
        )
    return int(value)


def _point(totals: Totals, capacity_devices: int | None = None, hours: int = 1) -> dict[str, Any]:
    point: dict[str, Any] = {
        "gpuSeconds": totals.gpu_seconds,
        "gpuHours": float((Decimal(totals.gpu_seconds) / HOUR).quantize(_GPU_HOURS_QUANTUM)),
        "billableGpuSeconds": totals.billable_gpu_seconds,
        "gpuUtilizationPercent": (
            round(float(totals.utilization_weighted / totals.measured_gpu_seconds), 2)
            if totals.measured_gpu_seconds
            else None
        ),
        "gpuMemoryGb": (
            round(float(totals.memory_weighted / totals.measured_gpu_seconds), 2)
            if totals.measured_gpu_seconds
            else None
        ),
        "energyWh": float(totals.energy_wh),
        "requests": totals.requests,
        "tokensIn": totals.tokens_in,
        "tokensOut": totals.tokens_out,
        "cost": [{"amount": format(a, "f"), "currency": c} for c, a in sorted(totals.costs.items())],
    }
    if capacity_devices:
        point["allocatedPercent"] = round(100 * totals.gpu_seconds / (capacity_devices * HOUR * hours), 2)
    return point


class UsageStatsService:
    """Stats of instances, jobs and nodes (module docstring). ``clock`` returns epoch seconds."""

    def __init__(
        self,
        kernel: ResourceKernel,
        instances: SparkOllamaInstanceService,
        jobs: SparkJobService,
        usage: UsageRepository,
        clock: Callable[[], float] = time.time,
    ):
        self._kernel = kernel
        self._instances = instances
        self._jobs = jobs
        self._usage = usage
        self._clock = clock

    def instance(
        self, ctx: CallContext, subscription_id: str, resource_group: str, node: str, name: str, hours: int
    ) -> dict[str, Any]:
        """An instance's stats: 404 when the caller may not read it (or it does not exist)."""
        instance = self._instances.get(ctx, subscription_id, resource_group, node, name)
        scope = resource_scope(instance["id"], instance["systemData"]["createdAt"])
        return self._series(subscription_id, scope, instance["id"], hours)

    def job(self, ctx: CallContext, subscription_id: str, resource_group: str, name: str, hours: int) -> dict[str, Any]:
        """A job's stats: 404 when the caller may not see it (consumers: their own jobs)."""
        job = self._jobs.get(ctx, subscription_id, resource_group, name)
        scope = resource_scope(job["id"], job["systemData"]["createdAt"])
        return self._series(subscription_id, scope, job["id"], hours)

    def node(
        self, ctx: CallContext, subscription_id: str, resource_group: str, name: str, hours: int
    ) -> dict[str, Any]:
        """A node's stats — its utilisation (allocated GPU-hours against its capacity) and its earnings. Admins see
        the node's whole figures; a supplier that owns it or owned it before sees its own earnings on it (the
        allocations that began while it owned the node: earnings belong to the supplier who earned them, through a
        change of owner both ways); 403 (audited) for anyone else, 404 outside the caller's scopes."""
        key = self._kernel.key(NODES, subscription_id, resource_group, name)
        self._kernel.require(ctx, NODES, key, rbac.NODES_USAGE_READ)
        node = self._kernel.repositories.nodes.get(key)
        if node is None:
            raise NODES.not_found(key.names, key.resource_group)
        created = node.created_at
        subject = ctx.principal.subject
        if rbac.has_permission(ctx.principal, rbac.NODES_WRITE):
            scope = node_scope(resource_group, name, created)
        elif node.owner == subject or subject in node.former_owners:
            scope = supplier_node_scope(subject, resource_group, name, created)
        else:
            self._kernel.access.deny(
                ctx,
                rbac.NODES_USAGE_READ,
                Target(
                    subscription_id=subscription_id,
                    resource_group=key.resource_group,
                    resource_id=node.arm_id,
                    resource_type=NODES.type_name,
                    resource_name=node.name,
                ),
            )
        return self._series(subscription_id, scope, node.arm_id, hours, capacity_devices=node.device_total or None)

    def subscription(self, subscription_id: str, hours: int) -> dict[str, Any]:
        """A subscription's stats (no access check: for operators and tests)."""
        return self._series(subscription_id, SUBSCRIPTION_SCOPE, f"/subscriptions/{subscription_id}", hours)

    def _series(
        self, subscription_id: str, scope: str, resource_id: str, hours: int, *, capacity_devices: int | None = None
    ) -> dict[str, Any]:
        last = window_of(self._clock())
        first = last - (hours - 1) * HOUR
        stored = self._usage.rollups(subscription_id, scope, hour_key(first), hour_key(last))
        value, totals = [], Totals()
        for start in range(first, last + HOUR, HOUR):
            hour = stored.get(hour_key(start), Totals())
            totals.merge(hour)
            value.append({"timeStamp": _iso(start), **_point(hour, capacity_devices)})
        return {
            "id": f"{resource_id}/stats",
            "resourceId": resource_id,
            "timespan": f"{_iso(first)}/{_iso(last + HOUR)}",
            "interval": "PT1H",
            "hours": hours,
            "value": value,
            "totals": _point(totals, capacity_devices, hours),
        }


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
