"""CORS for the web portal: the API answers the portal's origin (CORS_ALLOWED_ORIGIN, from template.yaml's
PortalOrigin) and no other, on every response including errors, and lets the portal read the long-running
operation headers."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from itl_accelerator.api.app import build_app
from itl_accelerator.settings import get_settings

PORTAL = "https://portal.example.com"


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CORS_ALLOWED_ORIGIN", PORTAL + "/")
    get_settings.cache_clear()
    try:
        yield TestClient(build_app())
    finally:
        monkeypatch.delenv("CORS_ALLOWED_ORIGIN")
        get_settings.cache_clear()


def test_the_portals_origin_may_read_the_answer_and_its_operation_headers(client: TestClient):
    response = client.get("/no/such/route", headers={"Origin": PORTAL})

    assert response.status_code == 404 and response.json()["error"]["code"] == "NotFound"
    assert response.headers["access-control-allow-origin"] == PORTAL
    exposed = {h.strip().lower() for h in response.headers["access-control-expose-headers"].split(",")}
    assert {"azure-asyncoperation", "location", "retry-after", "etag", "x-ms-request-id"} <= exposed
    assert "Origin" in response.headers["vary"]


@pytest.mark.parametrize("origin", ["https://evil.example.com", "https://portal.example.com.evil.net", None])
def test_any_other_origin_gets_no_cors_header(client: TestClient, origin: str | None):
    response = client.get("/no/such/route", headers={"Origin": origin} if origin else {})

    assert response.status_code == 404
    assert "access-control-allow-origin" not in response.headers


def test_without_a_configured_origin_no_response_carries_cors_headers(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CORS_ALLOWED_ORIGIN", raising=False)
    get_settings.cache_clear()
    response = TestClient(build_app()).get("/no/such/route", headers={"Origin": PORTAL})

    assert "access-control-allow-origin" not in response.headers
