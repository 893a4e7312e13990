"""One permission check a request (services/common/access.py, api/routing.py): the route checks before the body is
read and the service it calls does not check the same permission again; what each role may do is unchanged (the
same answers, the same refusals audited once)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from itl_accelerator.api.app import build_app
from itl_accelerator.auth import rbac
from itl_accelerator.auth.principal import Principal
from tests.services.conftest import RG, SUB, Env, node_body

PROVIDER = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/ITL.Accelerator"
JOB = f"{PROVIDER}/sparkJobs/job-1"
NODE = f"{PROVIDER}/sparkNodes/dgx-1"
INSTANCE = f"{NODE}/sparkOllamaInstances/llama"
BUDGET = f"/subscriptions/{SUB}/providers/ITL.Accelerator/budgets/team"
JOB_BODY = {"properties": {"requestedGpus": 1, "requestedMemoryGb": 80}}


class Api:
    """The full API app over a services :class:`Env` (its in-memory store, fakes and clock); each request as
    ``principal``, as API Gateway's authorizer hands it on. ``checks`` counts the role checks by action."""

    def __init__(self, env: Env, monkeypatch: pytest.MonkeyPatch):
        self.env = env
        self.checks: Counter[str] = Counter()
        app = build_app(lambda: env.w)
        checked = rbac.has_permission

        def counted(principal: Principal, action: Any) -> bool:
            self.checks[action.name if isinstance(action, rbac.Permission) else action] += 1
            return checked(principal, action)

        monkeypatch.setattr(rbac, "has_permission", counted)

        async def as_called(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                raw = dict(scope["headers"])[b"x-test-principal"].decode()
                scope = {**scope, "aws.event": {"requestContext": {"requestId": "r", "authorizer": {"principal": raw}}}}
            await app(scope, receive, send)

        self.client = TestClient(as_called)

    def request(self, ctx: Any, method: str, path: str, body: Any = None) -> Any:
        self.checks.clear()
        headers = {"x-test-principal": ctx.principal.to_context()}
        return self.client.request(method, path, headers=headers, json=body)


@pytest.fixture
def api(env: Env, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    env.add_node()
    yield Api(env, monkeypatch)


@pytest.mark.parametrize(
    ("role", "status"),
    [("admin", 201), ("consumer", 201), ("supplier", 403)],
)
def test_a_job_submitted_is_authorised_once_and_each_role_answered_as_before(api: Api, role: str, status: int):
    response = api.request(getattr(api.env, role)(), "PUT", JOB, JOB_BODY)
    assert response.status_code == status, response.json()
    assert api.checks[rbac.JOBS_WRITE.name] == 1
    denied = [e for e in api.env.audit() if e.outcome == "Denied"]
    assert len(denied) == (status == 403)


def test_a_job_read_and_canceled_each_check_their_permission_once(api: Api):
    ann = api.env.consumer()
    assert api.request(ann, "PUT", JOB, JOB_BODY).status_code == 201
    assert api.request(ann, "GET", JOB).status_code == 200
    assert api.checks == {rbac.JOBS_READ.name: 1}
    assert api.request(ann, "POST", f"{JOB}/cancel").status_code == 202
    assert api.checks[rbac.JOBS_CANCEL.name] == 1
    # another consumer's job is not there for it: 404, the permission still checked once
    assert api.request(api.env.consumer("bob"), "GET", JOB).status_code == 404
    assert api.checks == {rbac.JOBS_READ.name: 1}


@pytest.mark.parametrize(
    ("role", "status", "checked"),
    [
        ("admin", 200, {rbac.NODES_WRITE.name: 1}),
        # a supplier acts with its pricing permission, after the full one was refused once
        ("supplier", 200, {rbac.NODES_WRITE.name: 1, rbac.NODES_PRICING_WRITE.name: 1}),
        ("consumer", 403, {rbac.NODES_WRITE.name: 1, rbac.NODES_PRICING_WRITE.name: 1}),
    ],
)
def test_a_node_written_is_authorised_once(api: Api, role: str, status: int, checked: dict[str, int]):
    response = api.request(getattr(api.env, role)(), "PUT", NODE, node_body(price=3.0))
    assert response.status_code == status, response.json()
    assert api.checks == checked
    patched = api.request(getattr(api.env, role)(), "PATCH", NODE, {"properties": {"pricing": {"pricePerGpuHour": 4}}})
    assert patched.status_code == status and api.checks == checked


def test_an_instance_and_a_budget_are_authorised_once(api: Api):
    admin = api.env.admin()
    body = {"properties": {"model": "mistral:7b", "gpus": 2, "memoryGb": 160}}
    assert api.request(admin, "PUT", INSTANCE, body).status_code == 201
    assert api.checks == {rbac.INSTANCES_WRITE.name: 1}
    budget = {"properties": {"amount": "10", "currency": "USD", "timePeriod": {"startDate": "2025-03-01T00:00:00Z"}}}
    assert api.request(admin, "PUT", BUDGET, budget).status_code == 201
    assert api.checks == {rbac.BUDGETS_WRITE.name: 1}
