"""Priority preemption (issue 32, part 2): a higher-priority job that cannot be placed stops lower-priority
preemptible work of its subscription, with a grace period the stopped job is told about; the stopped job ends
``Preempted`` (or is requeued, when it asked), billed to the moment it stopped, saying by which job and why; never
without consent, never across a quota wall (domain/preemption.py)."""

from __future__ import annotations

from decimal import Decimal

from itl_accelerator.models.quotas import QuotaWrite
from tests.services.conftest import RG, Env
from tests.services.test_metering import DAY, t
from tests.services.test_retries import cost_of

GRACE = 30  # the settings' default grace period (JOB_PREEMPTION_GRACE_SECONDS)


def start(env: Env, name: str, devices: int, at: str, **props) -> str:
    """Submit ``name`` at ``at`` as ann (a consumer) and let it run; its operation id."""
    env.clock.set(at)
    operation = env.submit(name, devices, devices * 80, ctx=env.consumer("ann"), **props).operation_id
    env.run()
    assert env.status(name) == "Running", env.job_props(name)["statusReason"]
    return operation


def test_a_higher_priority_job_preempts_a_lower_one_that_agreed_with_its_grace_period_and_bill(env: Env):
    env.add_node("a")
    low = start(env, "low", 8, f"{DAY}T10:00:00", priority=2, preemptible=True)
    # When bob submits a priority-8 job of 4 GPUs at 10:10 and no node has room
    env.clock.set(f"{DAY}T10:10:00")
    env.submit("high", 4, 320, ctx=env.consumer("bob"), priority=8)
    env.run(advance=0)
    # Then the low job is told it is preempted, by which job, with its grace period, and still runs meanwhile
    props = env.job_props("low")
    high_id = env.job("high").document["id"]
    assert props["preemptedBy"] == high_id and props["preemptedAt"] == f"{DAY}T10:10:00.000000Z"
    assert "Preempted by a job of priority 8" in props["statusReason"]
    assert f"{GRACE} s grace period" in props["statusReason"]
    platform_job = env.dgx.jobs[str(env.job("low").dgx_id)]
    assert platform_job.cancels and platform_job.cancels[0][0] == GRACE  # the platform was given the grace period
    assert props["status"] == "Running" and env.status("high") == "Pending"
    assert env.job("high").drain_node is not None  # the node is held for the high job: no one else takes it
    # When the grace period runs out (the container ignored SIGTERM) and the workflows go on
    env.run(advance=GRACE + 10)
    # Then the low job ended Preempted, billed to the moment it stopped, its operation canceled saying why
    props = env.job_props("low")
    assert props["status"] == "Preempted" and props["provisioningState"] == "Canceled"
    assert props["endedAt"] == f"{DAY}T10:10:30.000000Z"
    assert props["gpuSeconds"] == 8 * 630
    assert Decimal(props["cost"]["amount"]) == cost_of(8, 630)
    meter = env.meter(low)
    assert meter is not None and meter.end == t(f"{DAY}T10:10:30")
    operation = env.operation(low)
    assert str(operation.status) == "Canceled" and operation.body["error"]["code"] == "JobPreempted"
    # And the high job runs on the node it freed
    assert env.status("high") == "Running" and env.job("high").node.name == "a"
    # And the low job's consumer can read who and why (the audit trail says it too)
    ann_view = env.w.jobs.get(env.consumer("ann"), env.sub, RG, "low")["properties"]
    assert "priority 8" in ann_view["statusReason"] and ann_view["preemptedAt"] == props["preemptedAt"]
    assert "preemptedBy" not in ann_view  # bob's job is not ann's to learn of; admins see it, and the audit trail
    assert any(e.change_summary.endswith(f"By {high_id}.") for e in env.audit(env.job("low").document["id"]))


def test_a_job_that_did_not_agree_or_is_not_lower_is_never_preempted(env: Env):
    env.add_node("a", devices=8)
    start(env, "mine", 4, f"{DAY}T10:00:00", priority=1)  # not preemptible: the default
    start(env, "peer", 4, f"{DAY}T10:00:01", priority=8, preemptible=True)  # preemptible but not lower
    env.clock.set(f"{DAY}T10:05:00")
    env.submit("high", 4, 320, priority=8)
    env.run(advance=60)
    assert env.status("high") == "Pending" and env.job("high").drain_node is None
    assert env.status("mine") == "Running" and env.status("peer") == "Running"
    assert all(not j.cancels for j in env.dgx.jobs.values())


def test_preemption_never_crosses_a_quota_wall(env: Env):
    # Given a quota of 8 H100s in eastus, 4 held by a job that may not be preempted on another node
    env.add_node("a", devices=8)
    env.add_node("b", devices=4)
    env.w.quotas.put(
        env.admin(), env.sub, "eastus", "gpus-h100", QuotaWrite.model_validate({"properties": {"limit": {"value": 8}}})
    )
    start(env, "fixed", 4, f"{DAY}T10:00:00", priority=1)
    start(env, "low", 4, f"{DAY}T10:00:01", priority=1, preemptible=True)
    assert {env.job("fixed").node.name, env.job("low").node.name} == {"a", "b"}
    # When a priority-9 job asks for 8: node a could be freed, but the quota would still be full
    env.clock.set(f"{DAY}T10:05:00")
    env.submit("high", 8, 640, priority=9)
    env.run(advance=60)
    # Then nothing is preempted: the wall holds, and the job says it waits for quota
    assert env.status("low") == "Running" and env.status("high") == "Pending"
    assert env.job("high").drain_node is None and all(not j.cancels for j in env.dgx.jobs.values())


