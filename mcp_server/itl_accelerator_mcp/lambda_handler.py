"""The ``McpFunction`` Lambda function: streamable HTTP at ``/mcp`` behind API Gateway, and the OAuth 2.1
protected-resource metadata (RFC 9728) at ``/.well-known/oauth-protected-resource[/mcp]``.

``/mcp`` passes the API Gateway REQUEST authorizer like every route of the API, so a request without a valid token
is refused (401 with ``WWW-Authenticate``) before this function runs. The function serves it statelessly with JSON
responses (the SDK's ``streamable_http_app(stateless_http=True, json_response=True)``): a 2026-07-28 client needs no
handshake and no session; an older client's ``initialize`` is served on the same endpoint, with no session kept.

The MCP app is built anew for every invocation, with the caller's own API client (python-sdk#3121: an app's session
manager runs once per instance, so a warm invocation reusing it would fail). Building it is dictionary work; the
imports and the tools' schemas are made once per execution environment.

The API's base URL (``scheme://host[/stage]``) comes from the event (the host the caller addressed and API Gateway's
stage prefix), never from configuration: the function calls the API exactly as its caller reached it.

Only ``POST`` is served: ``GET`` (a standalone SSE stream, which would hold the function open until its timeout) and
``DELETE`` (ending a session, of which there are none) answer 405, as the transport's specification allows.

Query parameters of the ``/mcp`` URL: ``readOnly=true`` (this connection lists and runs read tools only; the
server-wide ``ITL_MCP_READ_ONLY`` cannot be lifted by it), ``subscription`` and ``resourceGroup`` (defaults for the
tools' ``subscriptionId`` and ``resourceGroup``). The API's own rules apply (issue 26): a query parameter it does not
know (``readonly``, ``read_only``), one given twice (``readOnly=true&readOnly=false``) or a ``readOnly`` that is
neither ``true`` nor ``false`` is 400 ``InvalidParameter`` naming it — so no spelling of "read-only" ever gets a
server that offers a write tool; a body over ``MAX_BODY_BYTES`` (64 KiB) is 413 ``RequestEntityTooLarge``, and a
body that is not strict JSON (duplicate member names, ``NaN``, unpaired surrogates...) is 400
``InvalidRequestContent``, by the API's own parser (``itl_accelerator.api.json_input``, in the core layer every
function of template.yaml has).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import threading
from typing import Any

from itl_accelerator_mcp.api import ApiClient
from itl_accelerator_mcp.caller import Caller, from_authorizer_context
from itl_accelerator_mcp.quotes import DynamoQuoteLedger, MemoryQuoteLedger, QuoteLedger, QuoteSigner
from itl_accelerator_mcp.settings import McpSettings

logger = logging.getLogger("itl_accelerator_mcp")

METADATA_PATH = "/.well-known/oauth-protected-resource"
MCP_PATH = "/mcp"

_state = threading.local()
_lock = threading.RLock()
_shared: dict[str, Any] = {}


def _ensure_event_loop() -> asyncio.AbstractEventLoop:
    """Mangum drives the app on ``asyncio.get_event_loop()``: give this thread one loop, once."""
    loop = getattr(_state, "loop", None)
    if loop is None:
        loop = _state.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
    return loop


def settings() -> McpSettings:
    """The settings, read once per execution environment (on the first invocation, not at import)."""
    with _lock:
        if "settings" not in _shared:
            _shared["settings"] = McpSettings.from_environment()
        found: McpSettings = _shared["settings"]
        return found


def quote_signer() -> QuoteSigner:
    """The quote signer, made on first use: the key from ``ITL_MCP_QUOTE_SECRET``, else the Secrets Manager secret
    ``ITL_MCP_QUOTE_SECRET_ID`` (one ``GetSecretValue`` per execution environment), else random for this process."""
    with _lock:
        signer = _shared.get("signer")
        if signer is None:
            s = settings()
            if s.quote_secret:
                signer = QuoteSigner(s.quote_secret.encode(), s.quote_ttl_seconds)
            elif s.quote_secret_id:
                import boto3

                secret = boto3.client("secretsmanager").get_secret_value(SecretId=s.quote_secret_id)["SecretString"]
                signer = QuoteSigner(secret.encode(), s.quote_ttl_seconds)
            else:
                signer = QuoteSigner.ephemeral(s.quote_ttl_seconds)
            _shared["signer"] = signer
        return signer


def quote_ledger() -> QuoteLedger:
    """Where spent quotes are recorded, made on first use: the provider's table (``TABLE_NAME``: conditional puts in
    its ``SYS#MCPQUOTE#*`` partitions, which ``McpQuoteLedgerPolicy`` alone grants) — so a quote is spent once
    whichever execution environment accepts it — else this process's memory (the stdio server)."""
    with _lock:
        ledger = _shared.get("ledger")
        if ledger is None:
            table = settings().table_name
            ledger = DynamoQuoteLedger(table) if table else MemoryQuoteLedger()
            _shared["ledger"] = ledger
        found: QuoteLedger = ledger
        return found


