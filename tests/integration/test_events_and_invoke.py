"""Given the sample events in events/ (one per function of template.yaml), when each runs through its real handler
(in-process, on the session's moto table) or through ``itl-local invoke`` (a subprocess), then it matches a route
the template declares for that function and gets an answer, never a crash."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from itl_local.lambda_runtime import invoke
from itl_local.template import Template, load_handler
from tests.conftest import ADMIN, REPO_ROOT

EVENTS_DIR = REPO_ROOT / "events"
AUTHORIZER = "AuthorizerFunction"
DEV_TOKEN = "${DEV_TOKEN}"
#: itl-local, from the venv running the tests (``.venv/bin/itl-local`` beside ``.venv/bin/python``).
ITL_LOCAL = Path(sys.executable).parent / ("itl-local.exe" if os.name == "nt" else "itl-local")

_TEMPLATE = Template()
FUNCTIONS: dict[str, dict[str, Any]] = _TEMPLATE.functions()
API_FUNCTIONS = sorted({r.function_id for r in _TEMPLATE.routes})
#: Run order for the in-process invocations: create before read, delete last (each must stand alone anyway).
ORDER = [
    "SubscriptionsCreateOrUpdateFunction",
    "SubscriptionsGetFunction",
    "SparkNodesCreateFunction",
    "SparkNodesCreateOrUpdateFunction",
    "SparkNodesGetFunction",
    "SparkNodesUpdateFunction",
    "SparkNodesListByResourceGroupFunction",
    "SparkNodesListBySubscriptionFunction",
    "OperationsListFunction",
    "AuditEventsListFunction",
    "SparkNodesDeleteFunction",
]
API_IN_ORDER = [f for f in ORDER if f in API_FUNCTIONS] + [f for f in API_FUNCTIONS if f not in ORDER]


def event_text(function_id: str) -> str:
    return (EVENTS_DIR / f"{function_id}.json").read_text()


def load_event(function_id: str, token: str = "dev-token-not-checked-by-functions") -> dict[str, Any]:
    """The event file as JSON, ``${DEV_TOKEN}`` replaced (as ``itl-local invoke`` does)."""
    return json.loads(event_text(function_id).replace(DEV_TOKEN, token))


def header(result: dict[str, Any], name: str) -> str | None:
    """A response header of a proxy result, case-insensitive, from ``headers`` or ``multiValueHeaders``."""
    for key, value in (result.get("headers") or {}).items():
        if key.lower() == name:
            return str(value)
    for key, values in (result.get("multiValueHeaders") or {}).items():
        if key.lower() == name and values:
            return str(values[-1])
    return None


def last_json_document(stdout: str) -> Any:
    """The pretty-printed JSON the CLI prints last (log lines, if any, come before it)."""
    starts = [m.start() for m in re.finditer(r"^\{$", stdout, re.MULTILINE)]
    assert starts, f"no JSON document in the output:\n{stdout}"
    return json.loads(stdout[starts[-1] :])


# ------------------------------------------------------------------------------------------------ event files
def test_every_function_of_the_template_has_exactly_one_event_file():
    # Given the functions template.yaml declares, and the event files
    files = {p.stem for p in EVENTS_DIR.glob("*.json")}
    # Then each function has events/<LogicalId>.json, and no event names an unknown function
    assert set(FUNCTIONS) - files == set(), "functions without a sample event"
    assert files - set(FUNCTIONS) == set(), "event files naming no function of template.yaml"


@pytest.mark.parametrize("function_id", API_FUNCTIONS)
def test_api_event_matches_a_route_of_its_function(function_id):
    # Given the function's sample event
    event = load_event(function_id)
    # When API Gateway routes it the way the emulator does (first route of template.routes matching method + path)
    routed = next(
        (
            r
            for r in _TEMPLATE.routes
            if r.method in (event["httpMethod"], "ANY") and r.match(event["path"]) is not None
        ),
        None,
    )
    # Then it lands on this very function, and the event's resource and path parameters are that route's
    assert routed is not None, f"{event['httpMethod']} {event['path']} matches no route of template.yaml"
    assert routed.function_id == function_id
    assert event["resource"] == routed.path == event["requestContext"]["resourcePath"]
    assert event["httpMethod"] == event["requestContext"]["httpMethod"]
    assert (event["pathParameters"] or {}) == routed.match(event["path"])
    assert event["requestContext"]["requestId"]


@pytest.mark.parametrize("function_id", API_FUNCTIONS)
def test_api_event_carries_an_authorizer_principal(function_id):
    from itl_accelerator.auth.principal import Principal

    # Given the authorizer context of the event
    raw = load_event(function_id)["requestContext"]["authorizer"]["principal"]
    # Then it is a Principal as the authorizer serialises it (a JSON string, round-tripping unchanged)
    assert isinstance(raw, str)
    principal = Principal.from_context(raw)
    assert principal.to_context() == raw
    assert principal.subject == "dev-admin"
    assert principal.roles == [ADMIN]
    assert principal.holds_subscription("sub-123")


# ------------------------------------------------------------------------------------------------ handlers
@pytest.mark.parametrize("function_id", sorted(FUNCTIONS))
def test_every_handler_of_the_template_imports_and_is_callable(function_id):
    handler = load_handler(FUNCTIONS[function_id]["Handler"])
    assert callable(handler)


@pytest.mark.parametrize("function_id", API_FUNCTIONS)
def test_every_api_function_builds_an_app_serving_exactly_its_route(function_id):
    from itl_accelerator.api.app import build_app

    # Given the function's handler and its operation id
    handler = load_handler(FUNCTIONS[function_id]["Handler"])
    operation_id = getattr(handler, "operation_id", None)
    assert isinstance(operation_id, str) and operation_id
    # When its app is built as on a cold start
    app = build_app(operation_ids={operation_id})
    # Then it serves this operation only, at the path and method template.yaml routes to the function (read from
    # the app's own OpenAPI document: FastAPI includes routers lazily, so app.routes does not list them)
    served = {
        (method.upper(), path, operation["operationId"])
        for path, operations in app.openapi()["paths"].items()
        for method, operation in operations.items()
    }
    declared = {(r.method, r.path, operation_id) for r in _TEMPLATE.routes if r.function_id == function_id}
    assert declared and served == declared


def test_the_authorizer_is_no_api_operation():
    assert AUTHORIZER in FUNCTIONS
    assert AUTHORIZER not in API_FUNCTIONS
    assert _TEMPLATE.authorizer_handler() == FUNCTIONS[AUTHORIZER]["Handler"]


@pytest.mark.parametrize("function_id", API_IN_ORDER)
def test_api_event_through_the_real_handler_answers_without_a_server_error(aws, function_id):
    # Given the function's real handler and its sample event
    handler = load_handler(FUNCTIONS[function_id]["Handler"])
    event = load_event(function_id)
    # When invoked as Lambda would (inside the session's moto)
    result = invoke(handler, event, function_id)
    # Then a proxy result comes back: no 5xx, and ARM's request id is the API Gateway request id
    assert isinstance(result, dict) and "statusCode" in result, result
    assert result["statusCode"] < 500, result
    assert header(result, "x-ms-request-id") == event["requestContext"]["requestId"]
    assert isinstance(result.get("body"), str)
    if result["body"]:
        json.loads(result["body"])


def test_authorizer_event_through_the_real_handler_allows_a_valid_token(aws, make_token):
    # Given the authorizer's sample event carrying a fresh dev token of the test issuer
    token = make_token("dev-admin", [ADMIN], ["/subscriptions/sub-123"])
    event = load_event(AUTHORIZER, token)
    handler = load_handler(FUNCTIONS[AUTHORIZER]["Handler"])
    # When invoked
    policy = invoke(handler, event, AUTHORIZER)
    # Then the whole API is allowed, and the principal travels in the context
    from itl_accelerator.auth.principal import ArmScope, Principal

    assert policy["principalId"] == "dev-admin"
    assert [s["Effect"] for s in policy["policyDocument"]["Statement"]] == ["Allow"]
    principal = Principal.from_context(policy["context"]["principal"])
    assert principal.roles == [ADMIN]
    assert principal.scopes == [ArmScope(subscription_id="sub-123")]


def test_authorizer_event_with_the_placeholder_left_in_is_unauthorized(aws):
    # Given the event file as is (the literal "${DEV_TOKEN}" is no token)
    event = json.loads(event_text(AUTHORIZER))
    handler = load_handler(FUNCTIONS[AUTHORIZER]["Handler"])
    # Then the authorizer refuses with API Gateway's "Unauthorized"
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        invoke(handler, event, AUTHORIZER)


# ------------------------------------------------------------------------------------------------ itl-local invoke
def run_invoke(function_id: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    env["LOCAL_HOME"] = str(home)  # dev signing key in a temporary directory, not the checkout's .local/
    return subprocess.run(
        [str(ITL_LOCAL), "invoke", function_id, "-e", f"events/{function_id}.json"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_itl_local_invoke_create_prints_a_201_proxy_result(tmp_path):
    assert ITL_LOCAL.exists(), f"{ITL_LOCAL} missing: install the project (pip install -e '.[dev]')"
    # When the create event runs through `itl-local invoke` (a fresh embedded AWS)
    done = run_invoke("SparkNodesCreateFunction", tmp_path)
    # Then it prints the proxy result: 201 with the created node
    assert done.returncode == 0, done.stderr
    result = last_json_document(done.stdout)
    assert result["statusCode"] == 201, result
    assert header(result, "x-ms-request-id")
    node = json.loads(result["body"])
    assert node["id"] == "/subscriptions/sub-123/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1"
    assert node["properties"]["provisioningState"] == "Succeeded"


def test_itl_local_invoke_authorizer_prints_an_allow_policy(tmp_path):
    # When the authorizer event runs through `itl-local invoke` (which puts a fresh dev token in ${DEV_TOKEN})
    done = run_invoke(AUTHORIZER, tmp_path)
    # Then it prints an Allow policy for the dev admin
    assert done.returncode == 0, done.stderr
    policy = last_json_document(done.stdout)
    assert policy["principalId"] == "dev-admin"
    assert [s["Effect"] for s in policy["policyDocument"]["Statement"]] == ["Allow"]
    assert json.loads(policy["context"]["principal"])["roles"] == [ADMIN]
