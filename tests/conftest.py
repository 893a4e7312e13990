"""Shared fixtures: an embedded AWS (moto) with the table built from template.yaml (its stream delivered to the
functions that consume it), a dev OIDC issuer on loopback, and the API Gateway emulator of template.yaml in front
of the real handlers.

Every test gets its own subscription id (``sub``), so tests share one table without seeing each other's data —
the same tenant isolation the store enforces in production.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws
from starlette.testclient import TestClient

ADMIN, CONSUMER, SUPPLIER = "itl-accelerator-admin", "itl-accelerator-consumer", "itl-accelerator-supplier"
TABLE = "itl-accelerator-test"
BUCKET = "itl-billing-export-test"
EVENT_BUS = "itl-accelerator-events-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def dev_key(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from itl_local.devauth import load_or_create_key

    return load_or_create_key(tmp_path_factory.mktemp("devkeys"))


@pytest.fixture(scope="session")
def idp(dev_key: Any) -> Iterator[str]:
    """A dev OIDC issuer on a free loopback port; yields the issuer URL."""
    from itl_local.devauth import idp_app

    server, port = serve(idp_app(dev_key))
    yield f"http://127.0.0.1:{port}/realms/itl"
    server.should_exit = True


def serve(app: Any) -> tuple[Any, int]:
    """Run an ASGI app with uvicorn on a free loopback port in a daemon thread; returns (server, port)."""
    import uvicorn

    from itl_local.cli import KEEP_ALIVE_SECONDS

    # bound here and handed to uvicorn: a port found free and bound later could be taken in between (by a
    # client's ephemeral port or another test run), and uvicorn would then never start
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_level="warning", timeout_keep_alive=KEEP_ALIVE_SECONDS
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), f"the server on 127.0.0.1:{port} did not start"
        time.sleep(0.01)
    return server, port


DGX_API_KEY = "test-dgx-key"


@pytest.fixture(scope="session")
def dgx_simulator() -> Iterator[Any]:
    """The DGX Platform simulator on a free loopback port (``.url`` added)."""
    from itl_local.dgx_simulator import DgxSimulator, SimulatorConfig

    simulator = DgxSimulator(
        SimulatorConfig(api_key=DGX_API_KEY, provisioning_seconds=1.0, deletion_seconds=0.2, job_seconds=2.0)
    )
    server, port = serve(simulator.app)
    simulator.url = f"http://127.0.0.1:{port}"
    yield simulator
    server.should_exit = True


@pytest.fixture
def dgx(dgx_simulator: Any) -> Iterator[Any]:
    """The simulator with its default behaviour restored after the test."""
    from dataclasses import replace

    saved = replace(dgx_simulator.config)
    yield dgx_simulator
    dgx_simulator.config = saved


@pytest.fixture(scope="session")
def itl_gateway() -> Iterator[Any]:
    """A fake ITL Control Plane API gateway on a free loopback port (tests/fake_itl_gateway.py): the provider
    registers with it."""
    from tests.fake_itl_gateway import FakeItlGateway

    gateway = FakeItlGateway()
    server, port = serve(gateway.app)
    gateway.url = f"http://127.0.0.1:{port}"
    yield gateway
    server.should_exit = True


@pytest.fixture(scope="session")
def environment(
    idp: str, dgx_simulator: Any, itl_gateway: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Process environment for the handlers, set before anything reads settings."""
    values = {
        # the API Gateway emulators' request log, which the SLO report reads locally (as CloudWatch in AWS)
        "API_REQUEST_LOG": str(tmp_path_factory.mktemp("api") / "requests.jsonl"),
        # the ITL gateway the provider registers with, and the base URL it tells it
        "CONTROL_PLANE_API_URL": itl_gateway.url,
        "PROVIDER_BASE_URL": "https://provider.test/v1",
        "PROVIDER_REGISTRATION_INTERVAL_SECONDS": "0.05",
        "DGX_PLATFORM_API_URL": dgx_simulator.url,
        "DGX_PLATFORM_API_KEY": DGX_API_KEY,
        "DGX_READ_TIMEOUT_SECONDS": "1",
        "DGX_ATTEMPTS": "2",
        "INSTANCE_POLL_INTERVAL_SECONDS": "1",
        "INSTANCE_PROVISION_TIMEOUT_SECONDS": "15",  # long enough for a held instance's checks on a busy machine
        "JOB_POLL_INTERVAL_SECONDS": "1",
        "JOB_POLL_MAX_INTERVAL_SECONDS": "2",
        "INSTANCE_WATCH_INTERVAL_SECONDS": "1",
        "JOB_STOP_TIMEOUT_SECONDS": "20",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "TABLE_NAME": TABLE,
        "BILLING_EXPORT_BUCKET": BUCKET,
        "EVENT_BUS_NAME": EVENT_BUS,
        "CONTROL_PLANE_AUTH_URL": idp.rsplit("/realms/", 1)[0],
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        # Rate limits on, so every request counts (the request budgets and the IAM check see the counters), but
        # out of reach: tests send bursts and poll by design. test_rate_limits.py spends a subscription's budget.
        **{f"RATE_LIMIT_{name}_PER_MINUTE": str(SUITE_RATE_LIMIT) for name in RATE_LIMITS},
    }
    saved = {
        k: os.environ.get(k)
        for k in [*values, "AWS_ENDPOINT_URL", *WORKFLOW_VARIABLES, DGX_SECRET_VARIABLE, MCP_QUOTE_SECRET_VARIABLE]
    }
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ.update(values)
    from itl_accelerator.settings import get_settings

    get_settings.cache_clear()
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def template() -> Any:
    from itl_local.template import Template

    return Template()


