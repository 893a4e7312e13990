"""API Gateway (REST API, Lambda proxy) emulator, driven by template.yaml.

For each request: match a route declared in the template (else the MISSING_AUTHENTICATION_TOKEN gateway
response), run the REQUEST authorizer on the identity headers (UNAUTHORIZED / ACCESS_DENIED /
AUTHORIZER_FAILURE gateway responses), build the REST proxy event with ``requestContext.authorizer`` filled,
call the function's real handler, and turn its proxy result into the HTTP response. Gateway responses are
rendered from the template's ``GatewayResponses`` (headers and the ``application/json`` template). The API's
``Cors`` settings are honoured as API Gateway's generated ``OPTIONS`` methods answer them: a preflight to any declared
path is answered by the gateway itself (200, no authorizer, no function) with the configured
``Access-Control-Allow-*`` headers. The stage's throttling (the ``MethodSettings`` rate and burst) is enforced as
API Gateway does, with a token bucket over every request before anything else (the THROTTLED gateway response).
Given a :class:`~itl_local.console.Console`, each request is reported on it in one line once answered. Every
request answered is appended to the request log (``API_REQUEST_LOG``, when set): one JSON object a line,
``{"t": epoch seconds, "status": HTTP status, "ms": latency}`` — the local stand-in for API Gateway's
``Count``/``5XXError``/``Latency`` metrics, which the SLO report reads (itl_accelerator/api_metrics.py). And every
request answered — by a function, the authorizer, the throttle or the gateway itself — gets the stage's *access log*
line, rendered from the template's ``AccessLogSetting.Format`` with the ``$context`` values this emulator knows (the
others ``-``, as API Gateway writes a missing value), appended to ``API_ACCESS_LOG`` when set (``./dev up``: the
local home's ``api-access-{port}.jsonl``) and, with ``./dev up --access-log``, printed in place of the console's
request line: the line a deployed stack writes to its access log group.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import os
import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from itl_accelerator.observability import logger
from itl_local.console import Console
from itl_local.lambda_runtime import invocation_pool, invoke
from itl_local.template import Route, Template, Unresolvable, load_handler

#: API Gateway's own limit on payloads (bytes).
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024
#: API Gateway (REST) ends an integration that has not answered within 29 s with 504 INTEGRATION_TIMEOUT.
INTEGRATION_TIMEOUT_SECONDS = 29.0
_DEFAULT_STATUS = {
    "UNAUTHORIZED": 401,
    "ACCESS_DENIED": 403,
    "MISSING_AUTHENTICATION_TOKEN": 403,
    "REQUEST_TOO_LARGE": 413,
    "THROTTLED": 429,
    "AUTHORIZER_FAILURE": 500,
    "INTEGRATION_TIMEOUT": 504,
    "DEFAULT_4XX": 400,
    "DEFAULT_5XX": 502,
}


class TokenBucket:
    """API Gateway's throttling algorithm: a bucket of ``burst`` tokens (requests at once), refilled at ``rate``
    tokens per second up to ``burst``; each request takes one, and a request finding none is throttled.
    ``clock`` is monotonic seconds. Thread-safe (the emulator serves requests concurrently)."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self._clock = rate, burst, clock
        self._tokens = float(burst)
        self._at = clock()
        self._lock = threading.Lock()

    def take(self) -> bool:
        """Take a token: True when there was one (the request passes), False when throttled."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens < 1:
                return False
            self._tokens -= 1
            return True


class RequestLog:
    """Appends one line per request to ``path`` (module docstring); safe across threads and emulators of one process."""

    _locks: dict[Path, threading.Lock] = {}
    _guard = threading.Lock()

    def __init__(self, path: str | Path):
        self.path = Path(path).resolve()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with RequestLog._guard:
            self._lock = RequestLog._locks.setdefault(self.path, threading.Lock())

    def record(self, status: int, duration_ms: float, at: float | None = None) -> None:
        """Append ``{"t": at (epoch seconds, default now), "status": status, "ms": duration_ms}`` as one line."""
        self.append(
            json.dumps(
                {"t": round(time.time() if at is None else at, 3), "status": status, "ms": round(duration_ms, 1)}
            )
        )

    def append(self, line: str) -> None:
        """Append ``line`` (one line of JSON)."""
        with self._lock, self.path.open("a") as out:
            out.write(line + "\n")


class AccessLog:
    """The stage's access log (module docstring): ``fmt`` is ``AccessLogSetting.Format``, ``path`` where lines go
    (none: rendered only). Thread-safe."""

    VARIABLE = re.compile(r"\$context\.([A-Za-z0-9_.]+)")

    def __init__(self, fmt: str, path: str | Path | None):
        self.fmt = fmt
        self.log = RequestLog(path) if path else None

    def line(self, values: dict[str, str]) -> str:
        """``fmt`` with each ``$context.name`` replaced by ``values[name]`` (JSON-escaped: it sits in a JSON string),
        ``-`` for a value not known or empty."""

        def value(match: re.Match[str]) -> str:
            found = values.get(match.group(1))
            return "-" if found in (None, "") else json.dumps(str(found))[1:-1]

        return self.VARIABLE.sub(value, self.fmt)

    def write(self, line: str) -> None:
        if self.log is not None:
            self.log.append(line)


def _request_time(at: float) -> str:
    """``$context.requestTime``: the CLF-formatted time (``04/Dec/2026:17:40:00 +0000``)."""
    return time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(at))


def _accepts_gzip(accept_encoding: str) -> bool:
    """Whether an ``Accept-Encoding`` header (RFC 9110 §12.5.3) allows gzip: named, or ``*``, with a q above 0."""
    allowed = {}
    for part in accept_encoding.split(","):
        name, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if name:
            allowed[name.strip().lower()] = q
    return allowed.get("gzip", allowed.get("x-gzip", allowed.get("*", 0.0))) > 0


class ApiGatewayEmulator:
    """An ASGI app serving ``template``'s API. ``stage`` appears in ``requestContext.stage`` only: paths are
    served at the root, as behind a custom domain. ``throttle``: enforce the stage's throttling (tests that send
    bursts by design turn it off; ``clock``, monotonic seconds, is the bucket's)."""

    def __init__(
        self,
        template: Template,
        *,
        stage: str = "local",
        pool: ThreadPoolExecutor | None = None,
        console: Console | None = None,
        throttle: bool = True,
        clock: Callable[[], float] = time.monotonic,
        request_log: str | Path | None = None,
        access_log: str | Path | None = None,
        access_lines: bool = False,
    ):
        """``request_log``: where the request log goes (default: ``API_REQUEST_LOG``; none when empty);
        ``access_log``: where the access log goes (default: ``API_ACCESS_LOG``; none when empty); ``access_lines``:
        the console shows each request's access log line in place of its request line."""
        self.template = template
        self.console = console
        if request_log is None:
            from itl_accelerator.settings import get_settings

            request_log = get_settings().api_request_log or None
        self.request_log = RequestLog(request_log) if request_log else None
        access_format = template.api_access_log_format()
        if access_log is None:
            access_log = os.environ.get("API_ACCESS_LOG") or None
        self.access_log = AccessLog(access_format, access_log) if access_format else None
        self.access_lines = access_lines and self.access_log is not None
        self.stage = stage
        throttling = template.api_throttling() if throttle else None
        self.bucket = TokenBucket(*throttling, clock=clock) if throttling else None
        self.compress_from = template.api_minimum_compression_size()
        self.routes = template.routes
        self.responses = template.gateway_responses()
        self.identity_headers = [h.lower() for h in template.authorizer_identity_headers()]
        try:
            self.cors = template.api_cors()
        except Unresolvable as exc:
            logger.warning(
                "The API's CORS origin is known only once deployed: no CORS locally", extra={"why": str(exc)}
            )
            self.cors = None
        self.authorizer = load_handler(template.authorizer_handler())
        self.handlers = {r.function_id: load_handler(r.handler) for r in self.routes}
        self.pool = pool or invocation_pool()

    # ----------------------------------------------------------------------------------------------- ASGI
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            message = await receive()
            while message["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
                message = await receive()
            await send({"type": "lifespan.shutdown.complete"})
            return
        request = Request(scope, receive)
        started, at = time.perf_counter(), time.time()
        trace: dict[str, str] = {}
        response = self.compressed(request, await self.handle(request, trace))
        duration_ms = (time.perf_counter() - started) * 1000
        if self.request_log is not None:
            self.request_log.record(response.status_code, duration_ms)
        access = self._access_line(request, response, trace, at, duration_ms) if self.access_log else None
        if access is not None and self.access_log is not None:
            self.access_log.write(access)
        if self.console is not None:
            if self.access_lines and access is not None:
                self.console.write(access)
            else:
                self._report(request, response, duration_ms)
        await response(scope, receive, send)

    def _access_line(
        self, request: Request, response: Response, trace: dict[str, str], at: float, duration_ms: float
    ) -> str:
        """The request's access log line: the ``$context`` values API Gateway would log for it."""
        assert self.access_log is not None
        error_type = response.headers.get("x-amzn-ErrorType", "")
        error_message = ""
        if error_type:
            try:
                body = json.loads(bytes(response.body))
                error_message = str((body.get("error") or {}).get("message") or body.get("message") or "")
            except (ValueError, AttributeError):
                error_message = ""
        values = {
            **trace,
            "extendedRequestId": trace.get("requestId", ""),
            "requestTime": _request_time(at),
            "requestTimeEpoch": str(int(at * 1000)),
            "httpMethod": request.method,
            "path": request.url.path,
            "protocol": f"HTTP/{request.scope.get('http_version', '1.1')}",
            "status": str(response.status_code),
            "responseLength": response.headers.get("content-length", str(len(response.body))),
            "responseLatency": str(round(duration_ms)),
            "error.responseType": error_type,
            "error.message": error_message,
            "identity.sourceIp": request.client.host if request.client else "",
            "identity.userAgent": request.headers.get("user-agent", ""),
            "stage": self.stage,
        }
        return self.access_log.line(values)

    def _report(self, request: Request, response: Response, duration_ms: float) -> None:
        assert self.console is not None
        route, _ = self._match(request.method, request.url.path)
        self.console.request(
            request.method,
            request.url.path,
            response.status_code,
            route.function_id if route else None,
            duration_ms,
            response.headers.get("x-amzn-RequestId"),
            response.headers.get("x-amzn-ErrorType"),
        )

    async def handle(self, request: Request, trace: dict[str, str] | None = None) -> Response:
        """One request through stage throttling → route match → authorizer → function. ``trace`` receives the
        ``$context`` values of the access log it learns on the way (request id, route, principal, integration)."""
        trace = {} if trace is None else trace
        request_id = str(uuid.uuid4())
        trace["requestId"] = request_id
        if self.bucket is not None and not self.bucket.take():
            return self.gateway_response("THROTTLED", request_id, request)
        body = await request.body()
        if len(body) > MAX_PAYLOAD_BYTES:
            return self.gateway_response("REQUEST_TOO_LARGE", request_id, request)
        route, params = self._match(request.method, request.url.path)
        if request.method == "OPTIONS" and self.cors is not None and (route is None or route.greedy):
            # SAM adds a mock OPTIONS method to every path for the API's Cors, the catch-all's included: a preflight
            # never reaches a function (an explicit OPTIONS route of a function would)
            if self._declared(request.url.path):
                return self.preflight(request_id)
        if route is None:
            return self.gateway_response("MISSING_AUTHENTICATION_TOKEN", request_id, request)
        trace["resourcePath"] = route.path
        event = self._proxy_event(request, route, params, body, request_id)
        loop = asyncio.get_running_loop()
        if route.authorized:
            headers = {k.lower() for k in request.headers}
            if any(h not in headers for h in self.identity_headers):
                return self.gateway_response("UNAUTHORIZED", request_id, request)
            outcome = await loop.run_in_executor(self.pool, self._authorize, event, trace)
            if isinstance(outcome, str):
                return self.gateway_response(outcome, request_id, request)
            event["requestContext"]["authorizer"] = outcome
            trace["authorizer.principalId"] = str(outcome.get("principalId") or "")
        handler = self.handlers[route.function_id]
        called = time.perf_counter()
        try:
            result = await asyncio.wait_for(
                loop.run_in_executor(self.pool, invoke, handler, event, route.function_id), INTEGRATION_TIMEOUT_SECONDS
            )
        except TimeoutError:
            logger.error("Function timed out at the gateway", extra={"function": route.function_id})
            trace["integration.error"] = "Execution failed due to a timeout error"
            return self.gateway_response("INTEGRATION_TIMEOUT", request_id, request)
        except Exception as exc:  # noqa: BLE001 - a crashed function is API Gateway's 502, never the emulator's crash
            logger.exception("Function failed", extra={"function": route.function_id})
            trace["integration.error"] = type(exc).__name__
            return self.gateway_response("DEFAULT_5XX", request_id, request)
        finally:
            trace["integrationLatency"] = str(round((time.perf_counter() - called) * 1000))
        if isinstance(result, dict) and "statusCode" in result:
            trace["integrationStatus"] = str(result["statusCode"])
        return self._to_response(result, request_id)

    def compressed(self, request: Request, response: Response) -> Response:
        """``response`` gzip-encoded, as API Gateway's ``MinimumCompressionSize`` does: when the client's
        ``Accept-Encoding`` allows gzip and the body is at least that many bytes (and not already encoded); the
        response then says ``Content-Encoding: gzip`` and ``Vary: Accept-Encoding``."""
        if self.compress_from is None or "content-encoding" in response.headers:
            return response
        if len(response.body) < self.compress_from or not _accepts_gzip(request.headers.get("accept-encoding", "")):
            return response
        body = gzip.compress(response.body, compresslevel=6)
        response.body = body
        response.headers["content-length"] = str(len(body))
        response.headers["content-encoding"] = "gzip"
        response.headers.append("vary", "Accept-Encoding")
        return response

    # ----------------------------------------------------------------------------------------------- steps
    def _match(self, method: str, path: str) -> tuple[Route | None, dict[str, str]]:
        for route in self.routes:
            params = route.match(path)
            if params is not None and route.method in (method, "ANY"):
                return route, params
        return None, {}

    def _declared(self, path: str) -> bool:
        return any(route.match(path) is not None for route in self.routes)

    def preflight(self, request_id: str) -> Response:
        """The CORS preflight answer of the OPTIONS method SAM adds to every path for the API's ``Cors``: the
        configured values, whatever the request's origin (the browser compares them)."""
        assert self.cors is not None
        response = Response(status_code=200, media_type="application/json")
        names = {
            "AllowOrigin": "Access-Control-Allow-Origin",
            "AllowMethods": "Access-Control-Allow-Methods",
            "AllowHeaders": "Access-Control-Allow-Headers",
            "MaxAge": "Access-Control-Max-Age",
            "AllowCredentials": "Access-Control-Allow-Credentials",
        }
        for key, header in names.items():
            if self.cors.get(key) not in (None, "", "false"):
                response.headers[header] = self.cors[key]
        response.headers["x-amzn-RequestId"] = request_id
        return response

    def _proxy_event(
        self, request: Request, route: Route, params: dict[str, str], body: bytes, request_id: str
    ) -> dict[str, Any]:
        multi_headers: dict[str, list[str]] = defaultdict(list)
        for key, value in request.headers.raw:
            # API Gateway hands header values to Lambda as (JSON) text decoded from UTF-8
            multi_headers[key.decode("latin-1").title()].append(value.decode("utf-8", errors="replace"))
        multi_query: dict[str, list[str]] = defaultdict(list)
        for name, text_value in parse_qsl(request.url.query, keep_blank_values=True):
            multi_query[name].append(text_value)
        try:
            text, is_b64 = body.decode("utf-8"), False
        except UnicodeDecodeError:
            text, is_b64 = base64.b64encode(body).decode(), True
        source_ip = request.client.host if request.client else "127.0.0.1"
        return {
            "resource": route.path,
            "path": request.url.path,
            "httpMethod": request.method,
            "headers": {k: v[-1] for k, v in multi_headers.items()} | {"X-Forwarded-Proto": request.url.scheme},
            "multiValueHeaders": dict(multi_headers),
            "queryStringParameters": {k: v[-1] for k, v in multi_query.items()} or None,
            "multiValueQueryStringParameters": dict(multi_query) or None,
            "pathParameters": params or None,
            "stageVariables": None,
            "requestContext": {
                "resourcePath": route.path,
                "httpMethod": request.method,
                "path": request.url.path,
                "accountId": "123456789012",
                "apiId": "local",
                "stage": self.stage,
                "requestId": request_id,
                "requestTimeEpoch": int(time.time() * 1000),
                "domainName": request.url.netloc,
                "protocol": "HTTP/1.1",
                "identity": {"sourceIp": source_ip, "userAgent": request.headers.get("user-agent")},
            },
            "body": text if body else None,
            "isBase64Encoded": is_b64,
        }

    def _authorize(self, event: dict[str, Any], trace: dict[str, str] | None = None) -> dict[str, Any] | str:
        """Run the REQUEST authorizer; the authorizer context on Allow, else the gateway response type (``trace``
        gets the principal of a Deny and the error of a failure, as the access log shows them)."""
        trace = {} if trace is None else trace
        auth_event = {
            "type": "REQUEST",
            "methodArn": f"arn:aws:execute-api:us-east-1:123456789012:local/{self.stage}/{event['httpMethod']}{event['path']}",
            **{
                k: event[k]
                for k in (
                    "resource",
                    "path",
                    "httpMethod",
                    "headers",
                    "multiValueHeaders",
                    "queryStringParameters",
                    "multiValueQueryStringParameters",
                    "pathParameters",
                    "stageVariables",
                    "requestContext",
                )
            },
        }
        try:
            policy = invoke(self.authorizer, auth_event, "AuthorizerFunction")
        except Exception as exc:  # noqa: BLE001 - API Gateway maps authorizer errors to gateway responses
            trace["authorizer.error"] = str(exc)
            if str(exc) == "Unauthorized":
                return "UNAUTHORIZED"
            logger.exception("Authorizer failed", extra={"function": "AuthorizerFunction"})
            return "AUTHORIZER_FAILURE"
        statements = (policy.get("policyDocument") or {}).get("Statement") or []
        if not statements or any(s.get("Effect") != "Allow" for s in statements):
            trace["authorizer.principalId"] = str(policy.get("principalId") or "")
            return "ACCESS_DENIED"
        return {**(policy.get("context") or {}), "principalId": policy.get("principalId")}

    def _to_response(self, result: dict[str, Any], request_id: str) -> Response:
        if not isinstance(result, dict) or "statusCode" not in result:
            return Response(status_code=502, content=b'{"message": "Internal server error"}')
        body = result.get("body") or ""
        content = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
        response = Response(content=content, status_code=int(result["statusCode"]))
        for key, value in (result.get("headers") or {}).items():
            response.headers[key] = str(value)
        for key, values in (result.get("multiValueHeaders") or {}).items():
            for value in values:
                response.headers.append(key, str(value))
        response.headers["x-amzn-RequestId"] = request_id
        return response

    def gateway_response(self, kind: str, request_id: str, request: Request) -> Response:
        """Render a gateway response of ``kind`` from the template (falling back to DEFAULT_4XX/5XX)."""
        status = _DEFAULT_STATUS.get(kind, 500)
        spec = self.responses.get(kind) or self.responses.get("DEFAULT_5XX" if status >= 500 else "DEFAULT_4XX") or {}
        status = int(spec.get("StatusCode", status))
        template = (spec.get("ResponseTemplates") or {}).get("application/json") or json.dumps({"message": kind})
        body = template.replace("$context.requestId", request_id)
        response = Response(content=body.encode(), status_code=status, media_type="application/json")
        for name, expr in ((spec.get("ResponseParameters") or {}).get("Headers") or {}).items():
            # intrinsics resolved locally: the API's public URL is this emulator's own (an !If on PublicApiUrl)
            public = f"{request.url.scheme}://{request.url.netloc}"
            try:
                value = self.template.resolve(expr, {"PublicApiUrl": public})
            except Unresolvable:
                continue  # e.g. the portal distribution's domain: known once deployed
            response.headers[name] = self._header_value(str(value), request_id, request)
        response.headers["x-amzn-RequestId"] = request_id
        response.headers["x-amzn-ErrorType"] = kind
        return response

    @staticmethod
    def _header_value(expr: str, request_id: str, request: Request) -> str:
        if expr.startswith("'") and expr.endswith("'"):
            return expr[1:-1]
        if expr == "context.requestId":
            return request_id
        if expr.startswith("method.request.header."):
            return request.headers.get(expr.removeprefix("method.request.header."), "")
        return ""
