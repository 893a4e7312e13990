"""Budgets on the fake clock: spend as of now (settled plus open allocations, not the roll-ups), each threshold
notified once a month however often the monitor runs, ``RefuseNewAllocations`` refusing new work (409
``BudgetExceeded``) only in what the budget covers, ``StopAll`` ending the covered work and billing it up to that
moment, a new month starting afresh — and (issue 26) every change of a budget evaluated at once, a bounded
overshoot, exact amounts, valid e-mails, and budgets seen only within the caller's scope."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from itl_accelerator.errors import AuthorizationFailed, BudgetExceeded, InvalidParameter, ResourceNotFound
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
    assert answered["properties"]["currentSpend"] == {"amount": "9.200000", "unit": "USD"}  # exact, one form
    assert answered["properties"]["amount"] == "10"
    assert answered["properties"]["status"]["thresholdsCrossed"] == [50, 80]


# ------------------------------------------------------------------------------------------------ issue 26
def budget_change(env: Env, name: str = "team") -> None:
    """What the table's stream does once a budget is written: the fleet-changes function evaluates it and serves
    the queue (services/streams/fleet.py)."""
    from itl_accelerator.domain.records import LimitChange

    env.w.fleet_changes.on_changes([], [LimitChange("evt-b", env.sub, "budget", name)])
    env.run()


def status(env: Env, name: str = "team") -> dict[str, Any]:
    return env.w.budgets.get(env.admin(), env.sub, name)["properties"]


def test_the_spend_is_as_of_now_without_waiting_for_the_sync_or_the_roll_up(spending: Env):
    env, events = spending, Events()
    put_budget(env)
    env.clock.set(f"{DAY}T09:30:00")  # nothing synced or rolled up: 1 h 30 min of 4.80 USD an hour
    monitor(env, events).run()
    assert status(env)["currentSpend"] == {"amount": "7.200000", "unit": "USD"}
    assert status(env)["status"]["evaluatedAt"] == f"{DAY}T09:30:00Z"


def test_raising_a_spent_budgets_amount_lifts_its_refusal_at_once(spending: Env):
    env, events = spending, Events()
    put_budget(env, actionAtLimit="RefuseNewAllocations")
    env.clock.set(f"{DAY}T11:05:00")
    monitor(env, events).run()
    with pytest.raises(BudgetExceeded):
        env.submit("another", 1)
    raised = put_budget(env, amount="100000", actionAtLimit="RefuseNewAllocations")
    assert raised["properties"]["status"]["exceeded"] is False  # the PUT's own answer, not the next run's
    assert raised["properties"]["currentSpend"]["amount"] == "14.800000"
    assert env.submit("another", 1) is not None
    # thresholds reached under the old amount are notified again when reached under the new one
    assert raised["properties"]["status"]["thresholdsCrossed"] == []


def test_a_budget_switched_to_stop_all_after_it_was_spent_stops_its_work_at_once(spending: Env):
    env, events = spending, Events()
    put_budget(env)  # action None: notify only
    env.clock.set(f"{DAY}T11:05:00")
    assert monitor(env, events).run().exceeded == 1
    assert env.status("train") == "Running"
    put_budget(env, actionAtLimit="StopAll")
    budget_change(env)
    assert env.status("train") == "Canceled"
    assert env.job_props("train")["statusReason"] == "Canceled by ITL.Accelerator/budgets/team."


def test_a_spent_budget_moved_to_a_later_month_refuses_nothing_now(spending: Env):
    env, events = spending, Events()
    put_budget(env, actionAtLimit="RefuseNewAllocations")
    env.clock.set(f"{DAY}T11:05:00")
    monitor(env, events).run()
    with pytest.raises(BudgetExceeded):
        env.submit("another", 1)
    put_budget(env, actionAtLimit="RefuseNewAllocations", timePeriod={"startDate": "2025-04-01T00:00:00Z"})
    assert env.submit("another", 1) is not None


def test_a_raised_budget_places_the_job_it_held_back_at_once(spending: Env):
    env, events = spending, Events()
    put_budget(env, actionAtLimit="RefuseNewAllocations")
    env.clock.set(f"{DAY}T11:05:00")
    monitor(env, events).run()
    env.w.budgets.delete(env.admin(), env.sub, "team")
    env.submit("waits", 1)  # accepted while no budget refuses it ...
    put_budget(env, actionAtLimit="RefuseNewAllocations")  # ... and a spent budget set before it is placed
    env.run()
    assert env.status("waits") == "Pending"
    assert env.job_props("waits")["statusReason"].startswith("Waiting for budget: The budget 'team' (10 USD")
    put_budget(env, amount="1000", actionAtLimit="RefuseNewAllocations")
    budget_change(env)
    assert env.status("waits") == "Running"


def test_stop_all_stops_within_one_evaluation_period_of_the_amount(env: Env):
    """Issue 26: a 300 USD StopAll budget stopped at 3,230 USD (a 5-minute sync, 15-minute roll-ups and monitor).
    Spend is now exact at each evaluation, every 5 minutes: the overshoot is at most the spend of one period of the
    covered work (here 8 GPUs at 30 USD = 240 USD an hour, 20 USD per 5 minutes) plus each stopped job's rounding."""
    env.add_node("dgx-1", price=30.0, increment=60, minimum=60)
    run_job(env, "burn", 8, f"{DAY}T08:00:00")
    events = Events()
    put_budget(env, amount="300", actionAtLimit="StopAll")
    checks = 0
    while env.status("burn") == "Running":
        env.clock.advance(300)  # the schedule's period
        monitor(env, events).run()
        env.run()
        checks += 1
        assert checks < 40
    cost = Decimal(env.job_props("burn")["cost"]["amount"])
    assert Decimal(300) <= cost <= Decimal(300) + Decimal(20) + Decimal(8 * 30 * 60) / 3600


