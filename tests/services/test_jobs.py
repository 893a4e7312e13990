"""The job lifecycle (services/workflows/job_steps.py through statemachines/job_lifecycle.asl.json), the job tracker
(services/schedules/job_tracker.py) and the API's submit/cancel/delete (services/api/jobs.py): what a user sees —
status and reason, the operations, the cost at the locked terms, GPUs back exactly once."""

from __future__ import annotations

import pytest

from itl_accelerator.dgx.errors import DgxPermanentError, DgxTransientError
from itl_accelerator.domain.states import JobStatus, LeaseKind, OperationStatus
from itl_accelerator.errors import AnotherOperationInProgress, BadRequest, Conflict, PropertyChangeNotAllowed
from itl_accelerator.models.jobs import SECRET_MASK, SparkJobWrite
from itl_accelerator.services.workflows.job_steps import epoch
from tests.services.conftest import START, Allocation, Env, job_body

FREE = Allocation(0, 0)


def started_at(env: Env, name: str) -> float:
    return epoch(env.job_props(name)["startedAt"])


# ------------------------------------------------------------------------------------------------ the whole run
def test_a_job_runs_to_its_end_and_costs_its_gpu_seconds_at_the_locked_terms(env, node):
    # Given the seed's job (4 GPUs, 320 GiB) on a node at 2.50 USD per GPU-hour, billed per started minute
    accepted = env.submit("job-1", 4, 320)
    assert accepted.created and accepted.location == "global"
    assert accepted.resource["properties"]["status"] == "Pending"
    assert accepted.resource["properties"]["provisioningState"] == "Accepted"
    execution = env.sfn.execution(accepted.operation_id)
    assert execution.input["jobName"] == "job-1" and execution.input["trackTimeoutSeconds"] == 7 * 24 * 3600 + 3600
    # When it is admitted, placed, submitted and tracked
    env.run()
    props = env.job_props("job-1")
    assert props["status"] == "Running" and props["provisioningState"] == "Running"
    assert props["assignedNode"].endswith("/sparkNodes/dgx-1") and started_at(env, "job-1") == START
    assert env.allocation() == Allocation(4, 320)
    assert env.op_status(accepted.operation_id) == "Running"
    meter = env.meter(accepted.operation_id)
    assert meter is not None and meter.start == START and meter.end is None and meter.gpus == 4
    # And it ends on the DGX Platform after 90 s, which the tracker reports
    env.clock.advance(90)
    env.end_job("job-1")
    # Then it Succeeded, its operation too, and it cost 4 x 90 GPU-seconds billed as 4 x 2 minutes at 2.50/h
    props = env.job_props("job-1")
    assert props["status"] == "Succeeded" and props["provisioningState"] == "Succeeded"
    assert props["statusReason"] == "The job ended Succeeded on the DGX Platform (exit code 0)."
    assert epoch(props["endedAt"]) == START + 90
    assert props["gpuSeconds"] == 360 and props["billableGpuSeconds"] == 480
    assert props["cost"] == {"amount": "0.333333", "currency": "USD"}
    assert env.op_status(accepted.operation_id) == "Succeeded"
    # And its GPUs are free, its meter ended at the platform's end, its execution is done
    assert env.allocation() == FREE
    assert env.meter(accepted.operation_id).end == START + 90
    assert env.sfn.execution(accepted.operation_id).status == "SUCCEEDED"
    assert [d["name"] for d in env.dgx.called("submit_job")] == [env.job("job-1").arm_id]


