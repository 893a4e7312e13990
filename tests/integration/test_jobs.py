"""sparkJobs end to end: API Gateway (emulated from template.yaml), the real job lifecycle state machine (moto
executing statemachines/job_lifecycle.asl.json), the real step handlers, the job tracker and reconciler firing as
schedules, and the DGX Platform simulator."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import pytest

from itl_accelerator.services.workflows.job_steps import epoch
from tests.conftest import ADMIN, CONSUMER, SEED_NODE, SUPPLIER, TABLE, node_body, nodes_path
from tests.integration.instance_helpers import (
    SEED_INSTANCE,
    instances_path,
    node_counters,
    relative,
    wait_for,
    wait_for_progress,
    wait_gone,
    wait_state,
)
from tests.integration.test_bad_input import assert_refused

#: The seed's job request, verbatim.
SEED_JOB = {"name": "job-1", "status": "Pending", "requested_gpus": 4, "requested_memory_gb": 320}
FINAL = ("Succeeded", "Failed", "Canceled", "Preempted")
pytestmark = pytest.mark.usefixtures("schedules")


def jobs_path(sub: str, name: str | None = None, rg: str = "rg1") -> str:
    base = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/ITL.Accelerator/sparkJobs"
    return f"{base}/{name}" if name else base


def job_body(devices: int = 1, memory: int = 80, **props: Any) -> dict[str, Any]:
    return {"properties": {"requestedGpus": devices, "requestedMemoryGb": memory, **props}}


def sim(
    seconds: float | None = None, exit_code: int | None = None, forever: bool = False, exit_codes: str | None = None
) -> dict[str, Any]:
    """A workload the DGX simulator runs for ``seconds``, ending with ``exit_code`` (or never; ``exit_codes``: one
    per run of the job's name, "3,0")."""
    env = {}
    if seconds is not None:
        env["ITL_SIM_SECONDS"] = str(seconds)
    if exit_code is not None:
        env["ITL_SIM_EXIT_CODE"] = str(exit_code)
    if exit_codes is not None:
        env["ITL_SIM_EXIT_CODES"] = exit_codes
    if forever:
        env["ITL_SIM_FOREVER"] = "1"
    return {"image": "nvcr.io/nvidia/pytorch:24.10-py3", "command": ["python", "train.py"], "env": env}


def wait_job(caller: Any, path: str, statuses: tuple[str, ...] = FINAL, timeout: float = 60) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        response = caller.get(path)
        assert response.status_code == 200, response.text
        body = response.json()
        return body if body["properties"]["status"] in statuses else None

    return wait_for(check, timeout=timeout, interval=0.2, what=f"{path} to reach {statuses}")


def sim_jobs_of(dgx: Any, sub: str) -> list[dict[str, Any]]:
    with dgx.lock:
        return [
            dgx._public_job(dgx._refresh_job(j)) for j in dgx.jobs.values() if f"/subscriptions/{sub}/" in j["name"]
        ]


@pytest.fixture
def node(admin, sub):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    return nodes_path(sub, name="dgx-1")


# ------------------------------------------------------------------------------------------------ the seed's flow
def test_seed_job_runs_end_to_end_and_costs_its_gpu_seconds(admin, sub, node, aws, dgx):
    # Given the seed's job request, verbatim, on a node priced 2.5 USD per GPU-hour
    accepted = admin.post(jobs_path(sub), json=SEED_JOB)
    # Then it is accepted as a long-running operation, with the LRO headers and a status_url
    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    assert body["properties"]["status"] == "Pending" and body["properties"]["submittedBy"] == "admin-1"
    assert body["properties"]["provisioningState"] == "Accepted"
    assert body["status_url"] == accepted.headers["Azure-AsyncOperation"]
    assert "/operationResults/" in accepted.headers["Location"] and int(accepted.headers["Retry-After"]) >= 1
    assert body["properties"]["workload"]["image"].startswith("nvcr.io/")  # the default training workload
    # When it runs to its end
    done = wait_job(admin, jobs_path(sub, "job-1"))
    props = done["properties"]
    # Then it Succeeded on the node, its operation too, and the Location URL gives the job
    assert props["status"] == "Succeeded", props
    assert props["assignedNode"].endswith("/sparkNodes/dgx-1")
    assert props["startedAt"] < props["endedAt"]
    assert admin.get(relative(body["status_url"])).json()["status"] == "Succeeded"
    assert admin.get(relative(accepted.headers["Location"])).json()["properties"]["status"] == "Succeeded"
    # And it cost its GPU-seconds at the node's price, exactly, billed by the node's rule (60 s increments)
    seconds = props["gpuSeconds"] // 4
    # (billed until the platform's own end time, which it reports in whole seconds: the simulator runs it 2 s)
    assert props["gpuSeconds"] == 4 * seconds and 1 <= seconds <= 3
    assert props["billableGpuSeconds"] == 4 * 60
    assert props["cost"]["amount"] == "0.166667"  # 240 GPU-s * 2.5 / 3600 = 0.1666…, half up
    assert props["cost"]["currency"] == "USD"
    # And its GPUs are free again; the DGX job ran once
    assert node_counters(aws, sub) == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 0}
    assert [j["status"] for j in sim_jobs_of(dgx, sub)] == ["Succeeded"]


