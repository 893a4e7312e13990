"""The DGX contract (docs/dgx-platform.openapi.yaml) bounds both sides: every path the client calls and every
path the simulator serves is in it, and the simulator serves all of it."""

from __future__ import annotations

import inspect
import re

import yaml

from itl_accelerator.dgx import client as client_module
from itl_local.dgx_simulator import DgxSimulator
from tests.conftest import REPO_ROOT

CONTRACT = yaml.safe_load((REPO_ROOT / "docs" / "dgx-platform.openapi.yaml").read_text())


def _normalise(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def contract_operations() -> set[tuple[str, str]]:
    ops = set()
    for path, item in CONTRACT["paths"].items():
        for method in item:
            if method in ("get", "post", "put", "patch", "delete"):
                ops.add((method.upper(), _normalise(path)))
    return ops


def test_simulator_serves_exactly_the_contract():
    served = set()
    for route in DgxSimulator().app.routes:
        if route.path.startswith("/v1/"):
            for method in route.methods or ():
                if method != "HEAD":
                    served.add((method, _normalise(route.path)))
    assert served == contract_operations()


def test_client_calls_only_contract_paths():
    source = inspect.getsource(client_module)
    calls = re.findall(r'self\._call\("(\w+)", f?"([^"]+)"', source)
    assert calls, "no calls found"
    for method, path in calls:
        assert (method, _normalise(path)) in contract_operations(), (method, path)


def _request_schema(path: str) -> dict:
    """The JSON schema of ``POST path``'s body in the contract, its ``$ref``s resolvable (components kept beside)."""
    schema = CONTRACT["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
    return {**schema, "components": CONTRACT["components"]}


def _sent_bodies(call) -> list[dict]:
    """The JSON bodies a client call sent (to a mock platform that answers as the simulator would)."""
    import json as json_module

    import httpx

    from itl_accelerator.dgx.client import DgxPlatformClient

    bodies: list[dict] = []

    def platform(request: httpx.Request) -> httpx.Response:
        body = json_module.loads(request.content)
        bodies.append(body)
        status = "Provisioning" if request.url.path == "/v1/instances" else "Queued"
        answer = {"id": "dgx-1", "status": status, "gpus": 1, "memoryGb": 1, "logsUrl": "http://dgx/l", **body}
        return httpx.Response(201, json={**answer, "endpoint": None, "error": None})

    http = httpx.Client(base_url="http://dgx", transport=httpx.MockTransport(platform))
    call(DgxPlatformClient("http://dgx", "k", attempts=1, http=http))
    return bodies


def test_the_request_bodies_the_client_sends_are_the_contracts():
    """Accelerator kinds (issue 29): the node's devices go with every instance and job, as the contract says them -
    a TPU job's body validates, and so does a GPU's without a model."""
    import jsonschema

    tpu = {"kind": "TPU", "vendor": "Google", "model": "v5e"}
    instance = _sent_bodies(
        lambda c: c.create_instance(
            idempotency_key="op-1", name="i", node_id="n", model="llama3", devices=1, memory_gb=80,
            accelerator={"kind": "GPU", "vendor": "NVIDIA"},
        )
    )  # fmt: skip
    job = _sent_bodies(
        lambda c: c.submit_job(
            idempotency_key="op-2", name="j", node_id="n", devices=8, memory_gb=0,
            workload={"image": "gcr.io/x/train:1", "command": [], "env": {}}, max_duration_seconds=60, accelerator=tpu,
        )
    )  # fmt: skip
    jsonschema.validate(instance[0], _request_schema("/v1/instances"))
    jsonschema.validate(job[0], _request_schema("/v1/jobs"))
    assert job[0]["accelerator"] == tpu and instance[0]["accelerator"]["kind"] == "GPU"


def test_the_simulator_refuses_an_ollama_instance_on_a_tpu_as_a_real_platform_would():
    from starlette.testclient import TestClient

    with TestClient(DgxSimulator().app) as platform:
        body = {"name": "i", "nodeId": "n", "model": "llama3", "gpus": 1, "memoryGb": 16}
        refused = platform.post(
            "/v1/instances",
            json={**body, "accelerator": {"kind": "TPU", "vendor": "Google", "model": "v5e"}},
            headers={"Idempotency-Key": "k1", "Authorization": "Bearer "},
        )
        on_amd = platform.post(
            "/v1/instances",
            json={**body, "accelerator": {"kind": "GPU", "vendor": "AMD", "model": "MI300X"}},
            headers={"Idempotency-Key": "k2", "Authorization": "Bearer "},
        )
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "AcceleratorNotSupported"
    assert on_amd.status_code == 201 and on_amd.json()["accelerator"]["vendor"] == "AMD"
