"""Given an API that answers 429 TooManyRequests (its rate limits, or API Gateway's throttling), the CLI waits as
its Retry-After says (a doubling back-off without one), says so on stderr, and retries — a bounded number of times,
then exits 1 with the 429 and how long it tried; a long-running wait whose polls stay throttled stops saying how
to wait again."""

from __future__ import annotations

import httpx

from itlc_accelerator.client import MAX_THROTTLE_WAIT, THROTTLE_ATTEMPTS
from tests.unit.cli_support import (
    API,
    RG_PATH,
    accepted,
    arm_error,
    instance,
    node,
    operation,
    routes,
    run,
    status_path,
)

NODE = f"GET {RG_PATH}/sparkNodes/dgx-1"
INSTANCES = f"{RG_PATH}/sparkNodes/dgx-1/sparkOllamaInstances"
STATUS = status_path()


def throttled(retry_after: str | None = "7") -> httpx.Response:
    response = arm_error(429, "TooManyRequests", "Too many read requests: your limit is reached.")
    if retry_after is not None:
        response.headers["Retry-After"] = retry_after
    return response


def test_a_throttled_request_is_retried_after_retry_after_and_says_so_on_stderr():
    done = run(
        ["node", "show", "dgx-1", "-o", "json"],
        routes({NODE: [throttled("7"), throttled("3"), httpx.Response(200, json=node())]}),
    )
    assert done.code == 0, done.err
    assert done.json()["name"] == "dgx-1"
    assert done.clock.sleeps == [7, 3]
    assert done.paths() == [NODE] * 3
    assert done.err.splitlines() == [
        f"throttled: the API answered 429 TooManyRequests to GET {RG_PATH}/sparkNodes/dgx-1; retrying in 7s "
        f"(as its Retry-After says, attempt 2 of {THROTTLE_ATTEMPTS})",
        f"throttled: the API answered 429 TooManyRequests to GET {RG_PATH}/sparkNodes/dgx-1; retrying in 3s "
        f"(as its Retry-After says, attempt 3 of {THROTTLE_ATTEMPTS})",
    ]


def test_without_retry_after_the_waits_double_and_a_huge_one_is_capped():
    done = run(
        ["node", "show", "dgx-1"],
        routes({NODE: [throttled(None), throttled(None), throttled("86400"), httpx.Response(200, json=node())]}),
    )
    assert done.code == 0, done.err
    assert done.clock.sleeps == [1, 2, MAX_THROTTLE_WAIT]
    assert "(back-off, attempt 2 of" in done.err


def test_still_throttled_after_the_last_attempt_exits_1_with_the_429():
    done = run(["node", "show", "dgx-1"], routes({NODE: throttled("5")}))
    assert done.code == 1
    assert len(done.requests) == THROTTLE_ATTEMPTS and done.clock.sleeps == [5] * (THROTTLE_ATTEMPTS - 1)
    last = done.err.splitlines()[-1]
    assert last.startswith("ERROR: TooManyRequests: Too many read requests: your limit is reached.")
    assert f"still throttled after {THROTTLE_ATTEMPTS} attempts over 15s" in last


def test_a_throttled_write_is_retried_too_since_it_was_refused_before_anything_happened():
    create = f"POST {RG_PATH}/sparkNodes"
    done = run(["node", "create", "dgx-1", "--location", "us-east-1", "--sku", "DGX-H100-8GPU", "--gpus", "8"],
               routes({create: [throttled("2"), httpx.Response(201, json=node())]}))  # fmt: skip
    assert done.code == 0, done.err
    assert [r.method for r in done.requests] == ["POST", "POST"]
    assert done.requests[0].read() == done.requests[1].read()


def test_a_long_running_wait_rides_out_a_throttled_poll():
    api = routes(
        {
            f"POST {INSTANCES}": accepted(retry_after=3, json=instance(state="Accepted")),
            f"GET {STATUS}": [operation("Running"), throttled("10"), operation("Succeeded")],
            f"GET {STATUS.replace('/operationStatuses/', '/operationResults/')}": httpx.Response(200, json=instance()),
        }
    )
    args = ["instance", "create", "llama-1", "--node", "dgx-1", "--model", "mistral:7b", "--gpus", "2"]
    done = run([*args, "--memory-gb", "160", "-o", "json"], api)
    assert done.code == 0, done.err
    assert done.clock.sleeps == [3, 3, 10]  # the 202's Retry-After, then again (none on the status), then the 429's
    assert any(line.startswith("throttled: ") for line in done.err.splitlines())


def test_a_wait_whose_polls_stay_throttled_stops_and_says_how_to_wait_again():
    api = routes({f"GET {STATUS}": [operation("Running"), throttled("1")]})
    done = run(["operation", "wait", STATUS], api)
    assert done.code == 1
    assert "ERROR: TooManyRequests:" in done.err and "operation op-1 goes on (Running); to wait again:" in done.err
    assert f"itlc-accelerator operation wait '{API}{STATUS}'" in done.err
    assert len(done.requests) == 1 + THROTTLE_ATTEMPTS


def test_on_a_terminal_the_notice_clears_the_spinner_line_first():
    done = run(["node", "show", "dgx-1"], routes({NODE: [throttled("1"), httpx.Response(200, json=node())]}), tty=True)
    assert done.code == 0
    assert "\rthrottled: " in done.err  # (click drops the erase-line code when the stream is no real terminal)
