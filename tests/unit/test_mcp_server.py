"""The MCP server's own parts, without any stack: its schemas are the API's current ones, its docs list every tool
with the annotations it carries, quote ids hold for exactly what they quoted, the caller is read as the authorizer
and the token say, and the API's address is the one the caller used."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest

from itl_accelerator_mcp import schemas
from itl_accelerator_mcp.caller import from_authorizer_context, from_token
from itl_accelerator_mcp.lambda_handler import base_url
from itl_accelerator_mcp.quotes import QuoteRejected, QuoteSigner
from itl_accelerator_mcp.settings import McpSettings
from itl_accelerator_mcp.tools import build_tools
from itl_local.devauth import load_or_create_key, mint_token
from tests.conftest import REPO_ROOT


def test_the_shipped_schemas_are_the_contracts_current_ones():
    openapi = json.loads((REPO_ROOT / "docs" / "openapi.json").read_text())
    assert schemas.SCHEMA_FILE.read_text() == schemas.render(openapi), "run ./dev generate"


def test_every_tool_schema_is_self_contained():
    for tool in build_tools():
        for schema in (tool.input_schema, tool.output_schema):
            text = json.dumps(schema)
            assert "#/components/" not in text, tool.name
            for name in re.findall(r'"#/\$defs/([^"]+)"', text):
                assert name in schema.get("$defs", {}), (tool.name, name)


def test_docs_list_every_tool_with_its_annotations():
    text = (REPO_ROOT / "docs" / "MCP.md").read_text().split("<!-- mcp-tools -->", 1)[1]
    yes = {"yes": True, "no": False}
    for tool in build_tools():
        row = re.search(rf"^\| `{tool.name}` \|(.*)$", text, re.MULTILINE)
        assert row, f"docs/MCP.md does not list {tool.name}"
        cells = [yes[c.strip()] for c in row.group(1).split("|")[:4]]
        a = tool.annotations
        assert cells == [a.read_only, a.destructive, a.idempotent, a.open_world], tool.name


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_quote_holds_for_exactly_what_it_quoted():
    clock = Clock()
    signer = QuoteSigner(b"k" * 32, ttl_seconds=600, clock=clock)
    args = {"name": "j", "requestedGpus": 2, "requestedMemoryGb": 160}
    quote_id, expires = signer.issue("bob", "submit_job", args, {"USD": "5.000000"})
    assert expires == clock.now + 600
    # The same call, with the quote id among its arguments, holds, and gives back the quoted terms
    assert signer.check(quote_id, "bob", "submit_job", {**args, "quoteId": quote_id}).terms == {"USD": "5.000000"}
    # Anything else does not
    refused = {
        "other user": ("alice", "submit_job", args),
        "other tool": ("bob", "provision_instance", args),
        "other arguments": ("bob", "submit_job", {**args, "requestedGpus": 4}),
    }
    for why, (subject, tool, arguments) in refused.items():
        with pytest.raises(QuoteRejected):
            signer.check(quote_id, subject, tool, arguments)
            pytest.fail(why)
    with pytest.raises(QuoteRejected, match="not one this server issued"):
        signer.check(quote_id[:-2] + "xx", "bob", "submit_job", args)
    with pytest.raises(QuoteRejected, match="not one this server issued"):
        QuoteSigner(b"o" * 32, clock=clock).check(quote_id, "bob", "submit_job", args)
    clock.now += 601
    with pytest.raises(QuoteRejected, match="expired"):
        signer.check(quote_id, "bob", "submit_job", args)


def test_the_caller_is_read_from_the_authorizer_context_and_from_a_token():
    raw = json.dumps(
        {
            "subject": "bob",
            "display_name": "Bob",
            "roles": ["itl-accelerator-consumer"],
            "scopes": [
                {"subscription_id": "sub-1", "resource_group": None},
                {"subscription_id": "sub-2", "resource_group": "rg1"},
            ],
        }
    )
    caller = from_authorizer_context(raw)
    assert caller.scopes == ("/subscriptions/sub-1", "/subscriptions/sub-2/resourceGroups/rg1")
    assert caller.subscriptions() == ["sub-1", "sub-2"]

    with tempfile.TemporaryDirectory() as home:
        token = mint_token(
            load_or_create_key(Path(home)),
            issuer="http://issuer/realms/itl",
            audience="itl-accelerator",
            subject="bob",
            roles=["itl-accelerator-consumer"],
            scopes=["/subscriptions/sub-1"],
        )
    caller = from_token(token)
    assert (caller.subject, caller.roles, caller.scopes) == (
        "bob",
        ("itl-accelerator-consumer",),
        ("/subscriptions/sub-1",),
    )
    with pytest.raises(ValueError):
        from_token("not-a-jwt")


@pytest.mark.parametrize(
    ("context", "headers", "expected"),
    [
        ({"domainName": "abc.execute-api.us-east-1.amazonaws.com", "path": "/v1/mcp"}, {},
         "https://abc.execute-api.us-east-1.amazonaws.com/v1"),
        ({"domainName": "api.itlusions.com", "path": "/mcp"}, {"X-Forwarded-Proto": "https"}, "https://api.itlusions.com"),
        ({"domainName": "127.0.0.1:8003", "path": "/mcp"}, {"x-forwarded-proto": "http"}, "http://127.0.0.1:8003"),
    ],
)  # fmt: skip
def test_the_api_is_called_where_the_caller_reached_it(context, headers, expected):
    event = {"path": "/mcp", "headers": headers, "requestContext": context}
    assert base_url(event) == expected


def test_settings_refuse_a_short_quote_key_and_a_bad_ttl():
    assert McpSettings.from_environment({"ITL_MCP_READ_ONLY": "TRUE"}).read_only
    with pytest.raises(ValueError):
        McpSettings.from_environment({"ITL_MCP_QUOTE_SECRET": "short"})
    with pytest.raises(ValueError):
        McpSettings.from_environment({"ITL_MCP_QUOTE_TTL_SECONDS": "5"})
    assert McpSettings.from_environment({"CONTROL_PLANE_AUTH_URL": "http://x/", "OIDC_REALM": "r"}).issuer == (
        "http://x/realms/r"
    )


def test_a_quote_is_spent_once_and_forgotten_after_it_expired():
    from itl_accelerator_mcp.quotes import MemoryQuoteLedger, process_ledger

    now = [1000.0]
    ledger = MemoryQuoteLedger(clock=lambda: now[0])
    assert (ledger.spend("q1.a.b", 1600), ledger.spend("q1.a.b", 1600), ledger.spend("q1.c.d", 1600)) == (
        True,
        False,
        True,
    )
    now[0] = 1601.0  # expired: no check would accept it anyway, so the ledger need not keep it
    assert ledger.spend("q1.a.b", 2200) is True
    assert process_ledger() is process_ledger()  # one ledger per process: every server built here shares it


@pytest.mark.parametrize("kind", ["GPU", "gpu", "TPU", "NPU", "Neuron", "HPU", "FPGA"])
@pytest.mark.parametrize("model", [None, "", "H100", "MI300X"])
@pytest.mark.parametrize("said", [None, "AMD", "nvidia", "Any", "any"])
def test_a_quote_asks_for_the_vendor_the_api_places_on(kind, model, said):
    """The MCP server quotes on the nodes the API would place the job on: its vendor rule is the API's."""
    from itl_accelerator.domain.accelerators import job_vendor as api_rule
    from itl_accelerator_mcp.tools import job_vendor as quote_rule

    expected = api_rule(kind, model, said)
    assert quote_rule(kind, model, said) == (expected.lower() if expected else None)
