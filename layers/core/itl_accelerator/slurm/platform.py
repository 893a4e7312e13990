"""A Slurm cluster as an execution platform (itl_accelerator/platforms/protocol.py): what the workflow steps, the job
tracker and the usage sync ask of the DGX Platform, done through the cluster's slurmrestd (client.py). docs/SLURM.md
is the user's view of it; the rules:

- **Placement stays the provider's.** A job runs pinned to the node(s) the provider placed it on (``targets``: their
  Slurm ``NodeName``\\ s; a multi-node job's ``--nodes`` is their count), asking ``--gres=gpu:N`` per node (the
  devices it reserved), with ``--time`` its ``maxDurationMinutes`` (rounded up to a minute), its container's command
  and environment (secret values included: they go to slurmctld in the submit body and are never logged). With the
  cluster's ``containerRuntime`` ``pyxis`` the command runs in the image (``srun --container-image``); with ``none``
  the node runs the command as it is.
- **Idempotent.** Each job is named after its idempotency key, ``itl-{key}`` (the operation id, ``.attempt-N`` for a
  retry): a submit whose answer was lost is found again by that name (the client's :meth:`SlurmRestClient.submit`
  looks before it resubmits; :meth:`find_job` for the steps), never submitted twice.
- **Ids.** A platform id is ``slurm:{cluster}:{job id}`` (platforms/router.py).
- **Outcomes.** ``PENDING`` is ``Queued``; ``RUNNING``, ``COMPLETING``, ``SUSPENDED`` are ``Running``; ``COMPLETED``
  is ``Succeeded``; ``CANCELLED`` is ``Canceled``; ``FAILED`` (its exit code, from Slurm's wait status),
  ``TIMEOUT`` (its time limit: ended at the limit), ``NODE_FAIL``, ``OUT_OF_MEMORY``, ``BOOT_FAIL``, ``DEADLINE`` and
  ``PREEMPTED`` (by Slurm itself) are ``Failed`` with Slurm's state as the error code — a job killed by a signal
  exits ``128 + signal``, as a shell reports it.
- **Grace period.** Slurm has no grace per job (KillWait is one number per cluster), so a stop with a grace period is
  two calls: ``SIGTERM`` only (``DELETE ?signal=TERM``) at once, its time kept in the job's comment
  (``itl-sigterm@{epoch}``), then the cancel once the grace has passed (SIGTERM again, SIGKILL after KillWait) — so
  a job gets at least its grace and at most its grace plus KillWait plus one Stop poll.
- **The tracker's batch read is one request per cluster** (``GET .../jobs?update_time=``: 304 when nothing in the
  cluster changed since the last read, else every job slurmctld holds), kept as a view of the cluster's jobs between
  reads (:class:`ClusterView`), so checking a thousand running jobs costs one request, not one per job. A job that
  ended and left slurmctld (MinJobAge) after the view saw it end keeps that end in the view; a running job absent
  from a full listing ended unseen and left: it is reported unknown, which the tracker ends as lost (its retry
  policy decides).
- **Instances** are service jobs: the cluster's ``ollamaServeCommand`` with ``OLLAMA_HOST`` on a free port of the
  node, which the job publishes as its comment (``itl-endpoint=http://host:port``) once Ollama answers; the instance
  is ``Running`` only when its endpoint answers Ollama's ``GET /api/tags``. Deleting it cancels the job.
- **Logs** are not served: slurmrestd serves no output files (:class:`LogsNotServed`; the job's output is
  ``{workingDirectory}/itl-{job id}.out`` on the cluster). **Usage metrics** are none (no GPU utilisation from
  slurmrestd without accounting): money comes from the meters, as always.
"""

from __future__ import annotations

import math
import shlex
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx

from itl_accelerator.dgx.errors import DgxNotFound, DgxPermanentError, DgxTransientError
from itl_accelerator.dgx.models import DgxInstance, DgxJob, DgxLogPage, DgxUsage
from itl_accelerator.observability import logger
from itl_accelerator.platforms.protocol import LogsNotServed, NodeHealth
from itl_accelerator.platforms.router import SLURM_ID_PREFIX, slurm_id
from itl_accelerator.settings import SlurmClusterSettings
from itl_accelerator.slurm.client import SlurmRestClient
from itl_accelerator.slurm.errors import SlurmError, SlurmJobNotFound, SlurmTransientError, SlurmUnsupported
from itl_accelerator.slurm.models import FINAL_STATES, SlurmJob, SlurmJobSpec

