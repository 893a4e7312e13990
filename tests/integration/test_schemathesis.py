"""Property-based API tests: schemathesis generates requests from the OpenAPI document the API serves and sends
them through the API Gateway emulator (real authorizer, real handlers) with a valid admin token.

Given any request the document allows (and the invalid ones schemathesis derives from it), then the API never
answers 5xx, and every answer is one the document declares: a documented status code, the documented content type
and a body matching the documented schema.

Bounded for CI: at most ~30 generated cases per operation (plus the schema examples and coverage cases), no
deadline, no example database, derandomised so a failure reproduces.
"""

from __future__ import annotations

import copy
import uuid
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from itl_accelerator.arm import DEFAULT_API_VERSION
from tests.conftest import ADMIN, SEED_NODE, node_body

#: The one subscription generated requests address: the token's scope covers it, so requests reach the services
#: instead of stopping at the tenant check (other subscriptions would all be 404s).
SUBSCRIPTION = f"sub-fuzz-{uuid.uuid4().hex[:8]}"

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


#: Examples added to a copy of the document, so schemathesis' examples phase also reaches the success paths (a
#: random body rarely is a consistent node): the seed's node, in an existing resource group, at the served version.
PARAMETER_EXAMPLES = {"resourceGroupName": "rg1", "nodeName": "dgx-1", "api-version": DEFAULT_API_VERSION}
BODY_EXAMPLES = {
    "SparkNodes_Create": SEED_NODE,
    "SparkNodes_CreateOrUpdate": node_body(tags={"env": "fuzz"}),
    "Subscriptions_CreateOrUpdate": {"state": "Registered"},
}


def with_examples(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` plus :data:`PARAMETER_EXAMPLES` and :data:`BODY_EXAMPLES` (schemas and responses untouched)."""
    document = copy.deepcopy(document)
    for item in document["paths"].values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                if parameter["name"] in PARAMETER_EXAMPLES:
                    parameter["example"] = PARAMETER_EXAMPLES[parameter["name"]]
            body = BODY_EXAMPLES.get(operation.get("operationId", ""))
            if body is not None:
                operation["requestBody"]["content"]["application/json"]["examples"] = {"seed": {"value": body}}
    return document


def load_schema() -> Any:
    """The served OpenAPI document (with :func:`with_examples`), generating requests for :data:`SUBSCRIPTION`.

    Built at collection (schemathesis parametrises from it); the settings it reads on the way are dropped again so
    fixtures that set the environment later see their own values. ``api-version`` is pinned to the served version:
    absent, empty and unknown versions are covered by test_arm_contract.py, and random ones would stop almost every
    generated request at that check."""
    from itl_accelerator.api.app import build_app
    from itl_accelerator.settings import get_settings

    try:
        document = build_app(with_docs=True).openapi()
    finally:
        get_settings.cache_clear()
    loaded = schemathesis.openapi.from_dict(with_examples(document))
    loaded.config.update(parameters={"subscriptionId": SUBSCRIPTION, "query.api-version": DEFAULT_API_VERSION})
    return loaded


schema = load_schema()


@pytest.fixture(scope="module")
def admin_token(make_token: Any) -> str:
    """An admin token whose scope is the generated requests' subscription."""
    return make_token("fuzz-admin", [ADMIN], [f"/subscriptions/{SUBSCRIPTION}"])


@schema.parametrize()
@settings(max_examples=30, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
def test_api_conforms_to_its_openapi_document(case: schemathesis.Case, gateway: Any, admin_token: str) -> None:
    # Given a generated request for one operation, when sent through API Gateway with a valid admin token
    response = case.call(app=gateway.app, headers={"Authorization": f"Bearer {admin_token}"})
    try:
        # Then no 5xx, and status, content type and body are as documented
        case.validate_response(response, checks=CHECKS)
        # And, as for every response of this API, a request id
        assert response.headers.get("x-ms-request-id"), f"{case.method} {case.formatted_path} lacks x-ms-request-id"
    finally:
        # Afterwards the subscription is Registered again, so the cases of later operations can write
        if (case.method.upper(), case.operation.path) == ("PUT", "/subscriptions/{subscriptionId}"):
            restored = gateway.put(
                f"/subscriptions/{SUBSCRIPTION}",
                json={"state": "Registered"},
                headers={"Authorization": f"Bearer {admin_token}"},
            )
            assert restored.status_code == 200, restored.text


def test_document_declares_every_operation_of_the_template(template: Any) -> None:
    # Given the OpenAPI document and the routes API Gateway serves (template.yaml)
    documented = {(method.upper(), path) for path, item in schema.raw_schema["paths"].items() for method in item}
    # (but the routes that are no operation of the app: the MCP endpoint and its OAuth metadata, JSON-RPC and RFC 9728,
    # not the ARM contract, docs/MCP.md, tests/integration/test_mcp.py; the catch-all that answers the documented paths
    # in any casing, tests/integration/test_trust.py; the unauthenticated probes /health and /ready, plain handlers
    # documented in docs/API_REFERENCE.md, tests/integration/test_itl_control_plane.py; the DGX Platform's signed
    # callbacks, a route of the DGX contract (docs/dgx-platform.openapi.yaml), tests/integration/test_dgx_callbacks.py)
    plain = ("McpFunction", "CanonicalPathFunction", "HealthFunction", "ReadyFunction", "DgxCallbacksFunction")
    served = {(route.method.upper(), route.path) for route in template.routes if route.function_id not in plain}
    # Then they are the same set, so the fuzzing above reaches every route
    assert documented == served
