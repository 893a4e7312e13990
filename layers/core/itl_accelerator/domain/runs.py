"""A job's run, typed: how it runs again (its retry strategy, domain/retries.py), the attempt it is at and the
attempts that ended (each an :class:`Attempt` with its own :class:`RunCharges`), whether it may be preempted and
how (domain/preemption.py), and on how many nodes at once (its gang). :class:`JobRun` is a field of the job record
(domain/records.py ``Job.run``); the rules decide over it, and ``Job.arm_properties`` renders it into the job's
ARM document — the one place these properties are written (:meth:`JobRun.arm_properties`).

Wire names are the API's (docs/API_REFERENCE.md, "Jobs", "Retries", "Preemption", "Multi-node jobs"): a job's
``retryStrategy``, ``attempt``, ``attempts``, ``preemptible``, ``preemptMode`` and ``accelerator.nodes``. Units:
GPU-seconds are device-seconds (every device of every node part), costs are decimal amounts in ``currency``, times
are UTC ISO 8601.

A job's document has held these since retries, preemption and gangs came (issue 32), and the run is read from it
(:meth:`JobRun.of_properties`): items stored before the run was typed read as they were stored
(tests/unit/test_stored_job_runs.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

from itl_accelerator.domain.retries import MAX_ATTEMPTS, RetryStrategy
from itl_accelerator.domain.states import JobStatus

#: ``preemptMode``: a preempted job ends ``Preempted`` (the default) ...
CANCEL = "Cancel"
#: ... or goes back to its queue as a new attempt (Slurm's word).
REQUEUE = "Requeue"


@dataclass(frozen=True)
class RunCharges:
    """Usage and cost of a run (or of several: :meth:`total`): ``gpu_seconds`` used, ``billable_gpu_seconds``
    (rounded by the billing increment and minimum: billing/metering.py) and ``cost`` in ``currency`` ("" when
    nothing was priced)."""

    gpu_seconds: int = 0
    billable_gpu_seconds: int = 0
    cost: Decimal = Decimal(0)
    currency: str = ""

    @classmethod
    def total(cls, charges: Iterable[RunCharges]) -> RunCharges:
        """The sum of ``charges`` (of one job: one currency, services/workflows/job_steps.py ``_retry_once``; the
        last one's is the total's)."""
        runs = list(charges)
        return cls(
            sum(c.gpu_seconds for c in runs),
            sum(c.billable_gpu_seconds for c in runs),
            sum((c.cost for c in runs), Decimal(0)),
            runs[-1].currency if runs else "",
        )

    def as_properties(self) -> dict[str, Any]:
        """``gpuSeconds``, ``billableGpuSeconds`` and ``cost`` (``{amount, currency}``, the amount as decimal text)."""
        return {
            "gpuSeconds": self.gpu_seconds,
            "billableGpuSeconds": self.billable_gpu_seconds,
            "cost": self.cost_properties(),
        }

    def cost_properties(self) -> dict[str, str]:
        """``cost`` as a job's document shows it: ``{"amount": "1.250000", "currency": "USD"}``."""
        return {"amount": format(self.cost, "f"), "currency": self.currency}

    @classmethod
    def of_properties(cls, value: dict[str, Any]) -> RunCharges:
        """The charges a document (a job's, or one of its attempts) shows (:meth:`as_properties`)."""
        cost = value.get("cost") or {}
        return cls(
            int(value.get("gpuSeconds", 0)),
            int(value.get("billableGpuSeconds", 0)),
            Decimal(str(cost.get("amount", "0"))),
            str(cost.get("currency", "")),
        )


@dataclass(frozen=True)
class Attempt:
    """One run of a job that ended (``properties.attempts``; models/jobs.py ``JobAttempt``): its ``number``
    (1-based), how it ended (``status``, ``status_reason``, ``exit_code``), the node it ran on (``assigned_node``;
    a gang's every node in ``assigned_nodes``), when it started and ended, and its ``charges`` at the terms it
    locked (its meter's: billing/job_charges.py)."""

    number: int
    status: JobStatus
    status_reason: str
    ended_at: str
    charges: RunCharges
    exit_code: int | None = None
    assigned_node: str | None = None
    assigned_nodes: tuple[str, ...] | None = None
    started_at: str | None = None

    @classmethod
    def of_properties(cls, value: dict[str, Any]) -> Attempt:
        """An attempt as the job's document holds it (:meth:`as_properties`)."""
        nodes = value.get("assignedNodes")
        return cls(
            number=int(value.get("attempt", 1)),
            status=JobStatus(value["status"]),
            status_reason=str(value.get("statusReason", "")),
            ended_at=str(value.get("endedAt", "")),
            charges=RunCharges.of_properties(value),
            exit_code=value.get("exitCode"),
            assigned_node=value.get("assignedNode"),
            assigned_nodes=tuple(nodes) if nodes is not None else None,
            started_at=value.get("startedAt"),
        )

    def as_properties(self) -> dict[str, Any]:
        """Its wire form: ``attempt``, ``status``, ``statusReason``, ``exitCode``, ``assignedNode``,
        ``assignedNodes``, ``startedAt``, ``endedAt``, ``gpuSeconds``, ``billableGpuSeconds``, ``cost`` (a member
        not known is left out)."""
        shown: dict[str, Any] = {
            "attempt": self.number,
            "status": str(self.status),
            "statusReason": self.status_reason,
            "exitCode": self.exit_code,
            "assignedNode": self.assigned_node,
            "assignedNodes": list(self.assigned_nodes) if self.assigned_nodes is not None else None,
            "startedAt": self.started_at,
            "endedAt": self.ended_at,
            **self.charges.as_properties(),
        }
        return {name: value for name, value in shown.items() if value is not None}


