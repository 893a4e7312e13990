"""Runs the executions a :class:`~tests.services.fakes.FakeStepFunctions` holds through the real Amazon States Language
definitions (statemachines/*.asl.json), calling the step services directly — so the steps are called in the order
the ASL calls them, each with the state the ASL gives it, their outputs selected and stored where the ASL stores
them. No Lambda, no handler, no moto: a Task's Lambda is the step method its handler
(functions/itl_functions/*_workflow.py) calls, with the same arguments.

The subset of the language the definitions use: Task (``lambda:invoke`` and ``.waitForTaskToken``, with
Parameters, ResultSelector, ResultPath, Retry, Catch, TimeoutSecondsPath), Choice (BooleanEquals, StringEquals,
IsNull, And/Or/Not), Wait (Seconds, SecondsPath), Pass, Succeed, Fail. A path the ASL names that a step's output
lacks is an :class:`AslError` (Step Functions fails such an execution with ``States.Runtime``) — so a step and its
definition that disagree fail the test.

Time is the fake clock's: a Wait state sleeps until the clock reaches its end, and :meth:`Workflows.run` moves the
clock forward to the next such wake-up when nothing else can run (a discrete-event simulation), within
``advance`` seconds when given. A task token's wait ends when something completes the token (placement, the job
tracker, a cancel, a DGX callback) — or with ``States.Timeout`` once the clock passes the Task's timeout. The
timeouts of the Tasks named in :data:`TIMERS` (waits that stand for a poll interval: the provisioning's readiness
wait) are wake-ups like a Wait state's end; the others (a job waiting for days) are reached only when a test moves
the clock.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from itl_accelerator.dgx.errors import DgxError
from itl_accelerator.repositories.errors import StoreError
from itl_accelerator.services.workflows.deprovision_steps import DeprovisionSteps
from itl_accelerator.services.workflows.instance_steps import InstanceSteps, error_from_catch
from itl_accelerator.services.workflows.io import ErrorBody, InstanceStepInput, JobEnd, JobStepInput
from itl_accelerator.services.workflows.job_steps import JobSteps, error_end
from tests.services.fakes import Execution, FakeClock, FakeStepFunctions

STATEMACHINES = Path(__file__).resolve().parents[2] / "statemachines"

#: What a step may raise by design (the state machines Retry and Catch them by name); anything else is a bug the
#: test should see, not an error a Catch quietly turns into a Failed resource.
EXPECTED_ERRORS: tuple[type[BaseException], ...] = (DgxError, StoreError, ClientError, BotoCoreError)

Task = Callable[[dict[str, Any]], Any]

#: ``.waitForTaskToken`` Tasks whose timeout is a poll interval or a retry's backoff: :meth:`Workflows.run` moves the
#: clock to it.
TIMERS = frozenset({"AwaitReady", "AwaitRetry"})


class AslError(AssertionError):
    """The definition and the steps disagree (a path that is not there, a state that does not exist...)."""


def definition(name: str) -> dict[str, Any]:
    return json.loads((STATEMACHINES / f"{name}.asl.json").read_text())


# ---------------------------------------------------------------------------------------------------------- tasks
def instance_tasks(steps: InstanceSteps, deprovision: DeprovisionSteps) -> dict[str, Task]:
    """The provision and deprovision Tasks, by the function of their ``FunctionName`` substitution — the calls of
    functions/itl_functions/instance_workflow.py."""

    def step(run: Callable[[InstanceStepInput], Any]) -> Task:
        return lambda payload: run(InstanceStepInput.model_validate(payload)).as_output()

    def requested(i: InstanceStepInput) -> tuple[str, float]:
        assert i.request is not None and i.request.dgxInstanceId is not None, "Request ran before"
        return i.request.dgxInstanceId, i.request.deadline

    def deprovision_failure(i: InstanceStepInput) -> ErrorBody:
        if i.deletion is not None and i.deletion.timedOut:
            return ErrorBody.of(
                "DeprovisioningTimedOut", f"The instance was not deleted within {i.timeoutSeconds} seconds."
            )
        return error_from_catch(i.error)

    def compensation_deadline(i: InstanceStepInput) -> float:
        assert i.compensation is not None, "Compensate ran before"
        return i.compensation.deadline

    def deletion_deadline(i: InstanceStepInput) -> float:
        assert i.deprovision is not None, "the deprovisioning Start ran before"
        return i.deprovision.deadline

    def await_ready(payload: dict[str, Any]) -> dict[str, Any]:
        steps.await_ready(InstanceStepInput.model_validate(payload["state"]), payload["taskToken"])
        return {}

    return {
        "InstanceRequestFunctionArn": step(steps.request),
        "InstanceAwaitReadyFunctionArn": await_ready,
        "InstancePollFunctionArn": step(lambda i: steps.poll(i, *requested(i))),
        "InstanceCompleteFunctionArn": step(
            lambda i: steps.complete(i, requested(i)[0], (i.poll.endpoint if i.poll else None) or "")
        ),
        "InstanceCompensateFunctionArn": step(
            lambda i: steps.compensate(i, (i.poll.error if i.poll else None) or error_from_catch(i.error))
        ),
        "InstanceCheckRemovalFunctionArn": step(lambda i: steps.check_removal(i, compensation_deadline(i))),
        "InstanceReleaseCapacityFunctionArn": step(steps.release_capacity),
        "InstanceCancelFunctionArn": step(steps.cancel),
        "DeprovisionStartFunctionArn": step(deprovision.start),
        "DeprovisionPollFunctionArn": step(lambda i: deprovision.poll(i, deletion_deadline(i))),
        "DeprovisionFinishFunctionArn": step(deprovision.finish),
        "DeprovisionFailFunctionArn": step(lambda i: deprovision.fail(i, deprovision_failure(i))),
    }


def job_tasks(steps: JobSteps) -> dict[str, Task]:
    """The job lifecycle Tasks — the calls of functions/itl_functions/job_workflow.py (a ``.waitForTaskToken``
    Task's payload is ``{"taskToken", "state"}``)."""

    def step(run: Callable[[JobStepInput, dict[str, Any]], Any]) -> Task:
        def task(payload: dict[str, Any]) -> Any:
            inp = JobStepInput.model_validate(payload.get("state", payload))
            result = run(inp, payload)
            return result.as_output() if result is not None else {}

        return task

    def outcome(i: JobStepInput) -> JobEnd:
        return (i.step.end if i.step else None) or error_end(i.error)

    return {
        "JobPlaceFunctionArn": step(lambda i, e: steps.place(i)),
        "JobAwaitCapacityFunctionArn": step(lambda i, e: steps.await_capacity(i, e["taskToken"])),
        "JobSubmitFunctionArn": step(lambda i, e: steps.submit(i)),
        "JobTrackFunctionArn": step(lambda i, e: steps.track(i, e["taskToken"])),
        "JobStopFunctionArn": step(lambda i, e: steps.stop(i, i.stop.deadline if i.stop else None)),
        "JobFinishFunctionArn": step(
            lambda i, e: steps.finish(i, outcome(i), i.stop.platform if i.stop else None, retry=True)
        ),
        "JobAwaitRetryFunctionArn": step(lambda i, e: steps.await_retry(i, e["taskToken"])),
    }


# ---------------------------------------------------------------------------------------------------------- paths
_MISSING = object()


def get_path(data: Any, path: str, context: dict[str, Any] | None = None) -> Any:
    """The value at a reference path (``$``, ``$.a.b``, ``$$.Task.Token``). :class:`AslError` when it is not there."""
    if path == "$":
        return data
    if path.startswith("$$."):
        node: Any = context or {}
        parts = path[3:].split(".")
    elif path.startswith("$."):
        node, parts = data, path[2:].split(".")
    else:
        raise AslError(f"unsupported path {path!r}")
    for part in parts:
        if not isinstance(node, dict) or part not in node:
            raise AslError(f"the path {path} is not in {json.dumps(data, default=str)[:500]}")
        node = node[part]
    return node


def set_path(state: Any, path: str | None, value: Any) -> Any:
    """``state`` with ``value`` at ``path`` (``ResultPath``: ``$`` replaces it, null discards the value)."""
    if path is None:
        return state
    if path == "$":
        return value
    if not path.startswith("$."):
        raise AslError(f"unsupported ResultPath {path!r}")
    result = copy.deepcopy(state)
    node = result
    parts = path[2:].split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return result


def resolve(template: Any, data: Any, context: dict[str, Any] | None = None) -> Any:
    """``Parameters``/``ResultSelector``: keys ending in ``.$`` take the value at their path."""
    if isinstance(template, dict):
        out: dict[str, Any] = {}
        for key, value in template.items():
            if key.endswith(".$"):
                out[key[:-2]] = get_path(data, value, context)
            else:
                out[key] = resolve(value, data, context)
        return out
    if isinstance(template, list):
        return [resolve(v, data, context) for v in template]
    return template


def matches(rule: dict[str, Any], state: Any) -> bool:
    """Whether a Choice rule holds."""
    if "And" in rule:
        return all(matches(r, state) for r in rule["And"])
    if "Or" in rule:
        return any(matches(r, state) for r in rule["Or"])
    if "Not" in rule:
        return not matches(rule["Not"], state)
    if "IsPresent" in rule:
        try:
            get_path(state, rule["Variable"])
        except AslError:
            return not rule["IsPresent"]
        return bool(rule["IsPresent"])
    value = get_path(state, rule["Variable"])
    if "IsNull" in rule:
        return (value is None) == rule["IsNull"]
    for operator in ("BooleanEquals", "StringEquals", "NumericEquals"):
        if operator in rule:
            return bool(value == rule[operator])
    raise AslError(f"unsupported Choice rule {rule}")


def _matches_error(names: Iterable[str], error: str) -> bool:
    return error in names or "States.ALL" in names or (error.startswith("States.") and "States.ALL" in names)


# ---------------------------------------------------------------------------------------------------------- runs
class Run:
    """One execution going through its definition. ``entered``: the states it entered, in order; ``caught``: the
    errors its Catches caught (``{"Error", "Cause"}``)."""

    def __init__(
        self,
        execution: Execution,
        asl: dict[str, Any],
        tasks: dict[str, Task],
        sfn: FakeStepFunctions,
        clock: FakeClock,
    ):
        self.execution = execution
        self.asl = asl
        self.tasks = tasks
        self.sfn = sfn
        self.clock = clock
        self.state: Any = copy.deepcopy(execution.input)
        self.at: str | None = asl["StartAt"]
        self.entered: list[str] = []
        self.caught: list[dict[str, Any]] = []
        self.token: str | None = None
        self.token_deadline: float | None = None
        self.wake_at: float | None = None
        self._pending_entry = True  # the state at ``at`` has not been entered yet

    # ------------------------------------------------------------------------------------------- driving
    @property
    def running(self) -> bool:
        return self.at is not None and self.execution.status == "RUNNING"

    def advance(self, stop_before: frozenset[str]) -> bool:
        """Go as far as possible now; True when anything happened."""
        moved = False
        while self.running:
            if self._pending_entry:
                if self.at in stop_before:
                    return moved
                self._pending_entry = False
                self.entered.append(str(self.at))
                moved = True
                self._enter()
                continue
            if self.token is not None:
                if not self._token_done():
                    return moved
                moved = True
                continue
            if self.wake_at is not None:
                if self.clock() < self.wake_at:
                    return moved
                self.wake_at = None
                self._next(self._spec()["Next"])
                moved = True
                continue
            raise AslError(f"{self.at}: nothing to wait for")  # pragma: no cover
        return moved

    def _spec(self) -> dict[str, Any]:
        try:
            return self.asl["States"][self.at]
        except KeyError:
            raise AslError(f"no state named {self.at}") from None

    def _next(self, name: str | None, *, end: bool = False) -> None:
        if end or name is None:
            self._finish("SUCCEEDED")
            return
        self.at = name
        self._pending_entry = True

    def _finish(self, status: str, error: str | None = None, cause: str | None = None) -> None:
        self.at = None
        self.execution.status = status
        self.execution.error, self.execution.cause = error, cause

    # ------------------------------------------------------------------------------------------- states
    def _enter(self) -> None:
        spec = self._spec()
        kind = spec["Type"]
        if kind == "Task":
            self._task(spec)
        elif kind == "Choice":
            target = next((c["Next"] for c in spec["Choices"] if matches(c, self.state)), spec.get("Default"))
            if target is None:
                self._finish("FAILED", "States.NoChoiceMatched", f"{self.at}: no choice matched")
            else:
                self._next(target)
        elif kind == "Wait":
            seconds = spec["Seconds"] if "Seconds" in spec else get_path(self.state, spec["SecondsPath"])
            self.wake_at = self.clock() + float(seconds)
        elif kind == "Pass":
            result = resolve(spec["Parameters"], self.state) if "Parameters" in spec else self.state
            self.state = set_path(self.state, spec.get("ResultPath", "$"), result)
            self._next(spec.get("Next"), end=spec.get("End", False))
        elif kind == "Succeed":
            self._finish("SUCCEEDED")
        elif kind == "Fail":
            self._finish("FAILED", spec.get("Error"), spec.get("Cause"))
        else:
            raise AslError(f"unsupported state type {kind}")

    def _task(self, spec: dict[str, Any]) -> None:
        waits = spec["Resource"].endswith(".waitForTaskToken")
        token = self.sfn.issue_token(self.execution.arn) if waits else None
        params = resolve(spec.get("Parameters", {}), self.state, {"Task": {"Token": token}})
        name = str(params["FunctionName"]).removeprefix("${").removesuffix("}")
        if name not in self.tasks:
            raise AslError(f"{self.at} calls {name}, which no step implements")
        attempts: dict[int, int] = {}
        while True:
            try:
                output = self.tasks[name](params["Payload"])
                break
            except Exception as exc:
                if not isinstance(exc, EXPECTED_ERRORS):
                    raise
                error = type(exc).__name__
                retry = next(
                    (i for i, r in enumerate(spec.get("Retry", [])) if _matches_error(r["ErrorEquals"], error)), None
                )
                if retry is not None and attempts.get(retry, 0) < spec["Retry"][retry].get("MaxAttempts", 3):
                    attempts[retry] = attempts.get(retry, 0) + 1
                    continue
                self._error(spec, error, json.dumps({"errorMessage": str(exc), "errorType": error}))
                return
        if waits:
            self.token = token
            timeout = spec.get("TimeoutSeconds")
            if "TimeoutSecondsPath" in spec:
                timeout = get_path(self.state, spec["TimeoutSecondsPath"])
            self.token_deadline = self.clock() + float(timeout) if timeout is not None else None
            self._token_done()
            return
        self._result(spec, {"Payload": output, "StatusCode": 200})

    def _token_done(self) -> bool:
        """Whether the token's wait ended (completed, or timed out): then the Task goes on."""
        assert self.token is not None
        found = self.sfn.tokens[self.token]
        if found.status == "SUCCEEDED":
            self.token = None
            self._result(self._spec(), found.output)
            return True
        if self.token_deadline is not None and self.clock() >= self.token_deadline:
            found.status = "TIMED_OUT"
            self.token = None
            self._error(self._spec(), "States.Timeout", None)
            return True
        return False

    def _result(self, spec: dict[str, Any], raw: Any) -> None:
        result = resolve(spec["ResultSelector"], raw) if "ResultSelector" in spec else raw
        self.state = set_path(self.state, spec.get("ResultPath", "$"), result)
        self._next(spec.get("Next"), end=spec.get("End", False))

    def _error(self, spec: dict[str, Any], error: str, cause: str | None) -> None:
        for catch in spec.get("Catch", []):
            if _matches_error(catch["ErrorEquals"], error):
                caught = {"Error": error, "Cause": cause}
                self.caught.append(caught)
                self.state = set_path(self.state, catch.get("ResultPath", "$"), caught)
                self._next(catch["Next"])
                return
        self._finish("FAILED", error, cause)


class Workflows:
    """The three state machines of the settings, each over its definition and the wiring's step services."""

    def __init__(
        self, sfn: FakeStepFunctions, clock: FakeClock, machines: dict[str, tuple[dict[str, Any], dict[str, Task]]]
    ):
        self.sfn = sfn
        self.clock = clock
        self.machines = machines

    def run_of(self, execution: Execution) -> Run:
        if execution.runner is None:
            if execution.state_machine_arn not in self.machines:
                raise AslError(f"no state machine {execution.state_machine_arn}")
            asl, tasks = self.machines[execution.state_machine_arn]
            execution.runner = Run(execution, asl, tasks, self.sfn, self.clock)
        return execution.runner

    def run(self, *, advance: float | None = None, stop_before: Iterable[str] = (), max_rounds: int = 10_000) -> None:
        """Run every execution as far as it goes: each in turn, again while any moves; then, when all wait, move the
        clock to the next Wait state's end (at most ``advance`` seconds from now, when given; the clock ends there)
        and go on. Stops when every execution has ended or waits on a token (or on a state in ``stop_before``)."""
        limit = None if advance is None else self.clock() + advance
        stops = frozenset(stop_before)
        for _ in range(max_rounds):
            moved = False
            for execution in list(self.sfn.executions.values()):
                if execution.status == "RUNNING" and self.run_of(execution).advance(stops):
                    moved = True
            if moved:
                continue
            wakes = [
                e.runner.wake_at
                for e in self.sfn.executions.values()
                if e.status == "RUNNING" and e.runner is not None and e.runner.running and e.runner.wake_at is not None
            ] + [
                e.runner.token_deadline
                for e in self.sfn.executions.values()
                if e.status == "RUNNING"
                and e.runner is not None
                and e.runner.running
                and e.runner.token is not None
                and e.runner.at in TIMERS
                and e.runner.token_deadline is not None
            ]
            if not wakes or (limit is not None and min(wakes) > limit):
                break
            self.clock.set(max(self.clock(), min(wakes)))
        else:
            raise AslError(f"the executions did not settle in {max_rounds} rounds")
        if limit is not None and self.clock() < limit:
            self.clock.set(limit)
