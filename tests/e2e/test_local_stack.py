"""Given the local stack started the way the README says (``itl-local up``), when a client with a dev token
from ``itl-local token`` calls it over HTTP, then the seed's node requests work end to end; the stack stops
cleanly on Ctrl-C and keeps data only when told to."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.conftest import SEED_NODE, free_port, node_body

pytestmark = pytest.mark.e2e
BIN = Path(sys.executable).parent


def stack_env(home: Path, ports: tuple[int, int, int, int]) -> dict[str, str]:
    """The environment of an ``itl-local`` run on ``ports`` (API, embedded AWS, issuer, DGX simulator): this
    process's, without any provider setting in it (the integration tests' session sets the table, the DGX URL and
    the state machines of its own in-process stack: a stack started after them must not use those)."""
    from itl_accelerator.settings import Settings

    # every name a setting is read by (CONTROLPLANE_API_URL too)
    settings = {variable for variables in Settings.environment_names().values() for variable in variables}
    env = {
        k: v
        for k, v in os.environ.items()
        # (ITL_MCP_*: the MCP server's settings, such as the session's quote-key secret)
        if k.upper() not in settings and k != "AWS_ENDPOINT_URL" and not k.upper().startswith("ITL_MCP_")
    }
    env.update(
        zip(("SERVICE_PORT", "LOCAL_AWS_PORT", "LOCAL_IDP_PORT", "LOCAL_DGX_PORT"), map(str, ports), strict=True)
    )
    env["LOCAL_HOME"] = str(home)
    return env


class Stack:
    def __init__(
        self,
        home: Path,
        data: Path | None = None,
        *,
        ports: tuple[int, int, int, int] | None = None,
        options: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ):
        # free_port() finds a port free now; another process (a client's ephemeral port, another test run's
        # stack) may take it before the stack binds it. Then the stack says so and exits, and it is started again
        # on other ports — unless the test chose the ports.
        for _ in range(1 if ports else 5):
            self.ports = ports or (free_port(), free_port(), free_port(), free_port())
            if self._start(home, data, options, env) or "in use" not in self.text:
                break
        if "local stack ready" not in self.text:
            raise AssertionError("stack did not start:\n" + self.text)

    def _start(self, home: Path, data: Path | None, options: tuple[str, ...], env: dict[str, str] | None) -> bool:
        """Start ``itl-local up`` on ``self.ports``; whether it said it is ready (within 180 s)."""
        self.port, self.aws_port, self.idp_port, self.dgx_port = self.ports
        self.env = {**stack_env(home, self.ports), **(env or {})}
        args = [str(BIN / "itl-local"), "up", *options] + (["--data", str(data)] if data else [])
        self.proc = subprocess.Popen(args, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.output: list[str] = []
        deadline = time.monotonic() + 180  # about 20 s on a busy machine: the limit only catches a hang
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                break
            self.output.append(line)
            if "local stack ready" in line:
                # Read what it prints while it serves as it comes, so a full pipe never blocks the stack
                self.reader = threading.Thread(target=self._read, daemon=True)
                self.reader.start()
                return True
        self.proc.kill()
        self.proc.wait(timeout=30)
        return False

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.output.append(line)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def token(self, *args: str) -> str:
        out = subprocess.run(
            [str(BIN / "itl-local"), "token", *args], env=self.env, capture_output=True, text=True, check=True
        )
        return out.stdout.strip()

    def simulator_config(self, **fields: object) -> dict[str, object]:
        """Sets fields of the stack's DGX simulator (``POST /_simulator/config``); its whole config after."""
        response = httpx.post(f"http://127.0.0.1:{self.dgx_port}/_simulator/config", json=fields, timeout=30)
        response.raise_for_status()
        return response.json()

    @contextmanager
    def provisioning_held(self) -> Iterator[None]:
        """Within it, the DGX simulator keeps every instance Provisioning (``hold_provisioning``); let go after."""
        self.simulator_config(hold_provisioning=True)
        try:
            yield
        finally:
            self.simulator_config(hold_provisioning=False)

    def stop(self) -> int:
        """Ctrl-C, then wait for the stack to stop: usually about a second, longer on a busy machine while schedules
        and stream batches finish — the limit only catches a stack that hangs."""
        self.proc.send_signal(signal.SIGINT)
        try:
            code = self.proc.wait(timeout=120)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        self.reader.join(timeout=10)
        return code

    @property
    def text(self) -> str:
        return "".join(self.output)


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path)
    yield s
    if s.proc.poll() is None:
        s.stop()


