"""Typed records of the provider's aggregates, as the repositories (itl_accelerator/repositories) take and return
them: no attribute names, index keys or condition expressions here — those belong to each repository.

- :class:`ResourceKey` names a resource (subscription, resource group, type, names).
- :class:`Node` — a GPU node and its capacity counters; :class:`FleetShape` — how many nodes of a subscription
  share a GPU model, location and size (admission reads shapes, not nodes).
- :class:`Instance` and :class:`Job` — the workloads placed on nodes, with the lease (:class:`Lease`) of the
  workflow that owns them, the capacity they hold and the billing terms they locked.
- :class:`Operation` — an ARM long-running operation (its Azure-AsyncOperation body plus what the provider keeps).
- :class:`Reservation` / :class:`Release` — GPUs and GPU memory taken from or given back to a node in the same
  transaction as the workload's change.

Units: GPUs are counts, memory is GiB of GPU memory, times are epoch seconds unless named ``*_at`` (UTC ISO 8601).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from itl_accelerator.arm import normalize_location, parse_resource_id
from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.accelerators import (
    GPU,
    Accelerator,
    job_vendor,
    kind_of_key,
    model_key,
    model_of_key,
    vendor_key,
)
from itl_accelerator.domain.backends import NodeBackend
from itl_accelerator.domain.pricing import PriceCeiling
from itl_accelerator.domain.quotas import QuotaScope
from itl_accelerator.domain.runs import JobRun
from itl_accelerator.domain.states import (
    Availability,
    JobStatus,
    LeaseKind,
    OperationKind,
    OperationStatus,
    ProvisioningState,
)


@dataclass(frozen=True)
class ResourceKey:
    """One resource: subscription, resource group, ARM type segment of the leaf (``sparkNodes``,
    ``sparkOllamaInstances``, ``sparkJobs``) and the names from the top-level resource down to the leaf
    (``("dgx-1",)`` for a node, ``("dgx-1", "llama")`` for an instance). Names match case-insensitively (ARM); the
    casing here is the one last supplied."""

    subscription_id: str
    resource_group: str
    type_segment: str
    names: tuple[str, ...]

    @property
    def name(self) -> str:
        """The leaf's name."""
        return self.names[-1]

    def parent(self) -> ResourceKey:
        """The key of an instance's node. ``ValueError`` for a top-level resource."""
        if len(self.names) < 2:
            raise ValueError(f"{self.type_segment} {self.name} has no parent")
        return ResourceKey(self.subscription_id, self.resource_group, "sparkNodes", self.names[:-1])

    def same(self, other: ResourceKey | None) -> bool:
        """Whether ``other`` names the same resource (ARM names match case-insensitively)."""
        return other is not None and _fold(self) == _fold(other)


def _fold(key: ResourceKey) -> tuple[str, ...]:
    return (key.subscription_id.lower(), key.resource_group.lower(), key.type_segment, *(n.lower() for n in key.names))


def node_key(subscription_id: str, resource_group: str, name: str) -> ResourceKey:
    """The key of a node."""
    return ResourceKey(subscription_id, resource_group, "sparkNodes", (name,))


@dataclass(frozen=True)
class Lease:
    """A workload's lease: a workflow owns it and must make progress by ``until`` (``LEASE``, the reconciler's), or a
    running job's next check on the DGX Platform is due then (``TRACK``, the job tracker's). Epoch seconds."""

    kind: LeaseKind
    until: float

    @classmethod
    def owned(cls, until: float) -> Lease:
        """A workflow's lease until ``until``."""
        return cls(LeaseKind.LEASE, until)

    @classmethod
    def tracked(cls, until: float) -> Lease:
        """A running job's next check at ``until``."""
        return cls(LeaseKind.TRACK, until)


def gpu_model_key(gpu_model: str | None) -> str:
    """A GPU model as placement compares it: lower case, without spaces (``"H100 SXM"`` → ``"h100sxm"``): the
    accelerator key of a GPU (domain/accelerators.py ``accelerator_key``)."""
    return model_key(gpu_model)


@dataclass(frozen=True)
class Hold:
    """What one workload holds on a node, and until when — the node's capacity calendar (domain/calendar.py):
    ``holder`` (:func:`holder_id` of the workload), ``devices`` devices and ``memory_gb`` GiB, ``until`` (epoch seconds:
    a job's placement plus its ``maxDurationMinutes``, Slurm's start time plus time limit; 0: open-ended — an
    instance, a job without a maximum duration)."""

    holder: str
    devices: int
    memory_gb: int
    until: int = 0
    #: the capacity reservation whose booked devices these are (:func:`holder_id` of it; "": none) — a job run in a
    #: reservation takes its devices out of the reservation's booking, not beside it (domain/calendar.py)
    reservation: str = ""


