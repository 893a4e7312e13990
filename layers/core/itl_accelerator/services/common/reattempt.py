"""Optimistic concurrency's retry, once, on tenacity: read, decide, write conditioned on what was read; when the
condition failed because someone wrote meanwhile, read again and decide again - a bounded number of times, with no
pause (the race is over when the condition fails), then a named error.

Used where a service's whole read-decide-write is safe to run again (nothing was written when the condition
failed): an instance create whose node was repriced meanwhile and an instance delete raced by its workflow
(services/api/instances.py), a job cancel raced by a step (services/api/jobs.py), a budget evaluated meanwhile
(services/api/budgets.py), a quota limit set or removed meanwhile (services/api/quotas.py), a usage window written
meanwhile (services/schedules/usage_sync.py), a correction queued again meanwhile
(services/schedules/billing_export.py), a compensation raced by a delete (services/workflows/instance_steps.py), a
job's final transition raced by a cancel or the tracker (services/workflows/job_steps.py). Placement's per-candidate
loop is its own (services/common/placement.py: a changed node there moves on to the next candidate as often as it
retries). Below the services (layering: they never import services), the retries that resend or wait use
tenacity's ``Retrying`` themselves: the DGX and Slurm clients' transport retries, the entries EventBridge refused
(events.py), the roll-ups DynamoDB left unprocessed (repositories/dynamodb/usage.py), the gateway's health
(gateway_registration.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

T = TypeVar("T")


def reattempt(
    attempt: Callable[[], T],
    *,
    on: type[Exception] | tuple[type[Exception], ...],
    attempts: int,
    exhausted: Callable[[], Exception] | None = None,
) -> T:
    """``attempt()``'s answer, called again at once while it raises ``on`` (each call reads afresh), at most
    ``attempts`` times in all; then raises ``exhausted()`` with the last ``on`` error as its cause (``exhausted``
    None: that last error itself). Any other error propagates at once. Raises ``ValueError`` for ``attempts``
    below 1."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, not {attempts}")

    def ran_out(state: RetryCallState) -> T:
        assert exhausted is not None and state.outcome is not None
        raise exhausted() from state.outcome.exception()

    retrying = Retrying(
        retry=retry_if_exception_type(on),
        stop=stop_after_attempt(attempts),
        sleep=_no_pause,
        reraise=True,
        retry_error_callback=ran_out if exhausted is not None else None,
    )
    return retrying(attempt)


def _no_pause(seconds: float) -> None:
    """tenacity's sleep between attempts: none (its wait is 0 s; a raced condition is worth reading again at once)."""
