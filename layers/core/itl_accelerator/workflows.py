"""Starting Step Functions executions. The stepfunctions client is injected (boto3 in AWS, moto locally)."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from itl_accelerator.observability import logger


class WorkflowStarter:
    """Starts executions named after the operation id, so starting the same operation twice is harmless."""

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