def test_seed_listing_by_submitter_is_exact_and_pages_are_full(caller, admin, sub, node):
    users = ["ann+ops@example.com", "ann.ops@example.com", "ann"]
    for user in users:
        me = caller([CONSUMER], [f"/subscriptions/{sub}"], subject=user)
        for i in range(3):
            assert (
                me.post(
                    jobs_path(sub), json={**SEED_JOB, "name": f"{user.split('@')[0].replace('+', '-')}-{i}"}
                ).status_code
                == 202
            )
    # When the seed's ?submitted_by= is asked for each, two at a time
    for user in users:
        names, url, pages = [], f"{jobs_path(sub)}?submitted_by={user.replace('+', '%2B')}&$top=2", 0
        while url:
            page = admin.get(url).json()
            pages += 1
            assert page["value"] or page["nextLink"] is None, "an empty page that still carries a nextLink"
            names += [j["name"] for j in page["value"]]
            assert all(j["properties"]["submittedBy"] == user for j in page["value"])
            url = relative(page["nextLink"]) if page["nextLink"] else None
        # Then exactly that user's three jobs come back, in full pages (2 + 1)
        assert len(names) == 3 and pages == 2, (user, names)
    # And the subscription-wide list holds all nine
    assert len(admin.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/sparkJobs").json()["value"]) == 9


# ------------------------------------------------------------------------------------------------ failures
def test_a_dgx_refusal_after_the_reservation_fails_the_job_and_releases_once(admin, sub, node, aws, dgx):
    # Given a workload the DGX Platform refuses at submission (an image it does not have)
    refused = {**sim(), "image": "registry.example.com/unknown-image:1"}
    assert admin.put(jobs_path(sub, "j"), json=job_body(2, 160, workload=refused)).status_code == 201
    done = wait_job(admin, jobs_path(sub, "j"))
    # Then it failed saying why, cost nothing, and its GPUs came back exactly once
    assert done["properties"]["status"] == "Failed"
    assert "ImageNotFound" in done["properties"]["statusReason"]
    assert done["properties"]["gpuSeconds"] == 0 and "cost" not in done["properties"]
    assert node_counters(aws, sub)["gpuAllocated"] == 0


def test_a_job_that_exits_non_zero_fails_with_its_exit_code(admin, sub, node, aws, dgx):
    # (3 s: billing starts when the submit's answer comes back, in whole seconds, so a 1 s job on a slow machine
    # could be billed 0 GPU-seconds and the check below would not say whether it is billed)
    assert admin.put(jobs_path(sub, "j"), json=job_body(workload=sim(seconds=3, exit_code=3))).status_code == 201
    done = wait_job(admin, jobs_path(sub, "j"))
    assert done["properties"]["status"] == "Failed"
    assert "exited with code 3" in done["properties"]["statusReason"]
    assert done["properties"]["gpuSeconds"] > 0  # it ran: it is billed for the time it ran
    assert node_counters(aws, sub)["gpuAllocated"] == 0


def test_a_job_retried_on_its_exit_code_runs_again_and_succeeds(admin, sub, node, aws, dgx):
    # Given a job retried on exit code 3 whose first run exits 3 and second 0
    strategy = {"attempts": 3, "evaluateOnExit": [{"onExitCode": "3", "action": "RETRY"}], "intervalSeconds": 1}
    body = job_body(workload=sim(seconds=2, exit_codes="3,0"), retryStrategy=strategy)
    created = admin.put(jobs_path(sub, "r"), json=body)
    assert created.status_code == 201, created.text
    assert created.json()["properties"]["retryStrategy"]["attempts"] == 3
    # When it runs through the real state machine
    done = wait_job(admin, jobs_path(sub, "r"))["properties"]
    # Then it Succeeded on its second attempt, each a platform job of its own, and it costs both
    assert done["status"] == "Succeeded", done["statusReason"]
    assert [(a["attempt"], a["status"], a.get("exitCode")) for a in done["attempts"]] == [
        (1, "Failed", 3),
        (2, "Succeeded", 0),
    ]
    assert [j["status"] for j in sim_jobs_of(dgx, sub)] == ["Failed", "Succeeded"]
    assert done["gpuSeconds"] == sum(a["gpuSeconds"] for a in done["attempts"]) > 0
    assert done["cost"]["amount"] == format(sum(Decimal(a["cost"]["amount"]) for a in done["attempts"]), "f")
    assert node_counters(aws, sub)["gpuAllocated"] == 0


def test_a_higher_priority_job_preempts_a_preemptible_one_which_stops_on_sigterm(caller, admin, sub, node, aws, dgx):
    # Given ann's preemptible priority-1 job holding the whole node, stopping 1 s after SIGTERM
    ann = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="ann")
    workload = {**sim(forever=True), "env": {"ITL_SIM_FOREVER": "1", "ITL_SIM_SIGTERM_SECONDS": "1"}}
    low = job_body(8, 640, workload=workload, priority=1, preemptible=True)
    assert ann.put(jobs_path(sub, "low"), json=low).status_code == 201
    wait_job(ann, jobs_path(sub, "low"), ("Running",))
    # When an admin submits a priority-9 job the node has no room for
    high = admin.put(jobs_path(sub, "high"), json=job_body(4, 320, workload=sim(seconds=1), priority=9))
    assert high.status_code == 201, high.text
    # Then ann's job ends Preempted, saying by which job and why, billed until the platform stopped it
    done = wait_job(ann, jobs_path(sub, "low"))["properties"]
    assert done["status"] == "Preempted" and done["provisioningState"] == "Canceled", done["statusReason"]
    assert "preemptedBy" not in done and "priority 9" in done["statusReason"]  # another user's job: admins see it
    assert admin.get(jobs_path(sub, "low")).json()["properties"]["preemptedBy"] == high.json()["id"]
    (platform,) = [j for j in sim_jobs_of(dgx, sub) if j["name"].endswith("/low")]
    assert platform["status"] == "Canceled" and done["endedAt"][:19] == platform["endedAt"][:19]
    assert done["gpuSeconds"] > 0
    # And the high job ran on the node it freed
    assert wait_job(admin, jobs_path(sub, "high"))["properties"]["status"] == "Succeeded"
    assert node_counters(aws, sub)["gpuAllocated"] == 0


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (job_body(16, 1280), "largest node"),
        (job_body(1, 80, gpuModel="B200"), "GPU model 'b200'"),
        ({**job_body(1, 80), "location": "westeurope"}, "location 'westeurope'"),
        (job_body(1, 200), "largest node"),  # more GPU memory than one GPU of the node carries
    ],
)
def test_a_job_no_node_could_ever_hold_fails_at_once_as_inadmissible(admin, sub, node, aws, body, why):
    assert admin.put(jobs_path(sub, "big"), json=body).status_code == 201
    done = wait_job(admin, jobs_path(sub, "big"), timeout=60)
    assert done["properties"]["status"] == "Failed"
    assert done["properties"]["statusReason"].startswith("Inadmissible") and why in done["properties"]["statusReason"]
    assert "assignedNode" not in done["properties"]
    assert node_counters(aws, sub)["gpuAllocated"] == 0


