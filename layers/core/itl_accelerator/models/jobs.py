"""sparkJobs: an accelerator job (training, fine-tuning, batch inference) that the provider places on a node of the
subscription and runs on the DGX Platform.

A job asks for ``properties.accelerator``: ``count`` devices of a ``kind`` (GPU, TPU, NPU...), optionally of one
``model`` and with ``memoryGb`` GiB of device memory in all. The seed's ``requestedGpus`` / ``requested_gpus`` (with
``requestedMemoryGb`` and ``gpuModel``) is its shorthand for GPUs; a body that says both in disagreement is refused.

Units: ``requestedGpus`` GPUs; ``requestedMemoryGb`` GiB of GPU memory; ``maxDurationMinutes`` minutes; times are
UTC ISO 8601; ``gpuSeconds`` GPU-seconds used (whole seconds of run time * GPUs); ``billableGpuSeconds`` the same
after the node's pricing rule (run time rounded up to ``billingIncrementSeconds``, at least
``minimumBillableSeconds``); ``cost.amount`` = billable GPU-seconds * ``pricePerGpuHour`` / 3600, in
``cost.currency``, rounded half up to 6 decimals (a decimal string, never a float).

The workload is a container: ``image`` (an OCI reference), ``command`` (argv) and ``env``. A job that names none —
the seed's request — runs the default workload of its ``jobType`` (:data:`DEFAULT_WORKLOADS`). Its size is bounded
(:data:`MAX_WORKLOAD_BYTES` as stored JSON) so no item or state-machine payload limit can be reached.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, StringConstraints, WithJsonSchema, field_validator, model_validator

from itl_accelerator.domain.accelerators import GPU, canonical_kind, model_key, shown_vendor
from itl_accelerator.domain.retries import EXIT, MAX_CONDITIONS, RETRY
from itl_accelerator.domain.retries import MAX_ATTEMPTS as MAX_RETRY_ATTEMPTS
from itl_accelerator.models.asks import JobAccelerator, MaxPrice
from itl_accelerator.models.common import (
    NOT_NULL,
    ApiModel,
    BillingTermsLocked,
    GpuModel,
    Location,
    Money,
    ProvisioningState,
    SystemData,
    TagKey,
    TagValue,
    has_control_characters,
    lift_flat_fields,
    validate_tags,
)

JobType = Literal["training", "fineTuning", "batchInference"]
#: The wire form of :class:`itl_accelerator.domain.states.JobStatus` (an inline enum in the OpenAPI document; a unit
#: test keeps the two equal).
JobStatus = Literal["Pending", "Scheduled", "Running", "Succeeded", "Failed", "Canceled", "Preempted"]
#: What a preempted job does (Slurm's ``PreemptMode`` words): ``Cancel`` — it ends ``Preempted``; ``Requeue`` — it
#: goes back to the queue as a new attempt.
PreemptMode = Literal["Cancel", "Requeue"]

#: Bounds of a workload (characters / entries): the whole of it stays under :data:`MAX_WORKLOAD_BYTES`.
MAX_WORKLOAD_BYTES = 16 * 1024
MAX_COMMAND_ARGS = 64
MAX_ENV_VARS = 64
#: Default and longest ``maxDurationMinutes``: 7 days and 30 days.
DEFAULT_MAX_DURATION_MINUTES = 7 * 24 * 60
MAX_DURATION_MINUTES = 30 * 24 * 60

_IMAGE = re.compile(
    r"^[a-z0-9][a-z0-9._-]*(?::[0-9]{1,5})?(?:/[a-z0-9._-]+)*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")

#: What a job without a ``workload`` runs, by ``jobType`` (DGX_INTEGRATION.md documents them; on the DGX simulator
#: they run for its default job time and succeed).
DEFAULT_WORKLOADS: dict[str, dict[str, Any]] = {
    "training": {
        "image": "nvcr.io/nvidia/pytorch:24.10-py3",
        "command": ["python", "-m", "itl_workloads.train", "--config", "default"],
        "env": {"ITL_JOB_TYPE": "training"},
    },
    "fineTuning": {
        "image": "nvcr.io/nvidia/nemo:24.09",
        "command": ["python", "-m", "itl_workloads.finetune", "--config", "default"],
        "env": {"ITL_JOB_TYPE": "fineTuning"},
    },
    "batchInference": {
        "image": "nvcr.io/nvidia/tritonserver:24.10-py3",
        "command": ["python", "-m", "itl_workloads.batch_infer", "--config", "default"],
        "env": {"ITL_JOB_TYPE": "batchInference"},
    },
}


#: What a secret value reads as wherever a job is shown (and in every audit item): secrets are write-only.
SECRET_MASK = "******"


def _check_env(value: dict[str, str], what: str) -> dict[str, str]:
    for name, text in value.items():
        if not _ENV_NAME.match(name):
            raise ValueError(f"The {what} name '{name[:64]}' is not valid: [A-Za-z_][A-Za-z0-9_]*.")
        if "\x00" in text:
            raise ValueError(f"The {what} '{name}' contains a NUL character.")
    return value


class ContainerWorkload(ApiModel):
    """A container the DGX Platform runs: ``image`` (OCI reference, e.g. ``nvcr.io/nvidia/pytorch:24.10-py3``),
    ``command`` (argv, at most 64 arguments), ``env`` (variables, POSIX names) and ``secretEnv`` (variables whose
    values are secrets: tokens, keys) — at most 64 variables in all, no name in both.

    Who sees what (docs/RBAC.md, "Workload environment"): ``env`` values are shown to the job's submitter and to
    admins only (a supplier sees the names with masked values); ``secretEnv`` values are write-only — shown as
    :data:`SECRET_MASK` to everyone, the submitter included, and sent only to the DGX Platform. No audit item or log
    line carries either in clear. Sending a job back with a secret's value as :data:`SECRET_MASK` keeps the value
    stored for it."""

    image: Annotated[str, StringConstraints(min_length=1, max_length=256)]
    command: list[Annotated[str, StringConstraints(max_length=1024)]] = Field(default_factory=list)
    env: dict[str, Annotated[str, StringConstraints(max_length=4096)]] = Field(default_factory=dict)
    secret_env: dict[str, Annotated[str, StringConstraints(max_length=4096)]] = Field(default_factory=dict)

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        if not _IMAGE.match(value):
            raise ValueError(
                f"The image '{value[:100]}' is not an OCI reference: [registry[:port]/]repository[:tag][@sha256:digest],"
                " lower-case repository."
            )
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        if len(value) > MAX_COMMAND_ARGS:
            raise ValueError(f"The command has {len(value)} arguments; at most {MAX_COMMAND_ARGS} are allowed.")
        if any("\x00" in arg for arg in value):
            raise ValueError("A command argument contains a NUL character.")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_env(value, "environment variable")

    @field_validator("secret_env")
    @classmethod
    def _secret_env(cls, value: dict[str, str]) -> dict[str, str]:
        return _check_env(value, "secret environment variable")

    @model_validator(mode="after")
    def _bounded(self) -> ContainerWorkload:
        count = len(self.env) + len(self.secret_env)
        if count > MAX_ENV_VARS:
            raise ValueError(f"{count} environment variables; at most {MAX_ENV_VARS} are allowed.")
        both = sorted(set(self.env) & set(self.secret_env))
        if both:
            raise ValueError(f"'{both[0][:64]}' is in both env and secretEnv: give it once.")
        size = len(json.dumps(self.model_dump(mode="json"), ensure_ascii=False).encode())
        if size > MAX_WORKLOAD_BYTES:
            raise ValueError(f"The workload is {size} bytes as JSON; at most {MAX_WORKLOAD_BYTES} are allowed.")
        return self


def masked_workload(workload: dict[str, Any], *, reveal_env: bool) -> dict[str, Any]:
    """A stored workload (wire names) as one viewer may see it: ``secretEnv`` values always
    :data:`SECRET_MASK`; ``env`` values too unless ``reveal_env`` (the submitter and admins)."""
    shown = dict(workload)
    if workload.get("secretEnv"):
        shown["secretEnv"] = dict.fromkeys(workload["secretEnv"], SECRET_MASK)
    if workload.get("env") and not reveal_env:
        shown["env"] = dict.fromkeys(workload["env"], SECRET_MASK)
    return shown


def masked_job_document(document: dict[str, Any] | None, *, reveal_env: bool) -> dict[str, Any] | None:
    """A job envelope with its workload masked (:func:`masked_workload`); any other document unchanged."""
    if not document:
        return document
    props = document.get("properties")
    if not isinstance(props, dict) or not isinstance(props.get("workload"), dict):
        return document
    return {**document, "properties": {**props, "workload": masked_workload(props["workload"], reveal_env=reveal_env)}}


_SPEC_FIELDS = (
    "job_type",
    "workload",
    "requested_gpus",
    "requested_memory_gb",
    "gpu_model",
    "priority",
    "max_duration_minutes",
    "max_price",
    "retry_strategy",
    "preemptible",
    "preempt_mode",
    "capacity_reservation_id",
)
_FLAT_FIELDS = {
    "status": "status",
    "accelerator": "accelerator",
    "requested_gpus": "requestedGpus",
    "requestedGpus": "requestedGpus",
    "requested_memory_gb": "requestedMemoryGb",
    "requestedMemoryGb": "requestedMemoryGb",
    "job_type": "jobType",
    "jobType": "jobType",
    "workload": "workload",
    "gpu_model": "gpuModel",
    "gpuModel": "gpuModel",
    "priority": "priority",
    "max_duration_minutes": "maxDurationMinutes",
    "maxDurationMinutes": "maxDurationMinutes",
    "max_price": "maxPrice",
    "maxPrice": "maxPrice",
    "retryStrategy": "retryStrategy",
    "preemptible": "preemptible",
    "preemptMode": "preemptMode",
}


class CeilingTerms(ApiModel):
    """One member of a job's price ceiling: a price per device-hour (``pricePerGpuHour`` on a GPU job,
    ``pricePerAcceleratorHour`` on another kind) in a currency, with the largest billing increment and minimum
    (seconds) a node billing in that currency may have."""

    price_per_gpu_hour: Money | None = None
    price_per_accelerator_hour: Money | None = None
    currency: str
    billing_increment_seconds: int
    minimum_billable_seconds: int


class PriceCeilingProperties(ApiModel):
    """Read-only ``properties.priceCeiling``: what the job may be billed at most, fixed when it was submitted
    (``fixedAt``) — its ``maxPrice`` (``basis`` ``MaxPrice``) or, without one, the terms of every node of the
    subscription that could hold it then (``PricesAtSubmission``). A node is eligible when one member of ``terms``
    has its currency and is no lower on price, increment and minimum."""

    basis: Literal["MaxPrice", "PricesAtSubmission"]
    fixed_at: str
    terms: list[CeilingTerms]


class JobCost(ApiModel):
    """What a job cost: ``amount`` (decimal string) in ``currency`` (ISO 4217), at the node's price per GPU-hour."""

    amount: str
    currency: str


