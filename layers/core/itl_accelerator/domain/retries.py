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

Pure functions over :class:`RetryStrategy`, the strategy as the job record holds it (domain/records.py ``Job.run``;
models/jobs.py ``RetryStrategy`` validates the one a client sends).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

RETRY = "RETRY"
EXIT = "EXIT"

#: How many times a job may run in all (AWS Batch's bound).
MAX_ATTEMPTS = 10
#: Conditions per strategy (AWS Batch's bound).
MAX_CONDITIONS = 5


@dataclass(frozen=True)
class ExitCondition:
    """One member of ``evaluateOnExit`` (AWS Batch's ``EvaluateOnExit``): ``action`` (``RETRY`` or ``EXIT``) when the
    failed attempt's exit code matches ``on_exit_code`` and its reason matches ``on_reason`` (None: not said; at
    least one is, models/jobs.py ``RetryCondition``)."""

    action: str
    on_exit_code: str | None = None
    on_reason: str | None = None

    @classmethod
    def of_properties(cls, value: dict[str, Any]) -> ExitCondition:
        """A condition as the job's document holds it (``{"onExitCode"?, "onReason"?, "action"}``)."""
        return cls(str(value.get("action", RETRY)), value.get("onExitCode"), value.get("onReason"))

    def as_properties(self) -> dict[str, Any]:
        """Its wire form (a member not said is left out)."""
        said = {"onExitCode": self.on_exit_code, "onReason": self.on_reason, "action": self.action}
        return {name: value for name, value in said.items() if value is not None}


@dataclass(frozen=True)
class RetryStrategy:
    """A job's ``retryStrategy`` (module docstring): ``attempts`` in all (1 to :data:`MAX_ATTEMPTS`), the
    ``evaluate_on_exit`` conditions in order, and the backoff — ``interval_seconds`` (s), ``backoff_rate`` (a factor
    per attempt), ``max_delay_seconds`` (s). The defaults are the API's (docs/API_REFERENCE.md, "Retries")."""

    attempts: int = 1
    evaluate_on_exit: tuple[ExitCondition, ...] = ()
    interval_seconds: int = 10
    backoff_rate: float = 2.0
    max_delay_seconds: int = 3600

    @classmethod
    def of_properties(cls, value: dict[str, Any]) -> RetryStrategy:
        """The strategy as the job's document holds it (``properties.retryStrategy``, wire names; a member not
        stored is its default)."""
        return cls(
            attempts=int(value.get("attempts", 1)),
            evaluate_on_exit=tuple(ExitCondition.of_properties(c) for c in value.get("evaluateOnExit") or []),
            interval_seconds=int(value.get("intervalSeconds", 10)),
            backoff_rate=float(value.get("backoffRate", 2.0)),
            max_delay_seconds=int(value.get("maxDelaySeconds", 3600)),
        )

    def as_properties(self) -> dict[str, Any]:
        """Its wire form, every member written out (as the API stores what a client sent: models/jobs.py
        ``SparkJobWrite.spec``)."""
        return {
            "attempts": self.attempts,
            "evaluateOnExit": [c.as_properties() for c in self.evaluate_on_exit],
            "intervalSeconds": self.interval_seconds,
            "backoffRate": self.backoff_rate,
            "maxDelaySeconds": self.max_delay_seconds,
        }


def matches(pattern: str, value: str) -> bool:
    """AWS Batch's match: ``pattern`` ending with ``*`` matches a ``value`` starting with what precedes it; any other
    pattern matches ``value`` exactly."""
    if pattern.endswith("*"):
        return value.startswith(pattern[:-1])
    return value == pattern


def decides(strategy: RetryStrategy, exit_code: int | None, reason: str) -> str:
    """``RETRY`` or ``EXIT`` for a failed attempt with ``exit_code`` (None: the platform gave none) and the DGX
    Platform's ``reason``, by ``strategy.evaluate_on_exit`` (module docstring). A condition on an exit code never
    matches an attempt without one."""
    for condition in strategy.evaluate_on_exit:
        code, said = condition.on_exit_code, condition.on_reason
        if code is not None and (exit_code is None or not matches(code, str(exit_code))):
            continue
        if said is not None and not matches(said, reason):
            continue
        return condition.action.upper()
    return RETRY


def should_retry(strategy: RetryStrategy | None, attempt: int, exit_code: int | None, reason: str) -> bool:
    """Whether failed attempt number ``attempt`` (1-based) of a job with ``strategy`` (None: none) runs again."""
    if strategy is None:
        return False
    return attempt < strategy.attempts and decides(strategy, exit_code, reason) == RETRY


def delay_seconds(strategy: RetryStrategy, attempt: int) -> int:
    """Seconds from the end of failed attempt ``attempt`` to the start of the next: ``intervalSeconds *
    backoffRate ** (attempt - 1)``, at most ``maxDelaySeconds``, rounded up, at least 1."""
    wait = strategy.interval_seconds * strategy.backoff_rate ** max(0, attempt - 1)
    return max(1, math.ceil(min(wait, strategy.max_delay_seconds)))


def attempt_id(operation_id: str, attempt: int) -> str:
    """The id of a job's attempt — its DGX Platform idempotency key and its meter's allocation id: the job's operation
    id for the first (as for every job), with ``.attempt-N`` after it for a later one. So each attempt is its own
    platform job and its own meter, and a retried step of one attempt never submits or meters it twice."""
    return operation_id if attempt <= 1 else f"{operation_id}.attempt-{attempt}"
