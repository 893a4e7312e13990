"""Given the local stack (``itl-local up``, as the README starts it) whose nodes run on a real Slurm cluster started on
this machine (Debian's 22.05: nodes n1 and n2 of 8 fake H100s each, slurmrestd with JWT), when jobs and instances go
through the provider's API, then Slurm runs them where the provider placed them, and what a user sees — status,
reason, exit code, cost, GPUs held — is what Slurm did, through the faults a cluster has: cancel and preemption with
their grace period, a retried exit code, a 2-node gang, an Ollama instance serving, a node drained by the cluster's
admins, slurmd killed under a job, slurmctld restarted, slurmrestd unreachable (docs/SLURM.md).

Every test works in a subscription of its own and leaves no Slurm job running (``cluster`` cancels what is left), so a
failing test does not hold GPUs the next one needs. Waits poll a condition until a deadline; nothing sleeps a fixed
time."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import httpx
import pytest

from itl_accelerator.slurm import SlurmJob, SlurmRestClient, StaticToken
from itl_local.cli import slurm_environment
from itl_local.slurm_cluster import SlurmCluster, missing_binaries
from tests.e2e.test_local_stack import Stack

pytestmark = pytest.mark.e2e

#: How long a state may take on a busy 2-core machine (a job reaches RUNNING in about a second when idle).
DEADLINE = 240.0
PROVIDER = "providers/ITL.Accelerator"


def _skip_reason() -> str | None:
    missing = missing_binaries()
    if missing:
        return f"Slurm is not installed (missing: {', '.join(missing)}); ./dev slurm-install installs it"
    if os.geteuid() != 0:
        return "a local Slurm cluster needs root"
    return None


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    """n1, n2 of gpu:h100:8; KillWait 2 s (a cancel's SIGKILL), SlurmdTimeout 10 s (a dead slurmd's node DOWN)."""
    if (reason := _skip_reason()) is not None:
        pytest.skip(reason)
    directory = tempfile.mkdtemp(prefix="itl-slurm-backend-")
    os.chmod(directory, 0o755)
    running = SlurmCluster(directory, cluster_name="lab", kill_wait=2, slurmd_timeout=10)
    try:
        running.start()
        yield running
    finally:
        running.stop()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def stack(cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The local stack with the cluster as its Slurm cluster 'lab' (nodes registered without a backend run on the Slurm
    node of their name), a 5 s preemption grace period."""
    env = {**slurm_environment(cluster), "JOB_PREEMPTION_GRACE_SECONDS": "5"}
    running = Stack(tmp_path_factory.mktemp("stack"), options=("--quiet",), env=env)
    yield running
    if running.proc.poll() is None:
        running.stop()


@pytest.fixture
def lab(cluster: SlurmCluster, stack: Stack) -> Iterator[Lab]:
    world = Lab(stack, cluster)
    yield world
    # nothing of this test runs on after it: its jobs canceled on the cluster, every node back in service
    cluster.run("scancel", "--user=root", check=False)
    for node in cluster.node_names:
        if cluster.pid(f"slurmd-{node}") is None:
            cluster.start_slurmd(node)
    cluster.run("scontrol", "update", f"nodename={','.join(cluster.node_names)}", "state=resume", check=False)
    world.release_nodes()  # a Slurm node is one provider node: the next test's subscription registers it again
    world.http.close()


def wait_for(what: str, found: Callable[[], Any], deadline: float = DEADLINE) -> Any:
    """``found()`` once it is truthy (polled every half second); fails saying ``what`` after ``deadline`` s."""
    end = time.monotonic() + deadline
    last: Any = None
    while time.monotonic() < end:
        last = found()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {deadline:g} s (last: {last!r})")


