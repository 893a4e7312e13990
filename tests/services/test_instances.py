"""Ollama instances: provisioning and deprovisioning (services/workflows/instance_steps.py through
statemachines/provision_instance.asl.json and deprovision_instance.asl.json) and the API's create/delete
(services/api/instances.py): provisioningState, the operations and their errors, GPUs reserved on accept and
released exactly once — and only after the DGX Platform confirmed the instance gone."""

from __future__ import annotations

import pytest

from itl_accelerator.dgx.errors import DgxPermanentError
from itl_accelerator.domain.records import Lease
from itl_accelerator.errors import (
    AnotherOperationInProgress,
    Conflict,
    InsufficientCapacity,
    NodeNotAvailable,
    ParentResourceNotFound,
    PreconditionFailed,
    PropertyChangeNotAllowed,
)
from tests.services.conftest import START, Allocation, Env

HELD = Allocation(2, 160, 1)  # what the default instance holds on the node
RELEASED = Allocation(0, 0, 1)  # a Failed instance: its GPUs back, still a child of the node
EMPTY = Allocation(0, 0, 0)


def state(env: Env, name: str = "llama") -> str:
    return str(env.instance_props(name)["provisioningState"])


def provision(env: Env, name: str = "llama", **kw):
    accepted, _ = env.provision(name, **kw)
    assert accepted is not None
    return accepted


# ------------------------------------------------------------------------------------------------ provisioning
def test_provisioning_reserves_gpus_on_accept_and_succeeds_with_an_endpoint(env, node):
    accepted = provision(env)
    # Then the request is accepted: the instance Accepted, its GPUs reserved, its operation Accepted
    assert accepted.created and accepted.location == "eastus" and accepted.retry_after == 10
    assert accepted.resource["properties"]["provisioningState"] == "Accepted"
    assert env.allocation() == HELD
    assert env.op_status(accepted.operation_id) == "Accepted"
    execution = env.sfn.execution(accepted.operation_id)
    assert execution.input["instanceName"] == "llama" and execution.input["timeoutSeconds"] == 900
    # When the workflow runs (the platform takes 15 s to get it ready)
    env.run()
    # Then it Succeeded with the platform's endpoint; its operation too; its billing started
    props = env.instance_props()
    assert props["provisioningState"] == "Succeeded"
    assert props["endpoint"] == f"https://dgx.test/ollama/{env.instance().dgx_id}"
    assert props["billingTerms"]["pricePerGpuHour"] == 2.5
    assert env.op_status(accepted.operation_id) == "Succeeded"
    meter = env.meter(accepted.operation_id)
    assert meter is not None and meter.active and meter.end is None and meter.dgx_id == env.instance().dgx_id
    assert env.allocation() == HELD and env.instance().lease == Lease.tracked(env.clock() + 10)  # watched from now
    assert [s for s in env.sfn.execution(accepted.operation_id).runner.entered if s == "Poll"] == [
        "Poll",
        "Poll",
    ]


def test_workflow_changes_are_audited_as_system(env, node):
    provision(env)
    env.run()
    events = env.audit(env.instance().arm_id)
    # (the workflow's items are stamped by the wall clock, not the test's: compared without their order)
    assert sorted((e.actor_type, e.new_state["properties"]["provisioningState"]) for e in events) == [
        ("SYSTEM", "Provisioning"),
        ("SYSTEM", "Succeeded"),
        ("User", "Accepted"),
    ]
    assert len({e.correlation_id for e in events}) == 1
    (accepted,) = [e for e in events if e.actor_type == "User"]
    assert accepted.actor_id == "admin-1" and accepted.source_ip == "203.0.113.7"


def test_an_instances_billing_starts_when_it_is_ready_on_the_workflows_clock(env, node):
    accepted = provision(env)
    env.run()
    assert env.meter(accepted.operation_id).start == START + 20  # the second poll found it Running


def test_an_identical_retry_is_the_same_operation_and_a_different_spec_waits(env, node):
    first = provision(env)
    again, _ = env.provision("llama")
    assert again is not None and again.operation_id == first.operation_id and not again.created
    with pytest.raises(AnotherOperationInProgress):
        env.provision("llama", devices=4, memory_gb=320)
    assert env.allocation() == HELD
    env.run()
    unchanged, _ = env.provision("llama")
    assert unchanged is None  # PUT 200: nothing started
    with pytest.raises(PropertyChangeNotAllowed):
        env.provision("llama", devices=4, memory_gb=320)
    assert [e.name for e in env.sfn.started] == [first.operation_id]


def test_transient_dgx_errors_are_retried_to_success(env, node):
    env.dgx.fail("create_instance", times=3)
    provision(env)
    env.run()
    assert state(env) == "Succeeded"
    assert len(env.dgx.live_instances()) == 1


