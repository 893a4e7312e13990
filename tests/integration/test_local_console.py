"""Given the API Gateway emulator and the workflow dispatcher reporting on a console, as ``itl-local up`` has them,
then each request and each workflow step is one line, and a 5xx (a crashed function's 502, an unhandled error's
500) shows its stack trace."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from starlette.testclient import TestClient

from itl_accelerator.observability import logger
from itl_local import workflows
from itl_local.console import Console
from itl_local.gateway import ApiGatewayEmulator
from tests.conftest import ADMIN, nodes_path

TIME = r"\d\d:\d\d:\d\d"


@pytest.fixture
def output(aws: Any) -> Iterator[io.StringIO]:
    """What the console prints, with function tracebacks and workflow steps reported on it."""
    stream = io.StringIO()
    console = Console(stream)
    handler = console.show_function_logs(logger)
    workflows.route_lambda_invocations_in_process(console)
    yield stream
    workflows.route_lambda_invocations_in_process()
    logging.getLogger(logger.name).removeHandler(handler)


@pytest.fixture
def emulator(output: io.StringIO, template: Any) -> ApiGatewayEmulator:
    return ApiGatewayEmulator(template, console=Console(output))


@pytest.fixture
def client(emulator: ApiGatewayEmulator) -> TestClient:
    return TestClient(emulator, base_url="http://testserver")


@pytest.fixture
def auth(make_token: Any, sub: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token('admin-1', [ADMIN], [f'/subscriptions/{sub}'])}"}


def test_each_request_is_one_line(client, auth, output, sub):
    path = nodes_path(sub, name="dgx-1")
    missing = client.get(path, headers=auth)
    anonymous = client.get(path)
    undeclared = client.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/unknownThings", headers=auth)
    lines = output.getvalue().splitlines()
    assert [re.sub(r"\d+ms", "Nms", line[9:]) for line in lines] == [
        f"GET {path} 404 SparkNodesGetFunction Nms req={missing.headers['x-amzn-RequestId']}",
        f"GET {path} 401 SparkNodesGetFunction Nms req={anonymous.headers['x-amzn-RequestId']} (UNAUTHORIZED)",
        f"GET /subscriptions/{sub}/providers/ITL.Accelerator/unknownThings 404 CanonicalPathFunction Nms "
        f"req={undeclared.headers['x-amzn-RequestId']}",
    ]
    assert all(re.match(rf"{TIME} ", line) for line in lines)


def test_a_crashed_function_shows_its_stack_trace_and_502(client, emulator, auth, output, sub):
    def crash(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise RuntimeError("the handler fell over")

    emulator.handlers["SparkNodesGetFunction"] = crash
    response = client.get(nodes_path(sub, name="dgx-1"), headers=auth)
    assert response.status_code == 502
    text = output.getvalue()
    trace = text.index("Traceback (most recent call last):")
    assert text.index("RuntimeError: the handler fell over\n") > trace
    assert re.search(rf"^{TIME} GET \S+ 502 SparkNodesGetFunction \d+ms req=\S+ \(DEFAULT_5XX\)$", text[trace:], re.M)


def test_an_unhandled_error_shows_its_stack_trace_and_500(client, auth, output, sub, monkeypatch):
    from itl_accelerator.services.api.nodes import SparkNodeService

    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the store exploded")

    monkeypatch.setattr(SparkNodeService, "get", explode)
    response = client.get(nodes_path(sub, name="dgx-1"), headers=auth)
    assert response.status_code == 500 and "exploded" not in response.text
    text = output.getvalue()
    assert "Traceback (most recent call last):" in text and "RuntimeError: the store exploded\n" in text
    assert re.search(rf"^{TIME} GET \S+ 500 SparkNodesGetFunction \d+ms req=\S+$", text, re.M)


def test_each_workflow_step_is_one_line(output):
    state = {
        "operationId": "00000000-0000-0000-0000-00000000c0de",
        "subscriptionId": "sub-console",
        "resourceGroup": "rg",
        "nodeName": "n",
        "instanceName": "i",
    }
    lambda_client = boto3.client("lambda")
    lambda_client.invoke(FunctionName="InstanceRequestFunction", Payload=json.dumps(state))
    # a .waitForTaskToken step gets {"taskToken", "state"}: its line names the operation too
    waited = {"taskToken": "t-1", "state": {**state, "operationId": "00000000-0000-0000-0000-0000000await"}}
    lambda_client.invoke(FunctionName="InstanceAwaitReadyFunction", Payload=json.dumps(waited))
    lambda_client.invoke(FunctionName="InstanceRequestFunction", Payload=json.dumps({"x": 1}))
    lines = output.getvalue().splitlines()
    assert re.fullmatch(rf"{TIME} step InstanceRequestFunction op={state['operationId']} ok \d+ms", lines[0])
    assert re.search(
        rf"^{TIME} step InstanceAwaitReadyFunction op=00000000-0000-0000-0000-0000000await ",
        "\n".join(lines),
        re.M,
    )
    assert re.fullmatch(rf"{TIME} step InstanceRequestFunction op=- ValidationError \d+ms", lines[-1])
