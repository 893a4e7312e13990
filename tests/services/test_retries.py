"""Retries (issue 32, part 3): a job with a ``retryStrategy`` runs again when an attempt fails on the DGX Platform,
by its exit code or reason, after a backoff; each attempt is its own platform job and its own meter, billed under
the job's allocation id with its attempt number; the job shows every attempt; a cancel ends them all."""

from __future__ import annotations

from decimal import Decimal

import pytest

from itl_accelerator.billing.metering import BillingTerms, allocation_charges
from tests.services.conftest import Env
from tests.services.test_metering import DAY, export_rows, money, sync, t

#: retried on exit code 3 only (AWS Batch's pattern: the last condition makes it "only these")
ON_EXIT_3 = {
    "attempts": 3,
    "evaluateOnExit": [{"onExitCode": "3", "action": "RETRY"}, {"onReason": "*", "action": "EXIT"}],
    "intervalSeconds": 30,
}


def cost_of(devices: int, seconds: int, price: str = "2.5") -> Decimal:
    """What ``devices`` GPUs for ``seconds`` cost at ``price`` per GPU-hour with the nodes' 60 s increment and minimum."""
    terms = BillingTerms(Decimal(price), "USD", 60, 60)
    start = t(f"{DAY}T00:00:00")
    return sum(
        (
            c.cost
            for c in allocation_charges(terms, gpus=devices, start=start, end=start + seconds, now=start + seconds)
        ),
        Decimal(0),
    )


def fail(env: Env, name: str, at: str, exit_code: int) -> None:
    """The job's attempt ends Failed on the platform with ``exit_code`` at ``at``; the tracker reports it."""
    env.clock.set(at)
    env.end_job(name, "Failed", exit_code=exit_code, at=t(at))


@pytest.fixture
def retried(env: Env) -> tuple[Env, str]:
    """``train`` (2 GPUs, retried on exit code 3) failed with 3 at 10:05 after 5 minutes; its second attempt runs."""
    env.add_node("a")
    env.clock.set(f"{DAY}T10:00:00")
    operation = env.submit("train", 2, 160, retryStrategy=ON_EXIT_3).operation_id
    env.run()
    assert env.status("train") == "Running"
    fail(env, "train", f"{DAY}T10:05:00", 3)
    return env, operation


def test_a_failed_attempt_runs_again_after_its_backoff_as_a_platform_job_and_meter_of_its_own(retried):
    env, operation = retried
    job = env.job("train")
    props = env.job_props("train")
    # Then the second attempt runs, placed again 30 s after the first failed (its backoff)
    assert env.status("train") == "Running" and props["attempt"] == 2
    assert props["startedAt"] == f"{DAY}T10:05:30.000000Z"
    # And the first shows how it ended, where and what it cost
    (first,) = props["attempts"]
    assert first["attempt"] == 1 and first["status"] == "Failed" and first["exitCode"] == 3
    assert "exited with code 3" in first["statusReason"]
    assert first["assignedNode"].endswith("/sparkNodes/a")
    assert (first["startedAt"], first["endedAt"]) == (f"{DAY}T10:00:00.000000Z", f"{DAY}T10:05:00.000000Z")
    assert first["gpuSeconds"] == 2 * 300
    assert first["cost"] == {"amount": format(cost_of(2, 300), "f"), "currency": "USD"}
    # And each attempt is its own platform job, submitted under its own idempotency key
    keys = sorted(j.key for j in env.dgx.jobs.values())
    assert keys == sorted([operation, f"{operation}.attempt-2"])
    assert job.dgx_id is not None and env.dgx.jobs[job.dgx_id].key == f"{operation}.attempt-2"
    # And the first attempt's meter ended when it failed; the second's started when it did; the node holds 2 GPUs
    first_meter, second_meter = env.meter(operation), env.meter(f"{operation}.attempt-2")
    assert first_meter is not None and first_meter.end == t(f"{DAY}T10:05:00")
    assert second_meter is not None and second_meter.start == t(f"{DAY}T10:05:30") and second_meter.end is None
    assert (second_meter.attempt, second_meter.job_allocation_id) == (2, operation)
    assert env.allocation("a").devices == 2
    # And its operation is still Running: the job has not ended
    assert env.op_status(operation) == "Running"


