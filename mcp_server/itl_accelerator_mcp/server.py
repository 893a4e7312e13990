"""The MCP server: the tools of :mod:`.tools` on the official SDK's low-level ``Server``, for one caller.

A server object is built for one caller and one API client (:func:`build_server`): over HTTP once per request
(the Lambda function builds it per invocation), over stdio once per process. The low-level server is used rather
than ``MCPServer`` because the tools' schemas are the API's own JSON Schemas (:mod:`.schemas`), not ones derived
from Python signatures; arguments are checked against them here (``jsonschema``, draft 2020-12) before any API call.

A tool's result is its structured content (matching its output schema) and the same JSON as text, after a note for
the reader when there is one. A refusal is a result with ``isError`` and the text ``{"error": {"code", "message",
...}}``: the API's ARM code and message (``AuthorizationFailed``, ``ResourceNotFound``, ``InsufficientCapacity``,
...), or the server's own ``InvalidRequestContent`` (arguments against the schema), ``QuoteNotValid`` and
``ReadOnlyMode``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import jsonschema
import mcp_types as types
from mcp.server.lowlevel import Server

from itl_accelerator_mcp import __version__
from itl_accelerator_mcp.api import ApiClient, ApiError
from itl_accelerator_mcp.caller import Caller
from itl_accelerator_mcp.quotes import QuoteLedger, QuoteSigner, process_ledger
from itl_accelerator_mcp.tools import ToolCall, ToolRefused, ToolSpec, build_tools

logger = logging.getLogger("itl_accelerator_mcp")

SERVER_NAME = "itl-accelerator"
INSTRUCTIONS = (
    "Tools of the ITL Accelerator Resource Provider (ARM namespace ITL.Accelerator): GPU nodes, Ollama instances "
    "on them, GPU jobs, usage and audit, acting as the signed-in user with the user's own roles. Resources are "
    "addressed by subscriptionId and resourceGroup (get_my_access lists the user's). Results are the API's bodies "
    "with ARM ids. provision_instance, submit_job and book_reservation spend money: the first call returns a quote; "
    "show the quote "
    "to the user and call again with its quoteId only when the user accepts. list_jobs with mine=true and "
    "status=['Pending'] answers which of the user's jobs wait; properties.statusReason says why and "
    "properties.estimatedStartTime when each is expected to start. list_reservations shows capacity booked for "
    "future windows."
)


@dataclass(frozen=True)
class ServerOptions:
    """How a server behaves: ``read_only`` lists and runs the read tools only; ``default_subscription`` and
    ``default_resource_group`` fill arguments left out; ``signer`` gives the quote signer and ``ledger`` the ledger of
    spent quotes (each made on first use)."""

    read_only: bool = False
    default_subscription: str | None = None
    default_resource_group: str | None = None
    signer: Callable[[], QuoteSigner] = QuoteSigner.ephemeral
    ledger: Callable[[], QuoteLedger] = process_ledger


@cache
def _tools() -> tuple[ToolSpec, ...]:
    return tuple(build_tools())


def input_schema(spec: ToolSpec, default_resource_group: bool = False) -> dict[str, Any]:
    """A tool's input schema as a server lists it: with a default resource group, ``resourceGroup`` is optional."""
    schema = spec.input_schema
    if default_resource_group and "resourceGroup" in schema.get("required", ()):
        schema = {**schema, "required": [r for r in schema["required"] if r != "resourceGroup"]}
    return schema


@cache
def _validator(name: str, default_resource_group: bool) -> jsonschema.Draft202012Validator:
    spec = next(t for t in _tools() if t.name == name)
    return jsonschema.Draft202012Validator(input_schema(spec, default_resource_group))


def tool_specs(read_only: bool = False) -> list[ToolSpec]:
    """The tools a server lists: all, or the read tools only."""
    return [t for t in _tools() if not (read_only and t.writes)]


