"""The DGX simulator's job log keeps every line it gave out: a line's number and text never change once read, so a
client that follows the log by line number (``after``) gets each line once, the exit line included. A held job
ended by its release once lost a training step (its end was kept in whole seconds), and the exit line took that
step's number: a follower that had read the step never saw the exit."""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any

from starlette.testclient import TestClient

from itl_local.dgx_simulator import DgxSimulator, SimulatorConfig


def _log(client: TestClient, job_id: str, after: int = 0) -> dict[str, Any]:
    response = client.get(f"/v1/jobs/{job_id}/logs", params={"after": after}, headers={"Accept": "application/json"})
    assert response.status_code == 200, response.text
    return dict(response.json())


def _submit_held(client: TestClient, simulator: DgxSimulator) -> str:
    """Set ``hold_jobs`` and submit a 0.2 s job; its id."""
    simulator.config.hold_jobs = True
    created = client.post(
        "/v1/jobs",
        json={"name": "train", "nodeId": "node-1", "gpus": 1, "memoryGb": 80, "image": "nvcr.io/nvidia/pytorch"},
        headers={"Idempotency-Key": str(uuid.uuid4())},
    )
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def test_a_held_jobs_log_keeps_the_lines_read_while_it_ran_and_ends_with_the_exit_line():
    simulator = DgxSimulator(SimulatorConfig(job_seconds=0.2, provisioning_seconds=0.1))
    with TestClient(simulator.app) as client:
        job_id = _submit_held(client, simulator)
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


def test_a_held_job_ends_when_let_go_even_if_nobody_read_it_while_held():
    """A job due to end while ``hold_jobs`` is set ends when the hold is let go, not back when it was due — also
    when nothing read it during the hold (the tracker may not have polled it on a busy machine). It once ended at
    its last read, which could fall before the provider's own start, billing 0 GPU-seconds."""
    simulator = DgxSimulator(SimulatorConfig(job_seconds=0.2, provisioning_seconds=0.1))
    with TestClient(simulator.app) as client:
        job_id = _submit_held(client, simulator)
        # Held, unread, well past its 0.2 s, then let go
        due = time.monotonic() + 1.5
        while time.monotonic() < due:
            time.sleep(0.05)
        simulator.config.hold_jobs = False
        job = client.get(f"/v1/jobs/{job_id}").json()
    started, ended = (datetime.fromisoformat(job[k].replace("Z", "+00:00")) for k in ("startedAt", "endedAt"))
    assert job["status"] == "Succeeded"
    assert (ended - started).total_seconds() >= 1  # it ran until let go (whole seconds), not its 0.2 s
