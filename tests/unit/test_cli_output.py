"""Given the CLI against a mocked API, its output formats, paging and exit codes are those docs/CLI.md promises:
json is the API's own body, table has a row per item, id an id per line; lists follow nextLink to the end or
--max-items; an ARM error is ``ERROR: code: message`` on stderr with exit 1, a usage error exit 2."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.unit.cli_support import API, RG_PATH, SUB, arm_error, instance, job, jwt, node, routes, run

NODES = f"{RG_PATH}/sparkNodes"


def test_json_is_the_api_body_unchanged():
    body = node(extra_field={"kept": [1, 2]})
    done = run(["node", "show", "dgx-1", "-o", "json"], routes({f"GET {NODES}/dgx-1": httpx.Response(200, json=body)}))
    assert done.code == 0, done.err
    assert done.json() == body and done.err == ""


def test_table_on_a_terminal_and_json_otherwise_by_default():
    api = routes({f"GET {NODES}/dgx-1": httpx.Response(200, json=node())})
    on_terminal = run(["node", "show", "dgx-1"], api, tty=True)
    piped = run(["node", "show", "dgx-1"], api, tty=False)
    header, rule, row = on_terminal.out.splitlines()
    assert header == (
        "Name   Location   SKU            Accelerator  Devices  Free  Free GB  Price/device-h  Availability  State"
    )
    assert set(rule.replace(" ", "")) == {"-"}
    assert row.split() == [
        "dgx-1",
        "us-east-1",
        "DGX-H100-8GPU",
        "GPU",
        "8",
        "6",
        "480",
        "2.5",
        "USD",
        "Available",
        "Succeeded",
    ]
    assert piped.json() == node()


def test_tables_of_instances_and_jobs_name_their_node():
    api = routes(
        {
            f"GET {NODES}/dgx-1/sparkOllamaInstances": httpx.Response(200, json={"value": [instance()]}),
            f"GET {RG_PATH}/sparkJobs": httpx.Response(200, json={"value": [job()], "nextLink": None}),
        }
    )
    instances = run(["instance", "list", "--node", "dgx-1", "-o", "table"], api).out.splitlines()
    assert instances[0].split()[:3] == ["Name", "Node", "Model"]
    assert instances[2].split() == [
        "llama-1",
        "dgx-1",
        "mistral:7b",
        "2",
        "160",
        "Succeeded",
        "http://dgx.test/ollama/i-1",
    ]
    jobs = run(["job", "list", "-o", "table"], api).out.splitlines()
    assert jobs[2].split()[:6] == ["train-1", "Succeeded", "training", "GPU=4", "320", "dgx-1"]
    assert "0.200000 USD" in jobs[2]


def test_id_prints_one_arm_id_per_line():
    page = {"value": [node("dgx-1"), node("dgx-2")], "nextLink": None}
    done = run(["node", "list", "-o", "id"], routes({f"GET {NODES}": httpx.Response(200, json=page)}))
    assert done.out.splitlines() == [f"{NODES}/dgx-1", f"{NODES}/dgx-2"]


def test_audit_ids_are_event_ids():
    events = {"value": [{"event_id": "e-1", "timestamp": "t"}, {"event_id": "e-2", "timestamp": "t"}]}
    audit = f"/subscriptions/{SUB}/providers/ITL.Accelerator/auditEvents"
    done = run(["audit", "list", "-o", "id"], routes({f"GET {audit}": httpx.Response(200, json=events)}))
    assert done.out.splitlines() == ["e-1", "e-2"]


def _pages(request: httpx.Request) -> httpx.Response:
    """Three pages of two nodes; ``$top`` honoured when given (as the API does)."""
    start = int(request.url.params.get("$skipToken", "0"))
    top = int(request.url.params.get("$top", "2"))
    names = [f"dgx-{i}" for i in range(6)]
    chunk = names[start : start + min(top, 2)]
    end = start + len(chunk)
    link = f"{API}{NODES}?api-version=2026-11-01&$top={top}&$skipToken={end}" if end < len(names) else None
    return httpx.Response(200, json={"value": [node(n) for n in chunk], "nextLink": link})


def test_a_list_follows_next_link_to_the_end():
    done = run(["node", "list", "-o", "json"], _pages)
    assert [n["name"] for n in done.json()["value"]] == [f"dgx-{i}" for i in range(6)]
    assert done.json()["nextLink"] is None
    assert len(done.requests) == 3
    assert [r.url.params.get("$skipToken") for r in done.requests] == [None, "2", "4"]


def test_max_items_stops_early_and_returns_the_link_that_resumes():
    done = run(["node", "list", "--max-items", "3", "-o", "json"], _pages)
    body = done.json()
    assert [n["name"] for n in body["value"]] == ["dgx-0", "dgx-1", "dgx-2"]
    assert [r.url.params["$top"] for r in done.requests] == ["3", "1"]
    assert "$skipToken=3" in body["nextLink"]
    table = run(["node", "list", "--max-items", "3", "-o", "table"], _pages)
    assert len(table.out.splitlines()) == 5 and "more items" in table.err


def test_every_request_names_the_api_version_and_the_token():
    token = jwt({"sub": "alice"})
    done = run(
        ["node", "show", "dgx-1", "--token", token],
        routes({f"GET {NODES}/dgx-1": httpx.Response(200, json=node())}),
    )
    request = done.requests[0]
    assert request.url.params["api-version"] == "2026-11-01"
    assert request.headers["Authorization"] == f"Bearer {token}"
    assert request.headers["User-Agent"].startswith("itlc-accelerator/")


def test_environment_defaults_and_options_override_them():
    other_group = "/subscriptions/s-2/resourceGroups/g-2/providers/ITL.Accelerator/sparkNodes"
    api = routes({f"GET {other_group}/x": httpx.Response(200, json=node("x"))})
    done = run(["node", "show", "x", "--subscription", "s-2", "-g", "g-2"], api, env={"CONTROLPLANE_TOKEN": "t"})
    assert done.code == 0 and done.requests[0].headers["Authorization"] == "Bearer t"
    assert str(done.requests[0].url).startswith("http://api.test/")
    other = run(["node", "show", "x", "--api-url", "http://other.test:9/"], routes({}), env={})
    assert other.requests[0].url.host == "other.test" and other.requests[0].url.port == 9


def test_an_arm_error_is_printed_on_stderr_with_exit_1():
    api = routes({f"GET {NODES}/nope": arm_error(404, "ResourceNotFound", "The sparkNode 'nope' was not found.")})
    done = run(["node", "show", "nope"], api)
    assert done.code == 1
    assert done.err == "ERROR: ResourceNotFound: The sparkNode 'nope' was not found.\n"
    assert done.out == ""


def test_a_body_that_is_not_arm_still_gives_a_code_and_exit_1():
    api = routes({f"GET {NODES}": httpx.Response(502, text="<html>Bad Gateway</html>")})
    done = run(["node", "list"], api)
    assert done.code == 1 and done.err == "ERROR: HttpError502: <html>Bad Gateway</html>\n"


def test_an_unreachable_api_is_exit_1_saying_where():
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Connection refused", request=request)

    done = run(["node", "list"], refuse)
    assert done.code == 1
    assert done.err.startswith("ERROR: ConnectionFailed: could not reach http://api.test (Connection refused).")
    assert "CONTROLPLANE_API_URL" in done.err


@pytest.mark.parametrize(
    "args",
    [
        ["node", "show"],  # missing argument
        ["node", "list", "-o", "yaml"],  # unknown format
        ["node", "create", "n", "--location", "l", "--sku", "s", "--gpus", "8", "--tag", "novalue"],
        ["node", "update", "dgx-1"],  # nothing to update
        ["instance", "stats", "i", "--node", "n", "--hours", "0"],
        ["usage", "show", "--hours", "721", "--node", "n"],
        ["usage", "show"],  # no resource named
        ["usage", "show", "--instance", "i"],  # an instance needs its node
        ["job", "list", "--mine", "--submitted-by", "bob"],
        ["job", "list", "--mine"],  # no token
        ["job", "submit", "j", "--gpus", "1", "--memory-gb", "1", "--", "python", "x.py"],  # a command needs --image
        ["operation", "show", "op-1"],  # a bare id needs --location
        ["nope"],
    ],
)
def test_usage_errors_exit_2_without_calling_the_api(args: list[str]):
    done = run(args, routes({}))
    assert done.code == 2, done.out + done.err
    assert done.requests == []


def test_a_missing_subscription_or_resource_group_is_a_usage_error():
    no_sub = run(["node", "list"], routes({}), env={"CONTROLPLANE_SUBSCRIPTION": None})
    assert no_sub.code == 2 and "CONTROLPLANE_SUBSCRIPTION" in no_sub.err
    no_rg = run(["node", "show", "dgx-1"], routes({}), env={"CONTROLPLANE_RESOURCE_GROUP": None})
    assert no_rg.code == 2 and "CONTROLPLANE_RESOURCE_GROUP" in no_rg.err


def test_a_token_that_is_not_a_jwt_cannot_say_whose_jobs_are_mine():
    done = run(["job", "list", "--mine"], routes({}), env={"CONTROLPLANE_TOKEN": "opaque"})
    assert done.code == 2 and "--submitted-by" in done.err


def test_a_204_delete_says_there_was_nothing():
    done = run(["node", "delete", "gone"], routes({f"DELETE {NODES}/gone": httpx.Response(204)}))
    assert done.code == 0 and done.out == "" and "did not exist" in done.err


def test_json_output_pipes_into_a_json_parser():
    page = {"value": [job("a"), job("b")], "nextLink": None}
    done = run(["job", "list"], routes({f"GET {RG_PATH}/sparkJobs": httpx.Response(200, json=page)}))
    assert [j["name"] for j in json.loads(done.out)["value"]] == ["a", "b"]