def test_workflow_changes_are_audited_as_system_under_the_requests_correlation_id(env, node):
    env.submit("j", 2, 160)
    env.run()
    env.clock.advance(60)
    env.end_job("j")
    events = env.audit(env.job("j").arm_id)
    # (the workflow's items are stamped by the wall clock, not the test's: compared without their order)
    (submitted,) = [e for e in events if e.actor_type == "User"]
    assert submitted.actor_id == "admin-1" and submitted.new_state["properties"]["status"] == "Pending"
    by_system = [e for e in events if e.actor_type == "SYSTEM"]
    summaries = [e.change_summary for e in by_system]
    assert len(by_system) == len(events) - 1
    assert "Placed on dgx-1; submitting to the DGX Platform." in summaries
    assert any(s.startswith("Running on the DGX Platform") for s in summaries)
    (ended,) = [e for e in by_system if e.change_summary.startswith("Job Succeeded")]
    assert ended.change_summary.endswith("released 2 GPUs and 160 GiB")
    assert ended.previous_state["properties"]["status"] == "Running"
    assert ended.new_state["properties"]["status"] == "Succeeded"
    assert {e.correlation_id for e in events} == {submitted.correlation_id}


def test_tracking_a_running_job_is_bookkeeping_without_a_new_etag_or_audit_item(env, node):
    env.submit("j", 2, 160)
    env.run(stop_before={"Track"})
    before = env.job("j")
    audited = len(env.audit(before.arm_id))
    env.run()
    after = env.job("j")
    assert after.task_token and after.lease is not None and after.lease.kind == LeaseKind.TRACK
    assert after.etag == before.etag and len(env.audit(before.arm_id)) == audited


def test_a_job_that_exits_non_zero_fails_with_its_exit_code_and_is_billed_for_its_run(env, node):
    env.submit("j", 1, 80)
    env.run()
    env.clock.advance(200)
    env.end_job("j", "Failed", exit_code=3)
    props = env.job_props("j")
    assert props["status"] == "Failed"
    assert props["statusReason"] == "The container exited with code 3."  # the code said once
    assert props["gpuSeconds"] == 200 and props["billableGpuSeconds"] == 240  # per started minute
    assert props["cost"]["amount"] == "0.166667"  # 240 GPU-s at 2.50/h
    assert env.operation(env.job("j").operation_id).body["error"]["code"] == "JobFailed"
    assert env.allocation() == FREE


def test_a_dgx_refusal_at_submission_fails_the_job_and_releases_its_gpus_once(env, node):
    env.dgx.fail("submit_job", DgxPermanentError("The DGX Platform refused the request: ImageNotFound: no", status=400))
    env.submit("j", 2, 160)
    env.run()
    props = env.job_props("j")
    assert props["status"] == "Failed"
    assert (
        props["statusReason"]
        == "The DGX Platform refused the job: The DGX Platform refused the request: ImageNotFound: no"
    )
    assert props["gpuSeconds"] == 0 and "cost" not in props and "startedAt" not in props
    assert env.allocation() == FREE
    assert env.meter(env.job("j").operation_id) is None


def test_transient_dgx_errors_at_submission_are_retried_to_success(env, node):
    env.dgx.fail("submit_job", times=3)
    env.submit("j", 2, 160)
    env.run()
    assert env.status("j") == "Running"
    assert len(env.dgx.jobs) == 1  # the idempotency key kept it one job


def test_the_workload_reaches_the_platform_with_its_secrets_which_nobody_reads_back(env, node):
    workload = {"image": "nvcr.io/nvidia/pytorch:24.10-py3", "env": {"MODE": "fast"}, "secretEnv": {"TOKEN": "s3cr3t"}}
    env.submit("j", 1, 80, workload=workload)
    env.run()
    (submitted,) = env.dgx.jobs.values()
    assert submitted.workload["env"] == {"MODE": "fast", "TOKEN": "s3cr3t"}
    shown = env.job_props("j")["workload"]
    assert shown["secretEnv"] == {"TOKEN": SECRET_MASK} and shown["env"] == {"MODE": "fast"}
    assert all("s3cr3t" not in e.model_dump_json() for e in env.audit())