def _header(event: dict[str, Any], name: str) -> str | None:
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == name.lower():
            return str(value)
    return None


def base_url(event: dict[str, Any]) -> str:
    """``scheme://host[/stage]`` as the caller addressed the API: the host from ``requestContext.domainName`` (or
    ``Host``), the scheme from ``X-Forwarded-Proto`` (https without), and API Gateway's stage prefix recovered from
    ``requestContext.path`` (``/v1/mcp`` for the resource path ``/mcp``; nothing behind a custom domain)."""
    context = event.get("requestContext") or {}
    host = context.get("domainName") or _header(event, "Host") or "localhost"
    scheme = (_header(event, "X-Forwarded-Proto") or "https").split(",")[0].strip()
    full_path, path = context.get("path") or "", event.get("path") or ""
    prefix = full_path[: -len(path)] if path and full_path.endswith(path) and len(full_path) > len(path) else ""
    return f"{scheme}://{host}{prefix}"


def resource_metadata(event: dict[str, Any]) -> dict[str, Any]:
    """RFC 9728 protected-resource metadata of the MCP endpoint: the resource, and the issuer of the API's tokens
    as its authorization server."""
    return {
        "resource": base_url(event) + MCP_PATH,
        "authorization_servers": [settings().issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "ITL Accelerator Resource Provider (MCP)",
    }


def _json_response(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", **(headers or {})},
        "body": json.dumps(body),
        "isBase64Encoded": False,
    }


#: The query parameters ``/mcp`` takes (module docstring).
QUERY_PARAMETERS = ("readOnly", "subscription", "resourceGroup")


def _arm_error(status: int, code: str, message: str, target: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if target is not None:
        error["target"] = target
    return _json_response(status, {"error": error})


def _query(event: dict[str, Any]) -> tuple[dict[str, str], dict[str, Any] | None]:
    """``(query, refusal)``: the query parameters, each given once and known, as ``{name: value}``; or the 400
    answer naming the first that is not (the API's own rule: ``itl_accelerator.api.query_rules``)."""
    from itl_accelerator.api.query_rules import query_refusal

    multi = event.get("multiValueQueryStringParameters") or {
        k: [v] for k, v in (event.get("queryStringParameters") or {}).items()
    }
    refused = query_refusal(((name, v) for name, values in multi.items() for v in values), QUERY_PARAMETERS)
    if refused is not None:
        return {}, _json_response(refused.status, refused.body())
    query = {name: values[0] for name, values in multi.items()}
    if "readOnly" in query and query["readOnly"].lower() not in ("true", "false"):
        message = "The query parameter 'readOnly' is 'true' or 'false'."
        return {}, _arm_error(400, "InvalidParameter", message, "readOnly")
    return query, None


def _body_refusal(event: dict[str, Any]) -> dict[str, Any] | None:
    """The API's answer to a body it would refuse (413 over ``MAX_BODY_BYTES``, 400 not strict JSON), or None."""
    raw = event.get("body") or ""
    try:
        data = base64.b64decode(raw, validate=True) if event.get("isBase64Encoded") else raw.encode()
    except (binascii.Error, ValueError):
        return _arm_error(400, "InvalidRequestContent", "The request body is not valid base64.")
    limit = settings().max_body_bytes
    if len(data) > limit:
        return _arm_error(413, "RequestEntityTooLarge", f"The request body exceeds the limit of {limit} bytes.")
    if not data:
        return None
    from itl_accelerator.api.json_input import parse_json_body
    from itl_accelerator.errors import ArmError

    try:
        parse_json_body(data)
    except ArmError as refused:
        return _json_response(refused.status, refused.body())
    return None


def _caller(event: dict[str, Any]) -> Caller | None:
    raw = ((event.get("requestContext") or {}).get("authorizer") or {}).get("principal")
    if not raw:
        return None
    try:
        return from_authorizer_context(raw)
    except (ValueError, KeyError, TypeError):
        return None


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """An API Gateway REST proxy event → its proxy result (see the module docstring). Every answer carries
    ``x-ms-request-id`` (API Gateway's request id), as every answer of the API does."""
    result = _handle(event, context)
    request_id = (event.get("requestContext") or {}).get("requestId")
    if request_id:
        result.setdefault("headers", {})
        result["headers"] = {**(result["headers"] or {}), "x-ms-request-id": request_id}
    return result


def _handle(event: dict[str, Any], context: Any) -> dict[str, Any]:
    path = event.get("resource") or event.get("path") or ""
    if path.startswith(METADATA_PATH):
        return _json_response(200, resource_metadata(event), {"Cache-Control": "max-age=3600"})
    caller = _caller(event)
    token = (_header(event, "Authorization") or "").partition(" ")[2].strip()
    if caller is None or not token:
        # Only reachable around API Gateway (its authorizer refuses such a request first)
        metadata_url = base_url(event) + METADATA_PATH + MCP_PATH
        return _json_response(
            401,
            {"error": {"code": "AuthenticationFailed", "message": "A valid bearer token is required."}},
            {"WWW-Authenticate": f'Bearer resource_metadata="{metadata_url}"'},
        )
    if (event.get("httpMethod") or "POST").upper() != "POST":
        # No standalone SSE stream (a GET held open would hold the function until its timeout) and no session to
        # end (DELETE): the spec's answer for both is 405
        return _json_response(
            405,
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "Method not allowed: POST only."}},
            {"Allow": "POST"},
        )
    query, refused = _query(event)
    refused = refused or _body_refusal(event)
    if refused is not None:
        return refused
    return _serve_mcp(event, context, caller, token, query)


def _serve_mcp(
    event: dict[str, Any], context: Any, caller: Caller, token: str, query: dict[str, str]
) -> dict[str, Any]:
    from mangum import Mangum
    from mcp.server.transport_security import TransportSecuritySettings

    from itl_accelerator_mcp.server import ServerOptions, build_server

    options = ServerOptions(
        read_only=settings().read_only or query.get("readOnly", "").lower() == "true",
        default_subscription=query.get("subscription") or None,
        default_resource_group=query.get("resourceGroup") or None,
        signer=quote_signer,
        ledger=quote_ledger,
    )
    loop = _ensure_event_loop()
    api = ApiClient(base_url(event), token, transport_name="http")
    try:
        server = build_server(api, caller, options)
        app = server.streamable_http_app(
            streamable_http_path=MCP_PATH,
            stateless_http=True,
            json_response=True,
            # API Gateway decides which hosts reach this function, and every request carries a bearer token: the
            # SDK's DNS-rebinding check (meant for servers on localhost) would refuse the API's own host name.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        return Mangum(app, lifespan="auto")(event, context)
    finally:
        loop.run_until_complete(api.aclose())
