"""The ITL Accelerator Resource Provider as a Model Context Protocol (MCP) server.

A client of the provider's own HTTP API: every tool is one or a few API calls made with the caller's own bearer
token, so RBAC, subscription and resource-group scopes, validation, audit and error codes are the API's own. Two
transports serve the same tools: streamable HTTP (the ``McpFunction`` Lambda function behind API Gateway at
``POST /mcp``, :mod:`itl_accelerator_mcp.lambda_handler`) and stdio (``itlc-accelerator mcp``,
:mod:`itl_accelerator_mcp.stdio`). docs/MCP.md describes the tools.
"""

__version__ = "0.1.0"
