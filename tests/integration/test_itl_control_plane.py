"""Given the ITL Control Plane's API gateway (a fake on loopback, tests/fake_itl_gateway.py), when the provider
registers — on its schedule and as the deploy-time custom resource — then the gateway holds a registration of
namespace ITL.Accelerator with the provider's base URL, resource types, version and health endpoint, in the
spelling it reads (itl-controlplane-sdk 1.0.3's, its main branch's, or both); a gateway that is away is waited for
as the SDK does and never fails a deployment. And /health and /ready answer without a token, as the SDK's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from itl_local.lambda_runtime import invoke
from itl_local.template import load_handler
from tests.conftest import serve

REGISTRATION = "ProviderRegistrationFunction"
RESOURCE_TYPES = ["sparkNodes", "sparkNodes/sparkOllamaInstances", "sparkJobs", "capacityReservations"]


@pytest.fixture
def itl(itl_gateway: Any) -> Any:
    """The session's fake ITL gateway, as new for this test."""
    itl_gateway.reset()
    yield itl_gateway
    itl_gateway.reset()


def run_registration(template: Any, event: dict[str, Any]) -> dict[str, Any]:
    handler = load_handler(template.functions()[REGISTRATION]["Handler"])
    return invoke(handler, event, REGISTRATION, template.function_timeout(REGISTRATION))


def schedule_event(template: Any) -> dict[str, Any]:
    from datetime import UTC, datetime

    from itl_local.schedules import schedules

    (schedule,) = [s for s in schedules(template) if s.function_id == REGISTRATION]
    return schedule.event(datetime.now(UTC))


# ------------------------------------------------------------------------------------------------ probes
def test_health_and_ready_answer_without_a_token_as_the_itl_sdk_does(gateway):
    health = gateway.get("/health")
    assert health.status_code == 200, health.text
    assert health.json()["status"] == "healthy" and health.json()["timestamp"].endswith("Z")
    assert health.headers["x-ms-request-id"] == health.headers["x-amzn-RequestId"]
    ready = gateway.get("/ready")
    assert ready.status_code == 200, ready.text
    assert ready.json()["ready"] is True
    # a token is not needed, and one that is no token changes nothing
    assert gateway.get("/health", headers={"Authorization": "Bearer x"}).status_code == 200


def test_ready_says_503_when_the_table_cannot_be_read():
    from botocore.exceptions import ClientError

    from itl_accelerator.repositories.dynamodb.probe import DynamoTableProbe
    from itl_accelerator.repositories.dynamodb.table import Table
    from itl_functions import health

    class Refusing:
        def get_item(self, **_: Any) -> None:
            raise ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "no table"}}, "GetItem")

    saved = list(health._probes)
    health._probes[:] = [DynamoTableProbe(Table(Refusing(), "gone"))]
    try:
        answer = health.ready({"requestContext": {"requestId": "r-1"}}, None)
    finally:
        health._probes[:] = saved
    assert answer["statusCode"] == 503
    body = json.loads(answer["body"])
    assert body["ready"] is False and body["reason"] == "the store cannot be read now"
    assert "ResourceNotFound" not in answer["body"]  # the store's error stays in the log
    assert answer["headers"]["x-ms-request-id"] == "r-1"


# ------------------------------------------------------------------------------------------------ registration
def test_the_schedule_registers_with_both_spellings_at_once(aws, template, itl):
    outcome = run_registration(template, schedule_event(template))
    assert outcome["registered"] is True and outcome["status"] == 201 and outcome["spelling"] == "both"
    (body,) = itl.registrations
    assert body["namespace"] == "ITL.Accelerator" and body["name"] == "accelerator-provider"
    # itl-controlplane-sdk 1.0.3's spelling
    assert body["base_url"] == "https://provider.test/v1" and body["resource_types"] == RESOURCE_TYPES
    assert body["health_endpoint"] == "/health" and body["version"] == "2026-11-01"
    # and its main branch's
    assert body["baseUrl"] == body["base_url"] and body["resourceTypes"] == RESOURCE_TYPES
    assert body["healthCheckEndpoint"] == "/health" and body["description"]


@pytest.mark.parametrize("spelling", ["released", "main"])
def test_a_gateway_that_refuses_unknown_fields_gets_its_own_spelling(aws, template, itl, spelling):
    itl.strict = spelling
    outcome = run_registration(template, schedule_event(template))
    assert outcome["registered"] is True and outcome["spelling"] == spelling
    (body,) = itl.registrations
    assert ("base_url" in body) == (spelling == "released") and ("baseUrl" in body) == (spelling == "main")


def test_a_gateway_still_starting_is_waited_for(aws, template, itl):
    itl.down_for = 2  # /health answers 503 twice, then 200 (the schedule polls at most 3 times)
    outcome = run_registration(template, schedule_event(template))
    assert outcome["registered"] is True and outcome["healthChecks"] == 3
    assert len(itl.registrations) == 1