def test_max_duration_is_enforced_and_billing_stops_then(admin, sub, node, aws, dgx):
    from itl_accelerator.settings import get_settings
    from itl_accelerator.wiring import Wiring

    # Given a job that would run forever, with a max duration of one minute
    assert (
        admin.put(
            jobs_path(sub, "long"), json=job_body(2, 160, workload=sim(forever=True), maxDurationMinutes=1)
        ).status_code
        == 201
    )
    running = wait_job(admin, jobs_path(sub, "long"), ("Running",))
    started = running["properties"]["startedAt"]
    # When the tracker looks after the deadline has passed
    wait_for(
        lambda: Wiring.build(get_settings()).job_tracker.run(now=time.time() + 120)["ended"] >= 1 or None,
        timeout=60,
        what="the tracker to end the job",
    )
    done = wait_job(admin, jobs_path(sub, "long"))
    # Then it is stopped on the DGX Platform and Failed with that reason; billing stopped at the deadline exactly
    assert (
        done["properties"]["status"] == "Failed" and "max duration of 1 minutes" in done["properties"]["statusReason"]
    )
    assert done["properties"]["gpuSeconds"] == 2 * 60
    assert epoch(done["properties"]["endedAt"]) - epoch(started) == pytest.approx(60, abs=1)
    assert [j["status"] for j in sim_jobs_of(dgx, sub)] == ["Canceled"]
    assert node_counters(aws, sub)["gpuAllocated"] == 0


# ------------------------------------------------------------------------------------------------ cancel
def test_a_running_jobs_operation_tells_one_retry_after_everywhere(admin, sub, node):
    """ARM clients poll after Retry-After: the accepting response, the operation's status and its result say the
    same (issue 27: the PUT said 30 s and the result URL the instance's 10)."""
    accepted = admin.put(jobs_path(sub, "long"), json=job_body(1, 80, workload=sim(forever=True)))
    assert accepted.status_code == 201
    wait_job(admin, jobs_path(sub, "long"), ("Running",))
    status = admin.get(relative(accepted.headers["Azure-AsyncOperation"]))
    result = admin.get(relative(accepted.headers["Location"]))
    assert status.json()["status"] == "Running" and result.status_code == 202
    # status and result give the same hint; it starts at the PUT's and only grows as the job runs on
    first, now = int(accepted.headers["Retry-After"]), int(status.headers["Retry-After"])
    assert abs(int(result.headers["Retry-After"]) - now) <= 1 and first <= now
    admin.post(jobs_path(sub, "long") + "/cancel")
    wait_job(admin, jobs_path(sub, "long"))
    assert "Retry-After" not in admin.get(relative(accepted.headers["Azure-AsyncOperation"])).headers


def test_cancel_while_pending_ends_it_at_once(admin, sub, node, aws):
    # Given the node full, and a job waiting for capacity
    assert admin.put(jobs_path(sub, "big"), json=job_body(8, 640, workload=sim(forever=True))).status_code == 201
    wait_job(admin, jobs_path(sub, "big"), ("Running",))
    assert admin.put(jobs_path(sub, "waiting"), json=job_body(1, 80)).status_code == 201
    waiting = wait_job(admin, jobs_path(sub, "waiting"), ("Pending",))
    wait_for(
        lambda: "Waiting for capacity" in admin.get(jobs_path(sub, "waiting")).json()["properties"]["statusReason"],
        what="the wait",
    )
    # When it is canceled
    canceled = admin.post(jobs_path(sub, "waiting") + "/cancel")
    # Then 202 with Location; the job ends Canceled, never placed, nothing billed; the cancel operation Succeeded
    assert canceled.status_code == 202 and "/operationResults/" in canceled.headers["Location"]
    done = wait_job(admin, jobs_path(sub, "waiting"), timeout=60)
    assert done["properties"]["status"] == "Canceled" and "admin-1" in done["properties"]["statusReason"]
    assert "assignedNode" not in done["properties"] and done["properties"]["gpuSeconds"] == 0
    status = admin.get(relative(canceled.headers["Azure-AsyncOperation"])).json()
    assert status["status"] == "Succeeded"
    assert waiting["properties"]["status"] == "Pending"
    admin.post(jobs_path(sub, "big") + "/cancel")
    wait_job(admin, jobs_path(sub, "big"))


def test_cancel_while_scheduled_stops_it_before_it_runs(admin, sub, node, aws, dgx):
    # Given a DGX Platform slow to answer, so the job sits Scheduled while it is submitted
    dgx.config.update({"latency_seconds": 1.5})
    assert admin.put(jobs_path(sub, "j"), json=job_body(2, 160)).status_code == 201
    wait_job(admin, jobs_path(sub, "j"), ("Scheduled",), timeout=60)
    # When it is canceled then
    assert admin.post(jobs_path(sub, "j") + "/cancel").status_code == 202
    dgx.config.update({"latency_seconds": 0.0})
    done = wait_job(admin, jobs_path(sub, "j"))
    # Then it ends Canceled, its GPUs free; on the DGX Platform it never runs on (canceled if it was submitted)
    assert done["properties"]["status"] == "Canceled"
    assert node_counters(aws, sub)["gpuAllocated"] == 0
    assert all(j["status"] == "Canceled" for j in sim_jobs_of(dgx, sub))