def test_duplicate_thresholds_are_refused_and_operators_are_honoured(spending: Env):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="same threshold"):
        BudgetWrite.model_validate({"properties": {"amount": 10, "timePeriod": {"startDate": "2025-03-01T00:00:00Z"},
                                                   "notifications": {"a": {"threshold": 80}, "b": {"threshold": 80.0}}}})  # fmt: skip
    env, events = spending, Events()
    put_budget(env, notifications={"half": {"threshold": 48, "operator": "GreaterThan"},
                                   "most": {"threshold": 96, "operator": "GreaterThan"}})  # fmt: skip
    env.clock.set(f"{DAY}T09:00:00")  # 4.80 of 10 USD: 48 %, not above it
    monitor(env, events).run()
    assert events.kinds() == []
    env.clock.set(f"{DAY}T09:01:00")
    monitor(env, events).run()
    assert events.kinds() == [("Budget Threshold Crossed", "48")]
    assert (events.sent[0][1]["budget"], events.sent[0][1]["spend"]) == ("team", "4.880000")


@pytest.mark.parametrize(
    ("amount", "answered"),
    [(1e3, "1000.0"), (1000, "1000"), ("123456789.123456", "123456789.123456"), (0.1, "0.1"), ("80.50", "80.50")],
)
def test_an_amount_is_kept_exact_and_answered_as_a_plain_decimal_string(env: Env, amount: Any, answered: str):
    budget = put_budget(env, amount=amount)
    assert budget["properties"]["amount"] == answered
    assert env.w.budgets.get(env.admin(), env.sub, "team")["properties"]["amount"] == answered


@pytest.mark.parametrize(
    ("props", "field"),
    [
        ({"amount": "1234567890123"}, "amount"),  # past 15 digits: a JSON parser's float would change it
        ({"amount": "0.0000001"}, "amount"),
        ({"timePeriod": {"startDate": "2025-03-01T00:00:00+05:00"}}, "startDate"),  # 28 Feb 19:00 UTC
        ({"timePeriod": {"startDate": "0001-01-01T00:00:00+01:00"}}, "startDate"),
        ({"notifications": {"x": {"threshold": 50, "contactEmails": ["fin@example.com\r\nBcc: all@x.com"]}}},
         "contactEmails"),
        ({"notifications": {"x": {"threshold": 50, "contactEmails": ["not an address"]}}}, "contactEmails"),
    ],
)  # fmt: skip
def test_a_bad_amount_start_or_e_mail_is_refused_naming_it(props: dict[str, Any], field: str):
    from pydantic import ValidationError

    body = {"properties": {"amount": "10", "timePeriod": {"startDate": "2025-03-01T00:00:00Z"}, **props}}
    with pytest.raises(ValidationError) as refused:
        BudgetWrite.model_validate(body)
    assert any(field in str(e["loc"]) + e["msg"] for e in refused.value.errors()), refused.value.errors()


def test_a_start_with_an_offset_is_the_instant_it_names(env: Env):
    budget = put_budget(env, timePeriod={"startDate": "2025-03-01T05:00:00+05:00"})
    assert budget["properties"]["timePeriod"]["startDate"] == "2025-03-01T00:00:00Z"


