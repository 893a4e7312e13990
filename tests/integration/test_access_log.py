"""The API's access log (template.yaml ``AccessLogSetting``): every request gets one JSON line in the deployed format
— whoever answered it: a function, the authorizer, the stage throttle or the gateway — naming its caller, route,
status, latency, request id (the ``x-ms-request-id`` the caller got) and what went wrong. The local gateway emulator
writes the same line from the same format, so these run where the deployed stack cannot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from itl_local.gateway import ApiGatewayEmulator
from itl_local.template import Template
from tests.conftest import ADMIN, nodes_path


def lines(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_format_is_the_templates_json_with_the_fields_a_reviewer_needs():
    fmt = Template().api_access_log_format()
    assert fmt is not None
    fields = json.loads(fmt)  # valid JSON once API Gateway fills it in: every value is a string of one variable
    for name in ("requestId", "principalId", "httpMethod", "resourcePath", "status", "responseLatency", "sourceIp",
                 "integrationError", "errorType", "errorMessage", "authorizerError"):  # fmt: skip
        assert fields[name].startswith("$context."), name


def test_a_request_the_authorizer_refuses_is_logged_with_why(aws: Any, template: Any, tmp_path: Path, sub: str):
    log = tmp_path / "access.jsonl"
    with TestClient(ApiGatewayEmulator(template, access_log=log), base_url="http://testserver") as client:
        anonymous = client.get(nodes_path(sub), headers={"User-Agent": "probe/1"})
        forged = client.get(nodes_path(sub), headers={"Authorization": "Bearer not-a-token"})
    no_token, bad_token = lines(log)
    assert anonymous.status_code == 401 and forged.status_code == 401
    assert no_token["requestId"] == anonymous.headers["x-ms-request-id"]  # the id the caller holds
    assert (no_token["status"], no_token["errorType"], no_token["principalId"]) == ("401", "UNAUTHORIZED", "-")
    assert (
        no_token["resourcePath"]
        == "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkNodes"
    )
    assert no_token["userAgent"] == "probe/1" and no_token["sourceIp"] == "testclient"
    assert no_token["integrationStatus"] == "-"  # no function ran
    assert no_token["errorMessage"].startswith("Authentication failed")
    assert (bad_token["errorType"], bad_token["authorizerError"]) == ("UNAUTHORIZED", "Unauthorized")


def test_a_throttled_request_is_logged_though_nothing_behind_the_stage_saw_it(
    aws: Any, make_token: Any, tmp_path: Path, sub: str
):
    log = tmp_path / "access.jsonl"
    template = Template(parameters={"ApiThrottlingRateLimit": "1", "ApiThrottlingBurstLimit": "1"})
    headers = {"Authorization": f"Bearer {make_token('admin-1', [ADMIN], [f'/subscriptions/{sub}'])}"}
    emulator = ApiGatewayEmulator(template, clock=lambda: 1000.0, access_log=log)
    with TestClient(emulator, base_url="http://testserver") as client:
        passed, throttled = (client.get(nodes_path(sub), headers=headers) for _ in range(2))
    ok, refused = lines(log)
    assert (passed.status_code, throttled.status_code) == (200, 429)
    assert ok["principalId"] == "admin-1" and ok["status"] == "200" and ok["integrationStatus"] == "200"
    assert int(ok["integrationLatency"]) <= int(ok["responseLatency"])
    assert (refused["status"], refused["errorType"], refused["principalId"]) == ("429", "THROTTLED", "-")
    assert refused["requestId"] == throttled.headers["x-ms-request-id"]
    assert refused["resourcePath"] == "-"  # refused before the route was matched, as API Gateway's throttle is


def test_a_crashed_function_is_logged_with_the_integration_error(
    aws: Any, template: Any, make_token: Any, tmp_path: Path, sub: str
):
    log = tmp_path / "access.jsonl"
    emulator = ApiGatewayEmulator(template, access_log=log)

    def crash(event: dict[str, Any], context: Any) -> dict[str, Any]:
        raise RuntimeError("boom")

    emulator.handlers["SparkNodesListByResourceGroupFunction"] = crash
    headers = {"Authorization": f"Bearer {make_token('admin-1', [ADMIN], [f'/subscriptions/{sub}'])}"}
    with TestClient(emulator, base_url="http://testserver") as client:
        assert client.get(nodes_path(sub), headers=headers).status_code == 502
    (line,) = lines(log)
    assert (line["errorType"], line["integrationError"], line["principalId"]) == (
        "DEFAULT_5XX",
        "RuntimeError",
        "admin-1",
    )