class Lab:
    """One test's subscription on the stack, as its admin; the cluster to inspect and break."""

    def __init__(self, stack: Stack, cluster: SlurmCluster):
        self.stack, self.cluster = stack, cluster
        self.sub = f"sub-{uuid.uuid4().hex[:10]}"
        token = stack.token(
            "--sub", "admin", "--role", "itl-accelerator-admin", "--scope", f"/subscriptions/{self.sub}"
        )
        self.api = f"{stack.url}/subscriptions/{self.sub}/resourceGroups/rg1/{PROVIDER}"
        self.http = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        self.nodes: list[str] = []

    def release_nodes(self) -> None:
        """Delete the nodes this test registered, once their work has ended (their instances deleted first)."""
        for name in self.nodes:
            listed = self.http.get(f"{self.api}/sparkNodes/{name}/sparkOllamaInstances")
            for instance in listed.json().get("value", []) if listed.status_code == 200 else []:
                self.http.delete(f"{self.api}/sparkNodes/{name}/sparkOllamaInstances/{instance['name']}")
            wait_for(
                f"node {name} deleted once its work ended",
                lambda name=name: (
                    self.http.delete(f"{self.api}/sparkNodes/{name}").status_code in (200, 202, 204, 404)
                    and self.http.get(f"{self.api}/sparkNodes/{name}").status_code == 404
                ),
            )

    def node(self, name: str, *, price: float = 2.5, increment: int = 1, minimum: int = 0) -> dict[str, Any]:
        """Register ``name`` (8 H100s, the Slurm node of that name) at ``price`` per GPU-hour."""
        body = {
            "location": "eastus",
            "sku": {"name": "DGX-H100-8GPU", "capacity": 8},
            "properties": {
                "owner": "supplier-1",
                "hardwareSpecs": {"gpuModel": "H100", "gpuCount": 8, "gpuMemoryGb": 80},
                "pricing": {
                    "currency": "USD",
                    "pricePerGpuHour": price,
                    "billingIncrementSeconds": increment,
                    "minimumBillableSeconds": minimum,
                },
            },
        }
        created = self.http.put(f"{self.api}/sparkNodes/{name}", json=body)
        assert created.status_code == 201, created.text
        self.nodes.append(name)
        assert created.json()["properties"]["backend"] == {"type": "Slurm", "cluster": "lab", "nodeName": name}
        return dict(created.json())

    def submit(self, name: str, properties: dict[str, Any]) -> dict[str, Any]:
        accepted = self.http.put(f"{self.api}/sparkJobs/{name}", json={"properties": properties})
        assert accepted.status_code == 201, accepted.text
        return dict(accepted.json())

    def job(self, name: str) -> dict[str, Any]:
        answer = self.http.get(f"{self.api}/sparkJobs/{name}")
        assert answer.status_code == 200, answer.text  # never a 5xx, whatever the cluster does
        return dict(answer.json()["properties"])

    def until(self, name: str, *statuses: str) -> dict[str, Any]:
        """The job once its status is one of ``statuses``."""
        return dict(wait_for(f"{name} {statuses}", lambda: (p := self.job(name))["status"] in statuses and p))

    def allocated(self, node: str) -> int:
        return int(self.http.get(f"{self.api}/sparkNodes/{node}").json()["properties"]["capacity"]["allocatedGpus"])

    def slurm_job(self, job: dict[str, Any]) -> SlurmJob:
        """The Slurm job of the attempt ``job`` (its properties) is at, read through slurmrestd: found by the name the
        provider gives it (``itl-{operationId}``, ``.attempt-N`` for a later attempt)."""
        key = str(job["operationId"]) + (f".attempt-{job['attempt']}" if int(job.get("attempt") or 1) > 1 else "")
        with SlurmRestClient(self.cluster.url, "v0.0.38", "root", StaticToken(self.cluster.token())) as client:
            found = client.find_job(name=f"itl-{key}")
        assert found is not None, f"no Slurm job itl-{key}"
        return found


def money(gpu_seconds: int, price: str = "2.5") -> str:
    return str((Decimal(gpu_seconds) * Decimal(price) / 3600).quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP))


def command(script: str, **env: str) -> dict[str, Any]:
    """A workload that runs ``script`` with bash on the node (the cluster runs commands as they are: no container)."""
    return {"image": "nvcr.io/nvidia/pytorch:24.10-py3", "command": ["bash", "-c", script], "env": env}


