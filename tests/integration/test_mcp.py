"""The MCP server (issue 17) through the official MCP client: over streamable HTTP at ``/mcp`` of the API Gateway
emulator of template.yaml (the real authorizer, the McpFunction handler, which calls the API's own routes with the
caller's token), and over stdio (``itlc-accelerator mcp`` as a subprocess against the same API).

What a user of Copilot Chat would notice: the tools and what they promise; a consumer sees only their own jobs and
why one waits; a consumer's write on a node is the API's own 403; a job is submitted only with an accepted quote and
runs to Succeeded, audited as the user, through MCP; read-only mode refuses writes; a bad token is refused before any
tool runs; the function answers warm invocation after warm invocation.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from itl_local.lambda_runtime import LambdaContext, observe_invocations
from tests.conftest import ADMIN, CONSUMER, TABLE, node_body, nodes_path
from tests.integration.instance_helpers import wait_for
from tests.integration.test_jobs import jobs_path, sim

pytestmark = pytest.mark.usefixtures("schedules")

READ_TOOLS = {
    "get_my_access",
    "list_nodes",
    "get_node",
    "list_instances",
    "get_instance",
    "list_jobs",
    "get_job",
    "get_usage",
    "list_offers",
    "list_reservations",
    "get_reservation",
    "list_audit_events",
    "get_operation",
}
WRITE_TOOLS = {
    "create_node",
    "set_node_pricing",
    "set_node_availability",
    "provision_instance",
    "delete_instance",
    "submit_job",
    "cancel_job",
    "delete_job",
    "book_reservation",
    "cancel_reservation",
}
MODERN, LEGACY = "2026-07-28", "2025-11-25"


@asynccontextmanager
async def http_session(url: str, token: str, mode: str = "auto") -> AsyncIterator[Client]:
    """The official client over streamable HTTP, sending ``token`` as a bearer token (``mode="legacy"``: the
    initialize handshake of pre-2026 clients)."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:  # type: ignore[arg-type]
            yield client


def run(coro_fn: Callable[[], Any]) -> Any:
    return anyio.run(coro_fn)


def payload(result: Any) -> dict[str, Any]:
    """A tool result's JSON: the structured content, or (errors) the text's ``{"error": ...}``."""
    if result.is_error:
        return json.loads(result.content[0].text)
    return result.structured_content


@pytest.fixture
def mcp_url(gateway_url: str) -> str:
    return f"{gateway_url}/mcp"


@pytest.fixture
def with_node(admin: Any, sub: str) -> str:
    """An 8-GPU H100 node dgx-1 in rg1 at 2.5 USD per GPU-hour, billed per second."""
    body = node_body()
    body["properties"]["pricing"] = {
        "currency": "USD",
        "pricePerGpuHour": 2.5,
        "billingIncrementSeconds": 1,
        "minimumBillableSeconds": 0,
    }
    assert admin.put(nodes_path(sub, name="dgx-1"), json=body).status_code == 201
    return "dgx-1"


# ----------------------------------------------------------------------------------------------- tools
def test_tools_carry_the_api_schemas_and_annotations_for_current_and_previous_clients(mcp_url, make_token, sub):
    token = make_token("alice", [CONSUMER], [f"/subscriptions/{sub}"])

    async def main() -> dict[str, Any]:
        seen = {}
        for mode in ("auto", "legacy"):
            async with http_session(mcp_url, token, mode) as client:
                seen[client.protocol_version] = {t.name: t for t in (await client.list_tools()).tools}
        return seen

    seen = run(main)
    # Both the current revision and the previous one's clients are served, with the same tools
    assert set(seen) == {MODERN, LEGACY}
    tools = seen[MODERN]
    assert set(tools) == READ_TOOLS | WRITE_TOOLS
    assert {n: t.input_schema for n, t in seen[LEGACY].items()} == {n: t.input_schema for n, t in tools.items()}
    # Every tool says what it does to the world
    for name, tool in tools.items():
        a = tool.annotations
        assert None not in (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint), name
        assert a.read_only_hint is (name in READ_TOOLS), name
        assert tool.description and len(tool.description) > 40, name
        assert tool.output_schema["type"] == "object", name
    assert tools["delete_job"].annotations.destructive_hint and tools["delete_job"].annotations.idempotent_hint
    assert not tools["submit_job"].annotations.destructive_hint and not tools["submit_job"].annotations.idempotent_hint
    # Schemas are the API's models: the job's limits, its read model with statusReason, the quote id to accept
    submit = tools["submit_job"].input_schema
    assert submit["properties"]["requestedGpus"] == {
        "type": "integer",
        "maximum": 64,
        "minimum": 1,
        "title": "Requestedgpus",
    }
    assert "requestedGpus" not in submit["required"] and "accelerator" not in submit["required"]
    assert submit["properties"]["accelerator"]["anyOf"][0] == {"$ref": "#/$defs/JobAccelerator"}
    assert submit["properties"]["workload"]["anyOf"][0] == {"$ref": "#/$defs/ContainerWorkload"}
    assert "quoteId" in submit["properties"] and "quoteId" not in submit["required"]
    job_read = tools["get_job"].output_schema["$defs"]["SparkJobProperties"]["properties"]
    assert "statusReason" in job_read and "assignedNode" in job_read
    assert "status" in tools["list_jobs"].input_schema["properties"]