@dataclass(frozen=True)
class Booking:
    """A capacity reservation's claim on a node (issue 44): ``devices`` devices and ``memory_gb`` GiB kept for
    ``reservation`` (:func:`holder_id` of the reservation) over ``[start, end)`` (epoch seconds, whole hours). Written
    on the node item with the reservation, in one transaction (repositories/protocols.py ``CapacityReservationRepository.book``); placement and
    the calendar count it as taken in its window for any work not run in that reservation."""

    reservation: str
    devices: int
    memory_gb: int
    start: int
    end: int

    def overlaps(self, start: float, end: float) -> bool:
        """Whether it is in force at some time of ``[start, end)``."""
        return self.start < end and start < self.end


@dataclass(frozen=True)
class StartEstimate:
    """When a waiting job is expected to start, as it records it (domain/calendar.py): ``at`` (epoch seconds; None:
    not known, ``why`` says why in words), its ``position`` among its subscription's waiting jobs (1: served first),
    and when it was estimated (``estimated_at``, epoch seconds)."""

    at: int | None
    position: int
    estimated_at: int
    why: str = ""


def holder_id(key: ResourceKey) -> str:
    """How a node's calendar names the workload of ``key`` (``sparkJobs/rg1/train``; names lower case, as in keys)."""
    return "/".join((key.type_segment, key.resource_group.lower(), *(n.lower() for n in key.names)))


def reservation_key(arm_id: str | None) -> ResourceKey | None:
    """The key of the capacity reservation of ARM id ``arm_id``; None when ``arm_id`` is None or not the id of a
    ``capacityReservations`` resource of this provider."""
    parsed = parse_resource_id(arm_id or "")
    if parsed is None or len(parsed[2]) != 1 or parsed[2][0][0].lower() != "capacityreservations":
        return None
    sub, rg, [(_, name)] = parsed
    return ResourceKey(sub, rg, "capacityReservations", (name,))


def reservation_of_ref(subscription_id: str, ref: str) -> ResourceKey | None:
    """The key of the capacity reservation a node's booking names (its :func:`holder_id`,
    ``capacityReservations/{rg}/{name}``) in ``subscription_id``; None when ``ref`` names no reservation."""
    parts = ref.split("/")
    if len(parts) != 3 or parts[0] != "capacityReservations":
        return None
    return ResourceKey(subscription_id, parts[1], "capacityReservations", (parts[2],))


def reservation_ref(arm_id: str | None) -> str:
    """:func:`holder_id` of the capacity reservation of ARM id ``arm_id`` (``capacityReservations/{rg}/{name}``,
    lower case); "" when it is not one (:func:`reservation_key`)."""
    key = reservation_key(arm_id)
    return "" if key is None else holder_id(key)