# ------------------------------------------------------------------------------------------------ waiting
def test_a_job_that_does_not_fit_waits_and_runs_once_an_instance_frees_gpus(env, node):
    env.provision("llama", devices=6, memory_gb=480)
    env.run()
    assert env.instance_props()["provisioningState"] == "Succeeded"
    env.submit("j", 4, 320)
    env.run()
    job = env.job("j")
    assert job.status == JobStatus.PENDING and job.queued
    assert env.job_props("j")["statusReason"] == (
        "Waiting for capacity: no node of the subscription has 4 free NVIDIA GPUs and 320 GiB of GPU memory now."
    )
    # When the instance is deleted, its release serves the waiting jobs: the job is resumed and runs
    env.delete_instance("llama")
    env.run()
    assert env.instance() is None
    assert env.status("j") == "Running" and not env.job("j").queued
    assert env.allocation() == Allocation(4, 320)


def test_a_job_that_waits_longer_than_it_may_fails(env, node):
    fill = env.submit("a", 8, 640)
    env.submit("j", 1, 80)
    env.run()
    assert env.status("j") == "Pending"
    env.clock.advance(env.settings.job_pending_timeout_seconds)
    env.run()
    props = env.job_props("j")
    assert props["status"] == "Failed"
    assert props["statusReason"] == "No node had room for the job within the time a job may wait."
    assert not env.job("j").queued and env.repos.jobs.waiting(env.sub, 10) == []
    assert env.status("a") == "Running" and env.op_status(fill.operation_id) == "Running"


# ------------------------------------------------------------------------------------------------ cancel
def test_cancel_while_pending_ends_it_at_once_and_the_cancel_succeeds(env, node):
    env.submit("a", 8, 640)
    waiting = env.submit("waiting", 1, 80)
    env.run()
    assert env.status("waiting") == "Pending"
    canceled = env.w.jobs.cancel(env.admin(), env.sub, "rg1", "waiting")
    assert "Cancel requested by admin-1" in canceled.resource["properties"]["statusReason"]
    assert env.op_status(canceled.operation_id) == "Accepted"
    env.run()
    props = env.job_props("waiting")
    assert props["status"] == "Canceled" and props["statusReason"] == "Canceled by admin-1."
    assert "assignedNode" not in props and props["gpuSeconds"] == 0
    assert env.op_status(canceled.operation_id) == "Succeeded"
    operation = env.operation(waiting.operation_id)
    assert operation.status == "Canceled" and operation.body["error"]["code"] == "JobCanceled"
    assert env.allocation() == Allocation(8, 640)  # the running job keeps its own


def test_cancel_while_scheduled_stops_it_before_it_runs(env, node):
    env.submit("j", 2, 160)
    env.run(stop_before={"Submit"})
    assert env.status("j") == "Scheduled" and env.allocation() == Allocation(2, 160)
    canceled = env.w.jobs.cancel(env.admin(), env.sub, "rg1", "j")
    env.run()
    assert env.status("j") == "Canceled"
    assert env.dgx.jobs == {}  # it never reached the DGX Platform
    assert env.op_status(canceled.operation_id) == "Succeeded"
    assert env.allocation() == FREE


def test_cancel_while_running_stops_it_and_bills_until_the_platform_stopped_it(env, node):
    accepted = env.submit("j", 2, 160)
    env.run()
    env.clock.advance(45)
    canceled = env.w.jobs.cancel(env.admin(), env.sub, "rg1", "j")
    again = env.w.jobs.cancel(env.admin(), env.sub, "rg1", "j")
    assert again.operation_id == canceled.operation_id  # the same cancel again: the same operation
    env.run()
    props = env.job_props("j")
    assert props["status"] == "Canceled" and props["gpuSeconds"] == 90
    assert epoch(props["endedAt"]) == START + 45
    assert [j.status for j in env.dgx.jobs.values()] == ["Canceled"]
    assert env.op_status(canceled.operation_id) == "Succeeded"
    assert env.op_status(accepted.operation_id) == "Canceled"
    assert env.meter(accepted.operation_id).end == START + 45
    assert env.allocation() == FREE