# ----------------------------------------------------------------------------------------------- tenancy and RBAC
def test_a_consumer_lists_only_their_own_jobs_and_sees_why_one_waits(
    mcp_url, make_token, caller, admin, sub, with_node
):
    bob = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="bob")
    carol = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="carol")
    # Given bob's job filling the node, carol's job, and bob's second job that must wait
    assert (
        bob.put(
            jobs_path(sub, "big"),
            json={"properties": {"requestedGpus": 8, "requestedMemoryGb": 640, "workload": sim(forever=True)}},
        ).status_code
        == 201
    )
    wait_for(lambda: bob.get(jobs_path(sub, "big")).json()["properties"]["status"] == "Running", what="big to run")
    assert carol.put(jobs_path(sub, "carols"), json={"properties": {"requestedGpus": 1, "requestedMemoryGb": 80}})
    assert bob.put(jobs_path(sub, "small"), json={"properties": {"requestedGpus": 1, "requestedMemoryGb": 80}})
    wait_for(
        lambda: (
            "Waiting for capacity" in (bob.get(jobs_path(sub, "small")).json()["properties"].get("statusReason") or "")
        ),
        what="small to wait",
    )
    token = make_token("bob", [CONSUMER], [f"/subscriptions/{sub}"])

    async def main() -> tuple[Any, Any, Any]:
        async with http_session(mcp_url, token) as client:
            everything = payload(await client.call_tool("list_jobs", {"subscriptionId": sub}))
            waiting = payload(await client.call_tool("list_jobs", {"mine": True, "status": ["Pending"]}))
            # (bob cleans up through MCP: his own jobs he may cancel)
            canceled = [
                payload(await client.call_tool("cancel_job", {"resourceGroup": "rg1", "name": n}))
                for n in ("small", "big")
            ]
            return everything, waiting, canceled

    everything, waiting, canceled = run(main)
    # When bob lists the subscription's jobs through MCP, then he sees his own only, with their ARM ids
    assert sorted(j["name"] for j in everything["value"]) == ["big", "small"]
    assert all(j["id"].startswith(f"/subscriptions/{sub}/resourceGroups/rg1/") for j in everything["value"])
    # And "which of my jobs are waiting and why" has its answer (the subscription taken from his token)
    [small] = waiting["value"]
    assert small["name"] == "small" and small["properties"]["status"] == "Pending"
    assert small["properties"]["statusReason"].startswith("Waiting for capacity")
    assert [c["status"] for c in canceled] == ["accepted", "accepted"]
    wait_for(lambda: bob.get(jobs_path(sub, "big")).json()["properties"]["status"] == "Canceled", what="cancel")


def test_a_consumers_write_on_a_node_is_the_apis_403(mcp_url, make_token, admin, sub, with_node):
    token = make_token("bob", [CONSUMER], [f"/subscriptions/{sub}"])

    async def main() -> Any:
        async with http_session(mcp_url, token) as client:
            return await client.call_tool(
                "set_node_availability", {"resourceGroup": "rg1", "node": "dgx-1", "availability": "Cordoned"}
            )

    result = run(main)
    # Then the API's own refusal comes back as the tool's error, and the node is untouched
    assert result.is_error
    assert payload(result)["error"]["code"] == "AuthorizationFailed" and payload(result)["error"]["status"] == 403
    assert admin.get(nodes_path(sub, name="dgx-1")).json()["properties"]["availability"] == "Available"