#: How long a submit waits for Slurm to start the job, so its billing starts at Slurm's own start time (seconds).
START_WAIT_SECONDS = 5.0
#: A view of the cluster's jobs younger than this answers a batch read without a request (seconds).
VIEW_TTL_SECONDS = 10.0
#: Ended jobs kept in the view after they left slurmctld (seconds): a tracker check due later still finds the end.
ENDED_KEPT_SECONDS = 6 * 3600
#: How far this function's clock and slurmctld's may differ: a read since the last one starts this much before it.
CLOCK_SKEW_SECONDS = 30
#: The comment a job carries once it was sent SIGTERM for a stop with a grace period.
SIGTERM_MARK = "itl-sigterm@"
#: How the provider's drain reason starts (a node drained by the cluster's admins says something else).
DRAIN_REASON_PREFIX = "ITL: "
#: The comment an instance's job publishes its endpoint with.
ENDPOINT_MARK = "itl-endpoint="
_FAILED_STATES = {
    "FAILED": "The job failed on the Slurm cluster",
    "TIMEOUT": "The job reached its time limit on the Slurm cluster and was stopped",
    "NODE_FAIL": "A node of the job failed on the Slurm cluster (NODE_FAIL)",
    "OUT_OF_MEMORY": "The job ran out of memory on the Slurm cluster",
    "BOOT_FAIL": "A node of the job did not boot on the Slurm cluster (BOOT_FAIL)",
    "DEADLINE": "The job missed its deadline on the Slurm cluster",
    "PREEMPTED": "The Slurm cluster preempted the job",
}


def _iso(epoch: int | None) -> str | None:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if epoch else None


def _exit_code(job: SlurmJob) -> int | None:
    """The job's exit code as a shell reports it: its exit status, or ``128 + signal`` when a signal killed it."""
    if job.exit_signal:
        return 128 + job.exit_signal
    return job.exit_code


def _ours(job: SlurmJob, user: str) -> bool:
    """Whether ``job`` is the provider's: named ``itl-...`` by its submit and run as the cluster's ``user`` (the view
    holds no other user's jobs: its memory grows with the provider's work, not the cluster's)."""
    return job.name.startswith("itl-") and job.user_name in (None, user)


class ClusterView:
    """What the platform last read of the cluster's jobs (module docstring, "the tracker's batch read"): by job id,
    refreshed by one ``GET .../jobs?update_time=`` when older than :data:`VIEW_TTL_SECONDS` or asked for a job it
    does not hold; ``complete`` once a full listing was read (a job absent then is unknown to slurmctld)."""

    def __init__(self) -> None:
        self.jobs: dict[int, SlurmJob] = {}
        self.read_at: float | None = None
        self.requests = 0
        self._lock = threading.Lock()

    def refresh(self, client: SlurmRestClient, now: float) -> None:
        """One read: since the last one (304: nothing changed), or everything (the first read). Jobs slurmctld no
        longer lists keep their last state when it was final (they left after MinJobAge); a running one that left
        unseen is dropped (unknown now); one listed whose record could not be read keeps what was last read of it.
        Raises the client's errors."""
        with self._lock:
            self.requests += 1
            # this function's clock, not slurmctld's: read from a margin before, so a skew never hides a change
            since = int(self.read_at) - CLOCK_SKEW_SECONDS if self.read_at is not None else None
            listed = client.jobs() if since is None else client.listing_since(since)
            if listed is not None:
                fresh = {job.job_id: job for job in listed if _ours(job, client.user)}
                unreadable = client.unreadable
                kept = {
                    job_id: job
                    for job_id, job in self.jobs.items()
                    if job_id not in fresh
                    and (
                        job_id in unreadable  # listed, but its record could not be read: as last read
                        or (job.state in FINAL_STATES and (job.end_time or 0) > now - ENDED_KEPT_SECONDS)
                    )
                }
                self.jobs = {**kept, **fresh}
            self.read_at = now


