"""Budgets on the fake clock: spend read from the roll-ups, each threshold notified once a month however often the
monitor runs, ``RefuseNewAllocations`` refusing new work (409 ``BudgetExceeded``) only in what the budget covers,
``StopAll`` ending the covered work and billing it up to that moment, and a new month starting afresh."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from itl_accelerator.errors import AuthorizationFailed, BudgetExceeded, InvalidParameter
from itl_accelerator.models.budgets import BudgetWrite
from itl_accelerator.services.schedules.budget_monitor import BudgetMonitor
from tests.services.conftest import RG, Env
from tests.services.fakes import epoch_of as _epoch
from tests.services.test_metering import DAY, run_job, sync


def put_budget(env: Env, name: str = "team", **props: Any) -> dict[str, Any]:
    body = {
        "properties": {
            "amount": "10",
            "currency": "USD",
            "timePeriod": {"startDate": "2025-03-01T00:00:00Z"},
            "notifications": {
                "half": {"threshold": 50, "contactEmails": ["fin@example.com"]},
                "most": {"threshold": 80},
                "all": {"threshold": 100},
            },
            **props,
        }
    }
    budget, _ = env.w.budgets.put(env.admin(), env.sub, name, BudgetWrite.model_validate(body))
    return budget


class Events:
    def __init__(self) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, detail_type: str, detail: dict[str, Any]) -> None:
        self.sent.append((detail_type, detail))

    def kinds(self) -> list[tuple[str, str | None]]:
        return [(k, d.get("threshold")) for k, d in self.sent]


def monitor(env: Env, events: Events) -> BudgetMonitor:
    return BudgetMonitor(env.repos, env.w.jobs, env.w.instances, publish=events, clock=env.clock)


def meter_until(env: Env, at: str) -> None:
    """Sync usage and roll it up at ``at`` (what the two schedules do before the monitor runs)."""
    sync(env, at)
    env.w.usage_rollups.run()


@pytest.fixture
def spending(env: Env) -> Env:
    """A node at 2.40 USD/GPU-h and a 2-GPU job running on it from 08:00 (4.80 USD an hour)."""
    env.add_node("dgx-1", price=2.40)
    run_job(env, "train", 2, f"{DAY}T08:00:00")
    return env


def test_each_threshold_is_notified_once_however_often_the_monitor_runs(spending: Env):
    env, events = spending, Events()
    put_budget(env)
    meter_until(env, f"{DAY}T09:55:00")  # 1 h 55 min billed so far, this hour included: 9.20 USD of 10
    first = monitor(env, events).run()
    again = monitor(env, events).run()
    assert (first.notified, again.notified) == (2, 0)
    assert events.kinds() == [("Budget Threshold Crossed", "50"), ("Budget Threshold Crossed", "80")]
    assert events.sent[0][1]["contactEmails"] == ["fin@example.com"]
    budget = env.w.budgets.get(env.admin(), env.sub, "team")
    assert Decimal(str(budget["properties"]["currentSpend"]["amount"])) == Decimal("9.20")
    assert budget["properties"]["status"]["thresholdsCrossed"] == [50, 80]
    assert budget["properties"]["status"]["exceeded"] is False
    trail = [e.change_summary for e in env.audit() if e.action == "ITL.Accelerator/budgets/evaluate"]
    assert len(trail) == 2 and all("Budget team reached" in s for s in trail)


def test_refuse_new_allocations_refuses_only_what_the_budget_covers(spending: Env):
    env, events = spending, Events()
    put_budget(env, actionAtLimit="RefuseNewAllocations", filter={
        "dimensions": {"name": "ResourceGroupName", "values": [RG]}})  # fmt: skip
    meter_until(env, f"{DAY}T11:05:00")  # 14.40 USD of 10
    report = monitor(env, events).run()
    assert report.exceeded == 1 and ("Budget Exceeded", None) in events.kinds()
    with pytest.raises(BudgetExceeded, match="team"):
        env.submit("another", 1)
    assert env.status("train") == "Running"  # running work goes on: the action refuses new work only
    # a budget over another resource group does not refuse this one's work
    env.w.budgets.delete(env.admin(), env.sub, "team")
    put_budget(env, "other", actionAtLimit="RefuseNewAllocations", filter={
        "dimensions": {"name": "ResourceGroupName", "values": ["rg-elsewhere"]}})  # fmt: skip
    monitor(env, events).run()
    assert env.submit("another", 1) is not None


def test_stop_all_ends_the_work_it_covers_and_bills_it_to_that_moment(spending: Env):
    env, events = spending, Events()
    put_budget(env, actionAtLimit="StopAll")
    meter_until(env, f"{DAY}T11:05:00")
    stopped_at = env.clock()
    report = monitor(env, events).run()
    assert (report.exceeded, report.jobs_canceled) == (1, 1)
    env.run()
    props = env.job_props("train")
    assert props["status"] == "Canceled"
    # billed from 08:00 to the budget's stop at 11:05 (3 h 5 min), to the node's 60 s increment, not to "now"
    ran = stopped_at - _epoch(f"{DAY}T08:00:00")
    assert ran <= props["billableGpuSeconds"] / 2 <= ran + 60
    assert monitor(env, events).run().jobs_canceled == 0  # once spent, it stops once


def test_a_new_month_starts_afresh(spending: Env):
    env, events = spending, Events()
    put_budget(env, actionAtLimit="RefuseNewAllocations")
    meter_until(env, f"{DAY}T11:05:00")
    monitor(env, events).run()
    with pytest.raises(BudgetExceeded):
        env.submit("another", 1)
    env.end_job("train", at=env.clock())
    env.clock.set("2025-04-01T00:10:00")
    monitor(env, events).run()
    assert env.submit("april", 1) is not None
    status = env.w.budgets.get(env.admin(), env.sub, "team")["properties"]["status"]
    assert status["period"] == "2025-04" and status["exceeded"] is False


def test_only_operators_set_budgets_and_bad_ones_are_refused(env: Env):
    with pytest.raises(AuthorizationFailed):
        env.w.budgets.put(env.consumer(), env.sub, "team", BudgetWrite.model_validate(
            {"properties": {"amount": "1", "timePeriod": {"startDate": "2025-03-01T00:00:00Z"}}}))  # fmt: skip
    with pytest.raises(ValueError, match="first of a month"):
        BudgetWrite.model_validate({"properties": {"amount": "1", "timePeriod": {"startDate": "2025-03-02T00:00:00Z"}}})
    with pytest.raises(InvalidParameter):
        put_budget(env, "bad name/with slash")
    assert env.w.budgets.in_subscription(env.consumer(), env.sub) == []


def test_a_budget_answers_what_the_api_document_says_it_does(spending: Env):
    """The budget as answered validates against docs/openapi.json's Budget: its spend and thresholds crossed are
    JSON numbers there and on the wire (a fuzzed budget once answered a number where the document said string)."""
    import json

    import jsonschema

    from tests.conftest import REPO_ROOT

    env, events = spending, Events()
    put_budget(env)
    meter_until(env, f"{DAY}T09:55:00")
    monitor(env, events).run()
    answered = json.loads(json.dumps(env.w.budgets.get(env.admin(), env.sub, "team")))
    document = json.loads((REPO_ROOT / "docs" / "openapi.json").read_text())
    jsonschema.validate(answered, {"$ref": "#/components/schemas/Budget", "components": document["components"]})
    assert answered["properties"]["currentSpend"]["amount"] == 9.2
    assert answered["properties"]["status"]["thresholdsCrossed"] == [50, 80]