# ----------------------------------------------------------------------------------------------- quotes
def test_a_job_is_submitted_only_with_an_accepted_quote_and_runs_to_succeeded(
    mcp_url, make_token, admin, sub, with_node
):
    token = make_token("bob", [CONSUMER], [f"/subscriptions/{sub}"])
    admin_token = make_token("admin-1", [ADMIN], [f"/subscriptions/{sub}"])
    args = {
        "resourceGroup": "rg1",
        "name": "train",
        "requestedGpus": 2,
        "requestedMemoryGb": 160,
        "maxDurationMinutes": 60,
        "workload": sim(seconds=1),
    }

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with http_session(mcp_url, token) as client:
            out["quote"] = await client.call_tool("submit_job", args)
            quote_id = out["quote"].structured_content["quote"]["quoteId"]
            # a quote holds for exactly what was quoted
            out["other"] = await client.call_tool("submit_job", {**args, "requestedGpus": 4, "quoteId": quote_id})
            out["forged"] = await client.call_tool("submit_job", {**args, "quoteId": quote_id[:-4] + "AAAA"})
            # a job that may run again (retried, or requeued after a preemption) is quoted for every run it may have
            out["retried"] = await client.call_tool("submit_job", {**args, "retryStrategy": {"attempts": 3}})
            requeued = {**args, "preemptible": True, "preemptMode": "Requeue"}
            out["requeued"] = await client.call_tool("submit_job", requeued)
        out["before"] = admin.get(jobs_path(sub, "train")).status_code
        async with http_session(mcp_url, token) as client:  # a new connection: quotes are stateless
            out["accepted"] = await client.call_tool("submit_job", {**args, "quoteId": quote_id})
        return out

    out = run(main)
    # The first call only quotes: 2 GPUs for at most 60 minutes on the only node that fits, at its price
    quote = out["quote"].structured_content["quote"]
    assert out["quote"].structured_content["status"] == "quote" and not out["quote"].is_error
    assert quote["estimatedCost"][0]["amount"] == "5.000000" and quote["estimatedCost"][0]["currency"] == "USD"
    assert quote["upperBound"] is True and quote["candidateNodes"] == [
        f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1"
    ]
    assert quote["prices"][0]["pricePerGpuHour"] == 2.5 and "show this quote" in out["quote"].content[0].text
    assert out["retried"].structured_content["quote"]["estimatedCost"][0]["amount"] == "15.000000"  # 3 runs
    assert out["requeued"].structured_content["quote"]["estimatedCost"][0]["amount"] == "50.000000"  # up to 10
    # Other arguments or an altered id are refused, and nothing is submitted until the quote is accepted
    assert payload(out["other"])["error"]["code"] == "QuoteNotValid"
    assert payload(out["forged"])["error"]["code"] == "QuoteNotValid"
    assert out["before"] == 404
    # With the quote's id the job is submitted, and runs to Succeeded
    accepted = out["accepted"].structured_content
    assert accepted["status"] == "accepted" and accepted["job"]["properties"]["submittedBy"] == "bob"
    # the quoted bound is the job's price ceiling: no node priced above the quote ever takes it
    assert accepted["job"]["properties"]["maxPrice"] == quote["maxPrice"] == {
        "pricePerGpuHour": 2.5, "currency": "USD", "billingIncrementSeconds": 1, "minimumBillableSeconds": 0}  # fmt: skip
    assert accepted["job"]["properties"]["priceCeiling"]["basis"] == "MaxPrice"
    job_id = accepted["job"]["id"]
    done = wait_for(
        lambda: (
            (b := admin.get(jobs_path(sub, "train")).json())["properties"]["status"] in ("Succeeded", "Failed") and b
        ),
        timeout=60,
        what="the job to end",
    )
    assert done["properties"]["status"] == "Succeeded"

    # And the audit trail says who did it, and that it came through MCP
    async def audit() -> dict[str, Any]:
        async with http_session(mcp_url, admin_token) as client:
            return payload(await client.call_tool("list_audit_events", {"resourceId": job_id}))

    [created, *_] = run(audit)["value"]
    assert created["actor_id"] == "bob" and created["actor_type"] == "User"
    assert created["user_agent"].startswith("itl-accelerator-mcp/") and "transport=http" in created["user_agent"]
    assert "client=mcp/" in created["user_agent"]  # the MCP client as it introduced itself (the SDK's own)