def test_cancel_while_running_stops_it_and_bills_until_then(admin, sub, node, aws, dgx):
    assert admin.put(jobs_path(sub, "j"), json=job_body(2, 160, workload=sim(forever=True))).status_code == 201
    wait_job(admin, jobs_path(sub, "j"), ("Running",))
    started = epoch(admin.get(jobs_path(sub, "j")).json()["properties"]["startedAt"])
    wait_for(lambda: time.time() - started >= 1.5, what="the job to run a while")
    canceled = admin.post(jobs_path(sub, "j") + "/cancel")
    assert canceled.status_code == 202
    # the same cancel again answers the same operation
    again = admin.post(jobs_path(sub, "j") + "/cancel")
    assert again.status_code in (202, 409)
    if again.status_code == 202:
        assert again.headers["Location"] == canceled.headers["Location"]
    done = wait_job(admin, jobs_path(sub, "j"), timeout=30)
    assert done["properties"]["status"] == "Canceled" and done["properties"]["gpuSeconds"] > 0
    assert [j["status"] for j in sim_jobs_of(dgx, sub)] == ["Canceled"]
    assert node_counters(aws, sub)["gpuAllocated"] == 0


def test_cancel_of_a_finished_job_is_409_naming_its_status_and_changes_nothing(admin, sub, node):
    assert admin.put(jobs_path(sub, "j"), json=job_body(workload=sim(seconds=0.5))).status_code == 201
    done = wait_job(admin, jobs_path(sub, "j"))
    refused = admin.post(jobs_path(sub, "j") + "/cancel")
    error = assert_refused(refused, 409, "Conflict")
    assert "Succeeded" in error["message"]
    assert admin.get(jobs_path(sub, "j")).json() == done


@pytest.mark.slow
def test_cancel_racing_completion_yields_one_end(admin, sub, node, aws, dgx):
    """Cancel at about the moment the job ends, many times: each job has exactly one final status and end time,
    its GPUs come back once, and its two operations agree with it."""
    outcomes: dict[str, int] = {}
    for i in range(12):
        name = f"race-{i}"
        assert admin.put(jobs_path(sub, name), json=job_body(1, 80, workload=sim(seconds=1.0))).status_code == 201
        running = wait_job(admin, jobs_path(sub, name), ("Running", *FINAL))
        if running["properties"]["status"] == "Running":
            time.sleep(0.6 + (i % 6) * 0.15)  # around the 1 s the job runs, plus the tracker's second
        cancel = admin.post(jobs_path(sub, name) + "/cancel")
        done = wait_job(admin, jobs_path(sub, name), timeout=30)
        status = done["properties"]["status"]
        outcomes[status] = outcomes.get(status, 0) + 1
        events = admin.get(
            f"/subscriptions/{sub}/providers/ITL.Accelerator/auditEvents",
            params={"resourceId": done["id"], "$top": 1000},
        ).json()["value"]
        ends = [
            e
            for e in events
            if (e.get("new_state") or {}).get("properties", {}).get("status") in FINAL
            and (e.get("previous_state") or {}).get("properties", {}).get("status") not in FINAL
        ]
        assert len(ends) == 1, [e["change_summary"] for e in events]
        assert ends[0]["new_state"]["properties"]["endedAt"] == done["properties"]["endedAt"]
        if cancel.status_code == 202:
            status_url = relative(cancel.headers["Azure-AsyncOperation"])
            op = wait_for(
                lambda url=status_url: (o := admin.get(url).json())["status"] in FINAL and o,
                what="the cancel operation",
            )
            assert op["status"] == ("Succeeded" if status == "Canceled" else "Failed"), (status, op)
        else:
            assert cancel.status_code == 409 and status == "Succeeded"
        assert node_counters(aws, sub)["gpuAllocated"] == 0
    print(f"\ncancel racing completion: {outcomes}")


def test_a_cancel_accepted_while_the_job_is_being_finished_gets_its_answer(admin, sub, node, aws, dgx, monkeypatch):
    """The exact interleaving the race above only sometimes hits: the job's final transition has read the job, then
    a cancel is accepted (202, a new operation), then the transition writes. The cancel's operation must still end
    (Failed: the job had already finished), not stay Accepted for ever."""
    from itl_accelerator.repositories.dynamodb.jobs import DynamoJobRepository

    # Given a running job whose end on the DGX Platform is held back
    dgx.config.hold_jobs = True
    assert admin.put(jobs_path(sub, "j"), json=job_body(workload=sim(seconds=1))).status_code == 201
    wait_job(admin, jobs_path(sub, "j"), ("Running",))
    cancels: list[Any] = []
    update = DynamoJobRepository.update

    def cancel_first(self, before, after, audit, **kw):  # the job's final transition, after its read: a cancel first
        if before.key.subscription_id == sub and not cancels and after.status in FINAL:
            cancels.append(admin.post(jobs_path(sub, "j") + "/cancel"))
        return update(self, before, after, audit, **kw)

    monkeypatch.setattr(DynamoJobRepository, "update", cancel_first)
    # When the job ends on the platform
    dgx.config.hold_jobs = False
    done = wait_job(admin, jobs_path(sub, "j"))
    # Then it ended once, as the platform said, and the cancel accepted meanwhile has its final answer
    assert done["properties"]["status"] == "Succeeded"
    assert [c.status_code for c in cancels] == [202]
    status = admin.get(relative(cancels[0].headers["Azure-AsyncOperation"])).json()
    assert status["status"] == "Failed" and status["error"]["code"] == "JobAlreadyFinished", status
    assert node_counters(aws, sub)["gpuAllocated"] == 0