@pytest.mark.parametrize(
    ("fault", "code"),
    [
        ("fails-on-ready", "GpuInitFailed"),
        ("refused", "DgxPlatformRefused"),
        ("never-ready", "ProvisioningTimedOut"),
        ("platform-down", "DgxPlatformUnavailable"),
    ],
)
def test_failures_are_compensated_and_capacity_released_once(env, node, fault, code):
    if fault == "fails-on-ready":
        env.dgx.fail_on_ready = True
    elif fault == "refused":
        env.dgx.fail(
            "create_instance",
            DgxPermanentError("The DGX Platform refused the request: ModelNotFound: no such model", status=400),
        )
    elif fault == "never-ready":
        env.dgx.provisioning_seconds = None
    else:
        env.dgx.down("create_instance")
    accepted = provision(env)
    env.run()
    # Then the instance is Failed with a reason, and its operation says Failed with the same error
    props = env.instance_props()
    assert props["provisioningState"] == "Failed"
    assert props["error"]["code"] == code and props["error"]["message"]
    assert "endpoint" not in props
    operation = env.operation(accepted.operation_id)
    assert operation.status == "Failed" and operation.body["error"] == props["error"]
    # And its GPUs came back exactly once, nothing is left on the platform, and nothing was billed
    assert env.allocation() == RELEASED
    assert sum("capacity released" in e.change_summary for e in env.audit()) == 1
    assert env.dgx.live_instances() == []
    assert env.meter(accepted.operation_id) is None
    # And a Failed instance can be deleted, and the node then too
    env.dgx.heal()
    env.delete_instance()
    env.run()
    assert env.instance() is None and env.allocation() == EMPTY
    assert env.w.nodes.delete(env.admin(), env.sub, "rg1", "dgx-1") is True


def test_capacity_is_released_only_after_the_platform_confirms_the_removal(env, node):
    env.dgx.fail_on_ready = True
    env.dgx.deletion_seconds = None  # the platform is slow to delete
    accepted = provision(env)
    env.run(advance=120)
    # The provisioning failed and its compensation asked for the deletion: the GPUs stay reserved meanwhile
    instance = env.instance()
    assert instance.compensation_error == {"code": "GpuInitFailed", "message": "GPU initialisation failed on the node."}
    assert state(env) == "Provisioning" and env.allocation() == HELD
    assert env.op_status(accepted.operation_id) == "Running"
    # When the platform confirms it gone, the next check releases them
    env.dgx.finish_deletions()
    env.run()
    assert state(env) == "Failed" and env.allocation() == RELEASED
    assert env.op_status(accepted.operation_id) == "Failed"


def test_a_failed_instance_is_provisioned_again_by_the_same_put(env, node):
    env.dgx.fail_on_ready = True
    first = provision(env)
    env.run()
    env.dgx.fail_on_ready = False
    again, _ = env.provision("llama")
    assert again is not None and again.operation_id != first.operation_id and not again.created
    assert env.allocation() == HELD  # reserved again; still one instance on the node
    env.run()
    assert state(env) == "Succeeded" and "error" not in env.instance_props()
    assert env.op_status(first.operation_id) == "Failed" and env.op_status(again.operation_id) == "Succeeded"


# ------------------------------------------------------------------------------------------------ deletion
def test_delete_during_provisioning_cancels_it(env, node):
    env.dgx.provisioning_seconds = None  # it stays Provisioning until deleted
    env.dgx.deletion_seconds = None  # and Deleting until the checks below are done
    accepted = provision(env)
    env.run(advance=30)
    assert state(env) == "Provisioning"
    deleting = env.delete_instance()
    assert deleting is not None and deleting.resource["properties"]["provisioningState"] == "Deleting"
    assert env.delete_instance().operation_id == deleting.operation_id  # a repeated DELETE: the same operation
    env.run(advance=30)
    assert state(env) == "Deleting" and env.allocation() == HELD
    assert env.op_status(accepted.operation_id) == "Canceled"  # the provisioning saw the delete and gave up
    env.dgx.finish_deletions()
    env.run()
    assert env.instance() is None
    assert env.op_status(deleting.operation_id) == "Succeeded"
    assert env.allocation() == EMPTY and env.dgx.live_instances() == []


def test_a_delete_that_lands_while_the_platform_creates_the_instance_leaves_nothing_behind(env, node):
    # Given a DELETE accepted while the platform's answer to the create is on its way back
    env.dgx.after["create_instance"] = lambda created: env.delete_instance()
    accepted = provision(env)
    env.run()
    # Then what the create made is deleted, the instance is gone with its GPUs back, and both operations ended
    assert env.instance() is None and env.allocation() == EMPTY
    assert env.dgx.live_instances() == []
    assert env.op_status(accepted.operation_id) == "Canceled"
    (deletion,) = [e for e in env.sfn.started if e.state_machine_arn.endswith(":deprovision")]
    assert env.op_status(deletion.name) == "Succeeded"