def test_an_instance_is_provisioned_only_with_an_accepted_quote_at_the_quoted_terms(
    mcp_url, make_token, admin, sub, with_node
):
    token = make_token("admin-1", [ADMIN], [f"/subscriptions/{sub}"])
    args = {"resourceGroup": "rg1", "node": "dgx-1", "name": "llama", "model": "mistral:7b", "gpus": 2, "memoryGb": 160}
    instance = nodes_path(sub, name="dgx-1") + "/sparkOllamaInstances/llama"

    async def quote_and_accept(reprice: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with http_session(mcp_url, token) as client:
            out["quote"] = await client.call_tool("provision_instance", args)
            quote_id = out["quote"].structured_content["quote"]["quoteId"]
            if reprice:  # the supplier changes the price between the quote and its acceptance
                patch = {"properties": {"pricing": {"pricePerGpuHour": 3.0}}}
                assert admin.patch(nodes_path(sub, name="dgx-1"), json=patch).status_code == 200
            out["before"] = admin.get(instance).status_code
            out["accepted"] = await client.call_tool("provision_instance", {**args, "quoteId": quote_id})
        return out

    # A price changed after the quote: nothing is provisioned, a new quote at the new price comes back
    repriced = run(lambda: quote_and_accept(reprice=True))
    first = repriced["quote"].structured_content["quote"]
    assert first["estimatedCost"][0] == {"amount": "5.000000", "currency": "USD", "basis": "per hour while it exists"}
    assert repriced["accepted"].structured_content["status"] == "quote"
    assert repriced["accepted"].structured_content["quote"]["estimatedCost"][0]["amount"] == "6.000000"
    assert "price changed" in repriced["accepted"].content[0].text
    assert admin.get(instance).status_code == 404
    # Quoted and accepted at the same price: provisioned, with the quoted terms locked on the instance
    accepted = run(lambda: quote_and_accept(reprice=False))
    assert accepted["before"] == 404 and accepted["accepted"].structured_content["status"] == "accepted"
    terms = admin.get(instance).json()["properties"]["billingTerms"]
    assert terms["pricePerGpuHour"] == 3.0 and terms["currency"] == "USD"


# ----------------------------------------------------------------------------------------------- read-only
def test_read_only_mode_refuses_writes(mcp_url, make_token, admin, sub, with_node):
    token = make_token("admin-1", [ADMIN], [f"/subscriptions/{sub}"])

    async def main() -> tuple[set[str], Any, Any]:
        async with http_session(mcp_url + "?readOnly=true", token) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            refused = await client.call_tool(
                "set_node_availability", {"resourceGroup": "rg1", "node": "dgx-1", "availability": "Cordoned"}
            )
            read = await client.call_tool("get_node", {"resourceGroup": "rg1", "node": "dgx-1"})
            return listed, refused, read

    listed, refused, read = run(main)
    assert listed == READ_TOOLS
    assert refused.is_error and payload(refused)["error"]["code"] == "ReadOnlyMode"
    assert not read.is_error and read.structured_content["name"] == "dgx-1"
    assert admin.get(nodes_path(sub, name="dgx-1")).json()["properties"]["availability"] == "Available"


# ----------------------------------------------------------------------------------------------- authentication
def test_a_bad_token_is_refused_before_any_tool_runs(mcp_url, gateway_url, make_token, sub):
    invoked: list[str] = []
    stop = observe_invocations(invoked.append)
    try:
        expired = make_token("bob", [CONSUMER], [f"/subscriptions/{sub}"], lifetime_seconds=-60)
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "list_nodes", "arguments": {}}}
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": MODERN}
        answers = [
            httpx.post(mcp_url, json=body, headers={**headers, "Authorization": f"Bearer {t}"}, timeout=30)
            for t in ("not-a-jwt", expired)
        ] + [httpx.post(mcp_url, json=body, headers=headers, timeout=30)]

        async def official_client() -> None:
            async with http_session(mcp_url, "not-a-jwt") as client:
                await client.list_tools()

        with pytest.raises(Exception):  # noqa: B017 - the SDK raises its transport error for a 401
            run(official_client)
    finally:
        stop()
    # Then every attempt is API Gateway's 401, pointing at the protected-resource metadata, and the MCP function
    # never ran
    for answer in answers:
        assert answer.status_code == 401 and answer.json()["error"]["code"] == "AuthenticationFailed"
        assert answer.headers["WWW-Authenticate"] == (
            f'Bearer resource_metadata="{gateway_url}/.well-known/oauth-protected-resource/mcp"'
        )
    assert "McpFunction" not in invoked