@dataclass
class Node:
    """A GPU node as stored: its ARM envelope ``document`` (without ``etag`` and the computed capacity), its
    ``etag``, its capacity — totals and what instances and jobs hold (GPUs, GiB), how many instances it has — and the
    suppliers that owned it before (``former_owners``, oldest first: they keep reading what they earned there).
    The typed views below read the document; decisions use them, never the raw document."""

    key: ResourceKey
    document: dict[str, Any]
    etag: str
    device_total: int = 0
    memory_gb_total: int = 0
    devices_allocated: int = 0
    memory_gb_allocated: int = 0
    child_count: int = 0
    former_owners: tuple[str, ...] = ()
    #: the sort key of the fleet shape item it is counted in (None: its shape's own, :attr:`FleetShape.sort_key`; a
    #: node item stored before vendors were counted reads as counted in :attr:`FleetShape.legacy_sort_key`); the
    #: repositories count it out of that one when it changes
    counted_shape: str | None = None
    #: how its platform reports it (the node health sweep's bookkeeping, services/schedules/node_health.py:
    #: ``{state, reason, placeable, gres, warnings, checkedAt}``; None: never checked — a DGX node, or a Slurm node
    #: not yet seen); not part of its etag
    backend_status: dict[str, Any] | None = None
    #: what each workload on it holds and until when (written with each reservation and release, in the same
    #: update; a node stored before has none, and what it holds beyond them is open-ended: :attr:`unaccounted`)
    holds: tuple[Hold, ...] = ()
    #: the capacity reservations booked on it (:class:`Booking`), written with each reservation and cancellation
    bookings: tuple[Booking, ...] = ()
    #: bumped by every booking and cancellation written on it (``calRev``): a placement is conditioned on the one it
    #: read, so it cannot land beside a booking it did not see
    calendar_revision: int = 0
    #: bumped by every reservation and release of its devices (``holdRev``): a booking is conditioned on the one it
    #: read, so it cannot land beside work it did not see
    hold_revision: int = 0
    #: the end of its last booking (epoch seconds; 0: none): the booking calendar index's sort key (``bookedUntil``,
    #: GSI6). Set by each booking; a cancellation leaves it (later than the truth: the node is then read by the other
    #: read of a booking). None: a node stored before the index, in it from its next change.
    booked_until: int | None = None

    @property
    def unaccounted(self) -> Hold | None:
        """The devices and GiB it holds that no :attr:`holds` entry accounts for (work placed before holds were
        written), as one open-ended hold; None when every device held is accounted for."""
        devices = self.devices_allocated - sum(h.devices for h in self.holds)
        memory = self.memory_gb_allocated - sum(h.memory_gb for h in self.holds)
        return Hold("", max(devices, 0), max(memory, 0)) if devices > 0 or memory > 0 else None

    @property
    def properties(self) -> dict[str, Any]:
        return dict(self.document.get("properties") or {})

    @property
    def backend_placeable(self) -> bool:
        """Whether its platform takes work on it (as last checked: a Slurm node DOWN or drained does not; one never
        checked is taken to)."""
        return self.backend_status is None or bool(self.backend_status.get("placeable", True))

    @property
    def placeable(self) -> bool:
        """Whether placement may put new work on it: ``Available`` and its platform taking work (the placement
        index holds it only then)."""
        return self.availability == Availability.AVAILABLE and self.backend_placeable

    @property
    def backend(self) -> NodeBackend:
        """Where its work runs: the DGX Platform or a Slurm cluster's node (domain/backends.py)."""
        return NodeBackend.of_properties(self.properties)

    @property
    def devices(self) -> tuple[str, str, str]:
        """What its devices are, as placement compares them: kind, vendor and model keys. Work placed on it asked for
        these, so they may change only while it holds nothing (the repositories refuse it otherwise)."""
        a = self.accelerator
        return a.kind.lower(), vendor_key(a.vendor), model_key(a.model)

    @property
    def held_identity(self) -> tuple[str, ...]:
        """What work placed on it asked for and runs on: its :attr:`devices` and its :attr:`backend` (platform, cluster
        and Slurm node). The repositories refuse a change of it while anything holds its devices."""
        b = self.backend
        return (*self.devices, b.type, b.cluster, b.node_name.lower())

    @property
    def counted_shape_key(self) -> str:
        """The sort key of the shape item it is counted in now (:attr:`counted_shape`)."""
        return self.counted_shape or self.shape.sort_key

    @property
    def arm_id(self) -> str:
        return str(self.document["id"])

    @property
    def name(self) -> str:
        """The name as last supplied."""
        return str(self.document.get("name") or self.key.name)

    @property
    def owner(self) -> str:
        """The supplier that owns the node (its token subject)."""
        return str(self.properties.get("owner") or "")

    @property
    def availability(self) -> Availability:
        return Availability(self.properties.get("availability") or Availability.AVAILABLE)

    @property
    def terms(self) -> BillingTerms:
        """The node's pricing, as the terms a new allocation on it locks."""
        return BillingTerms.from_pricing(self.properties.get("pricing") or {})

    @property
    def accelerator(self) -> Accelerator:
        """Its devices: kind, vendor, model, count, memory per device (domain/accelerators.py; a node stored before
        kinds existed is its ``hardwareSpecs`` GPUs, NVIDIA ones)."""
        return Accelerator.of_properties(self.properties)

    @property
    def kind(self) -> str:
        """Its accelerator kind (``GPU``, ``TPU``...)."""
        return self.accelerator.kind

    @property
    def gpu_model(self) -> str | None:
        """Its accelerator model as registered (``H100``, ``v5e``; None when not said)."""
        return self.accelerator.model or None

    @property
    def memory_gb_per_device(self) -> int:
        """GiB of memory per device (0 when unknown)."""
        return self.accelerator.memory_gb

    @property
    def location(self) -> str:
        """The location as stored (compare with :func:`~itl_accelerator.arm.normalize_location`)."""
        return str(self.document.get("location") or "")

    @property
    def created_at(self) -> str:
        return str((self.document.get("systemData") or {}).get("createdAt", ""))

    @property
    def sku_name(self) -> str:
        return str((self.document.get("sku") or {}).get("name", ""))

    @property
    def free_devices(self) -> int:
        return self.device_total - self.devices_allocated

    @property
    def free_memory_gb(self) -> int:
        return self.memory_gb_total - self.memory_gb_allocated

    @property
    def shape(self) -> FleetShape:
        """The fleet shape the node counts in (with its pricing)."""
        return FleetShape(
            self.accelerator.key,
            normalize_location(self.location),
            self.device_total,
            self.memory_gb_total,
            terms=self.terms,
            resource_group=self.key.resource_group.lower(),
            vendor=self.accelerator.vendor,
        )