def test_delete_after_success_ends_billing_and_releases_everything(env, node):
    accepted = provision(env)
    env.run()
    with pytest.raises(Conflict, match="holds allocated capacity"):
        env.w.nodes.delete(env.admin(), env.sub, "rg1", "dgx-1")
    env.clock.advance(3600)
    deleting = env.delete_instance()
    assert deleting.retry_after == 10
    assert env.meter(accepted.operation_id).end == int(env.clock())  # billing ends when the delete is accepted
    env.run()
    assert env.instance() is None and env.allocation() == EMPTY
    assert env.op_status(deleting.operation_id) == "Succeeded"
    assert env.delete_instance() is None  # 204: nothing to delete
    assert env.dgx.live_instances() == []
    assert env.w.nodes.delete(env.admin(), env.sub, "rg1", "dgx-1") is True


# ------------------------------------------------------------------------------------------------ the watch
def test_an_instance_the_platform_lost_fails_stops_billing_and_gives_its_gpus_back_at_the_next_check(env, node):
    accepted = provision(env)
    env.run()
    ready = env.meter(accepted.operation_id).start
    # While the platform runs it, each check finds it running and sets the next one (30 s on)
    env.clock.advance(600)
    assert env.track()["instances_lost"] == 0
    assert state(env) == "Succeeded" and env.instance().lease == Lease.tracked(env.clock() + 30)
    # When the DGX Platform loses it (a restart, a broken node)
    env.dgx.instances.clear()
    env.clock.advance(31)
    counts = env.track()
    # Then the next check ends it: Failed with the reason, no endpoint, its GPUs back, billed until that check
    assert counts["instances_lost"] == 1
    props = env.instance_props()
    assert props["provisioningState"] == "Failed" and "endpoint" not in props
    assert props["error"]["code"] == "InstanceLost"
    assert env.allocation() == RELEASED and env.instance().lease is None
    meter = env.meter(accepted.operation_id)
    assert meter.end == int(env.clock()) and meter.end - ready == 631
    assert env.op_status(accepted.operation_id) == "Succeeded"  # its provisioning did succeed
    assert env.audit()[-1].actor_type == "SYSTEM" and "InstanceLost" in env.audit()[-1].change_summary
    # and nothing checks it again; deleting it still works and bills nothing more
    assert env.track()["instances_lost"] == 0
    env.clock.advance(3600)
    assert env.delete_instance() is not None
    env.run()
    assert env.instance() is None and env.meter(accepted.operation_id).end == meter.end
    assert env.allocation() == EMPTY


def test_an_instance_the_platform_reports_failed_stops_billing_and_keeps_its_gpus_until_it_is_gone(env, node):
    accepted = provision(env)
    env.run()
    dgx_id = env.instance().dgx_id
    env.dgx.deletion_seconds = None  # the platform takes its time to remove it
    env.dgx.instances[dgx_id].status = "Failed"
    env.dgx.instances[dgx_id].error_code = "GpuXidError"
    env.dgx.instances[dgx_id].error_message = "GPU 3 fell off the bus."
    env.clock.advance(30)
    assert env.track()["instances_lost"] == 1
    # Then it is Failed with the platform's own reason and no longer billed, but it keeps its GPUs
    props = env.instance_props()
    assert props["provisioningState"] == "Failed" and "endpoint" not in props
    assert props["error"] == {"code": "GpuXidError", "message": "GPU 3 fell off the bus."}
    assert env.meter(accepted.operation_id).end == int(env.clock())
    assert env.allocation() == HELD
    # until the platform confirms it gone: the reconciler asked it to delete, and releases them then
    report = env.w.reconciler.run(now=env.clock() + 1)
    assert [r["outcome"] for r in report.repaired] == ["awaiting_removal"] and env.allocation() == HELD
    assert env.dgx.instances[dgx_id].status == "Deleting"
    env.dgx.finish_deletions()
    report = env.w.reconciler.run(now=env.clock() + 120)  # its next look, a minute on
    assert [r["outcome"] for r in report.repaired] == ["released"] and env.allocation() == RELEASED


def test_a_platform_that_cannot_answer_the_check_ends_nothing(env, node):
    provision(env)
    env.run()
    env.dgx.down("get_instances")  # the batch read, and each read on its own
    env.dgx.down("get_instance")
    env.clock.advance(30)
    assert env.track()["errors"] == 1
    assert state(env) == "Succeeded" and env.allocation() == HELD
    env.dgx.heal()
    assert env.track() == {"checked": 0, "ended": 0, "finished": 0, "instances_lost": 0, "errors": 0, "pages": 1,
                           "left": 0}  # fmt: skip
    assert state(env) == "Succeeded"


