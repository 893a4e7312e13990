"""The typed inputs and outputs of the state machines' Task steps — the one description of what flows between the ASL
(statemachines/*.asl.json), the step handlers (functions/itl_functions/*_workflow.py) and the step services.

A Task receives the whole state (the execution input and what earlier steps stored under their ``ResultPath``); its
``ResultSelector`` then picks fields of the step's output by path, so every field an ASL path names is always
present in the output (null when it does not apply): :meth:`StepModel.as_output` writes them all. Field names are the
JSON's own (camelCase). Times are epoch seconds.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from itl_accelerator.domain.records import ResourceKey
from itl_accelerator.domain.states import JobStatus
from itl_accelerator.settings import Settings

#: The fields of an execution's input (what the API writes when it starts one); the rest of a step's state is what
#: earlier steps stored at their ``ResultPath``.
INSTANCE_EXECUTION_INPUT = {
    "operationId",
    "subscriptionId",
    "resourceGroup",
    "nodeName",
    "instanceName",
    "correlationId",
    "pollIntervalSeconds",
    "timeoutSeconds",
}
JOB_EXECUTION_INPUT = {
    "operationId",
    "subscriptionId",
    "resourceGroup",
    "jobName",
    "correlationId",
    "pollIntervalSeconds",
    "pendingTimeoutSeconds",
    "trackTimeoutSeconds",
    "stopTimeoutSeconds",
}


class StepModel(BaseModel):
    """A step's output: every field written (the ASL selects them by path)."""

    model_config = ConfigDict(extra="forbid")

    def as_output(self) -> dict[str, Any]:
        """The JSON the Lambda returns."""
        return self.model_dump(mode="json")


