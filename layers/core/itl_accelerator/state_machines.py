"""Step Functions state machines (the provision, deprovision and job lifecycle workflows of template.yaml): starting
executions, resuming the ones that wait on a task token, and asking how they are. The client is injected (boto3 in
AWS, moto locally)."""

from __future__ import annotations

import json
from typing import Any, Literal

from botocore.exceptions import BotoCoreError, ClientError

from itl_accelerator.observability import logger

ExecutionStatus = Literal["NOT_FOUND", "RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED", "PENDING_REDRIVE"]


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The ARN of the execution ``name`` of a standard state machine."""
    return state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"


class StateMachines:
    """Starts executions named after the operation id, so starting the same operation twice is harmless; tells
    the status of an execution by that name."""

    def __init__(self, client: Any):
        self._sfn = client

    def start(self, state_machine_arn: str, name: str, payload: dict[str, Any]) -> None:
        """Start ``name`` on ``state_machine_arn`` with ``payload`` as input; an execution of that name that
        already exists counts as started (an identical retry of the API call)."""
        try:
            self._sfn.start_execution(stateMachineArn=state_machine_arn, name=name, input=json.dumps(payload))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") != "ExecutionAlreadyExists":
                raise
            logger.info("Execution already started", extra={"execution": name})

    def start_or_defer(self, state_machine_arn: str, name: str, payload: dict[str, Any]) -> bool:
        """:meth:`start`, for a change already committed (an accepted operation with a lease): when Step Functions
        cannot be reached or refuses for now (throttling, an outage), the failure is logged and False returned —
        the reconciler starts the execution when the operation's lease runs out (services/schedules/reconciler.py).
        Misconfiguration is not deferred: the ARNs are validated when the function starts (settings.py)."""
        try:
            self.start(state_machine_arn, name, payload)
        except (ClientError, BotoCoreError):
            logger.exception("Could not start the execution; the reconciler will", extra={"execution": name})
            return False
        return True

    def status(self, state_machine_arn: str, name: str) -> ExecutionStatus:
        """``NOT_FOUND`` when no execution of that name was ever started, else its status (``RUNNING``, ...)."""
        try:
            found = self._sfn.describe_execution(executionArn=execution_arn(state_machine_arn, name))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ExecutionDoesNotExist":
                return "NOT_FOUND"
            raise
        status: ExecutionStatus = found["status"]
        return status

    def complete_task(self, token: str, output: dict[str, Any]) -> bool:
        """Resume the execution waiting on ``token`` (a ``.waitForTaskToken`` Task) with ``output`` as that
        Task's result. False when nothing waits on it any more (it was completed already, timed out, or its
        execution ended) — which callers take as "someone else got there first"."""
        try:
            self._sfn.send_task_success(taskToken=token, output=json.dumps(output))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("InvalidToken", "TaskTimedOut", "TaskDoesNotExist"):
                return False
            raise
        return True
