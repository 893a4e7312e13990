"""What each function loads on a cold start, so the gain of issue 10 cannot quietly erode: in a fresh interpreter
(tracing off, as ``./dev bench`` measures), import the function's handler module and build what its first
invocation builds — an API function's app of its one router and the service its operation calls; the authorizer's
token validator; a workflow step's or schedule's service — then look at ``sys.modules``.

- No function loads the X-Ray SDK while tracing is off.
- API functions never load the DGX client (nor httpx), the token library, another operation's routes, the workflow
  or billing services: they store and read, nothing else — except the job log's, which proxies the DGX Platform
  (:data:`DGX_PROXIES`).
- The authorizer loads neither FastAPI nor Mangum nor boto3 (it checks a JWT).
- Workflow steps and schedules load neither FastAPI nor Mangum.

Functions of one handler module that build the same service load the same modules: each such group is measured
once (one interpreter each).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.requests_and_cold_start import SERVICES
from itl_local.template import Template, load_handler

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = Template()
FUNCTIONS = TEMPLATE.functions()
API = {r.function_id for r in TEMPLATE.routes}
#: The MCP server: an API function of its own kind (mcp_server/, a client of the API), measured on its own.
MCP = "McpFunction"
AUTHORIZER = TEMPLATE.authorizer_handler()
#: The catch-all route's function: no operation of the app, a client of the API (itl_functions/canonical_path.py).
CANONICAL_PATH = "CanonicalPathFunction"
#: The probes /health and /ready: plain handlers, no operation of the app (itl_functions/health.py).
PROBES = ("HealthFunction", "ReadyFunction")
#: The DGX Platform's callbacks (POST /dgx/callbacks): a plain handler, no operation of the app; it builds the
#: callback service, which loads the DGX client only when a job's callback comes (itl_functions/dgx_callbacks.py).
DGX_CALLBACKS = "DgxCallbacksFunction"

#: The wiring attribute an API operation's route calls, by operation id prefix (None: it calls none).
SERVICE_OF_OPERATION = {
    "SparkNodes": "nodes",
    "SparkOllamaInstances": "instances",
    "SparkJobs": "jobs",
    "OperationStatuses": "operations",
    "OperationResults": "operations",
    "Subscriptions": "subscriptions",
    "AuditEvents": "audit",
    "Operations": None,
    "Quotas": "quotas",
    "Usages": "quotas",
    "Costs": "costs",
    "BillingExports": "billing_files",
    "Offers": "offers",
    "Budgets": "budgets",
    "CapacityReservations": "reservations",
    "Slo": "slo_report",
}
#: API operations that call the DGX Platform, and why: they load the DGX client (httpx) and nothing else of the list.
DGX_PROXIES = {
    "SparkJobs_GetLogs": "a job's log lives on the DGX Platform, whose logsUrl answers 401 to a user's token: the "
    "function reads it with the provider's key and pages it (services/api/job_logs.py)",
}
#: Handler modules whose functions call a service other than their operation prefix's.
#: API operations that write FOCUS rows, and why: they load billing/focus.py.
FOCUS_WRITERS = {
    "BillingExports_Get": "a subscription's billing file is its rows of the daily FOCUS export, in the export's own "
    "columns and cell text (billing/focus.py formats both)",
}
SERVICE_OF_MODULE = {"itl_functions.usage_stats": "usage_stats", "itl_functions.job_logs": "job_logs"}
#: The wiring attribute a workflow step or schedule builds on its first invocation.
#: The service a workflow step or schedule handler builds at its first invocation (the cold-start table's own map;
#: the ITL gateway registration builds no service: it is a client of the gateway (httpx), like the DGX client).
SERVICE_OF_HANDLER = SERVICES
ROUTE_MODULES = {
    "itl_accelerator.api.routes.spark_nodes",
    "itl_accelerator.api.routes.spark_ollama_instances",
    "itl_accelerator.api.routes.spark_jobs",
    "itl_accelerator.api.routes.operations",
    "itl_accelerator.api.routes.provider",
    "itl_accelerator.api.routes.usage_stats",
    "itl_accelerator.api.routes.quotas",
    "itl_accelerator.api.routes.costs",
    "itl_accelerator.api.routes.billing_exports",
    "itl_accelerator.api.routes.offers",
    "itl_accelerator.api.routes.budgets",
    "itl_accelerator.api.routes.job_logs",
    "itl_accelerator.api.routes.slo",
}
#: The routes whose operations read or write jobs - the jobs, their logs, a job operation's result, a job's usage
#: (the rest never load models/jobs.py).
JOB_ROUTE_MODULES = {
    "itl_accelerator.api.routes.spark_jobs",
    "itl_accelerator.api.routes.job_logs",
    "itl_accelerator.api.routes.operations",
    "itl_accelerator.api.routes.usage_stats",
}
NEVER_IN_API = (
    "aws_xray_sdk",
    "httpx",
    "jwt",
    "itl_accelerator.dgx",
    "itl_accelerator.auth.tokens",
    "itl_accelerator.services.workflows.instance_steps",
    "itl_accelerator.services.workflows.deprovision_steps",
    "itl_accelerator.services.workflows.job_steps",
    "itl_accelerator.services.common.placement",
    "itl_accelerator.services.common.metering",
    "itl_accelerator.services.schedules",
    "itl_accelerator.services.streams",
    "itl_accelerator.billing.focus",
)
CLIENTS = (
    "dynamodb_client=object(), stepfunctions_client=object(), s3_client=object(), events_client=object(), "
    "cloudwatch_client=object()"
)

_CHILD = """
import importlib, json, sys
handler = getattr(importlib.import_module({module!r}), {attr!r})
{build}
print(json.dumps(sorted(sys.modules)))
"""


def loaded(handler: str, build: str) -> set[str]:
    """The modules loaded once ``handler``'s module is imported and ``build`` ran, in a fresh interpreter."""
    module, _, attr = handler.rpartition(".")
    # EVENT_BUS_NAME: the state-change events' function is given its bus by the template (it refuses to start without)
    # API_NAME/API_STAGE: the SLO report's, likewise (where it reads the API's metrics)
    given = {
        "EVENT_BUS_NAME": "cold-start-bus",
        "AUDIT_ARCHIVE_BUCKET": "cold-start-archive",
        "API_NAME": "cold-start-api",
        "API_STAGE": "v1",
    }
    env = {**given, **os.environ, "POWERTOOLS_TRACE_DISABLED": "true"}
    env["AWS_DEFAULT_REGION"] = "us-east-1"
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(module=module, attr=attr, build=build)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def within(names: set[str], packages: tuple[str, ...]) -> set[str]:
    """Those of ``names`` that are one of ``packages`` or inside one."""
    return {n for n in names for p in packages if n == p or n.startswith(p + ".")}


