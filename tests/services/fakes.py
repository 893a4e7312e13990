"""In-memory stand-ins for what the services call outside the process — the DGX Platform, Step Functions, S3 — and a
clock the tests move. No threads, no sockets, no sleeping: everything happens when a test (or the state machine
runner, workflows.py) calls it.

- :class:`FakeClock` — epoch seconds; ``advance`` moves it. Services take it as their ``clock``; API calls take
  :meth:`FakeClock.datetime` as their :class:`~itl_accelerator.services.common.context.CallContext` clock.
- :class:`FakeDgx` — the methods of :class:`~itl_accelerator.dgx.client.DgxPlatformClient` the services call, with
  the platform's behaviour as local/itl_local/dgx_simulator.py has it (idempotency keys, Provisioning → Running or
  Failed, Deleting → gone, a cancel of an ended job leaves it as it ended, 404 as :class:`DgxNotFound`), driven by
  knobs on the fake clock rather than on wall time, and faults raised as the client raises them.
- :class:`FakeStepFunctions` — ``start_execution``, ``describe_execution``, ``send_task_success`` with the errors
  the real service answers (``ExecutionAlreadyExists``, ``ExecutionDoesNotExist``, ``InvalidToken``...), recording
  what it was given; the executions it holds are run by workflows.py.
- :class:`FakeS3` — what the billing export calls: ``upload_fileobj``, ``put_object``, ``get_object`` (with
  ``exceptions.NoSuchKey``), ``head_object``.
"""

from __future__ import annotations

import io
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from itl_accelerator.dgx.errors import DgxNotFound, DgxPermanentError, DgxTransientError
from itl_accelerator.dgx.models import DgxInstance, DgxJob, DgxLogLine, DgxLogPage, DgxUsage


def client_error(code: str, operation: str, message: str = "") -> ClientError:
    """A botocore ``ClientError`` as an AWS service answers it."""
    return ClientError({"Error": {"Code": code, "Message": message or code}}, operation)


