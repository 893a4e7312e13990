"""A usage record — one allocation's usage in one UTC hour — and the time keys of records (``YYYY-MM-DDTHH``,
``YYYY-MM-DD``). Stored by store/usage.py, claimed by store/billing.py."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from itl_accelerator.billing.metering import HOUR
from itl_accelerator.store import keys
from itl_accelerator.store.codec import to_json

#: Usage records, roll-ups, correction lines and price points are kept this long (TTL), then DynamoDB removes them.
USAGE_RETENTION_SECONDS = 400 * 24 * 3600


def hour_key(window_start: int) -> str:
    """``YYYY-MM-DDTHH`` (UTC) of a window start (epoch seconds)."""
    return datetime.fromtimestamp(window_start, UTC).strftime("%Y-%m-%dT%H")


def day_of(window_start: int) -> str:
    """``YYYY-MM-DD`` (UTC) of a moment (epoch seconds)."""
    return datetime.fromtimestamp(window_start, UTC).strftime("%Y-%m-%d")


def _hash(value: Any) -> str:
    return hashlib.sha256(to_json(value).encode()).hexdigest()[:32]


@dataclass
class UsageRecord:
    """One allocation's usage in one UTC hour window (``window_start``, epoch seconds).

    ``segments``: the charge at each price in force in the window — ``start``/``end`` (epoch s), ``gpuSeconds``,
    ``billableGpuSeconds``, ``pricePerGpuHour`` and ``cost`` (decimal strings), ``currency``; ``metrics``: what
    the DGX Platform measured (``gpuUtilizationPercent``, ``gpuMemoryGb``, ``energyWh``, ``requests``,
    ``tokensIn``, ``tokensOut``), None when it could not be read; ``final``: the allocation's time in this window
    will not change any more. ``billed``: what an export billed (``day``, ``segments``, ``hash``), None before.
    """

    allocation_id: str
    window_start: int
    descriptor: dict[str, Any]
    segments: list[dict[str, Any]]
    metrics: dict[str, Any] | None
    final: bool
    billed: dict[str, Any] | None = None
    corrections: int = 0
    content_hash: str = ""

    def __post_init__(self) -> None:
        if not self.content_hash:
            self.content_hash = _hash([self.segments, self.metrics, self.final])

    @property
    def hour(self) -> str:
        return hour_key(self.window_start)

    @property
    def day(self) -> str:
        return day_of(self.window_start)

    @property
    def billing_hash(self) -> str:
        """Hash of what is billed (the segments): metrics arriving late change the record, not the bill."""
        return _hash(self.segments)

    @property
    def gpu_seconds(self) -> int:
        return sum(int(s["gpuSeconds"]) for s in self.segments)

    @property
    def billable_gpu_seconds(self) -> int:
        return sum(int(s["billableGpuSeconds"]) for s in self.segments)

    @property
    def cost(self) -> Decimal:
        return sum((Decimal(s["cost"]) for s in self.segments), Decimal(0))

    @property
    def currency(self) -> str:
        return self.segments[-1]["currency"] if self.segments else ""

    @property
    def costs(self) -> dict[str, Decimal]:
        """Cost by currency (one, unless the node changed currency within the hour)."""
        found: dict[str, Decimal] = {}
        for s in self.segments:
            found[s["currency"]] = found.get(s["currency"], Decimal(0)) + Decimal(s["cost"])
        return found

    @property
    def key(self) -> dict[str, str]:
        return {
            "PK": keys.usage_pk(self.hour, keys.shard_of(self.allocation_id, keys.USAGE_SHARDS)),
            "SK": self.allocation_id,
        }


def usage_key(allocation_id: str, window_start: int) -> dict[str, str]:
    """The deterministic key of an allocation's record for a window (allocation + window start)."""
    hour = hour_key(window_start)
    return {"PK": keys.usage_pk(hour, keys.shard_of(allocation_id, keys.USAGE_SHARDS)), "SK": allocation_id}


def record_from_item(item: dict[str, Any]) -> UsageRecord:
    """A usage record from its stored item (plain values)."""
    return UsageRecord(
        allocation_id=item["SK"],
        window_start=int(item["windowStart"]),
        descriptor=json.loads(item["descriptor"]),
        segments=json.loads(item["segments"]),
        metrics=json.loads(item["metrics"]) if item.get("metrics") else None,
        final=bool(item.get("final", False)),
        billed=json.loads(item["billed"]) if item.get("billed") else None,
        corrections=int(item.get("corrections", 0)),
        content_hash=item["contentHash"],
    )


def hours_of_day(day: str) -> list[str]:
    """The 24 hour keys of a UTC day."""
    start = int(datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp())
    return [hour_key(start + h * HOUR) for h in range(24)]