# ------------------------------------------------------------------------------------------------------- jobs
def test_a_job_runs_on_the_node_placed_to_completed_and_is_billed_by_slurms_own_times(lab: Lab):
    lab.node("n1")
    lab.submit(
        "train",
        {"requestedGpus": 2, "requestedMemoryGb": 160, "workload": command("echo $CUDA_VISIBLE_DEVICES; sleep 3")},
    )
    running = lab.until("train", "Running", "Succeeded")
    assert "on Slurm cluster 'lab' (job" in running["statusReason"] or running["status"] == "Succeeded"
    done = lab.until("train", "Succeeded", "Failed")
    assert done["status"] == "Succeeded", done["statusReason"]
    # Slurm ran it where the provider placed it, with the GPUs it reserved
    slurm = lab.slurm_job(running)
    placed = done["assignedNode"].rsplit("/", 1)[1]
    assert slurm.nodes == [placed] and slurm.state == "COMPLETED"
    # billed from Slurm's own start to its own end, to the second, at the locked price
    assert slurm.start_time and slurm.end_time
    seconds = slurm.end_time - slurm.start_time
    assert done["gpuSeconds"] == 2 * seconds and done["billableGpuSeconds"] == 2 * seconds
    price = str(done["billingTerms"]["pricePerGpuHour"])
    assert done["cost"] == {"amount": money(2 * seconds, price), "currency": "USD"}
    assert done["startedAt"].startswith(time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(slurm.start_time)))
    # and its GPUs came back
    assert wait_for("GPUs released", lambda: lab.allocated(placed) == 0 or None) is not None


def test_an_exit_code_is_retried_to_success_and_each_attempt_billed(lab: Lab):
    lab.node("n1")
    lab.submit(
        "flaky",
        {
            "requestedGpus": 1,
            "requestedMemoryGb": 80,
            "jobType": "training",  # the default workload: its stand-in, told to exit 3 once, then 0
            "workload": {
                "image": "nvcr.io/nvidia/pytorch:24.10-py3",
                "command": ["python", "-m", "itl_workloads.train"],
                "env": {"ITL_SIM_SECONDS": "1", "ITL_SIM_EXIT_CODES": "3,0"},
            },
            "retryStrategy": {
                "attempts": 2,
                "evaluateOnExit": [{"onExitCode": "3", "action": "RETRY"}],
                "intervalSeconds": 1,
            },
        },
    )
    done = lab.until("flaky", "Succeeded", "Failed")
    assert done["status"] == "Succeeded", done["statusReason"]
    (first,) = done["attempts"][:1]
    assert first["status"] == "Failed" and first["exitCode"] == 3
    assert done["attempt"] == 2 and len(done["attempts"]) == 2
    assert Decimal(done["cost"]["amount"]) == sum(Decimal(a["cost"]["amount"]) for a in done["attempts"])


def test_a_cancel_stops_the_slurm_job_and_gives_the_gpus_back(lab: Lab):
    lab.node("n1")
    lab.submit("forever", {"requestedGpus": 4, "requestedMemoryGb": 320, "workload": command("sleep 3600")})
    running = lab.until("forever", "Running")
    assert lab.http.post(f"{lab.api}/sparkJobs/forever/cancel").status_code == 202
    done = lab.until("forever", "Canceled", "Failed", "Succeeded")
    assert done["status"] == "Canceled" and done["statusReason"].startswith("Canceled by admin")
    assert wait_for("Slurm's job cancelled", lambda: lab.slurm_job(running).state == "CANCELLED")
    assert wait_for("GPUs released", lambda: lab.allocated("n1") == 0 or None) is not None


def test_a_preempted_job_is_sent_sigterm_given_its_grace_and_the_higher_one_runs_on_its_node(lab: Lab):
    lab.node("n1")
    # a preemptible job that takes 2 s to stop after SIGTERM (the stand-in workload honours it)
    low = {
        "requestedGpus": 8,
        "requestedMemoryGb": 640,
        "priority": 1,
        "preemptible": True,
        "workload": {
            "image": "x",
            "command": ["python", "-m", "itl_workloads.train"],
            "env": {"ITL_SIM_FOREVER": "1", "ITL_SIM_SIGTERM_SECONDS": "2"},
        },
    }
    lab.submit("low", low)
    running = lab.until("low", "Running")
    lab.submit("high", {"requestedGpus": 8, "requestedMemoryGb": 640, "priority": 9, "workload": command("sleep 2")})
    preempted = lab.until("low", "Preempted", "Failed", "Canceled")
    assert preempted["status"] == "Preempted", preempted["statusReason"]
    assert "5 s grace period" in preempted["statusReason"]
    slurm = lab.slurm_job(running)
    # it was asked to stop (SIGTERM), stopped on its own within its grace: the stand-in exits 143
    assert slurm.state in ("FAILED", "COMPLETED", "CANCELLED") and (slurm.end_time or 0) > (slurm.start_time or 0)
    done = lab.until("high", "Succeeded", "Failed")
    assert done["status"] == "Succeeded" and done["assignedNode"].endswith("/n1")