def test_a_preempted_job_that_asked_to_be_requeued_runs_again_after_the_higher_one(env: Env):
    env.add_node("a")
    low = start(env, "low", 8, f"{DAY}T10:00:00", priority=2, preemptible=True, preemptMode="Requeue")
    env.clock.set(f"{DAY}T10:10:00")
    env.submit("high", 8, 640, priority=8)
    env.run(advance=GRACE + 10)
    # Then the low job is back in the queue, its preempted run recorded and billed
    props = env.job_props("low")
    assert props["status"] == "Pending" and props["attempt"] == 2 and "Waiting for capacity" in props["statusReason"]
    assert any("Requeued, as it asked" in e.change_summary for e in env.audit(env.job("low").document["id"]))
    (first,) = props["attempts"]
    assert first["status"] == "Preempted" and first["endedAt"] == f"{DAY}T10:10:30.000000Z"
    assert Decimal(first["cost"]["amount"]) == cost_of(8, 630)
    assert env.status("high") == "Running"
    # When the high job ends, the low one runs again as its second attempt, a new platform job and meter
    env.clock.set(f"{DAY}T10:20:00")
    env.end_job("high", at=t(f"{DAY}T10:20:00"))
    assert env.status("low") == "Running" and env.job_props("low")["attempt"] == 2
    second = env.meter(f"{low}.attempt-2")
    assert second is not None and second.attempt == 2


def test_a_job_preempted_before_it_ran_is_requeued_under_a_new_attempt_id(env: Env):
    # Given a preemptible job placed but not yet submitted to the DGX Platform
    env.add_node("a")
    env.clock.set(f"{DAY}T10:00:00")
    low = env.submit("low", 8, 640, priority=1, preemptible=True, preemptMode="Requeue").operation_id
    env.run(stop_before=("Submit",))
    assert env.status("low") == "Scheduled"
    # When a higher-priority job comes and the workflows go on
    env.submit("high", 8, 640, priority=9)
    env.run(stop_before=("Submit",))  # the high job waits and preempts the low one, still before its Submit
    assert env.job("low").cancel_requested
    env.run(advance=60)
    # Then the low job never ran (nothing billed, no attempt listed) and waits as attempt 2, the high one runs
    props = env.job_props("low")
    assert props["status"] == "Pending" and props["attempt"] == 2 and not props.get("attempts")
    assert env.meter(low) is None and env.status("high") == "Running"
    assert [j.key for j in env.dgx.jobs.values()] == [env.job("high").operation_id]


def test_a_waiting_job_that_may_not_preempt_does_not_shield_the_work_behind_it(env: Env):
    # Given two 8-GPU nodes: one running a preemptible priority-1 job, one a job that may not be preempted
    env.add_node("a")
    env.add_node("b")
    start(env, "low", 8, f"{DAY}T10:00:00", priority=1, preemptible=True)
    start(env, "fixed", 8, f"{DAY}T10:00:01", priority=1)
    # And a priority-9 multi-node job waiting at the head of the queue (a gang never preempts)
    env.clock.set(f"{DAY}T10:05:00")
    gang = {"kind": "GPU", "count": 8, "nodes": 2, "memoryGb": 640, "model": "H100"}
    env.submit("gang", 16, 1280, ctx=env.consumer("mallory"), priority=9, accelerator=gang)
    env.run(advance=0)
    # When a priority-8 job of one node comes
    env.submit("high", 8, 640, priority=8)
    env.run(advance=GRACE + 10)
    # Then it preempts the low job all the same, and runs
    assert env.status("low") == "Preempted" and env.status("high") == "Running"
    assert env.status("fixed") == "Running" and env.status("gang") == "Pending"


def test_a_cancel_during_the_preemptions_grace_period_wins_and_the_job_ends_canceled_not_requeued(env: Env):
    # Given a preemptible job that asked to be requeued, told it is preempted (within its grace period)
    env.add_node("a")
    low = start(env, "low", 8, f"{DAY}T10:00:00", priority=2, preemptible=True, preemptMode="Requeue")
    env.clock.set(f"{DAY}T10:10:00")
    env.submit("high", 8, 640, ctx=env.consumer("bob"), priority=8)
    env.run(advance=0)
    assert env.job_props("low")["preemptedAt"] == f"{DAY}T10:10:00.000000Z"
    # When ann cancels it 10 s into the grace period
    env.clock.set(f"{DAY}T10:10:10")
    accepted = env.w.jobs.cancel(env.consumer("ann"), env.sub, RG, "low")
    props = env.job_props("low")
    assert props["cancelRequestedBy"] == "ann"
    assert "ends Canceled, not Preempted" in props["statusReason"]
    env.run(advance=GRACE + 10)
    # Then her cancel wins: it ends Canceled (not Preempted, not requeued), billed until it stopped, saying both
    props = env.job_props("low")
    assert props["status"] == "Canceled" and props["provisioningState"] == "Canceled"
    assert props["statusReason"].startswith("Canceled by ann during its preemption's grace period")
    assert props.get("attempt", 1) == 1 and not props.get("attempts")
    assert props["endedAt"] == f"{DAY}T10:10:30.000000Z"
    assert str(env.operation(accepted.operation_id).status) == "Succeeded"
    assert env.operation(low).body["error"]["code"] == "JobCanceled"
    # And the higher-priority job still gets the node
    assert env.status("high") == "Running"
