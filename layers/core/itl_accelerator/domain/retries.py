"""A job's retry strategy: which failed attempts run again, and after how long (issue 32, "Retries").

The rule is AWS Batch's ``retryStrategy`` (``attempts``, ``evaluateOnExit``), with the backoff of a Step Functions
``Retry`` (``intervalSeconds``, ``backoffRate``, ``maxDelaySeconds``):

- ``attempts``: how many times the job may run in all, 1 to 10 (1: never retried). Only an attempt that *failed on the
  DGX Platform* is a candidate — the container exited non-zero, or the platform ended it Failed (its reason), or the
  platform lost it. A job canceled, one past its ``maxDurationMinutes`` (AWS Batch does not retry a timed-out job
  either), one refused by the platform at submission, one inadmissible or never placed is not retried.
- ``evaluateOnExit``: up to 5 conditions, read in order; the first that matches decides (``RETRY`` or ``EXIT``). A
  condition names ``onExitCode`` (digits, optionally ending with ``*``: a prefix) and/or ``onReason`` (letters,
  digits, ``.``, ``:``, spaces, optionally ending with ``*``), matched against the attempt's exit code and the DGX
  Platform's reason; both given, both must match. When conditions are given and none matches, the attempt is
  retried — AWS Batch's rule; a list meant as "only these" ends with ``{"onReason": "*", "action": "EXIT"}``, as
  Batch's own example does. No conditions: every candidate is retried.
- Backoff: attempt ``n + 1`` starts ``min(intervalSeconds * backoffRate ** (n - 1), maxDelaySeconds)`` seconds
  (rounded up) after attempt ``n`` ended, then waits for capacity like any job; a cancel in that time ends the job
  at once.

Pure functions over the strategy as the job stores it (wire names, models/jobs.py ``RetryStrategy``).
"""

from __future__ import annotations

import math
from typing import Any

RETRY = "RETRY"
EXIT = "EXIT"

#: How many times a job may run in all (AWS Batch's bound).
MAX_ATTEMPTS = 10
#: Conditions per strategy (AWS Batch's bound).
MAX_CONDITIONS = 5


def matches(pattern: str, value: str) -> bool:
    """AWS Batch's match: ``pattern`` ending with ``*`` matches a ``value`` starting with what precedes it; any other
    pattern matches ``value`` exactly."""
    if pattern.endswith("*"):
        return value.startswith(pattern[:-1])
    return value == pattern


def decides(strategy: dict[str, Any], exit_code: int | None, reason: str) -> str:
    """``RETRY`` or ``EXIT`` for a failed attempt with ``exit_code`` (None: the platform gave none) and the DGX
    Platform's ``reason``, by ``strategy["evaluateOnExit"]`` (module docstring). A condition on an exit code never
    matches an attempt without one."""
    for condition in strategy.get("evaluateOnExit") or []:
        code = condition.get("onExitCode")
        said = condition.get("onReason")
        if code is not None and (exit_code is None or not matches(code, str(exit_code))):
            continue
        if said is not None and not matches(said, reason):
            continue
        return str(condition.get("action", RETRY)).upper()
    return RETRY


def should_retry(strategy: dict[str, Any] | None, attempt: int, exit_code: int | None, reason: str) -> bool:
    """Whether failed attempt number ``attempt`` (1-based) of a job with ``strategy`` (None: none) runs again."""
    if not strategy:
        return False
    return attempt < int(strategy.get("attempts", 1)) and decides(strategy, exit_code, reason) == RETRY


def delay_seconds(strategy: dict[str, Any], attempt: int) -> int:
    """Seconds from the end of failed attempt ``attempt`` to the start of the next: ``intervalSeconds *
    backoffRate ** (attempt - 1)``, at most ``maxDelaySeconds``, rounded up, at least 1."""
    interval = float(strategy.get("intervalSeconds", 10))
    rate = float(strategy.get("backoffRate", 2.0))
    ceiling = float(strategy.get("maxDelaySeconds", 3600))
    return max(1, math.ceil(min(interval * rate ** max(0, attempt - 1), ceiling)))


def attempt_id(operation_id: str, attempt: int) -> str:
    """The id of a job's attempt — its DGX Platform idempotency key and its meter's allocation id: the job's operation
    id for the first (as for every job), with ``.attempt-N`` after it for a later one. So each attempt is its own
    platform job and its own meter, and a retried step of one attempt never submits or meters it twice."""
    return operation_id if attempt <= 1 else f"{operation_id}.attempt-{attempt}"


def attempt_of(properties: dict[str, Any]) -> int:
    """The number of the attempt a job is at (1-based), from its document's ``properties``."""
    return int(properties.get("attempt") or 1)
