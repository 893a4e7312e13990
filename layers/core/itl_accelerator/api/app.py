"""The FastAPI application factory.

The same routers serve three ways: each Lambda function builds an app holding only its own operation
(``operation_ids={"SparkNodes_Get"}``), the local API Gateway emulator calls those functions, and the full app
(every router) is the OpenAPI document of the API.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cache
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from itl_accelerator.api.protocol import ArmProtocolMiddleware
from itl_accelerator.api.routing import DeferredRouter
from itl_accelerator.arm import DEFAULT_API_VERSION
from itl_accelerator.errors import (
    ArmError,
    BadRequest,
    Conflict,
    InternalServerError,
    InvalidParameter,
    NotFound,
    invalid_content,
)
from itl_accelerator.repositories.dynamodb.codec import MAX_ITEM_BYTES
from itl_accelerator.repositories.errors import ItemTooLarge, StoreBusy
from itl_accelerator.settings import get_settings
from itl_accelerator.wiring import Wiring


def all_routers() -> tuple[APIRouter, ...]:
    """Every router of the API, in the order of the OpenAPI document (the full app: docs, the local runtime's
    tests). A Lambda function imports only its own router (functions/itl_functions/adapter.py)."""
    from itl_accelerator.api.routes import (
        billing_exports,
        budgets,
        capacity_reservations,
        costs,
        job_logs,
        offers,
        operations,
        provider,
        quotas,
        slo,
        spark_jobs,
        spark_nodes,
        spark_ollama_instances,
        usage_stats,
    )

    return (
        provider.router,
        spark_nodes.router,
        spark_ollama_instances.router,
        spark_jobs.router,
        job_logs.router,
        usage_stats.router,
        quotas.router,
        offers.router,
        costs.router,
        billing_exports.router,
        budgets.router,
        capacity_reservations.router,
        operations.router,
        slo.router,
    )


#: API Gateway answers an undeclared path or method with 404 NotFound before any function runs; a function's app
#: answers the same for what it does not serve.
_HTTP_ERRORS: dict[int, type[ArmError]] = {404: NotFound, 405: NotFound}


def _arm_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ArmError)
    return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers)


def _store_busy(request: Request, exc: Exception) -> JSONResponse:
    """A conflicting concurrent transaction or throttling: nothing was written; the client retries."""
    error = Conflict("The resource is being changed by another request right now; retry the request.")
    error.headers = {"Retry-After": "1"}
    return _arm_error(request, error)


def _item_too_large(request: Request, exc: Exception) -> JSONResponse:
    """A change whose stored form (the resource with its audit record) would exceed DynamoDB's item size: refused
    before anything was written."""
    assert isinstance(exc, ItemTooLarge)
    error = BadRequest(
        f"The request would store an item of about {exc.size // 1024} KiB, above the store's limit of "
        f"{MAX_ITEM_BYTES // 1024} KiB per item (DynamoDB's 400 KB, the resource and its audit record each): "
        "send less content."
    )
    return _arm_error(request, error)


def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errs = list(exc.errors())
    error = invalid_content(errs)
    where = errs[0].get("loc", ("",))[0] if errs else ""
    if where in _PARAMETER_KINDS:
        # a query parameter, path segment or header: InvalidParameter, its details too, and a message that names
        # it as what it is (not "the request content"); the target keeps its "query.$top" form
        details = [{**d, "code": InvalidParameter.code} for d in error.details]
        target = details[0]["target"]
        name = str(target).split(".", 1)[-1]
        message = f"The {_PARAMETER_KINDS[where]} '{name}' is not valid: {details[0]['message']}"
        error = InvalidParameter(message, target=target, details=details)
    return _arm_error(request, error)


#: Where a request's parameters are (FastAPI's ``loc`` first part) → how an error message names one.
_PARAMETER_KINDS = {"query": "query parameter", "path": "path segment", "header": "header"}


def _http_error(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own refusals (no such path or method inside a function's app) as ARM errors."""
    assert isinstance(exc, StarletteHTTPException)
    error_type = _HTTP_ERRORS.get(exc.status_code, BadRequest if exc.status_code < 500 else InternalServerError)
    return _arm_error(request, error_type(str(exc.detail)))


def build_app(
    wiring: Callable[[], Wiring] | None = None,
    *,
    operation_ids: Iterable[str] | None = None,
    routers: Iterable[APIRouter] | None = None,
    with_docs: bool = False,
) -> FastAPI:
    """Build the API.

    ``wiring``: zero-argument provider of the :class:`Wiring` (default: built from settings on first
    request and kept). ``routers``: where the routes come from (default: :func:`all_routers`; a Lambda function
    passes its own, so it imports no other). ``operation_ids``: keep only these routes (a Lambda function serves
    one operation); unknown ids raise ``ValueError``. ``with_docs``: serve ``/openapi.json`` (local runtime only).
    """
    settings = get_settings()
    app = FastAPI(
        title="ITL Accelerator Resource Provider",
        version=DEFAULT_API_VERSION,
        description=(
            "ARM resource provider `ITL.Accelerator`: sparkNodes (GPU nodes) and sparkOllamaInstances (Ollama LLM "
            "servers provisioned on the DGX Platform), with RBAC, tenancy and audit."
        ),
        openapi_url="/openapi.json" if with_docs else None,
        docs_url=None,
        redoc_url=None,
        redirect_slashes=False,  # API Gateway never redirects; a trailing slash is simply another path
    )
    wanted = set(operation_ids) if operation_ids is not None else None
    known: set[str] = set()
    for router in all_routers() if routers is None else routers:
        selected = APIRouter()
        if isinstance(router, DeferredRouter) and wanted is not None:
            known |= router.operation_ids
            selected.routes = list(router.routes_of(wanted))  # built now, and no other route of the router
        else:
            routes = [r for r in router.routes if isinstance(r, APIRoute)]
            known |= {r.operation_id for r in routes if r.operation_id}
            selected.routes = [r for r in routes if wanted is None or r.operation_id in wanted]
        if selected.routes:
            app.include_router(selected)
    if wanted is not None and not wanted <= known:
        raise ValueError(f"Unknown operation ids: {sorted(wanted - known)}")
    app.state.wiring = wiring or cache(lambda: Wiring.build(settings))
    app.add_exception_handler(ArmError, _arm_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StoreBusy, _store_busy)
    app.add_exception_handler(ItemTooLarge, _item_too_large)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_middleware(
        ArmProtocolMiddleware, max_body_bytes=settings.max_body_bytes, cors_allowed_origin=settings.cors_allowed_origin
    )
    app.openapi = lambda: openapi_document(app)  # type: ignore[method-assign]
    return app


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI 3.1 document: FastAPI's, with ARM's 400 in place of FastAPI's 422, and bearer auth declared."""
    if app.openapi_schema:
        return app.openapi_schema
    doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    for path in doc.get("paths", {}).values():
        for operation in path.values():
            operation.get("responses", {}).pop("422", None)
            operation["security"] = [{"bearer": []}]
    components = doc.setdefault("components", {})
    for name in ("HTTPValidationError", "ValidationError"):
        components.get("schemas", {}).pop(name, None)
    components["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}}
    app.openapi_schema = doc
    return doc
