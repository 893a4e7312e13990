"""Hourly roll-ups: the usage records of one UTC hour summed per resource, per subscription and per node. Pure
functions over an iterator of records, so memory grows with the number of *scopes* in the hour, never with the
number of records (the benchmark measures it: ``./dev bench``).

A roll-up item holds sums only — GPU-seconds used and billable, cost per currency (``Decimal``, exact sums of the
records' costs), energy (Wh), requests and tokens — plus the weights that make means exact: utilisation and GPU
memory are stored as GPU-second-weighted sums over the GPU-seconds that were measured (``measuredGpuSeconds``), so
the mean over any set of hours is Σ weighted / Σ measured.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

#: The scopes every record counts in: ``RES#{resource id}#{created}``, ``SUBSCRIPTION``,
#: ``NODE#{rg}#{node}#{created}`` and ``SUPPLIER#{supplier}#NODE#{rg}#{node}#{created}``.
SUBSCRIPTION_SCOPE = "SUBSCRIPTION"
#: Separator of the parts of a scope (never in a validated name).
SEP = "#"


def resource_scope(resource_id: str, created_at: str) -> str:
    """Scope of one resource *lifetime*: its ARM id (lower-cased) and when it was created (``systemData.createdAt``),
    so a name deleted and created again — by another user, or on another supplier's node — starts with no figures
    of the one before."""
    return f"RES{SEP}{resource_id.lower()}{SEP}{created_at}"


def node_scope(resource_group: str, node: str, created_at: str) -> str:
    """Scope of one node lifetime (a supplier's earnings and utilisation): a node registered again under the same
    name, perhaps for another supplier, starts afresh."""
    return f"NODE{SEP}{resource_group.lower()}{SEP}{node.lower()}{SEP}{created_at}"


def supplier_node_scope(supplier: str, resource_group: str, node: str, created_at: str) -> str:
    """Scope of one supplier's earnings on one node lifetime: the allocations that began while ``supplier`` owned
    the node (a meter's ``supplier``). A node handed to a new owner shows each supplier what it earned, never the
    other's figures."""
    # roll-up keys are lower-cased: the supplier goes in as a hex digest of its id, exact whatever its casing
    token = hashlib.sha256(supplier.encode()).hexdigest()[:32]
    return f"SUPPLIER{SEP}{token}{SEP}{node_scope(resource_group, node, created_at)}"


def resource_group_scope(resource_group: str) -> str:
    """Scope of every resource of one resource group (budgets filtered by resource group)."""
    return f"RG{SEP}{resource_group.lower()}"


def tag_scope(key: str, value: str) -> str:
    """Scope of every resource carrying tag ``key`` = ``value`` (budgets filtered by tag; compared lower case, as
    ARM tag names are case-insensitive — values are folded too, in the key)."""
    return f"TAG{SEP}{key.lower()}{SEP}{value.lower()}"


def _decimal(value: Any) -> Decimal:
    return Decimal(str(value)) if value is not None else Decimal(0)


@dataclass
class Totals:
    """Sums over usage records (units in the module docstring)."""

    gpu_seconds: int = 0
    billable_gpu_seconds: int = 0
    costs: dict[str, Decimal] = field(default_factory=dict)
    measured_gpu_seconds: int = 0
    utilization_weighted: Decimal = Decimal(0)
    memory_weighted: Decimal = Decimal(0)
    energy_wh: Decimal = Decimal(0)
    requests: int = 0
    tokens_in: int = 0
    tokens_out: int = 0

    def add_record(
        self, gpu_seconds: int, billable: int, costs: dict[str, Decimal], metrics: dict[str, Any] | None
    ) -> None:
        """Add one record's figures (``costs`` by currency)."""
        self.gpu_seconds += gpu_seconds
        self.billable_gpu_seconds += billable
        for currency, amount in costs.items():
            self.costs[currency] = self.costs.get(currency, Decimal(0)) + amount
        if metrics:
            if metrics.get("gpuUtilizationPercent") is not None:
                self.measured_gpu_seconds += gpu_seconds
                self.utilization_weighted += _decimal(metrics["gpuUtilizationPercent"]) * gpu_seconds
                self.memory_weighted += _decimal(metrics.get("gpuMemoryGb")) * gpu_seconds
            self.energy_wh += _decimal(metrics.get("energyWh"))
            self.requests += int(metrics.get("requests") or 0)
            self.tokens_in += int(metrics.get("tokensIn") or 0)
            self.tokens_out += int(metrics.get("tokensOut") or 0)

    def merge(self, other: Totals) -> None:
        """Add another total (e.g. the next hour's)."""
        self.add_record(other.gpu_seconds, other.billable_gpu_seconds, other.costs, None)
        self.measured_gpu_seconds += other.measured_gpu_seconds
        self.utilization_weighted += other.utilization_weighted
        self.memory_weighted += other.memory_weighted
        self.energy_wh += other.energy_wh
        self.requests += other.requests
        self.tokens_in += other.tokens_in
        self.tokens_out += other.tokens_out

    def as_stored(self) -> dict[str, Any]:
        """The stored attributes (numbers as ``Decimal``/``int``; costs as decimal strings by currency)."""
        return {
            "gpuSeconds": self.gpu_seconds,
            "billableGpuSeconds": self.billable_gpu_seconds,
            "costs": {c: format(a, "f") for c, a in sorted(self.costs.items())},
            "measuredGpuSeconds": self.measured_gpu_seconds,
            "utilizationWeighted": self.utilization_weighted,
            "memoryWeighted": self.memory_weighted,
            "energyWh": self.energy_wh,
            "requests": self.requests,
            "tokensIn": self.tokens_in,
            "tokensOut": self.tokens_out,
        }

    @classmethod
    def from_stored(cls, item: dict[str, Any]) -> Totals:
        """Inverse of :meth:`as_stored`."""
        return cls(
            gpu_seconds=int(item.get("gpuSeconds", 0)),
            billable_gpu_seconds=int(item.get("billableGpuSeconds", 0)),
            costs={c: Decimal(str(a)) for c, a in (item.get("costs") or {}).items()},
            measured_gpu_seconds=int(item.get("measuredGpuSeconds", 0)),
            utilization_weighted=_decimal(item.get("utilizationWeighted")),
            memory_weighted=_decimal(item.get("memoryWeighted")),
            energy_wh=_decimal(item.get("energyWh")),
            requests=int(item.get("requests", 0)),
            tokens_in=int(item.get("tokensIn", 0)),
            tokens_out=int(item.get("tokensOut", 0)),
        )


@dataclass(frozen=True)
class Rollup:
    """One scope's totals in one hour (``YYYY-MM-DDTHH``) of a subscription, kept until ``ttl`` (epoch s)."""

    subscription_id: str
    scope: str
    hour: str
    totals: Totals
    ttl: int


@dataclass(frozen=True)
class CostDimensions:
    """What a cost query groups and filters one resource lifetime's charges by: the resource (ARM id, name, type,
    resource group, tags), who asked for it (``submitted_by``), the node it ran on (``node_id``), that node's
    supplier then (``supplier``) and its accelerators' kind and model (a resource metered before kinds existed: a
    GPU of a model not recorded, "")."""

    resource_scope: str
    resource_id: str
    resource_name: str
    resource_type: str
    resource_group: str
    submitted_by: str
    node_id: str
    supplier: str
    tags: tuple[tuple[str, str], ...]
    accelerator_kind: str = "GPU"
    accelerator_model: str = ""

    @classmethod
    def of(cls, descriptor: dict[str, Any]) -> CostDimensions:
        """From a usage record's descriptor (domain/usage.py ``Meter.descriptor``)."""
        tags = descriptor.get("tags") or {}
        return cls(
            resource_scope=resource_scope(descriptor["resourceId"], str(descriptor.get("resourceCreatedAt", ""))),
            resource_id=str(descriptor["resourceId"]),
            resource_name=str(descriptor.get("resourceName", "")),
            resource_type=str(descriptor.get("resourceType", "")),
            resource_group=str(descriptor.get("resourceGroup", "")),
            submitted_by=str(descriptor.get("submittedBy", "")),
            node_id=str(descriptor.get("nodeId", "")),
            supplier=str(descriptor.get("supplier", "")),
            tags=tuple(sorted((str(k), str(v)) for k, v in tags.items())),
            accelerator_kind=str(descriptor.get("acceleratorKind") or "GPU"),
            accelerator_model=str(descriptor.get("acceleratorModel") or ""),
        )


@dataclass(frozen=True)
class CostHour:
    """One resource lifetime's charges in one UTC hour of a subscription (what cost queries read: kept by day, every
    resource's, deleted or not)."""

    subscription_id: str
    hour: str
    dimensions: CostDimensions
    totals: Totals
    ttl: int

    @property
    def day(self) -> str:
        return self.hour[:10]


def cost_group_scope(d: CostDimensions) -> str:
    """Key of the *cost group* of a resource's dimensions: everything a cost query groups, filters or confines by
    except the resource itself (resource group, type, submitter, node, supplier, tags, accelerator kind and model —
    exact values, as a query shows them). ``GROUP#`` and a digest of those values."""
    # as JSON, so no two groups' values run together (tags "a=b": "c" and "a": "b=c" are two groups)
    values: list[Any] = [
        d.resource_group,
        d.resource_type,
        d.submitted_by,
        d.node_id,
        d.supplier,
        [list(t) for t in d.tags],
    ]
    if (d.accelerator_kind, d.accelerator_model) != ("GPU", ""):
        # a group of charges metered before kinds existed keeps its key (and its month's items their figures)
        values.append([d.accelerator_kind, d.accelerator_model])
    return f"GROUP{SEP}{hashlib.sha256(json.dumps(values).encode()).hexdigest()[:32]}"


def group_dimensions(d: CostDimensions) -> CostDimensions:
    """The dimensions of the cost group ``d`` counts in (:func:`cost_group_scope`): ``d`` without the resource's id
    and name."""
    return replace(d, resource_scope=cost_group_scope(d), resource_id="", resource_name="")


@dataclass
class CostDay:
    """One resource lifetime's charges in one UTC day: its dimensions and its totals by hour (``YYYY-MM-DDTHH``)."""

    subscription_id: str
    day: str
    dimensions: CostDimensions
    hours: dict[str, Totals] = field(default_factory=dict)


@dataclass
class CostMonth:
    """One cost group's charges in one UTC month (``YYYY-MM``): its dimensions (:func:`group_dimensions`) and its
    totals by day (``YYYY-MM-DD``) — the month roll-up a cost query over whole days reads (Slurm's day table)."""

    subscription_id: str
    month: str
    dimensions: CostDimensions
    days: dict[str, Totals] = field(default_factory=dict)


class HourRollup:
    """Accumulates the records of one hour into totals per (subscription, scope)."""

    def __init__(self, hour: str):
        self.hour = hour
        self.scopes: dict[tuple[str, str], Totals] = {}
        self.resources: dict[tuple[str, str], tuple[CostDimensions, Totals]] = {}
        self.groups: dict[tuple[str, str], tuple[CostDimensions, Totals]] = {}
        self.records = 0

    def add(
        self,
        descriptor: dict[str, Any],
        gpu_seconds: int,
        billable: int,
        costs: dict[str, Decimal],
        metrics: dict[str, Any] | None,
    ) -> None:
        """Count one usage record (its descriptor: ``subscriptionId``, ``resourceId``, ``resourceCreatedAt``,
        ``resourceGroup``, ``tags``, ``nodeResourceGroup``, ``nodeName``, ``nodeCreatedAt``, ``supplier``) in its
        scopes — the resource lifetime, the subscription, the node lifetime, the supplier's share of it, the resource
        group and each tag — and in its resource's cost hour; ``costs`` by currency (a subscription's or node's hour
        may hold several: each allocation has the currency it locked)."""
        self.records += 1
        subscription = str(descriptor["subscriptionId"]).lower()
        node_args = (descriptor["nodeResourceGroup"], descriptor["nodeName"], str(descriptor.get("nodeCreatedAt", "")))
        dimensions = CostDimensions.of(descriptor)
        scopes = [
            dimensions.resource_scope,
            SUBSCRIPTION_SCOPE,
            node_scope(*node_args),
            supplier_node_scope(str(descriptor.get("supplier", "")), *node_args),
        ]
        if dimensions.resource_group:
            scopes.append(resource_group_scope(dimensions.resource_group))
        scopes.extend(tag_scope(k, v) for k, v in dimensions.tags)
        for scope in scopes:
            totals = self.scopes.get((subscription, scope))
            if totals is None:
                totals = self.scopes[(subscription, scope)] = Totals()
            totals.add_record(gpu_seconds, billable, costs, metrics)
        resource = (subscription, dimensions.resource_scope)
        if resource not in self.resources:
            self.resources[resource] = (dimensions, Totals())
        self.resources[resource][1].add_record(gpu_seconds, billable, costs, metrics)
        group = (subscription, cost_group_scope(dimensions))
        if group not in self.groups:
            self.groups[group] = (group_dimensions(dimensions), Totals())
        self.groups[group][1].add_record(gpu_seconds, billable, costs, metrics)

    def rollups(self, ttl: int) -> Iterable[Rollup]:
        """The roll-ups of the hour, each kept until ``ttl`` (epoch s)."""
        for (subscription, scope), totals in self.scopes.items():
            yield Rollup(subscription, scope, self.hour, totals, ttl)

    def cost_hours(self, ttl: int) -> Iterable[CostHour]:
        """Every resource lifetime's charges in the hour, each kept until ``ttl`` (epoch s)."""
        for (subscription, _), (dimensions, totals) in self.resources.items():
            yield CostHour(subscription, self.hour, dimensions, totals, ttl)

    def cost_group_hours(self, ttl: int) -> Iterable[CostHour]:
        """Every cost group's charges in the hour (:func:`group_dimensions`: the sums of its resources'), each kept
        until ``ttl`` (epoch s)."""
        for (subscription, _), (dimensions, totals) in self.groups.items():
            yield CostHour(subscription, self.hour, dimensions, totals, ttl)
