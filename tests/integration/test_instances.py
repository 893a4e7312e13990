"""sparkOllamaInstances end to end through API Gateway (emulated from template.yaml), the real state machines
(moto executing statemachines/*.asl.json), the real step handlers and the DGX Platform simulator."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import ADMIN, CONSUMER, SEED_NODE, SUPPLIER, nodes_path
from tests.integration.instance_helpers import (
    SEED_INSTANCE,
    instances_path,
    node_counters,
    relative,
    simulator_instances,
    wait_for,
    wait_gone,
    wait_state,
)


@pytest.fixture
def node(admin, sub):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    return nodes_path(sub, name="dgx-1")


def _sim_ids_for(dgx, sub):
    return [i for i in simulator_instances(dgx, include_deleting=True) if f"/subscriptions/{sub}/" in i["nodeId"]]


def test_seed_post_provisions_and_endpoint_answers_like_ollama(admin, sub, node, aws, dgx):
    # Given the seed's instance request, verbatim (the platform holds it in Provisioning until we look)
    dgx.config.hold_provisioning = True
    accepted = admin.post(instances_path(sub), json=SEED_INSTANCE)
    # Then it is accepted as a long-running operation
    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    assert body["properties"]["provisioningState"] == "Accepted"
    assert body["status_url"] == accepted.headers["Azure-AsyncOperation"]
    assert accepted.headers["Location"].startswith("http") and "/operationResults/" in accepted.headers["Location"]
    assert int(accepted.headers["Retry-After"]) >= 1
    # And the GPUs are reserved at once
    assert node_counters(aws, sub) == {"gpuAllocated": 2, "memoryGbAllocated": 160, "childCount": 1}
    # And the operation status answers at once, not final yet
    status = admin.get(relative(body["status_url"]))
    assert status.status_code == 200 and status.json()["status"] in ("Accepted", "Running")
    assert admin.get(relative(accepted.headers["Location"])).status_code == 202

    # When the platform lets it finish
    dgx.config.hold_provisioning = False
    done = wait_state(admin, instances_path(sub, name="instance-1"), ("Succeeded", "Failed"))
    assert done["properties"]["provisioningState"] == "Succeeded"
    endpoint = done["properties"]["endpoint"]
    # Then the operation ended Succeeded and the Location URL gives the instance
    assert admin.get(relative(body["status_url"])).json()["status"] == "Succeeded"
    result = admin.get(relative(accepted.headers["Location"]))
    assert result.status_code == 200 and result.json()["properties"]["endpoint"] == endpoint
    # And the endpoint is an Ollama API serving the model
    assert httpx.get(f"{endpoint}/api/tags").json()["models"][0]["name"] == "mistral:7b"
    reply = httpx.post(f"{endpoint}/api/generate", json={"model": "mistral:7b", "prompt": "hi", "stream": False})
    assert reply.status_code == 200 and reply.json()["done"] is True and reply.json()["response"]
    # And it is listed under its node
    assert [i["name"] for i in admin.get(instances_path(sub)).json()["value"]] == ["instance-1"]


def test_arm_put_returns_201_accepted_and_identical_retry_is_the_same_operation(admin, sub, node, dgx):
    dgx.config.hold_provisioning = True  # in flight until the checks below are done, however slow the machine
    body = {"properties": {"model": "llama3.1:8b", "gpus": 1, "memoryGb": 80}}
    first = admin.put(instances_path(sub, name="i-put"), json=body)
    assert first.status_code == 201, first.text
    assert first.json()["properties"]["provisioningState"] == "Accepted"
    assert "Azure-AsyncOperation" in first.headers
    # An identical retry while it runs → 200 (it exists now) with the same operation, no second reservation
    again = admin.put(instances_path(sub, name="i-put"), json=body)
    assert again.status_code == 200
    assert again.headers["Azure-AsyncOperation"] == first.headers["Azure-AsyncOperation"]
    # A different write while it runs → 409 AnotherOperationInProgress
    other = admin.put(instances_path(sub, name="i-put"), json={"properties": {**body["properties"], "gpus": 2}})
    assert other.status_code == 409 and other.json()["error"]["code"] == "AnotherOperationInProgress"
    # The GET meanwhile shows the non-final state
    assert admin.get(instances_path(sub, name="i-put")).json()["properties"]["provisioningState"] in (
        "Accepted",
        "Provisioning",
    )
    dgx.config.hold_provisioning = False
    done = wait_state(admin, instances_path(sub, name="i-put"), ("Succeeded", "Failed"))
    assert done["properties"]["provisioningState"] == "Succeeded"
    # An identical PUT of a Succeeded instance → 200, no new work
    settled = admin.put(instances_path(sub, name="i-put"), json=body)
    assert settled.status_code == 200 and "Azure-AsyncOperation" not in settled.headers
    # POST of an existing name → 409 Conflict
    dup = admin.post(instances_path(sub), json={"name": "i-put", "model": "llama3.1:8b", "gpus": 1, "memory_gb": 80})
    assert dup.status_code == 409 and dup.json()["error"]["code"] == "Conflict"


def test_transient_dgx_failures_are_retried_to_success(admin, sub, node, dgx):
    dgx.config.burst_5xx = 3  # the client's and the state machine's retries absorb these
    admin.post(instances_path(sub), json=SEED_INSTANCE)
    done = wait_state(admin, instances_path(sub, name="instance-1"), ("Succeeded", "Failed"), timeout=40)
    assert done["properties"]["provisioningState"] == "Succeeded"


@pytest.mark.parametrize(
    ("fault", "body", "code"),
    [
        ({"accept_then_fail_rate": 1.0}, SEED_INSTANCE, "GpuInitFailed"),
        ({}, {**SEED_INSTANCE, "model": "unknown-model:1b"}, "DgxPlatformRefused"),
        ({"never_ready_rate": 1.0}, SEED_INSTANCE, "ProvisioningTimedOut"),
        # 11 task attempts (statemachines: MaxAttempts 10, backing off up to 60 s) x 2 client attempts
        ({"burst_5xx": 22}, SEED_INSTANCE, "DgxPlatformUnavailable"),
    ],
    ids=["accept-then-fail", "permanent-4xx", "never-ready-timeout", "platform-down-then-back"],
)
def test_failures_are_compensated(admin, sub, node, aws, dgx, fault, body, code):
    dgx.config.update(fault)
    accepted = admin.post(instances_path(sub), json=body)
    assert accepted.status_code == 202
    # (the platform-down case waits out the state machine's retries: up to ~6 min, ~3 on average with full jitter)
    done = wait_state(admin, instances_path(sub, name="instance-1"), ("Succeeded", "Failed"), timeout=480)
    # Then the instance is Failed with a reason
    assert done["properties"]["provisioningState"] == "Failed"
    assert done["properties"]["error"]["code"] == code and done["properties"]["error"]["message"]
    assert "endpoint" not in done["properties"]
    # And the operation says Failed with the same error
    operation = admin.get(relative(accepted.json()["status_url"])).json()
    assert operation["status"] == "Failed" and operation["error"]["code"] == code
    assert admin.get(relative(accepted.headers["Location"])).json()["error"]["code"] == code
    # And the capacity is released, exactly once
    assert node_counters(aws, sub)["gpuAllocated"] == 0 and node_counters(aws, sub)["memoryGbAllocated"] == 0
    # And nothing is left running on the DGX Platform
    dgx.config.error_rate = 0.0
    wait_for(lambda: not _sim_ids_for(dgx, sub), timeout=10, what="simulator cleanup")
    # And a Failed instance can be deleted (its child count released) and the node then too
    deleted = admin.delete(instances_path(sub, name="instance-1"))
    assert deleted.status_code == 202
    wait_gone(admin, instances_path(sub, name="instance-1"))
    assert node_counters(aws, sub) == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 0}
    assert admin.delete(node).status_code == 200


def test_delete_during_provisioning_cancels_it(admin, sub, node, aws, dgx):
    dgx.config.hold_provisioning = True  # it stays Provisioning until deleted
    accepted = admin.post(instances_path(sub), json=SEED_INSTANCE)
    wait_state(admin, instances_path(sub, name="instance-1"), ("Provisioning",))
    dgx.config.hold_deletion = True  # Deleting until the checks below are done
    deleting = admin.delete(instances_path(sub, name="instance-1"))
    assert deleting.status_code == 202 and deleting.headers["Location"]
    assert admin.get(instances_path(sub, name="instance-1")).json()["properties"]["provisioningState"] == "Deleting"
    # A repeated DELETE → the same operation
    assert admin.delete(instances_path(sub, name="instance-1")).headers["Location"] == deleting.headers["Location"]
    dgx.config.hold_deletion = False
    wait_gone(admin, instances_path(sub, name="instance-1"))
    assert admin.get(relative(deleting.headers["Location"])).status_code == 204
    assert admin.get(relative(deleting.headers["Azure-AsyncOperation"])).json()["status"] == "Succeeded"
    assert admin.get(relative(accepted.json()["status_url"])).json()["status"] == "Canceled"
    assert node_counters(aws, sub) == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 0}
    wait_for(lambda: not _sim_ids_for(dgx, sub), timeout=10, what="simulator cleanup")


def test_delete_after_success_releases_everything(admin, sub, node, aws, dgx):
    admin.post(instances_path(sub), json=SEED_INSTANCE)
    wait_state(admin, instances_path(sub, name="instance-1"), ("Succeeded",))
    # While it holds GPUs the node cannot be deleted
    busy = admin.delete(node)
    assert busy.status_code == 409
    deleting = admin.delete(instances_path(sub, name="instance-1"))
    assert deleting.status_code == 202
    assert int(deleting.headers["Retry-After"]) >= 1
    wait_gone(admin, instances_path(sub, name="instance-1"))
    assert admin.get(relative(deleting.headers["Location"])).status_code == 204
    assert node_counters(aws, sub) == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 0}
    assert admin.delete(instances_path(sub, name="instance-1")).status_code == 204
    wait_for(lambda: not _sim_ids_for(dgx, sub), timeout=10, what="simulator cleanup")
    assert admin.delete(node).status_code == 200


def test_capacity_and_availability_are_enforced(admin, sub, node, aws, dgx):
    too_big = admin.post(instances_path(sub), json={**SEED_INSTANCE, "gpus": 9, "memory_gb": 100})
    assert too_big.status_code == 409 and too_big.json()["error"]["code"] == "InsufficientCapacity"
    assert "8 free GPUs" in too_big.json()["error"]["message"]
    assert admin.patch(node, json={"properties": {"availability": "Cordoned"}}).status_code == 200
    cordoned = admin.post(instances_path(sub), json=SEED_INSTANCE)
    assert cordoned.status_code == 409 and cordoned.json()["error"]["code"] == "NodeNotAvailable"
    missing = admin.post(instances_path(sub, node="nope"), json=SEED_INSTANCE)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "ParentResourceNotFound"
    assert node_counters(aws, sub) == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 0}


@pytest.mark.parametrize(
    "body",
    [
        {"name": "i", "model": "Mistral 7B", "gpus": 1, "memory_gb": 10},
        {"name": "i", "model": "mistral:7b", "gpus": 0, "memory_gb": 10},
        {"name": "i", "model": "mistral:7b", "gpus": 1, "memory_gb": 0},
        {"name": "i", "model": "mistral:7b", "gpus": "2", "memory_gb": 10},
        {"name": "i", "model": "mistral:7b", "gpus": True, "memory_gb": 10},
        {"name": "i", "gpus": 1, "memory_gb": 10},
        {"name": "i", "model": "mistral:7b", "gpus": 1, "memory_gb": 10, "properties": {"gpus": 2}},
        {"name": "-bad", "model": "mistral:7b", "gpus": 1, "memory_gb": 10},
        {"model": "mistral:7b", "gpus": 1, "memory_gb": 10},
        ["not", "an", "object"],
    ],
)
def test_bad_instance_bodies_are_400(admin, sub, node, aws, body):
    response = admin.post(instances_path(sub), json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] in ("InvalidRequestContent", "InvalidResourceName")
    assert node_counters(aws, sub)["gpuAllocated"] == 0


def test_only_admins_create_and_delete_instances(admin, caller, sub, node, dgx):
    admin.post(instances_path(sub), json=SEED_INSTANCE)
    wait_state(admin, instances_path(sub, name="instance-1"), ("Succeeded",))
    for role in (CONSUMER, SUPPLIER):
        someone = caller([role], [f"/subscriptions/{sub}"], subject="owner-123")
        assert someone.post(instances_path(sub), json={**SEED_INSTANCE, "name": "x"}).status_code == 403
        assert someone.delete(instances_path(sub, name="instance-1")).status_code == 403
        assert someone.get(instances_path(sub, name="instance-1")).status_code == 200
        assert someone.get(instances_path(sub)).status_code == 200
    outsider = caller([ADMIN], ["/subscriptions/another-sub"])
    assert outsider.get(instances_path(sub, name="instance-1")).status_code == 404
    assert outsider.delete(instances_path(sub, name="instance-1")).status_code == 404


def test_operations_are_confined_to_the_callers_scope(admin, caller, sub, node, dgx):
    accepted = admin.post(instances_path(sub), json=SEED_INSTANCE)
    status_path = relative(accepted.json()["status_url"])
    other = caller([ADMIN], ["/subscriptions/another-sub"])
    assert other.get(status_path).status_code == 404
    other_rg = caller([ADMIN], [f"/subscriptions/{sub}/resourceGroups/rg2"])
    assert other_rg.get(status_path).status_code == 404
    unknown = status_path.rsplit("/", 1)[0] + "/00000000-0000-0000-0000-000000000000"
    assert admin.get(unknown).status_code == 404
    assert admin.get(status_path.replace("/us-east-1/", "/westeurope/")).status_code == 404
    consumer = caller([CONSUMER], [f"/subscriptions/{sub}"])
    assert consumer.get(status_path).status_code == 200
    wait_state(admin, instances_path(sub, name="instance-1"), ("Succeeded",))


def test_workflow_changes_are_audited_as_system(admin, sub, node, dgx):
    admin.post(instances_path(sub), json=SEED_INSTANCE)
    done = wait_state(admin, instances_path(sub, name="instance-1"), ("Succeeded",))
    events = admin.get(
        f"/subscriptions/{sub}/providers/ITL.Accelerator/auditEvents", params={"resourceId": done["id"]}
    ).json()["value"]
    assert [(e["actor_type"], e["new_state"]["properties"]["provisioningState"]) for e in events] == [
        ("User", "Accepted"),
        ("SYSTEM", "Provisioning"),
        ("SYSTEM", "Succeeded"),
    ]
    assert len({e["correlation_id"] for e in events}) == 1


def test_an_instance_the_platform_lost_is_failed_and_gives_its_gpus_back(admin, sub, node, aws, dgx):
    """Given a Succeeded instance that the DGX Platform then loses (as the local simulator does when it restarts),
    when the job tracker checks it, then it is Failed with InstanceLost and no endpoint, the node has its GPUs back
    and its billing has ended — through the real tracker handler's wiring and the table's lease index."""
    import time

    from itl_accelerator.settings import get_settings
    from itl_accelerator.wiring import Wiring

    path = instances_path(sub, name="instance-1")
    assert admin.post(instances_path(sub), json=SEED_INSTANCE).status_code == 202
    wait_state(admin, path, ("Succeeded",))
    with dgx.lock:
        for made in [i for i, found in dgx.instances.items() if f"/subscriptions/{sub}/" in found["nodeId"]]:
            del dgx.instances[made]
    wait_for(
        lambda: Wiring.build(get_settings()).job_tracker.run(now=time.time() + 120)["instances_lost"] >= 1 or None,
        timeout=60,
        what="the tracker to find the instance lost",
    )
    lost = wait_state(admin, path, ("Failed",))["properties"]
    assert lost["error"]["code"] == "InstanceLost" and "endpoint" not in lost, lost
    assert node_counters(aws, sub) == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 1}
    assert admin.delete(path).status_code == 202
    wait_gone(admin, path)
    assert node_counters(aws, sub) == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 0}
