"""The job tracker: the schedule that watches running jobs and live instances (every minute; template.yaml
``JobTrackerFunction``) — the safety sweep behind the DGX Platform's callbacks, which announce each end at once.

Each run reads every workload due for a check from the lease index, a page at a time, each page a fair share of every
index partition (repositories/leases.py: no partition starves another, however many are due in one), until none is
due or its time runs short; it reads the page's jobs and instances from the DGX Platform in batch calls (100 ids
each: ``POST /v1/jobs:batchGet``, ``/v1/instances:batchGet``; one item read again on its own when a batch call fails,
so one bad answer never stalls the others). So a run's work grows with the workloads due, never with the fleet; a
running job is checked at least every ``JOB_POLL_MAX_INTERVAL_SECONDS`` and a live instance every
``INSTANCE_WATCH_INTERVAL_SECONDS`` whatever the fleet's size.

For each job due for a check (its ``TRACK`` lease ran out) it asks the DGX Platform how the job is and either resumes
the job's execution with its end — ended on the platform, or past ``maxDurationMinutes`` (billing stops at that
moment), or past the end of the window of the capacity reservation it runs in (``ReservationEnded``, issue 44) —
or sets the next check, waiting twice as long as the last time, up to ``JOB_POLL_MAX_INTERVAL_SECONDS`` and
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
from functools import partial
from typing import TYPE_CHECKING, Literal, TypeVar

from itl_accelerator.dgx.errors import DgxError, DgxNotFound
from itl_accelerator.dgx.models import DgxInstance, DgxJob
from itl_accelerator.domain.records import Instance, Job, Lease, ResourceKey
from itl_accelerator.domain.scheduling import reservation_name, utc
from itl_accelerator.domain.states import JobStatus, LeaseKind, ProvisioningState
from itl_accelerator.observability import logger
from itl_accelerator.platforms.router import platform_name, platform_of
from itl_accelerator.repositories.protocols import Expect, Repositories
from itl_accelerator.resources import INSTANCES
from itl_accelerator.services.workflows.io import JobEnd, JobStepInput, StepOutcome
from itl_accelerator.services.workflows.job_steps import JobSteps, canceled_end, epoch, platform_end
from itl_accelerator.settings import Settings
from itl_accelerator.state_machines import StateMachines

if TYPE_CHECKING:
    from itl_accelerator.services.schedules.node_health import NodeHealthSweep
    from itl_accelerator.services.workflows.instance_steps import InstanceSteps

T = TypeVar("T")

#: A run stops starting a new page when less than this is left of its Lambda's time (seconds).
TIME_RESERVE_SECONDS = 10.0


def window_ended(job: Job, ended: float) -> JobEnd:
    """The end of ``job`` (running in a capacity reservation) when its reservation's window ended at ``ended`` (epoch
    seconds): stopped (with the preemption grace period: job_steps.py ``stop``), billing bounded by the window, its
    reason saying why (``ReservationEnded:``)."""
    name = reservation_name(job.reservation)
    return JobEnd(
        status=JobStatus.FAILED,
        reason=f"ReservationEnded: the window of its capacity reservation '{name}' ended at {utc(ended)}; the job was "
        "stopped.",
        stop=True,
        endedAt=ended,
    )


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
        node_health: NodeHealthSweep | None = None,
    ):
        self._jobs = repositories.jobs
        self._instances = repositories.instances
        self._instance_steps = instance_steps
        self._node_health = node_health
        self._leases = repositories.leases
        self._steps = steps
        self._state_machines = state_machines
        self._settings = settings
        self._clock = clock

    def run(
        self, *, now: float | None = None, limit: int | None = None, time_left: Callable[[], float] | None = None
    ) -> dict[str, int]:
        """Check every workload due at ``now`` (module docstring), ``limit`` (default ``JOB_TRACK_BATCH_SIZE``) a
        page, until none is due or ``time_left()`` (seconds) runs short. Returns counts of jobs: ``checked``,
        ``ended`` (resumed with an end), ``finished`` (ended here); ``instances_lost``: instances ended because the
        DGX Platform no longer runs them (an instance found running is not counted: that is no work, and the local
        console prints only runs that did some); ``errors``: workloads whose check failed — the DGX Platform
        unavailable — logged and looked at again next run; they never keep the others from being checked;
        ``pages``: index pages read; ``left``: 1 when the run stopped with workloads still due (its time ran
        short)."""
        now = self._clock() if now is None else now
        counts = {"checked": 0, "ended": 0, "finished": 0, "instances_lost": 0, "errors": 0, "pages": 0, "left": 0}
        if self._node_health is not None:  # the Slurm clusters' nodes first: what placement may use now
            counts.update({f"nodes_{k}": v for k, v in self._node_health.run().items()})
        token: str | None = None
        while True:
            page = self._leases.expired(now, limit or self._settings.job_track_batch_size, LeaseKind.TRACK, token)
            counts["pages"] += 1
            self._check_page(page.items, now, counts)
            token = page.token
            if token is None:
                return counts
            if time_left is not None and time_left() < TIME_RESERVE_SECONDS:
                counts["left"] = 1
                logger.warning("The job tracker ran out of time with workloads still due", extra={"counts": counts})
                return counts

    def _check_page(self, keys: list[ResourceKey], now: float, counts: dict[str, int]) -> None:
        """Check one page of due workloads: read them, read the DGX Platform in batches, decide each."""
        jobs: list[Job] = []
        instances: list[Instance] = []
        for key in keys:
            try:
                if key.type_segment == INSTANCES.segment:
                    instance = self._instances.get(key)
                    if instance is not None and self._watch_due(instance, now):
                        instances.append(instance)
                else:
                    job = self._jobs.get(key)
                    if (
                        job is not None
                        and job.status == JobStatus.RUNNING
                        and (job.lease.until if job.lease else 0) <= now
                    ):
                        jobs.append(job)
            except Exception:  # noqa: BLE001 - one workload that cannot be read must not hold back the others
                logger.exception("Reading a workload failed; it is looked at again next run", extra={"key": key.name})
                counts["errors"] += 1
        platforms = self._steps.platforms
        platform_jobs = self._read_many(platforms.get_jobs, [str(j.dgx_id) for j in jobs if j.dgx_id])
        platform_instances = self._read_many(platforms.get_instances, [str(i.dgx_id) for i in instances if i.dgx_id])
        for instance in instances:
            self._guarded(partial(self._watch, instance, now, counts, platform_instances), instance.key, counts)
        for job in jobs:
            self._guarded(partial(self._track, job, now, counts, platform_jobs), job.key, counts)

    @staticmethod
    def _guarded(check: Callable[[], None], key: ResourceKey, counts: dict[str, int]) -> None:
        try:
            check()
        except Exception:  # noqa: BLE001 - one workload that cannot be checked must not hold back the others
            logger.exception("Tracking a workload failed; it is looked at again next run", extra={"key": key.name})
            counts["errors"] += 1

    @staticmethod
    def _read_many(read: Callable[[list[str]], dict[str, T]], ids: list[str]) -> dict[str, T] | None:
        """A batch read of the DGX Platform (None, when it failed: each workload is then read on its own)."""
        if not ids:
            return {}
        try:
            return read(ids)
        except DgxError as exc:
            logger.warning("A batch read of the DGX Platform failed; reading one by one", extra={"error": str(exc)})
            return None

    def _watch_due(self, instance: Instance, now: float) -> bool:
        return (
            instance.state == ProvisioningState.SUCCEEDED
            and instance.lease is not None
            and instance.lease.kind == LeaseKind.TRACK
            and instance.lease.until <= now
        )

    def _watch(
        self, instance: Instance, now: float, counts: dict[str, int], read: dict[str, DgxInstance] | None
    ) -> None:
        """Check a ``Succeeded`` instance whose check is due, as the batch ``read`` found it (None: read it now):
        end it if the DGX Platform lost it, else set its next check ``INSTANCE_WATCH_INTERVAL_SECONDS`` on."""
        found = self._instance_steps.health(instance, read)
        if found is None:
            next_check = Lease.tracked(now + self._settings.instance_watch_interval_seconds)
            self._instances.note(instance, replace(instance, lease=next_check), expect=Expect(etag=instance.etag))
            return
        error, gone = found
        if self._instance_steps.lost(instance, error, gone=gone):
            logger.warning("The DGX Platform lost an instance", extra={"instance": instance.arm_id, "code": error.code})
            counts["instances_lost"] += 1

    def _track(self, job: Job, now: float, counts: dict[str, int], read: dict[str, DgxJob] | None) -> None:
        """Check a running job whose check is due, as the batch ``read`` found it (None: read it now)."""
        key = job.key
        counts["checked"] += 1
        outcome = self._check(job, now, read)
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
        outcome = self._check(job, now, None)
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

    def _max_interval(self, job: Job) -> float:
        """The longest wait between two checks of ``job`` (seconds): ``JOB_POLL_MAX_INTERVAL_SECONDS``, and on a
        Slurm cluster at most half its MinJobAge (``minJobAgeSeconds``) — an ended job stays in slurmctld that long,
        so a check (one minute's schedule later at most) reads its end before it leaves (docs/SLURM.md, "Jobs that
        leave slurmctld")."""
        longest = float(self._settings.job_poll_max_interval_seconds)
        cluster = self._settings.slurm_cluster(platform_of(str(job.dgx_id)) or "")
        return min(longest, cluster.min_job_age_seconds / 2) if cluster is not None else longest

    def _check(self, job: Job, now: float, read: dict[str, DgxJob] | None) -> JobEnd | None:
        """The job's end if it has one now, else None (after setting its next check). ``read``: the platform's
        jobs from a batch read (a job absent from it is unknown to the platform); None: read this one now."""
        if (canceled := canceled_end(job)) is not None:
            return canceled
        started = epoch(str(job.started_at))
        limit = job.max_duration_seconds
        deadline = started + limit if limit else None
        window_end = job.window_end  # a job of a capacity reservation: stopped when its window ends (issue 44)
        if window_end is not None and (deadline is None or window_end < deadline):
            deadline, limit = window_end, 0
        # the platform lost it: a failure on the platform, which a retryStrategy may run again
        where = platform_name(job.dgx_id)
        gone = JobEnd(
            status=JobStatus.FAILED, reason=f"{where[0].upper()}{where[1:]} no longer knows the job.", retryable=True
        )
        if read is not None:
            found = read.get(str(job.dgx_id))
            if found is None:
                return gone
        else:
            try:
                found = self._steps.platforms.get_job(str(job.dgx_id))
            except DgxNotFound:
                return gone
        if found.ended:
            # billing stops when the job ended on the platform, not when the tracker noticed (finish bounds it)
            return platform_end(found)
        if deadline is not None and now >= deadline and not limit:
            return window_ended(job, deadline)
        if deadline is not None and now >= deadline:
            return JobEnd(
                status=JobStatus.FAILED,
                reason=f"The job exceeded its max duration of {limit // 60} minutes and was stopped.",
                stop=True,
                endedAt=deadline,
            )
        checks = job.track_checks + 1
        wait = min(self._settings.job_poll_interval_seconds * 2**checks, self._max_interval(job))
        due = min(now + wait, deadline) if deadline is not None else now + wait
        self._recheck_at(job, due, track_checks=checks)
        logger.debug("Job still running", extra={"job": job.arm_id, "next_check": due})
        return None