class ErrorBody(BaseModel):
    """An ARM ``error`` (``code``, ``message``) as a step reports it."""

    model_config = ConfigDict(extra="ignore")

    code: str
    message: str

    @classmethod
    def of(cls, code: str, message: str) -> ErrorBody:
        """The error of a failed operation (its codes: docs/API_REFERENCE.md, operation errors)."""
        return cls.model_validate({"code": code, "message": message})

    def as_dict(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


class CaughtError(BaseModel):
    """What a Step Functions ``Catch`` stores under its ``ResultPath``: the error's name and its cause (the Lambda's
    error as JSON text: ``{"errorMessage", "errorType", ...}``)."""

    model_config = ConfigDict(extra="ignore")

    Error: str = ""
    Cause: str | None = None

    @property
    def message(self) -> str:
        """The error message inside ``Cause`` ("" when there is none)."""
        try:
            cause = json.loads(self.Cause or "{}")
        except ValueError:
            return ""
        return str(cause.get("errorMessage", "")) if isinstance(cause, dict) else ""


# ---------------------------------------------------------------------------------------------------- instances
#: What completes the provisioning's readiness wait (``AwaitReady``, stored at ``$.wait``): a callback came, poll now.
WOKEN: dict[str, Any] = {"woken": True}


class RequestResult(StepModel):
    """``Request``: whether a delete came first (``canceled``), the DGX instance asked for, and the deadline
    of the provisioning."""

    canceled: bool
    dgxInstanceId: str | None
    deadline: float


PollStatus = Literal["Running", "Provisioning", "Failed", "TimedOut", "Canceled"]


class PollResult(StepModel):
    """``Poll``: how the DGX instance is; its ``endpoint`` once Running; the ``error`` to report when it
    failed or timed out."""

    status: PollStatus
    endpoint: str | None = None
    error: ErrorBody | None = None


class CompletionResult(StepModel):
    """``Complete`` and ``Cancel``-style answers: whether a delete took the instance over."""

    canceled: bool


class CompensationResult(StepModel):
    """``Compensate``: ``Removing`` (the DGX Platform deletes what it made; wait), ``Canceled`` (a delete took over)
    or ``AlreadyDone``; the compensation's deadline."""

    outcome: Literal["Removing", "Canceled", "AlreadyDone"]
    deadline: float


class RemovalResult(StepModel):
    """``CheckRemoval`` / ``Poll`` (deprovisioning): whether the DGX Platform holds nothing of the instance any more, whether
    the wait timed out, and (compensation only) whether a delete took the instance over."""

    gone: bool
    timedOut: bool
    canceled: bool = False


class DeadlineResult(StepModel):
    """``Start`` (deprovisioning): the deadline of the deletion."""

    deadline: float


class OutcomeResult(StepModel):
    """A step that ends something: what happened (``Failed``, ``Canceled``, ``Deleted``, ``AlreadyDone``)."""

    outcome: str


class InstanceStepInput(BaseModel):
    """The state every Task of the provision and deprovision state machines receives: the execution input the API
    writes (:meth:`starting`) and what earlier steps stored."""

    model_config = ConfigDict(extra="allow")

    operationId: str
    subscriptionId: str
    resourceGroup: str
    nodeName: str
    instanceName: str
    correlationId: str = ""
    pollIntervalSeconds: int = 10
    timeoutSeconds: int = 900
    request: RequestResult | None = None
    poll: PollResult | None = None
    compensation: CompensationResult | None = None
    deprovision: DeadlineResult | None = None
    deletion: RemovalResult | None = None
    error: CaughtError | None = None

    @classmethod
    def starting(
        cls, settings: Settings, key: ResourceKey, operation_id: str, correlation_id: str
    ) -> InstanceStepInput:
        """The input of a provision or deprovision execution of the instance at ``key`` (poll interval and timeout
        from ``settings``, seconds)."""
        return cls(
            operationId=operation_id,
            subscriptionId=key.subscription_id,
            resourceGroup=key.resource_group,
            nodeName=key.names[0],
            instanceName=key.names[1],
            correlationId=correlation_id,
            pollIntervalSeconds=settings.instance_poll_interval_seconds,
            timeoutSeconds=settings.instance_provision_timeout_seconds,
        )

    def execution_input(self) -> dict[str, Any]:
        """The JSON an execution starts with."""
        return self.model_dump(mode="json", include=INSTANCE_EXECUTION_INPUT)

    @property
    def key(self) -> ResourceKey:
        return ResourceKey(
            self.subscriptionId, self.resourceGroup, "sparkOllamaInstances", (self.nodeName, self.instanceName)
        )


# ---------------------------------------------------------------------------------------------------- jobs
class JobEnd(BaseModel):
    """How a job must end, as a step reports it: ``status`` (Succeeded, Failed or Canceled) and ``reason``;
    ``stop``: it may still run on the DGX Platform (the state machine stops it first); ``endedAt``: billing stops
    then (epoch s) rather than when it is finished; ``exitCode``; ``onPlatform``: the end the DGX Platform itself
    recorded (the truth: services/workflows/job_steps.py ``settle``); ``retryable``: the attempt failed on the DGX
    Platform (its container, its reason, or the platform lost it) — what a job's ``retryStrategy`` may run again
    (domain/retries.py)."""

    model_config = ConfigDict(extra="ignore")

    status: JobStatus
    reason: str
    stop: bool = False
    endedAt: float | None = None
    exitCode: int | None = None
    onPlatform: bool = False
    retryable: bool = False

    def as_output(self) -> dict[str, Any]:
        """Unset optional fields left out (``stop`` is always there: the ASL's ``EndsHow`` reads it)."""
        return self.model_dump(mode="json", exclude_none=True)


class StepOutcome(BaseModel):
    """What a job step reports: ``end`` null to go on, or how the job ends; ``placed`` (``Place`` and the capacity
    wait only): whether the job has a node now."""

    model_config = ConfigDict(extra="ignore")

    end: JobEnd | None = None
    placed: bool | None = None

    def as_output(self) -> dict[str, Any]:
        output: dict[str, Any] = {"end": self.end.as_output() if self.end else None}
        if self.placed is not None:
            output["placed"] = self.placed
        return output


class StopResult(StepModel):
    """``Stop``: whether the job has stopped on the DGX Platform, whether the wait timed out, the stop's deadline,
    and the end the platform recorded once it stopped (None before, or when it never ran there)."""

    stopped: bool
    timedOut: bool
    deadline: float
    platform: JobEnd | None

    def as_output(self) -> dict[str, Any]:
        return {
            **self.model_dump(mode="json", exclude={"platform"}),
            "platform": self.platform.as_output() if self.platform else None,
        }


class FinishResult(StepModel):
    """``Finish``: the job's final status — or, when a failed attempt is retried (domain/retries.py), ``Pending``
    and ``retryInSeconds``: how long the next attempt waits (the state machine's ``AwaitRetry``)."""

    status: JobStatus
    retryInSeconds: int | None = None


class JobStepInput(BaseModel):
    """The state every Task of the job lifecycle state machine receives: the execution input
    (:meth:`starting`) and what earlier steps stored."""

    model_config = ConfigDict(extra="allow")

    operationId: str
    subscriptionId: str
    resourceGroup: str
    jobName: str
    correlationId: str = ""
    pollIntervalSeconds: int = 30
    pendingTimeoutSeconds: int = 7 * 24 * 3600
    trackTimeoutSeconds: int = 7 * 24 * 3600
    stopTimeoutSeconds: int = 300
    step: StepOutcome | None = None
    stop: StopResult | None = None
    error: CaughtError | None = None

    @classmethod
    def starting(
        cls, settings: Settings, key: ResourceKey, operation_id: str, correlation_id: str, max_minutes: int
    ) -> JobStepInput:
        """The input of the job lifecycle execution of the job at ``key`` whose ``maxDurationMinutes`` is
        ``max_minutes`` (every time in seconds, from ``settings``)."""
        return cls(
            operationId=operation_id,
            subscriptionId=key.subscription_id,
            resourceGroup=key.resource_group,
            jobName=key.names[-1],
            correlationId=correlation_id,
            pollIntervalSeconds=settings.job_poll_interval_seconds,
            pendingTimeoutSeconds=settings.job_pending_timeout_seconds,
            trackTimeoutSeconds=max_minutes * 60 + settings.job_track_margin_seconds,
            stopTimeoutSeconds=settings.job_stop_timeout_seconds,
        )

    def execution_input(self) -> dict[str, Any]:
        """The JSON an execution starts with."""
        return self.model_dump(mode="json", include=JOB_EXECUTION_INPUT)

    @property
    def key(self) -> ResourceKey:
        return ResourceKey(self.subscriptionId, self.resourceGroup, "sparkJobs", (self.jobName,))
