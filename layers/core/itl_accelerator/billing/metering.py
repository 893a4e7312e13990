"""What an allocation of GPUs costs, window by window: pure functions, no I/O.

An *allocation* is a workload holding GPUs on a node while it is billable: an Ollama instance from the moment it is
ready (``Succeeded``) until its deletion is accepted; a job from the moment it runs on the DGX Platform until it
ends (or its max duration passes). Failed provisioning and jobs that never started bill nothing.

**Locked terms.** An allocation is billed by the :class:`BillingTerms` in force on its node when it reserved its
GPUs — price per GPU-hour, currency, billing increment and minimum — like a rental contract: a later change of the
node's pricing applies to new allocations only (AWS, Azure, RunPod and Lambda Cloud bill a running instance at the
rate it was launched at). The terms are written on the instance or job (``properties.billingTerms``) and on its
meter in the same transaction as the reservation, so nothing can change them mid-run.

Usage is recorded per allocation per UTC hour (the *window*, start inclusive, end exclusive). Rules:

- GPU-seconds used = GPUs * seconds of the window the allocation covered (whole seconds: allocation times are
  truncated to the second).
- Billable GPU-seconds = used, except in an ended allocation's last window, which also carries the terms' rounding
  rule for the allocation as a whole: its total time rounded up to ``billingIncrementSeconds``, at least
  ``minimumBillableSeconds``.
- Cost = billable GPU-seconds * price per GPU-hour / 3600, in ``Decimal``, rounded half up to 6 decimal places
  (:data:`COST_QUANTUM`) per window. Never floats. An allocation's cost is the sum of its windows — so every total
  (job cost, stats, roll-ups, the billing export) sums the same figures.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

HOUR = 3600
#: Money is rounded half up to this many decimals per segment.
COST_QUANTUM = Decimal("0.000001")


#: Bounds of the rounding rule a node may set (seconds): per-second up to hourly increments, and a minimum of at
#: most one hour per allocation (the longest minimum the GPU clouds this provider is compared with apply).
MAX_BILLING_INCREMENT_SECONDS = 3600
MAX_MINIMUM_BILLABLE_SECONDS = 3600
#: The highest price per GPU-hour a node may set (models/common.py ``Money``).
MAX_PRICE_PER_GPU_HOUR = 1_000_000


@dataclass(frozen=True)
class BillingTerms:
    """The terms an allocation is billed by (locked when it reserved its GPUs, module docstring):
    ``price_per_gpu_hour`` in ``currency`` (ISO 4217), its time rounded up to ``billing_increment_seconds``, at least
    ``minimum_billable_seconds``."""

    price_per_gpu_hour: Decimal
    currency: str
    billing_increment_seconds: int = 1
    minimum_billable_seconds: int = 0

    @classmethod
    def from_pricing(cls, pricing: dict[str, Any]) -> BillingTerms:
        """The terms of a node's ``properties.pricing`` (or of stored terms), wire names: ``pricePerAcceleratorHour``
        (or ``pricePerGpuHour``, the seed's name and what terms stored before other kinds existed say),
        ``currency``, ``billingIncrementSeconds``, ``minimumBillableSeconds``."""
        return cls(
            price_per_gpu_hour=Decimal(str(pricing.get("pricePerAcceleratorHour", pricing.get("pricePerGpuHour", 0)))),
            currency=str(pricing.get("currency", "USD")),
            billing_increment_seconds=int(pricing.get("billingIncrementSeconds", 1)),
            minimum_billable_seconds=int(pricing.get("minimumBillableSeconds", 0)),
        )

    def as_stored(self) -> dict[str, Any]:
        """Wire names, the price as an exact decimal string (what items and meters keep)."""
        return {
            "pricePerGpuHour": format(self.price_per_gpu_hour, "f"),
            "currency": self.currency,
            "billingIncrementSeconds": self.billing_increment_seconds,
            "minimumBillableSeconds": self.minimum_billable_seconds,
        }


def terms_properties(terms: BillingTerms, locked_at: str, kind: str = "GPU") -> dict[str, Any]:
    """``properties.billingTerms`` of an instance or job as the API shows it: the node's pricing members as they
    were when the workload reserved its devices (``pricePerAcceleratorHour`` a JSON number, like the node's — and on
    a GPU, ``pricePerGpuHour``, the seed's name of the same figure), and ``lockedAt`` (UTC ISO 8601)."""
    price = float(terms.price_per_gpu_hour)
    return {
        **({"pricePerGpuHour": price} if kind == "GPU" else {}),
        "pricePerAcceleratorHour": price,
        "currency": terms.currency,
        "billingIncrementSeconds": terms.billing_increment_seconds,
        "minimumBillableSeconds": terms.minimum_billable_seconds,
        "lockedAt": locked_at,
    }


@dataclass(frozen=True)
class Segment:
    """Part of a window at one price: ``[start, end)`` epoch seconds, GPU-seconds used and billable, cost."""

    start: int
    end: int
    gpu_seconds: int
    billable_gpu_seconds: int
    price_per_gpu_hour: Decimal
    currency: str
    cost: Decimal


@dataclass(frozen=True)
class WindowCharge:
    """An allocation's charge in one hour window (``window_start`` epoch seconds), by segment."""

    window_start: int
    segments: tuple[Segment, ...] = field(default_factory=tuple)

    @property
    def gpu_seconds(self) -> int:
        return sum(s.gpu_seconds for s in self.segments)

    @property
    def billable_gpu_seconds(self) -> int:
        return sum(s.billable_gpu_seconds for s in self.segments)

    @property
    def cost(self) -> Decimal:
        return sum((s.cost for s in self.segments), Decimal(0))

    @property
    def currency(self) -> str:
        return self.segments[-1].currency if self.segments else ""


def window_of(epoch: float) -> int:
    """Start (epoch seconds) of the UTC hour holding ``epoch``."""
    return int(epoch) // HOUR * HOUR


def windows(start: int, end: int) -> Iterator[int]:
    """Starts of the hour windows that ``[start, end)`` touches."""
    window = window_of(start)
    while window < end:
        yield window
        window += HOUR


def ended_by(end: int | None, now: int) -> int | None:
    """An allocation's ``end`` as it stands at ``now`` (epoch seconds): the end once it has passed, else None — it
    runs, its time counted up to ``now``. An end known ahead (a capacity reservation's window, issue 44) is thus
    billed hour by hour as the hours pass, never ahead of them: the usage sync records an hour once it began, and
    a budget's spend counts it then (docs/BILLING.md, "Capacity reservations")."""
    return end if end is not None and end <= now else None


def cost_of(billable_gpu_seconds: int, price_per_gpu_hour: Decimal) -> Decimal:
    """Billable GPU-seconds at a price per GPU-hour, rounded half up to 6 decimals."""
    return (Decimal(billable_gpu_seconds) * price_per_gpu_hour / HOUR).quantize(COST_QUANTUM, ROUND_HALF_UP)


def billable_seconds(seconds: int, increment: int, minimum: int) -> int:
    """The node's rounding rule for an allocation of ``seconds``: rounded up to ``increment``, at least
    ``minimum``; nothing when nothing ran."""
    if seconds <= 0:
        return 0
    increment = max(1, increment)
    return max(minimum, -(-seconds // increment) * increment)


def window_charge(
    terms: BillingTerms,
    *,
    gpus: int,
    start: int,
    end: int | None,
    now: int,
    window_start: int,
) -> WindowCharge:
    """The charge of an allocation of ``gpus`` GPUs over ``[start, end)`` (``end`` None: still running, counted up to
    ``now``) in the window starting at ``window_start``, under its locked ``terms``: one segment, or none when the
    allocation did not cover the window."""
    until = end if end is not None else now
    lo, hi = max(start, window_start), min(until, window_start + HOUR)
    if hi <= lo:
        return WindowCharge(window_start)
    used = (hi - lo) * gpus
    billable = used
    if end is not None and window_of(end - 1) == window_start:  # the last window carries the rounding rule
        total = end - start
        rounded = billable_seconds(total, terms.billing_increment_seconds, terms.minimum_billable_seconds)
        billable += (rounded - total) * gpus
    price = terms.price_per_gpu_hour
    return WindowCharge(
        window_start, (Segment(lo, hi, used, billable, price, terms.currency, cost_of(billable, price)),)
    )


def allocation_charges(terms: BillingTerms, *, gpus: int, start: int, end: int | None, now: int) -> list[WindowCharge]:
    """Every window charge of an allocation under its locked ``terms``, oldest first."""
    until = end if end is not None else now
    return [
        window_charge(terms, gpus=gpus, start=start, end=end, now=now, window_start=w) for w in windows(start, until)
    ]


def iso(epoch: int) -> str:
    """UTC ISO 8601 with ``Z`` (whole seconds)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
