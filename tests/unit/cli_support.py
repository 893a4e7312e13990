"""Running the CLI in-process against an ``httpx.MockTransport``, with a fake clock (sleeping advances it)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import click
import httpx
from click.testing import CliRunner, Result

from itlc_accelerator.main import accelerator
from itlc_accelerator.session import Runtime

API = "http://api.test"
SUB, RG = "sub-1", "rg1"
RG_PATH = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/ITL.Accelerator"
#: Every variable the CLI reads, so the developer's own environment never leaks into a test.
ENV = {
    "CONTROLPLANE_API_URL": API,
    "CONTROLPLANE_TOKEN": None,
    "CONTROLPLANE_SUBSCRIPTION": SUB,
    "CONTROLPLANE_RESOURCE_GROUP": RG,
}


def jwt(claims: dict[str, Any]) -> str:
    """An unsigned JWT with these claims (the CLI reads ``sub``; it never verifies)."""

    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


@dataclass
class FakeClock:
    """``sleep`` advances ``now``; ``sleeps`` records each pause. ``interrupt_after`` sleeps: Ctrl-C."""

    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)
    interrupt_after: int | None = None

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        if self.interrupt_after is not None and len(self.sleeps) >= self.interrupt_after:
            raise KeyboardInterrupt
        self.sleeps.append(seconds)
        self.now += seconds


@dataclass
class Run:
    """What one CLI run did: its result, the requests it sent, and the clock it slept on."""

    result: Result
    requests: list[httpx.Request]
    clock: FakeClock

    @property
    def code(self) -> int:
        return self.result.exit_code

    @property
    def out(self) -> str:
        return self.result.stdout

    @property
    def err(self) -> str:
        return self.result.stderr

    def json(self) -> Any:
        return json.loads(self.out)

    def paths(self) -> list[str]:
        return [f"{r.method} {r.url.path}" for r in self.requests]


Handler = Callable[[httpx.Request], httpx.Response]


def run(
    args: Sequence[str],
    handler: Handler | None = None,
    *,
    env: dict[str, str | None] | None = None,
    tty: bool = False,
    clock: FakeClock | None = None,
    cli: click.Command = accelerator,
) -> Run:
    """Invoke ``cli`` with ``args`` in-process; requests go to ``handler`` (default: 500 for any)."""
    requests: list[httpx.Request] = []
    clock = clock or FakeClock()

    def record(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return (handler or (lambda r: httpx.Response(500)))(request)

    runtime = Runtime(
        transport=httpx.MockTransport(record),
        sleep=clock.sleep,
        clock=clock.clock,
        stdout_tty=tty,
        stderr_tty=tty,
    )
    prog = "itlc-accelerator" if cli is accelerator else (cli.name or "cli")  # as main() names it
    env = {**ENV, **(env or {})}
    result = CliRunner().invoke(cli, list(args), obj=runtime, env=env, catch_exceptions=False, prog_name=prog)
    return Run(result, requests, clock)


def arm_error(status: int, code: str, message: str) -> httpx.Response:
    return httpx.Response(status, json={"error": {"code": code, "message": message}})


def routes(table: dict[str, Any]) -> Handler:
    """A handler from ``{"METHOD /path": response-or-list-of-responses-or-callable}``; a list answers in turn (the
    last one again when exhausted). Anything else: 404 NotFound."""
    served: dict[str, int] = {}

    def handle(request: httpx.Request) -> httpx.Response:
        key = f"{request.method} {request.url.path}"
        answer = table.get(key)
        if answer is None:
            return arm_error(404, "NotFound", f"no fake route for {key}")
        if callable(answer):
            return answer(request)
        if isinstance(answer, list):
            index = served.get(key, 0)
            served[key] = index + 1
            answer = answer[min(index, len(answer) - 1)]
        return _copy(answer)

    return handle


def _copy(response: httpx.Response) -> httpx.Response:
    """A fresh response with the same status, headers and body (one may be served twice)."""
    return httpx.Response(response.status_code, headers=response.headers, content=response.content)


def node(name: str = "dgx-1", **properties: Any) -> dict[str, Any]:
    return {
        "id": f"{RG_PATH}/sparkNodes/{name}",
        "name": name,
        "type": "ITL.Accelerator/sparkNodes",
        "location": "us-east-1",
        "tags": {},
        "sku": {"name": "DGX-H100-8GPU", "capacity": 8},
        "etag": '"1"',
        "properties": {
            "owner": "owner-123",
            "pricing": {"currency": "USD", "pricePerGpuHour": 2.5},
            "availability": "Available",
            "capacity": {"totalGpus": 8, "freeGpus": 6, "freeMemoryGb": 480},
            "provisioningState": "Succeeded",
            **properties,
        },
    }


def instance(name: str = "llama-1", node_name: str = "dgx-1", state: str = "Succeeded") -> dict[str, Any]:
    return {
        "id": f"{RG_PATH}/sparkNodes/{node_name}/sparkOllamaInstances/{name}",
        "name": name,
        "type": "ITL.Accelerator/sparkNodes/sparkOllamaInstances",
        "properties": {
            "model": "mistral:7b",
            "gpus": 2,
            "memoryGb": 160,
            "provisioningState": state,
            "endpoint": "http://dgx.test/ollama/i-1" if state == "Succeeded" else None,
        },
    }


def job(name: str = "train-1", status: str = "Succeeded", **properties: Any) -> dict[str, Any]:
    return {
        "id": f"{RG_PATH}/sparkJobs/{name}",
        "name": name,
        "type": "ITL.Accelerator/sparkJobs",
        "properties": {
            "jobType": "training",
            "requestedGpus": 4,
            "requestedMemoryGb": 320,
            "status": status,
            "assignedNode": f"{RG_PATH}/sparkNodes/dgx-1",
            "submittedBy": "alice",
            "submittedAt": "2026-11-01T10:00:00Z",
            "cost": {"amount": "0.200000", "currency": "USD"},
            **properties,
        },
    }


def status_path(operation_id: str = "op-1", location: str = "us-east-1") -> str:
    return f"/subscriptions/{SUB}/providers/ITL.Accelerator/locations/{location}/operationStatuses/{operation_id}"


def accepted(
    operation_id: str = "op-1", location: str = "us-east-1", retry_after: int = 3, **kw: Any
) -> httpx.Response:
    """A 202 with the LRO headers of the API."""
    status = API + status_path(operation_id, location)
    headers = {
        "Azure-AsyncOperation": status,
        "Location": status.replace("/operationStatuses/", "/operationResults/"),
        "Retry-After": str(retry_after),
    }
    return httpx.Response(202, headers=headers, **kw)


def operation(status: str, operation_id: str = "op-1", retry_after: int | None = None, **extra: Any) -> httpx.Response:
    body = {
        "id": status_path(operation_id),
        "name": operation_id,
        "status": status,
        "startTime": "2026-11-01T10:00:00Z",
        "resourceId": f"{RG_PATH}/sparkNodes/dgx-1/sparkOllamaInstances/llama-1",
        **extra,
    }
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    return httpx.Response(200, json=body, headers=headers)
