"""GPU quotas through the API: operators set them, everyone in the subscription reads them and their usages, an
instance past a quota is 409 QuotaExceeded (decided in the reservation's transaction: a race of creates never passes
the limit), a job that only a full quota holds back says so and runs once it frees, and a job past every quota that
could hold it fails at once."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.conftest import ADMIN, CONSUMER, node_body, nodes_path
from tests.integration.instance_helpers import instances_path, node_counters, wait_for, wait_state
from tests.integration.test_bad_input import assert_refused
from tests.integration.test_jobs import job_body, jobs_path, sim, wait_job

pytestmark = pytest.mark.usefixtures("schedules")  # the job tracker ends the jobs the simulator ran

LOCATION = "us-east-1"


def quota_path(sub: str, name: str | None = None, location: str = LOCATION) -> str:
    base = f"/subscriptions/{sub}/providers/ITL.Accelerator/locations/{location}/quotas"
    return f"{base}/{name}" if name else base


def usages_path(sub: str, location: str = LOCATION) -> str:
    return f"/subscriptions/{sub}/providers/ITL.Accelerator/locations/{location}/usages"


def quota_body(value: int) -> dict[str, Any]:
    return {"properties": {"limit": {"limitObjectType": "LimitValue", "value": value}}}


def usage_of(caller: Any, sub: str, name: str = "gpus") -> dict[str, Any]:
    response = caller.get(usages_path(sub))
    assert response.status_code == 200, response.text
    return next(u for u in response.json()["value"] if u["name"]["value"] == name)


def test_operators_set_quotas_everyone_in_the_subscription_reads_them(admin, caller, sub):
    consumer = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="ann")
    # Before any limit: the usages say none is set, and the quota itself is not there
    assert usage_of(consumer, sub) == {"name": {"value": "gpus", "localizedValue": "GPUs"}, "currentValue": 0,
                                       "limit": -1, "unit": "Count"}  # fmt: skip
    assert_refused(consumer.get(quota_path(sub, "gpus")), 404, "ResourceNotFound")
    # A consumer may not set one (403, audited); an operator may (201, then 200 for a change, idempotent)
    assert_refused(consumer.put(quota_path(sub, "gpus"), json=quota_body(8)), 403, "AuthorizationFailed")
    created = admin.put(quota_path(sub, "gpus"), json=quota_body(8))
    assert created.status_code == 201, created.text
    quota = created.json()
    assert quota["name"] == "gpus" and quota["type"] == "ITL.Accelerator/locations/quotas"
    assert quota["properties"]["limit"] == {"limitObjectType": "LimitValue", "value": 8}
    assert quota["properties"]["currentValue"] == 0 and quota["etag"]
    again = admin.put(quota_path(sub, "gpus"), json=quota_body(8))
    assert again.status_code == 200 and again.json()["etag"] == quota["etag"]
    stale = admin.put(quota_path(sub, "gpus"), json=quota_body(4), headers={"If-Match": '"stale"'})
    assert_refused(stale, 412, "PreconditionFailed")
    # Everyone in the subscription reads it, and the list
    assert consumer.get(quota_path(sub, "GPUS")).json()["properties"]["limit"]["value"] == 8
    assert [q["name"] for q in consumer.get(quota_path(sub)).json()["value"]] == ["gpus"]
    assert usage_of(consumer, sub)["limit"] == 8
    # A name that is no accelerator quota ({kind}s or {kind}s-{model}) is 400
    for wrong in ("gpu", "9pus", "gpus-", "tpus_v5e"):
        assert_refused(admin.put(quota_path(sub, wrong), json=quota_body(1)), 400, "InvalidParameter")
    # Removing it: 200, then 204
    assert admin.delete(quota_path(sub, "gpus")).status_code == 200
    assert admin.delete(quota_path(sub, "gpus")).status_code == 204
    assert usage_of(consumer, sub)["limit"] == -1


def test_fifty_instances_racing_for_a_quota_of_eight_gpus_get_exactly_eight(admin, make_token, gateway_url, sub, aws):
    import httpx

    for name in ("q1", "q2", "q3"):
        assert admin.put(nodes_path(sub, name=name), json=node_body()).status_code == 201
    assert admin.put(quota_path(sub, "gpus"), json=quota_body(8)).status_code == 201
    token = make_token("admin-1", [ADMIN], [f"/subscriptions/{sub}"])
    barrier = threading.Barrier(10)

    def create(i: int) -> tuple[int, str]:
        with httpx.Client(base_url=gateway_url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            if i < 10:
                barrier.wait()
            body = {"properties": {"model": "mistral:7b", "gpus": 1, "memoryGb": 80}}
            response = http.put(instances_path(sub, f"q{1 + i % 3}", f"inst-{i}"), json=body)
            return response.status_code, (response.json().get("error") or {}).get("code", "")

    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(create, range(50)))
    accepted = [a for a in answers if a[0] in (201, 202)]
    refused = [a for a in answers if a[0] == 409]
    assert len(accepted) == 8, answers
    assert len(refused) == 42 and {code for _, code in refused} == {"QuotaExceeded"}, answers
    assert sum(node_counters(aws, sub, node=n)["gpuAllocated"] for n in ("q1", "q2", "q3")) == 8
    assert usage_of(admin, sub)["currentValue"] == 8


def test_an_instance_past_a_quota_is_409_naming_the_quota_and_nothing_is_held(admin, sub, aws):
    assert admin.put(nodes_path(sub, name="dgx-1"), json=node_body()).status_code == 201
    assert admin.put(quota_path(sub, "gpus-h100"), json=quota_body(2)).status_code == 201
    body = {"properties": {"model": "mistral:7b", "gpus": 4, "memoryGb": 320}}
    error = assert_refused(admin.put(instances_path(sub, name="big"), json=body), 409, "QuotaExceeded")
    assert "gpus-h100" in error["message"] and "allows 2 GPUs" in error["message"], error
    assert node_counters(aws, sub)["gpuAllocated"] == 0
    assert admin.get(instances_path(sub, name="big")).status_code == 404


def test_a_job_held_back_by_a_full_quota_says_so_and_runs_when_it_frees(admin, sub, dgx):
    assert admin.put(nodes_path(sub, name="dgx-1"), json=node_body()).status_code == 201
    assert admin.put(quota_path(sub, "gpus"), json=quota_body(2)).status_code == 201
    # Given an instance holding the whole quota (the node has room for more)
    body = {"properties": {"model": "mistral:7b", "gpus": 2, "memoryGb": 160}}
    assert admin.put(instances_path(sub, name="holder"), json=body).status_code == 201
    wait_state(admin, instances_path(sub, name="holder"), ("Succeeded",))
    # When a job needing 2 GPUs is submitted, it waits, saying the quota holds it back
    assert admin.put(jobs_path(sub, "waits"), json=job_body(2, 160, workload=sim(seconds=0.5))).status_code == 201
    waiting = wait_for(
        lambda: (
            (admin.get(jobs_path(sub, "waits")).json()["properties"].get("statusReason") or "").startswith(
                "Waiting for quota"
            )
            and admin.get(jobs_path(sub, "waits")).json()
        ),
        what="the job waiting for quota",
    )
    assert waiting["properties"]["status"] == "Pending"
    assert "'gpus'" in waiting["properties"]["statusReason"], waiting
    # Then once the instance is deleted (the quota frees), the job runs to its end
    assert admin.delete(instances_path(sub, name="holder")).status_code == 202
    done = wait_job(admin, jobs_path(sub, "waits"), timeout=90)
    assert done["properties"]["status"] == "Succeeded", done


def test_a_job_past_every_quota_that_could_hold_it_fails_at_once_saying_why(admin, sub):
    assert admin.put(nodes_path(sub, name="dgx-1"), json=node_body()).status_code == 201
    assert admin.put(quota_path(sub, "gpus"), json=quota_body(2)).status_code == 201
    assert admin.put(jobs_path(sub, "huge"), json=job_body(4, 320)).status_code == 201
    done = wait_job(admin, jobs_path(sub, "huge"))
    assert done["properties"]["status"] == "Failed"
    assert "quota 'gpus'" in done["properties"]["statusReason"] and "allows 2" in done["properties"]["statusReason"]


def test_a_quota_lowered_to_zero_fails_the_waiting_job_at_once_and_a_look_alike_is_flagged(admin, sub):
    """Issue 26: a limit lowered to 0 left a job waiting for days; the quota's change now reaches the waiting jobs
    through the table's stream (the fleet-changes function) within seconds. And a model quota whose name no node's
    model maps to is answered as not applicable."""
    cordoned = node_body()
    cordoned["properties"]["availability"] = "Cordoned"
    assert admin.put(nodes_path(sub, name="dgx-1"), json=cordoned).status_code == 201
    assert admin.put(jobs_path(sub, "waits"), json=job_body(1, 80)).status_code == 201
    wait_for(
        lambda: (
            "Waiting for capacity"
            in (admin.get(jobs_path(sub, "waits")).json()["properties"].get("statusReason") or "")
        ),
        what="the job waiting for capacity",
    )
    assert admin.put(quota_path(sub, "gpus"), json=quota_body(0)).status_code == 201
    done = wait_job(admin, jobs_path(sub, "waits"), timeout=30)  # not its pending timeout, days away
    assert done["properties"]["status"] == "Failed", done
    assert "quota 'gpus'" in done["properties"]["statusReason"] and "allows 0" in done["properties"]["statusReason"]
    model = admin.put(quota_path(sub, "gpus-h100-80gb"), json=quota_body(4))
    assert model.status_code == 201 and model.json()["properties"]["isQuotaApplicable"] is False
    assert admin.get(quota_path(sub, "gpus-h100")).status_code == 404  # ... and the real one is not set