def test_the_protected_resource_metadata_is_public_and_names_the_issuer(gateway_url, idp):
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        answer = httpx.get(gateway_url + path, timeout=30)
        assert answer.status_code == 200
        assert answer.json()["resource"] == f"{gateway_url}/mcp"
        assert answer.json()["authorization_servers"] == [idp]


# ----------------------------------------------------------------------------------------------- warm Lambda
def _event(gateway_url: str, token: str, principal: str, body: dict[str, Any], version: str | None) -> dict[str, Any]:
    """The REST proxy event API Gateway hands McpFunction for a POST /mcp that passed the authorizer."""
    host = gateway_url.split("://", 1)[1]
    headers = {
        "Host": host,
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "X-Forwarded-Proto": "http",
    }
    if version:  # the 2026-07-28 revision's routing headers
        headers["Mcp-Protocol-Version"] = version
        headers["Mcp-Method"] = body["method"]
        if body["method"] == "tools/call":
            headers["Mcp-Name"] = body["params"]["name"]
    return {
        "resource": "/mcp",
        "path": "/mcp",
        "httpMethod": "POST",
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": None,
        "multiValueQueryStringParameters": None,
        "pathParameters": None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": "/mcp",
            "httpMethod": "POST",
            "path": "/mcp",
            "stage": "local",
            "requestId": str(uuid.uuid4()),
            "domainName": host,
            "identity": {"sourceIp": "127.0.0.1", "userAgent": "test"},
            "authorizer": {"principal": principal, "principalId": "bob"},
        },
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