def test_a_cancel_after_the_job_ended_on_the_platform_keeps_the_platforms_end(env, node):
    # Given a job that succeeded on the DGX Platform after 60 s, which the provider has not heard of yet
    accepted = env.submit("j", 1, 80)
    env.run()
    env.clock.advance(60)
    env.finish_on_platform("j", "Succeeded")
    env.clock.advance(60)
    # When its submitter cancels it
    canceled = env.w.jobs.cancel(env.admin(), env.sub, "rg1", "j")
    env.run()
    # Then the job keeps the platform's outcome, exit code and end time, billed for its run only
    props = env.job_props("j")
    assert props["status"] == "Succeeded"
    assert props["statusReason"] == (
        "The job ended Succeeded on the DGX Platform. It had ended before the cancel reached the DGX Platform"
        " (exit code 0)."
    )
    assert epoch(props["endedAt"]) == START + 60 and props["gpuSeconds"] == 60
    # And the cancel's operation failed, saying the job had already finished; the job's own succeeded
    cancel = env.operation(canceled.operation_id)
    assert cancel.status == "Failed" and cancel.body["error"]["code"] == "JobAlreadyFinished"
    assert env.op_status(accepted.operation_id) == "Succeeded"
    assert env.allocation() == FREE


def test_a_cancel_accepted_while_the_job_is_being_finished_gets_its_answer(env, node):
    """The final transition has read the job when a cancel is accepted: the cancel's operation still ends."""
    env.submit("j", 1, 80)
    env.run()
    env.clock.advance(30)
    env.finish_on_platform("j")
    cancels = []
    update = env.repos.jobs.update

    def cancel_first(before, after, audit, **kw):
        if after.status.final and not cancels:
            cancels.append(env.w.jobs.cancel(env.admin(), env.sub, "rg1", "j"))
        return update(before, after, audit, **kw)

    env.repos.jobs.update = cancel_first  # the in-memory repository's method, for this test only
    env.clock.advance(30)
    env.track()
    assert env.status("j") == "Succeeded"
    operation = env.operation(cancels[0].operation_id)
    assert operation.status == "Failed" and operation.body["error"]["code"] == "JobAlreadyFinished"
    assert env.allocation() == FREE


def test_a_cancel_before_the_workflow_started_ends_the_job_at_admission(env, node):
    accepted = env.submit("j", 2, 160)
    canceled = env.w.jobs.cancel(env.admin(), env.sub, "rg1", "j")
    env.run()
    assert env.status("j") == "Canceled" and env.allocation() == FREE and env.dgx.jobs == {}
    assert env.sfn.execution(accepted.operation_id).runner.entered[:3] == ["Place", "PlaceOutcome", "EndsHow"]
    assert env.op_status(canceled.operation_id) == "Succeeded"


def test_a_cancel_racing_the_trackers_end_leaves_the_job_its_end(env, node):
    # Given the tracker has just resumed the execution with the job's end (Succeeded on the platform)
    accepted = env.submit("j", 2, 160)
    env.run()
    env.clock.advance(40)
    env.finish_on_platform("j")
    assert env.w.job_tracker.run()["ended"] == 1
    # When a cancel comes before the execution finished the job
    canceled = env.w.jobs.cancel(env.admin(), env.sub, "rg1", "j")
    env.run()
    # Then the job keeps its end and its run's cost; the cancel fails, saying the job had finished
    assert env.status("j") == "Succeeded" and env.job_props("j")["gpuSeconds"] == 80
    operation = env.operation(canceled.operation_id)
    assert operation.status == "Failed" and operation.body["error"]["code"] == "JobAlreadyFinished"
    assert env.op_status(accepted.operation_id) == "Succeeded"
    assert env.allocation() == FREE