def test_seed_node_requests_over_http(stack: Stack):
    # Given a dev admin token printed alone on stdout
    token = stack.token("--sub", "alice", "--role", "itl-accelerator-admin", "--scope", "/subscriptions/sub-123")
    assert token.count(".") == 2 and "\n" not in token
    auth = {"Authorization": f"Bearer {token}"}
    base = f"{stack.url}/subscriptions/sub-123/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes"
    with httpx.Client(headers=auth, timeout=30) as http:
        # When the seed's requests are sent as curl would send them
        created = http.post(base, content=httpx.Request("POST", base, json=SEED_NODE).content)
        assert created.status_code == 201, created.text
        assert http.get(base).json()["value"][0]["name"] == "dgx-1"
        assert http.get(f"{base}/dgx-1").json()["properties"]["owner"] == "owner-123"
        patched = http.patch(f"{base}/dgx-1", json={"properties": {"pricing": {"pricePerGpuHour": 3.0}}})
        assert patched.status_code == 200 and patched.json()["properties"]["pricing"]["pricePerGpuHour"] == 3.0
        assert http.delete(f"{base}/dgx-1").status_code == 200
        assert http.get(f"{base}/dgx-1").status_code == 404
        # And a call without a token is refused by the gateway with an ARM body
        anonymous = httpx.get(base, timeout=30)
        assert anonymous.status_code == 401
        assert anonymous.json()["error"]["code"] == "AuthenticationFailed"
        # And a path the template does not declare does not exist locally either
        missing = http.get(f"{stack.url}/subscriptions/sub-123/providers/ITL.Accelerator/unknownThings")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "NotFound"
    # Then Ctrl-C stops it cleanly
    assert stack.stop() == 0


def _node_status(stack: Stack, method: str, **kw) -> int:
    token = stack.token("--sub", "alice", "--role", "itl-accelerator-admin", "--scope", "/subscriptions/sub-9")
    base = f"{stack.url}/subscriptions/sub-9/resourceGroups/rg/providers/ITL.Accelerator/sparkNodes"
    url = base if method == "POST" else f"{base}/dgx-1"
    return httpx.request(method, url, headers={"Authorization": f"Bearer {token}"}, timeout=30, **kw).status_code


def test_data_kept_only_when_asked(tmp_path: Path):
    data = tmp_path / "state.jsonl"
    first = Stack(tmp_path, data)
    assert _node_status(first, "POST", json=SEED_NODE) == 201
    assert first.stop() == 0
    # Given a restart with the same data file, the node is still there
    second = Stack(tmp_path, data)
    try:
        assert _node_status(second, "GET") == 200
    finally:
        second.stop()
    # And without it, a fresh stack starts empty
    third = Stack(tmp_path)
    try:
        assert _node_status(third, "GET") == 404
    finally:
        third.stop()


