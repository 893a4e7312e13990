"""The DGX client's batch reads against the simulator (the contract's ``POST /v1/jobs:batchGet`` and
``/v1/instances:batchGet``): what the platform knows comes back by id, what it does not is absent (never an error),
more than 100 ids take several calls, and a batch out of the contract's bounds is the contract's 400."""

from __future__ import annotations

import uuid

import pytest
from starlette.testclient import TestClient

from itl_accelerator.dgx.client import BATCH_IDS, DgxPlatformClient
from itl_accelerator.dgx.errors import DgxPermanentError
from itl_local.dgx_simulator import DgxSimulator, SimulatorConfig


@pytest.fixture
def platform():
    simulator = DgxSimulator(SimulatorConfig(job_seconds=600, provisioning_seconds=0.0))
    with TestClient(simulator.app, base_url="http://dgx") as http:
        calls: list[str] = []
        http.event_hooks["request"].append(lambda request: calls.append(request.url.path))
        yield DgxPlatformClient("http://dgx", "", attempts=1, http=http), calls, http


def test_jobs_read_in_batches_known_by_id_unknown_absent(platform):
    client, calls, _ = platform
    made = [
        client.submit_job(
            idempotency_key=str(uuid.uuid4()),
            name=f"j{n}",
            node_id="node-1",
            devices=1,
            memory_gb=80,
            workload={"image": "nvcr.io/nvidia/pytorch:24.10-py3", "command": [], "env": {}},
            max_duration_seconds=3600,
        ).id
        for n in range(BATCH_IDS + 5)
    ]
    calls.clear()
    found = client.get_jobs([*made, "dgxj-unknown", made[0]])
    assert set(found) == set(made) and all(found[i].id == i for i in made)
    assert calls == ["/v1/jobs:batchGet", "/v1/jobs:batchGet"]  # 106 distinct ids: two calls of at most 100


def test_instances_read_in_one_call_lost_ones_absent(platform):
    client, calls, _ = platform
    made = [
        client.create_instance(
            idempotency_key=str(uuid.uuid4()),
            name=f"i{n}",
            node_id="node-1",
            model="mistral:7b",
            devices=1,
            memory_gb=80,
        ).id
        for n in range(3)
    ]
    client.delete_instance(made[1])
    calls.clear()
    found = client.get_instances([*made, "dgxi-unknown"])
    assert made[0] in found and made[2] in found and "dgxi-unknown" not in found
    assert calls == ["/v1/instances:batchGet"]
    assert client.get_instances([]) == {} and calls == ["/v1/instances:batchGet"]  # nothing to ask: no call


@pytest.mark.parametrize("body", [{"ids": []}, {"ids": [str(n) for n in range(101)]}, {"ids": [1]}, {}, []])
def test_a_batch_outside_the_contract_is_refused(platform, body):
    client, _, http = platform
    response = http.post("/v1/jobs:batchGet", json=body)
    assert response.status_code == 400 and response.json()["error"]["code"] == "InvalidRequest"
    with pytest.raises(DgxPermanentError):
        client._call("POST", "/v1/instances:batchGet", json=body)
