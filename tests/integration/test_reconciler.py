"""The reconciler ends operations whose workflow stalled: an execution that never started, a compensation that
failed, a deletion whose workflow never ran — and gives capacity back exactly once, only after the DGX Platform has
confirmed the instance gone. Runs use a clock an hour ahead, so every lease has run out (no sleeping)."""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests.conftest import SEED_NODE, nodes_path
from tests.integration.instance_helpers import (
    SEED_INSTANCE,
    instances_path,
    node_counters,
    simulator_instances,
    wait_for,
    wait_gone,
    wait_state,
)

LATER = 3600  # seconds: far beyond every lease of the test settings


def reconciler() -> Any:
    from itl_accelerator.settings import get_settings
    from itl_accelerator.wiring import Wiring

    return Wiring.build(get_settings()).reconciler


_runs = itertools.count(1)


def run(sub: str) -> list[str]:
    """One reconciler run with a clock ahead by an hour more than the run before (so the leases it renews have run
    out by the next); the outcomes of what it did in subscription ``sub`` (the session's table holds other tests'
    subscriptions too)."""
    report = reconciler().run(now=time.time() + LATER * next(_runs))
    return [r["outcome"] for r in report.repaired if f"/subscriptions/{sub}/" in r["resource"]]


def reconcile_until(sub: str, done, *, what: str, timeout: float = 60) -> list[str]:
    """Run the reconciler until ``done()`` (at most ``timeout`` seconds: what it starts runs through the whole
    stack); returns the outcomes of all runs in ``sub``."""
    outcomes: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        outcomes += run(sub)
        if done():
            return outcomes
        time.sleep(0.25)
    raise AssertionError(f"the reconciler did not bring about {what}: {outcomes}")


def audit_summaries(admin: Any, sub: str) -> list[str]:
    events = admin.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/auditEvents", params={"$top": 1000})
    return [e["change_summary"] for e in events.json()["value"]]


def execution_status(operation_id: str) -> str:
    from itl_accelerator.settings import get_settings
    from itl_accelerator.state_machines import StateMachines

    return StateMachines(boto3.client("stepfunctions")).status(get_settings().provision_state_machine_arn, operation_id)


@pytest.fixture
def start_execution_fails(monkeypatch):
    """StartExecution throttled for the API (the accepting transaction has committed before it is called)."""
    from itl_accelerator.state_machines import StateMachines

    def throttled(self, *args, **kwargs):
        raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}}, "StartExecution")

    monkeypatch.setattr(StateMachines, "start", throttled)
    return monkeypatch


def test_a_provisioning_whose_execution_never_started_is_started_and_runs(admin, sub, aws, dgx, start_execution_fails):
    # Given an instance accepted while StartExecution failed
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    accepted = admin.post(instances_path(sub), json=SEED_INSTANCE)
    # Then the client was answered 202 (the change is stored), and the instance waits in Accepted holding its GPUs
    assert accepted.status_code == 202, accepted.text
    operation_id = accepted.json()["properties"]["operationId"]
    start_execution_fails.undo()
    assert execution_status(operation_id) == "NOT_FOUND"
    assert admin.get(instances_path(sub, name="instance-1")).json()["properties"]["provisioningState"] == "Accepted"
    assert node_counters(aws, sub)["gpuAllocated"] == 2
    # When the reconciler runs after the start lease ran out
    outcomes = run(sub)
    # Then it started the execution (audited as SYSTEM), and the instance provisions to the end
    assert outcomes == ["restarted"]
    wait_state(admin, instances_path(sub, name="instance-1"), ("Succeeded",))
    assert any("had not started" in s for s in audit_summaries(admin, sub))
    # And the GPUs are held exactly once
    assert node_counters(aws, sub)["gpuAllocated"] == 2
    # And a second run finds nothing to do: a Succeeded instance holds no lease
    assert run(sub) == []


