"""Usage, in the provider's words: a :class:`Meter` is one allocation of GPUs (an instance while it serves, a job while
it runs) billed by the terms it locked; a :class:`UsageRecord` is its usage in one UTC hour; and the time keys of
records (``YYYY-MM-DDTHH`` hours, ``YYYY-MM-DD`` days), which sort as time. Pure values: stored by the meter and
usage repositories, priced by billing/metering.py."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

from itl_accelerator.billing.descriptor import BillingDescriptor, stored_fields
from itl_accelerator.billing.metering import HOUR, BillingTerms, ended_by, window_charge, windows
from itl_accelerator.billing.rollup import SUBSCRIPTION_SCOPE, resource_group_scope, tag_scope
from itl_accelerator.domain.records import ResourceKey, node_key

#: Usage records, roll-ups and correction lines are kept this long (seconds), then the store removes them (TTL).
USAGE_RETENTION_SECONDS = 400 * 24 * 3600


def hour_key(window_start: int) -> str:
    """``YYYY-MM-DDTHH`` (UTC) of a window start (epoch seconds)."""
    return datetime.fromtimestamp(window_start, UTC).strftime("%Y-%m-%dT%H")


def day_of(window_start: int) -> str:
    """``YYYY-MM-DD`` (UTC) of a moment (epoch seconds)."""
    return datetime.fromtimestamp(window_start, UTC).strftime("%Y-%m-%d")


def day_start(day: str) -> int:
    """The first second of a UTC day (``YYYY-MM-DD``), epoch seconds."""
    return int(datetime.fromisoformat(day).replace(tzinfo=UTC).timestamp())


def bill_expires(day: str) -> int:
    """When a day's bill entries (a subscription's part of its export) expire, all together: the day's start plus
    :data:`USAGE_RETENTION_SECONDS` (epoch seconds) — so a day's billing file is whole until then, and gone after."""
    return day_start(day) + USAGE_RETENTION_SECONDS


def hours_of_day(day: str) -> list[str]:
    """The 24 hour keys of a UTC day."""
    start = day_start(day)
    return [hour_key(start + h * HOUR) for h in range(24)]


def _to_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _hash(value: Any) -> str:
    return hashlib.sha256(_to_json(value).encode()).hexdigest()[:32]


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


@dataclass(frozen=True, kw_only=True)
class Meter(BillingDescriptor):
    """One allocation of accelerator devices: what it is billed as (its
    :class:`~itl_accelerator.billing.descriptor.BillingDescriptor` fields: who holds the devices, on which node, of
    which kind and how many), under which locked ``terms``, and when (``start``/``end``, epoch seconds; ``end`` None
    while it runs). ``allocation_id``: the meter's own id (domain/retries.py ``attempt_id``,
    services/common/metering.py ``part_id``). ``metered_until``: usage is recorded up to there (epoch seconds);
    ``metrics_retry_from``: the hour from which metrics are read again; ``active``: in the meter index (due for a
    sync); ``settled_months``: the months (``YYYY-MM``) whose charges were added to the settled spend. A value read
    from the store: the repositories record its progress, nothing changes it."""

    allocation_id: str
    terms: BillingTerms
    start: int
    end: int | None = None
    dgx_id: str = ""
    metered_until: int = 0
    metrics_retry_from: int | None = None
    active: bool = True
    settled_months: frozenset[str] = frozenset()

    @classmethod
    def described(cls, allocation_id: str, d: dict[str, Any], **state: Any) -> Meter:
        """The meter of ``allocation_id`` whose :meth:`descriptor` is ``d`` (billing/descriptor.py: every stored shape
        reads as it did), with its ``state`` (``gpus``, ``terms``, ``start``, ``end``, ``dgx_id``, ``metered_until``,
        ``metrics_retry_from``, ``active``, ``settled_months``): how a repository reads one back."""
        return cls(allocation_id=allocation_id, **{**stored_fields(d), **state})

    @property
    def node_key(self) -> ResourceKey:
        return node_key(self.subscription_id, self.node_resource_group, self.node_name)

    @property
    def spend_scopes(self) -> tuple[str, ...]:
        """The budget scopes its charges count in (billing/rollup.py's names): the subscription, its resource group
        and each of its tags (key and value folded)."""
        scopes = [SUBSCRIPTION_SCOPE, resource_group_scope(self.resource_group)]
        scopes += [tag_scope(k, v) for k, v in sorted(self.tags.items())]
        return tuple(dict.fromkeys(scopes))

    def month_charges(self, month_start: int, month_end: int, now: int) -> dict[str, Decimal]:
        """What the allocation costs in ``[month_start, month_end)`` (epoch s; its hours there) as of ``now``, by
        currency: the same window charges the usage sync records (billing/metering.py), the rounding rule included
        once it ended. Nothing before its start or after its end (or ``now``: an end still ahead, a capacity
        reservation's, counts up to ``now`` until it passes — billing/metering.py ``ended_by``)."""
        end = ended_by(self.end, now)
        until = min(end if end is not None else now, month_end)
        hours = list(windows(max(self.start, month_start), until))
        if not hours:
            return {}

        def charge(window: int) -> Decimal:
            return window_charge(
                self.terms, gpus=self.gpus, start=self.start, end=end, now=now, window_start=window
            ).cost

        # every hour between the first and the last is covered whole at the one locked price: the same charge
        # (the first may start late, the last end early or carry the rounding rule) — so a month of an
        # allocation costs three window charges to compute, not 744
        total = charge(hours[0])
        if len(hours) > 1:
            total += charge(hours[-1])
        if len(hours) > 2:
            total += charge(hours[1]) * (len(hours) - 2)
        return {self.terms.currency: total}

    def months(self, now: int) -> list[str]:
        """The months (``YYYY-MM``, UTC) its charges fall in, up to its end (or ``now``, as :meth:`month_charges`),
        oldest first."""
        end = ended_by(self.end, now)
        until = end if end is not None else now
        found: list[str] = []
        for window in windows(self.start, until):
            month = hour_key(window)[:7]
            if not found or found[-1] != month:
                found.append(month)
        return found

    def descriptor(self) -> dict[str, Any]:
        """What every usage record of this allocation says about it: its descriptor as stored (billing/descriptor.py
        ``as_stored``), from which its FOCUS rows are written."""
        return self.as_stored()


@dataclass(frozen=True)
class MeterEnd:
    """The end of an allocation's billing: its meter ``allocation_id`` in ``subscription_id`` ends at ``end`` (epoch
    s; the first end written stands) and is due for a sync at ``due``, which closes its last window."""

    subscription_id: str
    allocation_id: str
    end: int
    due: int


@dataclass(frozen=True)
class MeterRef:
    """Where a meter is: its subscription and allocation id."""

    subscription_id: str
    allocation_id: str


#: What a usage record write did: ``written``; ``correction`` (written, and queued as a correction of a day already
#: billed or closed); ``conflict`` (the stored record changed since it was read: read it again).
WriteOutcome = Literal["written", "correction", "conflict"]


@dataclass(frozen=True)
class CorrectionDue:
    """A queued correction: the record's hour (``YYYY-MM-DDTHH``) and allocation, and the mark's version."""

    hour: str
    allocation_id: str
    version: str


@dataclass(frozen=True)
class ExportDay:
    """A day's export state: ``Closed`` (its records being claimed) or ``Exported`` (with its ``manifest``)."""

    day: str
    state: Literal["Closed", "Exported"]
    manifest: dict[str, Any] | None = None
    #: Closed by an export that keeps each subscription's part of the day (:class:`BillEntry`): False for the days
    #: closed before per-subscription billing files existed, whose claims left none.
    by_subscription: bool = False


@dataclass(frozen=True)
class BillEntry:
    """One entry of a subscription's part of a day's export, kept when the export claims it (the bill as it went
    out, never as the usage record is now): an allocation-hour's usage billed in the day (``segments``: its price
    segments) or, with ``correction``, a correction line of the day (``segments``: its deltas, per price). ``key``
    orders the entries (``B#{hour}#{allocationId}``, then ``C#{hour}#{allocationId}#{seq}``) and is what a page of
    them resumes after."""

    key: str
    allocation_id: str
    window_start: int
    descriptor: dict[str, Any]
    segments: list[dict[str, Any]]
    correction: bool = False
