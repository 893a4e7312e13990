"""The job tracker: the schedule that watches running jobs and live instances (every minute; template.yaml
``JobTrackerFunction``).

For each job due for a check (its ``TRACK`` lease ran out) it asks the DGX Platform how the job is and either resumes
the job's execution with its end — ended on the platform, or past ``maxDurationMinutes`` (billing stops at that
moment) — or sets the next check, waiting twice as long as the last time, up to ``JOB_POLL_MAX_INTERVAL_SECONDS`` and
never past the job's deadline. A job whose execution no longer waits is finished here, with the workflow's own
steps (services/workflows/job_steps.py).

A ``Succeeded`` instance carries a ``TRACK`` lease too (from the moment it is ready): each check asks the DGX
Platform whether it still runs it, every ``JOB_POLL_INTERVAL_SECONDS``. One the platform no longer knows, or reports
``Failed``, ``Deleting`` or ``Deleted``, becomes ``Failed`` with the reason, loses its endpoint and stops being
billed at that check (:meth:`InstanceSteps.lost`) — a platform that lost an instance (a restart, a broken node)
never leaves it ``Succeeded``, holding GPUs and billed, with an endpoint that answers nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from itl_accelerator.dgx.errors import DgxNotFound
from itl_accelerator.domain.records import Job, Lease, ResourceKey
from itl_accelerator.domain.states import JobStatus, LeaseKind, ProvisioningState
from itl_accelerator.observability import logger
from itl_accelerator.repositories.protocols import Expect, Repositories
from itl_accelerator.resources import INSTANCES
from itl_accelerator.services.workflows.io import JobEnd, JobStepInput, StepOutcome
from itl_accelerator.services.workflows.job_steps import JobSteps, canceled_end, epoch, platform_end
from itl_accelerator.settings import Settings
from itl_accelerator.state_machines import StateMachines

if TYPE_CHECKING:
    from itl_accelerator.services.workflows.instance_steps import InstanceSteps


class JobTracker:
    """See the module docstring. ``clock`` returns epoch seconds; ``instance_steps`` checks the live instances and
    ends those the DGX Platform lost."""

    def __init__(
        self,
        repositories: Repositories,
        steps: JobSteps,
        state_machines: StateMachines,
        settings: Settings,
        clock: Callable[[], float] = time.time,
        *,
        instance_steps: InstanceSteps,
    ):
        self._jobs = repositories.jobs
        self._instances = repositories.instances
        self._instance_steps = instance_steps
        self._leases = repositories.leases
        self._steps = steps
        self._state_machines = state_machines
        self._settings = settings
        self._clock = clock

    def run(self, *, now: float | None = None, limit: int | None = None) -> dict[str, int]:
        """One pass; returns counts of jobs: ``checked``, ``ended`` (resumed with an end), ``finished`` (ended
        here); ``instances_lost``: instances ended because the DGX Platform no longer runs them (an instance found
        running is not counted: that is no work, and the local console prints only runs that did some);
        ``errors``: workloads whose check failed — the DGX Platform unavailable — logged and looked at again next
        run; they never keep the others from being checked."""
        now = self._clock() if now is None else now
        counts = {"checked": 0, "ended": 0, "finished": 0, "instances_lost": 0, "errors": 0}
        for key in self._leases.expired(now, limit or self._settings.job_track_batch_size, LeaseKind.TRACK):
            try:
                if key.type_segment == INSTANCES.segment:
                    self._watch(key, now, counts)
                else:
                    self._track(key, now, counts)
            except Exception:  # noqa: BLE001 - one workload that cannot be checked must not hold back the others
                logger.exception("Tracking a workload failed; it is looked at again next run", extra={"key": key.name})
                counts["errors"] += 1
        return counts

    def _watch(self, key: ResourceKey, now: float, counts: dict[str, int]) -> None:
        """Check a ``Succeeded`` instance whose check is due: end it if the DGX Platform lost it, else set its next
        check ``JOB_POLL_INTERVAL_SECONDS`` from now."""
        instance = self._instances.get(key)
        if (
            instance is None
            or instance.state != ProvisioningState.SUCCEEDED
            or instance.lease is None
            or instance.lease.kind != LeaseKind.TRACK
            or instance.lease.until > now
        ):
            return
        found = self._instance_steps.health(instance)
        if found is None:
            next_check = Lease.tracked(now + self._settings.job_poll_interval_seconds)
            self._instances.note(instance, replace(instance, lease=next_check), expect=Expect(etag=instance.etag))
            return
        error, gone = found
        if self._instance_steps.lost(instance, error, gone=gone):
            logger.warning("The DGX Platform lost an instance", extra={"instance": instance.arm_id, "code": error.code})
            counts["instances_lost"] += 1

    def _track(self, key: ResourceKey, now: float, counts: dict[str, int]) -> None:
        job = self._jobs.get(key)
        if job is None or job.status != JobStatus.RUNNING or (job.lease.until if job.lease else 0) > now:
            return
        counts["checked"] += 1
        outcome = self._check(job, now)
        if outcome is None:
            return
        if job.task_token and self._state_machines.complete_task(job.task_token, StepOutcome(end=outcome).as_output()):
            counts["ended"] += 1
            # checked again after the stop's time, in case its execution cannot finish it
            recheck = now + self._settings.job_stop_timeout_seconds + self._settings.workflow_lease_grace_seconds
            self._recheck_at(job, recheck)
            return
        inp = JobStepInput.starting(self._settings, key, str(job.operation_id), "", job.max_duration_seconds // 60)
        stopped = self._steps.stop(inp, None) if outcome.stop else None
        if stopped is not None and not stopped.stopped:
            self._recheck_at(job, now + self._settings.job_poll_interval_seconds)
            return  # not confirmed stopped: the GPUs stay reserved until it is
        self._steps.finish(inp, outcome, stopped.platform if stopped else None)
        counts["finished"] += 1

    def check_now(self, key: ResourceKey, dgx_id: str) -> Literal["resumed", "checked", "due", "ignored"]:
        """The DGX Platform called back that the job ``dgx_id`` ended (services/workflows/callbacks.py): check it
        now, whenever its next check was due, exactly as a run would — but never finish it here: ``resumed`` its
        execution with its end; ``checked``: the platform has not ended it (its next check is set as a run sets
        it); ``due``: it ended, but its execution holds no live token yet (between Submit and Track), so its next
        check is made due now for the tracker's next run; ``ignored``: not a running job of that DGX id."""
        job = self._jobs.get(key)
        if job is None or job.status != JobStatus.RUNNING or job.dgx_id != dgx_id:
            return "ignored"
        now = self._clock()
        outcome = self._check(job, now)
        if outcome is None:
            return "checked"
        if job.task_token and self._state_machines.complete_task(job.task_token, StepOutcome(end=outcome).as_output()):
            recheck = now + self._settings.job_stop_timeout_seconds + self._settings.workflow_lease_grace_seconds
            self._recheck_at(job, recheck)
            return "resumed"
        self._recheck_at(job, now)
        return "due"

    def _recheck_at(self, job: Job, until: float, track_checks: int | None = None) -> None:
        """Set the job's next check (bookkeeping: no audit, no new etag), unless it changed meanwhile; count the
        checks made (``track_checks``) when given."""
        checks = job.track_checks if track_checks is None else track_checks
        self._jobs.note(
            job, replace(job, lease=Lease.tracked(until), track_checks=checks), expect=Expect(etag=job.etag)
        )

    def _check(self, job: Job, now: float) -> JobEnd | None:
        """The job's end if it has one now, else None (after setting its next check)."""
        if (canceled := canceled_end(job)) is not None:
            return canceled
        started = epoch(str(job.started_at))
        limit = job.max_duration_seconds
        deadline = started + limit if limit else None
        try:
            found = self._steps.dgx.get_job(str(job.dgx_id))
        except DgxNotFound:
            return JobEnd(status=JobStatus.FAILED, reason="The DGX Platform no longer knows the job.")
        if found.ended:
            # billing stops when the job ended on the platform, not when the tracker noticed (finish bounds it)
            return platform_end(found)
        if deadline is not None and now >= deadline:
            return JobEnd(
                status=JobStatus.FAILED,
                reason=f"The job exceeded its max duration of {limit // 60} minutes and was stopped.",
                stop=True,
                endedAt=deadline,
            )
        checks = job.track_checks + 1
        wait = min(self._settings.job_poll_interval_seconds * 2**checks, self._settings.job_poll_max_interval_seconds)
        due = min(now + wait, deadline) if deadline is not None else now + wait
        self._recheck_at(job, due, track_checks=checks)
        logger.debug("Job still running", extra={"job": job.arm_id, "next_check": due})
        return None