@dataclass(frozen=True)
class JobRun:
    """How a job runs, beyond one attempt on one node:

    - ``retry_strategy``: which failed attempts run again (None: none is);
    - ``attempt``: the number of the attempt it is at, as its document shows it (None: not shown — the first of a
      job without a retry strategy; :attr:`attempt_number` is 1 then);
    - ``attempts``: the attempts that ended, oldest first (None: not shown — a job without a retry strategy that ran
      once; an empty tuple: a job with one that never started);
    - ``preemptible`` and ``preempt_mode`` (:data:`CANCEL` or :data:`REQUEUE`; None: not said): whether a
      higher-priority job of its subscription may preempt it, and what then;
    - ``gang_size``: how many nodes it runs on at once (1: one node)."""

    retry_strategy: RetryStrategy | None = None
    attempt: int | None = None
    attempts: tuple[Attempt, ...] | None = None
    preemptible: bool = False
    preempt_mode: str | None = None
    gang_size: int = 1

    @classmethod
    def of_properties(cls, properties: dict[str, Any]) -> JobRun:
        """The run a job's document shows (its ``properties``)."""
        strategy = properties.get("retryStrategy")
        attempts = properties.get("attempts")
        return cls(
            retry_strategy=RetryStrategy.of_properties(strategy) if strategy else None,
            attempt=int(properties["attempt"]) if properties.get("attempt") else None,
            attempts=tuple(Attempt.of_properties(a) for a in attempts) if attempts is not None else None,
            preemptible=bool(properties.get("preemptible")),
            preempt_mode=properties.get("preemptMode"),
            gang_size=int((properties.get("accelerator") or {}).get("nodes") or 1),
        )

    def arm_properties(self) -> dict[str, Any]:
        """The properties it owns in the job's document: ``retryStrategy``, ``attempt``, ``attempts``,
        ``preemptible`` and ``preemptMode`` — a value not set is left out. (``accelerator.nodes``, its gang size, is
        written with the rest of what the job asked for, at submission: services/api/jobs.py.)"""
        shown: dict[str, Any] = {
            "retryStrategy": self.retry_strategy.as_properties() if self.retry_strategy else None,
            "attempt": self.attempt,
            "attempts": [a.as_properties() for a in self.attempts] if self.attempts is not None else None,
            "preemptible": True if self.preemptible else None,
            "preemptMode": self.preempt_mode,
        }
        return {name: value for name, value in shown.items() if value is not None}

    @property
    def attempt_number(self) -> int:
        """The number of the attempt the job is at (1-based)."""
        return self.attempt or 1

    @property
    def ended(self) -> tuple[Attempt, ...]:
        """The attempts that ended (none when not shown)."""
        return self.attempts or ()

    @property
    def failures(self) -> int:
        """How many of its attempts that ended failed."""
        return sum(1 for a in self.ended if a.status == JobStatus.FAILED)

    @property
    def requeues(self) -> bool:
        """Whether a preemption sends it back to its queue (``preemptMode`` ``Requeue``) rather than ending it."""
        return self.preempt_mode == REQUEUE

    @property
    def may_run_again(self) -> bool:
        """Whether another attempt is within the most any job may run (:data:`~.retries.MAX_ATTEMPTS`)."""
        return self.attempt_number < MAX_ATTEMPTS

    def next_attempt(self, ended: Attempt | None) -> JobRun:
        """The run at its next attempt, with ``ended`` (None: the attempt never ran, so none is recorded — but it
        is numbered past all the same: it may have reached the platform under its own id) among its attempts."""
        attempts = self.attempts if ended is None else (*self.ended, ended)
        return replace(self, attempt=self.attempt_number + 1, attempts=attempts)

    def last_attempt(self, ended: Attempt | None) -> JobRun:
        """The run as the job ends, with ``ended`` (None: it never started) added to its attempts — which a job
        with a retry strategy, or one that ran more than once, shows (an empty list for one that never started)."""
        if self.retry_strategy is None and self.attempts is None:
            return self
        return replace(self, attempts=(*self.ended, *((ended,) if ended is not None else ())))

    def charges(self) -> RunCharges:
        """What its attempts that ended used and cost, added up (nothing when none did)."""
        return RunCharges.total(a.charges for a in self.ended)
