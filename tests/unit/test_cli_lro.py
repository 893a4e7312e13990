"""Given a long-running command (instance create/delete, job submit/cancel) against a mocked API, it waits for the
operation pausing as the server's Retry-After says, shows progress on stderr, prints the result, exits 1 when the
operation failed; --no-wait prints the operation at once; Ctrl-C leaves it running and says how to wait again."""

from __future__ import annotations

import click
import httpx

from itlc_accelerator.main import accelerator
from tests.unit.cli_support import (
    API,
    RG_PATH,
    FakeClock,
    accepted,
    instance,
    job,
    operation,
    routes,
    run,
    status_path,
)

INSTANCES = f"{RG_PATH}/sparkNodes/dgx-1/sparkOllamaInstances"
STATUS = status_path()
RESULT = STATUS.replace("/operationStatuses/", "/operationResults/")
CREATE = [
    "instance",
    "create",
    "llama-1",
    "--node",
    "dgx-1",
    "--model",
    "mistral:7b",
    "--gpus",
    "2",
    "--memory-gb",
    "160",
]


def provisioning(*statuses: httpx.Response) -> dict[str, object]:
    return {
        f"POST {INSTANCES}": accepted(retry_after=3, json=instance(state="Accepted")),
        f"GET {STATUS}": list(statuses),
        f"GET {RESULT}": httpx.Response(200, json=instance()),
    }


def test_create_waits_with_retry_after_then_prints_the_instance():
    api = routes(provisioning(operation("Accepted"), operation("Running", retry_after=1), operation("Succeeded")))
    done = run([*CREATE, "-o", "json"], api)
    assert done.code == 0, done.err
    assert done.json() == instance()
    # Then it paused 3 s (the 202's Retry-After) before the first poll, then what each status response said (none:
    # the 202's again; 1 s), and fetched the result from Location
    assert done.clock.sleeps == [3, 3, 1]
    assert done.paths() == [f"POST {INSTANCES}", f"GET {STATUS}", f"GET {STATUS}", f"GET {STATUS}", f"GET {RESULT}"]
    body = done.requests[0].read()
    assert httpx.Response(200, content=body).json() == {
        "name": "llama-1",
        "properties": {"model": "mistral:7b", "gpus": 2, "memoryGb": 160},
    }


def test_progress_is_a_line_per_state_when_stderr_is_not_a_terminal():
    api = routes(
        provisioning(operation("Accepted"), operation("Running"), operation("Running"), operation("Succeeded"))
    )
    done = run(CREATE, api)
    assert done.err.splitlines() == [
        "instance llama-1: Accepted (3s)",
        "instance llama-1: Running (6s)",
        "instance llama-1: Succeeded (12s)",
    ]


def test_progress_on_a_terminal_is_one_line_redrawn_with_a_spinner_and_elapsed_time():
    api = routes(provisioning(operation("Running"), operation("Succeeded")))
    done = run(CREATE, api, tty=True)
    assert done.code == 0
    frames = done.err.split("\r")
    assert any(f.startswith("⠙ instance llama-1: Accepted 0s") for f in frames)
    assert any("instance llama-1: Running 3s" in f for f in frames)
    assert frames[-1] == "instance llama-1: Succeeded (6s)\n"  # (click drops the erase-line codes off a terminal)
    # redrawn every tenth of a second while it waits 3 s, twice
    assert len(done.clock.sleeps) >= 60 and max(done.clock.sleeps) <= 0.1 + 1e-9


def test_a_failed_operation_exits_1_with_its_error():
    failed = operation("Failed", error={"code": "InsufficientCapacity", "message": "Only 1 GPU is free."})
    done = run(CREATE, routes(provisioning(operation("Running"), failed)))
    assert done.code == 1
    assert done.err.splitlines()[-1] == "ERROR: InsufficientCapacity: Only 1 GPU is free."
    assert done.out == ""


def test_a_canceled_operation_without_error_exits_1():
    done = run(CREATE, routes(provisioning(operation("Canceled"))))
    assert done.code == 1 and done.err.endswith("ERROR: OperationCanceled: The operation was canceled.\n")


def test_no_wait_prints_the_operation_at_once():
    done = run([*CREATE, "--no-wait", "-o", "json"], routes(provisioning(operation("Accepted"))))
    assert done.code == 0
    assert done.json()["status"] == "Accepted" and done.json()["id"] == STATUS
    assert done.clock.sleeps == [] and done.paths() == [f"POST {INSTANCES}", f"GET {STATUS}"]
    ids = run([*CREATE, "--no-wait", "-o", "id"], routes(provisioning(operation("Accepted"))))
    assert ids.out == STATUS + "\n"
    table = run([*CREATE, "--no-wait", "-o", "table"], routes(provisioning(operation("Accepted"))))
    assert table.out.splitlines()[2].split()[:3] == ["op-1", "Accepted", "sparkOllamaInstances/llama-1"]