def _api_groups() -> dict[tuple[str, str | None], list[str]]:
    """(handler module, service) → the API functions that share them."""
    groups: dict[tuple[str, str | None], list[str]] = {}
    for function_id in sorted(API - {MCP, CANONICAL_PATH, DGX_CALLBACKS, *PROBES}):
        handler = FUNCTIONS[function_id]["Handler"]
        module = handler.rpartition(".")[0]
        operation_id = str(load_handler(handler).operation_id)
        service = SERVICE_OF_MODULE.get(module) or SERVICE_OF_OPERATION[operation_id.split("_")[0]]
        groups.setdefault((module, service), []).append(function_id)
    return groups


API_GROUPS = _api_groups()


@pytest.mark.parametrize(("module", "service"), sorted(API_GROUPS, key=str))
def test_an_api_function_loads_its_own_operation_only(module, service):
    # Given the functions of one handler module calling one service (their first handler stands for them all)
    functions = API_GROUPS[(module, service)]
    handler = FUNCTIONS[functions[0]]["Handler"]
    own_router = str(load_handler(handler).router.routes[0].endpoint.__module__)
    # When a fresh interpreter imports it, builds its app and the service its operation calls (a cold start)
    build = (
        "from itl_accelerator.api.app import build_app\n"
        "build_app(operation_ids={handler.operation_id}, routers=[handler.router])\n"
        "from itl_accelerator.wiring import Wiring\n"
        f"c = Wiring.build({CLIENTS})\n" + (f"c.{service}\n" if service else "")
    )
    names = loaded(handler, build)
    # Then nothing its operations never use is loaded (a DGX proxy: the DGX client and httpx, for the reason given)
    proxies = {str(load_handler(FUNCTIONS[f]["Handler"]).operation_id) for f in functions} & set(DGX_PROXIES)
    focus = {str(load_handler(FUNCTIONS[f]["Handler"]).operation_id) for f in functions} & set(FOCUS_WRITERS)
    never = tuple(
        n
        for n in NEVER_IN_API
        if not (proxies and n in ("httpx", "itl_accelerator.dgx"))
        and not (focus and n == "itl_accelerator.billing.focus")
    )
    assert not within(names, never), f"{functions} load {sorted(within(names, never))}"
    if proxies:
        assert within(names, ("itl_accelerator.dgx.client",)), "the job log proxy builds its DGX client at once"
    others = (ROUTE_MODULES - {own_router}) & names
    assert not others, f"{functions} load the routes of other operations: {sorted(others)}"
    # and a function that serves no job loads no job model (an audit event imports its masking when it is built)
    if own_router not in JOB_ROUTE_MODULES:
        assert "itl_accelerator.models.jobs" not in names, f"{functions} load itl_accelerator.models.jobs"


