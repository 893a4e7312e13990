"""Job items stored before a job's run was typed (domain/runs.py) read, render and run on as they did.

A job's retry strategy, attempt, attempts, preemption settings and gang size live in its stored ARM document (the
item's ``doc``), so the shapes written there are a contract. tests/unit/data/job_items_before_typed_run.json holds
job items exactly as the DynamoDB repository stored them before (repositories/dynamodb/jobs.py ``job_attributes``
at commit 05a0d47, written by the services' own scenarios: a retried job running its second attempt and then
Succeeded, a retried gang on its second attempt, a job with a retry strategy canceled before it started, a
preemptible job that asked to be requeued — running, requeued, then failed — and a preemptible job that Succeeded).
tests/unit/data/job_runs_finished_before_typed_run.json holds what that commit's job steps did with each unfinished
one at the state machine's ``Finish`` (:func:`finished`): its answer, the properties it set and removed, its typed
values, what it gave back, the meters and operations it ended — recorded by running the same harness on that
commit's code.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from itl_accelerator.billing.job_charges import so_far
from itl_accelerator.domain.records import Job, ResourceKey
from itl_accelerator.domain.retries import ExitCondition, RetryStrategy
from itl_accelerator.domain.runs import Attempt, JobRun, RunCharges
from itl_accelerator.domain.states import JobStatus
from itl_accelerator.repositories.dynamodb.jobs import job_attributes, job_from_item
from itl_accelerator.repositories.memory.workloads import stored_form
from itl_accelerator.repositories.protocols import Effects, Expect
from itl_accelerator.services.common import arm_rules
from itl_accelerator.services.common.context import system_context
from itl_accelerator.services.workflows.io import JobEnd, JobStepInput
from itl_accelerator.services.workflows.job_steps import JobSteps

DATA = Path(__file__).parent / "data"
ITEMS: dict[str, dict[str, Any]] = json.loads((DATA / "job_items_before_typed_run.json").read_text())
FINISHED: dict[str, dict[str, Any]] = json.loads((DATA / "job_runs_finished_before_typed_run.json").read_text())
SUB = "sub-0001"
#: 2025-03-10T11:20:00Z: when the recorded Finish ran
NOW = 1741605600.0
NODE = f"/subscriptions/{SUB}/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes"
OUTCOMES = {
    "succeeded": JobEnd(
        status=JobStatus.SUCCEEDED,
        reason="The job ended Succeeded on the DGX Platform.",
        exitCode=0,
        onPlatform=True,
        endedAt=NOW - 30,
    ),
    "failed": JobEnd(
        status=JobStatus.FAILED,
        reason="The container exited with code 3.",
        exitCode=3,
        onPlatform=True,
        retryable=True,
        endedAt=NOW - 60,
    ),
    "preempted": JobEnd(status=JobStatus.PREEMPTED, reason="Preempted for a job of priority 8.", stop=True),
    "canceled": JobEnd(status=JobStatus.CANCELED, reason="Canceled by ann.", stop=True),
}


def read(item: dict[str, Any]) -> Job:
    """The job of a stored item, as the DynamoDB repository reads it."""
    key = ResourceKey(SUB, item["resourceGroup"], "sparkJobs", tuple(json.loads(item["names"])))
    return job_from_item(key, item)


def stored_properties(label: str) -> dict[str, Any]:
    return dict(json.loads(ITEMS[label]["doc"])["properties"])


def finished(item: dict[str, Any], outcome: JobEnd) -> dict[str, Any]:
    """What the job steps' Finish (the state machine's, ``retry`` on) does with the job of ``item`` ending as
    ``outcome``, at :data:`NOW`: its answer and what it writes, as stored (the properties it sets and removes from
    the stored document, its typed values, what it gives back and the operations it ends)."""
    job = read(item)
    writes: list[tuple[Job, Expect, Effects]] = []
    jobs = SimpleNamespace(
        get=lambda key: job, update=lambda b, a, audit, *, expect, effects: writes.append((a, expect, effects))
    )
    kernel = SimpleNamespace(
        repositories=SimpleNamespace(
            jobs=jobs, nodes=SimpleNamespace(), operations=SimpleNamespace(get=lambda *a: None)
        ),
        audit=lambda ctx, resource, key, action, summary, before, after: summary,
    )
    placement = SimpleNamespace(dispatch=lambda ctx, subscription: None)
    settings = SimpleNamespace(workflow_lease_grace_seconds=120)
    steps = JobSteps(kernel, placement, None, None, settings, clock=lambda: NOW)  # type: ignore[arg-type]
    inp = JobStepInput(
        operationId=str(job.operation_id),
        subscriptionId=SUB,
        resourceGroup=job.key.resource_group,
        jobName=job.key.name,
    )
    result = steps.finish(inp, outcome, retry=True)
    shown: dict[str, Any] = {"result": result.model_dump(mode="json")}
    for after, _, effects in writes:
        stored = json.loads(item["doc"])["properties"]
        written = after.document["properties"]
        shown["set"] = {k: v for k, v in written.items() if stored.get(k) != v}
        shown["removed"] = sorted(k for k in stored if k not in written)
        shown["record"] = {
            "status": str(after.status),
            "startedAt": after.started_at,
            "endedAt": after.ended_at,
            "gpuSeconds": after.gpu_seconds,
            "billableGpuSeconds": after.billable_gpu_seconds,
            "cost": after.cost,
            "lease": after.lease.until if after.lease else None,
        }
        shown["released"] = [[r.node.name, r.devices, r.quota_charge] for r in effects.releases]
        shown["meterEnds"] = [[m.allocation_id, m.end] for m in (effects.meter_end, *effects.more_meter_ends) if m]
        shown["operations"] = [o.body["status"] for o in (effects.operation, *effects.more_operations) if o]
    return shown


# ------------------------------------------------------------------------------------------------- read
def test_a_retried_gang_stored_before_reads_its_run_typed():
    run = read(ITEMS["gang_retried_running"]).run
    assert run.retry_strategy == RetryStrategy(attempts=2, interval_seconds=5)
    assert (run.attempt, run.attempt_number, run.gang_size, run.preemptible) == (2, 2, 2, False)
    assert run.attempts == (
        Attempt(
            number=1,
            status=JobStatus.FAILED,
            status_reason="The container exited with code 1.",
            ended_at="2025-03-10T10:01:00.000000Z",
            charges=RunCharges(960, 960, Decimal("0.666666"), "USD"),
            exit_code=1,
            assigned_node=f"{NODE}/a",
            assigned_nodes=(f"{NODE}/a", f"{NODE}/b"),
            started_at="2025-03-10T10:00:00.000000Z",
        ),
    )
    assert run.failures == 1 and run.charges() == RunCharges(960, 960, Decimal("0.666666"), "USD")


def test_a_retried_job_stored_before_reads_its_conditions_in_order():
    strategy = read(ITEMS["retried_succeeded"]).run.retry_strategy
    assert strategy == RetryStrategy(
        attempts=3,
        evaluate_on_exit=(ExitCondition("RETRY", on_exit_code="3"), ExitCondition("EXIT", on_reason="*")),
        interval_seconds=30,
    )


def test_a_requeued_job_stored_before_reads_its_preemption_and_its_preempted_attempt():
    run = read(ITEMS["requeued_pending_second_attempt"]).run
    assert (run.retry_strategy, run.preemptible, run.preempt_mode, run.requeues) == (None, True, "Requeue", True)
    assert run.attempt == 2 and [(a.number, a.status) for a in run.ended] == [(1, JobStatus.PREEMPTED)]
    running = read(ITEMS["preemptible_requeue_running"]).run
    assert (running.attempt, running.attempts, running.attempt_number) == (None, None, 1)


def test_a_job_with_a_strategy_that_never_started_shows_no_attempt_but_its_number():
    run = read(ITEMS["retry_strategy_never_started"]).run
    assert (run.attempt, run.attempts, run.charges()) == (1, (), RunCharges())


def test_a_preemptible_job_of_one_run_reads_only_its_preemption():
    job = read(ITEMS["preemptible_cancel_succeeded"])
    assert job.run == JobRun(preemptible=True, preempt_mode="Cancel") and job.gang_size == 1


# ------------------------------------------------------------------------------------------------- render
@pytest.mark.parametrize("label", sorted(ITEMS))
def test_an_item_stored_before_is_written_back_as_it_was_stored(label: str):
    # the record read from it gives back the very attributes, its document included
    item = ITEMS[label]
    assert {k: v for k, v in job_attributes(read(item)).items() if v is not None} == item


@pytest.mark.parametrize("label", sorted(ITEMS))
def test_the_run_read_from_an_item_stored_before_renders_its_document_as_stored(label: str):
    job = read(ITEMS[label])
    stored = stored_properties(label)
    assert {**stored, **job.run.arm_properties()} == stored
    # a change of the record renders every typed value into the document again: nothing of the run moves
    ctx = system_context("op", "corr", lambda: NOW)
    assert arm_rules.changed(ctx, job).document["properties"] == stored
    # the memory twin reads the run from the document, as the table does
    assert stored_form(job).run == job.run


@pytest.mark.parametrize("label", sorted(ITEMS))
def test_a_running_jobs_cost_so_far_adds_its_attempts_stored_before(label: str):
    job = read(ITEMS[label])
    expected = {
        "retried_running_second_attempt": (9540, 9540, "6.625001"),
        "gang_retried_running": (76720, 76720, "53.277778"),
        "preemptible_requeue_running": (38400, 38400, "26.666667"),
    }.get(label)
    shown = so_far(job, NOW)
    if expected is None:  # not running: a final job's figures are its own
        assert shown == {}
        return
    assert (shown["gpuSeconds"], shown["billableGpuSeconds"], shown["cost"]) == (
        expected[0],
        expected[1],
        {"amount": expected[2], "currency": "USD"},
    )


# ------------------------------------------------------------------------------------------------- run on
@pytest.mark.parametrize(
    ("label", "outcome"), [(label, outcome) for label in sorted(FINISHED) for outcome in sorted(OUTCOMES)]
)
def test_a_job_stored_before_finishes_or_runs_again_as_it_did(label: str, outcome: str):
    assert finished(ITEMS[label], OUTCOMES[outcome]) == FINISHED[label][outcome]