def test_a_two_node_job_runs_on_both_nodes_as_one_slurm_job(lab: Lab):
    lab.node("n1")
    lab.node("n2")
    lab.submit(
        "gang",
        {"accelerator": {"kind": "GPU", "count": 8, "memoryGb": 640, "nodes": 2}, "workload": command("sleep 2")},
    )
    running = lab.until("gang", "Running", "Succeeded")
    done = lab.until("gang", "Succeeded", "Failed")
    assert done["status"] == "Succeeded", done["statusReason"]
    assert sorted(n.rsplit("/", 1)[1] for n in done["assignedNodes"]) == ["n1", "n2"]
    slurm = lab.slurm_job(running)
    assert slurm.nodes == ["n1", "n2"] and slurm.start_time and slurm.end_time
    seconds = slurm.end_time - slurm.start_time
    assert done["gpuSeconds"] == 16 * seconds  # 8 GPUs on each of the 2 nodes, metered apart


def test_an_ollama_instance_serves_from_its_slurm_job_until_deleted(lab: Lab):
    lab.node("n1")
    accepted = lab.http.post(
        f"{lab.api}/sparkNodes/n1/sparkOllamaInstances",
        json={"name": "llama", "model": "mistral:7b", "gpus": 2, "memory_gb": 160},
    )
    assert accepted.status_code == 202, accepted.text
    path = f"{lab.api}/sparkNodes/n1/sparkOllamaInstances/llama"

    def serving() -> dict[str, Any] | None:
        props = lab.http.get(path).json()["properties"]
        return props if props["provisioningState"] in ("Succeeded", "Failed") else None

    props = wait_for("the instance serving", serving)
    assert props["provisioningState"] == "Succeeded", props
    endpoint = props["endpoint"]
    assert endpoint.startswith("http://127.0.0.1:")
    tags = httpx.get(f"{endpoint}/api/tags", timeout=10).json()
    assert [m["name"] for m in tags["models"]] == ["mistral:7b"]
    reply = httpx.post(f"{endpoint}/api/generate", json={"model": "mistral:7b", "prompt": "hi"}, timeout=10).json()
    assert reply["done"] is True and "Slurm" in reply["response"]
    assert lab.allocated("n1") == 2
    # When it is deleted, its Slurm job ends and its GPUs come back
    assert lab.http.delete(path).status_code == 202
    assert wait_for("the instance gone", lambda: lab.http.get(path).status_code == 404)
    assert wait_for("GPUs released", lambda: lab.allocated("n1") == 0 or None) is not None
    assert wait_for("its Slurm job ended", lambda: not lab.cluster.job_ids("running"))


# ------------------------------------------------------------------------------------------------------- faults
def test_a_node_the_clusters_admins_drain_is_not_placed_on_and_says_why_until_resumed(lab: Lab):
    lab.node("n1")
    lab.node("n2", price=3.0)
    lab.cluster.drain("n1", "bad fan")

    def drained() -> dict[str, Any] | None:
        status = lab.http.get(f"{lab.api}/sparkNodes/n1").json()["properties"].get("backendStatus") or {}
        return status if status.get("placeable") is False else None

    status = wait_for("n1 shown drained", drained)
    assert "DRAIN" in status["state"] and status["reason"] == "bad fan"
    # a job that would go to the cheaper n1 goes to n2 while it is drained
    lab.submit("elsewhere", {"requestedGpus": 8, "requestedMemoryGb": 640, "workload": command("sleep 1")})
    assert lab.until("elsewhere", "Running", "Succeeded")["assignedNode"].endswith("/n2")
    lab.cluster.resume("n1")
    back = wait_for(
        "n1 shown up",
        lambda: (
            (s := lab.http.get(f"{lab.api}/sparkNodes/n1").json()["properties"]["backendStatus"])["placeable"] and s
        ),
    )
    assert back["state"] == "UP"