def test_warm_invocations_of_the_function_each_answer(gateway_url, make_token, admin, sub, with_node):
    from itl_accelerator_mcp.lambda_handler import handler

    token = make_token("bob", [CONSUMER], [f"/subscriptions/{sub}"])
    principal = json.dumps(
        {"subject": "bob", "roles": [CONSUMER], "scopes": [{"subscription_id": sub, "resource_group": None}]}
    )
    calls = [
        ({"method": "tools/list", "params": {}}, MODERN),
        ({"method": "tools/call", "params": {"name": "list_nodes", "arguments": {}}}, MODERN),
        (
            {
                "method": "initialize",
                "params": {
                    "protocolVersion": LEGACY,
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            },
            None,
        ),
        (
            {
                "method": "tools/call",
                "params": {"name": "get_node", "arguments": {"resourceGroup": "rg1", "node": "dgx-1"}},
            },
            MODERN,
        ),
        ({"method": "tools/list", "params": {}}, MODERN),
    ]
    answers = []
    started = time.monotonic()
    # The same handler object, invoked again and again in one execution environment (one thread, as Lambda does)
    for number, (message, version) in enumerate(calls, 1):
        envelope = {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        meta = {"_meta": envelope} if version else {}
        body = {"jsonrpc": "2.0", "id": number, **message, "params": {**message["params"], **meta}}
        event = _event(gateway_url, token, principal, body, version)
        answers.append(handler(event, LambdaContext(function_name="McpFunction", timeout_seconds=29)))
    assert [a["statusCode"] for a in answers] == [200] * len(calls), [a.get("body") for a in answers]
    results = [json.loads(a["body"]) for a in answers]
    assert all("result" in r for r in results), results
    assert len(results[0]["result"]["tools"]) == len(READ_TOOLS | WRITE_TOOLS)
    assert [n["name"] for n in results[1]["result"]["structuredContent"]["value"]] == ["dgx-1"]
    assert results[2]["result"]["protocolVersion"] == LEGACY
    assert results[3]["result"]["structuredContent"]["name"] == "dgx-1"
    assert time.monotonic() - started < 60


# ----------------------------------------------------------------------------------------------- stdio
def test_the_stdio_server_serves_the_same_tools_as_the_user(gateway_url, make_token, admin, sub, with_node):
    cli = str(Path(sys.executable).with_name("itlc-accelerator"))
    token = make_token("bob", [CONSUMER], [f"/subscriptions/{sub}"])
    env = {"CONTROLPLANE_TOKEN": token, "CONTROLPLANE_RESOURCE_GROUP": "rg1"}

    async def main(*extra: str) -> tuple[str, set[str], Any, Any]:
        params = StdioServerParameters(command=cli, args=["mcp", "--api-url", gateway_url, *extra], env=env)
        async with Client(params) as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            nodes = await client.call_tool("list_nodes", {})
            write = await client.call_tool("set_node_availability", {"node": "dgx-1", "availability": "Cordoned"})
            return client.protocol_version, listed, nodes, write

    version, listed, nodes, write = run(main)
    assert version == MODERN and listed == READ_TOOLS | WRITE_TOOLS
    assert [n["name"] for n in nodes.structured_content["value"]] == ["dgx-1"]
    # the consumer's write is the API's 403, as over HTTP
    assert payload(write)["error"]["code"] == "AuthorizationFailed"

    version, listed, nodes, write = run(lambda: main("--read-only"))
    assert listed == READ_TOOLS and payload(write)["error"]["code"] == "ReadOnlyMode"


def test_a_get_or_delete_on_the_endpoint_answers_405_at_once(mcp_url, make_token, sub):
    # (a standalone SSE stream held open would hold the function until its timeout)
    token = make_token("bob", [CONSUMER], [f"/subscriptions/{sub}"])
    for method in ("GET", "DELETE"):
        answer = httpx.request(
            method, mcp_url, headers={"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}, timeout=20
        )
        assert answer.status_code == 405 and answer.headers["Allow"] == "POST"


# ----------------------------------------------------------------------------------------------- issue 26
def _post(url: str, token: str, body: bytes | dict[str, Any]) -> httpx.Response:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/list",
    }
    return httpx.post(url, content=raw, headers=headers, timeout=30)


LIST_TOOLS = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "tools/list",
    "params": {
        "_meta": {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    },
}


@pytest.mark.parametrize(
    ("query", "target"),
    [
        ("readonly=true", "readonly"),
        ("ReadOnly=true", "ReadOnly"),
        ("read_only=true", "read_only"),
        ("readOnly=true&readOnly=false", "readOnly"),
        ("readOnly=yes", "readOnly"),
        ("subscription=a&subscription=b", "subscription"),
    ],
)
def test_a_read_only_asked_for_in_any_other_form_is_400_naming_it_not_a_server_with_write_tools(
    mcp_url, make_token, sub, query, target
):
    token = make_token("admin-1", [ADMIN], [f"/subscriptions/{sub}"])
    answer = _post(f"{mcp_url}?{query}", token, LIST_TOOLS)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "InvalidParameter" and answer.json()["error"]["target"] == target


def test_read_only_in_any_case_of_its_value_serves_read_tools_only(mcp_url, make_token, sub):
    token = make_token("admin-1", [ADMIN], [f"/subscriptions/{sub}"])
    listed = _post(f"{mcp_url}?readOnly=TRUE", token, LIST_TOOLS)
    assert listed.status_code == 200, listed.text
    assert {t["name"] for t in listed.json()["result"]["tools"]} == READ_TOOLS


def test_the_endpoint_refuses_the_bodies_the_api_refuses(mcp_url, make_token, sub):
    token = make_token("admin-1", [ADMIN], [f"/subscriptions/{sub}"])
    twice = b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "tools/list", "params": {}}'
    refused = _post(mcp_url, token, twice)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "InvalidRequestContent"
    assert "appears twice" in refused.json()["error"]["message"]
    huge = {**LIST_TOOLS, "params": {**LIST_TOOLS["params"], "padding": "x" * 70_000}}
    too_large = _post(mcp_url, token, huge)
    assert too_large.status_code == 413 and too_large.json()["error"]["code"] == "RequestEntityTooLarge"


def test_a_quote_pays_for_one_job_even_after_that_job_is_deleted(mcp_url, make_token, admin, sub, with_node, aws):
    token = make_token("bob", [CONSUMER], [f"/subscriptions/{sub}"])
    args = {"resourceGroup": "rg1", "name": "once", "requestedGpus": 1, "requestedMemoryGb": 80,
            "maxDurationMinutes": 5, "workload": sim(seconds=0.2)}  # fmt: skip

    async def accept(quote_id: str | None = None) -> Any:
        async with http_session(mcp_url, token) as client:
            return await client.call_tool("submit_job", {**args, **({"quoteId": quote_id} if quote_id else {})})

    quote_id = run(accept).structured_content["quote"]["quoteId"]
    assert run(lambda: accept(quote_id)).structured_content["status"] == "accepted"
    wait_for(
        lambda: admin.get(jobs_path(sub, "once")).json()["properties"]["status"] in ("Succeeded", "Failed"),
        timeout=60,
        what="the job to end",
    )
    assert admin.delete(jobs_path(sub, "once")).status_code == 200
    again = run(lambda: accept(quote_id))
    assert again.is_error and payload(again)["error"]["code"] == "QuoteNotValid"
    assert "accepted already" in payload(again)["error"]["message"]
    assert admin.get(jobs_path(sub, "once")).status_code == 404  # no second job was submitted or billed
    # spent in the table, as in AWS (any execution environment refuses it again), and nothing else written there
    from itl_accelerator_mcp.quotes import quote_key

    key = quote_key(quote_id)
    spent = aws.get_item(TableName=TABLE, Key={"PK": {"S": f"SYS#MCPQUOTE#{key[0]}"}, "SK": {"S": key}})
    assert spent["Item"]["entityType"]["S"] == "McpQuoteSpent"


def test_a_quote_that_names_no_price_cannot_be_accepted(mcp_url, make_token, admin, sub, with_node):
    token = make_token("bob", [CONSUMER], [f"/subscriptions/{sub}"])
    args = {"resourceGroup": "rg1", "name": "huge", "requestedGpus": 64, "requestedMemoryGb": 5120}

    async def main() -> tuple[Any, Any]:
        async with http_session(mcp_url, token) as client:
            quote = await client.call_tool("submit_job", args)
            quote_id = quote.structured_content["quote"]["quoteId"]
            return quote, await client.call_tool("submit_job", {**args, "quoteId": quote_id})

    quote, accepted = run(main)
    assert quote.structured_content["quote"]["estimatedCost"] == []
    assert accepted.is_error and payload(accepted)["error"]["code"] == "QuoteNotValid"
    assert "named no price" in payload(accepted)["error"]["message"]
    assert admin.get(jobs_path(sub, "huge")).status_code == 404


def test_an_assistant_reads_the_offers_it_quotes_from_before_submitting(mcp_url, make_token, sub, with_node):
    token = make_token("bob", [CONSUMER], [f"/subscriptions/{sub}"])
    location = node_body()["location"]

    async def main() -> Any:
        async with http_session(mcp_url, token) as client:
            return payload(await client.call_tool("list_offers", {"subscriptionId": sub, "location": location}))

    (offer,) = run(main)["value"]
    assert offer["name"] == "gpu-h100" and offer["properties"]["largestSingleNode"]["devices"] == 8
    assert offer["properties"]["pricePerAcceleratorHour"] == [{"currency": "USD", "min": "2.5", "max": "2.5"}]


# ----------------------------------------------------------------------------------------------- reservations
def _window(days_ahead: int = 1, hours: int = 3) -> tuple[str, str]:
    """A window on whole UTC hours starting ``days_ahead`` days after the next hour."""
    start = (int(time.time()) // 3600 + 1 + 24 * days_ahead) * 3600
    at = lambda epoch: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))  # noqa: E731
    return at(start), at(start + hours * 3600)