@dataclass(frozen=True)
class FleetShape:
    """A kind of node in a subscription: GPU model (:func:`gpu_model_key`, "" when unknown), location (normalised),
    GPUs and GiB of GPU memory in all; ``nodes``: how many nodes have it; ``terms``: the pricing of those nodes (the
    shape items of a subscription are counted per pricing too, so a job's price ceiling is read from them:
    domain/pricing.py). Two shapes are equal when their hardware and place are — whatever they cost."""

    gpu_model: str
    location: str
    device_total: int
    memory_gb_total: int
    nodes: int = 1
    terms: BillingTerms | None = field(default=None, compare=False)
    #: how many of its nodes are ``Available`` (they can take work now)
    available_nodes: int = field(default=0, compare=False)
    #: the resource group of its nodes (lower case; "" when not known): shapes are counted per group too, so a job's
    #: price ceiling is made of the prices its submitter can see
    resource_group: str = field(default="", compare=False)
    #: who makes its nodes' devices ("": a shape item counted before vendors were, which matches any vendor)
    vendor: str = ""

    @property
    def available(self) -> bool:
        """Whether one of its nodes is ``Available``."""
        return self.available_nodes > 0

    @property
    def kind(self) -> str:
        """The accelerator kind of its nodes (``GPU`` for a shape stored before kinds existed)."""
        return kind_of_key(self.gpu_model)

    @property
    def sort_key(self) -> str:
        """What tells shape items apart, and orders them: hardware and place, resource group, pricing, then vendor
        (``SHAPE#{model}#{location}#{gpus:03}#{memory:07}#{rg}#{currency}#{price}#{increment}#{minimum}#@{vendor}``,
        ``-`` for no model, group or pricing). Both repositories key shape items by it; a node item records the one
        it is counted in (:attr:`Node.counted_shape`)."""
        vendor = vendor_key(self.vendor)
        return f"{self.legacy_sort_key}#@{vendor}" if vendor else self.legacy_sort_key

    @property
    def legacy_sort_key(self) -> str:
        """:attr:`sort_key` without the vendor: how shape items were keyed before vendors were counted (a node item
        stored then is counted in it)."""
        hardware = f"SHAPE#{self.gpu_model or '-'}#{self.location}#{self.device_total:03d}#{self.memory_gb_total:07d}"
        place = f"{hardware}#{self.resource_group or '-'}"
        terms = self.terms
        if terms is None:
            return f"{place}#-"
        price = format(terms.price_per_gpu_hour.normalize(), "f")
        return f"{place}#{terms.currency}#{price}#{terms.billing_increment_seconds}#{terms.minimum_billable_seconds}"

    def matches(self, key: str, location: str, kind: str = GPU, vendor: str | None = None) -> bool:
        """Whether it has accelerator ``key`` (domain/accelerators.py ``accelerator_key``: a model of a kind, or a
        kind's any model — ``""`` is any GPU, ``tpu:`` any TPU; ``kind`` says which when the key names no model) of
        ``vendor`` (None: any; a shape counted before vendors were matches any) and is in ``location`` (normalised;
        "" matches any)."""
        if model_of_key(key):
            held = self.gpu_model == key
        else:
            held = self.kind.lower() == (kind_of_key(key) if ":" in key else kind).lower()
        made = vendor is None or not self.vendor or vendor_key(self.vendor) == vendor_key(vendor)
        return held and made and (not location or self.location == location)

    def could_hold(self, devices: int, memory_gb: int) -> bool:
        """Whether a node of this shape could ever hold ``devices`` GPUs with ``memory_gb`` GiB of GPU memory (GPU
        memory is per GPU: :func:`per_device_memory_fits`)."""
        return (
            self.device_total >= devices
            and self.memory_gb_total >= memory_gb
            and per_device_memory_fits(self.device_total, self.memory_gb_total, devices, memory_gb)
        )


def per_device_memory_fits(node_devices: int, node_memory_gb: int, devices: int, memory_gb: int) -> bool:
    """Whether ``memory_gb`` of GPU memory fits on ``devices`` GPUs of a node with ``node_devices`` GPUs holding
    ``node_memory_gb`` GiB in all (GPU memory is per GPU)."""
    return node_devices > 0 and memory_gb * node_devices <= devices * node_memory_gb


@dataclass(frozen=True)
class Demand:
    """What a workload asks of a node: ``devices`` free devices of ``kind`` (GPUs unless said) and ``memory_gb`` free
    GiB of device memory, on a node of accelerator key ``gpu_model`` (domain/accelerators.py ``accelerator_key``: a
    GPU's model key; "" any GPU) in ``location`` (normalised) when given, and — when ``within`` is given — billing by terms
    within one of ``within`` (same currency, no higher price, increment or minimum: domain/pricing.py; an empty
    tuple admits no node)."""

    devices: int
    memory_gb: int
    gpu_model: str = ""
    location: str = ""
    within: tuple[BillingTerms, ...] | None = None
    kind: str = GPU
    #: who must make the devices (None: any vendor)
    vendor: str | None = None


