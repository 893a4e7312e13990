"""Shapes of ``GET .../stats`` (services/api/usage_stats.py): per-hour usage points and their totals.

Units: seconds (``gpuSeconds``, ``billableGpuSeconds``), hours (``gpuHours``), percent (utilisation, allocation),
GiB (``gpuMemoryGb``), Wh (``energyWh``); money as exact decimal strings per currency.
"""

from __future__ import annotations

from pydantic import Field

from itl_accelerator.models.common import ApiModel


class CostAmount(ApiModel):
    """An amount of money: ``amount`` an exact decimal string (never a float), ``currency`` ISO 4217."""

    amount: str
    currency: str


class UsagePoint(ApiModel):
    """Usage over one hour (or, as ``totals``, over the whole timespan)."""

    time_stamp: str | None = Field(default=None, description="Start of the hour (UTC); absent in totals.")
    gpu_seconds: int
    gpu_hours: float
    billable_gpu_seconds: int = Field(description="GPU-seconds billed: used time after the node's rounding rule.")
    gpu_utilization_percent: float | None = Field(
        description="Mean GPU utilisation over the GPU-seconds the DGX Platform measured; null when none were."
    )
    gpu_memory_gb: float | None
    energy_wh: float
    requests: int = Field(description="Ollama requests served (instances).")
    tokens_in: int
    tokens_out: int
    cost: list[CostAmount] = Field(description="Cost per currency (a node's: the supplier's earnings).")
    allocated_percent: float | None = Field(
        default=None, description="Nodes only: GPU-seconds allocated against the node's current GPU capacity."
    )


class UsageStats(ApiModel):
    """``GET .../stats?hours=N``: one point per UTC hour of the timespan, oldest first, and totals."""

    id: str
    resource_id: str
    timespan: str = Field(description="ISO 8601 interval start/end (UTC, end exclusive).")
    interval: str = Field(description="Always PT1H.")
    hours: int
    value: list[UsagePoint]
    totals: UsagePoint
