"""Responses go out compressed where the deployed stack compresses them: the API as template.yaml's
``MinimumCompressionSize`` says (the local gateway emulator applies the same rule), the portal's files as its
CloudFront distribution's ``Compress: true`` does."""

from __future__ import annotations

import gzip
import json

import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.testclient import TestClient

from itl_local.gateway import ApiGatewayEmulator, _accepts_gzip
from itl_local.portal import PORTAL_DIST, PortalSite
from itl_local.template import Template


@pytest.fixture(scope="module")
def gateway() -> ApiGatewayEmulator:
    return ApiGatewayEmulator(Template(parameters={"PortalOrigin": "https://portal.example.com"}), throttle=False)


def request(accept_encoding: str | None) -> Request:
    headers = [(b"accept-encoding", accept_encoding.encode())] if accept_encoding is not None else []
    return Request({"type": "http", "method": "GET", "path": "/", "headers": headers, "query_string": b""})


def test_the_template_compresses_from_one_kib_and_the_emulator_reads_it(gateway: ApiGatewayEmulator):
    assert Template().api_minimum_compression_size() == 1024
    assert gateway.compress_from == 1024


def test_a_large_body_goes_out_gzipped_to_a_client_that_accepts_it(gateway: ApiGatewayEmulator):
    page = {"value": [{"name": f"job-{n}", "properties": {"status": "Succeeded"}} for n in range(100)]}
    body = json.dumps(page).encode()

    sent = gateway.compressed(request("gzip, deflate, br"), Response(content=body, media_type="application/json"))

    assert sent.headers["content-encoding"] == "gzip" and "Accept-Encoding" in sent.headers["vary"]
    assert int(sent.headers["content-length"]) == len(sent.body) < len(body) / 5
    assert json.loads(gzip.decompress(sent.body)) == page


@pytest.mark.parametrize("accept", [None, "identity", "br", "gzip;q=0", "*;q=0"])
def test_a_client_that_does_not_accept_gzip_gets_the_body_as_it_is(gateway: ApiGatewayEmulator, accept: str | None):
    body = b"x" * 4096
    sent = gateway.compressed(request(accept), Response(content=body))
    assert sent.body == body and "content-encoding" not in sent.headers


def test_a_body_under_the_minimum_is_not_compressed(gateway: ApiGatewayEmulator):
    body = b"x" * 1023
    sent = gateway.compressed(request("gzip"), Response(content=body))
    assert sent.body == body and "content-encoding" not in sent.headers


def test_accept_encoding_is_read_as_rfc_9110_says():
    assert _accepts_gzip("gzip") and _accepts_gzip("GZIP;q=0.5") and _accepts_gzip("br, *")
    assert not _accepts_gzip("") and not _accepts_gzip("gzip;q=0, *") and not _accepts_gzip("deflate")


def test_the_portals_bundle_is_served_compressed_and_without_a_source_map():
    if not (PORTAL_DIST / "index.html").is_file():
        pytest.skip("the portal is not built: ./dev test builds it")
    site = TestClient(PortalSite({"apiBaseUrl": ""}))
    bundle = site.get("/portal/app.js", headers={"Accept-Encoding": "gzip"})
    assert bundle.status_code == 200 and bundle.headers["content-encoding"] == "gzip"
    assert bundle.num_bytes_downloaded < (PORTAL_DIST / "app.js").stat().st_size / 2  # as sent, before decoding
    assert site.get("/portal/app.js.map").status_code == 404
    assert not list(PORTAL_DIST.glob("*.map"))