def test_slurmd_killed_under_a_running_job_ends_it_by_its_retry_policy_and_the_gpus_come_back(lab: Lab):
    lab.node("n1")
    lab.node("n2", price=3.0)
    lab.submit(
        "survivor",
        {
            "requestedGpus": 8,
            "requestedMemoryGb": 640,
            "workload": command("sleep 45"),
            "retryStrategy": {"attempts": 2, "intervalSeconds": 1},
        },
    )
    first = lab.until("survivor", "Running")
    assert first["assignedNode"].endswith("/n1")
    lab.cluster.kill_slurmd("n1")
    # the cluster marks n1 DOWN (SlurmdTimeout) and the job NODE_FAIL: the provider runs it again where it can
    retried = wait_for("the job's second attempt", lambda: (p := lab.job("survivor"))["attempt"] == 2 and p)
    (attempt,) = retried["attempts"]
    assert attempt["status"] == "Failed" and "NODE_FAIL" in attempt["statusReason"]
    assert wait_for(
        "n1 shown down",
        lambda: (
            lab.http.get(f"{lab.api}/sparkNodes/n1").json()["properties"].get("backendStatus", {}).get("placeable")
            is False
        ),
    )
    assert lab.allocated("n1") == 0
    again = lab.until("survivor", "Running", "Succeeded")
    assert again["assignedNode"].endswith("/n2")


def test_slurmctld_restarted_mid_job_loses_nothing(lab: Lab):
    lab.node("n1")
    lab.submit("steady", {"requestedGpus": 2, "requestedMemoryGb": 160, "workload": command("sleep 12")})
    lab.until("steady", "Running")
    lab.cluster.restart_slurmctld()
    done = lab.until("steady", "Succeeded", "Failed")
    assert done["status"] == "Succeeded", done["statusReason"]
    assert done["gpuSeconds"] >= 2 * 12


def test_slurmrestd_unreachable_for_a_while_gives_no_5xx_and_the_work_is_caught_up(lab: Lab):
    lab.node("n1")
    lab.submit("before", {"requestedGpus": 2, "requestedMemoryGb": 160, "workload": command("sleep 5")})
    lab.until("before", "Running")
    lab.cluster.stop_slurmrestd()
    try:
        # the API answers as ever (nothing of a read or a submission waits on the cluster)
        assert lab.http.get(f"{lab.api}/sparkJobs").status_code == 200
        assert lab.http.get(f"{lab.api}/sparkNodes/n1").status_code == 200
        lab.submit("during", {"requestedGpus": 2, "requestedMemoryGb": 160, "workload": command("sleep 1")})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # a minute of the steps and schedules failing to reach it, reads answering
            assert lab.job("before")["status"] in ("Running", "Succeeded")
            time.sleep(2)
    finally:
        lab.cluster.start_slurmrestd()
    # Then what ended meanwhile is caught up, and what was submitted runs
    assert lab.until("before", "Succeeded", "Failed")["status"] == "Succeeded"
    assert lab.until("during", "Succeeded", "Failed")["status"] == "Succeeded"


# ------------------------------------------------------------------------------------------------------- input
def test_bad_input_about_clusters_and_slurm_nodes_is_a_clear_arm_error(lab: Lab):
    base = {"location": "eastus", "sku": {"name": "DGX-H100-8GPU", "capacity": 8}, "properties": {
        "hardwareSpecs": {"gpuModel": "H100", "gpuCount": 8, "gpuMemoryGb": 80},
        "pricing": {"currency": "USD", "pricePerGpuHour": 2.5}}}  # fmt: skip
    for backend, code, says in (
        ({"type": "Slurm", "cluster": "nowhere"}, "InvalidParameter", "No Slurm cluster 'nowhere'"),
        ({"type": "Slurm"}, "InvalidRequestContent", "names its cluster"),
        ({"type": "Slurm", "cluster": "lab", "nodeName": "n1; rm -rf /"}, "InvalidRequestContent", "nodeName"),
        ({"type": "Kubernetes"}, "InvalidRequestContent", "type"),
        ({"type": "DgxPlatform", "cluster": "lab"}, "InvalidRequestContent", "Slurm node"),
    ):
        body = {**base, "properties": {**base["properties"], "backend": backend}}
        refused = lab.http.put(f"{lab.api}/sparkNodes/bad", json=body)
        assert refused.status_code == 400, (backend, refused.text)
        assert refused.json()["error"]["code"] == code and says in json.dumps(refused.json()), refused.text
    # a job's log on a Slurm node is a clear 409 naming the cluster, never a 5xx or an empty success
    lab.node("n1")
    lab.submit("quiet", {"requestedGpus": 1, "requestedMemoryGb": 80, "workload": command("sleep 1")})
    lab.until("quiet", "Running", "Succeeded")
    logs = lab.http.get(f"{lab.api}/sparkJobs/quiet/logs")
    assert logs.status_code == 409 and logs.json()["error"]["code"] == "LogsNotAvailable"
    assert "Slurm cluster 'lab'" in logs.json()["error"]["message"]
