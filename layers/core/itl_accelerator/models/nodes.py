"""sparkNodes: a supplier's GPU box (e.g. a DGX H100 with 8 GPUs) registered with the provider.

Units: GPUs are counts; ``*Gb`` fields are GiB; prices are per GPU-hour in ``pricing.currency``.
Capacity memory is GPU memory: ``gpuCount * gpuMemoryGb`` (what instances and jobs request as ``memory_gb``).
"""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field, StringConstraints, model_validator

from itl_accelerator.billing.metering import MAX_BILLING_INCREMENT_SECONDS, MAX_MINIMUM_BILLABLE_SECONDS
from itl_accelerator.models.common import (
    ApiModel,
    CurrencyCode,
    GpuModel,
    Location,
    Money,
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


class Pricing(ApiModel):
    """The supplier's price: ``price_per_gpu_hour`` in ``currency`` (ISO 4217), billed in increments of
    ``billing_increment_seconds`` (1 s to 1 h) with at least ``minimum_billable_seconds`` (0 to 1 h) per allocation.

    These are the terms *new* allocations lock when they reserve GPUs on the node (billing/metering.py): changing
    them never reprices an instance or job already placed. Members may be left out (the defaults apply) but never
    sent as ``null``."""

    currency: CurrencyCode = "USD"
    price_per_gpu_hour: Money = Field(default=Decimal(0), json_schema_extra={"default": 0})
    billing_increment_seconds: int = Field(strict=True, default=60, ge=1, le=MAX_BILLING_INCREMENT_SECONDS)
    minimum_billable_seconds: int = Field(strict=True, default=60, ge=0, le=MAX_MINIMUM_BILLABLE_SECONDS)


class Capacity(ApiModel):
    """Read-only: GPUs and GPU memory (GiB) in total, allocated to instances/jobs, and free."""

    total_gpus: int
    allocated_gpus: int
    free_gpus: int
    total_memory_gb: int
    allocated_memory_gb: int
    free_memory_gb: int


class SparkNodePropertiesWrite(ApiModel):
    """Writable node properties. ``provisioning_state`` and ``capacity`` are read-only: accepted so a GET body can
    be sent back, compared (provisioningState) or ignored (capacity) by the service."""

    owner: Annotated[str, StringConstraints(min_length=1, max_length=256)] | None = None
    hardware_specs: HardwareSpecs = Field(default_factory=HardwareSpecs)
    pricing: Pricing = Field(default_factory=Pricing)
    availability: Availability = Availability.AVAILABLE
    provisioning_state: str | None = None
    capacity: dict[str, Any] | None = None


class SparkNodeWrite(TrackedResourceWrite):
    """PUT body of a node (also the POST body, with ``name``). Rule: ``sku.capacity`` = ``hardwareSpecs.gpuCount``
    (either may be omitted and is taken from the other); GPU memory defaults from the SKU when it is a known one."""

    sku: Sku
    properties: SparkNodePropertiesWrite = Field(default_factory=SparkNodePropertiesWrite)

    @model_validator(mode="after")
    def _consistent_capacity(self) -> SparkNodeWrite:
        specs = self.properties.hardware_specs
        if specs.gpu_count is None and self.sku.capacity is None:
            raise ValueError("Either sku.capacity or properties.hardwareSpecs.gpuCount must be given.")
        if specs.gpu_count is None:
            specs.gpu_count = self.sku.capacity
        elif self.sku.capacity is None:
            self.sku.capacity = specs.gpu_count
        elif specs.gpu_count != self.sku.capacity:
            raise ValueError(
                f"sku.capacity ({self.sku.capacity}) must equal properties.hardwareSpecs.gpuCount ({specs.gpu_count})."
            )
        if specs.gpu_memory_gb is None:
            known = KNOWN_SKU_GPU_MEMORY_GB.get(self.sku.name.lower())
            if known is None:
                raise ValueError(
                    f"properties.hardwareSpecs.gpuMemoryGb is required for the SKU '{self.sku.name}' "
                    f"(known SKUs: {', '.join(sorted(KNOWN_SKU_GPU_MEMORY_GB))})."
                )
            specs.gpu_memory_gb = known
        return self


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


class SparkNodeProperties(ApiModel):
    """Node properties as returned."""

    owner: str
    hardware_specs: HardwareSpecs
    pricing: Pricing
    availability: Availability
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
