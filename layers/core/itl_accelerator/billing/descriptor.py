"""What an allocation is billed as: :class:`BillingDescriptor`, the one place a billed field is declared.

An *allocation* (an instance while it serves; each attempt of a job, and each node part of it, while it runs:
docs/BILLING.md, "Metering") is billed as who holds the devices (the ARM resource, its subscription, resource group,
tags and submitter), where (the node, its resource group, its supplier when the allocation began, its region and
SKU), what (the devices' kind and model, and how many) and, for a job, which run (its attempt, under the job's own
allocation id). That is fixed when the allocation's meter starts (:func:`describe`), and it then travels unchanged:
written on the meter and on every usage record of it, kept with each claim of the daily export
(``billed.descriptor``), on each correction line and on each subscription's bill entries. The FOCUS cells are
computed from it (billing/focus.py ``COLUMNS``), so a tag changed after a claim changes no cell already billed.

**One declaration, shared.** :class:`~itl_accelerator.domain.usage.Meter` is a descriptor with the meter's state and
:class:`~itl_accelerator.billing.focus.ChargeLine` a descriptor with one window's charge: both subclass it, so each
field is declared here once, keyword-only. A new billed field is one field here (with a default, so that items
stored before it read with that default), how :func:`describe` reads it from the workload or its node, and one column
of billing/focus.py ``COLUMNS`` (then its row in docs/BILLING.md, "Columns").

**The stored shape** (:meth:`BillingDescriptor.as_stored`, :func:`stored_fields`) is a JSON object of the fields'
camelCase names, a persisted contract (tests/unit/test_stored_descriptors.py holds each shape it has had): the 14
keys metering began with (``subscriptionId`` ... ``sku``, ``gpus``, ``tags``), then ``resourceCreatedAt`` and
``nodeCreatedAt``, ``submittedBy``, ``acceleratorKind`` and ``acceleratorModel``, in that order, are written on
every descriptor; then only on a job's later attempt or further node part, ``allocationId`` (the job's:
:attr:`~BillingDescriptor.job_allocation_id`) and ``attempt``; and a field declared after those only when it is not
at its default — so a new field leaves the items of allocations without it exactly as they were. Read back, a field
without a default must be present (``KeyError``) and is taken as stored; one with a default that is missing or empty
takes its default (an allocation metered before kinds existed is a ``GPU`` of a model not recorded, attempt 1), else
the stored value as its default's type (``str``, ``int``, ``dict``).
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from itl_accelerator.domain.records import Job, Node, ResourceKey, Workload
from itl_accelerator.resources import NODES

#: Field metadata: the stored key, when it is not the field's camelCase name.
_KEY = "stored_key"
#: Field metadata: stored only on a job's later attempt or further node part (``job_allocation_id`` set).
_JOB_PART = "job_part_only"


@dataclass(frozen=True, kw_only=True)
class BillingDescriptor:
    """What one allocation is billed as (module docstring). Fields without a default are non-empty strings."""

    subscription_id: str  # the ITL subscription billed (FOCUS BillingAccountId /subscriptions/{id})
    resource_group: str  # the resource's group (SubAccountId, SubAccountName)
    resource_id: str  # ARM id of the instance or job (ResourceId)
    resource_name: str  # (ResourceName)
    resource_type: str  # "ITL.Accelerator/sparkNodes/sparkOllamaInstances", ".../sparkJobs", ".../capacityReservations"
    service: str  # "instances" | "jobs" | "reservations": the service it is billed under (billing/focus.py SERVICES)
    node_resource_group: str = ""  # the node's resource group: with node_name, the node's key
    node_name: str  # (x_NodeName)
    node_id: str  # ARM id of the node it ran on (x_NodeId)
    supplier: str  # the node's owner when the allocation began: what it earns is theirs (PublisherName)
    region: str  # the node's location (RegionId, RegionName)
    sku: str  # the node's SKU name, e.g. "DGX-H100-8GPU" (SkuId)
    gpus: int = 0  # devices held, of accelerator_kind (a charge line bills device-seconds, and may leave it 0)
    tags: dict[str, str] = field(default_factory=dict)  # the resource's ARM tags (Tags)
    resource_created_at: str = ""  # the resource's systemData.createdAt: tells apart lifetimes of one ARM id
    node_created_at: str = ""  # the node's, likewise
    submitted_by: str = ""  # who asked for the work: a job's submitter, an instance's creator
    accelerator_kind: str = "GPU"  # the devices' kind: the unit, "{kind}-Hours" (x_AcceleratorKind)
    accelerator_model: str = ""  # their model as the node names it, "" when not recorded (x_AcceleratorModel)
    #: the job's own allocation id (its first attempt's operation id) on a later attempt or further node part, which
    #: its FOCUS rows carry as x_AllocationId; "" on every other allocation (billed under its meter's own id)
    job_allocation_id: str = field(default="", metadata={_KEY: "allocationId", _JOB_PART: True})
    attempt: int = field(default=1, metadata={_JOB_PART: True})  # which run of a job (x_Attempt); 1 otherwise
    #: the ARM id of the capacity reservation the allocation is (a reservation's own meter, billed for its whole
    #: window) or runs in (a job in a reservation, billed nothing beyond it): FOCUS CapacityReservationId; "" none
    capacity_reservation_id: str = ""

    def billed_fields(self) -> dict[str, Any]:
        """The descriptor's fields of this value (a meter's or a charge line's too), by name: what builds a
        :class:`~itl_accelerator.domain.usage.Meter` or a :class:`~itl_accelerator.billing.focus.ChargeLine`."""
        return {f.name: getattr(self, f.name) for f in _FIELDS}

    def as_stored(self) -> dict[str, Any]:
        """The stored shape (module docstring): camelCase keys in declaration order; the job-part keys only when
        :attr:`job_allocation_id` is set, a later field only when not at its default. Values as they are (``tags``
        the same dict)."""
        part = bool(self.job_allocation_id)
        found: dict[str, Any] = {}
        for s in _STORED:
            value = getattr(self, s.name)
            if s.always or (part if s.job_part else value != s.default):
                found[s.key] = value
        return found


@dataclass(frozen=True)
class _Stored:
    """How one field is stored and read back."""

    name: str
    key: str
    required: bool
    default: Any
    job_part: bool
    always: bool  # written on every descriptor (the fields up to accelerator_model), else only when not at default


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


_FIELDS = fields(BillingDescriptor)
#: The fields written on every descriptor: those it had when kinds came (commit a391660), up to accelerator_model.
_ALWAYS = 1 + [f.name for f in _FIELDS].index("accelerator_model")
_STORED: tuple[_Stored, ...] = tuple(
    _Stored(
        name=f.name,
        key=f.metadata.get(_KEY) or _camel(f.name),
        required=f.default is MISSING and f.default_factory is MISSING,
        default=f.default_factory() if f.default_factory is not MISSING else f.default,
        job_part=bool(f.metadata.get(_JOB_PART)),
        always=n < _ALWAYS,
    )
    for n, f in enumerate(_FIELDS)
)
#: The fields every descriptor must hold (non-empty strings).
REQUIRED_FIELDS: tuple[str, ...] = tuple(s.name for s in _STORED if s.required)


def stored_fields(stored: dict[str, Any]) -> dict[str, Any]:
    """The descriptor fields of a stored descriptor, by name (module docstring, "The stored shape"). ``KeyError`` when
    a field without default is missing: that item was never written by a meter."""
    found: dict[str, Any] = {}
    for s in _STORED:
        if s.required:
            found[s.name] = stored[s.key]
        else:
            value = stored.get(s.key)
            found[s.name] = type(s.default)(value) if value else type(s.default)(s.default)
    return found


def from_stored(stored: dict[str, Any]) -> BillingDescriptor:
    """The descriptor a stored one reads as (:func:`stored_fields`)."""
    return BillingDescriptor(**stored_fields(stored))


def describe(
    workload: Workload,
    node: Node | None,
    *,
    service: str,
    resource_type: str,
    attempt: int = 1,
    part: int = 1,
    where: ResourceKey | None = None,
) -> BillingDescriptor:
    """What an allocation of ``workload`` on ``node`` is billed as (None when the node is gone: the node is then named
    by its key ``where``, by default the workload's). ``service`` and ``resource_type``: the workload's (``instances``
    and the instances' ARM type, or ``jobs``). The supplier is the node's owner when the workload reserved its
    devices (``node_owner``: what it earns is theirs), or for a gang job's further ``part`` (2, 3, ...) the owner of
    that part's node; "unknown" when neither is known, as are a gone node's region (the workload's location, if any)
    and SKU. A job's later ``attempt`` (domain/retries.py) or further ``part`` is billed under the job's own
    allocation id, its operation id (services/common/metering.py names each one's meter). A job run in a capacity
    reservation names it (``capacity_reservation_id``: the reservation's ARM id)."""
    where = where or workload.node_key
    return BillingDescriptor(
        subscription_id=workload.key.subscription_id,
        resource_group=workload.key.resource_group,
        resource_id=workload.arm_id,
        resource_name=str(workload.document["name"]),
        resource_type=resource_type,
        service=service,
        node_resource_group=where.resource_group,
        node_name=node.name if node else where.name,
        node_id=node.arm_id if node else NODES.id(where.subscription_id, where.resource_group, where.names),
        supplier=(workload.node_owner if part == 1 else None) or (node.owner if node else "") or "unknown",
        region=(node.location if node else workload.location) or "unknown",
        sku=node.sku_name if node else "unknown",
        gpus=workload.devices,
        tags=dict(workload.document.get("tags") or {}),
        resource_created_at=workload.created_at,
        node_created_at=node.created_at if node else "",
        submitted_by=_submitter(workload),
        accelerator_kind=node.kind if node else getattr(workload, "kind", "GPU"),
        accelerator_model=(node.accelerator.model if node else "") or "",
        job_allocation_id=str(workload.operation_id) if attempt > 1 or part > 1 else "",
        attempt=attempt,
        # a job run in a capacity reservation: its devices are the reservation's, billed whole with it (its own terms
        # are priced 0, services/common/placement.py ``Placement._terms``)
        capacity_reservation_id=(workload.capacity_reservation_id or "") if isinstance(workload, Job) else "",
    )


def _submitter(workload: Workload) -> str:
    """Who asked for the work: a job's submitter, an instance's creator (``systemData.createdBy``)."""
    if isinstance(workload, Job):
        return workload.submitted_by
    return str((workload.document.get("systemData") or {}).get("createdBy", ""))
