"""Step Functions, locally: moto executes the real ASL of statemachines/, and its Lambda tasks call the real step
handlers in-process.

moto's Lambda backend without Docker (``LambdaSimpleBackend``, an internal class — moto is pinned in
pyproject.toml and tests/integration/test_local_runtime_fidelity.py guards this) only echoes its input; it is replaced
here by a dispatcher that imports the function's ``Handler`` (as declared in template.yaml) and calls it the way
the Lambda runtime would, reporting exceptions as ``{"errorType", "errorMessage"}`` with a function error. Each
invocation is reported on the console given to :func:`route_lambda_invocations_in_process` (``itl-local up``'s).
"""

from __future__ import annotations

import io
import json
import logging
import time
import zipfile
from typing import Any

from itl_accelerator.observability import logger
from itl_local.console import Console
from itl_local.lambda_runtime import invoke
from itl_local.template import Template, load_handler

#: moto configuration that makes it execute state machines and use the (patched) Docker-less Lambda backend.
MOTO_CONFIG: dict[str, Any] = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
}
ROLE_NAME = "itl-accelerator-local"
#: Where each step is reported (set by :func:`route_lambda_invocations_in_process`); empty: nowhere.
_step_console: list[Console] = []


def _dispatch(
    self: Any, function_name: str, qualifier: str | None, body: Any, headers: Any, response_headers: Any
) -> bytes:
    function = self.get_function(function_name, qualifier)
    event = json.loads(body) if body else {}
    started = time.perf_counter()
    outcome = "ok"
    try:
        result = invoke(load_handler(function.handler), event, function.function_name)
    except Exception as exc:  # noqa: BLE001 - Lambda reports any exception as a function error
        outcome = type(exc).__name__
        logger.info("Step failed", extra={"function": function.function_name, "errorType": outcome})
        response_headers["x-amz-function-error"] = "Unhandled"
        payload = {"errorType": outcome, "errorMessage": str(exc)[:1000]}
        return json.dumps(payload).encode()
    finally:
        # a step's input is the execution's state, or (a .waitForTaskToken step) {"taskToken", "state"}
        state = event.get("state", event) if isinstance(event, dict) else None
        operation = state.get("operationId") if isinstance(state, dict) else None
        for console in _step_console:
            console.step(function.function_name, operation, outcome, (time.perf_counter() - started) * 1000)
    return json.dumps(result).encode()


def route_lambda_invocations_in_process(console: Console | None = None) -> None:
    """Make moto's Docker-less Lambda backend run the real handlers (idempotent), reporting each invocation on
    ``console`` when given. moto's ASL interpreter logs every Fail state and caught error at ERROR with its
    internals; the execution history has the same facts, so that logger is quietened."""
    from moto.awslambda_simple.models import LambdaSimpleBackend

    _step_console[:] = [console] if console else []

    logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
    LambdaSimpleBackend.invoke = _dispatch  # type: ignore[method-assign]
    _only_started_executions()


def _started_executions(self: Any, execution_status: Any = None) -> list[Any]:
    """moto's ``_get_executions`` without the executions whose worker has not set up its environment yet.

    Every caller (``SendTaskSuccess``/``Failure``/``Heartbeat``, the map-run calls) reads
    ``execution.exec_worker.env`` of each execution it gets, and an execution is ``RUNNING`` a moment before its
    worker thread sets ``env``: a task token sent in that moment — by the job tracker, for another test's or
    user's execution — raised ``AttributeError`` from inside moto, over and over while such an execution stood.
    One that has no environment yet cannot hold the token, so leaving it out changes no answer."""
    return [
        execution
        for execution in _ORIGINAL_GET_EXECUTIONS[0](self, execution_status)
        if getattr(getattr(execution, "exec_worker", None), "env", None) is not None
    ]


#: moto's own ``StepFunctionsParserBackend._get_executions`` (set once, when first replaced).
_ORIGINAL_GET_EXECUTIONS: list[Any] = []


def _only_started_executions() -> None:
    """Replace moto's ``_get_executions`` by :func:`_started_executions` (idempotent)."""
    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    if not _ORIGINAL_GET_EXECUTIONS:
        _ORIGINAL_GET_EXECUTIONS.append(StepFunctionsParserBackend._get_executions)
        StepFunctionsParserBackend._get_executions = _started_executions  # type: ignore[method-assign]


def deploy_workflows(template: Template, *, iam: Any, lambda_client: Any, sfn: Any) -> dict[str, str]:
    """Create every function of the template in (moto's) Lambda with its Handler, and every state machine with
    its DefinitionSubstitutions resolved to those functions. Returns state machine logical id → ARN."""
    role = iam.create_role(RoleName=ROLE_NAME, AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17"}))
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("README.txt", "handlers run in-process (itl_local.workflows)")
    arns = {}
    for logical_id, props in template.functions().items():
        created = lambda_client.create_function(
            FunctionName=logical_id,
            Runtime="python3.13",
            Role=role["Role"]["Arn"],
            Handler=props["Handler"],
            Code={"ZipFile": code.getvalue()},
        )
        arns[logical_id] = created["FunctionArn"]
    machines = {}
    for logical_id, machine in template.state_machines().items():
        definition = machine["definition"].read_text()
        for name, function_id in machine["substitutions"].items():
            definition = definition.replace("${" + name + "}", arns[function_id])
        created = sfn.create_state_machine(name=logical_id, definition=definition, roleArn=role["Role"]["Arn"])
        machines[logical_id] = created["stateMachineArn"]
    return machines


def workflow_environment(machines: dict[str, str]) -> dict[str, str]:
    """Settings variables naming the state machines."""
    return {
        "PROVISION_STATE_MACHINE_ARN": machines["ProvisionInstanceStateMachine"],
        "DEPROVISION_STATE_MACHINE_ARN": machines["DeprovisionInstanceStateMachine"],
        "JOB_STATE_MACHINE_ARN": machines["JobLifecycleStateMachine"],
    }