#: The most nodes one job runs on at once (a gang: services/common/placement.py).
MAX_GANG_NODES = 16
#: Pages of the placement index a gang's placement reads (the repository's page: 25 entries): a gang needs its nodes
#: side by side in what is read, whatever else the pages hold.
GANG_CANDIDATE_PAGES = 4


@dataclass(frozen=True)
class Reservation:
    """``devices``/``memory_gb`` to take on ``node`` as it was read (``etag`` and totals): the reservation fails when the
    node changed since (its billing terms, shape or availability — :class:`~itl_accelerator.repositories.errors.NodeChanged`)
    or cannot hold it. ``child``: instances added to its count (1 for a new instance); ``for_job``: the job
    reserving — a node drained for a job takes no other job (it is refused as a shortfall); a reservation of no job
    (an instance, which an admin places on a node of its choice) is not held back by a drain."""

    node: ResourceKey
    devices: int
    memory_gb: int
    device_total: int
    memory_gb_total: int
    etag: str
    child: int = 0
    for_job: ResourceKey | None = None
    quota: QuotaScope | None = None
    #: devices counted in ``quota`` (None: ``devices``) — a gang's first part counts the whole gang's, the others none
    #: (one quota counter is written once per transaction)
    quota_devices: int | None = None
    #: the node's calendar entry it writes (:class:`Hold`; None: none — a change of an instance's size keeps its own)
    hold: Hold | None = None
    #: the node's bookings as read (:attr:`Node.calendar_revision`): the reservation fails when a booking was
    #: written or cancelled since (``NodeChanged``: read again and decide again)
    calendar_revision: int = 0
    #: the node's holds as read (:attr:`Node.hold_revision`), when it has bookings (None otherwise): room beside a
    #: booking is judged on the holds read, so the reservation fails when another reservation or release landed since
    #: — two placements that each read the same devices free beside a window cannot both take them
    hold_revision: int | None = None

    @property
    def quota_charge(self) -> int:
        """Devices this reservation counts in its quotas."""
        return self.devices if self.quota_devices is None else self.quota_devices

    @classmethod
    def on(
        cls,
        node: Node,
        devices: int,
        memory_gb: int,
        *,
        child: int = 0,
        for_job: ResourceKey | None = None,
        holder: ResourceKey | None = None,
        until: int = 0,
    ) -> Reservation:
        """A reservation of ``devices``/``memory_gb`` on ``node`` as read, counted in the subscription's GPU quotas of the
        node's location and GPU model (domain/quotas.py); ``holder`` (default ``for_job``) holds them ``until`` (epoch
        seconds, 0 open-ended) in the node's calendar."""
        quota = QuotaScope(node.shape.location, node.shape.gpu_model)
        held_by = holder or for_job
        hold = Hold(holder_id(held_by), devices, memory_gb, until) if held_by is not None else None
        return cls(
            node.key,
            devices,
            memory_gb,
            node.device_total,
            node.memory_gb_total,
            node.etag,
            child,
            for_job,
            quota,
            None,
            hold,
            node.calendar_revision,
            node.hold_revision if node.bookings else None,
        )


@dataclass(frozen=True)
class Release:
    """``devices``/``memory_gb`` given back to ``node``; ``child`` added to its instance count (-1 when an instance
    goes); ``quota``: the quotas the GPUs were counted in when reserved (None: none — a workload reserved before
    quotas were counted)."""

    node: ResourceKey
    devices: int
    memory_gb: int
    child: int = 0
    quota: QuotaScope | None = None
    #: devices given back to ``quota`` (None: ``devices``): a gang's first part gives back the whole gang's
    quota_devices: int | None = None
    #: the node's calendar entry it removes (:func:`holder_id`; "" none)
    holder: str = ""

    @property
    def quota_charge(self) -> int:
        """Devices this release gives back to its quotas."""
        return self.devices if self.quota_devices is None else self.quota_devices

    @classmethod
    def of(cls, workload: Workload, *, child: int = 0, all_held: bool = True) -> Release:
        """What ``workload`` gives back: everything it holds (``all_held`` False: nothing but ``child``) — on its
        node; a gang job's first part gives back the whole gang's quota (:func:`gang_releases` the other parts)."""
        devices, memory = (workload.devices, workload.memory_gb) if all_held else (0, 0)
        parts = len(workload.gang_nodes) + 1 if isinstance(workload, Job) else 1
        quota_devices = devices * parts if parts > 1 else None
        holder = holder_id(workload.key) if all_held else ""
        return cls(
            workload.node_key, devices, memory, child, workload.quota if all_held else None, quota_devices, holder
        )


def gang_releases(job: Job) -> tuple[Release, ...]:
    """The capacity a gang job's other parts give back (each node's devices; the quota goes back with the first
    part: :meth:`Release.of`)."""
    return tuple(Release(node, job.devices, job.memory_gb, holder=holder_id(job.key)) for node in job.gang_nodes)


