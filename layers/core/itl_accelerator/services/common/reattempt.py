"""Optimistic concurrency's retry loop, once: read, decide, write conditioned on what was read; when the condition
failed because someone wrote meanwhile, read again and decide again - a bounded number of times.

Used where a service's whole read-decide-write is safe to run again (nothing was written when the condition
failed): an instance create whose node was repriced meanwhile (services/api/instances.py), a job's final transition
raced by a cancel or the tracker (services/workflows/job_steps.py). Placement's per-candidate loop is its own
(services/common/placement.py: a changed node there moves on to the next candidate as often as it retries).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def reattempt(
    attempt: Callable[[], T],
    *,
    on: type[Exception] | tuple[type[Exception], ...],
    attempts: int,
    exhausted: Callable[[], Exception],
) -> T:
    """``attempt()``'s answer, called again while it raises ``on`` (each call reads afresh), at most ``attempts``
    times in all; then raises ``exhausted()`` with the last ``on`` error as its cause. Any other error propagates at
    once. Raises ``ValueError`` for ``attempts`` below 1."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, not {attempts}")
    for remaining in range(attempts - 1, -1, -1):
        try:
            return attempt()
        except on as error:
            if not remaining:
                raise exhausted() from error
    raise AssertionError("unreachable")  # pragma: no cover
