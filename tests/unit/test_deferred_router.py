"""A Lambda function's app builds the route of its own operation and no other of its router (api/routing.py
``DeferredRouter``): FastAPI analyses a route as it is built, about 6 ms each, and a router declares up to eight."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.routing import APIRoute
from starlette.testclient import TestClient

from itl_accelerator.api.app import build_app
from itl_accelerator.api.routing import DeferredRouter

BUILT: list[str] = []


class CountingRoute(APIRoute):
    def __init__(self, path: str, endpoint: Any, **kwargs: Any) -> None:
        BUILT.append(str(kwargs.get("operation_id")))
        super().__init__(path, endpoint, **kwargs)


def router() -> DeferredRouter:
    routes = DeferredRouter(tags=["things"], route_class=CountingRoute)

    @routes.get("/things/{name}", operation_id="Things_Get")
    def get(name: str) -> dict[str, str]:
        return {"got": name}

    @routes.put("/things/{name}", operation_id="Things_Put")
    def put(name: str) -> dict[str, str]:
        return {"put": name}

    @routes.get("/things", operation_id="Things_List")
    def list_things() -> dict[str, list[str]]:
        return {"value": []}

    return routes


@pytest.fixture(autouse=True)
def counted() -> None:
    BUILT.clear()


def test_declaring_routes_builds_none() -> None:
    routes = router()
    assert BUILT == []
    assert routes.operation_ids == {"Things_Get", "Things_Put", "Things_List"}


def test_a_functions_app_builds_only_its_operation_and_serves_it() -> None:
    routes = router()
    app = build_app(operation_ids={"Things_Put"}, routers=[routes])
    assert BUILT == ["Things_Put"]
    with TestClient(app) as client:
        assert client.put("/things/a").json() == {"put": "a"}
        assert client.get("/things/a").status_code == 404  # another operation's route is not in this app


def test_all_routes_are_built_once_in_the_order_declared() -> None:
    routes = router()
    build_app(operation_ids={"Things_List"}, routers=[routes])
    ids = [route.operation_id for route in routes.routes]
    assert ids == ["Things_Get", "Things_Put", "Things_List"]
    assert sorted(BUILT) == sorted(ids)  # Things_List was not built twice
    assert [route.operation_id for route in routes.routes] == ids


def test_an_unknown_operation_id_is_refused() -> None:
    with pytest.raises(ValueError, match="Things_Delete"):
        build_app(operation_ids={"Things_Delete"}, routers=[router()])
