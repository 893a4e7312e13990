"""DynamoDB requests per sparkNodes operation, and cold initialisation time per function.

Run from the repository root: ``python -m benchmarks.requests_and_cold_start``. Prints two tables:

(a) For each operation, the DynamoDB API calls it makes, by API name, counted at the botocore client (every
    ``BaseClient._make_api_call`` of a ``dynamodb`` client, whoever created it) while the request runs through the
    API Gateway emulator of template.yaml (real authorizer, real function handlers) on moto, and whether that fits
    the budget of the repositories (layers/core/itl_accelerator/repositories/dynamodb/table.py): a read is 1 GetItem; a list page is
    1 Query; a write is at most 1 TransactWriteItems plus at most 1 read; a refused request writes at most its
    audit item (1 PutItem) and reads nothing; no Scan ever. On top of it every request counts itself against the
    rate limits first: 2 UpdateItem, its caller's and its subscription's counter (services/api/rate_limits.py).
(b) For each function of template.yaml, in a fresh interpreter: the time to import its handler module and build
    what its first invocation builds (the FastAPI app of its one operation; for the authorizer, the
    TokenValidator from settings). Median of several runs, beside a baseline that only imports boto3 and creates
    a DynamoDB client. Milliseconds, measured inside the child (interpreter start-up excluded, shown apart).

The request part is importable: :func:`measure_requests` takes an HTTP client on the emulator and a token
factory (tests pass their fixtures), :func:`local_gateway` builds both on its own (this script).
"""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlsplit

REPO_ROOT = Path(__file__).resolve().parents[1]
TABLE = "itl-accelerator-bench"
ADMIN = "itl-accelerator-admin"
RUNS = 7  # as issue 28 measured: medians of 7 processes

#: ``token_for(subject, roles, scopes)`` → a bearer token the emulator's authorizer accepts.
TokenFactory = Callable[[str, list[str], list[str]], str]

#: The seed's create body.
SEED_NODE: dict[str, Any] = {
    "name": "dgx-1",
    "location": "us-east-1",
    "sku": {"name": "DGX-H100-8GPU", "capacity": 8},
    "properties": {
        "owner": "owner-123",
        "hardwareSpecs": {"gpuModel": "H100", "gpuCount": 8, "gpuMemoryGb": 80},
        "pricing": {"currency": "USD", "pricePerGpuHour": 2.5},
    },
}

#: The rows of :func:`measure_requests`, in order (tests parametrize over them).
LABELS: tuple[str, ...] = (
    "create (POST, seed form)",
    "create (PUT)",
    "replace (PUT, new price)",
    "identical PUT (no-op)",
    "get",
    "update (PATCH)",
    "list by RG, page 1 ($top=1)",
    "list by RG, page 2 (nextLink)",
    "list by subscription, page 1 ($top=1)",
    "list by subscription, page 2 (nextLink)",
    "create in rg2 (PUT)",
    "list by subscription, caller holding rg1+rg2 ($top=3)",
    "audit query, page 1 (startTime, $top=2)",
    "audit query, page 2 (nextLink)",
    "audit query, default range ($top=2)",
    "get refused (403, no role)",
    "delete",
)

READS = ("GetItem", "Query", "BatchGetItem", "TransactGetItems")
API_COLUMNS = ("GetItem", "Query", "TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem", "Scan")

# ------------------------------------------------------------------------------------------------ budgets
#: What every request of the table below makes before its own work: one UpdateItem on its caller's rate counter and
#: one on its subscription's (services/api/rate_limits.py; both limits on, as deployed by default).
RATE_COUNTERS = 2
#: kind → the budget's wording (the table's "budget" column).
BUDGETS = {
    "read": "2 counters + 1 GetItem",
    "list": "2 counters + 1 Query",
    "write": "2 counters + <=1 TransactWriteItems + <=1 read",
    "denied": "2 counters + <=1 PutItem (audit), no read",
    "groups": "2 counters + 1 Query per visible group visited (<=2)",
}
#: Resource groups the grouped-list caller holds (the "groups" budget: at most one Query for each).
VISIBLE_GROUPS = 2