# ------------------------------------------------------------------------------------------------ waiting, backfill
def test_a_job_that_does_not_fit_now_runs_once_an_instance_frees_gpus(admin, sub, node, aws, dgx):
    # Given an instance holding 6 of the node's 8 GPUs
    assert admin.post(instances_path(sub), json={**SEED_INSTANCE, "gpus": 6, "memory_gb": 480}).status_code == 202
    wait_state(admin, instances_path(sub, name="instance-1"), ("Succeeded",))
    # When a 4-GPU job is submitted
    assert admin.put(jobs_path(sub, "j"), json=job_body(4, 320, workload=sim(seconds=1))).status_code == 201
    waiting = wait_for(
        lambda: (
            (b := admin.get(jobs_path(sub, "j")).json())["properties"]["statusReason"].startswith(
                "Waiting for capacity"
            )
            and b
        ),
        what="the job to wait",
    )
    # Then it waits (Pending), saying why
    assert (
        waiting["properties"]["status"] == "Pending" and "4 free NVIDIA GPUs" in waiting["properties"]["statusReason"]
    )
    # And once the instance is deleted, it is placed and runs to its end
    assert admin.delete(instances_path(sub, name="instance-1")).status_code == 202
    wait_gone(admin, instances_path(sub, name="instance-1"))
    done = wait_job(admin, jobs_path(sub, "j"))
    assert done["properties"]["status"] == "Succeeded"
    assert node_counters(aws, sub) == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 0}


def test_a_small_job_backfills_while_a_large_one_waits_then_the_large_one_runs(admin, sub, node, aws, dgx):
    # Given a 6-GPU job running on the 8-GPU node (until it is canceled below, however slow the machine)
    assert admin.put(jobs_path(sub, "a"), json=job_body(6, 480, workload=sim(forever=True))).status_code == 201
    wait_job(admin, jobs_path(sub, "a"), ("Running",))
    # When a 4-GPU job (does not fit now) and then a 2-GPU job (fits) are submitted, the large one first
    assert admin.put(jobs_path(sub, "b"), json=job_body(4, 320, workload=sim(seconds=1), priority=9)).status_code == 201
    wait_for(lambda: "Waiting" in admin.get(jobs_path(sub, "b")).json()["properties"]["statusReason"], what="b waits")
    assert admin.put(jobs_path(sub, "c"), json=job_body(2, 160, workload=sim(seconds=1))).status_code == 201
    # Then the small one runs now, not held behind the large one (no head-of-line blocking)
    c = wait_job(admin, jobs_path(sub, "c"))
    assert c["properties"]["status"] == "Succeeded"
    assert admin.get(jobs_path(sub, "b")).json()["properties"]["status"] == "Pending"
    # And the large one runs once the first frees its GPUs
    assert admin.post(jobs_path(sub, "a") + "/cancel").status_code == 202
    b = wait_job(admin, jobs_path(sub, "b"))
    assert b["properties"]["status"] == "Succeeded"
    assert b["properties"]["startedAt"] > c["properties"]["startedAt"]
    assert node_counters(aws, sub)["gpuAllocated"] == 0


def test_best_fit_prefers_the_node_left_fullest(admin, sub, aws):
    # Given an 8-GPU node and a 4-GPU node, both free (same model, same location)
    assert admin.put(nodes_path(sub, name="big"), json=node_body()).status_code == 201
    small = node_body(sku={"name": "DGX-H100-4", "capacity": 4})
    small["properties"]["hardwareSpecs"]["gpuCount"] = 4
    assert admin.put(nodes_path(sub, name="small"), json=small).status_code == 201
    # When a 3-GPU job comes
    assert admin.put(jobs_path(sub, "fit"), json=job_body(3, 240, workload=sim(forever=True))).status_code == 201
    fit = wait_job(admin, jobs_path(sub, "fit"), ("Running",))
    # Then it goes where the fewest GPUs are left free after placing it: the small node (1 left, not 5)
    assert fit["properties"]["assignedNode"].endswith("/sparkNodes/small")
    assert node_counters(aws, sub, node="small")["gpuAllocated"] == 3
    admin.post(jobs_path(sub, "fit") + "/cancel")
    wait_job(admin, jobs_path(sub, "fit"))


# ------------------------------------------------------------------------------------------------ delete, resubmit
def test_a_finished_job_is_deleted_and_its_name_runs_afresh(admin, sub, node, aws, dgx):
    dgx.config.hold_jobs = True  # it stays active until the DELETE below is refused
    first = admin.post(jobs_path(sub), json=SEED_JOB)
    assert_refused(admin.delete(jobs_path(sub, "job-1")), 409, "Conflict")
    dgx.config.hold_jobs = False
    wait_job(admin, jobs_path(sub, "job-1"))
    assert admin.delete(jobs_path(sub, "job-1")).status_code == 200
    assert admin.get(jobs_path(sub, "job-1")).status_code == 404
    assert admin.delete(jobs_path(sub, "job-1")).status_code == 204
    second = admin.post(jobs_path(sub), json=SEED_JOB)
    assert second.status_code == 202
    assert second.json()["properties"]["operationId"] != first.json()["properties"]["operationId"]
    assert wait_job(admin, jobs_path(sub, "job-1"))["properties"]["status"] == "Succeeded"


def test_submitting_the_same_job_again_is_idempotent_and_a_different_one_conflicts(admin, sub, node):
    body = job_body(1, 80, workload=sim(forever=True))  # in flight until canceled below
    assert admin.put(jobs_path(sub, "j"), json=body).status_code == 201
    assert admin.put(jobs_path(sub, "j"), json=body).status_code == 200
    assert_refused(admin.put(jobs_path(sub, "j"), json=job_body(2, 160)), 409, "AnotherOperationInProgress")
    assert_refused(admin.post(jobs_path(sub), json={**SEED_JOB, "name": "j"}), 409, "Conflict")
    assert admin.post(jobs_path(sub, "j") + "/cancel").status_code == 202
    wait_job(admin, jobs_path(sub, "j"))
    assert_refused(admin.put(jobs_path(sub, "j"), json=job_body(2, 160)), 409, "PropertyChangeNotAllowed")