def test_the_job_succeeds_on_its_second_attempt_costs_both_and_the_export_numbers_them(retried):
    env, operation = retried
    env.clock.set(f"{DAY}T10:15:30")
    env.end_job("train", at=t(f"{DAY}T10:15:30"))
    props = env.job_props("train")
    # Then it Succeeded, showing both attempts, and its usage and cost are theirs added up
    assert props["status"] == "Succeeded" and env.op_status(operation) == "Succeeded"
    assert [(a["attempt"], a["status"]) for a in props["attempts"]] == [(1, "Failed"), (2, "Succeeded")]
    assert props["gpuSeconds"] == 2 * 300 + 2 * 600
    assert Decimal(props["cost"]["amount"]) == cost_of(2, 300) + cost_of(2, 600)
    assert Decimal(props["cost"]["amount"]) == sum(Decimal(a["cost"]["amount"]) for a in props["attempts"])
    assert env.allocation("a").devices == 0
    # When the day is exported
    sync(env, "2025-03-11T01:00:00")
    env.w.billing_export.run(now=t("2025-03-11T01:30:00"))
    rows = [r for r in export_rows(env, DAY) if r["ResourceName"] == "train"]
    # Then every row of the job carries its allocation id, numbered by attempt, and each attempt bills its cost
    assert {r["x_AllocationId"] for r in rows} == {operation}
    assert {r["x_Attempt"] for r in rows} == {"1", "2"}
    for attempt in props["attempts"]:
        mine = [r for r in rows if r["x_Attempt"] == str(attempt["attempt"])]
        assert money(mine) == Decimal(attempt["cost"]["amount"])
    assert money(rows) == Decimal(props["cost"]["amount"])


def test_an_exit_code_the_strategy_exits_on_is_not_retried(env: Env):
    env.add_node("a")
    env.clock.set(f"{DAY}T10:00:00")
    env.submit("train", 1, 80, retryStrategy=ON_EXIT_3)
    env.run()
    fail(env, "train", f"{DAY}T10:01:00", 4)
    props = env.job_props("train")
    assert props["status"] == "Failed" and "with code 4" in props["statusReason"]
    assert [(a["attempt"], a["exitCode"]) for a in props["attempts"]] == [(1, 4)]
    assert len(env.dgx.jobs) == 1 and env.allocation("a").devices == 0


def test_attempts_are_bounded_and_back_off(env: Env):
    env.add_node("a")
    env.clock.set(f"{DAY}T10:00:00")
    strategy = {"attempts": 3, "intervalSeconds": 10, "backoffRate": 3}  # no conditions: any failure is retried
    env.submit("flaky", 1, 80, retryStrategy=strategy)
    env.run()
    fail(env, "flaky", f"{DAY}T10:01:00", 1)
    assert env.job_props("flaky")["startedAt"] == f"{DAY}T10:01:10.000000Z"  # 10 s
    fail(env, "flaky", f"{DAY}T10:02:00", 137)
    assert env.job_props("flaky")["startedAt"] == f"{DAY}T10:02:30.000000Z"  # 10 * 3 s
    fail(env, "flaky", f"{DAY}T10:03:00", 1)
    props = env.job_props("flaky")
    # Then after its third attempt it ends Failed, with each attempt's exit code, and no fourth ran
    assert props["status"] == "Failed"
    assert [(a["attempt"], a["exitCode"]) for a in props["attempts"]] == [(1, 1), (2, 137), (3, 1)]
    assert len(env.dgx.jobs) == 3
    assert props["gpuSeconds"] == 60 + 50 + 30
    assert Decimal(props["cost"]["amount"]) == cost_of(1, 60) + cost_of(1, 50) + cost_of(1, 30)