def test_a_submission_overtaken_by_a_cancel_leaves_nothing_running_on_the_platform(env, node):
    # Given a cancel accepted while the DGX Platform's answer to the submission is on its way back
    env.dgx.after["submit_job"] = lambda submitted: env.w.jobs.cancel(env.admin(), env.sub, "rg1", "j")
    env.submit("j", 2, 160)
    env.run()
    # Then the job it made there is canceled, the job ends Canceled unbilled, and its GPUs are back
    assert [j.status for j in env.dgx.jobs.values()] == ["Canceled"]
    props = env.job_props("j")
    assert props["status"] == "Canceled" and props["gpuSeconds"] == 0 and "cost" not in props
    assert env.allocation() == FREE


def test_cancel_of_a_finished_job_is_409_naming_its_status_and_changes_nothing(env, node):
    env.submit("j", 1, 80)
    env.run()
    env.end_job("j")
    before = env.job("j")
    with pytest.raises(Conflict, match="has already ended: Succeeded"):
        env.w.jobs.cancel(env.admin(), env.sub, "rg1", "j")
    assert env.job("j") == before


# ------------------------------------------------------------------------------------------------ the tracker
def test_max_duration_is_enforced_and_billing_stops_at_the_deadline(env, node):
    accepted = env.submit("long", 2, 160, maxDurationMinutes=1)
    env.run()
    env.clock.advance(31)
    assert env.track()["checked"] == 1
    assert env.job("long").lease.until == START + 60  # the next check: never past the deadline
    env.clock.set(START + 61)
    assert env.track()["ended"] == 1
    props = env.job_props("long")
    assert props["status"] == "Failed"
    assert props["statusReason"] == "The job exceeded its max duration of 1 minutes and was stopped."
    assert props["gpuSeconds"] == 120 and epoch(props["endedAt"]) == START + 60
    assert [j.status for j in env.dgx.jobs.values()] == ["Canceled"]
    assert env.meter(accepted.operation_id).end == START + 60
    assert env.allocation() == FREE


def test_the_tracker_checks_a_running_job_ever_less_often(env, node):
    env.submit("j", 1, 80)
    env.run()
    job = env.job("j")
    assert job.lease.kind == LeaseKind.TRACK and job.lease.until == START + 30
    env.clock.set(START + 30)
    assert env.track()["checked"] == 0  # not due before its time
    waits = []
    for _ in range(7):
        env.clock.set(env.job("j").lease.until + 1)
        assert env.track() == {
            "checked": 1,
            "ended": 0,
            "finished": 0,
            "instances_lost": 0,
            "errors": 0,
            "pages": 1,
            "left": 0,
        }
        waits.append(env.job("j").lease.until - env.clock())
    assert waits == [60, 120, 240, 480, 600, 600, 600]
    assert env.job("j").track_checks == 7 and env.status("j") == "Running"


def test_a_job_the_platform_no_longer_knows_fails(env, node):
    env.submit("j", 1, 80)
    env.run()
    env.dgx.forget_job(str(env.job("j").dgx_id))
    env.clock.advance(31)
    env.track()
    props = env.job_props("j")
    assert props["status"] == "Failed" and props["statusReason"] == "The DGX Platform no longer knows the job."
    assert env.allocation() == FREE


def test_a_job_whose_execution_no_longer_waits_is_finished_by_the_tracker(env, node):
    accepted = env.submit("j", 2, 160)
    env.run()
    env.sfn.set_status(accepted.operation_id, "ABORTED")  # e.g. an operator stopped the execution
    env.clock.advance(100)
    env.finish_on_platform("j")
    counts = env.track()
    assert counts == {"checked": 1, "ended": 0, "finished": 1, "instances_lost": 0, "errors": 0, "pages": 1, "left": 0}
    assert env.status("j") == "Succeeded" and env.job_props("j")["gpuSeconds"] == 200
    assert env.allocation() == FREE


