"""Step Functions Task handlers of the job lifecycle state machine: one handler per step.

Each parses the state (services/workflows/io.py ``JobStepInput``: the execution input plus earlier results; for the
two ``.waitForTaskToken`` Tasks, ``{"taskToken", "state"}``), calls one method of
:class:`itl_accelerator.services.workflows.job_steps.JobSteps`, and returns its typed result as JSON. Exceptions
propagate unchanged, so their class name is the ``errorType`` the state machine's ``Retry``/``Catch`` match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from itl_accelerator.observability import logger, tracer
from itl_accelerator.services.workflows.io import JobEnd, JobStepInput
from itl_accelerator.services.workflows.job_steps import JobSteps, error_end
from itl_functions.process import wiring


def _steps(function_name: str) -> JobSteps:
    """The steps of this function's own wiring (one per function, as each step is its own function in AWS)."""
    return wiring(function_name).job_steps


StepHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


def _step(run: Callable[[JobSteps, JobStepInput, dict[str, Any]], Any]) -> StepHandler:
    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        state = event.get("state", event)  # a .waitForTaskToken Task's payload wraps the state
        inp = JobStepInput.model_validate(state)
        logger.append_keys(operation_id=inp.operationId, correlation_id=inp.correlationId)
        result = run(_steps(context.function_name), inp, event)
        return result.as_output() if result is not None else {}

    return handler


def _outcome(inp: JobStepInput) -> JobEnd:
    """What ends the job: the end a step reported, else the error a Catch caught."""
    return (inp.step.end if inp.step else None) or error_end(inp.error)


place = _step(lambda s, i, e: s.place(i))
await_capacity = _step(lambda s, i, e: s.await_capacity(i, e["taskToken"]))
submit = _step(lambda s, i, e: s.submit(i))
track = _step(lambda s, i, e: s.track(i, e["taskToken"]))
stop = _step(lambda s, i, e: s.stop(i, i.stop.deadline if i.stop else None))
finish = _step(lambda s, i, e: s.finish(i, _outcome(i), i.stop.platform if i.stop else None, retry=True))
await_retry = _step(lambda s, i, e: s.await_retry(i, e["taskToken"]))
