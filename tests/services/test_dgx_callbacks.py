"""DGX Platform callbacks (services/workflows/callbacks.py): a signed callback that an instance is ready, or a job
ended, moves the waiting workflow at once — through the real ASL, on the fake clock — while without one the
provisioning still polls at its interval and the tracker still finds the job; a callback twice, late, or for
something else changes nothing; an unsigned, wrongly signed or stale one is refused before anything is read."""

from __future__ import annotations

import json
from typing import Any

import pytest

from itl_accelerator.dgx.callbacks import CallbackMalformed, CallbackRejected, signature
from tests.services.conftest import START, Env, make_settings

SECRET = "callback-secret-for-tests"
CALLBACK_URL = "https://provider.test/v1/dgx/callbacks"


@pytest.fixture
def env() -> Env:
    world = Env(make_settings(dgx_callback_url=CALLBACK_URL, dgx_callback_secret=SECRET))
    world.dgx.provisioning_seconds = 3.0  # ready well inside the first poll interval (10 s)
    return world


def callback(
    env: Env, kind: str, dgx_id: str, name: str, status: str, *, secret: str = SECRET, at: float | None = None
) -> tuple[dict[str, str], bytes]:
    """The headers (lower case) and body of the platform's callback, signed at ``at`` (default: now)."""
    body = json.dumps(
        {"eventId": f"ev-{dgx_id}-{status}", "type": kind, "id": dgx_id, "name": name, "status": status, "time": "t"}
    ).encode()
    timestamp = str(int(env.clock() if at is None else at))
    return {"x-dgx-timestamp": timestamp, "x-dgx-signature": signature(secret, timestamp, body)}, body


def ready(env: Env, name: str = "llama") -> tuple[dict[str, str], bytes]:
    instance = env.instance(name)
    assert instance is not None and instance.dgx_id
    return callback(env, "instance", instance.dgx_id, instance.arm_id, "Running")


def entered(env: Env, operation_id: str, state: str) -> int:
    return env.sfn.execution(operation_id).runner.entered.count(state)


# ------------------------------------------------------------------------------------------------ instances
def test_a_ready_callback_completes_the_provisioning_at_once(env, node):
    # Given a provisioning waiting for readiness (the platform was asked to call back)
    accepted, _ = env.provision()
    assert accepted is not None
    env.run(advance=3)
    assert env.instance_props()["provisioningState"] == "Provisioning"
    assert [c["callback_url"] for c in env.dgx.called("create_instance")] == [CALLBACK_URL]
    assert env.instance().task_token is not None
    # When the platform calls back at the moment it is ready (3 s), 7 s before the poll would have looked
    assert env.w.dgx_callbacks.receive(*ready(env)) == "resumed"
    env.run(advance=0)
    # Then the instance Succeeded then and there: one poll, billing from the ready moment, nothing left behind
    props = env.instance_props()
    assert props["provisioningState"] == "Succeeded" and env.op_status(accepted.operation_id) == "Succeeded"
    assert env.meter(accepted.operation_id).start == START + 3
    assert entered(env, accepted.operation_id, "Poll") == 1
    assert (env.instance().task_token, env.instance().ready_signal) == (None, False)


def test_without_a_callback_the_provisioning_still_polls_at_its_interval(env, node):
    accepted, _ = env.provision()
    assert accepted is not None
    env.run()
    assert env.instance_props()["provisioningState"] == "Succeeded"
    assert env.meter(accepted.operation_id).start == START + 10  # the first poll after the wait timed out
    assert env.sfn.execution(accepted.operation_id).runner.caught == [{"Error": "States.Timeout", "Cause": None}]


def test_a_callback_that_comes_before_the_wait_has_a_token_ends_the_next_wait_at_once(env, node):
    # Given an instance ready the moment it is asked for, and its callback arriving before the workflow waits
    env.dgx.provisioning_seconds = 0
    accepted, _ = env.provision()
    assert accepted is not None
    env.run(stop_before={"AwaitReady"})
    assert env.w.dgx_callbacks.receive(*ready(env)) == "signaled"
    assert env.instance().ready_signal
    # When the workflow goes on
    env.run(advance=0)
    # Then its wait ended at once (the signal taken), and it Succeeded without waiting for the poll interval
    assert env.instance_props()["provisioningState"] == "Succeeded"
    assert env.meter(accepted.operation_id).start == START
    assert env.instance().ready_signal is False


def test_a_callback_twice_or_after_the_poll_moved_on_is_harmless(env, node):
    accepted, _ = env.provision()
    assert accepted is not None
    env.run(advance=3)
    headers, body = ready(env)
    assert env.w.dgx_callbacks.receive(headers, body) == "resumed"
    # the same callback again (the platform retried) before the workflow went on: nothing waits on that token
    assert env.w.dgx_callbacks.receive(headers, body) == "signaled"
    env.run(advance=0)
    assert env.instance_props()["provisioningState"] == "Succeeded"
    # and once more after it Succeeded: nothing provisions any more
    assert env.w.dgx_callbacks.receive(headers, body) == "ignored"
    assert entered(env, accepted.operation_id, "Poll") == 1
    assert env.op_status(accepted.operation_id) == "Succeeded" and env.instance().ready_signal is False


