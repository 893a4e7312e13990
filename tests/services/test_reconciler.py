"""The reconciler (services/schedules/reconciler.py): every workload whose lease ran out is driven to an end — an
execution that never started is started, one that ended mid-way is compensated or finished here, a stale lease is
cleared — and capacity is released exactly once, only after the DGX Platform confirmed the removal."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from itl_accelerator.domain.records import Lease
from itl_accelerator.repositories.protocols import Expect
from tests.services.conftest import Allocation, Env

HELD = Allocation(2, 160, 1)


def reconcile(env: Env) -> list[str]:
    """One run as of the moment every lease now held has run out; the outcomes. (The API's start leases are taken
    from the wall clock, not the fake one — see the report — so the run is given that moment rather than the clock
    being moved there.)"""
    leases = [w.lease.until for w in env.state.workloads.values() if w.lease is not None and w.lease.kind == "LEASE"]
    now = max([env.clock(), *(until + 1 for until in leases)])
    return [r["outcome"] for r in env.w.reconciler.run(now=now).repaired]


# ------------------------------------------------------------------------------------------------ instances
def test_a_provisioning_whose_execution_never_started_is_started_and_runs(env, node):
    # Given an instance accepted while StartExecution was throttled: the caller got 202, the GPUs are held
    env.sfn.fail_next_start()
    accepted, _ = env.provision()
    assert env.sfn.started == [] and env.allocation() == HELD
    env.run()
    assert env.instance_props()["provisioningState"] == "Accepted"
    # When the reconciler runs after its start lease ran out
    assert reconcile(env) == ["restarted"]
    # Then it started the execution (audited as SYSTEM) with the operation's input, and the instance provisions
    (started,) = env.sfn.started
    assert started.name == accepted.operation_id and started.input["instanceName"] == "llama"
    assert any(
        e.actor_type == "SYSTEM" and "which had not started" in e.change_summary
        for e in env.audit(env.instance().arm_id)
    )
    env.run()
    assert env.instance_props()["provisioningState"] == "Succeeded"
    assert env.allocation() == HELD  # held once
    # And a later run finds nothing to do: a Succeeded instance holds no lease
    env.clock.advance(3600)
    assert env.w.reconciler.run().examined == 0


def test_a_provisioning_still_running_only_has_its_lease_renewed(env, node):
    env.dgx.provisioning_seconds = None
    provision_op, _ = env.provision()
    env.run(advance=30)
    assert reconcile(env) == ["still_running"]
    assert env.instance().lease.until > env.clock()
    assert env.instance_props()["provisioningState"] == "Provisioning" and env.allocation() == HELD
    assert env.sfn.execution(provision_op.operation_id).status == "RUNNING"


def test_an_execution_that_ended_mid_provisioning_is_compensated_and_released_once(env, node):
    # Given a provisioning whose execution ended (failed) while the platform was still making the instance
    env.dgx.provisioning_seconds = None
    env.dgx.deletion_seconds = None
    accepted, _ = env.provision()
    env.run(advance=30)
    env.sfn.set_status(accepted.operation_id, "FAILED")
    # When the reconciler runs: it asks the platform to delete the instance; the GPUs stay while it deletes
    assert reconcile(env) == ["awaiting_removal"]
    assert env.allocation() == HELD
    assert [i.status for i in env.dgx.live_instances()] == ["Deleting"]
    assert reconcile(env) == ["awaiting_removal"]
    # And once the platform confirms it gone, the next run releases the GPUs, once
    env.dgx.finish_deletions()
    assert reconcile(env) == ["released"]
    props = env.instance_props()
    assert props["provisioningState"] == "Failed" and props["error"]["code"] == "ProvisioningInterrupted"
    assert env.op_status(accepted.operation_id) == "Failed"
    assert env.allocation() == Allocation(0, 0, 1)
    assert sum("capacity released" in e.change_summary for e in env.audit()) == 1
    # And later runs change nothing
    assert reconcile(env) == []


def test_overlapping_runs_release_capacity_once(env, node):
    env.dgx.provisioning_seconds = None
    for name in ("i-1", "i-2"):
        accepted, _ = env.provision(name)
        env.run(advance=30)
        env.sfn.set_status(accepted.operation_id, "FAILED")
    assert env.allocation() == Allocation(4, 320, 2)
    # When a second run read the lease index before the first one's writes (an overlapping schedule delivery)
    now = max(w.lease.until for w in env.state.workloads.values() if w.lease is not None) + 1
    stale = env.repos.leases.expired(now, 25)
    first = env.w.reconciler.run(now=now)

    class StaleIndex:
        def expired(self, now: float, limit: int, kind: str = "LEASE", token: str | None = None) -> Any:
            return stale

    env.repos.leases = StaleIndex()
    second = env.w.reconciler.run(now=now)
    # Then each instance's GPUs came back exactly once
    assert [r["outcome"] for r in first.repaired] == ["released", "released"]
    assert second.examined == 2 and second.repaired == []
    assert env.allocation() == Allocation(0, 0, 2)
    assert sum("capacity released" in e.change_summary for e in env.audit()) == 2


def test_a_deletion_whose_execution_never_started_is_finished(env, node):
    env.provision()
    env.run()
    env.sfn.fail_next_start("ServiceUnavailable")
    deleting = env.delete_instance()
    assert deleting is not None and env.instance_props()["provisioningState"] == "Deleting"
    assert reconcile(env) == ["restarted"]
    env.run()
    assert env.instance() is None and env.allocation() == Allocation(0, 0, 0)
    assert env.op_status(deleting.operation_id) == "Succeeded"


def test_a_deletion_whose_execution_ended_is_finished_by_the_reconciler_itself(env, node):
    env.provision()
    env.run()
    env.dgx.deletion_seconds = None
    deleting = env.delete_instance()
    env.run(advance=30)
    env.sfn.set_status(deleting.operation_id, "ABORTED")
    assert reconcile(env) == ["awaiting_removal"]
    env.dgx.finish_deletions()
    assert reconcile(env) == ["deleted"]
    assert env.instance() is None and env.allocation() == Allocation(0, 0, 0)


def test_a_stale_lease_is_cleared(env, node):
    env.provision()
    env.run()
    instance = env.instance()
    # Given a Succeeded instance that still carries a lease (a step's bookkeeping that outlived it)
    assert env.repos.instances.note(
        instance, replace(instance, lease=Lease.owned(env.clock() + 10)), expect=Expect(etag=instance.etag)
    )
    report = env.w.reconciler.run(now=env.clock() + 60)
    assert report.skipped == 1 and report.repaired == []
    assert env.instance().lease == Lease.tracked(env.clock() + 60)  # back to the job tracker's watch
    assert env.instance_props()["provisioningState"] == "Succeeded" and env.allocation() == HELD
    assert env.w.reconciler.run(now=env.clock() + 120).examined == 0


# ------------------------------------------------------------------------------------------------ jobs
def test_a_job_whose_execution_never_started_is_started_and_runs(env, node):
    env.sfn.fail_next_start()
    accepted = env.submit("j", 2, 160)
    assert env.sfn.started == []
    assert reconcile(env) == ["restarted"]
    assert env.sfn.execution(accepted.operation_id).input["jobName"] == "j"
    env.run()
    assert env.status("j") == "Running"
    env.end_job("j")
    assert env.status("j") == "Succeeded" and env.allocation() == Allocation(0, 0)


def test_a_running_job_whose_execution_ended_is_finished_and_its_gpus_released(env, node):
    accepted = env.submit("j", 2, 160)
    env.run(stop_before={"Track"})  # it runs on the platform; its execution then failed before tracking it
    env.sfn.set_status(accepted.operation_id, "FAILED")
    assert env.status("j") == "Running" and env.allocation() == Allocation(2, 160)
    env.clock.advance(120)
    assert reconcile(env) == ["released"]
    props = env.job_props("j")
    assert props["status"] == "Failed"
    assert props["statusReason"] == "The job's workflow ended (FAILED) before the job did."
    assert [j.status for j in env.dgx.jobs.values()] == ["Canceled"]  # stopped on the platform first
    assert env.allocation() == Allocation(0, 0)
    assert env.op_status(accepted.operation_id) == "Failed"


def test_a_job_the_platform_does_not_confirm_stopped_keeps_its_gpus(env, node):
    accepted = env.submit("j", 2, 160)
    env.run(stop_before={"Track"})
    env.sfn.set_status(accepted.operation_id, "FAILED")
    env.dgx.ignore_cancels = True
    assert reconcile(env) == ["awaiting_removal"]
    assert env.status("j") == "Running" and env.allocation() == Allocation(2, 160)
    env.dgx.ignore_cancels = False
    assert reconcile(env) == ["released"]
    assert env.status("j") == "Failed" and env.allocation() == Allocation(0, 0)


def test_the_reconciler_retries_placement_of_waiting_jobs(env):
    # Given a job waiting for a cordoned node, and the node made available without a fleet change being delivered
    env.add_node(availability="Cordoned")
    env.submit("j", 2, 160)
    env.run()
    assert env.status("j") == "Pending"
    env.patch_node("dgx-1", {"properties": {"availability": "Available"}})
    assert env.status("j") == "Pending"
    # When its lease runs out (JOB_PLACEMENT_RETRY_SECONDS) the reconciler serves the queue
    assert reconcile(env) == ["still_running"]
    env.run()
    assert env.status("j") == "Running"


def test_a_finished_jobs_stale_lease_is_cleared(env, node):
    env.submit("j", 1, 80)
    env.run()
    env.end_job("j")
    job = env.job("j")
    assert env.repos.jobs.note(job, replace(job, lease=Lease.owned(env.clock())), expect=Expect(etag=job.etag))
    report = env.w.reconciler.run(now=env.clock() + 10)
    assert report.skipped == 1 and env.job("j").lease is None


def test_a_failed_compensation_is_finished_and_capacity_released_once(env, node):
    # Given a provisioning that failed and whose compensation failed too (the platform refused the deletion): its
    # execution ended, and the instance still holds its GPUs
    env.dgx.fail_on_ready = True
    env.dgx.refuse_deletes = True
    accepted, _ = env.provision()
    env.run()
    execution = env.sfn.execution(accepted.operation_id)
    assert execution.status == "FAILED" and execution.error == "CompensationFailed"
    assert env.instance_props()["provisioningState"] == "Provisioning" and env.allocation() == HELD
    # When the platform deletes again and the reconciler runs
    env.dgx.refuse_deletes = False
    assert reconcile(env) == ["released"]
    # Then the instance is Failed, saying its workflow was interrupted, gone from the platform, its GPUs back once
    props = env.instance_props()
    assert props["provisioningState"] == "Failed" and props["error"]["code"] == "ProvisioningInterrupted"
    assert env.dgx.live_instances() == [] and env.allocation() == Allocation(0, 0, 1)
    assert reconcile(env) == []


def test_a_waiting_job_whose_execution_was_aborted_does_not_keep_the_gpus_placement_gave_it(env, node):
    env.submit("a", 8, 640)
    waiting = env.submit("w", 2, 160)
    env.run()
    env.sfn.set_status(waiting.operation_id, "ABORTED")
    # When capacity frees, placement serves the queue: it reserves for the job, but nothing waits to be resumed
    env.end_job("a")
    assert env.status("w") == "Scheduled" and env.allocation() == Allocation(2, 160)
    # Then the reconciler ends the job and gives its GPUs back
    assert reconcile(env) == ["released"]
    assert env.job_props("w")["statusReason"] == "The job's workflow ended (ABORTED) before the job did."
    assert env.allocation() == Allocation(0, 0)


def test_a_pending_job_whose_execution_failed_is_ended_and_leaves_the_queue(env, node):
    env.submit("a", 8, 640)
    waiting = env.submit("w", 2, 160)
    env.run()
    env.sfn.set_status(waiting.operation_id, "FAILED")
    assert reconcile(env) == ["ended"]
    assert env.status("w") == "Failed" and env.repos.jobs.waiting(env.sub, 10) == []
    assert env.op_status(waiting.operation_id) == "Failed"


def test_a_workload_the_platform_keeps_refusing_does_not_stop_the_reconciler_for_the_others(env, node):
    # Given an instance stuck after a failed compensation, whose deletion the platform keeps refusing
    env.dgx.fail_on_ready = True
    env.dgx.refuse_deletes = True
    env.provision()
    env.run()
    # And, later, a running job whose execution failed
    env.clock.advance(2000)
    job = env.submit("j", 2, 160)
    env.run(stop_before={"Track"})
    env.sfn.set_status(job.operation_id, "FAILED")
    # When the reconciler runs, the job is still finished and its GPUs released
    outcomes = reconcile(env)
    assert "released" in outcomes
    assert env.status("j") == "Failed" and env.allocation() == HELD