# ------------------------------------------------------------------------------------------------ RBAC, isolation
def test_consumers_see_and_cancel_only_their_own_jobs(caller, admin, sub, node):
    ann = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="ann")
    bob = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="bob")
    assert ann.put(jobs_path(sub, "mine"), json=job_body(workload=sim(forever=True))).status_code == 201
    # Bob cannot read, list, cancel or delete Ann's job: it does not exist for him
    assert_refused(bob.get(jobs_path(sub, "mine")), 404, "ResourceNotFound")
    assert bob.get(jobs_path(sub)).json()["value"] == []
    assert bob.get(jobs_path(sub) + "?submitted_by=ann").json()["value"] == []
    assert_refused(bob.post(jobs_path(sub, "mine") + "/cancel"), 404, "ResourceNotFound")
    assert bob.delete(jobs_path(sub, "mine")).status_code == 204
    # Another subscription's admin cannot see it either
    stranger = caller([ADMIN], ["/subscriptions/sub-other"], subject="eve")
    assert_refused(stranger.get(jobs_path(sub, "mine")), 404, "ResourceNotFound")
    # Ann sees and cancels hers
    assert [j["name"] for j in ann.get(jobs_path(sub)).json()["value"]] == ["mine"]
    assert ann.post(jobs_path(sub, "mine") + "/cancel").status_code == 202
    assert wait_job(ann, jobs_path(sub, "mine"))["properties"]["status"] == "Canceled"


def test_a_supplier_sees_the_jobs_on_its_nodes_read_only(caller, admin, sub, node):
    assert admin.put(jobs_path(sub, "j"), json=job_body(workload=sim(forever=True))).status_code == 201
    wait_job(admin, jobs_path(sub, "j"), ("Running",))
    owner = caller([SUPPLIER], [f"/subscriptions/{sub}"], subject="owner-123")
    other = caller([SUPPLIER], [f"/subscriptions/{sub}"], subject="someone-else")
    assert owner.get(jobs_path(sub, "j")).status_code == 200
    assert [j["name"] for j in owner.get(jobs_path(sub)).json()["value"]] == ["j"]
    assert_refused(other.get(jobs_path(sub, "j")), 404, "ResourceNotFound")
    assert other.get(jobs_path(sub)).json()["value"] == []
    assert_refused(owner.post(jobs_path(sub, "j") + "/cancel"), 403, "AuthorizationFailed")
    assert_refused(owner.put(jobs_path(sub, "x"), json=job_body()), 403, "AuthorizationFailed")
    admin.post(jobs_path(sub, "j") + "/cancel")
    wait_job(admin, jobs_path(sub, "j"))


# ------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "body",
    [
        {**SEED_JOB, "status": "Running"},
        {**SEED_JOB, "requested_gpus": 0},
        {**SEED_JOB, "requested_gpus": "4"},
        {**SEED_JOB, "requested_memory_gb": -1},
        {**SEED_JOB, "job_type": "mining"},
        {**SEED_JOB, "priority": 10},
        {**SEED_JOB, "max_duration_minutes": 0},
        {**SEED_JOB, "workload": {"image": "Not An Image"}},
        {**SEED_JOB, "workload": {"image": "a/b", "env": {"1BAD": "x"}}},
        {**SEED_JOB, "workload": {"image": "a/b", "command": ["x"] * 65}},
        {**SEED_JOB, "workload": {"image": "a/b", "env": {f"V{i}": "x" * 4000 for i in range(5)}}},
        {**SEED_JOB, "gpu_model": "H\u0000100"},
        {**SEED_JOB, "name": "bad name!"},
        {**SEED_JOB, "retryStrategy": {"attempts": 11}},
        {**SEED_JOB, "retryStrategy": {"attempts": 2, "evaluateOnExit": [{"onReason": "oom!", "action": "RETRY"}]}},
        {**SEED_JOB, "retryStrategy": {"attempts": 2, "evaluateOnExit": [{"onExitCode": "1", "action": "AGAIN"}]}},
    ],
)
def test_bad_job_input_is_a_clear_400_and_nothing_is_stored(admin, sub, node, body):
    response = admin.post(jobs_path(sub), json=body)
    assert_refused(response, 400, {"InvalidRequestContent", "InvalidResourceName"})
    assert admin.get(jobs_path(sub)).json()["value"] == []


