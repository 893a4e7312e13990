"""The API Gateway emulator honours template.yaml's CORS settings for the web portal: API Gateway answers every
preflight itself (no authorizer, no function) with the configured origin, methods and headers, and its own error
responses carry the origin too; the origin comes from the PortalOrigin parameter, never '*'."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from itl_local.gateway import ApiGatewayEmulator
from itl_local.template import Template, Unresolvable

PORTAL = "https://portal.example.com"
JOBS = "/subscriptions/sub-1/resourceGroups/rg1/providers/ITL.Accelerator/sparkJobs"


@pytest.fixture(scope="module")
def gateway() -> TestClient:
    return TestClient(ApiGatewayEmulator(Template(parameters={"PortalOrigin": PORTAL})))


def test_a_preflight_is_answered_by_the_gateway_with_the_configured_origin(gateway: TestClient):
    response = gateway.options(
        JOBS,
        headers={
            "Origin": PORTAL,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
    )

    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == PORTAL
    assert {"POST", "PUT", "PATCH", "DELETE", "GET"} <= set(response.headers["access-control-allow-methods"].split(","))
    allowed = {h.lower() for h in response.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "if-match"} <= allowed
    assert "x-amzn-ErrorType" not in response.headers  # no gateway error: the preflight needs no token


def test_a_preflight_to_a_path_in_another_casing_is_answered_by_the_gateway_too(gateway: TestClient):
    # the catch-all route (/{proxy+}, ARM paths in any casing) has SAM's OPTIONS method like every other path
    response = gateway.options(JOBS.lower(), headers={"Origin": PORTAL, "Access-Control-Request-Method": "GET"})

    assert response.status_code == 200 and response.headers["access-control-allow-origin"] == PORTAL


def test_the_gateways_own_401_can_be_read_by_the_portal(gateway: TestClient):
    response = gateway.get(JOBS, headers={"Origin": PORTAL})  # no token

    assert response.status_code == 401 and response.json()["error"]["code"] == "AuthenticationFailed"
    assert response.headers["access-control-allow-origin"] == PORTAL


def test_the_origin_is_the_templates_parameter_and_never_a_wildcard():
    template = Template(parameters={"PortalOrigin": "http://127.0.0.1:8003"})

    assert template.api_cors()["AllowOrigin"] == "http://127.0.0.1:8003"
    assert template.global_environment()["CORS_ALLOWED_ORIGIN"] == "http://127.0.0.1:8003"
    # left empty, the origin is the stack's own portal distribution: known only once deployed
    with pytest.raises(Unresolvable):
        Template().api_cors()
    assert "CORS_ALLOWED_ORIGIN" not in Template().global_environment()
