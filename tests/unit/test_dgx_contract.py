"""The DGX contract (docs/dgx-platform.openapi.yaml) bounds both sides: every path the client calls and every
path the simulator serves is in it, and the simulator serves all of it."""

from __future__ import annotations

import inspect
import re

import yaml

from itl_accelerator.dgx import client as client_module
from itl_local.dgx_simulator import DgxSimulator
from tests.conftest import REPO_ROOT

CONTRACT = yaml.safe_load((REPO_ROOT / "docs" / "dgx-platform.openapi.yaml").read_text())


def _normalise(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def contract_operations() -> set[tuple[str, str]]:
    ops = set()
    for path, item in CONTRACT["paths"].items():
        for method in item:
            if method in ("get", "post", "put", "patch", "delete"):
                ops.add((method.upper(), _normalise(path)))
    return ops


def test_simulator_serves_exactly_the_contract():
    served = set()
    for route in DgxSimulator().app.routes:
        if route.path.startswith("/v1/"):
            for method in route.methods or ():
                if method != "HEAD":
                    served.add((method, _normalise(route.path)))
    assert served == contract_operations()


def test_client_calls_only_contract_paths():
    source = inspect.getsource(client_module)
    calls = re.findall(r'self\._call\("(\w+)", f?"([^"]+)"', source)
    assert calls, "no calls found"
    for method, path in calls:
        assert (method, _normalise(path)) in contract_operations(), (method, path)