def test_a_gateway_that_stays_away_is_not_an_error(aws, template, itl):
    itl.down_for = 100
    outcome = run_registration(template, schedule_event(template))
    assert outcome["registered"] is False and "did not answer /health" in outcome["reason"]
    assert itl.health_checks == 3 and itl.registrations == []


def test_a_refused_registration_is_reported(aws, template, itl):
    itl.refuse_with = 500
    outcome = run_registration(template, schedule_event(template))
    assert outcome["registered"] is False and outcome["status"] == 500
    assert "answered 500" in outcome["reason"]


# ------------------------------------------------------------------------------------------------ at deploy time
class CloudFormationResponses:
    """Where CloudFormation's pre-signed ResponseURL points: records each PUT (body and Content-Type)."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        self.app = Starlette(routes=[Route("/response/{rid}", self._put, methods=["PUT"])])

    async def _put(self, request: Request) -> Response:
        self.received.append((request.headers.get("content-type", ""), json.loads(await request.body())))
        return Response(status_code=200)


@pytest.fixture(scope="module")
def cloudformation() -> Any:
    responses = CloudFormationResponses()
    server, port = serve(responses.app)
    responses.url = f"http://127.0.0.1:{port}"
    yield responses
    server.should_exit = True


def custom_resource_event(cloudformation: Any, request_type: str, gateway_url: str) -> dict[str, Any]:
    cloudformation.received.clear()
    return {
        "RequestType": request_type,
        "ResponseURL": f"{cloudformation.url}/response/{request_type.lower()}",
        "StackId": "arn:aws:cloudformation:us-east-1:123456789012:stack/itl/1",
        "RequestId": "req-1",
        "LogicalResourceId": "ProviderRegistration",
        "ResourceType": "AWS::CloudFormation::CustomResource",
        "ResourceProperties": {
            "ServiceToken": "arn:aws:lambda:us-east-1:123456789012:function:ProviderRegistrationFunction",
            "GatewayUrl": gateway_url,
            "BaseUrl": "https://abc.execute-api.us-east-1.amazonaws.com/v1",
            "ApiVersion": "2026-11-01",
        },
    }


def test_a_deployment_registers_and_answers_cloudformation(aws, template, itl, cloudformation):
    event = custom_resource_event(cloudformation, "Create", itl.url)
    outcome = run_registration(template, event)
    assert outcome["registered"] is True
    assert itl.registrations[0]["base_url"] == "https://abc.execute-api.us-east-1.amazonaws.com/v1"
    ((content_type, answer),) = cloudformation.received
    assert content_type == ""  # what the pre-signed URL's signature expects
    assert answer["Status"] == "SUCCESS" and answer["Data"] == {"Registered": "true", "Gateway": itl.url}
    assert (answer["RequestId"], answer["LogicalResourceId"]) == ("req-1", "ProviderRegistration")
    assert answer["PhysicalResourceId"] == "itl-gateway-registration/ITL.Accelerator"


def test_a_deployment_never_fails_for_the_gateway(aws, template, itl, cloudformation, monkeypatch):
    # Given a gateway that never becomes healthy, waited for briefly (as a deployment would, 30 x 2 s, in short)
    monkeypatch.setenv("PROVIDER_REGISTRATION_ATTEMPTS", "2")
    from itl_accelerator.settings import get_settings

    get_settings.cache_clear()
    itl.down_for = 100
    try:
        outcome = run_registration(template, custom_resource_event(cloudformation, "Update", itl.url))
    finally:
        monkeypatch.delenv("PROVIDER_REGISTRATION_ATTEMPTS")
        get_settings.cache_clear()
    # Then the stack is told SUCCESS, with Registered false and why
    assert outcome["registered"] is False and itl.health_checks == 2
    ((_, answer),) = cloudformation.received
    assert answer["Status"] == "SUCCESS" and answer["Data"]["Registered"] == "false"
    assert "did not answer /health" in answer["Reason"]


def test_deleting_the_stack_answers_at_once(aws, template, itl, cloudformation):
    event = {**custom_resource_event(cloudformation, "Delete", itl.url), "PhysicalResourceId": "p-1"}
    run_registration(template, event)
    ((_, answer),) = cloudformation.received
    assert answer["Status"] == "SUCCESS" and answer["PhysicalResourceId"] == "p-1"
    assert itl.health_checks == 0 and itl.registrations == []


def test_no_gateway_configured_registers_nothing(aws, template, itl, cloudformation):
    outcome = run_registration(template, custom_resource_event(cloudformation, "Create", ""))
    assert outcome["registered"] is False and "no ITL gateway configured" in outcome["reason"]
    ((_, answer),) = cloudformation.received
    assert answer["Status"] == "SUCCESS" and answer["Data"]["Registered"] == "false"
    assert itl.health_checks == 0
