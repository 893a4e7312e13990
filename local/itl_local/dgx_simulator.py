"""DGX Platform simulator: the contract of docs/dgx-platform.openapi.yaml, in memory, with fault injection.

Started by the local stack on 127.0.0.1:9504 (``DGX_PLATFORM_API_URL``'s default). Instances go Provisioning →
Running after ``provisioning_seconds``; each running instance serves an Ollama-compatible API under
``/ollama/{id}`` (``/api/tags``, ``/api/ps``, ``/api/generate`` with a canned reply). Faults are set with
``POST /_simulator/config`` (JSON, fields of :class:`SimulatorConfig`) or at start; ``GET /_simulator/state`` lists
what exists; ``POST /_simulator/reset`` forgets everything.

Callbacks (the contract's ``callbacks``): an instance created, or a job submitted, with a ``callbackUrl`` is
announced there when it is ready (``Running``) or failed, and when the job ended (``Succeeded``, ``Failed``,
``Canceled``): a ``POST`` of ``{"eventId", "type", "id", "name", "status", "time"}`` signed with
``callback_secret`` (``X-DGX-Timestamp`` and ``X-DGX-Signature: sha256=HMAC-SHA256(secret, timestamp + "." +
body)``), sent again on anything but a 2xx (``callback_attempts`` in all, waiting ``callback_backoff_seconds``
doubled each time). A background thread (:class:`_Notifier`, started with the first callback URL) notices each
moment as the platform's clock reaches it and delivers on a small pool, so a slow receiver delays no other.
``callbacks`` off, or ``callback_drop_rate``, loses them (polling must still work).
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import hmac
import json
import random
import threading
import time
import typing
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any

import httpx
from pydantic import TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

#: Models whose model part (after the last "/", before the tag) starts with this are refused with 400 ModelNotFound
#: (a permanent failure to test).
UNKNOWN_MODEL_PREFIX = "unknown"


def _model_part(name: str) -> str:
    """The model of an Ollama name: after the last '/', before the tag (a ':' there; one before it is a port)."""
    return name.rsplit("/", 1)[-1].split(":", 1)[0]


@dataclass
class SimulatorConfig:
    """Behaviour knobs. Rates are probabilities in [0, 1] per request (faults) or per instance (outcomes);
    times are seconds."""

    api_key: str = ""  # when set, requests must carry "Authorization: Bearer <api_key>"
    provisioning_seconds: float = 3.0
    deletion_seconds: float = 0.5
    latency_seconds: float = 0.0
    error_rate: float = 0.0  # answer 503 (with Retry-After: 0) instead of serving
    burst_5xx: int = 0  # the next N /v1 requests answer 500
    timeout_rate: float = 0.0  # hold the request hang_seconds before serving (the client times out first)
    hang_seconds: float = 15.0
    accept_then_fail_rate: float = 0.0  # instance accepted, then Failed instead of Running
    never_ready_rate: float = 0.0  # instance stays Provisioning forever
    # while set, every instance stays Provisioning whatever its time: a test holds one in flight (to see it
    # Accepted/Provisioning, press Ctrl-C, delete it mid-way) however slow the machine, then clears it to let it go
    hold_provisioning: bool = False
    hold_deletion: bool = False  # the same for instances being deleted: they stay Deleting while set
    hold_jobs: bool = False  # the same for jobs: none ends while set (each ends as soon as it is cleared)
    refuse_deletes: bool = False  # DELETE of an instance answers 409 DeleteRefused (a permanent failure)
    job_seconds: float = 5.0  # how long a job runs (a job's env ITL_SIM_SECONDS overrides it)
    job_queue_seconds: float = 0.0  # how long a submitted job stays Queued before it runs
    job_fail_rate: float = 0.0  # jobs that end Failed with exit code 1 (env ITL_SIM_EXIT_CODE sets a job's code)
    job_forever_rate: float = 0.0  # jobs that never end on their own (env ITL_SIM_FOREVER=1 for one job)
    # added to every GPU utilisation the usage endpoint reports: change it to make metrics "arrive late" for hours
    # already reported (the provider re-reads recent hours and must pick the change up)
    late_metrics_percent: float = 0.0
    # callbacks (docs/dgx-platform.openapi.yaml, createInstance/submitJob ``callbacks``): sent to a resource's
    # callbackUrl when on; signed with callback_secret; callback_attempts tries in all, the first retry after
    # callback_backoff_seconds, then twice as long each time; callback_drop_rate of them lost (never sent)
    callbacks: bool = True
    callback_secret: str = ""
    callback_attempts: int = 5
    callback_backoff_seconds: float = 1.0
    callback_drop_rate: float = 0.0
    seed: int | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        # ``hold_jobs``' last window (monotonic): a job due to end inside it ends when it is let go, whether the
        # hold is set here, through update() or POST /_simulator/config, and whether or not the job was read
        # while held (reading it is not what holds it)
        if name == "hold_jobs" and bool(value) != bool(getattr(self, "hold_jobs", False)):
            moment = time.monotonic()
            if value:
                object.__setattr__(self, "jobs_held_at", moment)
                object.__setattr__(self, "jobs_released_at", None)
            else:
                object.__setattr__(self, "jobs_released_at", moment)
        object.__setattr__(self, name, value)

    def jobs_let_go(self, due: float) -> float:
        """When a job due to end at ``due`` (monotonic) ends: at ``due``, or when ``hold_jobs`` was let go if it was
        held then."""
        held_at: float | None = getattr(self, "jobs_held_at", None)
        released: float | None = getattr(self, "jobs_released_at", None)
        if held_at is not None and released is not None and held_at <= due < released:
            return released
        return due

    def update(self, values: dict[str, Any]) -> None:
        """Set the given fields, all or none: an unknown name raises ``KeyError``; a value of another type (``"lots"``
        for a rate, ``true`` for a time) or out of range — a rate (``*_rate``) outside [0, 1], a negative time
        (``*_seconds``) or count — raises ``ValueError`` naming the field, and nothing is set."""
        hints = typing.get_type_hints(type(self))
        names = {f.name for f in fields(self)}
        checked: dict[str, Any] = {}
        for key, value in values.items():
            if key not in names:
                raise KeyError(key)
            try:
                checked[key] = TypeAdapter(hints[key]).validate_python(value, strict=True)
            except ValidationError as exc:
                raise ValueError(f"{key}: {exc.errors()[0]['msg']}") from None
            number = checked[key]
            if isinstance(number, (int, float)) and not isinstance(number, bool):
                if key.endswith("_rate") and not 0 <= number <= 1:
                    raise ValueError(f"{key}: a rate is between 0 and 1")
                if number < 0 and key != "late_metrics_percent":
                    raise ValueError(f"{key}: must not be negative")
        for key, value in checked.items():
            setattr(self, key, value)


def _epoch(value: str) -> float:
    """ISO 8601 (``Z`` or an offset) → epoch seconds."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _iso_at(epoch: float) -> str:
    """Epoch seconds → ISO 8601 UTC with ``Z`` (whole seconds, as the platform reports them)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _iso_ms(epoch: float) -> str:
    """Epoch seconds → ISO 8601 UTC with milliseconds and ``Z`` (a log line's time)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch)) + f".{int(epoch % 1 * 1000):03d}Z"


def _iso_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


#: What a request that names no accelerator runs on (the contract: NVIDIA GPUs, as before kinds existed).
DEFAULT_ACCELERATOR = {"kind": "GPU", "vendor": "NVIDIA"}
#: Where Ollama runs (its documentation, "GPU support"): the platform refuses an instance anywhere else.
OLLAMA_ACCELERATORS = {("GPU", "NVIDIA"), ("GPU", "AMD")}


def _accelerator(body: dict[str, Any]) -> dict[str, str] | None:
    """The request's ``accelerator`` (:data:`DEFAULT_ACCELERATOR` when absent); None when it is not an object with a
    ``kind``."""
    given = body.get("accelerator")
    if given is None:
        return dict(DEFAULT_ACCELERATOR)
    if not isinstance(given, dict) or not isinstance(given.get("kind"), str):
        return None
    return {k: str(v) for k, v in given.items() if k in ("kind", "vendor", "model", "topology") and v is not None}


def _callback_url(body: dict[str, Any]) -> str | None:
    """The ``callbackUrl`` of a create or submit body (None when absent or empty)."""
    value = body.get("callbackUrl")
    return value if isinstance(value, str) and value else None


def sign_callback(secret: str, timestamp: str, body: bytes) -> str:
    """The ``X-DGX-Signature`` of a callback: ``sha256=`` and the hex HMAC-SHA256 under ``secret`` of the timestamp
    header, a ``.``, and the body as sent (the contract's ``callbacks``)."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status, headers=headers)


class DgxSimulator:
    """The simulator's state and its Starlette app (``.app``)."""

    def __init__(self, config: SimulatorConfig | None = None):
        self.config = config or SimulatorConfig()
        self.rng = random.Random(self.config.seed)  # noqa: S311 - fault injection, not cryptography
        self.lock = threading.Lock()
        self.instances: dict[str, dict[str, Any]] = {}
        self.by_key: dict[str, str] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        # what /v1/usage reports on, kept after a resource is gone: id → {"gpus", "memoryGb", "kind", "generated"}
        self.ledger: dict[str, dict[str, Any]] = {}
        self.requests = 0
        #: every callback delivery attempt: ``{"eventId", "url", "event", "attempt", "answer", "reply"}`` (answer: the
        #: HTTP status, or the error's name when none came; reply: the answer's body; sentAt, answeredAt: epoch s) — ``answer`` "lost" for one
        #: never sent (callbacks off, or dropped)
        self.callbacks_sent: list[dict[str, Any]] = []
        self.notifier = _Notifier(self)
        self.app = Starlette(
            routes=[
                Route("/v1/nodes", self.list_nodes),
                Route("/v1/nodes/{node_id}/health", self.node_health),
                Route("/v1/instances", self.create_instance, methods=["POST"]),
                Route("/v1/instances", self.list_instances, methods=["GET"]),
                Route("/v1/instances:batchGet", self.batch_get_instances, methods=["POST"]),
                Route("/v1/instances/{instance_id}", self.get_instance, methods=["GET"]),
                Route("/v1/instances/{instance_id}", self.delete_instance, methods=["DELETE"]),
                Route("/v1/jobs", self.create_job, methods=["POST"]),
                Route("/v1/jobs", self.list_jobs, methods=["GET"]),
                Route("/v1/jobs:batchGet", self.batch_get_jobs, methods=["POST"]),
                Route("/v1/jobs/{job_id}", self.get_job, methods=["GET"]),
                Route("/v1/jobs/{job_id}/cancel", self.cancel_job, methods=["POST"]),
                Route("/v1/jobs/{job_id}/logs", self.job_logs, methods=["GET"]),
                Route("/v1/usage", self.usage),
                Route("/ollama/{instance_id}/api/tags", self.ollama_tags),
                Route("/ollama/{instance_id}/api/ps", self.ollama_ps),
                Route("/ollama/{instance_id}/api/generate", self.ollama_generate, methods=["POST"]),
                Route("/_simulator/config", self.set_config, methods=["POST", "GET"]),
                Route("/_simulator/state", self.state),
                Route("/_simulator/reset", self.reset, methods=["POST"]),
            ],
            middleware=[],
        )
        self.app.add_middleware(_FaultMiddleware, simulator=self)

    # ----------------------------------------------------------------------------------------------- control
    async def set_config(self, request: Request) -> JSONResponse:
        if request.method == "POST":
            held = self.config.hold_provisioning
            try:
                self.config.update(await request.json())
            except (KeyError, ValueError) as exc:
                return _error(400, "InvalidConfig", f"unknown or invalid field: {exc}")
            if "seed" in (await request.json()):
                self.rng.seed(self.config.seed)
            if held and not self.config.hold_provisioning:
                self.released(time.monotonic())
            self.notifier.wake()  # a hold let go: what was due is announced now
        return JSONResponse(asdict(self.config))

    def released(self, moment: float) -> None:
        """``hold_provisioning`` was let go at ``moment`` (monotonic): instances held past their time become ready
        then, not back when they were due."""
        with self.lock:
            for inst in self.instances.values():
                if inst["status"] == "Provisioning":
                    inst["releasedAt"] = moment

    async def state(self, _: Request) -> JSONResponse:
        with self.lock:
            live = [self._refresh(i) for i in list(self.instances.values())]
            jobs = [self._public_job(self._refresh_job(j)) for j in self.jobs.values()]
        return JSONResponse({"instances": [i for i in live if i], "jobs": jobs, "requests": self.requests})

    async def reset(self, _: Request) -> JSONResponse:
        with self.lock:
            self.instances.clear()
            self.by_key.clear()
            self.jobs.clear()
            self.ledger.clear()
            self.callbacks_sent.clear()
        return JSONResponse({"reset": True})

    # ----------------------------------------------------------------------------------------------- nodes
    async def list_nodes(self, _: Request) -> JSONResponse:
        with self.lock:
            nodes = sorted({i["nodeId"] for i in self.instances.values()})
        return JSONResponse({"value": [{"id": n, "status": "Healthy"} for n in nodes]})

    async def node_health(self, request: Request) -> JSONResponse:
        return JSONResponse({"id": request.path_params["node_id"], "status": "Healthy", "gpuErrors": 0})

    # ----------------------------------------------------------------------------------------------- instances
    def _refresh(self, inst: dict[str, Any]) -> dict[str, Any] | None:
        """Advance an instance by the clock; None once deleted (and forget it)."""
        now = time.monotonic()
        held = inst["neverReady"] or self.config.hold_provisioning
        if inst["status"] == "Provisioning" and not held and now >= inst["readyAt"]:
            if inst["failOnReady"]:
                inst["status"] = "Failed"
                inst["error"] = {"code": "GpuInitFailed", "message": "GPU initialisation failed on the node."}
            else:
                inst["status"] = "Running"
                inst["endpoint"] = f"{inst['baseUrl']}/ollama/{inst['id']}"
            # when it became ready or failed (wall clock): the moment it was due, or the hold's end
            moment = max(inst["readyAt"], inst.get("releasedAt", 0.0))
            inst["readyAtWall"] = inst["wallStart"] + moment - inst["created"]
        if inst["status"] == "Deleting" and self.config.hold_deletion:
            inst["deleteAt"] = max(inst["deleteAt"], now)
        elif inst["status"] == "Deleting" and now >= inst["deleteAt"]:
            self.instances.pop(inst["id"], None)
            return None
        return inst

    @staticmethod
    def _public(inst: dict[str, Any]) -> dict[str, Any]:
        keys = ("id", "name", "nodeId", "model", "gpus", "memoryGb", "status", "endpoint", "error", "idempotencyKey")
        return {**{k: inst.get(k) for k in keys}, "accelerator": inst.get("accelerator") or dict(DEFAULT_ACCELERATOR)}

    async def create_instance(self, request: Request) -> JSONResponse:
        try:
            body = await request.json()
            name, node_id, model = str(body["name"]), str(body["nodeId"]), str(body["model"])
            gpus, memory = int(body["gpus"]), int(body["memoryGb"])
        except (KeyError, TypeError, ValueError):
            return _error(400, "InvalidRequest", "name, nodeId, model, gpus and memoryGb are required.")
        if gpus < 1 or memory < 1:
            return _error(400, "InvalidRequest", "gpus and memoryGb must be positive.")
        accelerator = _accelerator(body)
        if accelerator is None:
            return _error(400, "InvalidRequest", "accelerator is an object with a kind (GPU, TPU, NPU...).")
        if (accelerator["kind"], accelerator.get("vendor", "NVIDIA")) not in OLLAMA_ACCELERATORS:
            return _error(
                400,
                "AcceleratorNotSupported",
                f"Ollama runs on NVIDIA GPUs (CUDA) and AMD GPUs (ROCm); the node holds "
                f"{accelerator.get('vendor', '')} {accelerator['kind']}s.",
            )
        if _model_part(model).startswith(UNKNOWN_MODEL_PREFIX):
            return _error(400, "ModelNotFound", f"The model '{model}' is not in the platform's registry.")
        key = request.headers.get("Idempotency-Key")
        if not key:
            return _error(400, "IdempotencyKeyRequired", "Idempotency-Key header is required on create.")
        with self.lock:
            existing = self.by_key.get(key)
            if existing and existing in self.instances:
                inst = self._refresh(self.instances[existing])
                if inst:
                    return JSONResponse(self._public(inst), status_code=200)
            inst = {
                "id": f"dgxi-{uuid.uuid4().hex[:12]}",
                "name": name,
                "nodeId": node_id,
                "model": model,
                "accelerator": accelerator,
                "gpus": gpus,
                "memoryGb": memory,
                "status": "Provisioning",
                "endpoint": None,
                "error": None,
                "idempotencyKey": key,
                "readyAt": time.monotonic() + self.config.provisioning_seconds,
                "deleteAt": 0.0,
                "failOnReady": self.rng.random() < self.config.accept_then_fail_rate,
                "neverReady": self.rng.random() < self.config.never_ready_rate,
                "baseUrl": f"{request.url.scheme}://{request.url.netloc}",
                "callbackUrl": _callback_url(body),
                "wallStart": time.time(),
                "created": time.monotonic(),
                "announced": None,
            }
            self.instances[inst["id"]] = inst
            self.by_key[key] = inst["id"]
            self.ledger[inst["id"]] = {"gpus": gpus, "memoryGb": memory, "kind": "instance", "generated": []}
        if inst["callbackUrl"]:
            self.notifier.wake()
        return JSONResponse(self._public(inst), status_code=201)

    async def list_instances(self, request: Request) -> JSONResponse:
        key = request.query_params.get("idempotencyKey")
        with self.lock:
            live = [self._refresh(i) for i in list(self.instances.values())]
        items = [self._public(i) for i in live if i and (key is None or i["idempotencyKey"] == key)]
        return JSONResponse({"value": items})

    async def _batch_ids(self, request: Request) -> list[str] | JSONResponse:
        """The ``ids`` of a batch read (1 to 100 strings), or the contract's 400."""
        try:
            body = await request.json()
        except ValueError:
            body = None
        ids = body.get("ids") if isinstance(body, dict) else None
        if not isinstance(ids, list) or not 1 <= len(ids) <= 100 or not all(isinstance(i, str) for i in ids):
            return _error(400, "InvalidRequest", "ids: 1 to 100 ids.")
        return ids

    async def batch_get_instances(self, request: Request) -> JSONResponse:
        ids = await self._batch_ids(request)
        if isinstance(ids, JSONResponse):
            return ids
        found, missing = [], []
        with self.lock:
            for instance_id in ids:
                inst = self.instances.get(instance_id)
                inst = self._refresh(inst) if inst else None
                if inst is None:
                    missing.append(instance_id)
                else:
                    found.append(self._public(inst))
        return JSONResponse({"value": found, "missing": missing})

    async def batch_get_jobs(self, request: Request) -> JSONResponse:
        ids = await self._batch_ids(request)
        if isinstance(ids, JSONResponse):
            return ids
        found, missing = [], []
        with self.lock:
            for job_id in ids:
                job = self.jobs.get(job_id)
                job = self._refresh_job(job) if job else None
                if job is None:
                    missing.append(job_id)
                else:
                    found.append(self._public_job(job))
        return JSONResponse({"value": found, "missing": missing})

    async def get_instance(self, request: Request) -> JSONResponse:
        with self.lock:
            inst = self.instances.get(request.path_params["instance_id"])
            inst = self._refresh(inst) if inst else None
        if inst is None:
            return _error(404, "NotFound", "No such instance.")
        return JSONResponse(self._public(inst))

    async def delete_instance(self, request: Request) -> Response:
        if self.config.refuse_deletes:
            return _error(409, "DeleteRefused", "The platform refuses to delete the instance now.")
        with self.lock:
            inst = self.instances.get(request.path_params["instance_id"])
            inst = self._refresh(inst) if inst else None
            if inst is None:
                return _error(404, "NotFound", "No such instance.")
            if inst["status"] != "Deleting":
                inst["status"] = "Deleting"
                inst["deleteAt"] = time.monotonic() + self.config.deletion_seconds
        return JSONResponse(self._public(inst), status_code=202)

    # ----------------------------------------------------------------------------------------------- jobs
    def _refresh_job(self, job: dict[str, Any], now: float | None = None) -> dict[str, Any]:
        """Advance a job by the clock to ``now`` (monotonic; default: now): Queued → Running → Succeeded/Failed
        (unless it runs forever)."""
        now = time.monotonic() if now is None else now
        if job["status"] == "Queued" and now >= job["runAt"]:
            # the times a job reports are when it ran and ended, not when someone asked
            job["status"], job["startedAt"] = "Running", _iso_at(job["wallStart"] + job["runAt"] - job["created"])
        if job["status"] == "Running" and job["endsAt"] is not None and self.config.hold_jobs:
            job["endsAt"] = max(job["endsAt"], now)  # held: it ends when let go, not back when it was due
        elif job["status"] == "Running" and job["endsAt"] is not None:
            job["endsAt"] = self.config.jobs_let_go(job["endsAt"])
        terminate_at = job.get("terminateAt")
        if (
            job["status"] == "Running"
            and terminate_at is not None
            and now >= terminate_at
            and (job["endsAt"] is None or job["endsAt"] > terminate_at or self.config.hold_jobs)
        ):
            # a cancel's grace period ran out before the job ended on its own: killed then (SIGTERM was ignored)
            job["status"], job["exitCode"] = "Canceled", 143
            job["endedAt"] = _iso_at(job["wallStart"] + terminate_at - job["created"])
            job["endedMono"] = terminate_at
            return job
        if (
            job["status"] == "Running"
            and job["endsAt"] is not None
            and not self.config.hold_jobs
            and now >= job["endsAt"]
        ):
            job["exitCode"] = job["plannedExitCode"]
            job["status"] = "Succeeded" if job["exitCode"] == 0 else "Failed"
            job["endedAt"] = _iso_at(job["wallStart"] + job["endsAt"] - job["created"])
            job["endedMono"] = job["endsAt"]
            if job["exitCode"]:
                job["error"] = {
                    "code": "NonZeroExitCode",
                    "message": f"The container exited with code {job['exitCode']}.",
                }
        return job

    @staticmethod
    def _public_job(job: dict[str, Any]) -> dict[str, Any]:
        keys = (
            "id",
            "name",
            "nodeId",
            "nodeIds",
            "gpus",
            "memoryGb",
            "status",
            "exitCode",
            "startedAt",
            "endedAt",
            "logsUrl",
            "error",
            "idempotencyKey",
        )
        return {**{k: job.get(k) for k in keys}, "accelerator": job.get("accelerator") or dict(DEFAULT_ACCELERATOR)}

    async def create_job(self, request: Request) -> JSONResponse:
        try:
            body = await request.json()
            name, node_id, image = str(body["name"]), str(body["nodeId"]), str(body["image"])
            gpus, memory = int(body["gpus"]), int(body["memoryGb"])
            env = dict(body.get("env") or {})
        except (KeyError, TypeError, ValueError):
            return _error(400, "InvalidRequest", "name, nodeId, gpus, memoryGb and image are required.")
        if gpus < 1 or memory < 0:
            return _error(400, "InvalidRequest", "gpus must be positive and memoryGb not negative.")
        accelerator = _accelerator(body)
        if accelerator is None:
            return _error(400, "InvalidRequest", "accelerator is an object with a kind (GPU, TPU, NPU...).")
        if image.split("/")[-1].startswith(UNKNOWN_MODEL_PREFIX):
            return _error(400, "ImageNotFound", f"The image '{image}' is not in the platform's registry.")
        node_ids = body.get("nodeIds") or [node_id]
        if not isinstance(node_ids, list) or not all(isinstance(n, str) for n in node_ids) or node_ids[0] != node_id:
            return _error(400, "InvalidRequest", "nodeIds is a list of node ids starting with nodeId.")
        key = request.headers.get("Idempotency-Key")
        if not key:
            return _error(400, "IdempotencyKeyRequired", "Idempotency-Key header is required on submit.")
        with self.lock:
            for job in self.jobs.values():
                if job["idempotencyKey"] == key:
                    return JSONResponse(self._public_job(self._refresh_job(job)), status_code=200)
            cfg = self.config
            seconds = float(env.get("ITL_SIM_SECONDS", cfg.job_seconds))
            forever = env.get("ITL_SIM_FOREVER") == "1" or self.rng.random() < cfg.job_forever_rate
            exit_code = int(env.get("ITL_SIM_EXIT_CODE", 1 if self.rng.random() < cfg.job_fail_rate else 0))
            if env.get("ITL_SIM_EXIT_CODES"):
                # one exit code per run of the job's name, in order, the last repeating ("3,0": fails once, then
                # succeeds): a job retried on failure is submitted again under the same name
                codes = [int(c) for c in env["ITL_SIM_EXIT_CODES"].split(",")]
                runs = sum(1 for j in self.jobs.values() if j["name"] == name)
                exit_code = codes[min(runs, len(codes) - 1)]
            now = time.monotonic()
            job_id = f"dgxj-{uuid.uuid4().hex[:12]}"
            job = {
                "id": job_id,
                "name": name,
                "nodeId": node_id,
                "nodeIds": node_ids,  # a multi-node job runs one container per node, with one outcome
                "accelerator": accelerator,
                "gpus": gpus,
                "memoryGb": memory,
                "image": image,
                "env": env,  # kept for tests to see what the platform was given; never in a response
                "status": "Queued",
                "idempotencyKey": key,
                "created": now,
                "wallStart": time.time(),
                "runAt": now + cfg.job_queue_seconds,
                "endsAt": None if forever else now + cfg.job_queue_seconds + seconds,
                "plannedExitCode": exit_code,
                "exitCode": None,
                "startedAt": None,
                "endedAt": None,
                "endedMono": None,  # endedAt on the monotonic clock (the log counts steps on it)
                "error": None,
                "logsUrl": f"{request.url.scheme}://{request.url.netloc}/v1/jobs/{job_id}/logs",
                "callbackUrl": _callback_url(body),
                "announced": None,
            }
            self.jobs[job_id] = self._refresh_job(job)
            self.ledger[job_id] = {
                "gpus": gpus * len(node_ids),
                "memoryGb": memory * len(node_ids),
                "kind": "job",
                "generated": [],
            }
        if job["callbackUrl"]:
            self.notifier.wake()
        return JSONResponse(self._public_job(job), status_code=201)

    async def list_jobs(self, request: Request) -> JSONResponse:
        key = request.query_params.get("idempotencyKey")
        with self.lock:
            jobs = [self._refresh_job(j) for j in self.jobs.values() if key is None or j["idempotencyKey"] == key]
        return JSONResponse({"value": [self._public_job(j) for j in jobs]})

    async def get_job(self, request: Request) -> JSONResponse:
        with self.lock:
            job = self.jobs.get(request.path_params["job_id"])
            job = self._refresh_job(job) if job else None
        if job is None:
            return _error(404, "NotFound", "No such job.")
        return JSONResponse(self._public_job(job))

    async def cancel_job(self, request: Request) -> JSONResponse:
        try:
            body = await request.json() if await request.body() else {}
            grace = float(body.get("gracePeriodSeconds", 0)) if isinstance(body, dict) else 0.0
        except (ValueError, TypeError):
            return _error(400, "InvalidRequest", "The body is JSON: {gracePeriodSeconds?, reason?}.")
        with self.lock:
            job = self.jobs.get(request.path_params["job_id"])
            if job is None:
                return _error(404, "NotFound", "No such job.")
            job = self._refresh_job(job)
            if job["status"] == "Running" and grace > 0:
                # SIGTERM now, SIGKILL at the end of the grace period unless it ended first; a repeated cancel keeps
                # the first deadline
                if job.get("terminateAt") is None:
                    # a workload that stops on SIGTERM (env ITL_SIM_SIGTERM_SECONDS: how long it takes) ends then;
                    # any other is killed when the grace period ends
                    stops_in = job["env"].get("ITL_SIM_SIGTERM_SECONDS")
                    job["terminateAt"] = time.monotonic() + min(grace, float(stops_in) if stops_in else grace)
            elif job["status"] in ("Queued", "Running"):
                job["status"], job["exitCode"], job["endedAt"] = "Canceled", 137, _iso_now()
                job["endedMono"] = time.monotonic()
        if job.get("callbackUrl"):
            self.notifier.wake()
        return JSONResponse(self._public_job(job), status_code=202)

    def _log_lines(self, job: dict[str, Any], now: float) -> list[dict[str, Any]]:
        """The job's log as it stands at ``now`` (monotonic; call with the lock held, the job refreshed to the same
        ``now``): a line when it was queued, two when it started, one per second while it ran (a training step), one
        when it ended — each with the wall time it was written at, numbered from 1 in order. A line once given keeps
        its number: a running job's steps are counted to ``now``, which is never past its end (a held job's end
        moves with the refresh), and an ended job's to its end on the same clock."""
        mono_to_wall = job["wallStart"] - job["created"]
        lines: list[tuple[float, str]] = [
            (job["created"], f"[dgx] job {job['id']} ({job['name']}) queued on {job['nodeId']}: {job['gpus']} GPUs")
        ]
        if job["startedAt"] is not None:
            started = job["runAt"]
            lines += [
                (started, f"[dgx] pulling {job['image']}"),
                (started, f"[dgx] container started with {job['gpus']} GPUs"),
            ]
            until = job["endedMono"] if job["endedMono"] is not None else now  # set with endedAt, always
            steps = max(0, int(until - started))
            for step in range(1, steps + 1):
                loss = 2.5 / (1 + 0.3 * step)
                lines.append((started + step, f"step {step}: loss={loss:.4f} throughput={812 + step % 7} samples/s"))
            if job["status"] in ("Succeeded", "Failed", "Canceled"):
                last = f"[dgx] container exited with code {job['exitCode']}: job {job['status']}"
                lines.append((max(until, started), last))
        elif job["status"] == "Canceled":
            lines.append((job["endedMono"], "[dgx] job canceled before it ran"))
        return [
            {"number": n, "time": _iso_ms(moment + mono_to_wall), "text": text}
            for n, (moment, text) in enumerate(lines, start=1)
        ]

    async def job_logs(self, request: Request) -> Response:
        """The job's log (the contract's getJobLogs): plain text, or with ``Accept: application/json`` numbered lines
        after ``after``, written at or after ``since``, the last ``tail`` of them, ``limit`` per page."""
        with self.lock:
            job = self.jobs.get(request.path_params["job_id"])
            now = time.monotonic()  # one instant for the job's state and its log
            job = self._refresh_job(job, now) if job else None
            lines = self._log_lines(job, now) if job else []
        if job is None:
            return _error(404, "NotFound", "No such job.")
        if "application/json" not in request.headers.get("accept", ""):
            return Response("".join(line["text"] + "\n" for line in lines), media_type="text/plain")
        query = request.query_params
        try:
            after = int(query.get("after", 0))
            limit = int(query.get("limit", 1000))
            tail = int(query["tail"]) if "tail" in query else None
            since = _epoch(query["since"]) if "since" in query else None
            if after < 0 or not 1 <= limit <= 5000 or (tail is not None and not 1 <= tail <= 10000):
                raise ValueError
        except (ValueError, KeyError):
            return _error(400, "InvalidRequest", "after >= 0, limit 1-5000, tail 1-10000, since an ISO 8601 time.")
        chosen = [line for line in lines if line["number"] > after]
        if since is not None:
            chosen = [line for line in chosen if _epoch(line["time"]) >= since]
        if tail is not None:
            chosen = chosen[-tail:]
        page = chosen[:limit]
        ended = job["status"] in ("Succeeded", "Failed", "Canceled")
        return JSONResponse(
            {
                "jobId": job["id"],
                "status": job["status"],
                "lines": page,
                "nextAfter": page[-1]["number"] if page else after,
                "more": len(chosen) > limit,
                "ended": ended,
            }
        )

    async def usage(self, request: Request) -> JSONResponse:
        """Metrics of one resource over ``[start, end)``: utilisation is a deterministic function of the resource
        and the hour (plus ``late_metrics_percent``), so asking twice gives the same answer; energy follows from it
        (700 W per GPU at full load); requests and tokens count the ``/api/generate`` calls made in the range."""
        query = request.query_params
        resource = query.get("resourceId", "")
        try:
            start, end = _epoch(query["start"]), _epoch(query["end"])
        except (KeyError, ValueError):
            return _error(400, "InvalidRequest", "resourceId, start and end (ISO 8601) are required.")
        with self.lock:
            entry = self.ledger.get(resource)
            generated = list(entry["generated"]) if entry else []
        if entry is None:
            return _error(404, "NotFound", "No such resource.")
        seconds = max(0.0, end - start)
        digest = hashlib.sha256(f"{resource}#{int(start) // 3600}".encode()).digest()
        utilization = min(100.0, 40.0 + digest[0] % 50 + self.config.late_metrics_percent)
        body: dict[str, Any] = {
            "resourceId": resource,
            "gpuUtilizationPercent": round(utilization, 1),
            "gpuMemoryGb": round(entry["memoryGb"] * (0.9 if entry["kind"] == "instance" else utilization / 100), 1),
            "energyWh": round(entry["gpus"] * 700 * utilization / 100 * seconds / 3600, 3),
        }
        if entry["kind"] == "instance":
            calls = [g for g in generated if start <= g[0] < end]
            body.update(
                {"requests": len(calls), "tokensIn": sum(g[1] for g in calls), "tokensOut": sum(g[2] for g in calls)}
            )
        return JSONResponse(body)

    # ----------------------------------------------------------------------------------------------- ollama
    def _running(self, request: Request) -> dict[str, Any] | None:
        with self.lock:
            inst = self.instances.get(request.path_params["instance_id"])
            inst = self._refresh(inst) if inst else None
        return inst if inst and inst["status"] == "Running" else None

    async def ollama_tags(self, request: Request) -> JSONResponse:
        inst = self._running(request)
        if inst is None:
            return JSONResponse({"error": "instance not running"}, status_code=404)
        return JSONResponse(
            {
                "models": [
                    {
                        "name": inst["model"],
                        "model": inst["model"],
                        "size": 4_109_865_159,
                        "details": {"format": "gguf", "family": _model_part(inst["model"])},
                    }
                ]
            }
        )

    async def ollama_ps(self, request: Request) -> JSONResponse:
        inst = self._running(request)
        if inst is None:
            return JSONResponse({"error": "instance not running"}, status_code=404)
        return JSONResponse(
            {"models": [{"name": inst["model"], "model": inst["model"], "size_vram": inst["memoryGb"] * 1024**3}]}
        )

    async def ollama_generate(self, request: Request) -> JSONResponse:
        inst = self._running(request)
        if inst is None:
            return JSONResponse({"error": "instance not running"}, status_code=404)
        body = await request.json()
        if body.get("model") not in (None, inst["model"]):
            return JSONResponse({"error": f"model '{body.get('model')}' not found"}, status_code=404)
        prompt_tokens, generated_tokens = len(str(body.get("prompt", "")).split()), 6
        with self.lock:
            entry = self.ledger.get(inst["id"])
            if entry is not None:
                entry["generated"].append((time.time(), prompt_tokens, generated_tokens))
        return JSONResponse(
            {
                "model": inst["model"],
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "response": "Hello from the DGX simulator.",
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": prompt_tokens,
                "eval_count": generated_tokens,
            }
        )


class _Notifier:
    """Announces what the simulator's clock brings about to the resources' callback URLs (module docstring): one
    thread waits for the next moment something is due (an instance ready or failed, a job ended) or a retry is,
    and hands each delivery to a pool. Started by the first :meth:`wake`; a daemon, so it never holds a process
    up."""

    def __init__(self, simulator: DgxSimulator):
        self.sim = simulator
        self._cv = threading.Condition()
        self._woken = False
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._http: httpx.Client | None = None
        self._retries: list[tuple[float, str, dict[str, Any], int]] = []  # heap of (due, eventId, delivery, attempt)

    def wake(self) -> None:
        """Something changed (a resource with a callback URL, a cancel, the configuration): look again now."""
        with self._cv:
            if self._thread is None:
                self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="dgx-callback")
                self._http = httpx.Client(timeout=5.0)
                self._thread = threading.Thread(target=self._run, name="dgx-callbacks", daemon=True)
                self._thread.start()
            self._woken = True
            self._cv.notify()

    def _run(self) -> None:
        while True:
            deliveries, next_due = self._collect()
            now = time.monotonic()
            with self._cv:
                while self._retries and self._retries[0][0] <= now:
                    _, _, delivery, attempt = heapq.heappop(self._retries)
                    deliveries.append((delivery, attempt))
                if self._retries:
                    next_due = min(next_due, self._retries[0][0])
            for delivery, attempt in deliveries:
                assert self._pool is not None
                self._pool.submit(self._deliver, delivery, attempt)
            with self._cv:
                if not self._woken:
                    self._cv.wait(timeout=min(1.0, max(0.0, next_due - time.monotonic())))
                self._woken = False

    def _collect(self) -> tuple[list[tuple[dict[str, Any], int]], float]:
        """The callbacks due now (first attempts), and when the next one may be (monotonic)."""
        sim, cfg = self.sim, self.sim.config
        due: list[tuple[dict[str, Any], int]] = []
        next_due = time.monotonic() + 1.0
        with sim.lock:
            for inst in list(sim.instances.values()):
                if not inst.get("callbackUrl") or inst["announced"] is not None:
                    continue
                current = sim._refresh(inst)
                if current is None:
                    continue
                if current["status"] in ("Running", "Failed"):
                    current["announced"] = current["status"]
                    event = self._event("instance", current, current["status"], current["readyAtWall"])
                    due.extend(self._send(current["callbackUrl"], event))
                elif current["status"] == "Provisioning" and not (current["neverReady"] or cfg.hold_provisioning):
                    next_due = min(next_due, current["readyAt"])
            for job in sim.jobs.values():
                if not job.get("callbackUrl") or job["announced"] is not None:
                    continue
                current = sim._refresh_job(job)
                if current["status"] in ("Succeeded", "Failed", "Canceled"):
                    current["announced"] = current["status"]
                    event = self._event("job", current, current["status"], _epoch(current["endedAt"]))
                    due.extend(self._send(current["callbackUrl"], event))
                elif current["status"] == "Queued":
                    next_due = min(next_due, current["runAt"])
                elif current["endsAt"] is not None and not cfg.hold_jobs:
                    next_due = min(next_due, current["endsAt"])
        return due, next_due

    @staticmethod
    def _event(kind: str, resource: dict[str, Any], status: str, moment: float) -> dict[str, Any]:
        return {
            "eventId": str(uuid.uuid4()),
            "type": kind,
            "id": resource["id"],
            "name": resource["name"],
            "status": status,
            "time": _iso_ms(moment),
        }

    def _send(self, url: str, event: dict[str, Any]) -> list[tuple[dict[str, Any], int]]:
        """The first attempt of a callback, unless callbacks are off or this one is lost (call with the lock)."""
        cfg = self.sim.config
        if not cfg.callbacks or self.sim.rng.random() < cfg.callback_drop_rate:
            self.sim.callbacks_sent.append({"eventId": event["eventId"], "url": url, "event": event, "answer": "lost"})
            return []
        return [({"url": url, "event": event}, 1)]

    def _deliver(self, delivery: dict[str, Any], attempt: int) -> None:
        """POST one attempt, signed now; schedule the next on anything but a 2xx while attempts remain."""
        cfg, event = self.sim.config, delivery["event"]
        body = json.dumps(event).encode()
        timestamp = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "dgx-platform-simulator",
            "X-DGX-Event-Id": event["eventId"],
            "X-DGX-Timestamp": timestamp,
            "X-DGX-Signature": sign_callback(cfg.callback_secret, timestamp, body),
        }
        answer: int | str
        reply = ""
        sent = time.time()
        try:
            assert self._http is not None
            response = self._http.post(delivery["url"], content=body, headers=headers)
            answer, reply = response.status_code, response.text[:500]
        except httpx.HTTPError as exc:
            answer = type(exc).__name__
        with self.sim.lock:
            self.sim.callbacks_sent.append(
                {
                    "eventId": event["eventId"],
                    "url": delivery["url"],
                    "event": event,
                    "attempt": attempt,
                    "answer": answer,
                    "reply": reply,
                    "sentAt": sent,
                    "answeredAt": time.time(),
                }
            )
        if isinstance(answer, int) and 200 <= answer < 300:
            return
        if attempt < cfg.callback_attempts:
            due = time.monotonic() + cfg.callback_backoff_seconds * 2 ** (attempt - 1)
            with self._cv:
                heapq.heappush(self._retries, (due, event["eventId"], delivery, attempt + 1))
                self._woken = True
                self._cv.notify()


class _FaultMiddleware:
    """Applies latency, auth, 5xx bursts, random 503s and hangs to ``/v1/*`` requests."""

    def __init__(self, app: Any, simulator: DgxSimulator):
        self.app = app
        self.sim = simulator

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        sim, cfg = self.sim, self.sim.config
        sim.requests += 1
        if cfg.latency_seconds:
            await asyncio.sleep(cfg.latency_seconds)
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        response: Response | None = None
        if cfg.api_key and headers.get("authorization") != f"Bearer {cfg.api_key}":
            response = _error(401, "Unauthorized", "A valid API key is required.")
        elif cfg.burst_5xx > 0:
            cfg.burst_5xx -= 1
            response = _error(500, "InternalError", "Simulated burst failure.")
        elif sim.rng.random() < cfg.error_rate:
            response = _error(503, "ServiceUnavailable", "Simulated outage.", {"Retry-After": "0"})
        elif sim.rng.random() < cfg.timeout_rate:
            await asyncio.sleep(cfg.hang_seconds)
        if response is not None:
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