def fits_budget(kind: str, calls: Counter[str]) -> bool:
    """Whether ``calls`` (API name → count) stays within the budget of ``kind``: exactly :data:`RATE_COUNTERS`
    UpdateItem (the rate counters; no operation measured here makes one otherwise), then the store's own budget.
    A Scan never fits."""
    calls = Counter({k: v for k, v in calls.items() if v})
    if calls["Scan"] or calls.pop("UpdateItem", 0) != RATE_COUNTERS:
        return False
    reads = sum(calls[r] for r in READS)
    if kind == "read":
        return calls == Counter({"GetItem": 1})
    if kind == "list":
        return calls == Counter({"Query": 1})
    if kind == "write":
        other = set(calls) - {"TransactWriteItems", *READS}
        return calls["TransactWriteItems"] <= 1 and reads <= 1 and not other
    if kind == "denied":
        return calls["PutItem"] <= 1 and set(calls) <= {"PutItem"}
    if kind == "groups":
        return set(calls) == {"Query"} and calls["Query"] <= VISIBLE_GROUPS
    raise ValueError(f"unknown budget kind {kind!r}")


@dataclass
class Measured:
    """One request: what was sent, what came back, and the DynamoDB calls it made."""

    label: str
    kind: str
    method: str
    path: str
    status: int
    expected_status: int
    calls: Counter[str] = field(default_factory=Counter)
    #: Whether the request changes stored state (1 TransactWriteItems expected; an identical PUT changes nothing).
    changes: bool = False

    @property
    def fits(self) -> bool:
        return fits_budget(self.kind, self.calls)


