"""The stdio transport: the same tools for a desktop client (VS Code, Claude Desktop), started as
``itlc-accelerator mcp --api-url URL --token TOKEN`` (the command line's usual options and variables).

The server runs as the user, in the user's process: it calls ``--api-url`` with the user's token, which the API
verifies on every call. Quotes are signed with ``ITL_MCP_QUOTE_SECRET`` when set, else with a key made for this
process (a quote then holds until the process ends or the quote expires).
"""

from __future__ import annotations

from typing import Any

import anyio

from itl_accelerator_mcp.api import ApiClient
from itl_accelerator_mcp.caller import from_token
from itl_accelerator_mcp.quotes import QuoteSigner
from itl_accelerator_mcp.settings import McpSettings


def run_stdio(
    api_url: str,
    token: str,
    *,
    read_only: bool = False,
    subscription: str | None = None,
    resource_group: str | None = None,
    environ: dict[str, str] | None = None,
) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin. ``read_only`` (or ``ITL_MCP_READ_ONLY``) serves the
    read tools only. ``ValueError`` when ``token`` is not a JWT with a ``sub`` claim (the subject quotes are bound to)
    or a setting is invalid."""
    from mcp.server.stdio import stdio_server

    from itl_accelerator_mcp.server import ServerOptions, build_server

    caller = from_token(token)
    settings = McpSettings.from_environment(environ)
    if settings.quote_secret:
        signer = QuoteSigner(settings.quote_secret.encode(), settings.quote_ttl_seconds)
    else:
        signer = QuoteSigner.ephemeral(settings.quote_ttl_seconds)
    options = ServerOptions(
        read_only=read_only or settings.read_only,
        default_subscription=subscription,
        default_resource_group=resource_group,
        signer=lambda: signer,
    )

    async def serve() -> None:
        async with ApiClient(api_url, token, transport_name="stdio") as api:
            server: Any = build_server(api, caller, options)
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(serve)
