"""The order every request with a body is judged in: authenticate → count → authorise → validate → apply.

API Gateway's authorizer has authenticated the caller before a function runs. FastAPI would then read and validate
the body before anything else, so a consumer sending an invalid body to a write it may not make would learn about
its body (400) instead of its permission (403) — ARM answers 403 before the provider ever sees the request.
:class:`ArmRoute` (the route class of every router) puts the permission check first:

0. :class:`ArmRoute` counts the request against its subscription's and its caller's rate limits
   (:mod:`itl_accelerator.api.rate_limits`): over one, 429 ``TooManyRequests`` and nothing else happens;
1. the route declares the permissions it needs with :func:`requires` (also written into the OpenAPI document as
   ``x-itl-permissions``);
2. :class:`ArmRoute` checks them — scope (404, existence not leaked), then role (403, audited) — before the body is
   read, with the resource id taken from the request path, and hands the service a context holding the checks it
   made (the service's own check of the same permission is answered from them: once a request);
3. a query parameter the route does not declare, or one given twice (``?hours=1&hours=2``: which one would count?),
   is refused (400 ``InvalidParameter`` naming it): a misspelt filter (``?submitedBy=``) must not silently answer as
   if it were absent;
4. the body is parsed strictly (:mod:`itl_accelerator.api.json_input`), then validated by the route's pydantic
   model, then the service applies the change (with its own finer checks, e.g. a supplier's node ownership).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import Any

from fastapi.concurrency import run_in_threadpool
from fastapi.routing import APIRoute, APIRouter
from starlette.requests import Request
from starlette.responses import Response

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.api.deps import get_context, get_wiring, remember_context
from itl_accelerator.api.json_input import parse_json_body
from itl_accelerator.api.query_rules import query_refusal
from itl_accelerator.api.rate_limits import count_request
from itl_accelerator.arm import validate_resource_group, validate_resource_name, validate_subscription_id
from itl_accelerator.auth import rbac
from itl_accelerator.auth.rbac import Permission

PERMISSIONS_KEY = "x-itl-permissions"
SCOPE_KEY = "x-itl-scope"
_PARAM = re.compile(r"\{(\w+)\}")


class DeferredRouter(APIRouter):
    """An :class:`APIRouter` that builds each route when it is first needed, not when it is declared: FastAPI analyses
    a route's signature and models as it is added (about 6 ms a route here), and a Lambda function serves one
    operation of a router declaring up to eight (docs/ARCHITECTURE.md, "Cold start"). ``routes`` builds them all, in
    the order declared (the local server, the OpenAPI document, the generator); :meth:`routes_of` only those of the
    operation ids asked for (a function's app). Takes :class:`APIRouter`'s arguments."""

    def __init__(self, **settings: Any) -> None:
        self._settings = settings
        self._declared: list[tuple[str, Callable[..., Any], dict[str, Any]]] = []
        self._built: dict[int, APIRoute] = {}
        super().__init__(**settings)

    @property
    def routes(self) -> list[Any]:
        """Every route, built: the declared ones in their order, after any added otherwise."""
        self._build(range(len(self._declared)))
        return self._routes

    @routes.setter
    def routes(self, value: list[Any]) -> None:
        self._routes = value

    def add_api_route(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        """Declare the route (FastAPI's decorators call this); it is built by :attr:`routes` or :meth:`routes_of`."""
        self._declared.append((path, endpoint, kwargs))

    @property
    def operation_ids(self) -> set[str]:
        """The operation id of every declared route (none is built)."""
        return {str(kwargs["operation_id"]) for _, _, kwargs in self._declared if kwargs.get("operation_id")}

    def routes_of(self, operation_ids: set[str]) -> list[APIRoute]:
        """The routes of ``operation_ids``, built (and only they), in the order declared."""
        wanted = [i for i, (_, _, kwargs) in enumerate(self._declared) if kwargs.get("operation_id") in operation_ids]
        self._build(wanted)
        return [self._built[i] for i in wanted]

    def _build(self, indexes: range | list[int]) -> None:
        new = [i for i in indexes if i not in self._built]
        if not new:
            return
        for i in new:
            path, endpoint, kwargs = self._declared[i]
            scratch = APIRouter(**self._settings)  # FastAPI's own add_api_route, with this router's settings
            APIRouter.add_api_route(scratch, path, endpoint, **kwargs)
            route = scratch.routes[-1]
            assert isinstance(route, APIRoute)
            self._built[i] = route
        built = set(map(id, self._built.values()))
        others = [route for route in self._routes if id(route) not in built]
        self._routes = others + [self._built[i] for i in sorted(self._built)]


def requires(*actions: Permission, scope: str = "resource") -> dict[str, Any]:
    """``openapi_extra`` of a route that needs any one of ``actions``. ``scope`` ``"resource"``: the caller must
    see the path's subscription (and resource group, when the path has one); ``"subscription"``: it must hold the
    whole subscription (registration, audit)."""
    if scope not in ("resource", "subscription"):
        raise ValueError(f"unknown scope {scope!r}")
    return {PERMISSIONS_KEY: [a.name for a in actions], SCOPE_KEY: scope}


def resource_of_path(path: str) -> tuple[str, str | None]:
    """``(resource type, name parameter)`` of a route path: the ``ITL.Accelerator`` type segments after
    ``providers/``, and the parameter naming the leaf (None for a collection); an action's path names the resource
    it acts on (``.../sparkJobs/{jobName}/cancel`` → ``ITL.Accelerator/sparkJobs``, ``jobName``).
    ``/subscriptions/{subscriptionId}`` → ``("subscriptions", "subscriptionId")``."""
    _, sep, tail = path.partition(f"/providers/{PROVIDER_NAMESPACE}/")
    if not sep:
        return "subscriptions", "subscriptionId"
    parts = tail.split("/")
    if len(parts) >= 2 and not _PARAM.fullmatch(parts[-1]) and _PARAM.fullmatch(parts[-2]):
        parts = parts[:-1]  # an action (``.../sparkJobs/{jobName}/cancel``) is on the resource it names
    types = [p for p in parts if not _PARAM.fullmatch(p)]
    leaf = _PARAM.fullmatch(parts[-1])
    return f"{PROVIDER_NAMESPACE}/{'/'.join(types)}", leaf.group(1) if leaf else None


class ArmRoute(APIRoute):
    """An :class:`APIRoute` that authorises before the body is read and parses bodies strictly (module doc)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        extra = self.openapi_extra or {}
        actions = tuple(rbac.BY_NAME[name] for name in extra.get(PERMISSIONS_KEY, ()))
        scope = extra.get(SCOPE_KEY, "resource")
        resource_type, name_param = resource_of_path(self.path)
        path = self.path
        known = _query_names(self.dependant)
        counted = "{subscriptionId}" in path

        async def guarded(request: Request) -> Response:
            if counted:
                await run_in_threadpool(count_request, request)
            if actions:
                await run_in_threadpool(_authorize, request, actions, scope, path, resource_type, name_param)
            refused = query_refusal(request.query_params.multi_items(), known)
            if refused is not None:
                raise refused
            body = await request.body()
            if body:
                parse_json_body(body)
            return await handler(request)

        return guarded


def _query_names(dependant: Any) -> frozenset[str]:
    """The query parameters a route declares, its dependencies' included (their wire names, aliases)."""
    names: set[str] = set()
    stack = [dependant]
    while stack:
        current = stack.pop()
        names.update(param.alias for param in current.query_params)
        stack.extend(current.dependencies)
    return frozenset(names)


def _authorize(
    request: Request,
    actions: tuple[Permission, ...],
    scope: str,
    path: str,
    resource_type: str,
    name_param: str | None,
) -> None:
    params = request.path_params
    subscription_id = validate_subscription_id(params["subscriptionId"])
    for param, value in params.items():
        if param == "resourceGroupName":
            validate_resource_group(value)
        elif param.endswith("Name"):
            validate_resource_name(value, target=param)
    ctx = get_context(request)
    access = get_wiring(request).access
    if scope == "subscription":
        made = access.require_subscription(ctx, subscription_id, actions[0])
    else:
        from itl_accelerator.services.common.access import Target  # built with the wiring's Access: no extra import

        resource_id = _PARAM.sub(lambda m: params.get(m.group(1), m.group(0)), path)
        made = access.require_any(
            ctx,
            actions,
            Target(
                subscription_id=subscription_id,
                resource_group=params.get("resourceGroupName"),
                resource_id=resource_id,
                resource_type=resource_type,
                resource_name=params[name_param] if name_param else "*",
            ),
        )
    # the service's own check of this permission passes on it: one check a request (services/common/access.py)
    remember_context(request, replace(ctx, checked=ctx.checked.union(made)))