# ------------------------------------------------------------------------------------------------ concurrency
@pytest.mark.slow
def test_fifty_jobs_racing_for_three_nodes_never_overcommit_and_all_end(make_token, gateway_url, admin, sub, aws, dgx):
    import httpx

    for name in ("n1", "n2", "n3"):
        assert admin.put(nodes_path(sub, name=name), json=node_body()).status_code == 201
    token = make_token("admin-1", [ADMIN], [f"/subscriptions/{sub}"])
    peak = {"n1": 0, "n2": 0, "n3": 0}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for name in peak:
                peak[name] = max(peak[name], node_counters(aws, sub, node=name)["gpuAllocated"])
            # every 50 ms: a job holds its GPUs at least for its run (0.5 s or more), so no overcommit slips between
            # two reads; reading as fast as it could took CPU from the 50 submits, five of which then timed out at
            # the gateway (29 s) in a loaded run
            stop.wait(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    barrier = threading.Barrier(10)

    def submit(i: int) -> list[int]:
        """PUT job-{i} as an ARM client does: a 504 (the gateway's 29 s, reached only on a starved machine: the
        function goes on) is retried, as the Azure SDK's retry policy retries it, and so is the 409 of a retry
        that met the first attempt's submit still in flight. The PUT is idempotent: the retry that finds the job
        answers 200 with it. Returns every status it got."""
        got: list[int] = []
        with httpx.Client(base_url=gateway_url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            if i < 10:
                barrier.wait()
            body = job_body(1 + i % 4, 80 * (1 + i % 4), workload=sim(seconds=0.5 + (i % 3) * 0.5))
            for _ in range(5):
                answer = http.put(jobs_path(sub, f"job-{i}"), json=body)
                got.append(answer.status_code)
                in_flight = answer.status_code == 409 and "at the same time" in answer.text
                if answer.status_code != 504 and not (in_flight and 504 in got):
                    break
        return got

    try:
        with ThreadPoolExecutor(10) as pool:
            answers = list(pool.map(submit, range(50)))
        # every job submitted: at once (201), or by a retry after a 504 (201, or 200 when the first attempt's
        # submit had committed)
        assert all(a == [201] or (a[0] == 504 and a[-1] in (200, 201)) for a in answers), answers
        retried = sum(1 for a in answers if len(a) > 1)
        wait_for_progress(
            lambda: sum(
                j["properties"]["status"] in FINAL for j in admin.get(jobs_path(sub) + "?$top=100").json()["value"]
            ),
            50,
            what="the 50 jobs ending",
        )
    finally:  # the watcher reads the nodes: it stops before anything (the test's cleanup) removes them
        stop.set()
        watcher.join()
    jobs = admin.get(jobs_path(sub) + "?$top=100").json()["value"]
    counts = {s: sum(1 for j in jobs if j["properties"]["status"] == s) for s in FINAL}
    print(f"\n50 jobs on 3 nodes: {counts}; peak allocation {peak}; {retried} submits retried after a 504")
    assert counts["Succeeded"] == 50, counts
    assert all(p <= 8 for p in peak.values()), peak
    for name in peak:
        assert node_counters(aws, sub, node=name) == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 0}
    known = {j["id"] for j in jobs}
    assert {j["name"] for j in sim_jobs_of(dgx, sub)} <= known
    assert len(sim_jobs_of(dgx, sub)) == 50


@pytest.mark.slow
def test_a_16_gpu_job_over_two_8_gpu_nodes_is_placed_whole_or_not_at_all_while_50_race(
    make_token, gateway_url, admin, sub, aws, dgx
):
    import httpx

    from itl_accelerator.domain.records import ResourceKey
    from itl_accelerator.repositories.dynamodb.keys import item_key

    for name in ("n1", "n2"):
        assert admin.put(nodes_path(sub, name=name), json=node_body()).status_code == 201
    token = make_token("admin-1", [ADMIN], [f"/subscriptions/{sub}"])
    gang = {"kind": "GPU", "count": 8, "memoryGb": 640, "nodes": 2}
    half_placed: list[dict[str, int]] = []
    peak = {"n1": 0, "n2": 0}
    stop = threading.Event()

    def gang_holds() -> bool:
        item = aws.get_item(
            TableName=TABLE,
            Key={k: {"S": v} for k, v in item_key(ResourceKey(sub, "rg1", "sparkJobs", ("gang",))).items()},
            ConsistentRead=True,
        ).get("Item")
        return bool(item) and item.get("capacityReserved", {}).get("BOOL", False)

    def watch() -> None:
        while not stop.is_set():
            before = gang_holds()
            used = {name: node_counters(aws, sub, node=name)["gpuAllocated"] for name in peak}
            after = gang_holds()
            for name, devices in used.items():
                peak[name] = max(peak[name], devices)
            if before and after and used != {"n1": 8, "n2": 8}:
                # held all through the read of both nodes: both are wholly the gang's (its parts came together)
                half_placed.append(used)
            stop.wait(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()

    def submit(i: int) -> int:
        with httpx.Client(base_url=gateway_url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            if i == 25:
                body = {"properties": {"accelerator": gang, "workload": sim(seconds=1)}}
                return http.put(jobs_path(sub, "gang"), json=body).status_code
            body = job_body(1 + i % 2, 80 * (1 + i % 2), workload=sim(seconds=0.5))
            return http.put(jobs_path(sub, f"job-{i}"), json=body).status_code

    try:
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(submit, range(51)))
        assert all(a == 201 for a in answers), answers
        wait_for_progress(
            lambda: sum(
                j["properties"]["status"] in FINAL for j in admin.get(jobs_path(sub) + "?$top=100").json()["value"]
            ),
            51,
            what="the 51 jobs ending",
        )
    finally:
        stop.set()
        watcher.join()
    done = admin.get(jobs_path(sub, "gang")).json()["properties"]
    # Then the gang ran on both nodes at once, as one platform job given both, and was never half placed
    assert done["status"] == "Succeeded", done["statusReason"]
    assert sorted(n.rsplit("/", 1)[1] for n in done["assignedNodes"]) == ["n1", "n2"]
    assert done["gpuSeconds"] > 0 and done["accelerator"] == {**gang, "vendor": "NVIDIA"}
    (platform,) = [j for j in sim_jobs_of(dgx, sub) if j["name"].endswith("/gang")]
    assert sorted(n.rsplit("/", 1)[1] for n in platform["nodeIds"]) == ["n1", "n2"]
    assert half_placed == [] and all(p <= 8 for p in peak.values()), (half_placed, peak)
    jobs = admin.get(jobs_path(sub) + "?$top=100").json()["value"]
    assert all(j["properties"]["status"] == "Succeeded" for j in jobs)
    for name in peak:
        assert node_counters(aws, sub, node=name) == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 0}


# ------------------------------------------------------------------------------------------------ history bound
def test_tracking_a_job_costs_a_constant_number_of_history_events(admin, sub, node, aws, dgx):
    """A running job waits on a task token: its execution's history has the same events whether the tracker
    looked at it twice or two hundred times, so a 7-day job stays far below Step Functions' 25,000 events."""
    import boto3

    from itl_accelerator.settings import get_settings
    from itl_accelerator.state_machines import execution_arn

    sfn = boto3.client("stepfunctions")
    counts: dict[str, int] = {}
    entered: dict[str, list[str]] = {}
    for name, seconds in (("short", 1.0), ("longer", 6.0)):
        accepted = admin.put(jobs_path(sub, name), json=job_body(workload=sim(seconds=seconds)))
        done = wait_job(admin, jobs_path(sub, name), timeout=60)
        assert done["properties"]["status"] == "Succeeded"
        arn = execution_arn(get_settings().job_state_machine_arn, accepted.json()["properties"]["operationId"])
        wait_for(lambda a=arn: sfn.describe_execution(executionArn=a)["status"] == "SUCCEEDED", what="the execution")
        events = sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        counts[name] = len(events)
        entered[name] = [e["stateEnteredEventDetails"]["name"] for e in events if "stateEnteredEventDetails" in e]
    per_hour = 0  # tracking adds no event while the job runs (the tracker checks it outside the execution)
    seven_days = max(counts.values()) + per_hour * 24 * 7
    print(f"\nhistory events: {counts}; per hour of running: {per_hour}; a 7-day job: {seven_days} (limit 25,000)")
    # The same states, each entered as often, whether the job ran 1 s or 6 s (a Task's Retry after a slow call on
    # a busy machine adds events inside its state, not states: the event counts may differ by those alone)
    assert entered["short"] == entered["longer"] and "Track" in entered["short"], entered
    assert seven_days < 25_000


# ------------------------------------------------------------------------------------------------ reconciler
def _reconcile(sub: str, ahead: float = 3600) -> list[str]:
    from itl_accelerator.settings import get_settings
    from itl_accelerator.wiring import Wiring

    report = Wiring.build(get_settings()).reconciler.run(now=time.time() + ahead)
    return [r["outcome"] for r in report.repaired if f"/subscriptions/{sub}/" in r["resource"]]


def test_a_job_whose_execution_never_started_is_started_by_the_reconciler(admin, sub, node, aws, monkeypatch):
    from botocore.exceptions import ClientError

    from itl_accelerator.state_machines import StateMachines

    def throttled(*args: object, **kwargs: object) -> None:
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "StartExecution")

    # Given a job accepted while StartExecution was throttled (the client got 202 all the same)
    monkeypatch.setattr(StateMachines, "start", throttled)
    assert admin.post(jobs_path(sub), json=SEED_JOB).status_code == 202
    monkeypatch.undo()
    assert admin.get(jobs_path(sub, "job-1")).json()["properties"]["status"] == "Pending"
    # When the reconciler runs after its lease ran out
    assert _reconcile(sub) == ["restarted"]
    # Then the job runs to its end, once
    assert wait_job(admin, jobs_path(sub, "job-1"))["properties"]["status"] == "Succeeded"
    assert node_counters(aws, sub)["gpuAllocated"] == 0