def iso(epoch: float) -> str:
    """UTC ISO 8601 with ``Z`` (as the DGX Platform reports times)."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch_of(text: str) -> float:
    """``2025-03-10T08:00:00`` (UTC) → epoch seconds."""
    return datetime.fromisoformat(text.replace("Z", "")).replace(tzinfo=UTC).timestamp()


# ---------------------------------------------------------------------------------------------------------- clock
class FakeClock:
    """A clock the test moves: ``clock()`` is epoch seconds (the services' ``clock``)."""

    def __init__(self, start: float):
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def datetime(self) -> datetime:
        """The current time as a UTC datetime (a ``CallContext``'s clock)."""
        return datetime.fromtimestamp(self.now, UTC)

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now

    def set(self, when: float | str) -> float:
        """Move to ``when`` (epoch seconds, or an ISO text in UTC); never backwards."""
        target = epoch_of(when) if isinstance(when, str) else float(when)
        assert target >= self.now, f"the clock does not go back ({iso(self.now)} → {iso(target)})"
        self.now = target
        return self.now

    def __repr__(self) -> str:
        return f"FakeClock({iso(self.now)})"


# ---------------------------------------------------------------------------------------------------------- DGX
@dataclass
class _Instance:
    id: str
    name: str
    node_id: str
    model: str
    devices: int
    memory_gb: int
    key: str
    created: float
    status: str = "Provisioning"
    endpoint: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    deleting_since: float | None = None

    def public(self) -> DgxInstance:
        return DgxInstance(
            id=self.id,
            name=self.name,
            node_id=self.node_id,
            model=self.model,
            gpus=self.devices,
            memory_gb=self.memory_gb,
            status=self.status,  # type: ignore[arg-type]
            endpoint=self.endpoint,
            error_code=self.error_code,
            error_message=self.error_message,
        )


@dataclass
class _Job:
    id: str
    name: str
    node_id: str
    devices: int
    memory_gb: int
    key: str
    workload: dict[str, Any]
    max_duration_seconds: int
    started: float
    status: str = "Running"
    exit_code: int | None = None
    error_code: str | None = None
    error_message: str | None = None
    ended: float | None = None
    log: list[tuple[float, str]] = field(default_factory=list)
    terminate_at: float | None = None  # a cancel's grace period ends then (SIGKILL)
    cancels: list[tuple[int, str | None]] = field(default_factory=list)  # (grace seconds, reason) of each cancel

    def public(self) -> DgxJob:
        return DgxJob(
            id=self.id,
            name=self.name,
            node_id=self.node_id,
            gpus=self.devices,
            status=self.status,  # type: ignore[arg-type]
            exit_code=self.exit_code,
            logs_url=f"https://dgx.test/v1/jobs/{self.id}/logs",
            error_code=self.error_code,
            error_message=self.error_message,
            started_at=iso(self.started),
            ended_at=iso(self.ended) if self.ended is not None else None,
        )


class FakeDgx:
    """The DGX Platform, in memory, on the fake clock. Knobs (attributes):

    - ``provisioning_seconds``: an instance is ``Running`` (with an endpoint) this long after its create; None: it
      never gets ready (a slow platform). ``fail_on_ready``: it turns ``Failed`` (``GpuInitFailed``) instead.
    - ``deletion_seconds``: a deleted instance is gone this long after its DELETE (0: at once); None: it stays
      ``Deleting`` until :meth:`finish_deletions`. ``refuse_deletes``: DELETE answers 409 (a permanent error).
    - ``ignore_cancels``: a cancel is accepted but the job keeps running (its stop is never confirmed).
    - ``metrics_offset``: added to the utilisation it reports (late metrics revise an hour).
    - ``broken_usage``: resource ids whose usage read raises a plain ``RuntimeError`` (an unexpected failure).
    - :meth:`fail` / :meth:`down` / :meth:`heal`: make a method raise (a :class:`DgxTransientError` by default)
      the next ``times`` calls, or every call until healed.

    Jobs run from their submit until :meth:`finish_job` ends them (or a cancel stops them). Every call is recorded
    in ``calls`` as ``(method, argument)``. ``after[method] = callable(result)`` runs once after ``method`` answered
    (something that happens while the platform's answer is on its way back)."""

    def __init__(self, clock: FakeClock):
        self.clock = clock
        self.instances: dict[str, _Instance] = {}
        self.jobs: dict[str, _Job] = {}
        self.known: dict[str, tuple[int, float, str]] = {}  # every resource ever made: gpus, memory, kind
        self.provisioning_seconds: float | None = 15.0
        self.fail_on_ready = False
        self.deletion_seconds: float | None = 0.0
        self.refuse_deletes = False
        self.ignore_cancels = False
        self.metrics_offset = 0.0
        self.broken_usage: set[str] = set()
        self.calls: list[tuple[str, Any]] = []
        self.after: dict[str, Callable[[Any], None]] = {}
        self._faults: dict[str, list[Exception]] = {}
        self._down: dict[str, Exception] = {}
        self._ids = itertools.count(1)

    # ------------------------------------------------------------------------------------------- fault injection
    def fail(self, method: str, error: Exception | None = None, *, times: int = 1) -> None:
        """The next ``times`` calls of ``method`` raise ``error`` (default: a 503 :class:`DgxTransientError`)."""
        self._faults.setdefault(method, []).extend([error or _transient(method)] * times)

    def down(self, method: str, error: Exception | None = None) -> None:
        """Every call of ``method`` raises ``error`` (default: a 503 :class:`DgxTransientError`) until healed."""
        self._down[method] = error or _transient(method)

    def heal(self, method: str | None = None) -> None:
        """Stop the faults of ``method`` (of every method when None)."""
        if method is None:
            self._faults.clear()
            self._down.clear()
        else:
            self._faults.pop(method, None)
            self._down.pop(method, None)

    def _enter(self, method: str, argument: Any) -> None:
        self.calls.append((method, argument))
        if method in self._down:
            raise self._down[method]
        queued = self._faults.get(method)
        if queued:
            raise queued.pop(0)

    def _answer(self, method: str, result: Any) -> Any:
        hook = self.after.pop(method, None)
        if hook is not None:
            hook(result)
        return result

    def called(self, method: str) -> list[Any]:
        """The arguments of every call of ``method``, in order."""
        return [argument for name, argument in self.calls if name == method]

    # ------------------------------------------------------------------------------------------- time passing
    def _refresh(self, inst: _Instance) -> _Instance | None:
        """The instance as it is now on the fake clock; None once it is gone (and forgotten)."""
        now = self.clock()
        ready = self.provisioning_seconds
        if inst.status == "Provisioning" and ready is not None and now >= inst.created + ready:
            if self.fail_on_ready:
                inst.status = "Failed"
                inst.error_code, inst.error_message = "GpuInitFailed", "GPU initialisation failed on the node."
            else:
                inst.status, inst.endpoint = "Running", f"https://dgx.test/ollama/{inst.id}"
        gone_after = self.deletion_seconds
        if inst.status == "Deleting" and gone_after is not None and inst.deleting_since is not None:
            if now >= inst.deleting_since + gone_after:
                self.instances.pop(inst.id, None)
                return None
        return inst

    def finish_deletions(self) -> None:
        """Every instance being deleted is gone now (the platform caught up)."""
        for inst in list(self.instances.values()):
            if inst.status == "Deleting":
                self.instances.pop(inst.id, None)

    def live_instances(self) -> list[DgxInstance]:
        """What the platform still runs or deletes (for "nothing is left on the platform")."""
        found = [self._refresh(i) for i in list(self.instances.values())]
        return [i.public() for i in found if i is not None]

    # ------------------------------------------------------------------------------------------- instances
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
        self._enter(
            "create_instance",
            {
                "idempotency_key": idempotency_key,
                "name": name,
                "model": model,
                "callback_url": callback_url,
                "accelerator": accelerator,
            },
        )
        held = accelerator or {"kind": "GPU", "vendor": "NVIDIA"}
        if (held.get("kind"), held.get("vendor")) not in (("GPU", "NVIDIA"), ("GPU", "AMD")):
            raise DgxPermanentError(
                "The DGX Platform refused the request: AcceleratorNotSupported: Ollama runs on NVIDIA and AMD GPUs",
                status=400,
            )
        for inst in list(self.instances.values()):
            if inst.key == idempotency_key and self._refresh(inst) is not None:
                return inst.public()  # the same key: the instance already made
        inst = _Instance(
            id=f"dgxi-{next(self._ids):04d}",
            name=name,
            node_id=node_id,
            model=model,
            devices=devices,
            memory_gb=memory_gb,
            key=idempotency_key,
            created=self.clock(),
        )
        self.instances[inst.id] = inst
        self.known[inst.id] = (devices, float(memory_gb), "instance")
        return self._answer("create_instance", inst.public())

    def get_instance(self, instance_id: str) -> DgxInstance:
        self._enter("get_instance", instance_id)
        inst = self.instances.get(instance_id)
        inst = self._refresh(inst) if inst else None
        if inst is None:
            raise DgxNotFound(f"DGX Platform has no such resource: GET /v1/instances/{instance_id}", status=404)
        return inst.public()

    def get_instances(self, instance_ids: list[str]) -> dict[str, DgxInstance]:
        self._enter("get_instances", list(instance_ids))
        found = {}
        for instance_id in instance_ids:
            inst = self.instances.get(instance_id)
            inst = self._refresh(inst) if inst else None
            if inst is not None:
                found[instance_id] = inst.public()
        return found

    def delete_instance(self, instance_id: str) -> bool:
        self._enter("delete_instance", instance_id)
        inst = self.instances.get(instance_id)
        inst = self._refresh(inst) if inst else None
        if inst is None:
            return False
        if self.refuse_deletes:
            raise DgxPermanentError("The DGX Platform refused the request: DeleteRefused: not now", status=409)
        if inst.status != "Deleting":
            inst.status, inst.deleting_since = "Deleting", self.clock()
            self._refresh(inst)  # deletion_seconds 0: gone at once
        return True

    def find_instance(self, idempotency_key: str) -> DgxInstance | None:
        self._enter("find_instance", idempotency_key)
        for inst in list(self.instances.values()):
            if inst.key == idempotency_key and self._refresh(inst) is not None:
                return inst.public()
        return None

    # ------------------------------------------------------------------------------------------- jobs
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
        self._enter(
            "submit_job",
            {
                "idempotency_key": idempotency_key,
                "name": name,
                "node_id": node_id,
                "callback_url": callback_url,
                "accelerator": accelerator,
                "node_ids": node_ids,
            },
        )
        for job in self.jobs.values():
            if job.key == idempotency_key:
                return job.public()
        job = _Job(
            id=f"dgxj-{next(self._ids):04d}",
            name=name,
            node_id=node_id,
            devices=devices,
            memory_gb=memory_gb,
            key=idempotency_key,
            workload=json.loads(json.dumps(workload)),
            max_duration_seconds=max_duration_seconds,
            started=self.clock(),
        )
        self.jobs[job.id] = job
        self.known[job.id] = (devices, float(memory_gb), "job")
        return self._answer("submit_job", job.public())

    def _killed_when_due(self, job: _Job) -> _Job:
        """A job whose cancel's grace period ran out is killed then (SIGTERM ignored)."""
        if job.status == "Running" and job.terminate_at is not None and self.clock() >= job.terminate_at:
            job.status, job.exit_code, job.ended = "Canceled", 143, job.terminate_at
        return job

    def get_job(self, job_id: str) -> DgxJob:
        self._enter("get_job", job_id)
        job = self.jobs.get(job_id)
        if job is None:
            raise DgxNotFound(f"DGX Platform has no such resource: GET /v1/jobs/{job_id}", status=404)
        return self._killed_when_due(job).public()

    def get_jobs(self, job_ids: list[str]) -> dict[str, DgxJob]:
        self._enter("get_jobs", list(job_ids))
        return {j: self._killed_when_due(self.jobs[j]).public() for j in job_ids if j in self.jobs}

    def cancel_job(self, job_id: str, *, grace_period_seconds: int = 0, reason: str | None = None) -> DgxJob | None:
        self._enter("cancel_job", job_id)
        job = self.jobs.get(job_id)
        if job is None:
            return None
        job.cancels.append((grace_period_seconds, reason))
        self._killed_when_due(job)
        if job.status == "Running" and grace_period_seconds and not self.ignore_cancels:
            if job.terminate_at is None:
                job.terminate_at = self.clock() + grace_period_seconds
        elif job.status in ("Queued", "Running") and not self.ignore_cancels:
            job.status, job.exit_code, job.ended = "Canceled", 137, self.clock()
        return job.public()

    def find_job(self, idempotency_key: str) -> DgxJob | None:
        self._enter("find_job", idempotency_key)
        return next((j.public() for j in self.jobs.values() if j.key == idempotency_key), None)

    def get_job_logs(
        self,
        job_id: str,
        *,
        after: int = 0,
        since: str | None = None,
        tail: int | None = None,
        limit: int = 1000,
    ) -> DgxLogPage:
        self._enter("get_job_logs", job_id)
        job = self.jobs.get(job_id)
        if job is None:
            raise DgxNotFound(f"DGX Platform has no such resource: GET /v1/jobs/{job_id}/logs", status=404)
        numbered = [DgxLogLine(number=n, time=iso(t), text=text) for n, (t, text) in enumerate(job.log, 1)]
        lines = [x for x in numbered if x.number > after and (since is None or x.time >= since)]
        if tail is not None:
            lines = lines[-tail:] if tail else []
        page = lines[:limit]
        return DgxLogPage(
            job_id=job_id,
            status=job.status,
            lines=page,
            next_after=page[-1].number if page else after,
            more=len(lines) > len(page),
            ended=job.ended is not None,
        )

    def write_log(self, job_id: str, text: str) -> None:
        """The job writes a line to its log, now."""
        self.jobs[job_id].log.append((self.clock(), text))

    def finish_job(
        self, job_id: str, status: str = "Succeeded", *, exit_code: int = 0, at: float | None = None
    ) -> None:
        """The job ends on the platform with ``status`` and ``exit_code``, at ``at`` (default: now)."""
        job = self.jobs[job_id]
        assert job.status in ("Queued", "Running"), f"{job_id} already ended {job.status}"
        job.status, job.exit_code, job.ended = status, exit_code, self.clock() if at is None else at
        if exit_code:
            job.error_code, job.error_message = "NonZeroExitCode", f"The container exited with code {exit_code}."

    def forget_job(self, job_id: str) -> None:
        """The platform loses the job (404 from then on)."""
        self.jobs.pop(job_id, None)

    # ------------------------------------------------------------------------------------------- usage
    def get_usage(self, resource_id: str, start: str, end: str) -> DgxUsage:
        self._enter("get_usage", (resource_id, start, end))
        if resource_id in self.broken_usage:
            raise RuntimeError(f"an unexpected failure reading the usage of {resource_id}")
        if resource_id not in self.known:
            raise DgxNotFound(f"DGX Platform has no such resource: GET /v1/usage?resourceId={resource_id}", status=404)
        devices, memory, kind = self.known[resource_id]
        seconds = max(0.0, epoch_of(end) - epoch_of(start))
        utilization = min(100.0, 50.0 + self.metrics_offset)
        return DgxUsage(
            gpu_utilization_percent=utilization,
            gpu_memory_gb=round(memory * utilization / 100, 1),
            energy_wh=round(devices * 700 * utilization / 100 * seconds / 3600, 3),
            requests=0 if kind == "instance" else None,
            tokens_in=0 if kind == "instance" else None,
            tokens_out=0 if kind == "instance" else None,
        )


def _transient(method: str) -> DgxTransientError:
    return DgxTransientError(f"DGX Platform answered 503 on {method}", status=503)


# ---------------------------------------------------------------------------------------------------------- Step Functions
@dataclass
class Execution:
    """One execution: its state machine, name, input (parsed) and status; ``error``/``cause`` once it failed.
    ``runner`` is what runs it (workflows.py attaches it on the first run)."""

    arn: str
    state_machine_arn: str
    name: str
    input: dict[str, Any]
    status: str = "RUNNING"
    error: str | None = None
    cause: str | None = None
    runner: Any = None


@dataclass
class TaskToken:
    """A ``.waitForTaskToken`` Task's token: ``WAITING`` until completed (``SUCCEEDED``, ``output``) or timed out."""

    token: str
    execution_arn: str
    status: str = "WAITING"
    output: dict[str, Any] | None = None


@dataclass
class FakeStepFunctions:
    """The boto3 ``stepfunctions`` client calls :class:`~itl_accelerator.state_machines.StateMachines` makes.

    ``started``: every execution started, in order; ``completions``: every ``send_task_success`` accepted,
    ``(token, output)``. ``fail_next_start`` makes the next StartExecution calls fail (throttling by default)."""

    executions: dict[str, Execution] = field(default_factory=dict)
    started: list[Execution] = field(default_factory=list)
    tokens: dict[str, TaskToken] = field(default_factory=dict)
    completions: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    start_failures: list[Exception] = field(default_factory=list)
    _tokens: Any = field(default_factory=lambda: itertools.count(1))

    def fail_next_start(self, code: str = "ThrottlingException", *, times: int = 1) -> None:
        self.start_failures.extend([client_error(code, "StartExecution", "Rate exceeded")] * times)

    # ------------------------------------------------------------------------------------------- the client
    def start_execution(self, *, stateMachineArn: str, name: str, input: str = "{}") -> dict[str, Any]:
        if self.start_failures:
            raise self.start_failures.pop(0)
        arn = stateMachineArn.replace(":stateMachine:", ":execution:", 1) + f":{name}"
        payload = json.loads(input)
        existing = self.executions.get(arn)
        if existing is not None:
            # a standard workflow: the same name and input while it runs is the same execution; anything else 400
            if existing.status == "RUNNING" and existing.input == payload:
                return {"executionArn": arn, "startDate": 0}
            raise client_error("ExecutionAlreadyExists", "StartExecution", f"Execution Already Exists: '{arn}'")
        execution = Execution(arn, stateMachineArn, name, payload)
        self.executions[arn] = execution
        self.started.append(execution)
        return {"executionArn": arn, "startDate": 0}

    def describe_execution(self, *, executionArn: str) -> dict[str, Any]:
        execution = self.executions.get(executionArn)
        if execution is None:
            raise client_error(
                "ExecutionDoesNotExist", "DescribeExecution", f"Execution Does Not Exist: '{executionArn}'"
            )
        return {
            "executionArn": execution.arn,
            "stateMachineArn": execution.state_machine_arn,
            "name": execution.name,
            "status": execution.status,
            "input": json.dumps(execution.input),
        }

    def send_task_success(self, *, taskToken: str, output: str) -> dict[str, Any]:
        found = self.tokens.get(taskToken)
        if found is None:
            raise client_error("InvalidToken", "SendTaskSuccess", "Invalid Token")
        if found.status == "TIMED_OUT":
            raise client_error("TaskTimedOut", "SendTaskSuccess", "Task Timed Out")
        execution = self.executions.get(found.execution_arn)
        if found.status != "WAITING" or execution is None or execution.status != "RUNNING":
            raise client_error("TaskDoesNotExist", "SendTaskSuccess", "Task Does Not Exist")
        found.status, found.output = "SUCCEEDED", json.loads(output)
        self.completions.append((taskToken, found.output))
        return {}

    # ------------------------------------------------------------------------------------------- the test's side
    def issue_token(self, execution_arn: str) -> str:
        """A token for a ``.waitForTaskToken`` Task of ``execution_arn`` (what ``$$.Task.Token`` gives)."""
        token = f"token-{next(self._tokens):04d}"
        self.tokens[token] = TaskToken(token, execution_arn)
        return token

    def execution(self, name: str) -> Execution:
        """The execution named ``name`` (an operation id)."""
        found = [e for e in self.executions.values() if e.name == name]
        assert len(found) == 1, f"{len(found)} executions named {name}"
        return found[0]

    def set_status(self, name: str, status: str) -> None:
        """End the execution ``name`` from outside (``FAILED``, ``ABORTED``, ``TIMED_OUT``): it runs no more."""
        self.execution(name).status = status

    def forget(self, name: str) -> None:
        """As if the execution ``name`` had never been started (``ExecutionDoesNotExist``)."""
        execution = self.execution(name)
        del self.executions[execution.arn]


# ---------------------------------------------------------------------------------------------------------- S3
class NoSuchKey(ClientError):
    """botocore's modeled ``NoSuchKey`` (``s3.exceptions.NoSuchKey``): a ``ClientError`` subclass."""


class _S3Exceptions:
    NoSuchKey = NoSuchKey


@dataclass
class StoredObject:
    body: bytes
    content_type: str | None
    metadata: dict[str, str]


class FakeS3:
    """The S3 calls of the billing export, over ``buckets`` that exist (any other: ``NoSuchBucket``)."""

    exceptions = _S3Exceptions

    def __init__(self, *buckets: str):
        self.buckets = set(buckets)
        self.objects: dict[tuple[str, str], StoredObject] = {}
        self.writes: list[tuple[str, str]] = []

    def _bucket(self, bucket: str, operation: str) -> None:
        if bucket not in self.buckets:
            raise client_error("NoSuchBucket", operation, f"The specified bucket does not exist: '{bucket}'")

    def upload_fileobj(
        self, Fileobj: Any, Bucket: str, Key: str, ExtraArgs: dict[str, Any] | None = None, **_: Any
    ) -> None:
        self._bucket(Bucket, "PutObject")
        extra = ExtraArgs or {}
        self.objects[(Bucket, Key)] = StoredObject(
            Fileobj.read(), extra.get("ContentType"), dict(extra.get("Metadata") or {})
        )
        self.writes.append((Bucket, Key))

    def put_object(
        self,
        *,
        Bucket: str,
        Key: str,
        Body: bytes | str,
        ContentType: str | None = None,
        Metadata: dict | None = None,
        ChecksumAlgorithm: str | None = None,
    ) -> dict[str, Any]:
        self._bucket(Bucket, "PutObject")
        body = Body.encode() if isinstance(Body, str) else bytes(Body)
        self.objects[(Bucket, Key)] = StoredObject(body, ContentType, dict(Metadata or {}))
        self.writes.append((Bucket, Key))
        return {"ETag": '"fake"'}

    def get_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        self._bucket(Bucket, "GetObject")
        found = self.objects.get((Bucket, Key))
        if found is None:
            raise NoSuchKey(
                {"Error": {"Code": "NoSuchKey", "Message": "The specified key does not exist."}}, "GetObject"
            )
        return {"Body": io.BytesIO(found.body), "ContentType": found.content_type, "Metadata": dict(found.metadata)}

    def head_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        self._bucket(Bucket, "HeadObject")
        found = self.objects.get((Bucket, Key))
        if found is None:
            raise client_error("404", "HeadObject", "Not Found")
        return {"ContentLength": len(found.body), "ContentType": found.content_type, "Metadata": dict(found.metadata)}

    def body(self, bucket: str, key: str) -> bytes:
        return self.objects[(bucket, key)].body


# ---------------------------------------------------------------------------------------------------------- hooks
class Hooked:
    """A repository that delegates everything to ``target`` and, after a method named in ``after`` returns, runs the
    hook once (``after[name] = callable(result)``): a test's way to make something happen between a service's read
    and its write (a node repriced after placement read its candidates...)."""

    def __init__(self, target: Any):
        self._target = target
        self.after: dict[str, Callable[[Any], None]] = {}

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._target, name)
        if not callable(found):
            return found

        def call(*args: Any, **kwargs: Any) -> Any:
            result = found(*args, **kwargs)
            hook = self.after.pop(name, None)
            if hook is not None:
                hook(result)
            return result

        return call
