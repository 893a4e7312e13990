"""What an allocation of GPUs costs, window by window: pure functions, no I/O.

An *allocation* is a workload holding GPUs on a node while it is billable: an Ollama instance from the moment it is
ready (``Succeeded``) until its deletion is accepted; a job from the moment it runs on the DGX Platform until it
ends (or its max duration passes). Failed provisioning and jobs that never started bill nothing.

Usage is recorded per allocation per UTC hour (the *window*, start inclusive, end exclusive). A window's charge is
split into *segments* at every change of the node's price within it, each at the price in force then. Rules:

- GPU-seconds used = GPUs * seconds of the window the allocation covered (whole seconds: allocation times are
  truncated to the second).
- Billable GPU-seconds = used, except in an ended allocation's last window, which also carries the node's rounding
  rule for the allocation as a whole: its total time rounded up to ``billingIncrementSeconds``, at least
  ``minimumBillableSeconds`` (the difference is billed at the last segment's price).
- Cost of a segment = billable GPU-seconds * price per GPU-hour / 3600, in ``Decimal``, rounded half up to 6
  decimal places (:data:`COST_QUANTUM`). Never floats. A window's cost is the sum of its segments, an allocation's
  the sum of its windows — so every total (job cost, stats, roll-ups, the billing export) sums the same figures.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from itertools import pairwise

HOUR = 3600
#: Money is rounded half up to this many decimals per segment.
COST_QUANTUM = Decimal("0.000001")


@dataclass(frozen=True)
class PricePoint:
    """The node's price from ``effective_from`` (epoch seconds) on: ``price_per_gpu_hour`` in ``currency``, and its
    rounding rule (seconds)."""

    effective_from: int
    price_per_gpu_hour: Decimal
    currency: str
    billing_increment_seconds: int = 1
    minimum_billable_seconds: int = 0


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


def price_at(prices: Sequence[PricePoint], moment: int) -> PricePoint:
    """The price in force at ``moment`` (the latest point effective at or before it; the first if none is)."""
    current = prices[0]
    for point in prices:
        if point.effective_from <= moment:
            current = point
    return current


def window_charge(
    prices: Sequence[PricePoint],
    *,
    gpus: int,
    start: int,
    end: int | None,
    now: int,
    window_start: int,
) -> WindowCharge:
    """The charge of an allocation of ``gpus`` GPUs over ``[start, end)`` (``end`` None: still running, counted up to
    ``now``) in the window starting at ``window_start``. ``prices`` ascending by ``effective_from``."""
    until = end if end is not None else now
    lo, hi = max(start, window_start), min(until, window_start + HOUR)
    if hi <= lo or not prices:
        return WindowCharge(window_start)
    cuts = [lo, *sorted(p.effective_from for p in prices if lo < p.effective_from < hi), hi]
    segments = []
    for a, b in pairwise(cuts):
        point = price_at(prices, a)
        used = (b - a) * gpus
        segments.append(
            Segment(a, b, used, used, point.price_per_gpu_hour, point.currency, cost_of(used, point.price_per_gpu_hour))
        )
    last_window = end is not None and window_of(end - 1) == window_start
    if last_window and segments:
        point = price_at(prices, end - 1)
        total = end - start
        extra = (
            billable_seconds(total, point.billing_increment_seconds, point.minimum_billable_seconds) - total
        ) * gpus
        if extra:
            tail = segments[-1]
            billable = tail.billable_gpu_seconds + extra
            segments[-1] = Segment(
                tail.start,
                tail.end,
                tail.gpu_seconds,
                billable,
                tail.price_per_gpu_hour,
                tail.currency,
                cost_of(billable, tail.price_per_gpu_hour),
            )
    return WindowCharge(window_start, tuple(segments))


def allocation_charges(
    prices: Sequence[PricePoint], *, gpus: int, start: int, end: int | None, now: int
) -> list[WindowCharge]:
    """Every window charge of an allocation, oldest first."""
    until = end if end is not None else now
    return [
        window_charge(prices, gpus=gpus, start=start, end=end, now=now, window_start=w) for w in windows(start, until)
    ]


def iso(epoch: int) -> str:
    """UTC ISO 8601 with ``Z`` (whole seconds)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_fallback(prices: Sequence[PricePoint], fallback: PricePoint, start: int) -> list[PricePoint]:
    """The price history to charge an allocation from ``start`` (epoch s) with: ``prices``, led by ``fallback``
    (the price the allocation saw when it began, effective from 0) when no point is in force at ``start`` — a
    node whose history began after the allocation (registered before histories were kept)."""
    if not prices or prices[0].effective_from > start:
        return [replace(fallback, effective_from=0), *prices]
    return list(prices)