def test_a_budget_is_seen_only_within_the_callers_scope_and_its_spend_by_admins(spending: Env):
    env, events = spending, Events()
    put_budget(env, "rg1-budget", filter={"dimensions": {"name": "ResourceGroupName", "values": [RG]}})
    put_budget(env, "whole")
    env.clock.set(f"{DAY}T09:00:00")
    monitor(env, events).run()
    rg2_consumer = env.consumer("ann", scopes=[f"/subscriptions/{env.sub}/resourceGroups/rg2"])
    assert env.w.budgets.in_subscription(rg2_consumer, env.sub) == []
    with pytest.raises(ResourceNotFound):
        env.w.budgets.get(rg2_consumer, env.sub, "rg1-budget")
    rg1_admin = env.admin(scopes=[f"/subscriptions/{env.sub}/resourceGroups/{RG}"])
    seen = env.w.budgets.in_subscription(rg1_admin, env.sub)
    assert [b["name"] for b in seen] == ["rg1-budget"]  # not the subscription's: it covers work it may not see
    assert seen[0]["properties"]["currentSpend"]["amount"] == "4.800000"
    consumer = env.consumer("bob")  # the whole subscription, but a consumer sees only its own work's cost
    shown = env.w.budgets.get(consumer, env.sub, "whole")["properties"]
    assert "currentSpend" not in shown and "status" not in shown
    assert "contactEmails" not in shown["notifications"]["half"]
    # but how near the budget that may refuse its work is: the share left, not the spend
    whole = env.w.budgets.get(env.admin(), env.sub, "whole")["properties"]
    left = 100 - int(Decimal(whole["currentSpend"]["amount"]) * 100 / Decimal(whole["amount"]))
    assert shown["standing"] == {"remainingPercent": left, "exceeded": False, "evaluatedAt": f"{DAY}T09:00:00Z"}
    assert 0 < left < 100


def test_spend_in_another_currency_is_shown_never_added_nor_ignored(env: Env):
    env.add_node("euro", price=1.5, currency="EUR")
    run_job(env, "eu", 1, f"{DAY}T08:00:00")
    put_budget(env)  # USD: the EUR job was placed before it existed
    env.clock.set(f"{DAY}T10:00:00")
    monitor(env, Events()).run()
    shown = status(env)
    assert shown["currentSpend"] == {"amount": "0.000000", "unit": "USD"}
    assert shown["status"]["spendInOtherCurrencies"] == [{"amount": "3.000000", "currency": "EUR"}]
    env.submit("more", 1)  # a new allocation in EUR under a USD budget: refused by placement, saying why
    env.run()
    assert "counts USD only" in env.job_props("more")["statusReason"]


def test_settled_and_open_allocations_count_once_across_their_close(spending: Env):
    """An allocation is counted open until its meter closes, then settled: the spend does not change when it
    closes (the usage sync settles it, the monitor reads it there)."""
    env, events = spending, Events()
    put_budget(env, amount="1000")
    env.clock.set(f"{DAY}T10:00:00")
    env.end_job("train", at=env.clock())
    monitor(env, events).run()
    before = status(env)["currentSpend"]["amount"]
    sync(env, f"{DAY}T13:00:00")  # past the late period: the meter closes, its month settled
    assert env.repos.meters.open_in(env.sub) == []
    monitor(env, events).run()
    assert status(env)["currentSpend"]["amount"] == before == "9.600000"


def test_a_budget_that_has_not_started_counts_nothing_and_is_not_spent(spending: Env):
    env = spending
    env.clock.set(f"{DAY}T11:05:00")
    later = put_budget(env, actionAtLimit="StopAll", timePeriod={"startDate": "2025-04-01T00:00:00Z"})
    assert later["properties"]["currentSpend"]["amount"] == "0.000000"
    assert later["properties"]["status"]["exceeded"] is False
    assert env.status("train") == "Running"


@pytest.mark.parametrize("amount", ["2_5", "١٢", "+12", " 12 ", "1E+3", "1e3", "12.", ".5", True])
def test_an_amount_string_is_plain_digits_or_refused(amount: Any):
    from pydantic import ValidationError

    body = {"properties": {"amount": amount, "timePeriod": {"startDate": "2025-03-01T00:00:00Z"}}}
    with pytest.raises(ValidationError, match="amount"):
        BudgetWrite.model_validate(body)


def test_the_monitor_goes_on_where_its_time_ran_short_so_no_budget_is_left_behind(env: Env):
    """Issue 27: every run started again at the first page of budgets, so past what one run could evaluate, the
    last budgets were never evaluated. A run cut short saves where it was; the next goes on from there."""
    body = {"properties": {"amount": "10", "currency": "USD", "timePeriod": {"startDate": "2025-03-01T00:00:00Z"}}}
    subs = [f"00000000-0000-0000-0000-{n:012d}" for n in range(250)]
    for sub in subs:
        env.w.budgets.put(env.admin(scopes=(f"/subscriptions/{sub}",)), sub, "team", BudgetWrite.model_validate(body))
    watch = monitor(env, Events())
    evaluated: list[str] = []
    real = watch._evaluate_all
    watch._evaluate_all = lambda group, report: (
        evaluated.extend(b.subscription_id for b in group),
        real(group, report),
    )
    runs = 0
    while set(evaluated) != set(subs):
        runs += 1
        assert runs <= 5, f"{len(set(evaluated))} of {len(subs)} budgets evaluated after {runs - 1} runs"
        allowance = iter([60.0] * 120 + [1.0] * 1000)  # each run has time for 120 subscriptions
        report = watch.run(time_left=allowance.__next__)
    assert runs == 3 and report.stopped_early is False
    # and a run that reaches the end starts the next one from the beginning
    evaluated.clear()
    assert watch.run().evaluated == 250 and evaluated[0] == subs[0]
