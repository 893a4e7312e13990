"""Step Functions Task handlers of the provision/deprovision state machines: one handler per step.

Each parses the state input (the execution input plus earlier results), calls one method of
:class:`itl_accelerator.services.instance_workflow.InstanceWorkflow`, and returns its result. Exceptions propagate
unchanged, so their class name (``DgxTransientError``, ``DgxPermanentError``, ``StoreBusy``) is the ``errorType``
that the state machines' ``Retry``/``Catch`` match.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from itl_accelerator.container import Container
from itl_accelerator.observability import logger, tracer
from itl_accelerator.services.instance_workflow import InstanceWorkflow, WorkflowInput, error_from_catch

#: One container per function. In AWS a process serves one function, so this holds one entry; locally every step
#: shares the process, and each keeps its own container (and DGX client) as its own execution environment would.
_containers: dict[str, Container] = {}


def _workflow(function_name: str) -> InstanceWorkflow:
    if function_name not in _containers:
        _containers.setdefault(function_name, Container.build())
    return _containers[function_name].instance_workflow


StepHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


def _step(run: Callable[[InstanceWorkflow, WorkflowInput, dict[str, Any]], dict[str, Any]]) -> StepHandler:
    @logger.inject_lambda_context(clear_state=True)
    @tracer.capture_lambda_handler(capture_response=False)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        inp = WorkflowInput.model_validate(event)
        logger.append_keys(operation_id=inp.operationId, correlation_id=inp.correlationId)
        return run(_workflow(context.function_name), inp, event)

    return handler


request = _step(lambda w, i, e: w.request(i))
poll = _step(lambda w, i, e: w.poll(i, e["request"]["dgxInstanceId"], float(e["request"]["deadline"])))
complete = _step(lambda w, i, e: w.complete(i, e["request"]["dgxInstanceId"], e["poll"]["endpoint"]))
compensate = _step(
    lambda w, i, e: w.compensate(i, (e.get("poll") or {}).get("error") or error_from_catch(e.get("error")))
)
check_removal = _step(lambda w, i, e: w.removal_status(i, float(e["compensation"]["deadline"])))
release_capacity = _step(lambda w, i, e: w.release_after_removal(i))
cancel = _step(lambda w, i, e: w.cancel(i))
deprovision_start = _step(lambda w, i, e: w.deprovision_start(i))
deprovision_poll = _step(lambda w, i, e: w.deprovision_poll(i, float(e["deprovision"]["deadline"])))
deprovision_finish = _step(lambda w, i, e: w.deprovision_finish(i))
deprovision_fail = _step(
    lambda w, i, e: w.deprovision_fail(
        i,
        {
            "code": "DeprovisioningTimedOut",
            "message": f"The instance was not deleted within {i.timeoutSeconds} seconds.",
        }
        if (e.get("deletion") or {}).get("timedOut")
        else error_from_catch(e.get("error")),
    )
)
