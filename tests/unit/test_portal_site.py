"""How the portal's files are served locally (at /portal/ on the API's port, beside the API it calls) and published
to a deployed stack's bucket: its config.json names the API, the issuer and the client; nothing else of the API's
paths changes."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from starlette.responses import JSONResponse
from starlette.testclient import TestClient

from itl_local.portal import PortalSite, portal_config, publish, with_portal

CONFIG = portal_config(
    api_base_url="", authority="http://127.0.0.1:8180/realms/itl", client_id="itl-accelerator-portal"
)


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    (tmp_path / "index.html").write_text("<!doctype html><title>portal</title>")
    (tmp_path / "app.js").write_text("console.log('portal')")
    (tmp_path / "styles.css").write_text("body{}")
    (tmp_path / ".source").write_text("build stamp, not published")
    return tmp_path


def serve(dist: Path) -> TestClient:
    async def api(scope, receive, send):
        await JSONResponse({"api": scope["path"]})(scope, receive, send)

    return TestClient(with_portal(api, PortalSite(CONFIG, dist)), follow_redirects=False)


def test_the_portal_and_its_config_are_served_under_portal_and_everything_else_is_the_apis(dist: Path):
    client = serve(dist)

    assert client.get("/portal").headers["location"] == "/portal/"
    page = client.get("/portal/")
    assert page.status_code == 200 and "<title>portal</title>" in page.text
    assert client.get("/portal/app.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/portal/config.json").json() == CONFIG
    assert client.get("/portalx").json() == {"api": "/portalx"}
    assert (
        client.get("/subscriptions/s/providers/ITL.Accelerator/sparkNodes").json()["api"].startswith("/subscriptions")
    )


@pytest.mark.parametrize("path", ["/portal/nonexistent.js", "/portal/nodes", "/portal/a/b/c", "/portal/app.js/x"])
def test_a_file_the_portal_does_not_have_is_404_not_a_server_error(dist: Path, path: str):
    answer = serve(dist).get(path)

    assert (answer.status_code, answer.text) == (404, "Not Found")


def test_a_path_out_of_the_portal_folder_is_never_served(dist: Path):
    (dist.parent / "secret.txt").write_text("not the portal's")
    client = serve(dist)

    for path in ("/portal/%2e%2e/secret.txt", "/portal/..%2fsecret.txt", "/portal/%2e%2e%2fsecret.txt"):
        answer = client.get(path)
        assert answer.status_code == 404 and "not the portal's" not in answer.text, path


def test_a_write_to_the_portal_is_405(dist: Path):
    answer = serve(dist).post("/portal/app.js")

    assert answer.status_code == 405


def test_an_unbuilt_portal_says_how_to_build_it(tmp_path: Path):
    page = serve(tmp_path / "missing").get("/portal/")

    assert page.status_code == 503 and "./dev up" in page.text


def test_publish_uploads_the_build_and_its_config_with_content_types(dist: Path):
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="portal-bucket")
        config = portal_config(
            api_base_url="https://api.example.com/v1",
            authority="https://auth.example.com/realms/itl",
            client_id="itl-accelerator-portal",
        )

        keys = publish(s3, "portal-bucket", config, dist=dist)

        assert sorted(keys) == ["app.js", "config.json", "index.html", "styles.css"]
        index = s3.get_object(Bucket="portal-bucket", Key="index.html")
        assert index["ContentType"].startswith("text/html") and index["CacheControl"] == "no-cache"
        body = s3.get_object(Bucket="portal-bucket", Key="config.json")["Body"].read()

        assert json.loads(body) == config


def test_publish_refuses_an_unbuilt_portal(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="build the portal"):
        publish(None, "bucket", CONFIG, dist=tmp_path)


def test_the_portals_estimate_prices_the_vendor_the_api_places_on():
    """The submit form's estimate (portal/src/views/jobs.js) keeps the API's vendor of a job naming no model."""
    import re

    from itl_accelerator.domain.accelerators import DEFAULT_VENDORS

    source = (Path(__file__).resolve().parents[2] / "portal" / "src" / "views" / "jobs.js").read_text()
    said = re.search(r"const DEFAULT_VENDORS = \{([^}]*)\}", source)
    assert said is not None
    portal = dict(re.findall(r"(\w+): '([^']+)'", said.group(1)))
    assert portal == DEFAULT_VENDORS


def test_the_portals_forms_offer_the_kinds_the_api_knows_from_its_openapi_document():
    """The portal keeps no list of accelerator kinds: its build reads them from the API's OpenAPI document (the
    ``kind`` examples of a job's and a node's accelerator), which are the kinds the domain knows."""
    import re

    from itl_accelerator.domain.accelerators import KNOWN_KINDS

    root = Path(__file__).resolve().parents[2]
    schemas = json.loads((root / "docs" / "openapi.json").read_text())["components"]["schemas"]
    for model in ("JobAccelerator", "NodeAccelerator"):
        assert schemas[model]["properties"]["kind"]["examples"] == list(KNOWN_KINDS.values()), model
    build = (root / "portal" / "build.mjs").read_text()
    assert "docs/openapi.json" in build and "JobAccelerator?.properties?.kind?.examples" in build
    for source in sorted((root / "portal" / "src").rglob("*.js")):
        assert not re.search(r"\[\s*'GPU',\s*'TPU'", source.read_text()), f"{source.name} keeps its own kinds"
