"""What work asks for, on the wire: devices of one kind (:class:`JobAccelerator`) and the most it may be billed at
(:class:`MaxPrice`) — said alike by a job (models/jobs.py) and a capacity reservation (models/reservations.py), and
kept apart from either so a function of one loads nothing of the other."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import Field, field_validator, model_validator

from itl_accelerator.domain.accelerators import GPU
from itl_accelerator.domain.records import MAX_GANG_NODES
from itl_accelerator.models.common import (
    AcceleratorKind,
    AcceleratorVendor,
    ApiModel,
    CurrencyCode,
    GpuModel,
    OptionalMoney,
)


class MaxPrice(ApiModel):
    """The most a job may be billed at, as its consumer states it (AWS Spot's ``MaxPrice``, a Vast.ai bid):
    ``pricePerAcceleratorHour`` (per device-hour of the job's kind; ``pricePerGpuHour``, the same figure, for a GPU
    job) in ``currency``; optionally the largest ``billingIncrementSeconds`` and ``minimumBillableSeconds`` it
    accepts (left out: any). A node whose pricing is above it — another currency, a higher price, a longer increment
    or minimum — never takes the job (domain/pricing.py; docs/API_REFERENCE.md, "Price ceiling"). Left out
    altogether, the job's ceiling is the prices in force when it is submitted."""

    # one of the two is required, neither may be null
    price_per_gpu_hour: OptionalMoney = None
    price_per_accelerator_hour: OptionalMoney = None
    currency: CurrencyCode
    billing_increment_seconds: int | None = Field(strict=True, default=None, ge=1, le=3600)
    minimum_billable_seconds: int | None = Field(strict=True, default=None, ge=0, le=3600)

    @model_validator(mode="after")
    def _one_price(self) -> MaxPrice:
        a, g = self.price_per_accelerator_hour, self.price_per_gpu_hour
        if a is None and g is None:
            raise ValueError("maxPrice.pricePerAcceleratorHour (or, for GPUs, pricePerGpuHour) is required.")
        if a is not None and g is not None and a != g:
            raise ValueError(
                "maxPrice.pricePerAcceleratorHour and maxPrice.pricePerGpuHour are two names of one price and differ."
            )
        self.price_per_gpu_hour = self.price_per_accelerator_hour = a if a is not None else g
        return self

    @property
    def price(self) -> Decimal:
        """The price per device-hour."""
        assert self.price_per_accelerator_hour is not None
        return self.price_per_accelerator_hour

    def for_kind(self, kind: str) -> dict[str, Any]:
        """As the job's spec and document keep it: ``pricePerGpuHour`` for a GPU job (as always: an identical
        resubmission has the fingerprint it had), ``pricePerAcceleratorHour`` for any other kind."""
        shown = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        del shown["pricePerAcceleratorHour" if kind == GPU else "pricePerGpuHour"]
        return shown


class JobAccelerator(ApiModel):
    """What a job asks for: ``count`` devices of one ``kind`` (``GPU``, ``TPU``, ``NPU``...), of ``model`` when given
    (any model of the kind otherwise), with ``memoryGb`` GiB of device memory in all (0 or left out: any). ``nodes``
    (2 to 16; left out: 1): a multi-node job, placed on that many nodes at once or not at all (gang placement) —
    ``count`` and ``memoryGb`` are then *per node* (Slurm's ``--nodes`` with ``--gpus-per-node``), so it holds
    ``nodes * count`` devices in all (services/common/placement.py, "Gangs"). ``vendor``: who makes the devices —
    left out, the kind's usual vendor when no model is named (NVIDIA for GPUs: the seed's forms mean NVIDIA GPUs), any
    vendor when a model is; ``Any``: any vendor's (domain/accelerators.py ``job_vendor``). A job shows the vendor it
    gets."""

    kind: AcceleratorKind
    count: int = Field(strict=True, ge=1, le=64)
    vendor: AcceleratorVendor | None = None
    model: GpuModel | None = None
    memory_gb: int | None = Field(strict=True, default=None, ge=0, le=65536)
    nodes: int | None = Field(strict=True, default=None, ge=1, le=MAX_GANG_NODES)

    @field_validator("nodes")
    @classmethod
    def _one_node_is_no_gang(cls, value: int | None) -> int | None:
        return None if value == 1 else value  # a job of one node reads (and fingerprints) as it always did
