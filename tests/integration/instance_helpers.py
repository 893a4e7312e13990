"""Helpers for instance tests: paths, polling until a state, and reading the truth from the table and the
DGX simulator."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tests.conftest import TABLE, nodes_path

SEED_INSTANCE = {"name": "instance-1", "model": "mistral:7b", "gpus": 2, "memory_gb": 160}


def instances_path(sub: str, node: str = "dgx-1", name: str | None = None, rg: str = "rg1") -> str:
    base = nodes_path(sub, rg, node) + "/sparkOllamaInstances"
    return f"{base}/{name}" if name else base


def relative(url: str) -> str:
    """An absolute URL from a header or body → path and query, for the test client."""
    return "/" + url.split("/", 3)[3]


def wait_for(
    check: Callable[[], Any], *, timeout: float = 30.0, interval: float = 0.25, what: str = "condition"
) -> Any:
    """Poll ``check`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def wait_for_progress(
    count: Callable[[], int], target: int, *, stall: float = 90.0, interval: float = 1.0, what: str = "progress"
) -> None:
    """Poll ``count`` until it reaches ``target``; fail only when it stopped growing for ``stall`` seconds — a busy
    machine slows the work down, a stuck one stops it."""
    best, moved = -1, time.monotonic()
    while True:
        now = count()
        if now >= target:
            return
        if now > best:
            best, moved = now, time.monotonic()
        elif time.monotonic() - moved > stall:
            raise AssertionError(f"{what}: stuck at {now} of {target} for {stall:.0f} s")
        time.sleep(interval)


def wait_state(caller: Any, path: str, states: tuple[str, ...], timeout: float = 30.0) -> dict[str, Any]:
    """GET ``path`` until ``properties.provisioningState`` is one of ``states``; returns the body."""

    def check() -> dict[str, Any] | None:
        response = caller.get(path)
        assert response.status_code == 200, response.text
        body = response.json()
        return body if body["properties"]["provisioningState"] in states else None

    return wait_for(check, timeout=timeout, what=f"{path} to reach {states}")


def wait_gone(caller: Any, path: str, timeout: float = 30.0) -> None:
    wait_for(lambda: caller.get(path).status_code == 404, timeout=timeout, what=f"{path} to disappear")


def node_counters(dynamodb: Any, sub: str, rg: str = "rg1", node: str = "dgx-1") -> dict[str, int]:
    """gpuAllocated, memoryGbAllocated, childCount of a node, read from the table."""
    item = dynamodb.get_item(
        TableName=TABLE, Key={"PK": {"S": f"SUB#{sub}"}, "SK": {"S": f"NODE#{rg}#{node}"}}, ConsistentRead=True
    )["Item"]
    return {k: int(item[k]["N"]) for k in ("gpuAllocated", "memoryGbAllocated", "childCount")}


def simulator_instances(simulator: Any, *, include_deleting: bool = False) -> list[dict[str, Any]]:
    """Instances the DGX simulator holds (by default without those already being deleted)."""
    with simulator.lock:
        live = [simulator._refresh(i) for i in list(simulator.instances.values())]
    return [i for i in live if i and (include_deleting or i["status"] != "Deleting")]