def test_a_job_past_its_max_duration_keeps_its_gpus_until_the_platform_confirms_the_stop(env, node):
    # Given a job past its max duration whose execution no longer waits, on a platform slow to stop it
    accepted = env.submit("j", 2, 160, maxDurationMinutes=1)
    env.run()
    env.sfn.set_status(accepted.operation_id, "ABORTED")
    env.dgx.ignore_cancels = True
    env.clock.advance(61)
    assert env.track() == {
        "checked": 1,
        "ended": 0,
        "finished": 0,
        "instances_lost": 0,
        "errors": 0,
        "pages": 1,
        "left": 0,
    }
    assert env.status("j") == "Running" and env.allocation() == Allocation(2, 160)
    # When the platform has stopped it, the tracker's next look finishes it, billed to the deadline
    env.dgx.ignore_cancels = False
    env.clock.set(env.job("j").lease.until + 1)
    assert env.track()["finished"] == 1
    assert env.status("j") == "Failed" and env.job_props("j")["gpuSeconds"] == 120
    assert env.allocation() == FREE


def test_a_transient_dgx_error_on_one_job_does_not_keep_the_tracker_from_the_others(env, node):
    env.submit("a", 1, 80)
    env.clock.advance(1)
    env.submit("b", 1, 80)
    env.run()
    env.finish_on_platform("b")
    a_id = str(env.job("a").dgx_id)
    env.clock.advance(60)
    # the batch read fails, and then the read of "a" alone: "b" is read on its own and ends
    env.dgx.fail("get_jobs", DgxTransientError("DGX Platform answered 503 on POST /v1/jobs:batchGet", status=503))
    env.dgx.fail("get_job", DgxTransientError(f"DGX Platform answered 503 on GET /v1/jobs/{a_id}", status=503))
    counts = env.track()
    assert counts["ended"] == 1 and env.status("b") == "Succeeded"
    assert counts["errors"] == 1 and env.status("a") == "Running"


# ------------------------------------------------------------------------------------------------ submit, delete
def test_submitting_the_same_job_again_is_idempotent_and_a_different_one_conflicts(env, node):
    first = env.submit("j", 1, 80)
    again, shown = env.w.jobs.submit(env.admin(), env.sub, "rg1", "j", job_body(1, 80))
    assert again is None and shown["properties"]["operationId"] == first.operation_id
    with pytest.raises(AnotherOperationInProgress):
        env.w.jobs.submit(env.admin(), env.sub, "rg1", "j", job_body(2, 160))
    with pytest.raises(Conflict, match="already exists"):
        env.w.jobs.submit(env.admin(), env.sub, "rg1", "j", job_body(1, 80), create_only=True)
    assert len(env.sfn.started) == 1
    env.run()
    env.end_job("j")
    with pytest.raises(PropertyChangeNotAllowed):
        env.w.jobs.submit(env.admin(), env.sub, "rg1", "j", job_body(2, 160))


def test_only_a_finished_job_is_deleted_and_its_name_then_runs_afresh(env, node):
    first = env.submit("j", 1, 80)
    env.run()
    with pytest.raises(Conflict, match="cancel it and wait"):
        env.w.jobs.delete(env.admin(), env.sub, "rg1", "j")
    env.end_job("j")
    assert env.w.jobs.delete(env.admin(), env.sub, "rg1", "j") is True
    assert env.repos.jobs.get(env.job_key("j")) is None
    assert env.w.jobs.delete(env.admin(), env.sub, "rg1", "j") is False  # 204
    deleted = [e for e in env.audit() if e.change_summary == "Deleted job (Succeeded)"]
    assert len(deleted) == 1 and deleted[0].actor_id == "admin-1" and deleted[0].new_state is None
    second = env.submit("j", 1, 80)
    assert second.operation_id != first.operation_id
    env.run()
    assert env.status("j") == "Running"
    assert env.op_status(first.operation_id) == "Succeeded"  # the first run's operation keeps its answer