def test_the_mcp_function_loads_nothing_of_the_provider_and_no_aws_sdk():
    # Given the MCP function, a client of the API: its import, then what its first invocation builds (the server
    # and the streamable-HTTP app, for a caller)
    build = (
        "from itl_accelerator_mcp.api import ApiClient\n"
        "from itl_accelerator_mcp.caller import Caller\n"
        "from itl_accelerator_mcp.server import build_server\n"
        "build_server(ApiClient('https://api.example', 't'), Caller('alice')).streamable_http_app(json_response=True)\n"
        "import mangum\n"
    )
    names = loaded(FUNCTIONS[MCP]["Handler"], build)
    # Then none of the provider's own packages (it calls the API over HTTP), no FastAPI, no boto3 (only the quote
    # key's first read needs it, in AWS) and no X-Ray
    never = ("itl_accelerator", "itl_functions", "fastapi", "boto3", "aws_xray_sdk")
    assert not within(names, never), f"the MCP function loads {sorted(within(names, never))}"


def test_the_authorizer_loads_no_web_framework_no_aws_sdk_and_no_x_ray():
    build = (
        "from itl_accelerator.auth.tokens import TokenValidator\n"
        "from itl_accelerator.settings import get_settings\n"
        "TokenValidator(get_settings())\n"
    )
    names = loaded(AUTHORIZER, build)
    never = ("fastapi", "starlette", "mangum", "boto3", "aws_xray_sdk")
    assert not within(names, never), f"the authorizer loads {sorted(within(names, never))}"


def test_the_canonical_path_function_loads_no_web_framework_and_no_aws_sdk():
    names = loaded(FUNCTIONS[CANONICAL_PATH]["Handler"], "")
    never = ("fastapi", "starlette", "mangum", "boto3", "httpx", "aws_xray_sdk", "itl_accelerator.services")
    assert not within(names, never), f"the canonical path function loads {sorted(within(names, never))}"


@pytest.mark.parametrize("function_id", PROBES)
def test_the_probes_load_no_web_framework_and_no_x_ray(function_id):
    # /ready builds its wiring's store probe (a DynamoDB client) on its first invocation; /health builds nothing
    build = "from itl_accelerator.wiring import Wiring\nWiring.build(" + CLIENTS + ").repositories.probe\n"
    names = loaded(FUNCTIONS[function_id]["Handler"], build if function_id == "ReadyFunction" else "")
    never = ("fastapi", "starlette", "mangum", "httpx", "aws_xray_sdk", "itl_accelerator.services")
    assert not within(names, never), f"{function_id} loads {sorted(within(names, never))}"
    if function_id == "HealthFunction":
        assert not within(names, ("boto3",)), "/health needs no AWS SDK"


def test_the_dgx_callbacks_function_loads_no_web_framework_no_dgx_client_and_no_x_ray():
    # a cold start: the handler, then the service its first invocation builds (an instance's callback needs no more)
    build = "from itl_accelerator.wiring import Wiring\nWiring.build(" + CLIENTS + ").dgx_callbacks\n"
    names = loaded(FUNCTIONS[DGX_CALLBACKS]["Handler"], build)
    never = ("fastapi", "starlette", "mangum", "httpx", "itl_accelerator.dgx.client", "aws_xray_sdk", "jwt")
    assert not within(names, never), f"{DGX_CALLBACKS} loads {sorted(within(names, never))}"
    workflows = (
        "itl_accelerator.services.workflows.instance_steps",
        "itl_accelerator.services.workflows.deprovision_steps",
        "itl_accelerator.services.workflows.job_steps",
    )
    assert not within(names, workflows), f"{DGX_CALLBACKS} loads {sorted(within(names, workflows))}"