_EXIT_CODE_PATTERN = re.compile(r"^(?:[0-9]{1,511}\*?|\*)$")
_REASON_PATTERN = re.compile(r"^[A-Za-z0-9.: \t]{0,511}\*?$")


class RetryCondition(ApiModel):
    """One member of ``retryStrategy.evaluateOnExit`` (AWS Batch's ``EvaluateOnExit``): ``action`` (``RETRY`` or
    ``EXIT``, any case) when the failed attempt's exit code matches ``onExitCode`` (digits, optionally ending with
    ``*``) and its DGX Platform reason matches ``onReason`` (letters, digits, ``.``, ``:``, spaces and tabs,
    optionally ending with ``*``); at least one of the two (domain/retries.py)."""

    on_exit_code: Annotated[str, StringConstraints(min_length=1, max_length=512)] | None = None
    on_reason: Annotated[str, StringConstraints(min_length=1, max_length=512)] | None = None
    action: str

    @field_validator("on_exit_code")
    @classmethod
    def _exit_code(cls, value: str | None) -> str | None:
        if value is not None and not _EXIT_CODE_PATTERN.match(value):
            raise ValueError(f"onExitCode '{value[:40]}' is digits, optionally ending with '*'.")
        return value

    @field_validator("on_reason")
    @classmethod
    def _reason(cls, value: str | None) -> str | None:
        if value is not None and not _REASON_PATTERN.match(value):
            raise ValueError(
                f"onReason '{value[:40]}' may hold letters, digits, '.', ':', spaces and tabs, optionally ending"
                " with '*'."
            )
        return value

    @field_validator("action")
    @classmethod
    def _action(cls, value: str) -> str:
        if value.upper() not in (RETRY, EXIT):
            raise ValueError(f"action is RETRY or EXIT, not '{value[:20]}'.")
        return value.upper()

    @model_validator(mode="after")
    def _one_condition(self) -> RetryCondition:
        if self.on_exit_code is None and self.on_reason is None:
            raise ValueError("An evaluateOnExit condition names onExitCode, onReason or both.")
        return self