def test_ctrl_c_while_waiting_leaves_the_operation_and_says_how_to_resume():
    clock = FakeClock(interrupt_after=2)
    done = run(CREATE, routes(provisioning(operation("Running"))), clock=clock)
    assert done.code == 130
    assert "Stopped waiting; instance llama-1 goes on (Running). To wait again:" in done.err
    assert f"  itlc-accelerator operation wait '{API}{STATUS}'" in done.err
    assert not any(r.method == "DELETE" for r in done.requests)


def test_mounted_in_itlc_the_hint_names_itlc_accelerator():
    @click.group("itlc")
    def itlc() -> None:
        """The ITL CLI."""

    itlc.add_command(accelerator)
    done = run(
        ["accelerator", *CREATE],
        routes(provisioning(operation("Running"))),
        clock=FakeClock(interrupt_after=1),
        cli=itlc,
    )
    assert done.code == 130 and "  itlc accelerator operation wait 'http" in done.err


def test_delete_waits_and_prints_nothing_after():
    api = routes(
        {
            f"DELETE {INSTANCES}/llama-1": accepted(retry_after=2),
            f"GET {STATUS}": [operation("Running"), operation("Succeeded")],
            f"GET {RESULT}": httpx.Response(204),
        }
    )
    done = run(["instance", "delete", "llama-1", "--node", "dgx-1"], api)
    assert done.code == 0 and done.out == ""
    assert done.err.splitlines()[-1] == "instance llama-1: Succeeded (4s)"


def test_job_submit_waits_for_the_job_and_a_failed_job_exits_1():
    jobs = f"{RG_PATH}/sparkJobs"
    job_status, job_result = (
        status_path(location="global"),
        status_path(location="global").replace("Statuses", "Results"),
    )
    api = {
        f"POST {jobs}": accepted(location="global", retry_after=2, json=job(status="Pending")),
        f"GET {job_status}": [operation("Accepted"), operation("Succeeded")],
        f"GET {job_result}": httpx.Response(200, json=job()),
    }
    done = run(["job", "submit", "train-1", "--gpus", "4", "--memory-gb", "320"], routes(api))
    assert done.code == 0 and done.json()["properties"]["status"] == "Succeeded"
    api[f"GET {job_status}"] = operation("Failed", error={"code": "JobFailed", "message": "exit code 3"})
    failed = run(["job", "submit", "train-1", "--gpus", "4", "--memory-gb", "320"], routes(api))
    assert failed.code == 1 and failed.err.endswith("ERROR: JobFailed: exit code 3\n")


def test_job_cancel_waits_and_prints_the_canceled_job():
    jobs = f"{RG_PATH}/sparkJobs"
    api = {
        f"POST {jobs}/train-1/cancel": accepted(location="global", retry_after=2),
        f"GET {status_path(location='global')}": operation("Succeeded"),
        f"GET {status_path(location='global').replace('Statuses', 'Results')}": httpx.Response(
            200, json=job(status="Canceled")
        ),
    }
    done = run(["job", "cancel", "train-1", "-o", "json"], routes(api))
    assert done.code == 0 and done.json()["properties"]["status"] == "Canceled"


def test_job_wait_polls_the_job_until_it_ends():
    path = f"GET {RG_PATH}/sparkJobs/train-1"
    api = routes({path: [httpx.Response(200, json=job(status=s)) for s in ("Pending", "Running", "Succeeded")]})
    done = run(["job", "wait", "train-1", "--interval", "2"], api)
    assert done.code == 0 and done.json()["properties"]["status"] == "Succeeded"
    assert done.clock.sleeps == [0, 2, 2]
    assert done.err.splitlines() == [
        "job train-1: Pending (0s)",
        "job train-1: Running (2s)",
        "job train-1: Succeeded (4s)",
    ]
    failed = routes({path: httpx.Response(200, json=job(status="Failed", statusReason="Exit code 3."))})
    ended = run(["job", "wait", "train-1"], failed)
    assert ended.code == 1 and ended.err.endswith("ERROR: JobFailed: Exit code 3.\n")
    interrupted = run(
        ["job", "wait", "train-1"],
        routes({path: httpx.Response(200, json=job(status="Running"))}),
        clock=FakeClock(interrupt_after=1),
    )
    assert (
        interrupted.code == 130 and "itlc-accelerator job wait train-1 --subscription sub-1 -g rg1" in interrupted.err
    )


def test_operation_show_and_wait_take_a_url_a_path_or_an_id_with_its_location():
    api = routes({f"GET {STATUS}": [operation("Running"), operation("Succeeded")]})
    by_id = run(["operation", "show", "op-1", "--location", "us-east-1"], api)
    assert by_id.code == 0 and by_id.json()["status"] == "Running"
    by_url = run(
        ["operation", "wait", f"{API}{RESULT}"],
        routes({f"GET {STATUS}": [operation("Running"), operation("Succeeded")]}),
    )
    assert by_url.code == 0 and by_url.json()["status"] == "Succeeded"
    assert by_url.clock.sleeps == [0, 5]  # no Retry-After anywhere: the default pause
    failed = run(
        ["operation", "wait", STATUS],
        routes({f"GET {STATUS}": operation("Failed", error={"code": "X", "message": "y"})}),
    )
    assert failed.code == 1 and failed.json()["status"] == "Failed" and failed.err.endswith("ERROR: X: y\n")