def test_a_deletion_whose_execution_never_started_is_finished(admin, sub, aws, dgx, monkeypatch):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    assert admin.post(instances_path(sub), json=SEED_INSTANCE).status_code == 202
    wait_state(admin, instances_path(sub, name="instance-1"), ("Succeeded",))
    # Given a delete accepted while Step Functions could not be reached
    from botocore.exceptions import EndpointConnectionError

    from itl_accelerator.state_machines import StateMachines

    def unreachable(*args: object, **kwargs: object) -> None:
        raise EndpointConnectionError(endpoint_url="https://states.us-east-1.amazonaws.com")

    monkeypatch.setattr(StateMachines, "start", unreachable)
    assert admin.delete(instances_path(sub, name="instance-1")).status_code == 202
    monkeypatch.undo()
    # When the reconciler runs
    outcomes = reconcile_until(
        sub, lambda: admin.get(instances_path(sub, name="instance-1")).status_code == 404, what="the instance deleted"
    )
    assert outcomes[0] == "restarted"
    # Then the instance is gone on both sides and its GPUs are free, once
    wait_gone(admin, instances_path(sub, name="instance-1"))
    assert node_counters(aws, sub) == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 0}
    wait_for(lambda: not [i for i in simulator_instances(dgx) if f"/subscriptions/{sub}/" in i["name"]], what="DGX")


def _stuck_in_compensation(admin: Any, sub: str, dgx: Any, name: str = "instance-1") -> str:
    """An instance whose provisioning failed and whose compensation then failed (the DGX Platform refused the
    delete): its execution has ended Failed, and the instance still holds its GPUs. Returns the operation id."""
    dgx.config.update({"accept_then_fail_rate": 1.0, "refuse_deletes": True})
    accepted = admin.post(instances_path(sub), json={**SEED_INSTANCE, "name": name})
    assert accepted.status_code == 202, accepted.text
    operation_id = accepted.json()["properties"]["operationId"]
    wait_for(lambda: execution_status(operation_id) == "FAILED", timeout=60, what="the compensation to fail")
    dgx.config.update({"accept_then_fail_rate": 0.0, "refuse_deletes": False})
    return operation_id


def test_a_failed_compensation_is_finished_and_capacity_released_once(admin, sub, aws, dgx):
    # Given a node and an instance stuck after a failed compensation, its GPUs still reserved
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    _stuck_in_compensation(admin, sub, dgx)
    stuck = admin.get(instances_path(sub, name="instance-1")).json()
    assert stuck["properties"]["provisioningState"] in ("Accepted", "Provisioning")
    assert node_counters(aws, sub)["gpuAllocated"] == 2
    # When the reconciler runs (as often as the DGX Platform needs to confirm the deletion)
    outcomes = reconcile_until(
        sub,
        lambda: admin.get(instances_path(sub, name="instance-1")).json()["properties"]["provisioningState"] == "Failed",
        what="the instance Failed",
    )
    # Then the instance is Failed with a reason, gone from the DGX Platform, and its GPUs released exactly once
    failed = admin.get(instances_path(sub, name="instance-1")).json()
    assert failed["properties"]["error"]["code"] == "ProvisioningInterrupted"
    assert not [i for i in simulator_instances(dgx, include_deleting=True) if f"/subscriptions/{sub}/" in i["name"]]
    assert node_counters(aws, sub) == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 1}
    assert outcomes.count("released") == 1
    assert sum("capacity released" in s for s in audit_summaries(admin, sub)) == 1
    # And later runs change nothing
    assert run(sub) == []
    assert node_counters(aws, sub)["gpuAllocated"] == 0


def test_overlapping_runs_release_capacity_once(admin, sub, aws, dgx):
    # Given two instances stuck after failed compensations
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    for name in ("i-1", "i-2"):
        _stuck_in_compensation(admin, sub, dgx, name)
    assert node_counters(aws, sub)["gpuAllocated"] == 4
    # When three reconcilers run at the same time, again and again, until both are Failed
    outcomes: list[str] = []

    def runs() -> None:
        for _ in range(30):
            outcomes.extend(run(sub))
            time.sleep(0.2)

    threads = [threading.Thread(target=runs) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Then each instance's capacity came back exactly once
    states = {
        n: admin.get(instances_path(sub, name=n)).json()["properties"]["provisioningState"] for n in ("i-1", "i-2")
    }
    assert states == {"i-1": "Failed", "i-2": "Failed"}
    assert outcomes.count("released") == 2
    assert node_counters(aws, sub)["gpuAllocated"] == 0
    assert sum("capacity released" in s for s in audit_summaries(admin, sub)) == 2
