"""Request rate limits per subscription and per caller (domain/rate_limits.py has the model and its sources).

Every API request that names a valid subscription and comes with a caller is counted before its route does any
work (api/routing.py ``ArmRoute``), in the current one-minute window:

- on the **caller's** counter in that subscription — always, even when the caller holds no scope there (a probe
  of other tenants spends its own allowance);
- then on the **subscription's** counter (every caller together) — only when the caller holds the subscription or
  one of its resource groups (a stranger can neither spend a tenant's allowance nor learn from the remainder how
  busy it is), and only when the caller's own limit let the request through.

**A refused request spends nothing.** Each count is conditional on its limit (repositories: ``take``): a request
past the caller's limit is refused without touching the subscription's counter, and one past the subscription's
limit hands the caller's count back. So a noisy caller holding one resource group spends at most its own limit of
the subscription's: the others' share is theirs (issue 26; ARM's per-principal limits exist for that). Refused:
429 ``TooManyRequests``, ``Retry-After`` = seconds to the window's end. A limit of 0 is not counted at all. When
the table throttles a counter (:class:`StoreBusy`), the request is let through uncounted: the counters protect the
service, and refusing every request because they cannot be written would turn a brief DynamoDB throttle into an
outage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from itl_accelerator.domain.rate_limits import (
    RateCounter,
    RateLimits,
    RequestKind,
    seconds_to_window_end,
    window_start,
)
from itl_accelerator.errors import TooManyRequests
from itl_accelerator.observability import logger
from itl_accelerator.repositories.errors import StoreBusy
from itl_accelerator.repositories.protocols import RateLimitRepository
from itl_accelerator.settings import Settings


def limits_of(settings: Settings) -> RateLimits:
    """The limits configured in ``settings`` (``RATE_LIMIT_{SUBSCRIPTION,CALLER}_{READS,WRITES}_PER_MINUTE``)."""
    return RateLimits(
        subscription_reads=settings.rate_limit_subscription_reads_per_minute,
        subscription_writes=settings.rate_limit_subscription_writes_per_minute,
        caller_reads=settings.rate_limit_caller_reads_per_minute,
        caller_writes=settings.rate_limit_caller_writes_per_minute,
    )


@dataclass(frozen=True)
class Allowance:
    """What a counted request leaves: requests of its ``kind`` still allowed in the window, for the caller in the
    subscription (``caller_remaining``) and for the subscription (``subscription_remaining``) — None where that limit
    is off, was not counted (a stranger's request, or one the caller's own limit refused: the subscription's) or could
    not be (the table was busy) — and the seconds to the window's end (``retry_after``). ``refusal`` is the 429 to
    answer when a limit was reached."""

    kind: RequestKind
    caller_remaining: int | None
    subscription_remaining: int | None
    retry_after: int
    refusal: TooManyRequests | None = None


class RateLimiter:
    """Counts requests on ``counters`` against ``limits``; ``clock`` is epoch seconds."""

    def __init__(self, counters: RateLimitRepository, limits: RateLimits, clock: Callable[[], float]):
        self._counters = counters
        self._limits = limits
        self._clock = clock

    def admit(self, subject: str, subscription_id: str, kind: RequestKind, *, in_scope: bool) -> Allowance:
        """Count one request of ``kind`` by the caller ``subject`` in ``subscription_id`` (the subscription's own
        counter only when the caller is ``in_scope``: holds the subscription or a resource group of it) and say what
        is left; an allowance whose ``refusal`` is set must be refused, and then nothing was counted (module
        docstring)."""
        now = self._clock()
        window = window_start(now)
        retry_after = seconds_to_window_end(now)
        caller_limit = self._limits.caller(kind)
        subscription_limit = self._limits.subscription(kind) if in_scope else 0
        caller = RateCounter(subscription_id, kind, window, subject)
        try:
            caller_count = self._counters.take(caller, caller_limit) if caller_limit else None
            if caller_limit and caller_count is None:
                which = f"your limit of {caller_limit} {kind} per minute in this subscription"
                return Allowance(kind, 0, None, retry_after, self._refusal(kind, which, retry_after))
            subscription = RateCounter(subscription_id, kind, window)
            subscription_count = self._counters.take(subscription, subscription_limit) if subscription_limit else None
        except StoreBusy as busy:
            logger.warning(
                "Request counters not written (the table is busy): request let through", extra={"why": str(busy)}
            )
            return Allowance(kind, None, None, retry_after)
        caller_remaining = caller_limit - caller_count if caller_count is not None else None
        if subscription_limit and subscription_count is None:
            self._give_back(caller if caller_count is not None else None)
            which = f"the subscription's limit of {subscription_limit} {kind} per minute (all callers)"
            remaining = caller_remaining + 1 if caller_remaining is not None else None
            return Allowance(kind, remaining, 0, retry_after, self._refusal(kind, which, retry_after))
        return Allowance(
            kind,
            caller_remaining,
            subscription_limit - subscription_count if subscription_count is not None else None,
            retry_after,
        )

    def _give_back(self, counter: RateCounter | None) -> None:
        """Hand back a count the subscription's limit made void (best effort: a count left behind only makes the
        caller's own limit stricter for the rest of the minute)."""
        if counter is None:
            return
        try:
            self._counters.give_back(counter)
        except StoreBusy as busy:
            logger.warning("A refused request's count was not handed back", extra={"why": str(busy)})

    @staticmethod
    def _refusal(kind: RequestKind, which: str, retry_after: int) -> TooManyRequests:
        noun = "read" if kind is RequestKind.READS else "write"
        return TooManyRequests(
            f"Too many {noun} requests: {which} is reached. Retry after {retry_after} seconds.",
            headers={"Retry-After": str(retry_after)},
        )