@dataclass
class Workload:
    """What instances and jobs share: the ARM envelope ``document`` and ``etag``; ``state`` (ARM
    ``provisioningState``); the operation that created it (``operation_id``); ``spec_hash`` (an identical resubmission
    has the same); what it reserves (``devices``, ``memory_gb``) and whether it holds them now (``capacity_reserved``);
    a cancel asked for (``cancel_requested``); its DGX Platform id (``dgx_id``); its location constraint or place
    (normalised); the node it holds capacity on (``node``: an instance's parent, a job's placement) and that node's
    owner then (``node_owner``: whose earnings it makes); the billing terms it locked when it reserved GPUs; its
    meter while billed (``meter_id``); the lease of the workflow that owns it; the quotas its GPUs count in while
    it holds them (``quota``: domain/quotas.py)."""

    key: ResourceKey
    document: dict[str, Any]
    etag: str
    state: ProvisioningState
    operation_id: str | None = None
    spec_hash: str = ""
    devices: int = 0
    memory_gb: int = 0
    capacity_reserved: bool = False
    cancel_requested: bool = False
    dgx_id: str | None = None
    location: str = ""
    node: ResourceKey | None = None
    node_owner: str | None = None
    billing_terms: BillingTerms | None = None
    meter_id: str | None = None
    lease: Lease | None = None
    quota: QuotaScope | None = None

    @property
    def arm_id(self) -> str:
        return str(self.document["id"])

    @property
    def properties(self) -> dict[str, Any]:
        return dict(self.document.get("properties") or {})

    @property
    def node_key(self) -> ResourceKey:
        """Where its capacity is: its ``node``, or an instance's parent."""
        return self.node or self.key.parent()

    def arm_properties(self) -> dict[str, Any]:
        """The ARM ``properties`` its typed values own, as its document shows them — the one place a typed value
        becomes a property (services/common/arm_rules.py ``changed`` writes them into the document with every change
        of the record). Values not set yet (None, "") are left out, so a document keeps what it holds."""
        return _set({"provisioningState": str(self.state), "operationId": self.operation_id})

    @property
    def created_at(self) -> str:
        return str((self.document.get("systemData") or {}).get("createdAt", ""))


@dataclass
class Instance(Workload):
    """An Ollama instance: see :class:`Workload`; ``delete_operation_id``: the delete under way;
    ``compensation_error``: the ARM error to report once a failed provisioning is undone (``{"code", "message"}``);
    ``task_token``: the Step Functions token its provisioning waits on for the instance to be ready (a DGX callback
    completes it at once; else the wait times out after the poll interval and the instance is polled);
    ``ready_signal``: a DGX callback came while no wait held a live token — the next wait ends at once."""

    delete_operation_id: str | None = None
    compensation_error: dict[str, str] | None = None
    task_token: str | None = None
    ready_signal: bool = False

    @property
    def model(self) -> str:
        return str(self.properties.get("model", ""))

    def arm_properties(self) -> dict[str, Any]:
        """See :meth:`Workload.arm_properties`: its GPUs and GiB of GPU memory as asked (``gpus``, ``memoryGb``); its
        state; the operation at work on it (the delete's once one is under way)."""
        return {
            **super().arm_properties(),
            **_set({"gpus": self.devices, "memoryGb": self.memory_gb, "operationId": self.delete_operation_id}),
        }


#: A job's run not given when the record was made: read from its document (:attr:`Job.run`).
_UNREAD = JobRun(gang_size=0)