class RetryStrategy(ApiModel):
    """``properties.retryStrategy``: how often a job that failed on the DGX Platform runs again (AWS Batch's
    ``retryStrategy``, with a Step Functions ``Retry``'s backoff): ``attempts`` in all (1 to 10; 1: never retried),
    ``evaluateOnExit`` (up to 5 :class:`RetryCondition`, the first match decides, none matching: retried), the
    wait before attempt *n + 1*: ``intervalSeconds`` * ``backoffRate`` ** (*n* - 1), at most ``maxDelaySeconds``
    (domain/retries.py; docs/API_REFERENCE.md, "Retries")."""

    attempts: int = Field(strict=True, ge=1, le=MAX_RETRY_ATTEMPTS)
    evaluate_on_exit: list[RetryCondition] = Field(default_factory=list, max_length=MAX_CONDITIONS)
    interval_seconds: int = Field(strict=True, default=10, ge=1, le=3600)
    backoff_rate: float = Field(default=2.0, ge=1.0, le=10.0, strict=True, allow_inf_nan=False)
    max_delay_seconds: int = Field(strict=True, default=3600, ge=1, le=86400)


class JobAttempt(ApiModel):
    """One run of a job on the DGX Platform (read-only ``properties.attempts``, on a job with a ``retryStrategy``):
    its number (1-based), how it ended (``status``, ``statusReason``, ``exitCode``), the node it ran on, when it
    started and ended, and its usage and cost at the terms it locked (its usage records and FOCUS rows carry the
    job's ``x_AllocationId`` and this ``x_Attempt``)."""

    attempt: int
    status: JobStatus
    status_reason: str
    exit_code: int | None = None
    assigned_node: str | None = None
    assigned_nodes: list[str] | None = None
    started_at: str | None = None
    ended_at: str | None = None
    gpu_seconds: int = 0
    billable_gpu_seconds: int = 0
    cost: JobCost | None = None