class SlurmPlatform:
    """One Slurm cluster as an :class:`~itl_accelerator.platforms.protocol.ExecutionPlatform` (module docstring).
    ``client`` speaks to its slurmrestd; ``probe`` (injectable) reads an instance's endpoint; ``clock``: epoch
    seconds."""

    def __init__(
        self,
        cluster: SlurmClusterSettings,
        client: SlurmRestClient,
        *,
        probe: httpx.Client | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.cluster = cluster
        self.client = client
        self._probe = probe or httpx.Client(timeout=httpx.Timeout(2.0, connect=1.0))
        self._clock = clock
        self._sleep = sleep
        self.view = ClusterView()

    # ----------------------------------------------------------------------------------------------- ids
    def _job_id(self, platform_id: str) -> int:
        prefix = f"{SLURM_ID_PREFIX}{self.cluster.name}:"
        if not platform_id.startswith(prefix) or not platform_id[len(prefix) :].isdigit():
            raise DgxNotFound(f"'{platform_id[:80]}' is no job of Slurm cluster '{self.cluster.name}'", status=404)
        return int(platform_id[len(prefix) :])

    def _id(self, job: SlurmJob) -> str:
        return slurm_id(self.cluster.name, job.job_id)

    def _guarded(self, call: Callable[[], Any]) -> Any:
        """A client call with Slurm's errors as the platform errors the workflows retry and catch."""
        try:
            return call()
        except SlurmJobNotFound as exc:
            raise DgxNotFound(str(exc), status=404) from exc
        except SlurmTransientError as exc:
            raise DgxTransientError(f"Slurm cluster '{self.cluster.name}': {exc}") from exc
        except SlurmError as exc:
            raise DgxPermanentError(f"Slurm cluster '{self.cluster.name}' refused it: {exc}", status=400) from exc

    # ----------------------------------------------------------------------------------------------- jobs
    def submit_job(
        self,
        *,
        idempotency_key: str,
        name: str,
        node_id: str,
        devices: int,
        memory_gb: int,
        workload: dict[str, Any],
        max_duration_seconds: int,
        callback_url: str | None = None,
        accelerator: dict[str, str] | None = None,
        node_ids: list[str] | None = None,
        targets: list[str] | None = None,
        partition: str | None = None,
        recover: bool = False,
    ) -> DgxJob:
        """Submit the job pinned to ``targets`` (module docstring), then wait up to :data:`START_WAIT_SECONDS` for
        Slurm to start it, so the answer carries Slurm's own start time (a read that fails then is not the submit's
        failure: the job is answered as Slurm accepted it, and the tracker reads its start). With ``recover`` (this
        key's submit may have reached slurmctld before: the step runs again) the job of that name is looked for first
        and answered if found — never submitted twice. Raises ``DgxPermanentError`` when the cluster refuses it,
        ``DgxTransientError`` when it cannot be reached."""
        hosts = [t for t in targets or [] if t]
        if not hosts:
            raise DgxPermanentError(f"No Slurm node to run '{name}' on (the node names no nodeName).", status=400)
        kind = (accelerator or {}).get("kind", "GPU")
        spec = SlurmJobSpec(
            name=f"itl-{idempotency_key}",
            script=self._script(workload),
            partition=partition or self._partition(),
            nodes=len(hosts),
            node_list=hosts,
            gres_per_node=f"{kind.lower()}:{devices}" if devices else None,
            time_limit_minutes=max(1, math.ceil(max_duration_seconds / 60)) if max_duration_seconds else None,
            environment={**self.cluster.job_environment, **(workload.get("env") or {}), "ITL_JOB": name},
            working_directory=self.cluster.working_directory,
            standard_output=f"{self.cluster.working_directory}/itl-%j.out",
            comment=name[:1000],
        )
        found = self._guarded(lambda: self.client.find_job(name=spec.name)) if recover else None
        if found is not None:
            logger.info("A Slurm job of this submit existed already", extra={"job_id": found.job_id})
            return self._job(found, node_id=node_id, devices=devices, name=name)
        job_id = self._guarded(lambda: self.client.submit(spec))
        deadline = self._clock() + START_WAIT_SECONDS
        job = SlurmJob(job_id=job_id, name=spec.name, state="PENDING")
        try:
            job = self.client.get_job(job_id)
            while job.state == "PENDING" and self._clock() < deadline:
                self._sleep(0.25)
                job = self.client.get_job(job_id)
        except SlurmError as exc:  # accepted: what it does now the tracker reads
            logger.warning(
                "Slurm accepted the job; reading its start failed", extra={"job_id": job_id, "error": str(exc)}
            )
        return self._job(job, node_id=node_id, devices=devices, name=name)

    def _partition(self) -> str | None:
        return self.cluster.partition or None

    def _script(self, workload: dict[str, Any]) -> str:
        """The batch script: the container's command (argv, shell-quoted), in its image with Pyxis."""
        argv = [str(a) for a in workload.get("command") or []] or ["true"]
        if self.cluster.container_runtime == "pyxis":
            argv = ["srun", f"--container-image={workload['image']}", *argv]
        return "#!/bin/bash\n# ITL Accelerator job (itl_accelerator/slurm/platform.py)\nexec " + shlex.join(argv) + "\n"

    def get_job(self, job_id: str) -> DgxJob:
        """The job as Slurm reports it now. Raises ``DgxNotFound`` when slurmctld no longer knows it."""
        return self._job(self._guarded(lambda: self.client.get_job(self._job_id(job_id))))

    def get_jobs(self, job_ids: list[str]) -> dict[str, DgxJob]:
        """The jobs slurmctld knows among ``job_ids`` (an id it does not know is absent), from the view of the
        cluster's jobs — one request when it is older than :data:`VIEW_TTL_SECONDS` or misses one asked for."""
        return {platform_id: self._job(job) for platform_id, job in self._viewed(job_ids).items()}

    def _viewed(self, platform_ids: list[str]) -> dict[str, SlurmJob]:
        """The jobs of ``platform_ids`` slurmctld knows, from the view (refreshed by one request when it is older
        than :data:`VIEW_TTL_SECONDS` or misses one of them)."""
        wanted = {self._job_id(i): i for i in platform_ids}
        now = self._clock()
        stale = self.view.read_at is None or now - self.view.read_at > VIEW_TTL_SECONDS
        if stale or any(job_id not in self.view.jobs for job_id in wanted):
            self._guarded(lambda: self.view.refresh(self.client, now))
        jobs = self.view.jobs  # one snapshot: a refresh by another thread replaces the dict whole
        return {wanted[j]: jobs[j] for j in wanted if j in jobs}

    def cancel_job(self, job_id: str, *, grace_period_seconds: int = 0, reason: str | None = None) -> DgxJob | None:
        """Stop the job (module docstring, "Grace period"): with ``grace_period_seconds`` left, SIGTERM it (once) and
        let it run; with none left, cancel it (SIGTERM, then SIGKILL after the cluster's KillWait). A job that ended
        stays as it ended. None when slurmctld does not know it."""
        number = self._job_id(job_id)
        try:
            job = self._guarded(lambda: self.client.get_job(number))
        except DgxNotFound:
            return None
        if job.state in FINAL_STATES:
            return self._job(job)
        if grace_period_seconds > 0:
            if not job.comment.startswith(SIGTERM_MARK):  # the signal first: a mark never stands for one unsent
                self._guarded(lambda: self.client.cancel(number, "TERM"))
                self._guarded(lambda: self.client.set_comment(number, f"{SIGTERM_MARK}{int(self._clock())}"))
                logger.info("Slurm job sent SIGTERM for its grace period", extra={"job_id": number})
        else:
            self._guarded(lambda: self.client.cancel(number))
        try:
            return self._job(self._guarded(lambda: self.client.get_job(number)))
        except DgxNotFound:
            return None

    def find_job(self, idempotency_key: str) -> DgxJob | None:
        """The job a submit with this key made, if slurmctld still knows it (its name is the key)."""
        found = self._guarded(lambda: self.client.find_job(name=f"itl-{idempotency_key}"))
        return self._job(found) if found is not None else None

    def get_job_logs(
        self, job_id: str, *, after: int = 0, since: str | None = None, tail: int | None = None, limit: int = 1000
    ) -> DgxLogPage:
        """Not served (module docstring): raises :class:`LogsNotServed`."""
        raise LogsNotServed(
            f"Slurm cluster '{self.cluster.name}' serves no job logs (slurmrestd serves no output files); the job's "
            f"output is {self.cluster.working_directory}/itl-{self._job_id(job_id)}.out on the cluster.",
            status=409,
        )

    def _job(self, job: SlurmJob, *, node_id: str = "", devices: int = 0, name: str = "") -> DgxJob:
        """A Slurm job in the platforms' shape (module docstring, "Outcomes")."""
        state = job.state
        if state == "PENDING":
            status = "Queued"
        elif state in ("RUNNING", "COMPLETING", "SUSPENDED"):
            status = "Running"
        elif state == "COMPLETED":
            status = "Succeeded"
        elif state == "CANCELLED":
            status = "Canceled"
        else:
            status = "Failed"
        ended = job.end_time if state in FINAL_STATES else None
        if state == "TIMEOUT" and ended and job.start_time and job.time_limit_minutes:
            ended = min(ended, job.start_time + job.time_limit_minutes * 60)  # a limit fires late: billed to it
        code = _exit_code(job) if state in FINAL_STATES else None
        message = None
        if status == "Failed":
            said = _FAILED_STATES.get(state, f"The job ended {state} on the Slurm cluster")
            message = f"{said} (exit code {code})." if code is not None else f"{said}."
        return DgxJob(
            id=self._id(job),
            name=name or job.comment or job.name,
            node_id=node_id or ",".join(job.nodes),
            gpus=devices,
            status=status,  # type: ignore[arg-type]
            exit_code=code,
            error_code=state if status == "Failed" else None,
            error_message=message,
            started_at=_iso(job.start_time) if state != "PENDING" else None,
            ended_at=_iso(ended),
        )

    # ----------------------------------------------------------------------------------------------- instances
    def create_instance(
        self,
        *,
        idempotency_key: str,
        name: str,
        node_id: str,
        model: str,
        devices: int,
        memory_gb: int,
        callback_url: str | None = None,
        accelerator: dict[str, str] | None = None,
        targets: list[str] | None = None,
        partition: str | None = None,
    ) -> DgxInstance:
        """Submit the instance's service job on its node (module docstring, "Instances"): ``Provisioning`` until its
        endpoint answers."""
        hosts = [t for t in targets or [] if t]
        if not hosts:
            raise DgxPermanentError(f"No Slurm node to run '{name}' on (the node names no nodeName).", status=400)
        existing = self._guarded(lambda: self.client.find_job(name=f"itl-{idempotency_key}"))
        if existing is not None and existing.state not in FINAL_STATES:
            return self._instance(existing, model=model, devices=devices, memory_gb=memory_gb)
        spec = SlurmJobSpec(
            name=f"itl-{idempotency_key}",
            script=self._serve_script(),
            partition=partition or self._partition(),
            nodes=1,
            node_list=hosts[:1],
            gres_per_node=f"gpu:{devices}" if devices else None,
            environment={**self.cluster.job_environment, "ITL_OLLAMA_MODEL": model, "ITL_INSTANCE": name},
            working_directory=self.cluster.working_directory,
            standard_output=f"{self.cluster.working_directory}/itl-%j.out",
        )
        job_id = self._guarded(lambda: self.client.submit(spec))
        job = self._guarded(lambda: self.client.get_job(job_id))
        return self._instance(job, model=model, devices=devices, memory_gb=memory_gb, name=name, node_id=node_id)

    def _serve_script(self) -> str:
        """The service job: a free port of the node, Ollama's serve command on it, the endpoint published (the job's
        comment) once it answers, then the server waited on (it ends the job when it ends)."""
        serve = self.cluster.ollama_serve_command
        return f"""#!/bin/bash
# ITL Accelerator Ollama instance (itl_accelerator/slurm/platform.py)
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
HOST=${{ITL_ENDPOINT_HOST:-$(hostname)}}
export OLLAMA_HOST=0.0.0.0:$PORT
{serve} &
SERVER=$!
trap 'kill -TERM $SERVER 2>/dev/null' TERM
for _ in $(seq 1 600); do
  if python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PORT/api/tags', timeout=1)" 2>/dev/null; then
    scontrol update jobid=$SLURM_JOB_ID comment="{ENDPOINT_MARK}http://$HOST:$PORT"
    break
  fi
  kill -0 $SERVER 2>/dev/null || exit 1
  sleep 0.5
done
wait $SERVER
"""

    def get_instance(self, instance_id: str) -> DgxInstance:
        """The instance as its job is now: ``Running`` (with its endpoint) only once the endpoint answers Ollama's
        ``GET /api/tags``. Raises ``DgxNotFound`` when slurmctld no longer knows the job."""
        job = self._guarded(lambda: self.client.get_job(self._job_id(instance_id)))
        return self._instance(job, probe=True)

    def get_instances(self, instance_ids: list[str]) -> dict[str, DgxInstance]:
        """The instances' jobs as the view of the cluster holds them (one request at most; no endpoint probe: a job
        that still runs is a live instance)."""
        return {platform_id: self._instance(job) for platform_id, job in self._viewed(instance_ids).items()}

    def delete_instance(self, instance_id: str) -> bool:
        """Cancel the instance's job. False when slurmctld no longer knows it."""
        number = self._job_id(instance_id)
        try:
            job = self._guarded(lambda: self.client.get_job(number))
        except DgxNotFound:
            return False
        if job.state in FINAL_STATES:
            return False
        return bool(self._guarded(lambda: self.client.cancel(number)))

    def find_instance(self, idempotency_key: str) -> DgxInstance | None:
        found = self._guarded(lambda: self.client.find_job(name=f"itl-{idempotency_key}"))
        return self._instance(found) if found is not None else None

    def _instance(
        self,
        job: SlurmJob,
        *,
        probe: bool = False,
        model: str = "",
        devices: int = 0,
        memory_gb: int = 0,
        name: str = "",
        node_id: str = "",
    ) -> DgxInstance:
        """An instance's job in the platforms' shape: ``Provisioning`` while pending or not answering yet,
        ``Running`` with its endpoint, ``Deleted`` once canceled, ``Failed`` when it ended otherwise."""
        endpoint = job.comment[len(ENDPOINT_MARK) :] if job.comment.startswith(ENDPOINT_MARK) else None
        error_code = error_message = None
        if job.state == "CANCELLED":
            status = "Deleted"
        elif job.state in FINAL_STATES:
            status, error_code = "Failed", job.state
            error_message = f"The instance's Slurm job ended {job.state} (exit code {_exit_code(job)})."
        elif job.state == "RUNNING" and endpoint and (not probe or self._answers(endpoint)):
            status = "Running"
        else:
            status = "Provisioning"
        return DgxInstance(
            id=self._id(job),
            name=name or job.name,
            node_id=node_id or ",".join(job.nodes),
            model=model,
            gpus=devices,
            memory_gb=memory_gb,
            status=status,  # type: ignore[arg-type]
            endpoint=endpoint if status == "Running" else None,
            error_code=error_code,
            error_message=error_message,
        )

    def _answers(self, endpoint: str) -> bool:
        """Whether Ollama answers at ``endpoint`` (``GET /api/tags``)."""
        try:
            return self._probe.get(f"{endpoint}/api/tags").status_code == 200
        except httpx.HTTPError:
            return False

    # ----------------------------------------------------------------------------------------------- nodes
    def node_health(self) -> list[NodeHealth]:
        """Every node of the cluster as slurmctld reports it (one request: ``GET .../nodes``)."""
        nodes = self._guarded(self.client.nodes)
        return [
            NodeHealth(
                name=n.name,
                state="+".join([n.state, *n.flags]),
                reason=n.reason,
                placeable=n.available,
                devices=dict(n.gres),
                drained_by_provider=n.drained and n.reason.startswith(DRAIN_REASON_PREFIX),
            )
            for n in nodes
        ]

    def drain(self, name: str, reason: str) -> bool:
        """Drain Slurm node ``name`` with the provider's ``reason`` (:data:`DRAIN_REASON_PREFIX` first): no new job
        lands there. False where the cluster's REST version serves no node update (v0.0.38: the provider's own cordon
        keeps its work off the node)."""
        try:
            self.client.drain_node(name, f"{DRAIN_REASON_PREFIX}{reason}"[:200])
        except SlurmUnsupported:
            return False
        except SlurmError as exc:
            raise DgxTransientError(f"Slurm cluster '{self.cluster.name}': {exc}") from exc
        return True

    def resume(self, name: str) -> bool:
        """Undo :meth:`drain` (False where node updates are not served)."""
        try:
            self.client.resume_node(name)
        except SlurmUnsupported:
            return False
        except SlurmError as exc:
            raise DgxTransientError(f"Slurm cluster '{self.cluster.name}': {exc}") from exc
        return True

    # ----------------------------------------------------------------------------------------------- usage
    def get_usage(self, resource_id: str, start: str, end: str) -> DgxUsage:
        """No metrics (module docstring): every one None."""
        return DgxUsage()
