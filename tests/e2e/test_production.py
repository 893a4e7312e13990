"""Given the local stack started as the README says, with CONTROLPLANE_API_URL pointing at an ITL gateway (a fake
on loopback), then: it registers with the gateway and says so; /health and /ready answer without a token; a job's
log is followed with ``itlc-accelerator job logs --follow`` while it runs, to its last line; every state change of
the job is printed as the event a rule on the bus received; and the SLO report counts the stack's requests."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import serve
from tests.e2e.test_cli import CLI, Cli
from tests.e2e.test_local_stack import Stack
from tests.fake_itl_gateway import FakeItlGateway

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def itl() -> Iterator[FakeItlGateway]:
    gateway = FakeItlGateway()
    server, port = serve(gateway.app)
    gateway.url = f"http://127.0.0.1:{port}"
    yield gateway
    server.should_exit = True


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, itl: FakeItlGateway) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp("production-stack"), env={"CONTROLPLANE_API_URL": itl.url})
    yield s
    if s.proc.poll() is None:
        s.stop()


def wait_until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_up_registers_with_the_itl_gateway_and_says_so(stack: Stack, itl: FakeItlGateway):
    (registration,) = wait_until(lambda: list(itl.registrations), 60, "a registration")
    assert registration["namespace"] == "ITL.Accelerator" and registration["base_url"] == stack.url
    assert registration["baseUrl"] == stack.url and registration["health_endpoint"] == "/health"
    line = wait_until(lambda: re.search(r"^\d\d:\d\d:\d\d ITL gateway: registered .*$", stack.text, re.M), 30, "it")
    assert itl.url in line.group(0)
    # and the gateway's probe of the health endpoint it was given works without a token
    health = httpx.get(stack.url + registration["health_endpoint"], timeout=30)
    assert health.status_code == 200 and health.json()["status"] == "healthy"
    assert httpx.get(stack.url + "/ready", timeout=30).json()["ready"] is True


def test_a_running_jobs_log_is_followed_and_its_events_printed(stack: Stack):
    admin = Cli(stack, "alice", "itl-accelerator-admin", "sub-prod")
    admin("node", "create", "dgx-1", "--location", "us-east-1", "--sku", "DGX-H100-8GPU", "--gpus", "8")
    # The simulator holds the job Running until the test lets it end: "while it runs" is a condition, not a window
    # of seconds a busy machine can miss
    stack.simulator_config(hold_jobs=True)
    admin("job", "submit", "train-1", "--gpus", "4", "--memory-gb", "320", "--image", "nvcr.io/nvidia/pytorch:24.10-py3",
          "--env", "ITL_SIM_SECONDS=2", "--no-wait", "--", "python", "train.py")  # fmt: skip
    # When its log is followed from the start
    follower = admin.popen("job", "logs", "train-1", "--follow", "--interval", "0.5")
    assert follower.stdout is not None
    first_step = wait_until(lambda: (line := follower.stdout.readline()).startswith("step ") and line, 60, "a step")
    # Then its lines arrive while it runs ...
    assert admin.json("job", "show", "train-1")["properties"]["status"] == "Running", first_step
    stack.simulator_config(hold_jobs=False)
    rest, errors = follower.communicate(timeout=90)
    # ... and the command ends with the job, after its last line
    assert follower.returncode == 0, errors
    assert rest.splitlines()[-1] == "[dgx] container exited with code 0: job Succeeded"
    # And each state change of the job reached the bus's rule and was printed
    job_id = "/subscriptions/sub-prod/resourceGroups/rg1/providers/ITL.Accelerator/sparkJobs/train-1"
    changes = ["(new) -> Pending", "Pending -> Scheduled", "Scheduled -> Running", "Running -> Succeeded"]
    wait_until(lambda: "Running -> Succeeded" in stack.text, 30, "the job's last event")
    printed = re.findall(rf"^\d\d:\d\d:\d\d event Job State Changed {re.escape(job_id)} (.*)$", stack.text, re.M)
    assert printed == changes
    assert re.search(r"event Node State Changed \S+/sparkNodes/dgx-1 \(new\) -> Available$", stack.text, re.M)


def test_the_slo_report_counts_the_stacks_requests(stack: Stack):
    admin = Cli(stack, "alice", "itl-accelerator-admin", "sub-prod")
    # a request answered before the report (this test may be the first on its stack: a worker starts its own)
    assert httpx.get(f"{stack.url}/health", timeout=30).status_code == 200
    report = admin.json("slo", "show")
    availability, latency = report["objectives"]
    assert availability["requests"] > 0 and availability["goalPercent"] == 99.9
    assert latency["thresholdMs"] == 1000 and "request log" in report["source"]
    consumer = Cli(stack, "bob", "itl-accelerator-consumer", "sub-prod")
    refused = subprocess.run([CLI, "slo", "show"], env=consumer.env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 1 and refused.stderr.startswith("ERROR: AuthorizationFailed:")
    assert json.loads(json.dumps(report))  # the body is plain JSON
