"""``mcp``: serve the provider's tools to an MCP client (Copilot Chat, Claude Desktop) over stdio.

The server is the ``itl-accelerator-mcp`` distribution (``mcp_server/``; ``pip install 'itlc-accelerator[mcp]'``),
imported only when this command runs, so the rest of the command line stays as light as it was. It is a client of
the API at ``--api-url`` with the user's ``--token``: it can do nothing the token could not (docs/MCP.md).
"""

from __future__ import annotations

import click

from itlc_accelerator.session import DEFAULT_API_URL


@click.command("mcp")
@click.option("--api-url", envvar="CONTROLPLANE_API_URL", default=DEFAULT_API_URL, show_default=True, show_envvar=True,
              help="The API's base URL.")  # fmt: skip
@click.option("--token", envvar="CONTROLPLANE_TOKEN", show_envvar=True, required=True,
              help="Bearer token (a Keycloak JWT; locally: ./dev token). Every tool acts with it.")  # fmt: skip
@click.option("--subscription", envvar="CONTROLPLANE_SUBSCRIPTION", show_envvar=True,
              help="Default subscription id of the tools (else: the token's only one, or the model asks).")  # fmt: skip
@click.option("--resource-group", "-g", envvar="CONTROLPLANE_RESOURCE_GROUP", show_envvar=True,
              help="Default resource group of the tools.")  # fmt: skip
@click.option("--read-only", is_flag=True, envvar="ITL_MCP_READ_ONLY", show_envvar=True,
              help="List and run read tools only: every write is refused.")  # fmt: skip
def mcp(api_url: str, token: str, subscription: str | None, resource_group: str | None, read_only: bool) -> None:
    """Serve MCP on stdin/stdout (for an MCP client to start; see docs/MCP.md).

    Tools: list and show nodes, instances and jobs (with why a job waits), usage, audit events, operations; create,
    price and cordon nodes; provision and delete instances; submit, cancel and delete jobs. Spending tools answer a
    quote first and act only when called again with its quoteId.
    """
    try:
        from itl_accelerator_mcp.stdio import run_stdio
    except ImportError:
        raise click.ClickException(
            "the MCP server is not installed: pip install 'itlc-accelerator[mcp]' (or ./mcp_server from the "
            "repository)."
        ) from None
    try:
        run_stdio(api_url, token, read_only=read_only, subscription=subscription, resource_group=resource_group)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