def test_a_node_uncordoned_places_the_waiting_job_at_once(admin, sub, node, aws):
    # Given the only node cordoned, and a job waiting for capacity
    assert admin.patch(node, json={"properties": {"availability": "Cordoned"}}).status_code == 200
    assert admin.put(jobs_path(sub, "j"), json=job_body(workload=sim(seconds=1))).status_code == 201
    wait_for(lambda: "Waiting" in admin.get(jobs_path(sub, "j")).json()["properties"]["statusReason"], what="the wait")
    # When the node is made available again (no GPUs were released, no reconciler runs: the fleet change alone)
    assert admin.patch(node, json={"properties": {"availability": "Available"}}).status_code == 200
    # Then the job is placed and runs, well before the periodic retry (JOB_PLACEMENT_RETRY_SECONDS, 60 s)
    started = time.monotonic()
    wait_job(admin, jobs_path(sub, "j"), ("Running", "Succeeded"), timeout=30)
    print(f"\nplaced {time.monotonic() - started:.2f} s after the uncordon")
    assert wait_job(admin, jobs_path(sub, "j"))["properties"]["status"] == "Succeeded"


def test_a_node_added_places_the_waiting_job_at_once(admin, sub, node, aws):
    # Given the only node busy with a job that runs until canceled, and a second job waiting for it
    assert admin.put(jobs_path(sub, "big"), json=job_body(8, 640, workload=sim(forever=True))).status_code == 201
    wait_job(admin, jobs_path(sub, "big"), ("Running",))
    assert admin.put(jobs_path(sub, "next"), json=job_body(4, 320, workload=sim(seconds=0.5))).status_code == 201
    wait_for(lambda: "Waiting" in admin.get(jobs_path(sub, "next")).json()["properties"]["statusReason"], what="wait")
    # When a supplier's second node is registered
    assert admin.put(nodes_path(sub, name="dgx-2"), json=node_body()).status_code == 201
    # Then the waiting job runs there, while the first still runs
    done = wait_job(admin, jobs_path(sub, "next"), timeout=30)
    assert done["properties"]["status"] == "Succeeded" and done["properties"]["assignedNode"].endswith("/dgx-2")
    admin.post(jobs_path(sub, "big") + "/cancel")
    wait_job(admin, jobs_path(sub, "big"))


def test_a_node_deleted_fails_at_once_the_waiting_job_no_node_can_hold_any_more(admin, sub, node, aws):
    # Given a waiting job that only an H200 node could hold, and that node cordoned (no other node has H200s)
    h200 = node_body(sku={"name": "DGX-H200-8GPU", "capacity": 8})
    h200["properties"] = {
        **h200["properties"],
        "hardwareSpecs": {"gpuModel": "H200", "gpuCount": 8, "gpuMemoryGb": 141},
    }
    assert admin.put(nodes_path(sub, name="h200"), json=h200).status_code == 201
    assert (
        admin.patch(nodes_path(sub, name="h200"), json={"properties": {"availability": "Cordoned"}}).status_code == 200
    )
    assert admin.put(jobs_path(sub, "j"), json=job_body(gpuModel="H200")).status_code == 201
    wait_for(lambda: "Waiting" in admin.get(jobs_path(sub, "j")).json()["properties"]["statusReason"], what="the wait")
    # When that node is deleted
    assert admin.delete(nodes_path(sub, name="h200")).status_code == 200
    # Then the job fails at once, saying why, instead of waiting for its pending timeout (7 days)
    done = wait_job(admin, jobs_path(sub, "j"), timeout=30)
    assert done["properties"]["status"] == "Failed"
    assert done["properties"]["statusReason"].startswith("Inadmissible: No node of the subscription has GPU model")