def _service_of(handler: str) -> str:
    return SERVICE_OF_HANDLER.get(handler) or SERVICE_OF_HANDLER[handler.rpartition(".")[0]]


STEP_GROUPS = sorted(
    {
        (FUNCTIONS[f]["Handler"].rpartition(".")[0], _service_of(FUNCTIONS[f]["Handler"])): FUNCTIONS[f]["Handler"]
        for f in FUNCTIONS
        if f not in API and FUNCTIONS[f]["Handler"] != AUTHORIZER
    }.items()
)


@pytest.mark.parametrize(("group", "handler"), STEP_GROUPS, ids=[f"{m}:{s}" for (m, s), _ in STEP_GROUPS])
def test_a_workflow_step_or_schedule_loads_no_web_framework_and_no_x_ray(group, handler):
    _, service = group
    names = loaded(handler, f"from itl_accelerator.wiring import Wiring\nWiring.build({CLIENTS}).{service}\n")
    never = ("fastapi", "mangum", "aws_xray_sdk")
    assert not within(names, never), f"{handler} loads {sorted(within(names, never))}"


def test_with_tracing_on_the_x_ray_sdk_loads_at_the_first_invocation_and_the_handler_is_traced():
    # Given tracing on (as in AWS: template.yaml sets Tracing: Active and no POWERTOOLS_TRACE_DISABLED), in a fresh
    # interpreter (Powertools' Tracer patches botocore process-wide)
    child = """
import json, sys
from itl_accelerator.observability import LambdaTracer
tracer = LambdaTracer("itl-accelerator-test")
@tracer.capture_lambda_handler(capture_response=False)
def handler(event, context):
    return {"n": event["n"]}
before = "aws_xray_sdk" in sys.modules
results = [handler({"n": n}, None) for n in range(2)]
print(json.dumps([before, "aws_xray_sdk" in sys.modules, type(tracer._tracer).__name__, results]))
"""
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "false"}
    done = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    before, after, tracer, results = json.loads(done.stdout.strip().splitlines()[-1])
    # Then the SDK was not loaded before the first invocation, was after it, and the handler ran inside the Tracer
    assert (before, after, tracer, results) == (False, True, "Tracer", [{"n": 0}, {"n": 1}])


@pytest.mark.parametrize("module", sorted({FUNCTIONS[f]["Handler"].rpartition(".")[0] for f in FUNCTIONS}))
def test_importing_a_handler_module_opens_no_client_and_fills_no_cache(module):
    """SnapStart snapshots the execution environment after its initialisation, which is the import of the handler
    module: nothing made then may outlive a restore (AWS credentials, connections, caches with clock readings,
    seeded random state). So the import makes none of them; the first invocation — after the restore — does."""
    child = f"""
import gc, json, sys
import {module}
import httpx
print(json.dumps({{
    "boto3 session": getattr(sys.modules.get("boto3"), "DEFAULT_SESSION", None) is not None,
    "botocore clients": sum(type(o).__module__ == "botocore.client" for o in gc.get_objects()),
    "httpx clients": sum(isinstance(o, httpx.Client) for o in gc.get_objects()),
    "containers": sum(type(o).__name__ == "Wiring" for o in gc.get_objects()),
}}))
"""
    env = {**os.environ, "POWERTOOLS_TRACE_DISABLED": "false", "AWS_DEFAULT_REGION": "us-east-1"}
    done = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout.strip().splitlines()[-1])
    assert made == {"boto3 session": False, "botocore clients": 0, "httpx clients": 0, "containers": 0}, made


def test_the_budget_monitor_loads_the_api_services_it_stops_with_only_when_a_budget_acts():
    """Most runs stop nothing: the job and instance services (and their models) are made when an exceeded budget's
    action first cancels a job or deletes an instance (wiring.py ``budget_monitor``)."""
    names = loaded(
        "itl_functions.schedules.monitor_budgets",
        f"from itl_accelerator.wiring import Wiring\nWiring.build({CLIENTS}).budget_monitor\n",
    )
    never = (
        "itl_accelerator.services.api.jobs",
        "itl_accelerator.services.api.instances",
        "itl_accelerator.models.jobs",
        "itl_accelerator.models.instances",
    )
    assert not within(names, never), f"the budget monitor loads {sorted(within(names, never))}"
