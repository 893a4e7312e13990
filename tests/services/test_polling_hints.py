"""How often a client is told to poll an operation (``Retry-After``; services/common/lro.py ``poll_after``): the
same on the accepting response, the operation's status and its result, and — for a job's operation, which ends with
the job — growing with the time the job has run, up to ``JOB_POLL_MAX_INTERVAL_SECONDS`` (issue 27: a fixed 30 s
made long jobs' pollers fill the API)."""

from __future__ import annotations

from datetime import datetime

from tests.services.conftest import Env, make_settings


def test_a_job_operations_hint_grows_with_its_run_and_is_capped():
    env = Env(make_settings(job_poll_interval_seconds=30, job_poll_max_interval_seconds=300))
    env.add_node()
    accepted = env.submit("train", 1, 80)
    assert accepted.retry_after == 30
    body, kind = env.w.operations.get(env.admin(), env.sub, accepted.location, accepted.operation_id)
    hints = {}
    for elapsed in (0, 59, 120, 400, 3600, 7 * 24 * 3600):
        env.clock.set(accepted_at(body) + elapsed)
        hints[elapsed] = env.w.operations.retry_after(body, kind)
    assert hints == {0: 30, 59: 30, 120: 60, 400: 200, 3600: 300, 7 * 24 * 3600: 300}


def test_an_instance_operation_and_a_cancel_keep_their_short_hints():
    env = Env()
    env.add_node()
    accepted, _ = env.provision()
    assert accepted is not None and accepted.retry_after == env.settings.instance_poll_interval_seconds
    body, kind = env.w.operations.get(env.admin(), env.sub, accepted.location, accepted.operation_id)
    env.clock.advance(3600)
    assert env.w.operations.retry_after(body, kind) == env.settings.instance_poll_interval_seconds
    env.submit("train", 1, 80)
    cancel = env.w.jobs.cancel(env.admin(), env.sub, "rg1", "train")
    assert cancel.retry_after == 2


def accepted_at(body: dict) -> float:
    return datetime.fromisoformat(body["startTime"].replace("Z", "+00:00")).timestamp()