def to_mcp_tool(spec: ToolSpec, default_resource_group: bool = False) -> types.Tool:
    """The MCP ``Tool`` of a spec: name, title, description, schemas and annotations."""
    a = spec.annotations
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=input_schema(spec, default_resource_group),
        output_schema=spec.output_schema,
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=a.read_only,
            destructive_hint=a.destructive,
            idempotent_hint=a.idempotent,
            open_world_hint=a.open_world,
        ),
    )


def _error(error: dict[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps({"error": error}, ensure_ascii=False))],
        is_error=True,
    )


def _defaults(caller: Caller, options: ServerOptions) -> str | None:
    if options.default_subscription:
        return options.default_subscription
    subscriptions = caller.subscriptions()
    return subscriptions[0] if len(subscriptions) == 1 else None


async def call_tool(
    api: ApiClient, caller: Caller, options: ServerOptions, name: str, arguments: dict[str, Any]
) -> types.CallToolResult:
    """Run one tool for ``caller`` through ``api``: validated, refused in read-only mode, the API's errors kept."""
    spec = next((t for t in _tools() if t.name == name), None)
    if spec is None:
        return _error({"code": "UnknownTool", "message": f"There is no tool '{name}'."})
    if spec.writes and options.read_only:
        return _error(
            {
                "code": "ReadOnlyMode",
                "message": f"The server runs in read-only mode: {name} changes resources and was refused; nothing "
                "was done.",
            }
        )
    validator = _validator(name, bool(options.default_resource_group))
    problems = sorted(validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
    if problems:
        first = problems[0]
        target = ".".join(str(p) for p in first.absolute_path) or None
        return _error({"code": "InvalidRequestContent", "message": first.message, "target": target})
    api.new_correlation()
    call = ToolCall(
        api=api,
        caller=caller,
        args=arguments,
        signer=options.signer,
        ledger=options.ledger,
        default_subscription=_defaults(caller, options),
        default_resource_group=options.default_resource_group,
    )
    try:
        result = await spec.handler(call)
    except ApiError as exc:
        logger.info("tool %s: the API answered %s %s", name, exc.status, exc.code)
        return _error(exc.to_dict())
    except ToolRefused as exc:
        return _error(exc.to_dict())
    except Exception:  # a tool's own failure is its error result, never a protocol error
        logger.exception("tool %s failed", name)
        return _error({"code": "InternalServerError", "message": f"The tool {name} failed; nothing more is known."})
    text = json.dumps(result.data, ensure_ascii=False, indent=1)
    if result.note:
        text = f"{result.note}\n\n{text}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=result.data)


def _client_name(ctx: Any) -> str | None:
    """``name/version`` of the MCP client as it introduced itself (the 2026-07-28 request envelope, or a legacy
    session's ``initialize``); None when it did not (a stateless legacy request after its ``initialize``)."""
    try:
        info = ctx.session.client_params.client_info
    except AttributeError:
        return None
    if info is None or not getattr(info, "name", None):
        return None
    return f"{info.name}/{info.version}" if getattr(info, "version", None) else str(info.name)


def build_server(api: ApiClient, caller: Caller, options: ServerOptions | None = None) -> Server[Any]:
    """A low-level MCP ``Server`` serving the tools for ``caller`` through ``api``."""
    opts = options or ServerOptions()

    async def on_list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        default_rg = bool(opts.default_resource_group)
        return types.ListToolsResult(tools=[to_mcp_tool(t, default_rg) for t in tool_specs(opts.read_only)])

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        api.name_client(_client_name(ctx))
        return await call_tool(api, caller, opts, params.name, dict(params.arguments or {}))

    def schema_of(name: str) -> dict[str, Any] | None:
        spec = next((t for t in _tools() if t.name == name), None)
        return input_schema(spec, bool(opts.default_resource_group)) if spec else None

    return Server(
        SERVER_NAME,
        version=__version__,
        title="ITL Accelerator",
        instructions=INSTRUCTIONS
        + (" The server is read-only: it lists and runs read tools only." if opts.read_only else ""),
        get_tool_input_schema=schema_of,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )
