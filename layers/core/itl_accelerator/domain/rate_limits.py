"""Request rate limits (issue 18): how many requests a subscription, and one caller in it, may make per minute.

The model is Azure Resource Manager's ("Understand how Azure Resource Manager throttles requests",
learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling):

- Requests are **reads** (``GET``, ``HEAD``) or **writes** (``PUT``, ``PATCH``, ``POST``, ``DELETE``), each with its
  own limit. ARM counts deletes apart as well; this provider counts them as writes (they change state as writes do).
- A limit binds **one principal in one subscription** (ARM: "scoped to the security principal making the requests
  and the subscription ID"; its ``x-ms-ratelimit-remaining-subscription-reads``/``-writes`` headers) and **the whole
  subscription, every principal together** (ARM's newer "global" limits: ``x-ms-ratelimit-remaining-subscription-
  global-reads``/``-writes``).
- Over a limit: 429 ``TooManyRequests`` with ``Retry-After`` (seconds to the window's end). **A refused request
  spends nothing** (issue 26): each counter is taken only below its limit (one conditional atomic write), and a
  request the subscription's limit refuses hands the caller's count back. Where ARM counts refusals too, that here
  let one caller's refused flood spend the whole subscription's allowance; now a caller's own limit protects the
  other callers of its subscription.

Where ARM refills token buckets, this provider counts in **fixed one-minute windows** (UTC minutes): one atomic
counter per window is one DynamoDB write per request, where a token bucket needs a read-modify-write of a
timestamp and a balance. The price: a caller may send up to twice a limit across a window boundary. Limits are
per minute (settings.py ``RATE_LIMIT_*_PER_MINUTE``; ``0`` turns that limit off).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

#: Length of a counting window (seconds): limits are per UTC minute.
WINDOW_SECONDS = 60
#: Methods that count as reads (ARM: GET; HEAD reads the same); every other method counts as a write.
READ_METHODS = frozenset({"GET", "HEAD"})


class RequestKind(StrEnum):
    """What a request counts as: ``reads`` or ``writes`` (the names ARM's headers use)."""

    READS = "reads"
    WRITES = "writes"

    @classmethod
    def of(cls, method: str) -> RequestKind:
        """``GET``/``HEAD`` → reads; ``PUT``, ``PATCH``, ``POST``, ``DELETE`` (anything else) → writes."""
        return cls.READS if method.upper() in READ_METHODS else cls.WRITES


def window_start(now: float) -> int:
    """The start (epoch seconds) of the one-minute window holding ``now`` (epoch seconds)."""
    return int(now // WINDOW_SECONDS) * WINDOW_SECONDS


def seconds_to_window_end(now: float) -> int:
    """Whole seconds until the window holding ``now`` ends, at least 1: the ``Retry-After`` of a refused request
    (a request sent then counts in a fresh window)."""
    return max(1, math.ceil(window_start(now) + WINDOW_SECONDS - now))


@dataclass(frozen=True)
class RateCounter:
    """One counter: the requests of one ``kind`` made in a ``subscription_id`` during the window starting at
    ``window_start`` (epoch seconds, a multiple of :data:`WINDOW_SECONDS`) — by one caller (``caller``, its token
    subject), or by every caller (``caller`` None)."""

    subscription_id: str
    kind: RequestKind
    window_start: int
    caller: str | None = None


@dataclass(frozen=True)
class RateLimits:
    """Requests allowed per minute, by scope and kind; ``0`` means no limit (and no counting) for that one."""

    subscription_reads: int
    subscription_writes: int
    caller_reads: int
    caller_writes: int

    def subscription(self, kind: RequestKind) -> int:
        """The subscription's limit (every caller together) for ``kind``; 0: none."""
        return self.subscription_reads if kind is RequestKind.READS else self.subscription_writes

    def caller(self, kind: RequestKind) -> int:
        """One caller's limit in a subscription for ``kind``; 0: none."""
        return self.caller_reads if kind is RequestKind.READS else self.caller_writes