@dataclass
class Job(Workload):
    """An accelerator job: see :class:`Workload` (``devices``/``memory_gb``: the devices of ``kind`` and GiB of device
    memory it asks for; ``gpu_model`` its accelerator key, domain/accelerators.py). ``status`` its own lifecycle;
    ``priority`` 0-9; who submitted it and when;
    ``max_duration_seconds``; its GPU model constraint (:func:`gpu_model_key`); ``secret_env`` (values sent to the
    DGX Platform only, never shown); ``queued``: waiting in its subscription's queue for capacity;
    ``task_token``: the Step Functions token its execution waits on (for capacity, or while it runs);
    ``track_checks``: how often the tracker looked at it running; ``started_at``/``ended_at`` (ISO) and its
    GPU-seconds and ``cost`` (decimal text) once ended; who asked to cancel it and that cancel's operation;
    ``drain_node``: the node drained for it (starvation rule); ``submitting``: the idempotency key of a submit sent
    to a platform that cannot de-duplicate one by itself (a Slurm cluster), recorded before it is sent — a Submit
    step run again for that key looks for the job it made first (docs/SLURM.md, "Jobs"); ``run``: how it runs —
    its retry strategy, attempts, preemption settings and gang (domain/runs.py)."""

    status: JobStatus = JobStatus.PENDING
    kind: str = GPU
    priority: int = 5
    submitted_by: str = ""
    submitted_at: str = ""
    max_duration_seconds: int = 0
    gpu_model: str = ""
    secret_env: dict[str, str] = field(default_factory=dict)
    queued: bool = False
    task_token: str | None = None
    track_checks: int = 0
    submitting: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    gpu_seconds: int | None = None
    billable_gpu_seconds: int | None = None
    cost: str | None = None
    canceled_by: str | None = None
    cancel_operation_id: str | None = None
    drain_node: ResourceKey | None = None
    #: when it is expected to start, while it waits (written by the dispatcher apart from its document: it is not part
    #: of its etag; services/common/job_access.py shows it)
    start_estimate: StartEstimate | None = None
    #: a gang job's nodes beyond ``node`` (its first part), each holding ``devices`` and ``memory_gb`` while it runs
    gang_nodes: tuple[ResourceKey, ...] = ()
    #: its run (domain/runs.py); left out, it is read from ``document`` — as a job read from the store is: the run
    #: lives in its ARM document, rendered there from this field (:meth:`arm_properties`)
    run: JobRun = _UNREAD

    def __post_init__(self) -> None:
        if self.run is _UNREAD:
            self.run = JobRun.of_properties(self.properties)

    @property
    def gang_size(self) -> int:
        """How many nodes the job runs on at once (``accelerator.nodes``; 1 for a job of one node)."""
        return self.run.gang_size

    @property
    def preempted_by(self) -> str | None:
        """The ARM id of the job that is preempting it (``preemptedBy``, written by placement when it preempts:
        services/common/placement.py; cleared when it runs again); None when none is."""
        return self.properties.get("preemptedBy") or None

    @property
    def assigned_node(self) -> str | None:
        """The ARM id of the node it is placed on (``assignedNode``, which placement writes:
        services/common/placement.py; None when it holds none)."""
        return self.properties.get("assignedNode") or None

    @property
    def assigned_nodes(self) -> tuple[str, ...] | None:
        """A gang's every node, its first part's first (``assignedNodes``, written by placement; None: a job of one
        node, or one that holds none)."""
        nodes = self.properties.get("assignedNodes")
        return tuple(nodes) if nodes is not None else None

    @property
    def status_reason(self) -> str | None:
        """Why it is in its status, as its document says (``statusReason``; None when it says nothing)."""
        reason = self.properties.get("statusReason")
        return None if reason is None else str(reason)

    def arm_properties(self) -> dict[str, Any]:
        """See :meth:`Workload.arm_properties`: what it asks for (``requestedGpus``, ``requestedMemoryGb``,
        ``priority``, ``maxDurationMinutes``), who submitted it and when, its ``status``, state and operation, when
        it started and ended, who asked to cancel it, and its run (:meth:`JobRun.arm_properties`: its retry strategy,
        attempts and preemption settings). (Its ``gpuModel`` shows the model as submitted, which the record keeps
        only as :func:`gpu_model_key`; its charges are written where they are computed, job_steps.py ``_ended``.)"""
        return {
            **super().arm_properties(),
            **self.run.arm_properties(),
            **_set(
                {
                    # the seed's GPU-only spelling of a job of one node (a multi-node job says its accelerator)
                    "requestedGpus": self.devices if self.kind == GPU and self.gang_size == 1 else None,
                    "requestedMemoryGb": self.memory_gb if self.kind == GPU and self.gang_size == 1 else None,
                    "priority": self.priority,
                    "maxDurationMinutes": self.max_duration_seconds // 60 if self.max_duration_seconds else None,
                    "status": str(self.status),
                    "submittedBy": self.submitted_by,
                    "submittedAt": self.submitted_at,
                    "startedAt": self.started_at,
                    "endedAt": self.ended_at,
                    "cancelRequestedBy": self.canceled_by,
                }
            ),
        }

    @property
    def demand(self) -> Demand:
        """What it asks of a node (its price ceiling not included: :attr:`price_ceiling`)."""
        return Demand(self.devices, self.memory_gb, self.gpu_model, self.location, kind=self.kind, vendor=self.vendor)

    @property
    def vendor(self) -> str | None:
        """Who must make its devices (None: any vendor): domain/accelerators.py ``job_vendor`` over what it asked —
        a job stored before vendors were said asks for its kind's usual vendor unless it named a model."""
        asked = self.properties.get("accelerator") or {}
        return job_vendor(self.kind, model_of_key(self.gpu_model), asked.get("vendor"))

    @property
    def preemption_candidate(self) -> bool:
        """Whether a higher-priority job of its subscription may preempt it now: it said ``preemptible``, holds
        capacity, and no cancel or preemption is under way (the rules: domain/preemption.py; its reads and writes:
        services/common/placement.py)."""
        return self.run.preemptible and self.capacity_reserved and not self.cancel_requested and not self.gang_nodes

    @property
    def preemption_order(self) -> str:
        """Its place among its subscription's preemption candidates of its kind: lowest ``priority`` first, then
        the most recently submitted (the least work lost: Kueue's order), then its key."""
        submitted = int(datetime.fromisoformat(self.submitted_at.replace("Z", "+00:00")).timestamp())
        return f"{self.priority}#{10**10 - submitted:010d}#{self.key.resource_group.lower()}#{self.key.name.lower()}"

    @property
    def capacity_reservation_id(self) -> str | None:
        """The ARM id of the capacity reservation it runs in (``properties.capacityReservationId``; None: none)."""
        return self.properties.get("capacityReservationId") or None

    @property
    def reservation(self) -> str:
        """How node calendars name the reservation it runs in (:func:`holder_id`; "": none, or an id not of a
        ``capacityReservations`` resource — refused at submission)."""
        return reservation_ref(self.capacity_reservation_id)

    @property
    def window_end(self) -> float | None:
        """When the window of the capacity reservation it runs in ends (epoch seconds; ``capacityReservationEndsAt``,
        written when it is placed): it is stopped then (services/schedules/job_tracker.py). None: no such bound."""
        ends = self.properties.get("capacityReservationEndsAt")
        return datetime.fromisoformat(str(ends).replace("Z", "+00:00")).timestamp() if ends else None

    @property
    def price_ceiling(self) -> PriceCeiling | None:
        """The most it may be billed at (``properties.priceCeiling``, fixed at submission: domain/pricing.py); None
        for a job submitted before ceilings existed (any node)."""
        value = self.properties.get("priceCeiling")
        return PriceCeiling.from_properties(value) if isinstance(value, dict) else None


