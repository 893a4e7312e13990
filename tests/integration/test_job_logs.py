"""Given a job running on the DGX simulator, when its log is read through the API (``GET .../sparkJobs/{name}/logs``),
then whoever may read the job gets its lines — proxied with the provider's key, paged by line, followed while it
runs until the job ends — and anyone else gets the 404 a missing job gets; bad parameters are 400, a platform that
does not answer 503."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ADMIN, CONSUMER, SEED_NODE, SUPPLIER, nodes_path
from tests.integration.instance_helpers import relative, wait_for
from tests.integration.test_jobs import jobs_path, sim, wait_job

pytestmark = pytest.mark.usefixtures("schedules")


@pytest.fixture
def people(caller: Any, sub: str) -> dict[str, Any]:
    scope = [f"/subscriptions/{sub}"]
    return {
        "admin": caller([ADMIN], scope, subject="admin-1"),
        "bob": caller([CONSUMER], scope, subject="bob"),
        "carol": caller([CONSUMER], scope, subject="carol"),
        "owner": caller([SUPPLIER], scope, subject="owner-123"),  # SEED_NODE's owner
        "other-supplier": caller([SUPPLIER], scope, subject="owner-999"),
    }


def submit(caller: Any, sub: str, name: str, seconds: float) -> str:
    body = {"properties": {"requestedGpus": 1, "requestedMemoryGb": 80, "workload": sim(seconds)}}
    assert caller.put(jobs_path(sub, name), json=body).status_code == 201
    return jobs_path(sub, name) + "/logs"


def follow(caller: Any, path: str, timeout: float = 60) -> tuple[list[dict[str, Any]], int]:
    """Every line of the log, following ``nextLink`` until the log is complete; and how many pages it took."""
    lines: list[dict[str, Any]] = []
    state = {"next": path, "pages": 0}

    def step() -> bool:
        response = caller.get(state["next"])
        assert response.status_code == 200, response.text
        page = response.json()
        state["pages"] += 1
        lines.extend(page["value"])
        if page["complete"]:
            assert page["nextLink"] is None
            return True
        state["next"] = relative(page["nextLink"])
        return False

    wait_for(step, timeout=timeout, interval=0.3, what=f"the log of {path} to be complete")
    return lines, state["pages"]


def test_a_running_jobs_log_is_followed_to_its_end(admin, sub, dgx, people):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    # The simulator holds the job Running until the test lets it end (the dgx fixture restores the setting), so
    # "while it runs" is a condition, not a window of seconds a busy machine can miss
    dgx.config.hold_jobs = True
    logs = submit(people["bob"], sub, "train-1", seconds=1)
    # While it runs: lines so far (a training step among them), and a nextLink to the lines that follow
    wait_job(people["bob"], jobs_path(sub, "train-1"), ("Running",))

    def with_a_step() -> Any:
        page = people["bob"].get(logs).json()
        return any(line["text"].startswith("step ") for line in page["value"]) and page

    first = wait_for(with_a_step, timeout=60, what="the first training step")
    assert first["jobStatus"] == "Running" and first["complete"] is False and first["nextLink"]
    assert "%24skipToken=" in first["nextLink"] and "/sparkJobs/train-1/logs" in first["nextLink"]
    # Following its nextLink while the job still runs: an incomplete page that links on
    second = people["bob"].get(relative(first["nextLink"])).json()
    assert second["jobStatus"] == "Running" and second["complete"] is False and second["nextLink"]
    # When the job ends, following the nextLinks gives every other line once, in order, to the container's exit
    dgx.config.hold_jobs = False
    rest, _ = follow(people["bob"], relative(second["nextLink"]))
    lines = first["value"] + second["value"] + rest
    assert [line["lineNumber"] for line in lines] == list(range(1, len(lines) + 1))
    assert lines[0]["text"].startswith("[dgx] job ")
    assert lines[-1]["text"].endswith("exited with code 0: job Succeeded")
    assert all(line["time"].endswith("Z") for line in lines)


def test_whoever_may_read_the_job_reads_its_log_and_nobody_else(admin, sub, dgx, people):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    logs = submit(people["bob"], sub, "train-2", seconds=0.5)
    wait_job(people["bob"], jobs_path(sub, "train-2"))
    for who in ("bob", "admin", "owner"):  # its submitter, admins, the supplier of the node it ran on
        response = people[who].get(logs)
        assert response.status_code == 200, (who, response.text)
        assert response.json()["complete"] is True and response.json()["value"]
    for who in ("carol", "other-supplier"):  # another consumer, another supplier: as if it did not exist
        response = people[who].get(logs)
        assert response.status_code == 404, (who, response.text)
        assert response.json()["error"]["code"] == "ResourceNotFound"
        assert response.json() == people[who].get(jobs_path(sub, "train-2")).json() | {
            "error": response.json()["error"]
        }
    assert people["bob"].get(jobs_path(sub, "nope") + "/logs").status_code == 404


def test_tail_since_and_pages(admin, sub, dgx, people):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    logs = submit(admin, sub, "train-3", seconds=3)
    wait_job(admin, jobs_path(sub, "train-3"))
    everything, _ = follow(admin, logs)
    assert len(everything) >= 5
    # tail: the last N lines, then the log is complete
    tail = admin.get(logs, params={"tail": "2"}).json()
    assert tail["value"] == everything[-2:] and tail["complete"] is True and tail["nextLink"] is None
    # $top: pages of N lines, chained by nextLink (which drops tail and keeps $top)
    page = admin.get(logs, params={"$top": "2", "tail": "4"}).json()
    assert page["value"] == everything[-4:-2] and page["complete"] is False
    assert "tail=" not in page["nextLink"] and "%24top=2" in page["nextLink"]
    rest = admin.get(relative(page["nextLink"])).json()
    assert rest["value"] == everything[-2:] and rest["complete"] is True
    # since: the lines written at or after a time
    later = admin.get(logs, params={"since": everything[-1]["time"]}).json()
    assert later["value"] and later["value"][-1] == everything[-1]
    assert admin.get(logs, params={"since": "2999-01-01T00:00:00Z"}).json()["value"] == []


@pytest.mark.parametrize(
    ("params", "target"),
    [
        ({"tail": "0"}, "tail"),
        ({"tail": "10001"}, "tail"),
        ({"tail": "ten"}, "tail"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-12-01T10:00:00"}, "since"),  # no zone
        ({"$skipToken": "abc"}, "$skipToken"),
        ({"$top": "0"}, "query.$top"),  # as every route names a FastAPI-checked query parameter
        ({"lines": "5"}, "lines"),  # not a parameter of the route
    ],
)
def test_bad_parameters_are_400_naming_them(admin, sub, params, target):
    response = admin.get(jobs_path(sub, "any") + "/logs", params=params)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "InvalidParameter" and error["target"] == target
    assert "request content" not in error["message"]  # a parameter is named as one, never as the body
    assert all(detail["code"] == "InvalidParameter" for detail in error.get("details", []))


def test_a_job_waiting_for_capacity_has_no_lines_yet(admin, sub, dgx, people):
    # a node that could hold the job but takes no work (cordoned): the job waits (Pending), nothing on the platform
    cordoned = {**SEED_NODE, "properties": {**SEED_NODE["properties"], "availability": "Cordoned"}}
    assert admin.post(nodes_path(sub), json=cordoned).status_code == 201
    logs = submit(admin, sub, "waiting", seconds=1)
    waiting = wait_for(
        lambda: (
            (job := admin.get(jobs_path(sub, "waiting")).json())["properties"]["statusReason"].startswith(
                "Waiting for capacity"
            )
            and job
        ),
        timeout=30,
        what="the job to wait for capacity",
    )
    assert waiting["properties"]["status"] == "Pending", waiting
    page = admin.get(logs).json()
    assert page == {"value": [], "nextLink": page["nextLink"], "jobStatus": "Pending", "complete": False}
    assert page["nextLink"].endswith("%24skipToken=0")


def test_a_platform_that_does_not_answer_is_503(admin, sub, dgx, people):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    logs = submit(admin, sub, "train-4", seconds=0.5)
    wait_job(admin, jobs_path(sub, "train-4"))
    dgx.config.error_rate = 1.0  # every DGX request answers 503
    response = admin.get(logs)
    dgx.config.error_rate = 0.0
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "ServiceUnavailable" and response.headers["Retry-After"] == "5"
