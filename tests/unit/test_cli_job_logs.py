"""``job logs``: prints a job's log lines; ``--follow`` keeps following ``nextLink`` until the log is complete,
waiting when no new line came; Ctrl-C stops following. And ``slo show`` prints a row per objective."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.unit.cli_support import API, RG_PATH, FakeClock, run

LOGS = f"{RG_PATH}/sparkJobs/train-1/logs"


def page(numbers: list[int], after: int | None, complete: bool = False, status: str = "Running") -> httpx.Response:
    body: dict[str, Any] = {
        "value": [{"lineNumber": n, "time": "2026-12-01T10:00:00Z", "text": f"line {n}"} for n in numbers],
        "nextLink": None if complete else f"{API}{LOGS}?%24skipToken={after}",
        "jobStatus": status,
        "complete": complete,
    }
    return httpx.Response(200, json=body)


def log_api(pages: dict[str, list[httpx.Response]]) -> Any:
    """Answers by ``$skipToken`` (none: the first page), each key's answers in turn."""
    served: dict[str, int] = {}

    def handle(request: httpx.Request) -> httpx.Response:
        assert request.url.path == LOGS
        key = request.url.params.get("$skipToken", "first")
        answers = pages[key]
        served[key] = served.get(key, 0) + 1
        return answers[min(served[key], len(answers)) - 1]

    return handle


def test_without_follow_it_prints_the_lines_there_are_and_stops():
    api = log_api({"first": [page([1, 2], 2)], "2": [page([3], 3)], "3": [page([], 3)]})
    done = run(["job", "logs", "train-1", "--tail", "50"], api)
    assert done.code == 0, done.err
    assert done.out.splitlines() == ["line 1", "line 2", "line 3"]
    assert done.requests[0].url.params["tail"] == "50"
    assert "tail" not in done.requests[1].url.params  # the nextLink as given
    assert done.clock.sleeps == []


def test_follow_waits_for_new_lines_until_the_log_is_complete():
    api = log_api(
        {
            "first": [page([1], 1)],
            "1": [page([], 1), page([], 1), page([2, 3], 3)],
            "3": [page([4], 4, complete=True, status="Succeeded")],
        }
    )
    done = run(["job", "logs", "train-1", "--follow", "--interval", "0.5"], api, clock=FakeClock())
    assert done.code == 0, done.err
    assert done.out.splitlines() == ["line 1", "line 2", "line 3", "line 4"]
    assert done.clock.sleeps == [0.5, 0.5]


def test_json_output_is_one_object_per_line():
    done = run(["job", "logs", "train-1", "-o", "json"], log_api({"first": [page([1, 2], 2, complete=True)]}))
    assert [json.loads(line)["lineNumber"] for line in done.out.splitlines()] == [1, 2]


def test_ctrl_c_stops_following_and_says_how_to_follow_again():
    api = log_api({"first": [page([1], 1)], "1": [page([], 1)]})
    done = run(["job", "logs", "train-1", "-f"], api, clock=FakeClock(interrupt_after=1))
    assert done.code == 130
    assert "job train-1 goes on" in done.err and "itlc-accelerator job logs train-1 --follow" in done.err


def test_another_users_job_is_the_apis_404():
    missing = httpx.Response(
        404, json={"error": {"code": "ResourceNotFound", "message": "The Resource ... not found."}}
    )
    done = run(["job", "logs", "theirs"], lambda r: missing)
    assert done.code == 1 and done.err.startswith("ERROR: ResourceNotFound:")


def test_slo_show_prints_a_row_per_objective():
    body = {
        "month": "2026-11",
        "complete": True,
        "until": "2026-12-01T00:00:00Z",
        "source": "CloudWatch",
        "objectives": [
            {"name": "availability", "goalPercent": 99.9, "requests": 1000, "badRequests": 1, "met": True,
             "attainmentPercent": 99.9, "burnRate": 1.0, "errorBudget": {"remainingFraction": 0.0, "remainingMinutes": 0.0}},
            {"name": "latency", "goalPercent": 99.0, "requests": 1000, "badRequests": 2, "met": True,
             "attainmentPercent": 99.8, "burnRate": 0.2, "errorBudget": {"remainingFraction": 0.8, "remainingMinutes": 345.6}},
        ],
    }  # fmt: skip
    done = run(["slo", "show", "--month", "2026-11", "-o", "table"], lambda r: httpx.Response(200, json=body))
    assert done.code == 0, done.err
    rows = done.out.splitlines()
    assert rows[0].split()[:3] == ["Objective", "Goal", "%"] and rows[2].startswith("availability")
    assert "345.6" in rows[3] and "2026-11 (complete)" in done.err
    assert done.requests[0].url.path.endswith("/providers/ITL.Accelerator/slo")
    assert done.requests[0].url.params["month"] == "2026-11"