def test_a_failed_callback_leads_to_the_poll_and_compensation(env, node):
    env.dgx.fail_on_ready = True
    accepted, _ = env.provision()
    assert accepted is not None
    env.run(advance=3)
    instance = env.instance()
    assert env.w.dgx_callbacks.receive(*callback(env, "instance", instance.dgx_id, instance.arm_id, "Failed")) == (
        "resumed"
    )
    env.run(advance=0)
    assert env.instance().compensation_error["code"] == "GpuInitFailed"  # compensating at once, not at 10 s
    assert env.clock() == START + 3
    env.run()  # (the compensation waits for the platform to confirm the removal)
    assert env.instance_props()["provisioningState"] == "Failed"
    assert env.instance_props()["error"]["code"] == "GpuInitFailed"


def test_a_callback_for_another_dgx_instance_or_no_instance_of_ours_is_ignored(env, node):
    accepted, _ = env.provision()
    assert accepted is not None
    env.run(advance=3)
    arm_id = env.instance().arm_id
    assert env.w.dgx_callbacks.receive(*callback(env, "instance", "dgxi-other", arm_id, "Running")) == "ignored"
    assert env.w.dgx_callbacks.receive(*callback(env, "instance", "dgxi-x", "not-an-arm-id", "Running")) == "ignored"
    missing = arm_id.replace("/llama", "/nobody")
    assert env.w.dgx_callbacks.receive(*callback(env, "instance", env.instance().dgx_id, missing, "Running")) == (
        "ignored"
    )
    assert env.instance().ready_signal is False and not env.sfn.completions


@pytest.mark.parametrize("fault", ["wrong secret", "stale", "from the future", "no signature", "no timestamp"])
def test_a_callback_not_signed_now_by_the_platform_is_refused_before_anything_is_read(env, node, fault):
    env.provision()
    env.run(advance=3)
    instance = env.instance()
    args: dict[str, Any] = {
        "wrong secret": {"secret": "guessed"},
        "stale": {"at": env.clock() - 301},
        "from the future": {"at": env.clock() + 301},
    }.get(fault, {})
    headers, body = callback(env, "instance", instance.dgx_id, instance.arm_id, "Running", **args)
    if fault == "no signature":
        del headers["x-dgx-signature"]
    if fault == "no timestamp":
        del headers["x-dgx-timestamp"]
    with pytest.raises(CallbackRejected):
        env.w.dgx_callbacks.receive(headers, body)
    assert env.instance().ready_signal is False and not env.sfn.completions


def test_a_signed_body_that_is_no_event_is_malformed(env):
    timestamp = str(int(env.clock()))
    for body in (b"not json", b"[]", json.dumps({"type": "instance", "id": "x"}).encode()):
        with pytest.raises(CallbackMalformed):
            env.w.dgx_callbacks.receive(
                {"x-dgx-timestamp": timestamp, "x-dgx-signature": signature(SECRET, timestamp, body)}, body
            )
    event = {"eventId": "e", "type": "instance", "id": "i", "name": "n", "status": "Succeeded", "time": "t"}
    body = json.dumps(event).encode()  # an instance never "Succeeds" on the platform
    with pytest.raises(CallbackMalformed):
        env.w.dgx_callbacks.receive(
            {"x-dgx-timestamp": timestamp, "x-dgx-signature": signature(SECRET, timestamp, body)}, body
        )


def test_with_no_secret_configured_every_callback_is_refused(node):
    env = Env(make_settings(dgx_callback_url=CALLBACK_URL))
    headers, body = callback(env, "instance", "dgxi-1", "/x", "Running", secret="")
    with pytest.raises(CallbackRejected, match="no callback secret"):
        env.w.dgx_callbacks.receive(headers, body)


# ------------------------------------------------------------------------------------------------ jobs
def test_a_job_ended_callback_finishes_the_job_at_once_without_the_tracker(env, node):
    accepted = env.submit("job-1", 2, 160)
    env.run()
    job = env.job("job-1")
    assert job.status == "Running" and [c["callback_url"] for c in env.dgx.called("submit_job")] == [CALLBACK_URL]
    # When the job ends on the platform after 40 s, long before its next check, and the platform calls back
    env.clock.advance(40)
    env.finish_on_platform("job-1")
    assert env.w.dgx_callbacks.receive(*callback(env, "job", job.dgx_id, job.arm_id, "Succeeded")) == "resumed"
    env.run(advance=0)
    # Then it is Succeeded now, billed to the platform's end, without a run of the tracker
    props = env.job_props("job-1")
    assert props["status"] == "Succeeded" and env.op_status(accepted.operation_id) == "Succeeded"
    assert env.meter(accepted.operation_id).end == START + 40
    # And the same callback again finds nothing running
    assert env.w.dgx_callbacks.receive(*callback(env, "job", job.dgx_id, job.arm_id, "Succeeded")) == "ignored"


def test_a_job_callback_the_platform_does_not_confirm_ends_nothing(env, node):
    env.submit("job-1", 2, 160)
    env.run()
    job = env.job("job-1")
    assert env.w.dgx_callbacks.receive(*callback(env, "job", job.dgx_id, job.arm_id, "Succeeded")) == "checked"
    env.run(advance=0)
    assert env.status("job-1") == "Running"


def test_a_job_callback_before_its_execution_waits_leaves_it_to_the_trackers_next_run(env, node):
    env.submit("job-1", 2, 160)
    env.run(stop_before={"Track"})
    env.finish_on_platform("job-1")
    job = env.job("job-1")
    assert env.w.dgx_callbacks.receive(*callback(env, "job", job.dgx_id, job.arm_id, "Succeeded")) == "due"
    env.run()
    assert env.status("job-1") == "Running"  # its wait began after the callback: the tracker's check ends it
    env.clock.advance(env.settings.job_poll_interval_seconds + 1)
    assert env.track()["ended"] == 1
    assert env.status("job-1") == "Succeeded"