def test_a_deletion_that_times_out_fails_and_keeps_the_gpus_until_the_reconciler_releases_them(env, node):
    provision(env)
    env.run()
    env.dgx.deletion_seconds = None  # the platform never finishes deleting it
    deleting = env.delete_instance()
    env.run()
    # Then the instance is Failed, the delete operation Failed, and the GPUs stay reserved (they may be busy)
    props = env.instance_props()
    assert props["provisioningState"] == "Failed"
    assert props["error"] == {
        "code": "DeprovisioningFailed",
        "message": "The instance was not deleted within 900 seconds.",
    }
    operation = env.operation(deleting.operation_id)
    assert operation.status == "Failed" and operation.body["error"]["code"] == "DeprovisioningFailed"
    assert env.sfn.execution(deleting.operation_id).status == "FAILED"
    assert env.allocation() == HELD
    with pytest.raises(Conflict, match="still holds its GPUs"):
        env.provision("llama")
    # When the reconciler looks while the platform still deletes it, it waits
    env.clock.set(env.instance().lease.until + 1)
    assert env.w.reconciler.run().awaiting_removal == 1 and env.allocation() == HELD
    # And once the platform confirms it gone, the reconciler releases the GPUs, once; the instance stays Failed
    env.dgx.finish_deletions()
    env.clock.set(env.instance().lease.until + 1)
    report = env.w.reconciler.run()
    assert report.released == 1 and env.allocation() == RELEASED
    assert state(env) == "Failed"
    env.clock.advance(3600)
    assert env.w.reconciler.run().examined == 0
    # And it can be deleted again
    env.delete_instance()
    env.run()
    assert env.instance() is None and env.allocation() == EMPTY


# ------------------------------------------------------------------------------------------------ refusals
def test_a_request_that_does_not_fit_is_409_insufficient_capacity_saying_what_is_free(env, node):
    with pytest.raises(InsufficientCapacity, match="has 8 free GPUs and 640 GiB free GPU memory; the request needs 9"):
        env.provision("big", devices=9, memory_gb=100)
    provision(env, "first", devices=6, memory_gb=480)
    with pytest.raises(InsufficientCapacity, match="has 2 free GPUs"):
        env.provision("second", devices=4, memory_gb=320)
    assert env.allocation() == Allocation(6, 480, 1)
    assert env.instance("second") is None


def test_a_node_that_is_not_available_takes_no_instance(env, node):
    env.patch_node("dgx-1", {"properties": {"availability": "Cordoned"}})
    with pytest.raises(NodeNotAvailable, match="Cordoned"):
        env.provision()
    with pytest.raises(ParentResourceNotFound):
        env.provision("llama", "no-such-node")
    assert env.allocation() == EMPTY and env.sfn.started == []


def test_an_instance_accepted_on_a_node_repriced_meanwhile_locks_the_price_in_force(env, node):
    def reprice(found: object) -> None:
        env.patch_node("dgx-1", {"properties": {"pricing": {"pricePerGpuHour": 3.0}}})

    env.instances_hooks.after["get_with_node"] = reprice
    provision(env)
    assert env.instance_props()["billingTerms"]["pricePerGpuHour"] == 3.0
    assert env.allocation() == HELD


def test_a_node_repriced_at_every_read_is_409_after_three_tries_and_nothing_is_written(env, node):
    prices = iter([3.0, 3.5, 4.0, 4.5])
    reads: list[object] = []

    def reprice(found: object) -> None:  # after every read of the instance and its node (a hook runs once)
        reads.append(found)
        env.patch_node("dgx-1", {"properties": {"pricing": {"pricePerGpuHour": next(prices)}}})
        env.instances_hooks.after["get_with_node"] = reprice

    env.instances_hooks.after["get_with_node"] = reprice
    with pytest.raises(AnotherOperationInProgress, match="'dgx-1' kept changing"):
        env.provision()
    # three reads and three refused transactions, then the caller is told to retry: no instance, no reservation
    assert len(reads) == 3
    assert env.allocation() == EMPTY and env.sfn.started == []


def test_etag_preconditions_are_honoured(env, node):
    accepted = provision(env)
    etag = accepted.resource["etag"]
    with pytest.raises(PreconditionFailed):
        env.provision("llama", if_none_match="*")
    with pytest.raises(PreconditionFailed):
        env.provision("other", if_match=etag)  # If-Match on a missing instance
    with pytest.raises(PreconditionFailed):
        env.delete_instance(if_match='"stale"')
    env.run()
    current = env.w.instances.get(env.admin(), env.sub, "rg1", "dgx-1", "llama")["etag"]
    assert current != etag
    with pytest.raises(PreconditionFailed):
        env.delete_instance(if_match=etag)
    assert env.delete_instance(if_match=current) is not None