def test_a_reservation_is_booked_only_with_an_accepted_quote_and_a_taken_window_names_its_node(
    mcp_url, make_token, admin, sub, with_node
):
    token = make_token("bob", [CONSUMER], [f"/subscriptions/{sub}"])
    start, end = _window(hours=3)
    args = {
        "resourceGroup": "rg1",
        "name": "tuesday",
        "location": node_body()["location"],
        "accelerator": {"kind": "GPU", "count": 4, "model": "H100"},
        "startTime": start,
        "endTime": end,
    }
    path = f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/capacityReservations/tuesday"

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}
        async with http_session(mcp_url, token) as client:
            out["quote"] = await client.call_tool("book_reservation", args)
            quote_id = out["quote"].structured_content["quote"]["quoteId"]
            out["other"] = await client.call_tool("book_reservation", {**args, "endTime": start, "quoteId": quote_id})
            out["before"] = admin.get(path).status_code
            out["booked"] = await client.call_tool("book_reservation", {**args, "quoteId": quote_id})
            out["again"] = await client.call_tool("book_reservation", {**args, "quoteId": quote_id})
            # the rest of the node's 8 GPUs in the same window: quoted, accepted, and refused by the API
            more = {**args, "name": "too-many", "accelerator": {"kind": "GPU", "count": 8, "model": "H100"}}
            second = (await client.call_tool("book_reservation", more)).structured_content["quote"]["quoteId"]
            out["taken"] = await client.call_tool("book_reservation", {**more, "quoteId": second})
            out["listed"] = await client.call_tool("list_reservations", {"subscriptionId": sub})
            out["cancelled"] = await client.call_tool("cancel_reservation", {"resourceGroup": "rg1", "name": "tuesday"})
            out["gone"] = await client.call_tool("get_reservation", {"resourceGroup": "rg1", "name": "tuesday"})
        return out

    out = run(main)
    # The first call only quotes: 4 GPUs x 3 hours at the node's 2.5 USD, billed whole
    quote = out["quote"].structured_content["quote"]
    assert out["quote"].structured_content["status"] == "quote" and "show this quote" in out["quote"].content[0].text
    assert quote["estimatedCost"] == [
        {"amount": "30.000000", "currency": "USD", "basis": "the whole window (3 hours), billed used or not"}
    ]
    assert quote["upperBound"] is False and quote["maxPrice"] == {"pricePerAcceleratorHour": 2.5, "currency": "USD"}
    # Other arguments are refused, and nothing is booked until the quote is accepted
    assert payload(out["other"])["error"]["code"] == "QuoteNotValid" and out["before"] == 404
    # Accepted: booked on dgx-1 at the quoted price, for the quoted total; the quote pays for one booking only
    booked = out["booked"].structured_content
    assert booked["status"] == "booked"
    props = booked["reservation"]["properties"]
    assert [n["id"].rsplit("/", 1)[-1] for n in props["reservedNodes"]] == ["dgx-1"]
    assert float(props["totalCost"]["amount"]) == 30 and props["totalCost"]["currency"] == "USD"
    assert (props["startTime"], props["endTime"], props["bookedBy"]) == (start, end, "bob")
    assert payload(out["again"])["error"]["code"] == "QuoteNotValid"
    # A window taken: the API's 409 naming the node that blocks it
    taken = payload(out["taken"])["error"]
    assert taken["code"] == "InsufficientCapacity" and "dgx-1" in taken["message"]
    assert [r["name"] for r in payload(out["listed"])["value"]] == ["tuesday"]
    # Cancelled before its window: gone
    assert out["cancelled"].structured_content["status"] == "cancelled"
    assert payload(out["gone"])["error"]["code"] == "ResourceNotFound"
    assert admin.get(path).status_code == 404


