"""Step Functions Task handlers of the provision/deprovision state machines: one handler per step.

Each parses the state (services/workflows/io.py ``InstanceStepInput``: the execution input plus earlier results),
calls one method of :class:`~itl_accelerator.services.workflows.instance_steps.InstanceSteps` (provisioning) or
:class:`~itl_accelerator.services.workflows.deprovision_steps.DeprovisionSteps`, and returns its typed
result as JSON. Exceptions propagate unchanged, so their class name (``DgxTransientError``, ``DgxPermanentError``,
``StoreBusy``) is the ``errorType`` that the state machines' ``Retry``/``Catch`` match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from itl_accelerator.observability import logger, tracer
from itl_accelerator.services.workflows.deprovision_steps import DeprovisionSteps
from itl_accelerator.services.workflows.instance_steps import InstanceSteps, error_from_catch
from itl_accelerator.services.workflows.io import ErrorBody, InstanceStepInput, StepModel
from itl_functions.process import wiring


def _steps(function_name: str) -> InstanceSteps:
    """The provisioning steps of this function's own wiring (one per function, as each step is its own function in
    AWS)."""
    return wiring(function_name).instance_steps


def _deprovision_steps(function_name: str) -> DeprovisionSteps:
    """The deprovisioning steps of this function's own wiring."""
    return wiring(function_name).deprovision_steps


StepHandler = Callable[[dict[str, Any], Any], dict[str, Any]]
Steps = TypeVar("Steps")


def _step(run: Callable[[Steps, InstanceStepInput], StepModel], steps: Callable[[str], Steps]) -> StepHandler:
    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        inp = InstanceStepInput.model_validate(event)
        logger.append_keys(operation_id=inp.operationId, correlation_id=inp.correlationId)
        return run(steps(context.function_name), inp).as_output()

    return handler


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
def await_ready(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``AwaitReady`` (a ``.waitForTaskToken`` Task: the payload is ``{"taskToken", "state"}``): record the token
    a DGX callback completes; the state machine waits until then, or the poll interval."""
    inp = InstanceStepInput.model_validate(event["state"])
    logger.append_keys(operation_id=inp.operationId, correlation_id=inp.correlationId)
    _steps(context.function_name).await_ready(inp, str(event["taskToken"]))
    return {}


def _requested(inp: InstanceStepInput) -> tuple[str, float]:
    assert inp.request is not None and inp.request.dgxInstanceId is not None, "Request ran before"
    return inp.request.dgxInstanceId, inp.request.deadline


def _compensation_deadline(inp: InstanceStepInput) -> float:
    assert inp.compensation is not None, "Compensate ran before"
    return inp.compensation.deadline


def _deletion_deadline(inp: InstanceStepInput) -> float:
    assert inp.deprovision is not None, "the deprovisioning Start ran before"
    return inp.deprovision.deadline


def _deprovision_failure(inp: InstanceStepInput) -> ErrorBody:
    if inp.deletion is not None and inp.deletion.timedOut:
        return ErrorBody.of(
            "DeprovisioningTimedOut", f"The instance was not deleted within {inp.timeoutSeconds} seconds."
        )
    return error_from_catch(inp.error)


request = _step(lambda s, i: s.request(i), _steps)
poll = _step(lambda s, i: s.poll(i, *_requested(i)), _steps)
complete = _step(lambda s, i: s.complete(i, _requested(i)[0], (i.poll.endpoint if i.poll else None) or ""), _steps)
compensate = _step(
    lambda s, i: s.compensate(i, (i.poll.error if i.poll else None) or error_from_catch(i.error)), _steps
)
check_removal = _step(lambda s, i: s.check_removal(i, _compensation_deadline(i)), _steps)
release_capacity = _step(lambda s, i: s.release_capacity(i), _steps)
cancel = _step(lambda s, i: s.cancel(i), _steps)
deprovision_start = _step(lambda s, i: s.start(i), _deprovision_steps)
deprovision_poll = _step(lambda s, i: s.poll(i, _deletion_deadline(i)), _deprovision_steps)
deprovision_finish = _step(lambda s, i: s.finish(i), _deprovision_steps)
deprovision_fail = _step(lambda s, i: s.fail(i, _deprovision_failure(i)), _deprovision_steps)
