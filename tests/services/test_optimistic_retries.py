"""Each optimistic retry of the services (services/common/reattempt.py) on its own: a write whose condition failed
because someone wrote meanwhile is read and judged again, and answers as if it had never raced; one that keeps
racing stops after its attempts with its own error — a budget PUT and a quota PUT or DELETE (409
``AnotherOperationInProgress``), a usage window's write (``StoreBusy``), a correction's claim (left queued), an
instance's compensation (``StoreBusy``, which its state machine retries)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from itl_accelerator.domain.usage import CorrectionDue
from itl_accelerator.errors import AnotherOperationInProgress
from itl_accelerator.models.budgets import BudgetWrite
from itl_accelerator.models.quotas import QuotaWrite
from itl_accelerator.repositories.errors import EtagMismatch, StateMoved, StoreBusy, WorkloadChanged
from itl_accelerator.services.api.budgets import PUT_ATTEMPTS
from itl_accelerator.services.api.quotas import WRITE_ATTEMPTS as QUOTA_ATTEMPTS
from itl_accelerator.services.schedules.billing_export import CLAIM_ATTEMPTS
from itl_accelerator.services.schedules.usage_sync import WRITE_ATTEMPTS as WINDOW_ATTEMPTS
from itl_accelerator.services.schedules.usage_sync import SyncReport
from itl_accelerator.services.workflows.instance_steps import COMPENSATE_ATTEMPTS
from itl_accelerator.services.workflows.io import ErrorBody, InstanceStepInput
from tests.services.conftest import Env
from tests.services.test_metering import DAY, run_job, sync


class Flaky:
    """Stands in for a repository method: raises ``error()`` on its first ``failures`` calls, then calls ``real``;
    counts every call."""

    def __init__(self, real: Any, error: Any, failures: int):
        self.real, self.error, self.failures, self.calls = real, error, failures, 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error()
        return self.real(*args, **kwargs)


BUDGET = BudgetWrite.model_validate(
    {"properties": {"amount": "10", "currency": "USD", "timePeriod": {"startDate": "2025-03-01T00:00:00Z"}}}
)
QUOTA = QuotaWrite.model_validate({"properties": {"limit": {"limitObjectType": "LimitValue", "value": 4}}})


# ------------------------------------------------------------------------------------------------ budgets
def test_a_budget_evaluated_meanwhile_is_judged_again_and_written_once(env: Env, monkeypatch):
    put = Flaky(env.repos.budgets.put, StateMoved, PUT_ATTEMPTS - 1)
    monkeypatch.setattr(env.repos.budgets, "put", put)
    budget, created = env.w.budgets.put(env.admin(), env.sub, "team", BUDGET)
    assert created and budget["name"] == "team" and put.calls == PUT_ATTEMPTS
    assert len([e for e in env.audit() if e.action == "ITL.Accelerator/budgets/write"]) == 1


def test_a_budget_that_keeps_being_evaluated_is_409_after_its_attempts(env: Env, monkeypatch):
    put = Flaky(env.repos.budgets.put, StateMoved, PUT_ATTEMPTS)
    monkeypatch.setattr(env.repos.budgets, "put", put)
    with pytest.raises(AnotherOperationInProgress, match="The budget 'team' kept changing"):
        env.w.budgets.put(env.admin(), env.sub, "team", BUDGET)
    assert put.calls == PUT_ATTEMPTS and env.repos.budgets.get(env.sub, "team") is None


# ------------------------------------------------------------------------------------------------ quotas
@pytest.mark.parametrize("operation", ["put", "delete"])
def test_a_quota_changed_meanwhile_is_judged_again(env: Env, monkeypatch, operation):
    if operation == "delete":
        env.w.quotas.put(env.admin(), env.sub, "eastus", "gpus", QUOTA)
    write = Flaky(env.repos.quotas.set_limit, EtagMismatch, QUOTA_ATTEMPTS - 1)
    monkeypatch.setattr(env.repos.quotas, "set_limit", write)
    if operation == "put":
        assert env.w.quotas.put(env.admin(), env.sub, "eastus", "gpus", QUOTA)[1] is True
    else:
        assert env.w.quotas.delete(env.admin(), env.sub, "eastus", "gpus") is True
    assert write.calls == QUOTA_ATTEMPTS


@pytest.mark.parametrize("operation", ["put", "delete"])
def test_a_quota_that_keeps_changing_is_409_after_its_attempts(env: Env, monkeypatch, operation):
    if operation == "delete":
        env.w.quotas.put(env.admin(), env.sub, "eastus", "gpus", QUOTA)
    write = Flaky(env.repos.quotas.set_limit, EtagMismatch, QUOTA_ATTEMPTS)
    monkeypatch.setattr(env.repos.quotas, "set_limit", write)
    with pytest.raises(AnotherOperationInProgress, match="The GPU quota 'gpus' kept changing"):
        if operation == "put":
            env.w.quotas.put(env.admin(), env.sub, "eastus", "gpus", QUOTA)
        else:
            env.w.quotas.delete(env.admin(), env.sub, "eastus", "gpus")
    assert write.calls == QUOTA_ATTEMPTS


# ------------------------------------------------------------------------------------------------ usage windows
def _window(env: Env) -> Any:
    env.add_node(price=1.0, increment=1, minimum=0)
    allocation = run_job(env, "j", 1, f"{DAY}T10:00:00", f"{DAY}T10:30:00")
    sync(env, f"{DAY}T12:00:00")
    (stored,) = env.repos.usage.records(allocation, [int(env.clock()) // 3600 * 3600 - 7200]).values()
    return stored


def test_a_usage_window_written_meanwhile_is_read_again_and_written(env: Env, monkeypatch):
    stored = _window(env)
    changed = replace(stored, final=True, content_hash="changed")
    answers = iter(["conflict", "conflict"])
    real = env.repos.usage.write
    monkeypatch.setattr(env.repos.usage, "write", lambda r, p: next(answers, None) or real(r, p))
    reads: list[Any] = []
    get = env.repos.usage.get
    monkeypatch.setattr(env.repos.usage, "get", lambda *a: reads.append(a) or get(*a))
    report = SyncReport()
    env.w.usage_sync._write(changed, stored, report)
    assert report.windows_written == 1 and len(reads) == 2  # read again after each of the two races


def test_a_usage_window_that_keeps_changing_is_store_busy_after_its_attempts(env: Env, monkeypatch):
    stored = _window(env)
    writes: list[Any] = []
    monkeypatch.setattr(env.repos.usage, "write", lambda r, p: writes.append(r) or "conflict")
    with pytest.raises(StoreBusy, match="kept changing"):
        env.w.usage_sync._write(replace(stored, content_hash="changed"), stored, SyncReport())
    assert len(writes) == WINDOW_ATTEMPTS


# ------------------------------------------------------------------------------------------------ correction claims
def test_a_correction_queued_again_meanwhile_is_claimed_as_queued_now_and_left_queued_when_it_keeps_moving(
    env: Env, monkeypatch
):
    stored = _window(env)
    hour = stored.hour
    first, again = (CorrectionDue(hour, stored.allocation_id, v) for v in ("v1", "v2"))
    claimed: list[str] = []
    monkeypatch.setattr(env.repos.billing, "corrections_due", lambda limit: [again])
    # the first claim fails (queued again as v2), the second, of v2, succeeds
    monkeypatch.setattr(
        env.repos.billing, "claim_correction", lambda r, due, day, line: claimed.append(due.version) or len(claimed) > 1
    )
    assert env.w.billing_export._claim_one(first, "2025-03-11") == 1  # a line: the usage is of an earlier day
    assert claimed == ["v1", "v2"]
    # and one that keeps being queued again is left queued after its attempts
    claimed.clear()
    monkeypatch.setattr(env.repos.billing, "claim_correction", lambda r, due, day, line: claimed.append(due.version))
    assert env.w.billing_export._claim_one(first, "2025-03-11") == 0
    assert claimed == ["v1"] + ["v2"] * (CLAIM_ATTEMPTS - 1)


# ------------------------------------------------------------------------------------------------ compensation
def _in_flight(env: Env) -> InstanceStepInput:
    env.add_node()
    accepted, _ = env.provision()
    assert accepted is not None
    return InstanceStepInput.starting(env.settings, env.instance_key(), accepted.operation_id, "corr-1")


def test_a_compensation_raced_by_a_workflow_step_is_decided_again(env: Env, monkeypatch):
    inp = _in_flight(env)
    update = Flaky(env.repos.instances.update, WorkloadChanged, 1)
    monkeypatch.setattr(env.instances_hooks, "update", update)
    result = env.w.instance_steps.compensate(inp, ErrorBody.of("GpuInitFailed", "no"))
    assert result.outcome == "Removing" and update.calls == 2
    assert env.instance() is not None and env.instance().compensation_error == {
        "code": "GpuInitFailed",
        "message": "no",
    }


def test_a_compensation_that_keeps_racing_is_store_busy_after_its_attempts(env: Env, monkeypatch):
    inp = _in_flight(env)
    update = Flaky(env.repos.instances.update, WorkloadChanged, COMPENSATE_ATTEMPTS)
    monkeypatch.setattr(env.instances_hooks, "update", update)
    with pytest.raises(StoreBusy, match="kept changing during compensation"):
        env.w.instance_steps.compensate(inp, ErrorBody.of("GpuInitFailed", "no"))
    assert update.calls == COMPENSATE_ATTEMPTS and env.instance().compensation_error is None