def test_a_reservation_under_a_max_price_below_every_node_is_quoted_no_price_and_cannot_be_accepted(
    mcp_url, make_token, admin, sub, with_node
):
    token = make_token("bob", [CONSUMER], [f"/subscriptions/{sub}"])
    start, end = _window(hours=2)
    args = {
        "resourceGroup": "rg1",
        "name": "cheap",
        "location": node_body()["location"],
        "accelerator": {"kind": "GPU", "count": 1},
        "startTime": start,
        "endTime": end,
        "maxPrice": {"pricePerAcceleratorHour": 1.0, "currency": "USD"},  # dgx-1 is 2.5
    }

    async def main() -> tuple[Any, Any]:
        async with http_session(mcp_url, token) as client:
            quote = await client.call_tool("book_reservation", args)
            quote_id = quote.structured_content["quote"]["quoteId"]
            return quote, await client.call_tool("book_reservation", {**args, "quoteId": quote_id})

    quote, accepted = run(main)
    assert quote.structured_content["quote"]["estimatedCost"] == []
    assert quote.structured_content["quote"]["candidateNodes"] == []
    assert "no price known" in quote.structured_content["quote"]["summary"]
    assert payload(accepted)["error"]["code"] == "QuoteNotValid"
    assert (
        admin.get(
            f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/capacityReservations/cheap"
        ).status_code
        == 404
    )