def run_readme_block(
    stack: Stack, marker: str, replacements: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The README's bash block after ``marker``, run verbatim with bash against the stack (only the port, the
    location of the token command and of the venv's commands — this test's venv — and the given ``replacements``
    differ)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split(marker, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    script = block.replace(".venv/bin/", f"{BIN}/").replace("./dev token", f"{BIN / 'itl-local'} token")
    for old, new in (replacements or {}).items():
        assert old in script, f"{old!r} is not in the README block {marker}"
        script = script.replace(old, new)
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env={**stack.env, "BASE": stack.url},
        capture_output=True,
        text=True,
        # a guard against a hung block, not a wait: the billing block runs ./dev five times, exports, downloads and
        # validates a FOCUS file — 35 s alone, over 180 s beside three workers and browsers on two cores
        timeout=600,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_readme_jobs_example_runs_as_written(stack: Stack):
    """Given the README's job walkthrough (the seed's requests), run verbatim: the job is submitted, listed by
    submitter, watched to Succeeded, costed and deleted."""
    done = run_readme_block(stack, "<!-- worked-example-jobs -->")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "node: 201" in lines and "job-1" in lines and "alice" in lines
    assert "job: Succeeded" in lines and lines.count("Succeeded") == 1  # the operation's status
    cost = next(line for line in lines if "'currency': 'USD'" in line)
    assert "'amount': '0.000000'" not in cost, cost  # the node's price, not a free node's zero
    assert "delete: 200" in lines


def test_readme_usage_and_billing_example_runs_as_written(stack: Stack, tmp_path: Path):
    """Given the README's metering walkthrough, run verbatim (downloading into a temporary directory): an instance
    and a job run, the schedules fire, the node's stats earnings equal what the day's FOCUS export bills for it
    (the block checks that itself), and focus-validator passes the file."""
    out = tmp_path / "exports"
    done = run_readme_block(
        stack, "<!-- worked-example-usage -->", {"--out exports": f"--out {out}", " exports/": f" {out}/"}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = next(line for line in done.stdout.splitlines() if line.startswith("node dgx-meter: earned"))
    earned, billed = re.findall(r"(\d+\.\d+) USD", summary)
    assert earned == billed and float(earned) > 0, summary
    assert [p.name for p in out.glob("*.csv.gz")] and [p.name for p in out.glob("manifest-*.json")]


def test_readme_worked_example_runs_as_written(stack: Stack):
    """Given the README's instance walkthrough, run verbatim with bash against the stack (only the port and the
    token command's location differ), then every step succeeds: 202 with status_url, Succeeded, an Ollama reply,
    delete, and the GPUs free again."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("<!-- worked-example -->", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    script = block.replace("./dev token", f"{BIN / 'itl-local'} token")
    env = {**stack.env, "BASE": stack.url}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "operation: Succeeded" in done.stdout
    assert "Hello from the DGX simulator." in done.stdout
    assert "delete: 202" in done.stdout
    assert "'allocatedGpus': 0" in done.stdout


def _time_wait_ports(ports: set[int]) -> set[int]:
    """Those of ``ports`` that a socket in TIME-WAIT holds as its local port (Linux: /proc/net/tcp, state 06)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state = row.split()[1], row.split()[3]
            if state == "06" and int(local.rsplit(":", 1)[1], 16) in ports:
                found.add(int(local.rsplit(":", 1)[1], 16))
    return found


def test_restarts_at_once_on_the_same_ports(tmp_path: Path):
    """Given a stack that served authenticated calls (the authorizer's JWKS fetch, DynamoDB calls, a refused
    oversize body) and was stopped with Ctrl-C while connections were open, so the servers closed them first and
    TIME-WAIT sockets remain on its ports, when it is started again at once on the same ports, then it comes up."""
    first = Stack(tmp_path)
    scope = ("--sub", "alice", "--role", "itl-accelerator-admin", "--scope", "/subscriptions/sub-123")
    base = f"{first.url}/subscriptions/sub-123/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes"
    with httpx.Client(headers={"Authorization": f"Bearer {first.token(*scope)}"}, timeout=30) as http:
        assert http.post(base, json=SEED_NODE).status_code == 201
        assert http.get(f"{base}/dgx-1").status_code == 200
        assert http.put(f"{base}/dgx-2", content=b"x" * 70_000).status_code == 413
        assert first.stop() == 0
    assert _time_wait_ports(set(first.ports)), "the servers closed no connection first: nothing is tested"
    second = Stack(tmp_path, ports=first.ports)
    try:
        listed = httpx.get(base, headers={"Authorization": f"Bearer {second.token(*scope)}"}, timeout=30)
        assert listed.json() == {"value": [], "nextLink": None}
    finally:
        assert second.stop() == 0


def test_a_port_something_listens_on_is_refused(tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = (free_port(), free_port(), taken.getsockname()[1], free_port())
        done = subprocess.run(
            [str(BIN / "itl-local"), "up"], env=stack_env(tmp_path, ports), capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"127.0.0.1:{ports[2]} is in use (another ./dev up?). Stop it, or choose another port with LOCAL_IDP_PORT."
    )


def _provision(stack: Stack, token: str) -> tuple[str, str]:
    """Create dgx-1 and provision instance-1 on it as the README's worked example does, until Succeeded. Returns
    (the node PUT's request id, the operation id)."""
    nodes = f"{stack.url}/subscriptions/sub-123/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes"
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        created = http.put(f"{nodes}/dgx-1", json=node_body())
        assert created.status_code == 201, created.text
        accepted = http.post(
            f"{nodes}/dgx-1/sparkOllamaInstances",
            json={"name": "instance-1", "model": "mistral:7b", "gpus": 2, "memory_gb": 160},
        )
        assert accepted.status_code == 202, accepted.text
        status_url = accepted.json()["status_url"]
        deadline = time.monotonic() + 60
        while (status := http.get(status_url).json()["status"]) not in ("Succeeded", "Failed", "Canceled"):
            assert time.monotonic() < deadline, status
            time.sleep(1)
        assert status == "Succeeded"
    return created.headers["x-amzn-RequestId"], status_url.split("?")[0].rsplit("/", 1)[1]


def test_up_prints_each_request_each_workflow_step_and_the_functions_logs(stack: Stack):
    """Given ``itl-local up``, when an instance is provisioned and a bad token is sent, then the stack prints one
    line per request (time, method, path, status, function, duration, request id), one per workflow step (function,
    operation id, outcome, duration) and the functions' own structured log lines at LOG_LEVEL (INFO)."""
    token = stack.token("--sub", "alice", "--role", "itl-accelerator-admin", "--scope", "/subscriptions/sub-123")
    request_id, operation = _provision(stack, token)
    path = "/subscriptions/sub-123/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes"
    assert (
        httpx.get(f"{stack.url}{path}", headers={"Authorization": "Bearer not-a-token"}, timeout=30).status_code == 401
    )
    assert stack.stop() == 0
    text = stack.text
    node_put = rf"^\d\d:\d\d:\d\d PUT {path}/dgx-1 201 SparkNodesCreateOrUpdateFunction \d+ms req={request_id}$"
    assert re.search(node_put, text, re.M), text
    assert re.search(
        rf"^\d\d:\d\d:\d\d POST {path}/dgx-1/sparkOllamaInstances 202 SparkOllamaInstancesCreate", text, re.M
    )
    for function in ("InstanceRequestFunction", "InstancePollFunction", "InstanceCompleteFunction"):
        assert re.search(rf"^\d\d:\d\d:\d\d step {function} op={operation} ok \d+ms$", text, re.M), function
    assert re.search(
        rf"^\d\d:\d\d:\d\d GET {path} 401 SparkNodesListByResourceGroupFunction .* \(UNAUTHORIZED\)$", text, re.M
    )
    assert '"message":"Token refused"' in text


def test_up_quiet_prints_only_the_start_and_stop_lines(tmp_path: Path):
    stack = Stack(tmp_path, options=("--quiet",))
    token = stack.token("--sub", "alice", "--role", "itl-accelerator-admin", "--scope", "/subscriptions/sub-123")
    _provision(stack, token)
    nodes = f"{stack.url}/subscriptions/sub-123/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes"
    assert httpx.get(nodes, headers={"Authorization": "Bearer not-a-token"}, timeout=30).status_code == 401
    assert stack.stop() == 0
    assert len(stack.output) == 3, stack.text
    assert stack.output[0].startswith("ITL Accelerator local stack ready") and stack.output[2] == "stopping...\n"


def test_a_schedule_fires_on_demand_against_the_running_stack(stack: Stack):
    # Given the running stack, when `./dev schedule` lists and then fires the reconciler's schedule
    listed = subprocess.run(
        [str(BIN / "itl-local"), "schedule"], env=stack.env, capture_output=True, text=True, check=True
    )
    assert "ReconcilerFunction.Every5Minutes\trate(5 minutes)" in listed.stdout
    fired = subprocess.run(
        [str(BIN / "itl-local"), "schedule", "ReconcilerFunction"],
        env=stack.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # Then the handler ran against the stack's embedded AWS and printed its report
    assert fired.returncode == 0, fired.stdout + fired.stderr
    report = json.loads(fired.stdout)  # stdout is the report alone: the handler's log lines go to stderr
    assert report["examined"] == 0 and report["repaired"] == []
    # And an unknown schedule is a usage error naming the ones there are
    unknown = subprocess.run(
        [str(BIN / "itl-local"), "schedule", "Nope"], env=stack.env, capture_output=True, text=True
    )
    assert unknown.returncode == 2 and "ReconcilerFunction.Every5Minutes" in unknown.stderr
