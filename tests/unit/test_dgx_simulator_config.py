"""The DGX simulator's faults are set with ``POST /_simulator/config``. A value of the wrong type once answered 200
and then broke every later call of the platform with a 500 (``"error_rate": "lots"`` compared with a float); now
such a value, or one out of range, is refused with 400 ``InvalidConfig`` naming the field, and nothing is set."""

from __future__ import annotations

import uuid

import pytest
from starlette.testclient import TestClient

from itl_local.dgx_simulator import DgxSimulator, SimulatorConfig


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"error_rate": "lots"}, "error_rate"),
        ({"error_rate": 5}, "error_rate"),
        ({"provisioning_seconds": -3}, "provisioning_seconds"),
        ({"hold_jobs": "yes"}, "hold_jobs"),
        ({"burst_5xx": True}, "burst_5xx"),
        ({"job_seconds": 1, "callback_drop_rate": -0.5}, "callback_drop_rate"),  # the good one is not set either
        ({"no_such_knob": 1}, "no_such_knob"),
    ],
)
def test_a_wrong_or_out_of_range_value_is_400_and_changes_nothing(fields: dict[str, object], named: str) -> None:
    simulator = DgxSimulator(SimulatorConfig())
    with TestClient(simulator.app) as client:
        before = client.post("/_simulator/config", json={}).json()

        answer = client.post("/_simulator/config", json=fields)

        assert answer.status_code == 400 and answer.json()["error"]["code"] == "InvalidConfig"
        assert named in answer.json()["error"]["message"]
        assert client.post("/_simulator/config", json={}).json() == before
        created = client.post(
            "/v1/instances",
            json={"name": "llama", "nodeId": "node-1", "model": "llama3:8b", "gpus": 1, "memoryGb": 80},
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        assert created.status_code in (200, 201, 202), created.text


def test_numbers_in_range_are_set() -> None:
    simulator = DgxSimulator(SimulatorConfig())
    with TestClient(simulator.app) as client:
        answer = client.post("/_simulator/config", json={"error_rate": 1, "provisioning_seconds": 0.5, "seed": 7})

        assert answer.status_code == 200
        assert (answer.json()["error_rate"], answer.json()["provisioning_seconds"]) == (1.0, 0.5)