@contextmanager
def dynamodb_calls() -> Iterator[Counter[str]]:
    """Count DynamoDB API calls by name (``GetItem``, ``Query``...) made by any botocore client meanwhile, except
    those of functions that run on their own beside the request: scheduled ones (the reconciler, the job
    tracker...) and consumers of the table's stream (a node written wakes FleetChangesFunction after the fact).

    Wraps ``BaseClient._make_api_call``, the one path every client operation takes (paginators and waiters too),
    so the handlers' own clients, created inside the functions on first use, are counted without being reached.
    A call is counted once however often botocore retries it.
    """
    from botocore.client import BaseClient

    from itl_local.lambda_runtime import current_function
    from itl_local.schedules import schedules
    from itl_local.template import Template

    template = Template()
    scheduled = {s.function_id for s in schedules(template)} | {m.function_id for m in template.stream_mappings()}
    counts: Counter[str] = Counter()
    lock = threading.Lock()
    original = BaseClient._make_api_call

    def counting(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        if self.meta.service_model.service_name == "dynamodb" and current_function() not in scheduled:
            with lock:
                counts[operation_name] += 1
        return original(self, operation_name, api_params)

    with mock.patch.object(BaseClient, "_make_api_call", counting):
        yield counts


def measure_requests(client: Any, token_for: TokenFactory, subscription_id: str | None = None) -> list[Measured]:
    """Run the sparkNodes operations (and the audit query, and a refused GET) in a fresh subscription through
    ``client`` (an HTTP client on the API Gateway emulator) and count each one's DynamoDB calls."""
    sub = subscription_id or f"sub-bench-{uuid.uuid4().hex[:10]}"
    admin = {"Authorization": f"Bearer {token_for('bench-admin', [ADMIN], [f'/subscriptions/{sub}'])}"}
    no_role = {"Authorization": f"Bearer {token_for('bench-norole', [], [f'/subscriptions/{sub}'])}"}
    rg_nodes = f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes"
    sub_nodes = f"/subscriptions/{sub}/providers/ITL.Accelerator/sparkNodes"
    put_body = {k: v for k, v in SEED_NODE.items() if k != "name"}
    repriced = {
        **put_body,
        "properties": {**put_body["properties"], "pricing": {"currency": "USD", "pricePerGpuHour": 3.1}},
    }
    results: list[Measured] = []

    def run(
        label: str,
        kind: str,
        method: str,
        path: str,
        expected: int,
        *,
        headers: dict[str, str] = admin,
        body: Any = None,
        changes: bool = False,
    ) -> Any:
        with dynamodb_calls() as calls:
            response = client.request(method, path, headers=headers, json=body)
        results.append(Measured(label, kind, method, path, response.status_code, expected, Counter(calls), changes))
        return response

    def next_page(response: Any) -> str:
        """The page's nextLink as a path; without one, a token the API refuses (the status column shows it)."""
        link = response.json().get("nextLink") if response.status_code == 200 else None
        if not link:
            return f"{urlsplit(str(response.url)).path}?$skipToken=no-nextLink-returned"
        parts = urlsplit(link)
        return f"{parts.path}?{parts.query}"

    run("create (POST, seed form)", "write", "POST", rg_nodes, 201, body=SEED_NODE, changes=True)
    run("create (PUT)", "write", "PUT", f"{rg_nodes}/dgx-2", 201, body=put_body, changes=True)
    run("replace (PUT, new price)", "write", "PUT", f"{rg_nodes}/dgx-2", 200, body=repriced, changes=True)
    run("identical PUT (no-op)", "write", "PUT", f"{rg_nodes}/dgx-2", 200, body=repriced)
    run("get", "read", "GET", f"{rg_nodes}/dgx-1", 200)
    run(
        "update (PATCH)",
        "write",
        "PATCH",
        f"{rg_nodes}/dgx-1",
        200,
        body={"properties": {"pricing": {"pricePerGpuHour": 2.75}}, "tags": {"env": "prod"}},
        changes=True,
    )
    page = run("list by RG, page 1 ($top=1)", "list", "GET", f"{rg_nodes}?$top=1", 200)
    run("list by RG, page 2 (nextLink)", "list", "GET", next_page(page), 200)
    page = run("list by subscription, page 1 ($top=1)", "list", "GET", f"{sub_nodes}?$top=1", 200)
    run("list by subscription, page 2 (nextLink)", "list", "GET", next_page(page), 200)
    # a caller holding two resource groups of the subscription: one Query per group, in turn, until a page is full
    rg2_nodes = rg_nodes.replace("/resourceGroups/rg1/", "/resourceGroups/rg2/")
    run("create in rg2 (PUT)", "write", "PUT", f"{rg2_nodes}/dgx-3", 201, body=put_body, changes=True)
    two_groups = {
        "Authorization": "Bearer "
        + token_for(
            "bench-rg",
            [ADMIN],
            [f"/subscriptions/{sub}/resourceGroups/rg1", f"/subscriptions/{sub}/resourceGroups/rg2"],
        )
    }
    run(
        "list by subscription, caller holding rg1+rg2 ($top=3)",
        "groups",
        "GET",
        f"{sub_nodes}?$top=3",
        200,
        headers=two_groups,
    )
    audit = f"/subscriptions/{sub}/providers/ITL.Accelerator/auditEvents"
    page = run(
        "audit query, page 1 (startTime, $top=2)", "list", "GET", f"{audit}?startTime=2000-01-01T00:00:00Z&$top=2", 200
    )
    run("audit query, page 2 (nextLink)", "list", "GET", next_page(page), 200)
    run("audit query, default range ($top=2)", "list", "GET", f"{audit}?$top=2", 200)
    run("get refused (403, no role)", "denied", "GET", f"{rg_nodes}/dgx-1", 403, headers=no_role)
    run("delete", "write", "DELETE", f"{rg_nodes}/dgx-1", 200, changes=True)
    assert tuple(m.label for m in results) == LABELS, "LABELS is out of step with measure_requests"
    return results


# ------------------------------------------------------------------------------------------------ local stack
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def local_gateway() -> Iterator[tuple[Any, TokenFactory]]:
    """moto with the table of template.yaml, a dev OIDC issuer on a free loopback port, and the API Gateway
    emulator in front of the real handlers (as tests/conftest.py builds them). Yields ``(client, token_for)``."""
    import warnings

    import boto3
    import uvicorn
    from moto import mock_aws

    with warnings.catch_warnings():  # starlette's notice about httpx vs httpx2 (a dependency matter)
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from itl_local.devauth import idp_app, load_or_create_key, mint_token

    home = tempfile.TemporaryDirectory(prefix="itl-bench-")
    key = load_or_create_key(Path(home.name))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(idp_app(key), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the dev OIDC issuer did not start")
        time.sleep(0.01)
    issuer = f"http://127.0.0.1:{port}/realms/itl"
    values = {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "TABLE_NAME": TABLE,
        "CONTROL_PLANE_AUTH_URL": f"http://127.0.0.1:{port}",
        "OIDC_REALM": "itl",
        "POWERTOOLS_TRACE_DISABLED": "true",
        # Keep the tables readable: a failed request shows in the status column ("500 (expected 200)").
        "POWERTOOLS_LOG_LEVEL": "CRITICAL",
    }
    saved = {k: os.environ.get(k) for k in [*values, "AWS_ENDPOINT_URL"]}
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ.update(values)

    from itl_accelerator.settings import get_settings
    from itl_local.aws import create_table
    from itl_local.gateway import ApiGatewayEmulator
    from itl_local.template import Template

    get_settings.cache_clear()

    def token_for(subject: str, roles: list[str], scopes: list[str]) -> str:
        return mint_token(key, issuer=issuer, audience="itl-accelerator", subject=subject, roles=roles, scopes=scopes)

    try:
        template = Template()
        with mock_aws():
            create_table(boto3.client("dynamodb"), template, TABLE)
            with TestClient(ApiGatewayEmulator(template), base_url="http://testserver") as client:
                yield client, token_for
    finally:
        server.should_exit = True
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        get_settings.cache_clear()
        home.cleanup()


# ------------------------------------------------------------------------------------------------ cold start
_CHILD = """
import time
_t0 = time.perf_counter()
{body}
_ms = (time.perf_counter() - _t0) * 1000
import json, sys
sys.stdout.write(json.dumps({{"ms": _ms}}))
"""

_BASELINE = """
import boto3
boto3.client("dynamodb", region_name="us-east-1")
"""

#: The second reference: a handler on the same stack with nothing of ours (FastAPI with one route, Mangum, a boto3
#: DynamoDB client) — what the API functions are held to (issue 28: at most 1.05x).
_REFERENCE = """
import boto3
from fastapi import FastAPI
from mangum import Mangum
app = FastAPI()
@app.get("/items/{{item_id}}")
def get_item(item_id: str) -> dict:
    return {{"id": item_id}}
handler = Mangum(app, lifespan="off")
boto3.client("dynamodb", region_name="us-east-1")
"""

_API_FUNCTION = """
import importlib
from itl_accelerator.api.app import build_app
handler = getattr(importlib.import_module({module!r}), {attr!r})
build_app(operation_ids={{handler.operation_id}}, routers=[handler.router])
"""

#: The MCP function (mcp_server/): its module, then the MCP server and streamable-HTTP app its invocations build.
_MCP_FUNCTION = """
import importlib
handler = getattr(importlib.import_module({module!r}), {attr!r})
from itl_accelerator_mcp.api import ApiClient
from itl_accelerator_mcp.caller import Caller
from itl_accelerator_mcp.server import build_server
build_server(ApiClient("https://api.example", "t"), Caller("alice")).streamable_http_app(json_response=True)
import mangum
"""

#: A workflow step or a scheduled function: its module, then the service its first invocation builds (with the
#: DynamoDB client under it).
_SERVICE_FUNCTION = """
import importlib
from itl_accelerator.wiring import Wiring
handler = getattr(importlib.import_module({module!r}), {attr!r})
getattr(Wiring.build(), {service!r}).__class__
Wiring.build().repositories
"""

#: The service a workflow step or schedule handler uses (what its first invocation builds).
SERVICES = {
    "itl_functions.instance_workflow": "instance_steps",
    "itl_functions.instance_workflow.deprovision_start": "deprovision_steps",
    "itl_functions.instance_workflow.deprovision_poll": "deprovision_steps",
    "itl_functions.instance_workflow.deprovision_finish": "deprovision_steps",
    "itl_functions.instance_workflow.deprovision_fail": "deprovision_steps",
    "itl_functions.job_workflow": "job_steps",
    "itl_functions.schedules.reconcile": "reconciler",
    "itl_functions.schedules.track_jobs": "job_tracker",
    "itl_functions.schedules.sync_usage": "usage_sync",
    "itl_functions.schedules.roll_up_usage": "usage_rollups",
    "itl_functions.schedules.export_billing": "billing_export",
    "itl_functions.schedules.monitor_budgets": "budget_monitor",
    "itl_functions.streams.fleet_changes": "fleet_changes",
    "itl_functions.state_events.publish": "state_events",
    # the ITL gateway registration builds no service: it is a client of the gateway (httpx), like the DGX client
    "itl_functions.registration.handler": "settings",
}
#: API functions that serve no operation of the app (plain handlers: the catch-all route, the probes): their import.
PLAIN_API_FUNCTIONS = ("CanonicalPathFunction", "HealthFunction", "ReadyFunction", "DgxCallbacksFunction")

_PLAIN_FUNCTION = """
import importlib
handler = getattr(importlib.import_module({module!r}), {attr!r})
"""

_AUTHORIZER = """
import importlib
from itl_accelerator.auth.tokens import TokenValidator
from itl_accelerator.settings import get_settings
handler = getattr(importlib.import_module({module!r}), {attr!r})
TokenValidator(get_settings())
"""


@dataclass
class ColdStart:
    """Medians over the runs of one target: ``init_ms`` measured inside the child, ``process_ms`` the whole
    subprocess as the parent saw it (interpreter start-up and exit included)."""

    name: str
    what: str
    init_ms: list[float] = field(default_factory=list)
    process_ms: list[float] = field(default_factory=list)


def _child_environment() -> dict[str, str]:
    """A function's environment: this process's, with template.yaml's ``Globals`` variables (PYDANTIC_DISABLE_PLUGINS
    among them) and what the measured functions need. Bytecode caching on: the warm-up run writes ``__pycache__``
    as the build ships it (layers/core/Makefile compiles the layer ahead; a PYTHONDONTWRITEBYTECODE in this shell
    would have every run compile every module of the project, which no deployed function does)."""
    from itl_local.template import Template

    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ENDPOINT_URL", "PYTHONDONTWRITEBYTECODE")}
    env.update(Template().global_environment())
    env.update(
        {
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
            "TABLE_NAME": TABLE,
            "POWERTOOLS_TRACE_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            # what the template gives the state-change events' and the SLO report's functions
            "EVENT_BUS_NAME": "bench-bus",
            "AUDIT_ARCHIVE_BUCKET": "bench-archive",
            "API_NAME": "bench-api",
            "API_STAGE": "v1",
        }
    )
    return env


def cold_start_targets() -> list[tuple[str, str, str]]:
    """``(name, description, child code)``: the boto3 baseline, then every function of template.yaml."""
    from itl_local.template import Template

    template = Template()
    authorizer = template.authorizer_handler()
    api_functions = {r.function_id for r in template.routes}
    targets = [
        ("baseline: boto3 + DynamoDB client", "import boto3; boto3.client('dynamodb')", _BASELINE),
        ("reference: FastAPI + Mangum + boto3", "1 route, Mangum, DynamoDB client", _REFERENCE),
    ]
    for name, props in template.functions().items():
        handler = props["Handler"]
        module, _, attr = handler.rpartition(".")
        if name == "McpFunction":
            targets.append((name, f"{handler} + MCP app", _MCP_FUNCTION.format(module=module, attr=attr)))
        elif name in PLAIN_API_FUNCTIONS:
            targets.append((name, handler, _PLAIN_FUNCTION.format(module=module, attr=attr)))
        elif name in api_functions:
            targets.append((name, f"{handler} + build_app", _API_FUNCTION.format(module=module, attr=attr)))
        elif handler == authorizer:
            targets.append((name, f"{handler} + TokenValidator", _AUTHORIZER.format(module=module, attr=attr)))
        else:
            service = SERVICES.get(handler) or SERVICES[module]
            body = _SERVICE_FUNCTION.format(module=module, attr=attr, service=service)
            targets.append((name, f"{handler} + Wiring.{service}", body))
    return targets


def measure_cold_starts(runs: int = RUNS) -> list[ColdStart]:
    """Each target ``runs`` times in a fresh ``sys.executable`` (targets interleaved, so drift hits all alike),
    after a discarded warm-up run per handler module (bytecode caches written, files in the page cache)."""
    targets = cold_start_targets()
    results = [ColdStart(name, what) for name, what, _ in targets]
    env = _child_environment()
    warm_up = {}  # one target per distinct handler module (the others import the same files)
    for _, what, body in targets:
        warm_up.setdefault(what.split(" ")[0].rpartition(".")[0] or what, body)
    for round_ in range(runs + 1):
        for (_, _, body), result in zip(targets, results, strict=True):
            if round_ == 0 and body not in warm_up.values():
                continue
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-c", _CHILD.format(body=body)],
                cwd=REPO_ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            elapsed = (time.perf_counter() - started) * 1000
            if done.returncode != 0:
                raise RuntimeError(f"{result.name}: child failed\n{done.stderr}")
            if round_ == 0:
                continue
            result.init_ms.append(float(json.loads(done.stdout.strip().splitlines()[-1])["ms"]))
            result.process_ms.append(elapsed)
    return results


# ------------------------------------------------------------------------------------------------ output
def _table(headers: list[str], rows: list[list[str]], right: set[int]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def requests_table(measured: list[Measured]) -> str:
    seen = {name for m in measured for name in m.calls if m.calls[name]}
    columns = [
        c for c in API_COLUMNS if c in seen or c in ("GetItem", "Query", "TransactWriteItems", "PutItem", "Scan")
    ]
    columns += sorted(seen - set(columns))
    headers = ["operation", "request", "status", *columns, "budget", "fits"]
    rows = []
    for m in measured:
        status = str(m.status) if m.status == m.expected_status else f"{m.status} (expected {m.expected_status})"
        rows.append(
            [m.label, m.method, status, *(str(m.calls[c]) for c in columns), BUDGETS[m.kind], "yes" if m.fits else "NO"]
        )
    return _table(headers, rows, right=set(range(3, 3 + len(columns))))


def cold_start_table(results: list[ColdStart], api_functions: set[str] | None = None) -> str:
    """One row per target: API functions compared with the FastAPI + Mangum + boto3 reference, everything else
    (the authorizer, workflow steps, schedules) with the boto3 baseline."""
    baseline = statistics.median(results[0].init_ms)
    reference = statistics.median(results[1].init_ms)
    floors = min(results[0].init_ms), min(results[1].init_ms)
    api = api_functions or set()
    headers = [
        "function",
        "what is timed",
        "init median ms",
        "min",
        "max",
        "vs",
        "ratio",
        "ratio of mins",
        "process median ms",
    ]
    rows = []
    for r in results:
        median = statistics.median(r.init_ms)
        against, base = ("reference", reference) if r.name in api else ("baseline", baseline)
        floor = floors[1] if r.name in api else floors[0]
        rows.append(
            [
                r.name,
                r.what,
                f"{median:.1f}",
                f"{min(r.init_ms):.1f}",
                f"{max(r.init_ms):.1f}",
                "-" if r in results[:2] else against,
                "-" if r in results[:2] else f"{median / base:.2f}x ({median - base:+.0f})",
                # the floor of each: noise on a shared machine only ever adds, so the minima compare the work itself
                "-" if r in results[:2] else f"{min(r.init_ms) / floor:.2f}x",
                f"{statistics.median(r.process_ms):.1f}",
            ]
        )
    return _table(headers, rows, right={2, 3, 4, 6, 7, 8})


def main() -> int:
    started = time.perf_counter()
    print(f"Python {platform.python_version()} ({sys.executable}) on {platform.system()} {platform.machine()}")
    print()
    if "--cold-start-only" in sys.argv[1:]:
        return cold_start_section(started)
    with local_gateway() as (client, token_for):
        measured = measure_requests(client, token_for)
    print("(a) DynamoDB requests per operation (API Gateway emulator -> real handlers -> moto; counted at botocore)")
    print(requests_table(measured))
    over = [m.label for m in measured if not m.fits]
    wrong = [m.label for m in measured if m.status != m.expected_status]
    print(
        f"within budget: {len(measured) - len(over)}/{len(measured)}; Scan calls: "
        f"{sum(m.calls['Scan'] for m in measured)}"
        + (f"; OVER BUDGET: {', '.join(over)}" if over else "")
        + (f"; UNEXPECTED STATUS: {', '.join(wrong)}" if wrong else "")
    )
    print()
    return cold_start_section(started)


def cold_start_section(started: float) -> int:
    """Section (b), and the goals of the cold-start issue against it."""
    cold = measure_cold_starts()
    print(
        f"(b) Cold initialisation per function: import handler + build (fresh interpreter each run, median of "
        f"{RUNS} after a warm-up; 'process' adds interpreter start-up; tracing disabled)"
    )
    from itl_local.template import Template

    template = Template()
    api = {r.function_id for r in template.routes}
    print(cold_start_table(cold, api))
    baseline, reference = (statistics.median(r.init_ms) for r in cold[:2])
    # (the MCP function is measured, not held to it: it loads the MCP SDK, not FastAPI)
    api_worst = max(
        (statistics.median(r.init_ms) / reference, r.name) for r in cold if r.name in api and r.name != "McpFunction"
    )
    functions = template.functions()
    authorizer = next(
        (r for r in cold if r.name in functions and functions[r.name]["Handler"] == template.authorizer_handler()),
        None,
    )
    others = [
        (statistics.median(r.init_ms) / baseline, r.name)
        for r in cold[2:]
        if r.name not in api and r.name != "McpFunction" and r is not authorizer
    ]
    steps_worst = max(others) if others else (0.0, "-")
    api_ratios = [statistics.median(r.init_ms) / reference for r in cold if r.name in api and r.name != "McpFunction"]
    api_floor = [min(r.init_ms) / min(cold[1].init_ms) for r in cold if r.name in api and r.name != "McpFunction"]
    step_floor = [min(r.init_ms) / min(cold[0].init_ms) for r in cold[2:] if r.name in {n for _, n in others}]
    print(
        f"medians over the functions: API {statistics.median(api_ratios):.2f}x the reference (of minima "
        f"{statistics.median(api_floor):.2f}x); steps, schedules and stream consumers "
        f"{statistics.median(r for r, _ in others):.2f}x the baseline (of minima {statistics.median(step_floor):.2f}x)"
    )
    print(
        f"goals (issue 28): every API function <= 1.05x the reference (worst: {api_worst[1]} {api_worst[0]:.2f}x); "
        + (
            f"the authorizer <= 1.00x the baseline ({statistics.median(authorizer.init_ms) / baseline:.2f}x); "
            if authorizer
            else ""
        )
        + f"every workflow step, schedule and stream consumer <= 1.50x the baseline (worst: {steps_worst[1]} "
        f"{steps_worst[0]:.2f}x)"
    )
    print()
    print(f"total benchmark time: {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
