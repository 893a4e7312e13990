"""Given each command against a mocked API, it sends the request docs/CLI.md describes: nodes with pricing and
availability, jobs with their workload, --mine by the token's subject, stats for --hours, audit since a time."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import httpx

from itlc_accelerator.commands.audit import to_time
from tests.unit.cli_support import (
    RG_PATH,
    SUB,
    accepted,
    arm_error,
    job,
    jwt,
    node,
    operation,
    routes,
    run,
    status_path,
)

NODES = f"{RG_PATH}/sparkNodes"
JOBS = f"{RG_PATH}/sparkJobs"


def sent(request: httpx.Request) -> Any:
    return json.loads(request.read())


def echo(status: int = 200, body: Any = None) -> Any:
    return lambda request: httpx.Response(status, json=body if body is not None else node())


def test_node_create_sends_the_whole_node():
    done = run(
        [
            "node", "create", "dgx-1", "--location", "us-east-1", "--sku", "DGX-H100-8GPU", "--gpus", "8",
            "--gpu-model", "H100", "--gpu-memory-gb", "80", "--price", "2.5", "--currency", "eur",
            "--owner", "owner-123", "--tag", "team=ml", "--tag", "tier=gold",
        ],
        routes({f"POST {NODES}": echo(201)}),
    )  # fmt: skip
    assert done.code == 0, done.err
    assert sent(done.requests[0]) == {
        "name": "dgx-1",
        "location": "us-east-1",
        "sku": {"name": "DGX-H100-8GPU", "capacity": 8},
        "tags": {"team": "ml", "tier": "gold"},
        "properties": {
            "hardwareSpecs": {"gpuModel": "H100", "gpuCount": 8, "gpuMemoryGb": 80},
            "pricing": {"pricePerAcceleratorHour": 2.5, "currency": "EUR"},
            "owner": "owner-123",
        },
    }


def test_node_update_patches_only_what_is_given():
    api = routes({f"PATCH {NODES}/dgx-1": echo()})
    price = run(["node", "update", "dgx-1", "--price", "3", "--currency", "USD"], api)
    assert sent(price.requests[0]) == {"properties": {"pricing": {"pricePerAcceleratorHour": 3.0, "currency": "USD"}}}
    both = run(["node", "update", "dgx-1", "--availability", "Maintenance", "--tag", "a=1"], api)
    assert sent(both.requests[0]) == {"properties": {"availability": "Maintenance"}, "tags": {"a": "1"}}
    cordon = run(["node", "cordon", "dgx-1"], api)
    uncordon = run(["node", "uncordon", "dgx-1"], api)
    assert sent(cordon.requests[0]) == {"properties": {"availability": "Cordoned"}}
    assert sent(uncordon.requests[0]) == {"properties": {"availability": "Available"}}
    assert cordon.json() == node()


def test_node_list_without_a_resource_group_lists_the_subscription():
    api = routes({f"GET /subscriptions/{SUB}/providers/ITL.Accelerator/sparkNodes": echo(body={"value": []})})
    done = run(["node", "list"], api, env={"CONTROLPLANE_RESOURCE_GROUP": None})
    assert done.code == 0 and done.json() == {"value": [], "nextLink": None}


def submitted(args: list[str]) -> Any:
    api = routes(
        {
            f"POST {JOBS}": accepted(location="global"),
            f"GET {status_path(location='global')}": operation("Accepted"),
        }
    )
    done = run(["job", "submit", "train-1", "--gpus", "4", "--memory-gb", "320", "--no-wait", *args], api)
    assert done.code == 0, done.err
    return sent(done.requests[0])


def test_job_submit_sends_the_seed_sizes_and_only_the_options_given():
    assert submitted([]) == {"name": "train-1", "properties": {"requestedGpus": 4, "requestedMemoryGb": 320}}


def test_job_submit_sends_a_multi_node_job():
    api = routes(
        {
            f"POST {JOBS}": accepted(location="global"),
            f"GET {status_path(location='global')}": operation("Accepted"),
        }
    )
    done = run(["job", "submit", "big", "--accelerator", "gpu:h100=8", "--memory-gb", "640", "--nodes", "2",
                "--no-wait"], api)  # fmt: skip
    assert done.code == 0, done.err
    assert sent(done.requests[0])["properties"]["accelerator"] == {
        "kind": "gpu", "model": "h100", "count": 8, "memoryGb": 640, "nodes": 2}  # fmt: skip


def test_job_submit_sends_a_retry_strategy_and_consent_to_preemption():
    body = submitted(
        ["--retry-attempts", "3", "--retry-on-exit-code", "3", "--retry-on-exit-code", "13*", "--preemptible",
         "--requeue-on-preemption"]
    )  # fmt: skip
    assert body["properties"]["retryStrategy"] == {
        "attempts": 3,
        "evaluateOnExit": [
            {"onExitCode": "3", "action": "RETRY"},
            {"onExitCode": "13*", "action": "RETRY"},
            {"onReason": "*", "action": "EXIT"},
        ],
    }
    assert (body["properties"]["preemptible"], body["properties"]["preemptMode"]) == (True, "Requeue")
    assert submitted(["--retry-attempts", "2"])["properties"]["retryStrategy"] == {"attempts": 2}


def test_job_submit_sends_the_workload_with_the_command_after_the_double_dash():
    body = submitted(
        [
            "--type", "fineTuning", "--image", "nvcr.io/nvidia/nemo:24.09", "--env", "EPOCHS=3", "--gpu-model", "H100",
            "--location", "us-east-1", "--priority", "7", "--max-duration-minutes", "60", "--tag", "team=ml",
            "--", "python", "-m", "train", "--lr", "0.1",
        ]
    )  # fmt: skip
    assert body == {
        "name": "train-1",
        "location": "us-east-1",
        "tags": {"team": "ml"},
        "properties": {
            "requestedGpus": 4,
            "requestedMemoryGb": 320,
            "workload": {
                "image": "nvcr.io/nvidia/nemo:24.09",
                "command": ["python", "-m", "train", "--lr", "0.1"],
                "env": {"EPOCHS": "3"},
            },
            "jobType": "fineTuning",
            "gpuModel": "H100",
            "priority": 7,
            "maxDurationMinutes": 60,
        },
    }


def test_job_list_mine_asks_for_the_token_subject():
    api = routes({f"GET {JOBS}": echo(body={"value": [job()]})})
    mine = run(["job", "list", "--mine"], api, env={"CONTROLPLANE_TOKEN": jwt({"sub": "alice", "aud": "x"})})
    assert mine.code == 0 and mine.requests[0].url.params["submitted_by"] == "alice"
    bob = run(["job", "list", "--submitted-by", "bob"], api)
    assert bob.requests[0].url.params["submitted_by"] == "bob"
    everyone = run(["job", "list"], api)
    assert "submitted_by" not in everyone.requests[0].url.params


def test_job_list_without_a_resource_group_lists_the_subscription():
    api = routes({f"GET /subscriptions/{SUB}/providers/ITL.Accelerator/sparkJobs": echo(body={"value": []})})
    done = run(["job", "list", "--submitted-by", "alice"], api, env={"CONTROLPLANE_RESOURCE_GROUP": None})
    assert done.code == 0 and done.requests[0].url.params["submitted_by"] == "alice"


def test_job_delete_and_show():
    api = routes({f"DELETE {JOBS}/train-1": httpx.Response(200), f"GET {JOBS}/train-1": echo(body=job())})
    assert run(["job", "delete", "train-1"], api).out == ""
    assert run(["job", "show", "train-1"], api).json() == job()


STATS = {
    "resourceId": f"{NODES}/dgx-1/sparkOllamaInstances/llama-1",
    "hours": 2,
    "value": [
        {"timeStamp": "2026-11-01T10:00:00Z", "gpuSeconds": 7200, "requests": 10},
        {"timeStamp": "2026-11-01T11:00:00Z", "gpuSeconds": 3600, "requests": 4},
    ],
    "totals": {"gpuSeconds": 10800, "requests": 14},
}


def test_instance_stats_asks_for_the_hours_and_prints_the_body():
    api = routes({f"GET {NODES}/dgx-1/sparkOllamaInstances/llama-1/stats": echo(body=STATS)})
    done = run(["instance", "stats", "llama-1", "--node", "dgx-1", "--hours", "2", "-o", "json"], api)
    assert done.code == 0 and done.json() == STATS
    assert done.requests[0].url.params["hours"] == "2"
    table = run(["instance", "stats", "llama-1", "--node", "dgx-1", "-o", "table"], api).out.splitlines()
    assert table[0].split() == ["timeStamp", "gpuSeconds", "requests"]
    assert table[2].split() == ["2026-11-01T10:00:00Z", "7200", "10"]
    assert table[-1].split() == ["10800", "14"]
    ids = run(["instance", "stats", "llama-1", "--node", "dgx-1", "-o", "id"], api)
    assert ids.out == STATS["resourceId"] + "\n"
    assert run(["instance", "stats", "llama-1", "--node", "dgx-1"], api).requests[0].url.params["hours"] == "24"


def test_a_stats_body_without_points_is_a_table_of_its_fields():
    api = routes({f"GET {JOBS}/train-1/stats": echo(body={"resourceId": "r", "hours": 24, "gpuSeconds": 5})})
    done = run(["usage", "show", "--job", "train-1", "-o", "table"], api)
    assert [line.split() for line in done.out.splitlines()[2:]] == [
        ["resourceId", "r"],
        ["hours", "24"],
        ["gpuSeconds", "5"],
    ]


def test_usage_show_names_one_resource_of_any_kind():
    seen: list[str] = []

    def stats(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(200, json=STATS)

    api = lambda request: stats(request)  # noqa: E731
    for args in (
        ["--node", "dgx-1"],
        ["--node", "dgx-1", "--instance", "llama-1"],
        ["--job", "train-1"],
        ["--resource", f"{JOBS}/train-2"],
    ):
        assert run(["usage", "show", *args, "--hours", "720"], api).code == 0
    assert seen == [
        f"{NODES}/dgx-1/stats",
        f"{NODES}/dgx-1/sparkOllamaInstances/llama-1/stats",
        f"{JOBS}/train-1/stats",
        f"{JOBS}/train-2/stats",
    ]
    assert run(["usage", "show", "--resource", "dgx-1"], api).code == 2


def test_audit_list_filters_by_resource_and_time():
    audit = f"GET /subscriptions/{SUB}/providers/ITL.Accelerator/auditEvents"
    api = routes({audit: echo(body={"value": [], "nextLink": None})})
    done = run(
        ["audit", "list", "--resource", f"{NODES}/dgx-1", "--since", "2026-11-01T00:00:00Z", "--until", "1h"], api
    )
    params = done.requests[0].url.params
    assert params["resourceId"] == f"{NODES}/dgx-1" and params["startTime"] == "2026-11-01T00:00:00Z"
    assert params["endTime"].endswith("Z") and len(params["endTime"]) == 20
    assert "startTime" not in run(["audit", "list"], api).requests[0].url.params
    newest = run(["audit", "list", "--actor", "ada", "--newest-first"], api).requests[0].url.params
    assert (newest["actor"], newest["$orderby"]) == ("ada", "timestamp desc")
    assert "$orderby" not in run(["audit", "list"], api).requests[0].url.params


def test_relative_times_count_back_from_now():
    now = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
    assert to_time("90m", now) == "2026-11-02T10:30:00Z"
    assert to_time("2d", now) == "2026-10-31T12:00:00Z"
    assert to_time("2026-01-01T00:00:00+01:00", now) == "2026-01-01T00:00:00+01:00"
    assert to_time(None, now) is None


def test_the_token_is_never_sent_to_another_origin_than_the_api_url():
    # Given an operation URL on another port of the same host, and one on another host
    for url in (
        "http://127.0.0.1:9999/subscriptions/sub-1/providers/ITL.Accelerator/locations/global/operationStatuses/x",
        "https://evil.example/subscriptions/sub-1/providers/ITL.Accelerator/locations/global/operationStatuses/x",
    ):
        for command in (["operation", "show", url], ["operation", "wait", url]):
            done = run(command, routes({}))
            # Then nothing is sent, and it is a usage error naming the origin the token is for
            assert done.code == 2 and done.requests == [], done.err
            assert "the token is sent only there" in done.err


def test_a_price_that_is_no_number_is_a_usage_error():
    for price in ("nan", "inf", "-1", "abc"):
        done = run(["node", "update", "dgx-1", "--price", price], routes({}))
        assert done.code == 2 and done.requests == [] and "Traceback" not in done.err, done.err


def test_a_time_that_is_no_time_is_a_usage_error_naming_the_option():
    for command in (["audit", "list", "--since", "yesterday"], ["job", "logs", "train-1", "--since", "2026-05-01"]):
        done = run(command, routes({}))
        # Then nothing is sent, and it names the CLI's option, not the API's startTime
        assert done.code == 2 and done.requests == [], done.err
        assert "--since" in done.err and "startTime" not in done.err


def test_an_api_url_that_is_no_url_is_a_usage_error():
    for url in ("notaurl", "ftp://h/", "http://"):
        done = run(["node", "list", "--api-url", url], routes({}))
        assert done.code == 2 and done.requests == [] and "--api-url" in done.err, done.err


def test_cost_export_joins_the_pages_of_a_days_billing_file_into_one_focus_csv(tmp_path):
    import csv

    base = f"/subscriptions/{SUB}/providers/ITL.Accelerator/billingExports/2026-11-30"
    columns = [{"name": n, "type": "String"} for n in ("BilledCost", "BillingCurrency", "ResourceName")]

    def page(rows: list[list[str]], next_link: str | None) -> httpx.Response:
        props = {"day": "2026-11-30", "columns": columns, "rows": rows, "nextLink": next_link}
        return httpx.Response(200, json={"name": "2026-11-30", "properties": props})

    def api(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("$skipToken") == "t1":
            return page([["0.5", "EUR", "x,y"], ["0.25", "USD", "=cmd"]], None)
        return page([["1.000001", "USD", "train"]], f"http://api.test{base}?$skipToken=t1")

    out = tmp_path / "bill.csv"
    done = run(["cost", "export", "2026-11-30", "--out", str(out)], api)
    assert done.code == 0, done.err
    assert done.paths() == [f"GET {base}", f"GET {base}"]
    assert done.json() == {
        "file": str(out),
        "day": "2026-11-30",
        "rows": 3,
        "totals": {"EUR": "0.5", "USD": "1.250001"},
    }
    with out.open(newline="") as file:
        assert list(csv.reader(file)) == [
            ["BilledCost", "BillingCurrency", "ResourceName"],
            ["1.000001", "USD", "train"],
            ["0.5", "EUR", "x,y"],
            ["0.25", "USD", "=cmd"],
        ]
    assert out.read_bytes().startswith(b"BilledCost,BillingCurrency,ResourceName\r\n")  # RFC 4180, as the export


def test_cost_export_of_a_day_not_exported_leaves_the_file_as_it_was(tmp_path):
    out = tmp_path / "bill.csv"
    out.write_text("yesterday's\n")

    def not_yet(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error": {"code": "BillingExportNotFound", "message": "not exported yet"}})

    done = run(["cost", "export", "2026-11-30", "--out", str(out)], not_yet)
    assert done.code != 0 and "BillingExportNotFound" in done.err
    assert out.read_text() == "yesterday's\n" and list(tmp_path.iterdir()) == [out]


def test_cost_export_takes_a_date_only_and_never_sends_another_path(tmp_path):
    for bad in ("../sparkNodes", "2026-12-04?$top=1", "2026-13-01", "yesterday"):
        done = run(["cost", "export", bad, "--out", str(tmp_path / "x.csv")], lambda r: httpx.Response(500))
        assert done.code == 2 and done.requests == [] and "YYYY-MM-DD" in done.err, bad
    assert list(tmp_path.iterdir()) == []


def test_cost_export_says_its_summary_in_words_at_a_terminal(tmp_path):
    columns = [{"name": "BilledCost", "type": "String"}, {"name": "BillingCurrency", "type": "String"}]

    def api(request: httpx.Request) -> httpx.Response:
        props = {"day": "2026-11-30", "columns": columns, "rows": [["1.5", "USD"]], "nextLink": None}
        return httpx.Response(200, json={"properties": props})

    out = tmp_path / "bill.csv"
    done = run(["cost", "export", "2026-11-30", "--out", str(out), "-o", "table"], api, tty=True)
    assert done.code == 0, done.err
    assert done.out.strip() == f"{out}: 1 rows, 1.5 USD"  # at a terminal, a sentence; piped (JSON), the summary


RESERVATIONS = f"{RG_PATH}/capacityReservations"


def reservation(state: str = "Scheduled") -> dict[str, Any]:
    """A reservation as the API returns it (models/reservations.py), on two nodes."""
    return {
        "id": f"{RESERVATIONS}/r-1",
        "name": "r-1",
        "type": "ITL.Accelerator/capacityReservations",
        "location": "us-east-1",
        "properties": {
            "accelerator": {"kind": "GPU", "model": "H100", "count": 8, "nodes": 2},
            "startTime": "2026-12-08T09:00:00Z",
            "endTime": "2026-12-08T17:00:00Z",
            "provisioningState": "Succeeded",
            "state": state,
            "reservedNodes": [
                {"id": f"{RG_PATH}/sparkNodes/dgx-1", "devices": 8, "memoryGb": 640},
                {"id": f"{RG_PATH}/sparkNodes/dgx-2", "devices": 8, "memoryGb": 640},
            ],
            "hours": 8,
            "totalCost": {"amount": "320.00", "currency": "USD"},
        },
    }


def test_reservation_create_puts_the_booking_and_prints_its_nodes_and_cost():
    done = run(
        [
            "reservation", "create", "r-1", "--kind", "GPU", "--count", "8", "--model", "H100", "--nodes", "2",
            "--start", "2026-12-08T09:00:00Z", "--end", "2026-12-08T17:00:00Z", "-l", "us-east-1",
            "--max-price", "2.5", "--currency", "usd", "--tag", "team=ml", "-o", "table",
        ],
        routes({f"PUT {RESERVATIONS}/r-1": echo(201, reservation())}),
    )  # fmt: skip
    assert done.code == 0, done.err
    assert sent(done.requests[0]) == {
        "location": "us-east-1",
        "tags": {"team": "ml"},
        "properties": {
            "accelerator": {"kind": "GPU", "count": 8, "model": "H100", "nodes": 2},
            "startTime": "2026-12-08T09:00:00Z",
            "endTime": "2026-12-08T17:00:00Z",
            "maxPrice": {"pricePerAcceleratorHour": 2.5, "currency": "USD"},
        },
    }
    header, _, row = done.out.splitlines()
    assert header.split() == ["Name", "State", "Accelerators", "Window", "(UTC)", "Nodes", "Total", "cost"]
    assert "r-1" in row and "Scheduled" in row and "GPU:H100=8" in row
    assert "2026-12-08T09:00:00Z .. 2026-12-08T17:00:00Z" in row
    assert "dgx-1 (8), dgx-2 (8)" in row and "320.00 USD" in row


def test_reservation_create_of_the_same_booking_again_says_nothing_changed():
    args = ["reservation", "create", "r-1", "--kind", "GPU", "--count", "8", "--start", "2026-12-08T09:00:00Z",
            "--end", "2026-12-08T17:00:00Z", "-l", "us-east-1"]  # fmt: skip
    first = run(args, routes({f"PUT {RESERVATIONS}/r-1": echo(201, reservation())}))
    again = run(args, routes({f"PUT {RESERVATIONS}/r-1": echo(200, reservation())}))
    assert first.code == again.code == 0 and first.json() == again.json() == reservation()
    assert "booked already" not in first.err
    assert "reservation r-1 was booked already, as asked: nothing changed." in again.err


def test_reservation_create_of_a_taken_window_says_which_nodes_block_it():
    message = "No capacity for 2026-12-08T09:00:00Z..2026-12-08T17:00:00Z: dgx-1 is reserved by r-0."
    api = routes({f"PUT {RESERVATIONS}/r-1": arm_error(409, "InsufficientCapacity", message)})
    done = run(
        ["reservation", "create", "r-1", "--kind", "GPU", "--count", "8", "--start", "2026-12-08T09:00:00Z",
         "--end", "2026-12-08T17:00:00Z", "-l", "us-east-1"],
        api,
    )  # fmt: skip
    assert done.code == 1
    assert f"InsufficientCapacity: {message}" in done.err


def test_reservation_max_price_needs_its_currency():
    done = run(
        ["reservation", "create", "r-1", "--kind", "GPU", "--count", "8", "--start", "2026-12-08T09:00:00Z",
         "--end", "2026-12-08T17:00:00Z", "-l", "us-east-1", "--max-price", "2"],
    )  # fmt: skip
    assert done.code == 2 and "--max-price and --currency go together" in done.err
    assert done.requests == []


def test_reservation_list_without_a_resource_group_lists_the_subscription():
    path = f"/subscriptions/{SUB}/providers/ITL.Accelerator/capacityReservations"
    api = routes({f"GET {path}": echo(body={"value": [reservation("Active")]})})
    done = run(["reservation", "list", "-o", "table"], api, env={"CONTROLPLANE_RESOURCE_GROUP": None})
    assert done.code == 0, done.err
    assert done.paths() == [f"GET {path}"]
    assert "Active" in done.out.splitlines()[2]


def test_reservation_cancel_says_whether_there_was_one():
    gone = run(["reservation", "cancel", "r-1"], routes({f"DELETE {RESERVATIONS}/r-1": httpx.Response(200)}))
    assert gone.code == 0 and "reservation r-1 cancelled" in gone.err
    none = run(["reservation", "cancel", "r-1"], routes({f"DELETE {RESERVATIONS}/r-1": httpx.Response(204)}))
    assert none.code == 0 and "did not exist: nothing cancelled" in none.err