def _set(properties: dict[str, Any]) -> dict[str, Any]:
    """``properties`` without the values not set (None, "")."""
    return {name: value for name, value in properties.items() if value is not None and value != ""}


@dataclass
class Operation:
    """An ARM long-running operation: its Azure-AsyncOperation ``body`` (``id``, ``name``, ``status``,
    ``startTime``, ``endTime``?, ``percentComplete``, ``resourceId``, ``error``?) and what the provider keeps beside
    it: its ``kind``, the resource group of its resource, and for a job's operations the job's submitter
    (``owner``: who may read it after the job is gone)."""

    body: dict[str, Any]
    kind: OperationKind
    resource_group: str
    owner: str | None = None

    @property
    def operation_id(self) -> str:
        return str(self.body["name"])

    @property
    def status(self) -> OperationStatus:
        return OperationStatus(self.body["status"])

    def moved(self, status: OperationStatus, now_iso: str, error: dict[str, str] | None = None) -> Operation:
        """The operation moved to ``status`` (``endTime`` and 100 % when final; ``error`` when given)."""
        body = {**self.body, "status": str(status)}
        if status.final:
            body["endTime"] = now_iso
            body["percentComplete"] = 100.0
        if error:
            body["error"] = error
        return Operation(body, self.kind, self.resource_group, self.owner)


@dataclass(frozen=True)
class NodeState:
    """A node as a change saw it: its ``etag`` (a new one for every change of the node itself, none for a
    reservation or a release), its availability and its fleet shape."""

    etag: str
    availability: Availability
    shape: FleetShape


@dataclass(frozen=True)
class NodeChange:
    """A node registered, changed or removed, as the table's stream reports it (after the write committed):
    ``before``/``after`` the write (None: it did not exist); ``event_id`` names the report (for correlation)."""

    event_id: str
    subscription_id: str
    before: NodeState | None
    after: NodeState | None


@dataclass(frozen=True)
class LimitChange:
    """A limit on a subscription's work set, changed or removed, as the table's stream reports it (after the write
    committed): a GPU quota (``kind`` ``"quota"``, ``name`` ``{location}#{quota}``) or a budget (``"budget"``, its
    name). Only changes of the limit itself are reported (its etag moved): an allocation counted in a quota, or a
    budget's evaluation, is bookkeeping. ``event_id`` names the report (for correlation)."""

    event_id: str
    subscription_id: str
    kind: str
    name: str


def breaks_bookings(previous: Node, node: Node) -> bool:
    """Whether changing ``previous`` into ``node`` would break what is booked on it: it stops taking work, its devices
    or backend change, or it shrinks. The node service refuses it under bookings not yet over (unless forced), and the
    repositories write it only at the calendar revision read, so a booking landing meanwhile is never left on it."""
    return (
        (previous.availability == Availability.AVAILABLE and node.availability != Availability.AVAILABLE)
        or node.held_identity != previous.held_identity
        or node.device_total < previous.device_total
        or node.memory_gb_total < previous.memory_gb_total
    )