class SparkJobPropertiesWrite(ApiModel):
    """Job properties a client sends. ``status`` may only be ``Pending`` (the seed's form; anything else → 400).
    Read-only properties a client echoes back from a GET are accepted and ignored."""

    job_type: JobType = "training"
    workload: ContainerWorkload | None = None
    accelerator: JobAccelerator | None = None
    # the seed's GPU shorthand: left out when accelerator says the request, never null
    requested_gpus: Annotated[
        int | None, NOT_NULL, WithJsonSchema({"type": "integer", "minimum": 1, "maximum": 64})
    ] = Field(strict=True, default=None, ge=1, le=64)
    requested_memory_gb: Annotated[
        int | None, NOT_NULL, WithJsonSchema({"type": "integer", "minimum": 0, "maximum": 65536})
    ] = Field(strict=True, default=None, ge=0, le=65536)
    gpu_model: GpuModel | None = None
    priority: int = Field(strict=True, default=5, ge=0, le=9)
    max_duration_minutes: int = Field(strict=True, default=DEFAULT_MAX_DURATION_MINUTES, ge=1, le=MAX_DURATION_MINUTES)
    max_price: MaxPrice | None = None
    retry_strategy: RetryStrategy | None = None
    preemptible: bool = Field(strict=True, default=False)
    preempt_mode: PreemptMode | None = None
    #: the ARM id of a capacity reservation of the subscription it runs in (issue 44): only on its nodes, inside its
    #: window, out of its booked devices, billed nothing more (services/api/jobs.py checks it)
    capacity_reservation_id: str | None = Field(default=None, min_length=1, max_length=1024)
    status: str | None = None
    # read-only, accepted so a GET body can be sent back
    capacity_reservation_ends_at: str | None = None
    attempt: int | None = None
    attempts: list[dict[str, Any]] | None = None
    preempted_by: str | None = None
    preempted_at: str | None = None
    price_ceiling: dict[str, Any] | None = None
    provisioning_state: str | None = None
    status_reason: str | None = None
    assigned_node: str | None = None
    assigned_nodes: list[str] | None = None
    submitted_by: str | None = None
    submitted_at: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    gpu_seconds: int | None = None
    billable_gpu_seconds: int | None = None
    cost: dict[str, Any] | None = None
    cost_as_of: str | None = None
    estimated_start_time: str | None = None
    estimated_start_reason: str | None = None
    queue_position: int | None = None
    estimated_at: str | None = None
    billing_terms: dict[str, Any] | None = None
    logs_url: str | None = None
    cancel_requested_by: str | None = None
    cancel_requested_at: str | None = None
    operation_id: str | None = None

    @field_validator("status")
    @classmethod
    def _a_status(cls, value: str | None) -> str | None:
        """A job's status (read-only: a new job may say ``Pending``, the seed's form; a job sent back as read may say
        the status it has — services/api/jobs.py ``check_status_sent``)."""
        if value is not None and value not in get_args(JobStatus):
            raise ValueError(f"'status' is set by the provider; a new job may only say 'Pending', not '{value[:40]}'.")
        return value

    @field_validator("gpu_model")
    @classmethod
    def _no_control(cls, value: str | None) -> str | None:
        if value is not None and has_control_characters(value):
            raise ValueError("gpuModel contains a control character.")
        return value

    @model_validator(mode="after")
    def _one_request(self) -> SparkJobPropertiesWrite:
        """``accelerator`` and the seed's GPU shorthand say one request: what both say must agree (a TPU job has no
        ``requestedGpus``); each fills what the other left out, so a GPU job reads the same either way."""
        a = self.accelerator
        if a is None:
            if self.requested_gpus is None:
                raise ValueError(
                    "properties.accelerator (kind and count: {'kind': 'GPU', 'count': 4}) or properties.requestedGpus "
                    "is required."
                )
            if self.requested_memory_gb is None:
                raise ValueError("properties.requestedMemoryGb is required with requestedGpus (GiB of GPU memory).")
            self.accelerator = JobAccelerator(
                kind=GPU,
                count=self.requested_gpus,
                model=self.gpu_model,
                memory_gb=self.requested_memory_gb,
                vendor=shown_vendor(GPU, self.gpu_model, None),
            )
            return self
        a.kind = canonical_kind(a.kind)
        if a.kind != GPU:
            for name, value in (
                ("requestedGpus", self.requested_gpus),
                ("gpuModel", self.gpu_model),
            ):
                if value is not None:
                    raise ValueError(f"properties.{name} asks for GPUs; properties.accelerator asks for {a.kind}s.")
        parts = a.nodes or 1  # the seed's figures are the whole job's: a gang's are its parts' together
        for name, mine, theirs in (
            ("count", a.count * parts, self.requested_gpus),
            ("model", model_key(a.model) if a.model else None, model_key(self.gpu_model) if self.gpu_model else None),
            ("memoryGb", a.memory_gb * parts if a.memory_gb is not None else None, self.requested_memory_gb),
        ):
            if mine is not None and theirs is not None and mine != theirs:
                spelled = {"count": "requestedGpus", "model": "gpuModel", "memoryGb": "requestedMemoryGb"}[name]
                raise ValueError(
                    f"properties.accelerator.{name} and properties.{spelled} say one request and differ ({mine} and "
                    f"{theirs})."
                )
        if a.memory_gb is None:
            if (self.requested_memory_gb or 0) % parts:
                raise ValueError(
                    f"properties.requestedMemoryGb ({self.requested_memory_gb}) is the whole job's: it must divide "
                    f"among its {parts} nodes (or say accelerator.memoryGb, per node)."
                )
            a.memory_gb = (self.requested_memory_gb or 0) // parts
        if a.model is None:
            a.model = self.gpu_model
        a.vendor = shown_vendor(a.kind, a.model, a.vendor)
        if a.kind == GPU:
            self.requested_gpus, self.gpu_model = a.count * parts, a.model
        self.requested_memory_gb = a.memory_gb * parts
        return self

    @model_validator(mode="after")
    def _preempt_mode_of_a_preemptible_job(self) -> SparkJobPropertiesWrite:
        if self.preempt_mode is not None and not self.preemptible:
            raise ValueError("properties.preemptMode applies to a job that says preemptible: true.")
        if self.preemptible and self.accelerator is not None and self.accelerator.nodes:
            raise ValueError("A multi-node job is never preempted: it cannot say preemptible: true.")
        return self

    @property
    def wanted(self) -> JobAccelerator:
        """What the job asks for (:meth:`_one_request` always sets it)."""
        assert self.accelerator is not None
        return self.accelerator


