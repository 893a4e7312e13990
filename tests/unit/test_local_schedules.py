"""The local stack's EventBridge Scheduler: the template's schedules, their expressions as EventBridge reads them,
the input it sends, and a runner that fires them on time."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from itl_local.schedules import Schedule, ScheduleRunner, find, schedules, unix_cron
from itl_local.template import Template

T0 = datetime(2026, 11, 30, 10, 0, 7, tzinfo=UTC)


def test_the_template_schedules_are_found_with_their_input():
    found = {s.name: s for s in schedules(Template())}
    reconcile = found["ReconcilerFunction.Every5Minutes"]
    assert reconcile.expression == "rate(5 minutes)"
    assert find(Template(), "ReconcilerFunction") == reconcile
    event = reconcile.event(T0)
    assert event["scheduledTime"] == "2026-11-30T10:00:07Z" and event["executionId"] != "<aws.scheduler.execution-id>"


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("rate(5 minutes)", T0 + timedelta(minutes=7), T0 + timedelta(minutes=10)),
        ("rate(1 hour)", T0, T0 + timedelta(hours=1)),
        ("rate(1 day)", T0 + timedelta(hours=23), T0 + timedelta(days=1)),
        ("cron(15 2 * * ? *)", T0, datetime(2026, 12, 1, 2, 15, tzinfo=UTC)),
        ("cron(0 * * * ? *)", T0, datetime(2026, 11, 30, 11, 0, tzinfo=UTC)),
        # EventBridge's day-of-week 1-7 is SUN-SAT: 2 = Monday; 2026-11-30 is a Monday, so the next is 2026-12-07
        ("cron(0 9 ? * 2 *)", T0, datetime(2026, 12, 7, 9, 0, tzinfo=UTC)),
        ("cron(0 9 ? * MON-FRI *)", T0, datetime(2026, 12, 1, 9, 0, tzinfo=UTC)),
        ("at(2026-12-24T18:00:00)", T0, datetime(2026, 12, 24, 18, 0, tzinfo=UTC)),
        ("at(2026-01-01T00:00:00)", T0, None),
    ],
)
def test_expressions_are_read_as_eventbridge_reads_them(expression, after, expected):
    assert Schedule("s", "F", "h", expression).next_after(after, T0) == expected


def test_an_eventbridge_cron_needs_six_fields():
    with pytest.raises(ValueError, match="6 fields"):
        unix_cron("0 9 * * *")
    assert unix_cron("0/5 8-17 ? * 2-6 *") == "0/5 8-17 * * 1-5"


def test_the_runner_fires_each_schedule_when_due_and_not_before():
    # Given a clock that the test moves, and two schedules
    now = [T0]
    fired: list[str] = []
    done = threading.Event()

    def report(schedule, outcome, ms):
        fired.append(f"{schedule.name}:{outcome}")
        done.set()

    runner = ScheduleRunner(
        [
            Schedule("fast", "F", "tests.unit.test_local_schedules._ok", "rate(1 minute)"),
            Schedule("slow", "G", "tests.unit.test_local_schedules._ok", "rate(1 hour)"),
        ],
        report=report,
        clock=lambda: now[0],
    )
    runner.start()
    try:
        # When a minute and a bit passes
        now[0] = T0 + timedelta(minutes=1, seconds=1)
        assert done.wait(5)
    finally:
        runner.stop()
    # Then the fast one fired once and the slow one not at all
    assert fired == ["fast:ok"]


def _ok(event, context):
    return {"ok": True, "jobsChecked": 1}


IDLE_FIRED: list[str] = []


def _idle(event, context):
    IDLE_FIRED.append(event.get("scheduledTime", ""))
    return {"examined": 0, "repaired": [], "exportLagHours": 2.5, "stoppedEarly": False}


def _boom(event, context):
    raise RuntimeError("a failing run")


def test_an_idle_run_is_not_reported_but_work_and_failures_are():
    # Given three schedules firing every 0.05 s: one with nothing to do, one that works, one that fails
    reported: list[str] = []
    both = threading.Event()

    def report(schedule, outcome, ms):
        reported.append(f"{schedule.name}:{outcome}")
        if {"busy:ok", "broken:RuntimeError"} <= set(reported) and len(IDLE_FIRED) >= 2:
            both.set()

    runner = ScheduleRunner(
        [
            Schedule("idle", "I", "tests.unit.test_local_schedules._idle", "rate(1 minute)"),
            Schedule("busy", "B", "tests.unit.test_local_schedules._ok", "rate(1 minute)"),
            Schedule("broken", "X", "tests.unit.test_local_schedules._boom", "rate(1 minute)"),
        ],
        report=report,
        every=0.05,
    )
    runner.start()
    try:
        # When they have fired (the idle one at least twice)
        assert both.wait(30)
    finally:
        runner.stop()
    # Then the idle runs were never reported (an idle stack prints nothing); the others were
    assert not [r for r in reported if r.startswith("idle")]
    assert len(IDLE_FIRED) >= 2


def test_export_download_and_schedule_refuse_a_day_that_is_not_yyyy_mm_dd():
    import pytest

    from itl_local.cli import main

    for argv in (
        ["export-download", "bogus"],
        ["export-download", "20261201"],
        ["schedule", "x", "--day", "2026-13-01"],
    ):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == 2


def test_every_schedule_of_the_template_may_invoke_its_function():
    """Scheduler invokes a target only when the schedule's role grants it (issue 27: the budget monitor's grant was
    missing, so it could never run in AWS and no test could see it)."""
    assert {s.name for s in schedules(Template()) if not s.permitted} == set()


def test_a_schedule_whose_role_may_not_invoke_its_function_is_refused_as_scheduler_refuses_it(tmp_path):
    from itl_local.schedules import ScheduleNotPermitted, fire
    from itl_local.template import DEFAULT_TEMPLATE

    text = DEFAULT_TEMPLATE.read_text()
    granted = (
        "                  - !GetAtt BudgetMonitorFunction.Arn\n                  - !Ref BudgetMonitorFunction.Alias\n"
    )
    assert granted in text
    path = tmp_path / "template.yaml"
    path.write_text(text.replace(granted, ""))
    monitor = find(Template(path), "budget-monitor")
    assert monitor.permitted is False
    with pytest.raises(ScheduleNotPermitted, match="BudgetMonitorFunction"):
        fire(monitor)