def test_a_cancel_during_the_backoff_ends_the_job_at_once_and_no_attempt_starts(env: Env):
    env.add_node("a")
    env.clock.set(f"{DAY}T10:00:00")
    env.submit("train", 1, 80, retryStrategy={**ON_EXIT_3, "intervalSeconds": 3600}, ctx=env.consumer("ann"))
    env.run()
    env.clock.set(f"{DAY}T10:01:00")
    env.finish_on_platform("train", "Failed", exit_code=3, at=t(f"{DAY}T10:01:00"))
    lease = env.job("train").lease
    assert lease is not None
    env.clock.set(max(lease.until + 1, env.clock()))
    env.w.job_tracker.run()
    env.run(advance=0)  # as far as the workflow goes now, the clock left where it is
    waiting = env.job("train")
    assert waiting.status == "Pending" and waiting.task_token  # waiting out its hour of backoff
    assert "Attempt 2 starts in 3600 s" in waiting.properties["statusReason"]
    # When its consumer cancels it
    env.w.jobs.cancel(env.consumer("ann"), env.sub, "rg1", "train")
    env.run()
    # Then it is Canceled at once (the clock did not wait out the backoff), billed for its one attempt only
    props = env.job_props("train")
    assert props["status"] == "Canceled" and env.clock() < t(f"{DAY}T10:02:00")
    assert len(env.dgx.jobs) == 1
    assert [a["attempt"] for a in props["attempts"]] == [1]
    assert Decimal(props["cost"]["amount"]) == cost_of(1, 60)


def test_a_job_past_its_max_duration_is_not_retried(env: Env):
    env.add_node("a")
    env.clock.set(f"{DAY}T10:00:00")
    env.submit("long", 1, 80, maxDurationMinutes=5, retryStrategy={"attempts": 3})
    env.run()
    env.clock.set(f"{DAY}T10:06:00")
    env.track()
    props = env.job_props("long")
    assert props["status"] == "Failed" and "max duration" in props["statusReason"]
    assert len(env.dgx.jobs) == 1 and [a["attempt"] for a in props["attempts"]] == [1]


def test_a_retry_is_billed_in_the_currency_of_its_first_attempt(env: Env):
    # Given a USD node and a cheaper EUR node, both in the job's ceiling at submission
    env.add_node("usd", devices=2, price=2.5)
    env.add_node("eur", devices=8, price=1.0, currency="EUR")
    env.clock.set(f"{DAY}T10:00:00")
    env.submit("train", 2, 160, retryStrategy=ON_EXIT_3)
    env.run()
    assert env.job("train").node is not None and env.job("train").node.name == "usd"  # best fit: no GPU left over
    # When the first attempt fails while another job holds the USD node
    env.clock.set(f"{DAY}T10:01:00")
    env.finish_on_platform("train", "Failed", exit_code=3, at=t(f"{DAY}T10:01:00"))
    env.submit("other", 2, 160, maxPrice={"pricePerGpuHour": 3, "currency": "USD"})
    lease = env.job("train").lease
    assert lease is not None
    env.clock.set(max(lease.until + 1, env.clock()))
    env.track()
    # Then the second attempt waits for a USD node rather than run in EUR (one job, one currency: its cost adds up)
    retry = env.job("train")
    assert retry.status == "Pending" and env.status("other") == "Running"
    assert {term.currency for term in retry.price_ceiling.terms} == {"USD"}
    assert env.allocation("eur").devices == 0
    # And once the USD node frees, the waiting attempt is served from the queue like any job
    env.clock.set(f"{DAY}T10:30:00")
    env.end_job("other", at=t(f"{DAY}T10:30:00"))
    assert env.status("train") == "Running" and env.job("train").node.name == "usd"


def test_a_strategy_that_says_nothing_valid_is_refused(env: Env):
    from pydantic import ValidationError

    for bad in (
        {"attempts": 11},
        {"attempts": 0},
        {"attempts": 2, "evaluateOnExit": [{"action": "RETRY"}]},
        {"attempts": 2, "evaluateOnExit": [{"onExitCode": "1a", "action": "RETRY"}]},
        {"attempts": 2, "evaluateOnExit": [{"onReason": "out of memory!", "action": "RETRY"}]},
        {"attempts": 2, "evaluateOnExit": [{"onExitCode": "1", "action": "MAYBE"}]},
        {"attempts": 2, "evaluateOnExit": [{"onExitCode": "1", "action": "RETRY"}] * 6},
        {"attempts": 2, "backoffRate": 0.5},
        {"attempts": 2, "backoffRate": "NaN"},  # a number, not a string read as one
        {"attempts": 2, "backoffRate": float("inf")},
    ):
        with pytest.raises(ValidationError):
            env.submit("bad", retryStrategy=bad)
