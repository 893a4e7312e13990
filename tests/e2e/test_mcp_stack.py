"""Given the local stack started as the README says (``itl-local up``) and the ``.vscode/mcp.json`` the README tells a
Copilot Chat user to paste, when the official MCP client connects the way that file says (HTTP with the token in
``Authorization``, or ``itlc-accelerator mcp`` over stdio), then a consumer learns which of their jobs wait and why,
and submits jobs only by accepting a quote."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import REPO_ROOT
from tests.e2e.test_local_stack import BIN, Stack
from tests.integration.instance_helpers import wait_for

pytestmark = pytest.mark.e2e
CONFIG = REPO_ROOT / ".vscode" / "mcp.json"
SUB = "sub-mcp"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("mcp-stack"), options=("--quiet",))
    yield s
    if s.proc.poll() is None:
        s.stop()


def servers(stack: Stack, token: str) -> dict[str, Any]:
    """The servers of .vscode/mcp.json as VS Code would start them: the input filled in, this stack's port, the
    workspace's venv being this test's."""
    text = CONFIG.read_text().replace("${input:itl-accelerator-token}", token)
    text = text.replace("http://127.0.0.1:8003", stack.url).replace("${workspaceFolder}/.venv/bin/", f"{BIN}/")
    return json.loads(text)["servers"]


async def quoted_then_accepted(client: Client, tool: str, args: dict[str, Any]) -> Any:
    """Call a spending tool, then accept the quote it answered (as the user would, having read it)."""
    quote = (await client.call_tool(tool, args)).structured_content
    assert quote["status"] == "quote", quote
    return await client.call_tool(tool, {**args, "quoteId": quote["quote"]["quoteId"]})


def test_readme_shows_the_mcp_json_to_paste():
    readme = (REPO_ROOT / "README.md").read_text()
    block = readme.split("<!-- mcp-json -->", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    assert json.loads(block) == json.loads(CONFIG.read_text())


def test_copilot_chat_config_answers_which_jobs_wait_and_why(stack: Stack):
    admin = {
        "Authorization": f"Bearer {stack.token('--sub', 'alice', '--role', 'itl-accelerator-admin', '--scope', f'/subscriptions/{SUB}')}"
    }
    token = stack.token("--sub", "bob", "--role", "itl-accelerator-consumer", "--scope", f"/subscriptions/{SUB}")
    rg = f"{stack.url}/subscriptions/{SUB}/resourceGroups/rg1/providers/ITL.Accelerator"
    # Given a 4-GPU node
    node = {
        "location": "us-east-1",
        "sku": {"name": "DGX-H100-8GPU", "capacity": 4},
        "properties": {"owner": "supplier-1", "pricing": {"currency": "USD", "pricePerGpuHour": 2.0}},
    }
    assert httpx.put(f"{rg}/sparkNodes/dgx-1", json=node, headers=admin, timeout=30).status_code == 201
    http = servers(stack, token)["itl-accelerator"]
    forever = {
        "image": "nvcr.io/nvidia/pytorch:24.10-py3",
        "command": ["python", "train.py"],
        "env": {"ITL_SIM_FOREVER": "1"},
    }

    async def conversation() -> tuple[Any, Any, Any]:
        async with httpx2.AsyncClient(headers=http["headers"], timeout=60) as h:
            async with Client(streamable_http_client(http["url"], http_client=h)) as client:  # type: ignore[arg-type]
                # When bob submits two jobs, accepting each quote: one fills the node, the other must wait
                big = await quoted_then_accepted(
                    client,
                    "submit_job",
                    {
                        "resourceGroup": "rg1",
                        "name": "big",
                        "requestedGpus": 4,
                        "requestedMemoryGb": 320,
                        "workload": forever,
                    },
                )
                small = await quoted_then_accepted(
                    client,
                    "submit_job",
                    {"resourceGroup": "rg1", "name": "small", "requestedGpus": 1, "requestedMemoryGb": 80},
                )

                async def waiting() -> Any:
                    page = (
                        await client.call_tool("list_jobs", {"mine": True, "status": ["Pending"]})
                    ).structured_content
                    reasons = [j["properties"].get("statusReason") or "" for j in page["value"]]
                    return page if any(r.startswith("Waiting for capacity") for r in reasons) else None

                for _ in range(120):  # bounded: the job is placed within seconds
                    if answer := await waiting():
                        break
                    await anyio.sleep(0.5)
                else:
                    raise AssertionError("no job waited")
                for name in ("small", "big"):
                    await client.call_tool("cancel_job", {"resourceGroup": "rg1", "name": name})
                return big, small, answer

    big, small, answer = anyio.run(conversation)
    assert big.structured_content["status"] == small.structured_content["status"] == "accepted"
    # Then "which of my jobs are waiting and why" is answered: the small one, waiting for capacity
    [job] = answer["value"]
    assert job["name"] == "small" and "Waiting for capacity" in job["properties"]["statusReason"]
    wait_for(
        lambda: (
            httpx.get(f"{rg}/sparkJobs/big", headers=admin, timeout=30).json()["properties"]["status"] == "Canceled"
        ),
        timeout=60,
        what="big to be canceled",
    )

    # And the stdio form of the same file serves bob the same tools
    stdio = servers(stack, token)["itl-accelerator-stdio"]

    async def desktop() -> tuple[list[str], Any]:
        params = StdioServerParameters(command=stdio["command"], args=stdio["args"], env=stdio["env"])
        async with Client(params) as client:
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            return tools, (await client.call_tool("get_my_access", {})).structured_content

    tools, me = anyio.run(desktop)
    assert "submit_job" in tools and "list_jobs" in tools
    assert me["subject"] == "bob" and me["subscriptions"] == [SUB]


def test_the_local_stack_serves_the_metadata_and_refuses_a_bad_token(stack: Stack):
    metadata = httpx.get(f"{stack.url}/.well-known/oauth-protected-resource/mcp", timeout=30).json()
    assert metadata["resource"] == f"{stack.url}/mcp"
    assert metadata["authorization_servers"] == [f"http://127.0.0.1:{stack.idp_port}/realms/itl"]
    refused = httpx.post(f"{stack.url}/mcp", json={}, headers={"Authorization": "Bearer nope"}, timeout=30)
    assert refused.status_code == 401 and "resource_metadata=" in refused.headers["WWW-Authenticate"]
