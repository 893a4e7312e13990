"""The API's requests over a period, counted as the SLOs count them (itl_accelerator/slo.py): all requests, those
answered with a 5xx, those answered later than the latency threshold. Two sources, one definition:

- :class:`CloudWatchApiMetrics` (in AWS): API Gateway's own metrics of the API — ``Count`` and ``5XXError`` (Sum)
  and ``Latency`` as ``PR(:threshold)``, the percent of requests answered within the threshold — in namespace
  ``AWS/ApiGateway`` with dimensions ``ApiName`` and ``Stage``: exactly the metrics template.yaml's SLO alarms
  watch, read in hourly data points.
- :class:`RequestLogMetrics` (locally): the request log the local API Gateway emulator writes (``itl_local``,
  ``API_REQUEST_LOG``): one JSON object per line, ``{"t": epoch seconds, "status": HTTP status, "ms": latency in
  milliseconds}`` for every request the emulator answered (its own gateway responses included, as API Gateway's
  ``Count`` includes them).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class ApiTotals:
    """Requests over a period: ``requests`` in all, ``server_errors`` answered 5xx, ``slow`` answered later than
    the latency threshold."""

    requests: int
    server_errors: int
    slow: int


class ApiMetrics(Protocol):
    """Where the API's requests are counted."""

    description: str

    def totals(self, start: int, end: int) -> ApiTotals:
        """The requests of ``[start, end)`` (epoch seconds)."""
        ...


HOUR = 3600


class CloudWatchApiMetrics:
    """API Gateway's metrics of one API stage in CloudWatch (module docstring). ``client``: a boto3 CloudWatch
    client; ``threshold_ms``: the latency SLO's threshold (milliseconds)."""

    def __init__(self, client: Any, api_name: str, stage: str, threshold_ms: int):
        if not api_name or not stage:
            raise ValueError("API_NAME and API_STAGE name the API whose metrics the SLO report reads")
        self._client = client
        self._dimensions = [{"Name": "ApiName", "Value": api_name}, {"Name": "Stage", "Value": stage}]
        self._threshold_ms = threshold_ms
        self.description = f"CloudWatch: AWS/ApiGateway metrics of ApiName={api_name}, Stage={stage}"

    def _query(self, query_id: str, metric: str, stat: str, period: int) -> dict[str, Any]:
        return {
            "Id": query_id,
            "MetricStat": {
                "Metric": {"Namespace": "AWS/ApiGateway", "MetricName": metric, "Dimensions": self._dimensions},
                "Period": period,
                "Stat": stat,
            },
            "ReturnData": True,
        }

    def totals(self, start: int, end: int) -> ApiTotals:
        """``GetMetricData`` of ``[start, end)`` in hourly data points (a period CloudWatch serves for 455 days; a
        month is at most 744 of them per metric, one call): requests and 5xx summed; the slow requests of each hour
        are its requests times the share its ``PR`` left above the threshold."""
        queries = [
            self._query("requests", "Count", "Sum", HOUR),
            self._query("errors", "5XXError", "Sum", HOUR),
            self._query("fast", "Latency", f"PR(:{self._threshold_ms})", HOUR),
        ]
        series: dict[str, dict[datetime, float]] = {"requests": {}, "errors": {}, "fast": {}}
        token: str | None = None
        while True:
            response = self._client.get_metric_data(
                MetricDataQueries=queries,
                StartTime=datetime.fromtimestamp(start, UTC),
                EndTime=datetime.fromtimestamp(math.ceil(end / HOUR) * HOUR, UTC),
                ScanBy="TimestampAscending",
                **({"NextToken": token} if token else {}),
            )
            for result in response.get("MetricDataResults", []):
                points = zip(result.get("Timestamps") or [], result.get("Values") or [], strict=False)
                series.setdefault(result["Id"], {}).update(points)
            token = response.get("NextToken")
            if not token:
                break
        requests = round(sum(series["requests"].values()))
        slow = sum(
            count * max(0.0, 100.0 - series["fast"].get(hour, 100.0)) / 100
            for hour, count in series["requests"].items()
        )
        return ApiTotals(
            requests=requests,
            server_errors=min(requests, round(sum(series["errors"].values()))),
            slow=min(requests, round(slow)),
        )


class RequestLogMetrics:
    """The local API Gateway emulator's request log at ``path`` (module docstring); a missing file is no requests.
    Lines that are not such objects are skipped (a line being written as the log is read)."""

    def __init__(self, path: str | Path, threshold_ms: int):
        self._path = Path(path)
        self._threshold_ms = threshold_ms
        self.description = f"the local stack's request log ({self._path.name})"

    def totals(self, start: int, end: int) -> ApiTotals:
        """The requests answered in ``[start, end)`` (epoch seconds), read from the whole file."""
        requests = errors = slow = 0
        try:
            lines = self._path.read_text().splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            try:
                entry = json.loads(line)
                moment, status, latency = float(entry["t"]), int(entry["status"]), float(entry["ms"])
            except (ValueError, KeyError, TypeError):
                continue
            if start <= moment < end:
                requests += 1
                errors += status >= 500
                slow += latency > self._threshold_ms
        return ApiTotals(requests=requests, server_errors=errors, slow=slow)