def test_a_job_accepted_while_step_functions_was_throttled_is_still_accepted(env, node):
    env.sfn.fail_next_start()
    accepted = env.submit("j", 1, 80)
    assert accepted.resource["properties"]["status"] == "Pending"
    assert env.sfn.started == [] and env.op_status(accepted.operation_id) == "Accepted"


def test_job_operation_status_moves_accepted_running_succeeded(env, node):
    accepted = env.submit("j", 1, 80)
    seen = [env.op_status(accepted.operation_id)]
    env.run(stop_before={"Submit"})
    seen.append(env.op_status(accepted.operation_id))
    env.run()
    seen.append(env.op_status(accepted.operation_id))
    env.end_job("j")
    seen.append(env.op_status(accepted.operation_id))
    assert seen == ["Accepted", "Accepted", "Running", "Succeeded"]
    operation = env.operation(accepted.operation_id)
    assert operation.status == OperationStatus.SUCCEEDED and operation.body["percentComplete"] == 100.0


def test_a_job_sent_back_as_it_was_read_is_the_same_job_whatever_its_status(env: Env, node):
    # Given a running job
    first = env.submit("j", 2, 160)
    env.run()
    read = env.w.jobs.get(env.admin(), env.sub, "rg1", "j")
    assert read["properties"]["status"] == "Running"
    # When an ARM client PUTs back what it read (read-only fields and all)
    again, shown = env.w.jobs.submit(env.admin(), env.sub, "rg1", "j", SparkJobWrite.model_validate(read))
    # Then it is the same job: nothing new starts
    assert first is not None and again is None and shown["properties"]["status"] == "Running"
    # But a status it does not have is refused, naming the one it has
    read["properties"]["status"] = "Succeeded"
    with pytest.raises(BadRequest, match="is Running, not Succeeded"):
        env.w.jobs.submit(env.admin(), env.sub, "rg1", "j", SparkJobWrite.model_validate(read))
    # And a new job may say Pending only
    with pytest.raises(BadRequest, match="may only say 'Pending'"):
        env.w.jobs.submit(env.admin(), env.sub, "rg1", "k", job_body(1, 80, status="Running"))
    with pytest.raises(ValueError, match="may only say 'Pending'"):
        job_body(1, 80, status="Done")


def test_a_running_job_answers_its_cost_so_far_with_when_it_is_as_of(env: Env, node):
    # Given a job of 2 GPUs at 2.50 per GPU-hour running for 30 minutes
    env.submit("j", 2, 160)
    env.run()
    started = epoch(env.job_props("j")["startedAt"])
    env.clock.set(started + 1800)
    # Then its document says what it cost so far, as of now, by the metering rules (no final rounding yet)
    props = env.job_props("j")
    assert props["status"] == "Running"
    assert props["gpuSeconds"] == 3600 and props["billableGpuSeconds"] == 3600
    assert props["cost"] == {"amount": "2.500000", "currency": "USD"}
    assert epoch(props["costAsOf"]) == started + 1800
    # and so does the list, to each caller who may see it, and its supplier (what the node earns)
    listed, _ = env.w.jobs.list(env.admin(), env.sub, "rg1", submitted_by=None, top=10, skip_token=None)
    assert listed[0]["properties"]["cost"] == props["cost"]
    supplier = env.w.jobs.get(env.supplier(), env.sub, "rg1", "j")["properties"]
    assert supplier["cost"] == props["cost"]
    # When it ends 20 s later, its cost is final (the increment rounds the run up) and no longer "as of"
    env.clock.set(started + 1820)
    env.end_job("j", at=started + 1820)
    final = env.job_props("j")
    assert final["cost"] == {"amount": "2.583333", "currency": "USD"} and "costAsOf" not in final
    assert final["billableGpuSeconds"] == 2 * 1860