#: The suite's rate limit per minute, every scope and kind (the environment fixture).
SUITE_RATE_LIMIT = 1_000_000
RATE_LIMITS = ("SUBSCRIPTION_READS", "SUBSCRIPTION_WRITES", "CALLER_READS", "CALLER_WRITES")

WORKFLOW_VARIABLES = ("PROVISION_STATE_MACHINE_ARN", "DEPROVISION_STATE_MACHINE_ARN", "JOB_STATE_MACHINE_ARN")
DGX_SECRET_VARIABLE = "DGX_PLATFORM_API_KEY_SECRET_ID"
MCP_QUOTE_SECRET_VARIABLE = "ITL_MCP_QUOTE_SECRET_ID"


@pytest.fixture(scope="session")
def aws_calls(request: pytest.FixtureRequest, template: Any) -> Iterator[Any]:
    """Every AWS call each function makes during the session (an :class:`itl_local.aws_calls.CallRecorder`), checked
    against its policies in template.yaml by tests/integration/test_iam_policies.py, which runs last - in this
    session, or (``./dev test`` on pytest-xdist workers) in a run of its own that reads what each worker's session
    wrote when it ended (tests/recorded_calls.py)."""
    from itl_local.aws_calls import CallRecorder
    from tests.recorded_calls import RecordedCalls, writing_to

    recorder = CallRecorder()
    recorder.install()
    yield recorder
    recorder.uninstall()
    directory = writing_to()
    if directory is not None:
        summary = RecordedCalls.of(recorder, template, request.session.items, request.config.stash.get(DESELECTED, 0))
        summary.write(directory, os.environ.get("PYTEST_XDIST_WORKER", "main"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "last: runs after every other collected test (it checks what they did)")


#: The order tiers are handed to pytest-xdist's workers in: the longest tests first, so that no worker is left with
#: a minute-long end-to-end test while the others have finished (a single-process run keeps the directory order).
_DISTRIBUTED_ORDER = {"slurm": 0, "e2e": 0, "integration": 1, "fast": 2, "other": 2}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``last`` tests after every other; on pytest-xdist workers, the tiers longest first. A session that writes its
    AWS calls for a later run of the ``last`` tests (tests/recorded_calls.py) leaves those tests out: they run there."""
    from tests.recorded_calls import writing_to

    if writing_to() is not None:
        items[:] = [item for item in items if item.get_closest_marker("last") is None]
    distributed = "PYTEST_XDIST_WORKER" in os.environ
    items.sort(
        key=lambda item: (
            item.get_closest_marker("last") is not None,
            _DISTRIBUTED_ORDER[_tier(item.nodeid)] if distributed else 0,
        )
    )


DESELECTED = pytest.StashKey[int]()

#: The suite's tiers (``./dev test fast|integration|e2e``; ``./dev test`` runs them all): the test directories of each.
TIERS = {
    "fast": ("unit", "services", "contract"),
    "integration": ("integration",),
    "e2e": ("e2e",),
    "slurm": ("slurm",),
}
_TIER_SECONDS: dict[str, float] = {}  # this session's, by tier


def _tier(nodeid: str) -> str:
    parts = nodeid.split("/")
    directory = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
    return next((tier for tier, dirs in TIERS.items() if directory in dirs), "other")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each test's setup, call and teardown time, added to its tier's (session fixtures count in the first test
    that needs them)."""
    tier = _tier(report.nodeid)
    _TIER_SECONDS[tier] = _TIER_SECONDS.get(tier, 0.0) + report.duration


_STARTED = time.monotonic()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Each tier's time at the end of the run (issue 28: a developer runs one tier alone, CI runs all): the seconds
    its tests took (set-up, call, tear-down; on several pytest-xdist workers they add up to more than the run), then
    the run's own wall time."""
    seconds = _TIER_SECONDS
    if not seconds:
        return
    terminalreporter.section("time by tier")
    for tier in [*TIERS, "other"]:
        if tier in seconds:
            terminalreporter.write_line(f"{tier:<12} {seconds[tier]:8.1f} s of tests")
    workers = getattr(config.option, "numprocesses", None) or 1
    terminalreporter.write_line(
        f"{'wall':<12} {time.monotonic() - _STARTED:8.1f} s on {workers} worker{'s' if workers > 1 else ''}"
    )


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Count deselected tests (``-k``, ``-m``, ``--deselect``...): a ``last`` test can tell a partial session."""
    if items:
        config = items[0].config
        config.stash[DESELECTED] = config.stash.get(DESELECTED, 0) + len(items)


@pytest.fixture(scope="session")
def aws(environment: None, template: Any, aws_calls: Any) -> Iterator[Any]:
    """moto for the whole session: the table created from template.yaml's own definition, the template's
    state machines executing their real ASL with Lambda tasks calling the real step handlers in-process, and the
    DGX API key in a Secrets Manager secret, read from there as in AWS."""
    from itl_accelerator.settings import get_settings
    from itl_local.aws import create_table, make_dynamodb_faithful
    from itl_local.workflows import (
        MOTO_CONFIG,
        deploy_workflows,
        route_lambda_invocations_in_process,
        workflow_environment,
    )

    route_lambda_invocations_in_process()
    make_dynamodb_faithful()
    with mock_aws(config=MOTO_CONFIG):
        dynamodb = boto3.client("dynamodb")
        create_table(dynamodb, template, TABLE)
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        boto3.client("events").create_event_bus(Name=EVENT_BUS)  # template.yaml's EventBus (state-change events)
        machines = deploy_workflows(
            template, iam=boto3.client("iam"), lambda_client=boto3.client("lambda"), sfn=boto3.client("stepfunctions")
        )
        os.environ.update(workflow_environment(machines))
        secret = boto3.client("secretsmanager").create_secret(
            Name="itl-accelerator-dgx-api-key", SecretString=DGX_API_KEY
        )
        os.environ[DGX_SECRET_VARIABLE] = secret["ARN"]
        # the MCP server's quote key, read from its secret as in AWS (tests/integration/test_mcp.py)
        quote_key = boto3.client("secretsmanager").create_secret(
            Name="itl-accelerator-mcp-quote-key", SecretString=uuid.uuid4().hex * 2
        )
        os.environ[MCP_QUOTE_SECRET_VARIABLE] = quote_key["ARN"]
        aws_calls.bind(
            Table=TABLE,
            DgxApiKeySecret=secret["ARN"],
            McpQuoteSecret=quote_key["ARN"],
            BillingExportBucket=BUCKET,
            EventBus=EVENT_BUS,
        )
        get_settings.cache_clear()
        from itl_local.aws import trim_stream
        from itl_local.streams import StreamPoller

        # the table's stream delivered to its functions, as Lambda's event source mappings do (fleet changes,
        # state-change events)
        poller = StreamPoller(template, TABLE, trim=lambda sequence: trim_stream(TABLE, sequence))
        poller.start()
        yield dynamodb
        poller.stop()


@pytest.fixture(scope="module")
def schedules(aws: Any, template: Any) -> Iterator[None]:
    """The template's schedules fired every second while a module's tests run (the job tracker, the reconciler —
    each with the real clock, so the reconciler only touches what has truly stalled), through their real handlers,
    as EventBridge Scheduler would at their own rates. Tests of jobs need the tracker: a running job waits for it."""
    from itl_local.schedules import ScheduleRunner, schedules

    # the usage schedules are fired by the metering tests themselves, at moments they choose. One runner each: a
    # runner fires its schedules one at a time, and in AWS the tracker never waits for the reconciler (two
    # functions) — on a busy machine a reconciler run of a minute held every job's end back with it
    runners = [
        ScheduleRunner([s for s in schedules(template) if s.function_id == function_id], every=1.0)
        for function_id in ("JobTrackerFunction", "ReconcilerFunction")
    ]
    for runner in runners:
        runner.start()
    yield
    for runner in runners:
        runner.stop()


@pytest.fixture(scope="session")
def gateway(aws: Any, template: Any) -> Iterator[TestClient]:
    """The API Gateway emulator of template.yaml (real authorizer, real function handlers). Without the stage's
    throttling: the suite is no traffic to shield against, and a fast machine answering gateway refusals in a
    millisecond could drain the bucket (test_rate_limits.py checks the throttling on an emulator of its own)."""
    from itl_local.gateway import ApiGatewayEmulator

    with TestClient(ApiGatewayEmulator(template, throttle=False), base_url="http://testserver") as client:
        yield client


@pytest.fixture(scope="session")
def gateway_url(gateway: TestClient, template: Any) -> Iterator[str]:
    """The same API Gateway emulator served over real HTTP on loopback, for tests that send concurrent requests
    (each handler invocation runs on the emulator's pool, like concurrent Lambda execution environments)."""
    from itl_local.gateway import ApiGatewayEmulator

    server, port = serve(ApiGatewayEmulator(template, throttle=False))
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True


@pytest.fixture
def sub(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh subscription id for this test. When the test ends — passed or failed — nothing of it goes on in the
    background (:func:`stop_work_of`): a test that failed half-way cannot leave jobs running, tracked and placed,
    or workflows polling, to slow down or confuse the tests after it."""
    subscription = f"sub-{uuid.uuid4().hex[:12]}"
    yield subscription
    if "aws" in request.fixturenames:
        stop_work_of(subscription)


def stop_work_of(subscription: str) -> None:
    """Stop every running workflow execution of ``subscription`` and delete its resource partition (its nodes,
    instances, jobs, operations and meters): the job tracker, the reconciler, the usage sync and placement find
    nothing of it any more. Its audit trail and billing records stay (nothing works on them in the background)."""
    sfn, dynamodb = boto3.client("stepfunctions"), boto3.client("dynamodb")
    for machine in sfn.list_state_machines()["stateMachines"]:
        executions = sfn.list_executions(stateMachineArn=machine["stateMachineArn"], statusFilter="RUNNING")
        for execution in executions["executions"]:
            described = sfn.describe_execution(executionArn=execution["executionArn"])
            if json.loads(described.get("input") or "{}").get("subscriptionId") == subscription:
                # an execution that ends while it is stopped is gone (ExecutionDoesNotExist) or, in moto's
                # interpreter, between its states: its worker has no environment (AttributeError from moto, seen in a
                # loaded run). Either way it no longer works for the test that ended.
                with contextlib.suppress(sfn.exceptions.ExecutionDoesNotExist, AttributeError):
                    sfn.stop_execution(executionArn=execution["executionArn"], cause="the test ended")
    pages = dynamodb.get_paginator("query").paginate(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": f"SUB#{subscription.lower()}"}},
        ProjectionExpression="PK, SK",
    )
    for page in pages:
        for key in page["Items"]:
            dynamodb.delete_item(TableName=TABLE, Key=key)


@pytest.fixture(scope="session")
def make_token(dev_key: Any, idp: str) -> Callable[..., str]:
    """``make_token(subject, roles, scopes, **kw)`` → a dev RS256 token for the test issuer."""
    from itl_local.devauth import mint_token

    def make(subject: str, roles: list[str], scopes: list[str], **kw: Any) -> str:
        return mint_token(
            dev_key, issuer=idp, audience="itl-accelerator", subject=subject, roles=roles, scopes=scopes, **kw
        )

    return make


class Caller:
    """An HTTP client acting as one principal: ``caller.get(path)``, ``caller.put(path, json=...)``..."""

    def __init__(self, client: TestClient, token: str):
        self.client = client
        self.headers = {"Authorization": f"Bearer {token}"}

    def request(self, method: str, path: str, **kw: Any) -> Any:
        headers = {**self.headers, **kw.pop("headers", {})}
        return self.client.request(method, path, headers=headers, **kw)

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)

    def put(self, path: str, **kw: Any) -> Any:
        return self.request("PUT", path, **kw)

    def post(self, path: str, **kw: Any) -> Any:
        return self.request("POST", path, **kw)

    def patch(self, path: str, **kw: Any) -> Any:
        return self.request("PATCH", path, **kw)

    def delete(self, path: str, **kw: Any) -> Any:
        return self.request("DELETE", path, **kw)


@pytest.fixture
def caller(gateway: TestClient, make_token: Callable[..., str]) -> Callable[..., Caller]:
    """``caller(roles, scopes, subject="alice")`` → a :class:`Caller`."""

    def make(roles: list[str], scopes: list[str], subject: str = "alice", **kw: Any) -> Caller:
        return Caller(gateway, make_token(subject, roles, scopes, **kw))

    return make


@pytest.fixture
def admin(caller: Callable[..., Caller], sub: str) -> Caller:
    """An admin holding the whole test subscription."""
    return caller([ADMIN], [f"/subscriptions/{sub}"], subject="admin-1")


def nodes_path(sub: str, rg: str = "rg1", name: str | None = None) -> str:
    base = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/ITL.Accelerator/sparkNodes"
    return f"{base}/{name}" if name else base


#: The seed's create body, verbatim in shape (its "{...}" filled with plausible values).
SEED_NODE = {
    "name": "dgx-1",
    "location": "us-east-1",
    "sku": {"name": "DGX-H100-8GPU", "capacity": 8},
    "properties": {
        "owner": "owner-123",
        "hardwareSpecs": {
            "gpuModel": "H100",
            "gpuCount": 8,
            "gpuMemoryGb": 80,
            "cpuCores": 112,
            "memoryGb": 2048,
            "interconnect": "NVLink",
        },
        "pricing": {"currency": "USD", "pricePerGpuHour": 2.5},
    },
}


def node_body(**overrides: Any) -> dict[str, Any]:
    """A PUT body (no name) based on :data:`SEED_NODE`."""
    import copy

    body = copy.deepcopy({k: v for k, v in SEED_NODE.items() if k != "name"})
    body.update(overrides)
    return body


REPO_ROOT = Path(__file__).resolve().parents[1]
