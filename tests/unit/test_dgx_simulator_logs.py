"""The DGX simulator's job log keeps every line it gave out: a line's number and text never change once read, so a
client that follows the log by line number (``after``) gets each line once, the exit line included. A held job
ended by its release once lost a training step (its end was kept in whole seconds), and the exit line took that
step's number: a follower that had read the step never saw the exit."""

from __future__ import annotations

import time
import uuid
from typing import Any

from starlette.testclient import TestClient

from itl_local.dgx_simulator import DgxSimulator, SimulatorConfig


def _log(client: TestClient, job_id: str, after: int = 0) -> dict[str, Any]:
    response = client.get(f"/v1/jobs/{job_id}/logs", params={"after": after}, headers={"Accept": "application/json"})
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_a_held_jobs_log_keeps_the_lines_read_while_it_ran_and_ends_with_the_exit_line():
    simulator = DgxSimulator(SimulatorConfig(job_seconds=0.2, provisioning_seconds=0.1))
    with TestClient(simulator.app) as client:
        simulator.config.hold_jobs = True
        created = client.post(
            "/v1/jobs",
            json={"name": "train", "nodeId": "node-1", "gpus": 1, "memoryGb": 80, "image": "nvcr.io/nvidia/pytorch"},
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        # Read while it runs, held past its 0.2 s, until a training step shows (a second after it started)
        deadline = time.monotonic() + 30
        while not (page := _log(client, job_id))["lines"][-1]["text"].startswith("step "):
            assert time.monotonic() < deadline, page
            time.sleep(0.05)
        assert page["ended"] is False and page["status"] == "Running"
        seen = page["lines"]
        # When the hold is let go, the job ends; read from the start, and from the last line read (as a follower)
        simulator.config.hold_jobs = False
        whole = _log(client, job_id)
        rest = _log(client, job_id, after=seen[-1]["number"])
    assert whole["ended"] is True and whole["status"] == "Succeeded"
    assert whole["lines"][: len(seen)] == seen  # every line read while it ran, with its number and text
    assert [line["number"] for line in whole["lines"]] == list(range(1, len(whole["lines"]) + 1))
    assert rest["lines"] == whole["lines"][len(seen) :]
    assert rest["lines"][-1]["text"] == "[dgx] container exited with code 0: job Succeeded"
