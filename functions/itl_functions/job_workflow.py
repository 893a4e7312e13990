"""Step Functions Task handlers of the job lifecycle state machine: one handler per step.

Each parses the state input (the execution input plus earlier results; for the two ``.waitForTaskToken`` Tasks,
``{"taskToken", "state"}``), calls one method of :class:`itl_accelerator.services.job_workflow.JobWorkflow`, and
returns its result. Exceptions propagate unchanged, so their class name is the ``errorType`` the state machine's
``Retry``/``Catch`` match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from itl_accelerator.container import Container
from itl_accelerator.observability import logger, tracer
from itl_accelerator.services.job_workflow import JobInput, JobWorkflow, error_end

#: One container per function (as in AWS, where a process serves one function).
_containers: dict[str, Container] = {}


def _workflow(function_name: str) -> JobWorkflow:
    if function_name not in _containers:
        _containers.setdefault(function_name, Container.build())
    return _containers[function_name].job_workflow


StepHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


def _step(run: Callable[[JobWorkflow, JobInput, dict[str, Any]], dict[str, Any]]) -> StepHandler:
    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        state = event.get("state", event)  # a .waitForTaskToken Task's payload wraps the state
        inp = JobInput.model_validate(state)
        logger.append_keys(operation_id=inp.operationId, correlation_id=inp.correlationId)
        return run(_workflow(context.function_name), inp, event)

    return handler


def _outcome(event: dict[str, Any]) -> dict[str, Any]:
    """What ends the job: the end a step reported, else the error a Catch caught."""
    step_end = (event.get("step") or {}).get("end")
    return step_end or error_end(event.get("error") or {})


admit = _step(lambda w, i, e: w.admit(i))
place = _step(lambda w, i, e: w.place(i))
await_capacity = _step(lambda w, i, e: w.await_capacity(i, e["taskToken"]))
submit = _step(lambda w, i, e: w.submit(i))
track = _step(lambda w, i, e: w.track(i, e["taskToken"]))
stop = _step(lambda w, i, e: w.stop(i, (e.get("stop") or {}).get("deadline")))
finish = _step(lambda w, i, e: w.finish(i, _outcome(e), (e.get("stop") or {}).get("platform")))
