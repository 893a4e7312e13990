"""The CLI is built against docs/openapi.json, the generated contract: every request each command sends is an
operation of it (method and path), with only the query parameters it declares and a body its schema accepts; every
operation of the provider has a command, except those named here with the reason."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import click
import httpx
import jsonschema
import pytest

from itlc_accelerator.main import accelerator
from itlc_accelerator.paths import API_VERSION
from tests.conftest import REPO_ROOT
from tests.unit.cli_support import RG_PATH, accepted, jwt, operation, run

CONTRACT = json.loads((REPO_ROOT / "docs" / "openapi.json").read_text())

#: Operations no command calls, and why.
NOT_COMMANDS = {
    "SparkNodes_CreateOrUpdate": "the ARM PUT form of a create; node create POSTs, which never replaces a node",
    "SparkOllamaInstances_CreateOrUpdate": "the ARM PUT form of a create; instance create POSTs (the seed's form)",
    "SparkJobs_CreateOrUpdate": "the ARM PUT form of a submit; job submit POSTs (the seed's form)",
    "Operations_List": "ARM's list of the provider's permissions, for portals and role editors",
    "Subscriptions_CreateOrUpdate": "ARM's subscription notification, sent by the Control Plane, not by a user",
    "Subscriptions_Get": "the registration record of that notification",
}
#: Routes the commands call before docs/openapi.json declares them (usage statistics, being built). Once the
#: contract declares one, its requests are checked against the contract like any other.
PENDING = {
    ("GET", "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkNodes/{nodeName}/stats"): "SparkNodes_Stats",
    ("GET", "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkNodes/{nodeName}/sparkOllamaInstances/{instanceName}/stats"): "SparkOllamaInstances_Stats",
    ("GET", "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkJobs/{jobName}/stats"): "SparkJobs_Stats",
}  # fmt: skip
PENDING_QUERY = {"hours", "api-version"}
#: Commands that send no request of their own, and why.
NO_REQUESTS = {
    "mcp": "serves MCP over stdio; the API calls are its tools' (mcp_server/, tests/integration/test_mcp.py)",
}

#: One run of every command (the test below checks none is missing).
SCRIPT: dict[str, list[str]] = {
    "node create": ["node", "create", "dgx-1", "-l", "us-east-1", "--sku", "DGX-H100-8GPU", "--gpus", "8",
                    "--gpu-model", "H100", "--gpu-memory-gb", "80", "--cpu-cores", "112", "--memory-gb", "2048",
                    "--interconnect", "NVLink", "--owner", "o", "--price", "2.5", "--currency", "USD",
                    "--billing-increment-seconds", "60", "--minimum-billable-seconds", "60",
                    "--availability", "Available", "--tag", "a=b"],
    "node show": ["node", "show", "dgx-1"],
    "node list": ["node", "list", "--max-items", "5"],
    "node update": ["node", "update", "dgx-1", "--price", "3", "--currency", "EUR", "--billing-increment-seconds",
                    "1", "--minimum-billable-seconds", "0", "--availability", "Maintenance", "--tag", "a=b"],
    "node delete": ["node", "delete", "dgx-1"],
    "node cordon": ["node", "cordon", "dgx-1"],
    "node uncordon": ["node", "uncordon", "dgx-1"],
    "instance create": ["instance", "create", "i-1", "--node", "dgx-1", "--model", "mistral:7b", "--gpus", "2",
                        "--memory-gb", "160"],
    "instance show": ["instance", "show", "i-1", "--node", "dgx-1"],
    "instance list": ["instance", "list", "--node", "dgx-1"],
    "instance delete": ["instance", "delete", "i-1", "--node", "dgx-1"],
    "instance stats": ["instance", "stats", "i-1", "--node", "dgx-1", "--hours", "3"],
    "job submit": ["job", "submit", "j-1", "--gpus", "4", "--memory-gb", "320", "--type", "training", "--image",
                   "nvcr.io/nvidia/pytorch:24.10-py3", "--env", "A=1", "--gpu-model", "H100", "-l", "us-east-1",
                   "--priority", "5", "--max-duration-minutes", "60", "--tag", "a=b", "--", "python", "x.py"],
    "job show": ["job", "show", "j-1"],
    "job list": ["job", "list", "--mine"],
    "job cancel": ["job", "cancel", "j-1"],
    "job wait": ["job", "wait", "j-1"],
    "job delete": ["job", "delete", "j-1"],
    "job logs": ["job", "logs", "j-1", "--tail", "10", "--since", "1h"],
    "reservation create": ["reservation", "create", "r-1", "--kind", "GPU", "--count", "8", "--model", "H100",
                           "--nodes", "2", "--memory-gb", "640", "--vendor", "NVIDIA", "--start",
                           "2026-12-08T09:00:00Z", "--end", "2026-12-08T17:00:00Z", "-l", "us-east-1",
                           "--max-price", "3.5", "--currency", "usd", "--tag", "team=ml"],
    "reservation list": ["reservation", "list", "--max-items", "5"],
    "reservation show": ["reservation", "show", "r-1"],
    "reservation cancel": ["reservation", "cancel", "r-1"],
    "slo show": ["slo", "show", "--month", "2026-11"],
    "quota list": ["quota", "list", "-l", "us-east-1"],
    "offer list": ["offer", "list", "-l", "us-east-1"],
    "quota show": ["quota", "show", "gpus", "-l", "us-east-1"],
    "quota set": ["quota", "set", "gpus-h100", "-l", "us-east-1", "--limit", "16"],
    "quota delete": ["quota", "delete", "gpus", "-l", "us-east-1"],
    "budget list": ["budget", "list"],
    "budget show": ["budget", "show", "team-a"],
    "budget create": ["budget", "create", "team-a", "--amount", "1000", "--currency", "EUR", "--start", "2026-12",
                   "--end", "2027-12", "--threshold", "80", "--threshold", "100", "--contact", "fin@example.com",
                   "--resource-group", "rg-a", "--action", "StopAll"],
    "budget delete": ["budget", "delete", "team-a"],
    "cost query": ["cost", "query", "--timeframe", "Custom", "--from", "2026-11-01T00:00:00Z", "--to",
                   "2026-12-01T00:00:00Z", "--granularity", "Daily", "--group-by", "ResourceGroupName",
                   "--group-by", "tag:team", "--filter", "ResourceType=ITL.Accelerator/sparkJobs"],
    "cost export": ["cost", "export", "2026-11-30", "--out", str(Path(tempfile.gettempdir()) / "itlc-contract.csv")],
    "usage show": ["usage", "show", "--node", "dgx-1"],
    "usage list": ["usage", "list", "-l", "us-east-1"],
    "audit list": ["audit", "list", "--resource", f"{RG_PATH}/sparkNodes/dgx-1", "--since", "1h", "--until", "1m"],
    "operation show": ["operation", "show", "op-1", "-l", "global"],
    "operation wait": ["operation", "wait", "op-1", "-l", "global"],
}  # fmt: skip
#: More runs, for the requests the ones above do not make.
MORE = [
    ["node", "list", "-g", ""],
    ["job", "list", "-g", "", "--submitted-by", "bob"],
    ["reservation", "list", "-g", ""],
    ["usage", "show", "--node", "dgx-1", "--instance", "i-1"],
    ["usage", "show", "--job", "j-1"],
    ["job", "logs", "j-1", "--follow"],
    ["slo", "show"],
    ["budget", "create", "team-b", "--amount", "5", "--tag", "team=a,b", "--threshold", "50"],
    ["cost", "query", "--measure", "GpuSeconds", "--filter", "tag:team=a", "--filter", "SubmittedBy=alice"],
]


def leaf_commands(group: click.Group, prefix: str = "") -> set[str]:
    found: set[str] = set()
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        found |= leaf_commands(command, path + " ") if isinstance(command, click.Group) else {path}
    return found


def generic_api(request: httpx.Request) -> httpx.Response:
    """Answers any request well enough for every command to go on: accepted operations that succeed at once."""
    path, method = request.url.path, request.method
    if "/operationStatuses/" in path:
        return operation("Succeeded")
    long_running = (method == "POST" and re.search(r"/(sparkOllamaInstances|sparkJobs|cancel)$", path)) or (
        method == "DELETE" and "/sparkOllamaInstances/" in path
    )
    if long_running:
        return accepted(retry_after=0)
    body = {"id": path, "name": path.rsplit("/", 1)[-1], "properties": {"status": "Succeeded"}, "value": []}
    return httpx.Response(200, json=body)


def _regex(template: str) -> re.Pattern[str]:
    return re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template)) + "$")


ROUTES = [
    (method.upper(), template, _regex(template), spec)
    for template, item in CONTRACT["paths"].items()
    for method, spec in item.items()
    if method in ("get", "put", "post", "patch", "delete")
]
DECLARED = {(method, template) for method, template, _, _ in ROUTES}


def operation_of(request: httpx.Request) -> tuple[str, dict[str, Any] | None]:
    """The operation id a request calls, and its contract (None for a pending route)."""
    for method, _, pattern, spec in ROUTES:
        if method == request.method and pattern.match(request.url.path):
            return spec["operationId"], spec
    for (method, template), name in PENDING.items():
        if method == request.method and (method, template) not in DECLARED and _regex(template).match(request.url.path):
            return name, None
    raise AssertionError(f"{request.method} {request.url.path} is not in docs/openapi.json")


def check(request: httpx.Request) -> str:
    """The request's operation id, after checking its query and body against the contract."""
    name, spec = operation_of(request)
    declared = PENDING_QUERY if spec is None else {p["name"] for p in spec.get("parameters", []) if p["in"] == "query"}
    assert set(request.url.params) <= declared, (name, set(request.url.params) - declared)
    assert request.url.params["api-version"] == API_VERSION
    content = request.read()
    if spec is None or "requestBody" not in spec:
        assert not content, f"{name} takes no body"
        return name
    schema = spec["requestBody"]["content"]["application/json"]["schema"]
    jsonschema.Draft202012Validator({**schema, "components": CONTRACT["components"]}).validate(json.loads(content))
    return name


