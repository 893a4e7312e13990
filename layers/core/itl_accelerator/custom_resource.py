"""CloudFormation custom resources, answered by a Lambda function: what CloudFormation sends and how it is answered.

CloudFormation invokes the function asynchronously with ``{"RequestType": "Create" | "Update" | "Delete",
"ResponseURL", "StackId", "RequestId", "LogicalResourceId", "ResourceProperties", "PhysicalResourceId"?}`` and
waits (up to an hour) for a ``PUT`` of ``{"Status": "SUCCESS" | "FAILED", "Reason", "PhysicalResourceId",
"StackId", "RequestId", "LogicalResourceId", "Data"}`` to the pre-signed ``ResponseURL`` (with an empty
``Content-Type``, which the URL's signature expects). Source: AWS CloudFormation User Guide, "Custom resources"
(request and response objects).
"""

from __future__ import annotations

import json
from typing import Any

import httpx

REQUEST_TYPES = frozenset({"Create", "Update", "Delete"})
RESPONSE_TIMEOUT_SECONDS = 10.0


def is_custom_resource_request(event: Any) -> bool:
    """Whether ``event`` is a CloudFormation custom resource request (not, e.g., a schedule's input)."""
    return isinstance(event, dict) and event.get("RequestType") in REQUEST_TYPES and "ResponseURL" in event


def respond(
    event: dict[str, Any],
    *,
    success: bool,
    physical_id: str,
    data: dict[str, str] | None = None,
    reason: str = "",
    http: httpx.Client | None = None,
) -> dict[str, Any]:
    """PUT the response to ``event["ResponseURL"]``; returns the body sent. ``data`` values are strings (what
    ``!GetAtt Resource.Key`` gives). Raises ``httpx.HTTPError`` when the response cannot be delivered (the
    asynchronous invocation is then retried by Lambda)."""
    body = {
        "Status": "SUCCESS" if success else "FAILED",
        "Reason": reason[:900] or ("OK" if success else "failed"),
        "PhysicalResourceId": physical_id,
        "StackId": event.get("StackId", ""),
        "RequestId": event.get("RequestId", ""),
        "LogicalResourceId": event.get("LogicalResourceId", ""),
        "NoEcho": False,
        "Data": dict(data or {}),
    }
    content = json.dumps(body).encode()
    client = http or httpx.Client()
    try:
        response = client.put(
            str(event["ResponseURL"]),
            content=content,
            headers={"Content-Type": "", "Content-Length": str(len(content))},
            timeout=RESPONSE_TIMEOUT_SECONDS,
        )
        response.raise_for_status()
    finally:
        if http is None:
            client.close()
    return body
