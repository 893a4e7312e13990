"""The SLO report (services/slo_report.py) over both sources of the API's requests (itl_accelerator/api_metrics.py):
the local request log and CloudWatch's API Gateway metrics, read with the alarms' own definitions."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from itl_accelerator.api_metrics import ApiTotals, CloudWatchApiMetrics, RequestLogMetrics
from itl_accelerator.errors import InvalidParameter
from itl_accelerator.services.api.slo_report import SloReportService
from itl_accelerator.settings import Settings

NOW = datetime(2026, 12, 10, 12, tzinfo=UTC).timestamp()
NOV_1 = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
DEC_1 = datetime(2026, 12, 1, tzinfo=UTC).timestamp()


def write_log(path: Path, entries: list[tuple[float, int, float]]) -> Path:
    path.write_text("".join(json.dumps({"t": t, "status": s, "ms": ms}) + "\n" for t, s, ms in entries) + "{broken\n")
    return path


def test_the_request_log_counts_requests_5xx_and_slow_ones_of_the_period(tmp_path):
    log = write_log(
        tmp_path / "r.jsonl",
        [
            (NOV_1 - 1, 500, 10),  # October: not counted
            (NOV_1, 200, 20),
            (NOV_1 + 60, 503, 30),
            (NOV_1 + 120, 200, 1500),  # slow
            (DEC_1, 500, 5000),  # December: not counted
        ],
    )
    totals = RequestLogMetrics(log, threshold_ms=1000).totals(int(NOV_1), int(DEC_1))
    assert totals == ApiTotals(requests=3, server_errors=1, slow=1)
    assert RequestLogMetrics(tmp_path / "missing", 1000).totals(0, int(NOW)) == ApiTotals(0, 0, 0)


def test_a_past_month_report(tmp_path):
    entries = [(NOV_1 + i, 200, 50) for i in range(9990)] + [(NOV_1 + 20000 + i, 500, 2000) for i in range(10)]
    service = SloReportService(
        RequestLogMetrics(write_log(tmp_path / "r.jsonl", entries), 1000), Settings(), clock=lambda: NOW
    )
    report = service.month("2026-11")
    assert (report["month"], report["start"], report["end"], report["until"], report["complete"]) == (
        "2026-11",
        "2026-11-01T00:00:00Z",
        "2026-12-01T00:00:00Z",
        "2026-12-01T00:00:00Z",
        True,
    )
    availability, latency = report["objectives"]
    assert availability["name"] == "availability" and availability["goalPercent"] == 99.9
    assert (availability["requests"], availability["badRequests"], availability["attainmentPercent"]) == (
        10_000,
        10,
        99.9,
    )
    assert availability["met"] is True and availability["burnRate"] == 1.0
    assert availability["errorBudget"] == {
        "allowedBadRequests": 10.0,
        "remainingFraction": 0.0,
        "minutes": 43.2,  # 0.1 % of November's 30 days
        "remainingMinutes": 0.0,
    }
    assert latency["name"] == "latency" and latency["thresholdMs"] == 1000 and latency["goalPercent"] == 99.0
    assert latency["badRequests"] == 10 and latency["errorBudget"]["remainingFraction"] == 0.9
    assert "local stack" in report["source"] and "every tenant" in report["scope"]


def test_the_running_month_is_reported_so_far_and_is_the_default(tmp_path):
    service = SloReportService(RequestLogMetrics(tmp_path / "none", 1000), Settings(), clock=lambda: NOW)
    report = service.month(None)
    assert report["month"] == "2026-12" and report["complete"] is False
    assert report["until"] == "2026-12-10T12:00:00Z"
    assert report["objectives"][0]["errorBudget"]["minutes"] == 44.64  # 0.1 % of December's 31 days


@pytest.mark.parametrize(
    "month", ["2026-13", "november", "2027-01", "2026-1", "0001-01", "1969-12", "9999-12", "0000-01"]
)
def test_a_bad_or_future_month_is_400_naming_it(tmp_path, month):
    service = SloReportService(RequestLogMetrics(tmp_path / "none", 1000), Settings(), clock=lambda: NOW)
    with pytest.raises(InvalidParameter) as raised:
        service.month(month)
    assert raised.value.target == "month"


def test_goals_come_from_the_settings(tmp_path):
    settings = Settings(slo_availability_percent=Decimal("99.5"), slo_latency_threshold_ms=300)
    report = SloReportService(RequestLogMetrics(tmp_path / "none", 300), settings, clock=lambda: NOW).month(None)
    assert report["objectives"][0]["goalPercent"] == 99.5 and report["objectives"][1]["thresholdMs"] == 300
    assert "later than 300 ms" in report["objectives"][1]["badWhen"]


def test_cloudwatch_is_asked_for_the_alarms_metrics_in_hourly_points():
    client = boto3.client("cloudwatch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    h0, h1 = datetime(2026, 11, 3, 10, tzinfo=UTC), datetime(2026, 11, 3, 11, tzinfo=UTC)
    dimensions = [{"Name": "ApiName", "Value": "itl-api"}, {"Name": "Stage", "Value": "v1"}]

    def query(query_id: str, metric: str, stat: str) -> dict:
        return {
            "Id": query_id,
            "MetricStat": {
                "Metric": {"Namespace": "AWS/ApiGateway", "MetricName": metric, "Dimensions": dimensions},
                "Period": 3600,
                "Stat": stat,
            },
            "ReturnData": True,
        }

    with Stubber(client) as stub:
        stub.add_response(
            "get_metric_data",
            {
                "MetricDataResults": [
                    {"Id": "requests", "Timestamps": [h0, h1], "Values": [1000.0, 3000.0], "StatusCode": "Complete"},
                    {"Id": "errors", "Timestamps": [h0, h1], "Values": [2.0, 1.0], "StatusCode": "Complete"},
                    {"Id": "fast", "Timestamps": [h0, h1], "Values": [99.5, 98.0], "StatusCode": "Complete"},
                ]
            },
            {
                "MetricDataQueries": [
                    query("requests", "Count", "Sum"),
                    query("errors", "5XXError", "Sum"),
                    query("fast", "Latency", "PR(:1000)"),
                ],
                "StartTime": datetime(2026, 11, 1, tzinfo=UTC),
                "EndTime": datetime(2026, 12, 1, tzinfo=UTC),
                "ScanBy": "TimestampAscending",
            },
        )
        totals = CloudWatchApiMetrics(client, "itl-api", "v1", 1000).totals(int(NOV_1), int(DEC_1))
    # (the stub checked every parameter of the call); slow: 0.5 % of the first hour's 1000 requests, 2 % of 3000
    assert totals == ApiTotals(requests=4000, server_errors=3, slow=65)


def test_cloudwatch_needs_the_api_it_reads():
    with pytest.raises(ValueError, match="API_NAME"):
        CloudWatchApiMetrics(object(), "", "v1", 1000)