class SparkJobWrite(ApiModel):
    """PUT body: ``{"location"?, "tags"?, "properties": {...}}``. ``location``, when given, is a placement
    constraint (only nodes there), like ``properties.gpuModel``. The seed's flat form (``requested_gpus``,
    ``requested_memory_gb``, ``status``, ... at the top level) is accepted too; both forms with different values →
    400."""

    location: Location | None = None
    tags: dict[TagKey, TagValue] | None = None
    name: str | None = None
    id: str | None = None
    type: str | None = None
    etag: str | None = None
    system_data: dict[str, Any] | None = None
    properties: SparkJobPropertiesWrite

    @model_validator(mode="before")
    @classmethod
    def _flat_to_properties(cls, data: Any) -> Any:
        return lift_flat_fields(data, _FLAT_FIELDS)

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: dict[str, str] | None) -> dict[str, str]:
        return validate_tags(value)

    def spec(self) -> dict[str, Any]:
        """What runs and where (wire names): the fields that define the job; the workload resolved to the default of
        its type when none was given."""
        p = self.properties
        spec = p.model_dump(mode="json", by_alias=True, include=set(_SPEC_FIELDS))
        # members left at their defaults (no command, no env, no secrets) are left out, so a job sent back as a GET
        # showed it — its default workload written out, an empty secretEnv — is the same job
        spec["workload"] = (
            p.workload.model_dump(mode="json", exclude_defaults=True) if p.workload else DEFAULT_WORKLOADS[p.job_type]
        )
        spec["location"] = self.location
        kind = p.wanted.kind
        if p.max_price is None:
            del spec["maxPrice"]  # a job without one has the spec (and fingerprint) it always had
        else:
            spec["maxPrice"] = p.max_price.for_kind(kind)
        if p.retry_strategy is None:
            del spec["retryStrategy"]  # likewise
        else:
            spec["retryStrategy"] = p.retry_strategy.model_dump(mode="json", by_alias=True, exclude_none=True)
        if p.capacity_reservation_id is None:
            del spec["capacityReservationId"]  # likewise
        if p.preemptible:
            spec["preemptMode"] = p.preempt_mode or "Cancel"
        else:  # likewise: a job that may not be preempted says nothing of it
            del spec["preemptible"], spec["preemptMode"]
        wanted = p.wanted
        # the vendor a job gets without saying one is not part of what it said (a job read back, showing it, is the
        # same job, and so is one stored before vendors were said)
        said_vendor = wanted.vendor if wanted.vendor != shown_vendor(kind, wanted.model, None) else None
        if kind != GPU or wanted.nodes or said_vendor:
            # a GPU job's request is its requestedGpus, requestedMemoryGb and gpuModel, as always (so the fingerprint
            # of a job stored before kinds existed is unchanged); any other kind's, a gang's and one of another
            # vendor's is its accelerator
            spec["accelerator"] = wanted.model_dump(mode="json", by_alias=True, exclude_none=True)
            if not said_vendor:
                spec["accelerator"].pop("vendor", None)
            for name in ("requestedGpus", "gpuModel"):
                spec.pop(name, None)
        return spec

    def fingerprint(self) -> str:
        """Stable hash of :meth:`spec`: an identical repeated submission has the same fingerprint."""
        return spec_fingerprint(self.spec())


