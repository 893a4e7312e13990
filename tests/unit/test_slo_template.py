"""template.yaml holds the API's SLOs as the on-call will live with them: the goals, the multiwindow multi-burn-rate
alarms of the Google SRE workbook (windows and burn rates from itl_accelerator/slo.py, the table the report uses
too) paired into composite alarms that notify the alarm topic, a dashboard of metrics the code publishes, and a
canary every 5 minutes on /health and one authenticated read."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from itl_accelerator import slo
from itl_local.template import Template

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = Template()
RESOURCES = TEMPLATE.resources
WINDOW_LABELS = {300: "5m", 1800: "30m", 3600: "1h", 21600: "6h", 259200: "3d"}
SLOS = {
    # SLO: (goal parameter, goal, the metric whose share is bad, what the expression divides by)
    "Availability": ("AvailabilitySloPercent", "99.9", "5XXError", "FILL(errors, 0) / requests"),
    "Latency": ("LatencySloPercent", "99", "Latency", "(100 - FILL(fast, 100)) / 100"),
}


def sub_text(value: Any) -> str:
    """The text of a ``!Sub`` (string form) or a plain string."""
    if isinstance(value, dict):
        ((fn, arg),) = value.items()
        assert fn == "Fn::Sub", value
        return str(arg)
    return str(value)


def test_the_goals_and_the_latency_threshold():
    parameters = TEMPLATE.doc["Parameters"]
    assert Decimal(str(parameters["AvailabilitySloPercent"]["Default"])) == Decimal("99.9")
    assert Decimal(str(parameters["LatencySloPercent"]["Default"])) == Decimal("99")
    assert int(parameters["LatencyThresholdMs"]["Default"]) == 1000
    # and the budget they leave: 0.1 % of 30 days is 43.2 minutes
    assert slo.budget_minutes(parameters["AvailabilitySloPercent"]["Default"]) == Decimal("43.2")


def pairs_of(rule: str) -> list[tuple[str, str]]:
    """``(ALARM("${A}") AND ALARM("${B}")) OR (...)`` → [(A, B), ...]."""
    return re.findall(r'\(ALARM\("\$\{(\w+)\}"\) AND ALARM\("\$\{(\w+)\}"\)\)', rule)


def window_and_burn(logical_id: str, slo_name: str) -> tuple[int, Decimal]:
    """An SLO child alarm's window (every metric's period) and burn-rate threshold, after checking its shape."""
    props = RESOURCES[logical_id]["Properties"]
    parameter, _, metric, ratio = SLOS[slo_name]
    assert RESOURCES[logical_id]["Type"] == "AWS::CloudWatch::Alarm"
    assert props["ComparisonOperator"] == "GreaterThanThreshold"
    assert (props["EvaluationPeriods"], props["DatapointsToAlarm"]) == (1, 1)  # one sliding window
    assert props["TreatMissingData"] == "notBreaching"  # no traffic burns no budget
    assert "AlarmActions" not in props, "only the composite alarms notify"
    metrics = {m["Id"]: m for m in props["Metrics"]}
    expression = sub_text(metrics["burn"]["Expression"])
    assert expression.replace(" ", "") == (
        f"IF(requests > 0, {ratio}, 0) / (1 - ${{{parameter}}} / 100)".replace(" ", "")
    )
    stats = {m["MetricStat"]["Metric"]["MetricName"]: m["MetricStat"] for m in metrics.values() if "MetricStat" in m}
    assert set(stats) == {"Count", metric}
    for stat in stats.values():
        assert stat["Metric"]["Namespace"] == "AWS/ApiGateway"
        dimensions = {d["Name"]: d["Value"] for d in stat["Metric"]["Dimensions"]}
        assert sub_text(dimensions["ApiName"]) == "${AWS::StackName}-api"
        assert dimensions["Stage"] == {"Ref": "StageName"}
    assert stats["Count"]["Stat"] == "Sum"
    if slo_name == "Latency":
        assert sub_text(stats["Latency"]["Stat"]) == "PR(:${LatencyThresholdMs})"  # share answered within
    else:
        assert stats["5XXError"]["Stat"] == "Sum"
    periods = {stat["Period"] for stat in stats.values()}
    assert len(periods) == 1
    return periods.pop(), Decimal(str(props["Threshold"]))


@pytest.mark.parametrize("slo_name", sorted(SLOS))
@pytest.mark.parametrize("severity", ["page", "ticket"])
def test_burn_rate_alarms_follow_the_workbook_table(slo_name, severity):
    # Given the composite alarm of this SLO and severity
    composite = RESOURCES[f"{slo_name}{severity.title()}Alarm"]
    assert composite["Type"] == "AWS::CloudWatch::CompositeAlarm"
    props = composite["Properties"]
    # Then it notifies the alarm topic, and fires when both windows of one pair of the table burn too fast
    assert props["AlarmActions"] == [{"Ref": "OperationsAlarmTopic"}]
    rule = sub_text(props["AlarmRule"])
    found = []
    for long_id, short_id in pairs_of(rule):
        (long_window, long_burn), (short_window, short_burn) = (
            window_and_burn(long_id, slo_name),
            window_and_burn(short_id, slo_name),
        )
        assert long_burn == short_burn
        assert long_id == f"{slo_name}{severity.title()}{WINDOW_LABELS[long_window]}Alarm"
        found.append((long_burn, long_window, short_window))
    expected = [(a.burn_rate, a.long_window, a.short_window) for a in slo.BURN_RATE_ALERTS if a.severity == severity]
    assert found == expected
    assert rule.count("ALARM(") == 2 * len(expected)


def test_every_slo_alarm_belongs_to_a_composite():
    children = {
        k
        for k, v in RESOURCES.items()
        if v["Type"] == "AWS::CloudWatch::Alarm" and re.match(r"(Availability|Latency)", k)
    }
    paired = {
        alarm
        for k, v in RESOURCES.items()
        if v["Type"] == "AWS::CloudWatch::CompositeAlarm"
        for pair in pairs_of(sub_text(v["Properties"]["AlarmRule"]))
        for alarm in pair
    }
    assert children == paired and len(children) == 12


def test_a_canary_checks_health_and_one_authenticated_read_every_5_minutes():
    canary = next(v["Properties"] for v in RESOURCES.values() if v["Type"] == "AWS::Synthetics::Canary")
    assert canary["Schedule"]["Expression"] == "rate(5 minutes)"
    assert canary["StartCanaryAfterCreation"] is True
    script = canary["Code"]["Script"]
    assert "get('health', '/health'" in script
    assert "grant_type: 'client_credentials'" in script and "'Bearer ' + bearer" in script
    assert "/providers/ITL.Accelerator/sparkNodes" in script
    assert canary["RunConfig"]["EnvironmentVariables"]["CREDENTIALS_SECRET_ID"] == {"Ref": "CanaryCredentialsSecret"}
    # And its failures reach the on-call
    alarm = RESOURCES["ApiCanaryFailingAlarm"]["Properties"]
    assert alarm["Namespace"] == "CloudWatchSynthetics" and alarm["AlarmActions"] == [{"Ref": "OperationsAlarmTopic"}]


def _published_metric_names() -> set[str]:
    """Every ITL/Accelerator metric the code publishes: ``name="..."`` literals, and ``{prefix}{Count}`` for the
    counts each ``publish_counts``/``_publish`` prefix is given (report fields, snake_case → CamelCase)."""
    sources = [*(REPO_ROOT / "functions").rglob("*.py"), *(REPO_ROOT / "layers").rglob("*.py")]
    text = "\n".join(p.read_text() for p in sources)
    names = set(re.findall(r'add_metric\(\s*name="(\w+)"', text))
    prefixes = set(re.findall(r'(?:publish_counts\(\w+, |_publish\()"(\w+)"', text))
    fields = {m.group(1) for m in re.finditer(r"^\s+(\w+): (?:int|bool) = 0", text, re.M)}
    fields |= {m.group(1) for m in re.finditer(r'"(\w+)": (?:self\.|len|sum|counts)', text)}
    fields |= set(re.findall(r'counts\["(\w+)"\]', text))
    camel = {"".join(p[:1].upper() + p[1:] for p in f.split("_")) for f in fields}
    return names | {p + c for p in prefixes for c in camel}


def test_the_dashboard_shows_metrics_that_exist():
    text = sub_text(RESOURCES["OperationsDashboard"]["Properties"]["DashboardBody"])
    body = json.loads(re.sub(r"\$\{[^}]+\}", "0", text))  # ${...} are strings' parts or numbers
    shown = {
        m[1]
        for w in body["widgets"]
        for m in (w.get("properties") or {}).get("metrics", [])
        if isinstance(m[0], str) and m[0] == "ITL/Accelerator"
    }
    assert shown, "the dashboard shows none of the provider's own metrics"
    missing = shown - _published_metric_names()
    assert not missing, f"the dashboard shows metrics nothing publishes: {sorted(missing)}"
    titles = " | ".join(w["properties"].get("title", "") for w in body["widgets"] if w["type"] != "text")
    for topic in ("API requests", "latency", "Workflow failures", "Fleet allocation", "Usage sync lag", "export lag"):
        assert topic.lower() in titles.lower(), topic


def test_every_alarm_on_the_providers_metrics_watches_one_the_code_publishes():
    """A misspelt metric name is an alarm that can never fire (with ``notBreaching``, silently)."""
    watched = {
        name: props["MetricName"]
        for name, resource in RESOURCES.items()
        if resource["Type"] == "AWS::CloudWatch::Alarm"
        and (props := resource["Properties"]).get("Namespace") == "ITL/Accelerator"
    }
    assert "UsageSyncLagAlarm" in watched  # issue 27: the sync falling behind once alarmed nothing
    missing = {alarm: metric for alarm, metric in watched.items() if metric not in _published_metric_names()}
    assert not missing, missing
    lag = RESOURCES["UsageSyncLagAlarm"]["Properties"]
    assert lag["Statistic"] == "Maximum" and lag["ComparisonOperator"] == "GreaterThanThreshold"
    assert lag["AlarmActions"] == [{"Ref": "OperationsAlarmTopic"}]


def test_an_alarm_on_a_count_published_only_when_non_zero_does_not_breach_on_missing_data():
    """observability.publish_counts leaves zeros out (an idle deployment pays for no metric it does not need): an
    alarm on such a count that treated missing data as breaching would fire on every quiet period."""
    text = "\n".join(
        p.read_text() for p in [*(REPO_ROOT / "functions").rglob("*.py"), *(REPO_ROOT / "layers").rglob("*.py")]
    )
    by_name = set(re.findall(r'add_metric\(\s*name="(\w+)"', text))
    breaching = {
        name: props["MetricName"]
        for name, resource in RESOURCES.items()
        if resource["Type"] == "AWS::CloudWatch::Alarm"
        and (props := resource["Properties"]).get("Namespace") == "ITL/Accelerator"
        and props.get("TreatMissingData") != "notBreaching"
    }
    assert breaching, "the export and sync heartbeats must breach when their runs stop"
    assert set(breaching.values()) <= by_name, breaching
