"""ARM protocol concerns shared by every route, as one pure ASGI middleware.

- ``x-ms-request-id`` on every response; ``x-ms-correlation-request-id`` and ITL's ``X-Correlation-Id`` echoed
  (ARM_CONTRACT.md 23), both bound to the log context.
- ``api-version`` optional, unknown values refused (25).
- Bodies above ``MAX_BODY_BYTES`` refused with 413 before any parsing.
- Any unexpected exception → 500 ``InternalServerError`` with a fixed message (the stack trace goes to the log).
- Headers a route decided before it ran (the request rate limits' ``x-ms-ratelimit-remaining-*``, api/rate_limits.py,
  left in the scope's ``state``) on whatever response follows, errors included.
- CORS for the web portal: a request whose ``Origin`` is ``CORS_ALLOWED_ORIGIN`` gets ``Access-Control-Allow-Origin``
  and the headers a browser must let the portal read (``Location``, ``Azure-AsyncOperation``, ``ETag``, ...).
  API Gateway answers the preflight itself (template.yaml's ``Cors``): with Lambda proxy integrations the function
  must add the header to every real response.
"""

from __future__ import annotations

import json
import uuid
from urllib.parse import parse_qs, quote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from itl_accelerator.arm import validate_api_version
from itl_accelerator.errors import ArmError, InternalServerError, RequestTooLarge
from itl_accelerator.observability import logger

REQUEST_ID = "x-ms-request-id"
CORRELATION_ID = "x-ms-correlation-request-id"
ITL_CORRELATION_ID = "x-correlation-id"


#: Key in the ASGI scope's ``state`` of headers decided before a route ran (api/rate_limits.py); every response to
#: the request carries them, errors included.
RESPONSE_HEADERS = "arm_response_headers"

#: Response headers the portal reads across origins (a browser hides all but the CORS-safelisted ones otherwise).
CORS_EXPOSED_HEADERS = (
    "Location, Azure-AsyncOperation, Retry-After, ETag, x-ms-request-id, x-ms-correlation-request-id, X-Correlation-Id, "
    "x-ms-ratelimit-remaining-subscription-reads, x-ms-ratelimit-remaining-subscription-writes, "
    "x-ms-ratelimit-remaining-subscription-global-reads, x-ms-ratelimit-remaining-subscription-global-writes"
)


def cors_headers(origin: str | None, allowed_origin: str) -> list[tuple[bytes, bytes]]:
    """CORS response headers for a request from ``origin`` (its ``Origin`` header) when it is ``allowed_origin``
    (compared without case and a trailing slash); none otherwise, and none when ``allowed_origin`` is empty."""
    if not origin or not allowed_origin or origin.rstrip("/").lower() != allowed_origin.rstrip("/").lower():
        return []
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-expose-headers", CORS_EXPOSED_HEADERS.encode()),
        (b"vary", b"Origin"),
    ]


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            text: str = value.decode("latin-1")
            return text
    return None


#: Correlation ids are GUIDs in ARM; anything longer is cut so a client cannot bloat logs and audit items.
MAX_CORRELATION_ID_LENGTH = 128
#: Printable ASCII: what a correlation id may hold as echoed; anything else is percent-encoded (UTF-8).
_HEADER_SAFE = "".join(chr(c) for c in range(0x20, 0x7F) if chr(c) != "%")


def _bounded(value: str | None) -> str | None:
    """A correlation id as it is echoed, logged and audited: at most 128 characters of the id as sent (read as
    UTF-8), then anything outside printable ASCII percent-encoded. Cut before encoding, never after, so a
    multi-byte character is never split and the echoed header is always valid (a split one made the gateway
    answer 502 after the write had been stored)."""
    if not value:
        return value
    text = value.encode("latin-1").decode("utf-8", errors="replace")[:MAX_CORRELATION_ID_LENGTH]
    return quote(text, safe=_HEADER_SAFE)


class ArmProtocolMiddleware:
    """See module docstring. ``max_body_bytes`` bounds request bodies (bytes)."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, cors_allowed_origin: str = ""):
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.cors_allowed_origin = cors_allowed_origin

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        event = scope.get("aws.event") or {}
        request_id = (event.get("requestContext") or {}).get("requestId") or str(uuid.uuid4())
        itl_correlation = _bounded(_header(scope, b"x-correlation-id"))
        correlation = _bounded(_header(scope, CORRELATION_ID.encode())) or itl_correlation or request_id
        state = scope.setdefault("state", {})
        state["request_id"], state["correlation_id"] = request_id, correlation
        logger.append_keys(request_id=request_id, correlation_id=correlation)
        extra = [(REQUEST_ID.encode(), request_id.encode()), (CORRELATION_ID.encode(), correlation.encode("ascii"))]
        if itl_correlation is not None:
            extra.append((b"X-Correlation-Id", itl_correlation.encode("ascii")))
        extra += cors_headers(_header(scope, b"origin"), self.cors_allowed_origin)
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                decided = state.get(RESPONSE_HEADERS) or []  # the rate limits' (api/rate_limits.py), if counted
                message = {**message, "headers": [*message.get("headers", []), *extra, *decided]}
            await send(message)

        async def fail(error: ArmError) -> None:
            body = json.dumps(error.body()).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            headers += [(k.encode(), v.encode()) for k, v in error.headers.items()]
            await send_with_headers({"type": "http.response.start", "status": error.status, "headers": headers})
            await send_with_headers({"type": "http.response.body", "body": body})

        try:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
            versions = query.get("api-version")
            validate_api_version(versions[-1] if versions else None)
            declared = _header(scope, b"content-length")
            if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
                raise self._too_large()
            body = await self._read_body(receive)
            if body:
                scope = self._as_json(scope)
        except ArmError as error:
            await fail(error)
            return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        try:
            await self.app(scope, replay, send_with_headers)
        except Exception:  # noqa: BLE001 - the last line of defence: no stack trace ever reaches a caller
            logger.exception("Unhandled error")
            if not started:
                await fail(InternalServerError("The server encountered an internal error. Retry the request later."))
        finally:
            logger.remove_keys(["request_id", "correlation_id"])

    @staticmethod
    def _as_json(scope: Scope) -> Scope:
        """ARM bodies are always JSON: a body sent without a content type, or with curl's default
        ``application/x-www-form-urlencoded``, is read as ``application/json``."""
        content_type = (_header(scope, b"content-type") or "").split(";")[0].strip().lower()
        if content_type in ("", "application/x-www-form-urlencoded", "text/plain"):
            headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != b"content-type"]
            return {**scope, "headers": [*headers, (b"content-type", b"application/json")]}
        return scope

    def _too_large(self) -> RequestTooLarge:
        return RequestTooLarge(f"The request body exceeds the limit of {self.max_body_bytes} bytes.")

    async def _read_body(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)