def spec_fingerprint(spec: dict[str, Any]) -> str:
    """Stable hash of a job's spec (:meth:`SparkJobWrite.spec`)."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:32]


class SparkJobCreate(SparkJobWrite):
    """The seed's POST body: ``{"name": "job-1", "status": "Pending", "requested_gpus": 4, "requested_memory_gb": 320}``."""

    name: str


class SparkJobProperties(ApiModel):
    """Job properties as returned. ``status`` (the job's own lifecycle) and ``provisioningState`` (ARM's: Accepted
    while Pending or Scheduled, Running, then Succeeded/Failed/Canceled with the status) are read-only, as are
    ``statusReason``, ``assignedNode`` (the node's ARM id), ``submittedBy`` (the token's subject), the times,
    ``gpuSeconds``, ``cost`` (while it runs: so far, ``costAsOf``), ``billingTerms`` (the node's pricing locked when
    the job was placed: what its cost is computed by), ``priceCeiling`` (the most it may be placed at: :class:`PriceCeilingProperties`) and
    ``cancelRequestedBy``/``cancelRequestedAt`` (a cancel under way, until the job ends)."""

    job_type: JobType
    workload: ContainerWorkload
    accelerator: JobAccelerator
    requested_gpus: int | None = None
    requested_memory_gb: int | None = None
    gpu_model: str | None = None
    priority: int
    max_duration_minutes: int
    status: JobStatus
    status_reason: str | None = None
    assigned_node: str | None = None
    assigned_nodes: list[str] | None = None
    submitted_by: str
    submitted_at: str
    started_at: str | None = None
    ended_at: str | None = None
    gpu_seconds: int = 0
    billable_gpu_seconds: int | None = None
    cost: JobCost | None = None
    #: while the job runs: when ``gpuSeconds``, ``billableGpuSeconds`` and ``cost`` (its usage and cost so far, by
    #: the metering rules at its locked terms) are as of — the read (UTC ISO 8601); absent once it ended (final)
    cost_as_of: str | None = None
    #: while the job waits (domain/calendar.py, Slurm's ``squeue --start``): when it is expected to start (UTC ISO
    #: 8601; null when it cannot be known, ``estimatedStartReason`` saying why — work without a maximum duration in
    #: the way, no node it may use), its ``queuePosition`` among its subscription's waiting jobs (1: served first) and
    #: when that was estimated (``estimatedAt``: refreshed whenever the subscription's queue is served); absent once
    #: it is placed
    estimated_start_time: str | None = None
    estimated_start_reason: str | None = None
    queue_position: int | None = None
    estimated_at: str | None = None
    billing_terms: BillingTermsLocked | None = None
    max_price: MaxPrice | None = None
    price_ceiling: PriceCeilingProperties | None = None
    retry_strategy: RetryStrategy | None = None
    attempt: int | None = None
    attempts: list[JobAttempt] | None = None
    preemptible: bool = False
    preempt_mode: PreemptMode | None = None
    preempted_by: str | None = None
    preempted_at: str | None = None
    #: the capacity reservation it runs in (its ARM id), and — once placed — when its window ends (UTC ISO 8601): the
    #: job is stopped then, its ``statusReason`` starting ``ReservationEnded:``
    capacity_reservation_id: str | None = None
    capacity_reservation_ends_at: str | None = None
    logs_url: str | None = None
    cancel_requested_by: str | None = None
    cancel_requested_at: str | None = None
    provisioning_state: ProvisioningState | Literal["Running"]
    operation_id: str | None = None


class SparkJob(ApiModel):
    """A job as returned (ARM tracked-resource envelope; ``location`` only when the job was constrained to one)."""

    id: str
    name: str
    type: str
    location: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    etag: str
    system_data: SystemData
    properties: SparkJobProperties


class AcceptedJob(SparkJob):
    """The seed's 202 body: the job plus ``status_url`` (the Azure-AsyncOperation URL, which ends with the job)."""

    status_url: str = Field(alias="status_url")
