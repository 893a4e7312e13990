"""Capacity under concurrency and under a faulty DGX Platform: real HTTP requests in parallel to the API Gateway
emulator (each invocation on its own thread, like concurrent Lambda execution environments), real state
machines, the simulator failing at random. Figures are printed (run with -s to see them)."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import SEED_NODE, TABLE, nodes_path
from tests.integration.instance_helpers import node_counters, simulator_instances, wait_for

TERMINAL = ("Succeeded", "Failed")


def _client(gateway_url: str, token: str, timings: list[float] | None = None) -> httpx.Client:
    """A client of the emulator; with ``timings``, the duration (seconds) of every request it makes is appended."""
    hooks = {}
    if timings is not None:

        def started(request: httpx.Request) -> None:
            request.extensions["started"] = time.monotonic()

        def finished(response: httpx.Response) -> None:
            timings.append(time.monotonic() - response.request.extensions["started"])

        hooks = {"request": [started], "response": [finished]}
    return httpx.Client(
        base_url=gateway_url, headers={"Authorization": f"Bearer {token}"}, timeout=30, event_hooks=hooks
    )


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def _instances_in_table(dynamodb, sub: str) -> list[dict]:
    items = dynamodb.query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk AND begins_with(SK, :p)",
        ExpressionAttributeValues={":pk": {"S": f"SUB#{sub}"}, ":p": {"S": "INSTANCE#"}},
        ConsistentRead=True,
    )["Items"]
    return items


def test_twenty_parallel_creates_never_overcommit_a_node(gateway_url, make_token, admin, sub, aws, dgx):
    # Given a node with room for 8 GPUs
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    token = make_token("admin-1", ["itl-accelerator-admin"], [f"/subscriptions/{sub}"])
    base = nodes_path(sub, name="dgx-1") + "/sparkOllamaInstances"
    peak = {"gpus": 0}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            peak["gpus"] = max(peak["gpus"], node_counters(aws, sub)["gpuAllocated"])
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    barrier = threading.Barrier(20)

    def create(i: int) -> int:
        with _client(gateway_url, token) as http:
            barrier.wait()
            body = {"name": f"inst-{i}", "model": "mistral:7b", "gpus": 1, "memory_gb": 80}
            return http.post(base, json=body).status_code

    # When 20 creates of 1 GPU arrive at once
    with ThreadPoolExecutor(20) as pool:
        statuses = list(pool.map(create, range(20)))
    # Then 8 are accepted and 12 refused with 409, and the allocation never exceeds 8
    assert sorted(statuses).count(202) == 8, statuses
    assert statuses.count(409) == 12, statuses
    # And after every workflow ends, the node's allocation equals the live instances' GPUs
    with _client(gateway_url, token) as http:
        wait_for(
            lambda: all(i["properties"]["provisioningState"] in TERMINAL for i in http.get(base).json()["value"]),
            timeout=60,
            what="all provisioning to end",
        )
        live = [i for i in http.get(base).json()["value"] if i["properties"]["provisioningState"] == "Succeeded"]
    stop.set()
    watcher.join()
    counters = node_counters(aws, sub)
    print(
        f"\nconcurrency: accepted={statuses.count(202)} refused={statuses.count(409)} peak_allocated={peak['gpus']} "
        f"final_allocated={counters['gpuAllocated']} live={len(live)}"
    )
    assert peak["gpus"] <= 8
    assert counters["gpuAllocated"] == sum(i["properties"]["gpus"] for i in live)
    assert counters["memoryGbAllocated"] == sum(i["properties"]["memoryGb"] for i in live)


@pytest.mark.slow
def test_fault_injection_leaves_no_leaked_gpus_and_no_orphans(gateway_url, make_token, admin, sub, aws, dgx):
    """At least 100 provisions and deletes while the simulator fails at random; afterwards zero leaked GPUs on
    every node and the simulator and the table agree on every instance."""
    rng = random.Random(20261130)
    nodes = [f"dgx-{n}" for n in range(1, 7)]
    for name in nodes:
        assert admin.post(nodes_path(sub), json={**SEED_NODE, "name": name}).status_code == 201
    token = make_token("admin-1", ["itl-accelerator-admin"], [f"/subscriptions/{sub}"])
    dgx.config.update(
        {
            "error_rate": 0.15,
            "timeout_rate": 0.03,
            "hang_seconds": 1.5,
            "accept_then_fail_rate": 0.1,
            "never_ready_rate": 0.03,
            "provisioning_seconds": 0.5,
            "deletion_seconds": 0.2,
            "seed": 7,
        }
    )
    outcomes: dict[str, int] = {}
    timings: list[float] = []
    lock = threading.Lock()

    def count(key: str) -> None:
        with lock:
            outcomes[key] = outcomes.get(key, 0) + 1

    def lifecycle(i: int) -> None:
        node = rng.choice(nodes)
        path = nodes_path(sub, name=node) + f"/sparkOllamaInstances/fi-{i}"
        body = {"properties": {"model": "mistral:7b", "gpus": rng.choice((1, 2, 3)), "memoryGb": 80}}
        with _client(gateway_url, token, timings) as http:
            created = http.put(path, json=body)
            count(f"create {created.status_code}")
            if created.status_code != 201:
                return
            final = wait_for(lambda: _terminal(http, path), timeout=90, interval=0.5, what=f"{path} to settle")
            count(f"provision {final}")
            deleted = None
            for _ in range(5):  # a delete can fail under faults; the user deletes again
                deleted = http.delete(path)
                if deleted.status_code == 204:
                    break
                gone = wait_for(lambda: _gone_or_failed(http, path), timeout=90, interval=0.5, what=f"{path} delete")
                if gone == "gone":
                    break
            count(f"delete {'done' if deleted is not None else 'skipped'}")

    started = time.monotonic()
    with ThreadPoolExecutor(10) as pool:
        list(pool.map(lifecycle, range(120)))
    dgx.config.update({"error_rate": 0.0, "timeout_rate": 0.0})
    wait_for(
        lambda: not simulator_instances(dgx, include_deleting=True) or _only_foreign(dgx, sub),
        timeout=60,
        what="simulator to drain",
    )
    elapsed = time.monotonic() - started
    leaked = {n: node_counters(aws, sub, node=n) for n in nodes}
    in_table = _instances_in_table(aws, sub)
    ours = [i for i in simulator_instances(dgx, include_deleting=True) if f"/subscriptions/{sub}/" in i["nodeId"]]
    print(
        f"\nfault injection: {sum(v for k, v in outcomes.items() if k.startswith('create'))} creates in "
        f"{elapsed:.0f}s; outcomes={dict(sorted(outcomes.items()))}; node counters={leaked}; "
        f"table instances left={len(in_table)}; simulator instances left={len(ours)}; "
        f"API requests={len(timings)} p50={_percentile(timings, 0.5):.3f}s p99={_percentile(timings, 0.99):.3f}s "
        f"max={max(timings):.3f}s"
    )
    assert sum(v for k, v in outcomes.items() if k == "create 201") >= 100
    assert all(c == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 0} for c in leaked.values()), leaked
    assert in_table == [] and ours == []


def _terminal(http: httpx.Client, path: str) -> str | None:
    response = http.get(path)
    state = response.json()["properties"]["provisioningState"] if response.status_code == 200 else None
    return state if state in TERMINAL else None


def _gone_or_failed(http: httpx.Client, path: str) -> str | None:
    response = http.get(path)
    if response.status_code == 404:
        return "gone"
    return "failed" if response.json()["properties"]["provisioningState"] == "Failed" else None


def _only_foreign(dgx, sub: str) -> bool:
    return not [i for i in simulator_instances(dgx, include_deleting=True) if f"/subscriptions/{sub}/" in i["nodeId"]]
