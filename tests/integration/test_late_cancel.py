"""A cancel that reaches a job after it already ended on the DGX Platform (issue 14, item 2). No job tracker runs in
this module, as in AWS between two of its checks (it may look only every 10 minutes): the provider learns of the
end through the cancel itself. The platform's outcome and end time are the truth — the job keeps them, its cost is
its real run, and the cancel's operation ends Failed, saying why."""

from __future__ import annotations

from typing import Any

import pytest

from itl_accelerator.services.workflows.job_steps import epoch
from tests.integration.instance_helpers import node_counters, relative, wait_for
from tests.integration.test_jobs import job_body, jobs_path, sim, sim_jobs_of, wait_job

# no `schedules` fixture here: nothing but the cancel tells the provider that a job ended


@pytest.fixture
def node(admin: Any, sub: str) -> str:
    from tests.conftest import SEED_NODE, nodes_path

    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    return nodes_path(sub, name="dgx-1")


def _ended_on_platform(dgx: Any, sub: str) -> dict[str, Any]:
    return wait_for(
        lambda: next((j for j in sim_jobs_of(dgx, sub) if j["status"] == "Succeeded"), None),
        what="the job to end on the DGX Platform",
    )


@pytest.mark.parametrize("faults", [0, 2], ids=["healthy", "platform-500s"])
def test_a_cancel_after_the_job_ended_keeps_the_platforms_outcome_and_bills_its_run(admin, sub, node, aws, dgx,
                                                                                  faults):  # fmt: skip
    # Given a 1-GPU job that ran 1 s and succeeded on the DGX Platform, which the provider has not heard yet
    assert admin.put(jobs_path(sub, "j"), json=job_body(workload=sim(seconds=1))).status_code == 201
    started = epoch(wait_job(admin, jobs_path(sub, "j"), ("Running",))["properties"]["startedAt"])
    platform = _ended_on_platform(dgx, sub)
    # When its submitter cancels it (with the platform answering its first calls 500 when `faults`)
    dgx.config.burst_5xx = faults
    canceled = admin.post(jobs_path(sub, "j") + "/cancel")
    assert canceled.status_code == 202
    done = wait_job(admin, jobs_path(sub, "j"))
    # Then the job keeps the platform's outcome, exit code and end time, and is billed for its run only
    props = done["properties"]
    assert props["status"] == "Succeeded" and "exit code 0" in props["statusReason"], props
    assert "before the cancel" in props["statusReason"]
    ended = epoch(platform["endedAt"])
    assert int(epoch(props["endedAt"])) == int(ended)
    assert props["gpuSeconds"] == max(0, int(ended) - int(started))
    assert props["gpuSeconds"] <= 3
    # And the cancel's operation ended Failed, saying the job had already finished; the job's own Succeeded
    cancel = admin.get(relative(canceled.headers["Azure-AsyncOperation"])).json()
    assert cancel["status"] == "Failed" and cancel["error"]["code"] == "JobAlreadyFinished"
    assert admin.get(relative(canceled.headers["Location"])).status_code == 409
    assert node_counters(aws, sub)["gpuAllocated"] == 0


def test_a_cancel_that_stops_a_running_job_bills_until_the_platform_stopped_it(admin, sub, node, dgx):
    assert admin.put(jobs_path(sub, "j"), json=job_body(workload=sim(forever=True))).status_code == 201
    wait_job(admin, jobs_path(sub, "j"), ("Running",))
    assert admin.post(jobs_path(sub, "j") + "/cancel").status_code == 202
    done = wait_job(admin, jobs_path(sub, "j"))
    (platform,) = sim_jobs_of(dgx, sub)
    assert done["properties"]["status"] == platform["status"] == "Canceled"
    assert int(epoch(done["properties"]["endedAt"])) == int(epoch(platform["endedAt"]))
