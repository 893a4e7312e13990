"""sparkNodes: a supplier's accelerator box (a DGX H100 with 8 GPUs, a TPU v5e host, a Gaudi 3 box, an Ascend NPU
server) registered with the provider.

A node holds ``count`` devices of one accelerator kind, vendor and model (``properties.accelerator``;
domain/accelerators.py says why one kind per node). The seed's GPU form (``hardwareSpecs.gpuModel``, ``gpuCount``,
``gpuMemoryGb``, SKUs such as ``DGX-H100-8GPU``) keeps working and means NVIDIA GPUs; a body that says both forms in
disagreement is refused.

Units: devices are counts; ``*Gb`` fields are GiB; prices are per accelerator-hour of the node's kind in
``pricing.currency`` (``pricePerAcceleratorHour``; on a GPU node ``pricePerGpuHour``, the seed's name, is the same
figure). Capacity memory is device memory: ``count * memoryGbPerDevice`` (what instances and jobs request as
``memory_gb``).
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, PrivateAttr, StringConstraints, model_validator

from itl_accelerator.billing.metering import MAX_BILLING_INCREMENT_SECONDS, MAX_MINIMUM_BILLABLE_SECONDS
from itl_accelerator.domain.accelerators import (
    ANY_VENDOR,
    DEFAULT_VENDORS,
    GPU,
    RESOURCE_NAMES,
    canonical_kind,
    canonical_vendor,
    model_key,
    quota_plural,
)
from itl_accelerator.domain.backends import CLUSTER_NAME, SLURM_NAME, NodeBackend
from itl_accelerator.models.common import (
    AcceleratorKind,
    AcceleratorVendor,
    ApiModel,
    CurrencyCode,
    GpuModel,
    Location,
    OptionalMoney,
    ProvisioningState,
    Sku,
    SystemData,
    TagKey,
    TagValue,
    TrackedResourceWrite,
    validate_tags,
)

#: GPU memory per GPU (GiB) of known SKUs, used when ``hardwareSpecs.gpuMemoryGb`` is not given.
KNOWN_SKU_GPU_MEMORY_GB: dict[str, int] = {
    "dgx-h100-8gpu": 80,
    "dgx-h200-8gpu": 141,
    "dgx-a100-8gpu": 80,
    "dgx-b200-8gpu": 180,
    "dgx-spark": 128,
}


class Availability(StrEnum):
    """Whether a node takes new work. Only ``Available`` nodes receive new instances and jobs."""

    AVAILABLE = "Available"
    CORDONED = "Cordoned"
    MAINTENANCE = "Maintenance"
    OFFLINE = "Offline"


ShortText = Annotated[str, StringConstraints(min_length=1, max_length=128)]


class HardwareSpecs(ApiModel):
    """What the box is. ``gpu_count`` GPUs of ``gpu_memory_gb`` GiB each; ``memory_gb`` system RAM in GiB."""

    gpu_model: GpuModel | None = None
    gpu_count: int | None = Field(strict=True, default=None, ge=1, le=64)
    gpu_memory_gb: int | None = Field(strict=True, default=None, ge=1, le=1024)
    cpu_cores: int | None = Field(strict=True, default=None, ge=1, le=4096)
    memory_gb: int | None = Field(strict=True, default=None, ge=1, le=65536)
    interconnect: ShortText | None = None


#: The longest quota name ARM takes (``{kind}s-{model}`` must fit: domain/quotas.py).
MAX_QUOTA_NAME = 63


class NodeAccelerator(ApiModel):
    """What the node holds: ``count`` devices of one ``kind`` (``GPU``, ``TPU``, ``NPU``, ``HPU``, ``Neuron``... an open
    set), ``vendor`` and ``model``, each with ``memoryGbPerDevice`` GiB of device memory; a TPU slice's ``topology``
    (``2x4``). ``vendor`` may be left out for a kind one vendor makes (GPU: NVIDIA, TPU: Google, Neuron: AWS, HPU:
    Intel); ``model`` only for GPUs (the seed's nodes name none). ``resourceName`` is read-only: Kubernetes' extended
    resource for it (``nvidia.com/gpu``, ``google.com/tpu``)."""

    kind: AcceleratorKind
    vendor: AcceleratorVendor | None = None
    model: GpuModel | None = None
    count: int | None = Field(strict=True, default=None, ge=1, le=64)
    memory_gb_per_device: int | None = Field(strict=True, default=None, ge=1, le=1024)
    topology: Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]{0,2}(?:x[1-9][0-9]{0,2}){0,3}$")] | None = None
    resource_name: str | None = None


class Pricing(ApiModel):
    """The supplier's price: ``price_per_accelerator_hour`` (per device-hour of the node's kind) in ``currency``
    (ISO 4217), billed in increments of ``billing_increment_seconds`` (1 s to 1 h) with at least
    ``minimum_billable_seconds`` (0 to 1 h) per allocation. On a GPU node ``price_per_gpu_hour`` (the seed's name) is
    the same figure, and either may be sent; a different figure in both is refused, and ``pricePerGpuHour`` on a
    node of another kind too.

    These are the terms *new* allocations lock when they reserve devices on the node (billing/metering.py): changing
    them never reprices an instance or job already placed. Members may be left out (the defaults apply) but never
    sent as ``null``."""

    currency: CurrencyCode = "USD"
    # either may be left out (the other, or 0), never sent as null
    price_per_accelerator_hour: OptionalMoney = None
    price_per_gpu_hour: OptionalMoney = None
    billing_increment_seconds: int = Field(strict=True, default=60, ge=1, le=MAX_BILLING_INCREMENT_SECONDS)
    minimum_billable_seconds: int = Field(strict=True, default=60, ge=0, le=MAX_MINIMUM_BILLABLE_SECONDS)
    _sent_gpu_price: bool = PrivateAttr(default=False)

    @model_validator(mode="after")
    def _one_price(self) -> Pricing:
        """Notes whether ``pricePerGpuHour`` was sent (the node's write model settles the two names: one price)."""
        self._sent_gpu_price = self.price_per_gpu_hour is not None
        return self

    def for_kind(self, kind: str) -> dict[str, Any]:
        """The pricing as stored and shown for a node of ``kind``: ``pricePerAcceleratorHour`` always and, on a GPU
        node, ``pricePerGpuHour``. ``ValueError`` when ``pricePerGpuHour`` was sent for a node of another kind."""
        shown = self.model_dump(mode="json", by_alias=True)
        if kind != GPU:
            if self._sent_gpu_price:
                raise ValueError(
                    f"pricing.pricePerGpuHour prices GPUs; this node holds {kind}s: send "
                    "pricing.pricePerAcceleratorHour."
                )
            del shown["pricePerGpuHour"]
        return shown


class Capacity(ApiModel):
    """Read-only: devices and device memory (GiB) in total, allocated to instances/jobs, and free (``*Gpus``: the same
    counts under the seed's names, on GPU nodes only)."""

    total_accelerators: int
    allocated_accelerators: int
    free_accelerators: int
    total_gpus: int | None = None
    allocated_gpus: int | None = None
    free_gpus: int | None = None
    total_memory_gb: int
    allocated_memory_gb: int
    free_memory_gb: int


class NodeBackendWrite(ApiModel):
    """Where the node's work runs (domain/backends.py): ``type`` ``DgxPlatform`` or ``Slurm`` — then the ``cluster``
    (a name the deployment configures in ``SLURM_CLUSTERS``; the service refuses another with 400), the node's Slurm
    ``nodeName`` (left out: the node's own name) and optionally the ``partition`` its work is submitted to (the
    cluster's default otherwise). A node that says none gets the deployment's ``DEFAULT_NODE_BACKEND`` (the DGX
    Platform unless set)."""

    type: Literal["DgxPlatform", "Slurm"] = "DgxPlatform"
    cluster: Annotated[str, StringConstraints(pattern=CLUSTER_NAME.pattern)] | None = None
    node_name: Annotated[str, StringConstraints(pattern=SLURM_NAME.pattern)] | None = None
    partition: Annotated[str, StringConstraints(pattern=SLURM_NAME.pattern)] | None = None

    @model_validator(mode="after")
    def _names_of_a_slurm_node(self) -> NodeBackendWrite:
        if self.type == "Slurm" and not self.cluster:
            raise ValueError("A Slurm node names its cluster (properties.backend.cluster).")
        if self.type != "Slurm" and (self.cluster or self.node_name or self.partition):
            raise ValueError(
                "cluster, nodeName and partition name a Slurm node's place (properties.backend.type Slurm)."
            )
        return self

    def record(self, node_name: str) -> NodeBackend:
        """The backend of node ``node_name`` (a Slurm node's ``nodeName`` defaults to it)."""
        if self.type != "Slurm":
            return NodeBackend()
        return NodeBackend(self.type, self.cluster or "", self.node_name or node_name, self.partition or "")


class SparkNodePropertiesWrite(ApiModel):
    """Writable node properties. ``provisioning_state`` and ``capacity`` are read-only: accepted so a GET body can
    be sent back, compared (provisioningState) or ignored (capacity) by the service."""

    owner: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = None
    accelerator: NodeAccelerator | None = None
    hardware_specs: HardwareSpecs = Field(default_factory=HardwareSpecs)
    pricing: Pricing = Field(default_factory=Pricing)
    availability: Availability = Availability.AVAILABLE
    backend: NodeBackendWrite | None = None
    provisioning_state: str | None = None
    capacity: dict[str, Any] | None = None
    backend_status: dict[str, Any] | None = None


class SparkNodeWrite(TrackedResourceWrite):
    """PUT body of a node (also the POST body, with ``name``). Rules: ``properties.accelerator`` says what the node
    holds; without it, ``hardwareSpecs``' GPU fields do (NVIDIA GPUs, the seed's form), and on a GPU node both are
    filled from each other (a field said in both must agree). ``sku.capacity`` = the device count (either may be
    omitted and is taken from the other); device memory defaults from the SKU when it is a known one. A node of
    another kind names its vendor (unless one vendor makes the kind) and model, and no ``hardwareSpecs`` GPU field."""

    sku: Sku
    properties: SparkNodePropertiesWrite = Field(default_factory=SparkNodePropertiesWrite)

    _sent: dict[str, Any] = PrivateAttr(default_factory=dict)
    _disputed: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="after")
    def _consistent_capacity(self) -> SparkNodeWrite:
        props = self.properties
        # what was sent of the values said twice, before either fills the other (see settled)
        self._sent = {
            "accelerator": props.accelerator.model_copy() if props.accelerator else None,
            "specs": props.hardware_specs.model_copy(),
            "prices": (props.pricing.price_per_accelerator_hour, props.pricing.price_per_gpu_hour),
            "capacity": self.sku.capacity,
        }
        self._derive(None)
        return self

    def settled(self, stored: dict[str, Any] | None) -> SparkNodeWrite:
        """The body with a value said twice in disagreement — a GPU's ``accelerator.count`` and
        ``hardwareSpecs.gpuCount`` (or model, or memory), ``pricing.pricePerAcceleratorHour`` and ``pricePerGpuHour``
        — settled against the node as ``stored`` (its document's properties; None: a new node): the name whose value
        differs from the stored one is the change (a client that knows one name sends back what it read of the other
        unchanged). Raises ``ValueError`` when both changed, or the node is new, and they differ."""
        if self._disputed:
            sent = self._sent
            props = self.properties
            props.accelerator = sent["accelerator"].model_copy() if sent["accelerator"] else None
            props.hardware_specs = sent["specs"].model_copy()
            props.pricing.price_per_accelerator_hour, props.pricing.price_per_gpu_hour = sent["prices"]
            self.sku.capacity = sent["capacity"]
            self._derive(stored if stored is not None else {}, strict=True)
        return self

    def _derive(self, stored: dict[str, Any] | None, *, strict: bool = False) -> None:
        """Fill the node's accelerator, the seed's GPU fields and its pricing from each other, checking what they
        say (the class's rules). A value said twice in disagreement: settled against ``stored`` when given (the one
        that differs from it wins), else — the body alone, before the service read the node — the
        ``accelerator`` / ``pricePerAcceleratorHour`` side is taken for now and the dispute recorded
        (:meth:`settled` decides it); ``strict``: unresolved, it is refused."""
        props = self.properties
        specs = props.hardware_specs
        accelerator = props.accelerator or NodeAccelerator(kind=GPU)
        kind = canonical_kind(accelerator.kind)
        accelerator.kind = kind
        accelerator.vendor = canonical_vendor(accelerator.vendor) if accelerator.vendor else DEFAULT_VENDORS.get(kind)
        if accelerator.vendor is None:
            raise ValueError(f"properties.accelerator.vendor is required for {kind}s (who makes them?).")
        if accelerator.vendor == ANY_VENDOR:
            raise ValueError(f"properties.accelerator.vendor names who makes the node's {kind}s, not '{ANY_VENDOR}'.")
        self._disputed = []
        if kind == GPU:
            held = (stored or {}).get("accelerator") or {}
            was = (stored or {}).get("hardwareSpecs") or {}
            for mine, theirs, what in (
                ("model", "gpu_model", "gpuModel"),
                ("count", "gpu_count", "gpuCount"),
                ("memory_gb_per_device", "gpu_memory_gb", "gpuMemoryGb"),
            ):
                a, g = getattr(accelerator, mine), getattr(specs, theirs)
                same = (model_key(a) == model_key(g)) if mine == "model" else a == g
                if a is not None and g is not None and not same:
                    a, disputed = _settle(
                        a,
                        g,
                        held.get(_camel(mine)) != a,
                        was.get(what) != g,
                        known=stored is not None,
                        strict=strict,
                        refusal=f"properties.accelerator.{_camel(mine)} ({a}) and properties.hardwareSpecs.{what} ({g}) "
                        "describe the same GPUs and differ.",
                    )
                    if disputed:  # for now, the side sku.capacity agrees with (the count's other twin)
                        self._disputed.append(what)
                        a = g if mine == "count" and g == self.sku.capacity else a
                setattr(accelerator, mine, a if a is not None else g)
        else:
            given = [n for n in ("gpu_model", "gpu_count", "gpu_memory_gb") if getattr(specs, n) is not None]
            if given:
                raise ValueError(
                    f"properties.hardwareSpecs.{_camel(given[0])} describes GPUs; this node holds {kind}s "
                    "(properties.accelerator)."
                )
            if not accelerator.model:
                raise ValueError(f"properties.accelerator.model is required for {kind}s (v5e, Gaudi3, 910B...).")
        if accelerator.model and len(f"{quota_plural(kind)}-{model_key(accelerator.model)}") > MAX_QUOTA_NAME:
            raise ValueError(
                f"properties.accelerator.model '{accelerator.model}' is too long for its quota name "
                f"({quota_plural(kind)}-{{model}}, at most {MAX_QUOTA_NAME} characters)."
            )
        if accelerator.count is None and self.sku.capacity is None:
            raise ValueError(
                "Either sku.capacity or properties.accelerator.count (hardwareSpecs.gpuCount for GPUs) must be given."
            )
        if accelerator.count is None:
            accelerator.count = self.sku.capacity
        elif self.sku.capacity is None:
            self.sku.capacity = accelerator.count
        elif accelerator.count != self.sku.capacity:
            where = "hardwareSpecs.gpuCount" if props.accelerator is None else "accelerator.count"
            raise ValueError(f"sku.capacity ({self.sku.capacity}) must equal properties.{where} ({accelerator.count}).")
        if accelerator.memory_gb_per_device is None:
            known = KNOWN_SKU_GPU_MEMORY_GB.get(self.sku.name.lower())
            if known is None:
                where = "hardwareSpecs.gpuMemoryGb" if props.accelerator is None else "accelerator.memoryGbPerDevice"
                raise ValueError(
                    f"properties.{where} is required for the SKU '{self.sku.name}' "
                    f"(known SKUs: {', '.join(sorted(KNOWN_SKU_GPU_MEMORY_GB))})."
                )
            accelerator.memory_gb_per_device = known
        accelerator.resource_name = RESOURCE_NAMES.get((accelerator.vendor, kind))
        props.accelerator = accelerator
        if kind == GPU:  # the seed's spelling of the same GPUs
            specs.gpu_model = accelerator.model
            specs.gpu_count = accelerator.count
            specs.gpu_memory_gb = accelerator.memory_gb_per_device
        pricing = props.pricing
        a_price, g_price = pricing.price_per_accelerator_hour, pricing.price_per_gpu_hour
        if a_price is not None and g_price is not None and a_price != g_price:
            was_price = (stored or {}).get("pricing") or {}
            a_price, disputed = _settle(
                a_price,
                g_price,
                _price(was_price.get("pricePerAcceleratorHour")) != a_price,
                _price(was_price.get("pricePerGpuHour")) != g_price,
                known=stored is not None,
                strict=strict,
                refusal=f"pricing.pricePerAcceleratorHour ({a_price}) and pricing.pricePerGpuHour ({g_price}) are two "
                "names of one price and differ: send one.",
            )
            if disputed:
                self._disputed.append("pricePerGpuHour")
        price = a_price if a_price is not None else g_price if g_price is not None else Decimal(0)
        pricing.price_per_accelerator_hour = pricing.price_per_gpu_hour = price
        pricing.for_kind(kind)  # refuses pricePerGpuHour on a node of another kind

    def pricing_document(self) -> dict[str, Any]:
        """``properties.pricing`` as stored for this node's kind (:meth:`Pricing.for_kind`)."""
        kind = self.properties.accelerator.kind if self.properties.accelerator else GPU
        return self.properties.pricing.for_kind(kind)


#: One value under its two names (a model, a count, a price).
T = TypeVar("T")


def _settle(a: T, b: T, a_changed: bool, b_changed: bool, *, known: bool, strict: bool, refusal: str) -> tuple[T, bool]:
    """Which of a value's two names, said in disagreement, holds: the one that differs from what is stored, when
    the stored node is ``known`` and exactly one does — ``(value, False)``. Otherwise ``ValueError(refusal)`` when
    ``strict``, else ``(a, True)``: the first name's value for now, the dispute left to the caller."""
    if known and a_changed != b_changed:
        return (a if a_changed else b), False
    if strict:
        raise ValueError(refusal)
    return a, True


def _price(value: Any) -> Decimal | None:
    """A stored price (a JSON number) as the write model holds one (None when absent)."""
    return None if value is None else Decimal(str(value))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class SparkNodePatch(ApiModel):
    """PATCH body: a JSON merge patch (RFC 7396) of ``properties`` and ``sku``; ``tags`` replace the whole set (null
    removes them all); ``location`` may only be repeated. Read-only envelope fields a client echoes back are
    accepted. The merged result is validated as a full PUT body by the service. ``properties``, ``sku`` and
    ``location`` are required members of a node: a ``null`` (merge patch: remove) for them is refused."""

    location: Location | None = None
    tags: dict[TagKey, TagValue] | None = None
    sku: dict[str, Any] | None = None
    properties: dict[str, Any] | None = None
    name: str | None = None
    id: str | None = None
    type: str | None = None
    etag: str | None = None
    system_data: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _required_members_stay(self) -> SparkNodePatch:
        for member in ("location", "sku", "properties"):
            if member in self.model_fields_set and getattr(self, member) is None:
                raise ValueError(f"'{member}' is required and cannot be removed (null) by a PATCH.")
        if self.tags is not None:
            validate_tags(self.tags)
        return self

    def as_merge_patch(self) -> dict[str, Any]:
        """The members the client sent, with their wire (camelCase) names: ``tags`` as sent (null included)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


class SparkNodeCreate(SparkNodeWrite):
    """The seed's POST-to-collection body: a PUT body plus the required ``name``."""

    name: str


class NodeBackendStatus(ApiModel):
    """Read-only: how the node's platform reports it (a Slurm node: its state words, why, and what its GRES say),
    as of ``checkedAt``; ``placeable`` false when the platform takes no work on it (DOWN, DRAIN: placement passes
    it over and says so), ``warnings`` what does not agree with what the node was registered with."""

    state: str
    reason: str | None = None
    placeable: bool = True
    gres: str | None = None
    warnings: list[str] = []
    checked_at: str | None = None


class SparkNodeProperties(ApiModel):
    """Node properties as returned."""

    owner: str
    accelerator: NodeAccelerator
    hardware_specs: HardwareSpecs
    pricing: Pricing
    availability: Availability
    backend: NodeBackendWrite
    backend_status: NodeBackendStatus | None = None
    capacity: Capacity
    provisioning_state: ProvisioningState


class SparkNode(ApiModel):
    """A node as returned: ARM tracked-resource envelope."""

    id: str
    name: str
    type: str
    location: str
    tags: dict[str, str]
    sku: Sku
    etag: str
    system_data: SystemData
    properties: SparkNodeProperties
