"""Request counters in memory: the DynamoDB implementation's semantics (repositories/dynamodb/rate_limits.py) — one
atomic conditional increment per request (nothing counted at the limit), counters of a subscription matched
case-insensitively — and counters of windows long over are dropped, as the table's TTL deletes them."""

from __future__ import annotations

from itl_accelerator.domain.rate_limits import WINDOW_SECONDS, RateCounter
from itl_accelerator.repositories.memory.state import MemoryState

#: As the table's TTL (repositories/dynamodb/rate_limits.py): a counter is kept this long after its window.
TTL_AFTER_WINDOW_SECONDS = 5 * 60


class MemoryRateLimitRepository:
    """:class:`~itl_accelerator.repositories.protocols.RateLimitRepository` in memory."""

    def __init__(self, state: MemoryState):
        self._s = state

    @staticmethod
    def _key(counter: RateCounter) -> tuple[str, str, int, str | None]:
        return (counter.subscription_id.lower(), counter.kind.value, counter.window_start, counter.caller)

    def take(self, counter: RateCounter, limit: int) -> int | None:
        key = self._key(counter)
        with self._s.lock:
            horizon = counter.window_start - WINDOW_SECONDS - TTL_AFTER_WINDOW_SECONDS
            for old in [k for k in self._s.rate_counters if k[2] < horizon]:
                del self._s.rate_counters[old]
            held = self._s.rate_counters.get(key, 0)
            if held >= limit:
                return None
            self._s.rate_counters[key] = held + 1
            return held + 1

    def give_back(self, counter: RateCounter) -> None:
        key = self._key(counter)
        with self._s.lock:
            if self._s.rate_counters.get(key, 0) > 0:
                self._s.rate_counters[key] -= 1