def _covered() -> set[str]:
    names: set[str] = set()
    token = jwt({"sub": "alice"})
    for args in [*SCRIPT.values(), *MORE]:
        done = run(args, generic_api, env={"CONTROLPLANE_TOKEN": token})
        assert done.code == 0, (args, done.err)
        names |= {check(request) for request in done.requests}
    return names


def test_the_script_runs_every_command():
    assert set(SCRIPT) == leaf_commands(accelerator) - set(NO_REQUESTS)


def test_every_request_is_an_operation_of_the_contract_with_its_query_and_body():
    _covered()


def test_every_operation_of_the_provider_has_a_command():
    operations = {spec["operationId"] for _, _, _, spec in ROUTES}
    covered = _covered()
    assert operations - covered == set(NOT_COMMANDS), "a new operation needs a command (or a reason in NOT_COMMANDS)"
    assert not covered & set(NOT_COMMANDS)


def test_the_api_version_is_the_contract_version():
    assert CONTRACT["info"]["version"] == API_VERSION


@pytest.mark.parametrize("key", sorted(PENDING))
def test_a_pending_route_has_the_shape_of_its_resource(key: tuple[str, str]):
    """Until the contract declares a stats route, its resource must be declared (the route hangs under it)."""
    _, template = key
    assert template.removesuffix("/stats") in CONTRACT["paths"]


def test_docs_name_every_command_and_variable():
    text = (REPO_ROOT / "docs" / "CLI.md").read_text()
    for command in leaf_commands(accelerator):
        assert f"`{command} " in text or f"`{command}`" in text, f"docs/CLI.md does not describe {command}"
    for variable in (
        "CONTROLPLANE_API_URL",
        "CONTROLPLANE_TOKEN",
        "CONTROLPLANE_SUBSCRIPTION",
        "CONTROLPLANE_RESOURCE_GROUP",
    ):
        assert variable in text
    for name in NOT_COMMANDS:
        assert name.split("_")[0] in text
