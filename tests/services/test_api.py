"""The API services' rules, called as the routes call them: node RBAC (services/api/nodes.py), who sees which job
(services/api/jobs.py, services/common/job_access.py), who reads which operation (services/api/operations.py),
instance refusals, ETag preconditions, tenant scope answered 404, and the audit trail of every change and refusal."""

from __future__ import annotations

from typing import Any

import pytest

from itl_accelerator.errors import (
    AuthorizationFailed,
    BadRequest,
    Conflict,
    PreconditionFailed,
    ReadOnlyDisabledSubscription,
    ResourceNotFound,
)
from itl_accelerator.models.jobs import SECRET_MASK
from itl_accelerator.models.nodes import SparkNodeWrite
from itl_accelerator.models.subscriptions import SubscriptionWrite
from tests.services.conftest import Allocation, Env, job_body, node_body

OTHER_SUB = "/subscriptions/sub-9999"


def put_node(env: Env, ctx: Any, name: str = "dgx-1", **body: Any) -> tuple[dict[str, Any], bool]:
    return env.w.nodes.put(ctx, env.sub, "rg1", name, SparkNodeWrite.model_validate(node_body(**body)))


def denied(env: Env) -> list[Any]:
    return [e for e in env.audit() if e.outcome == "Denied"]


# ------------------------------------------------------------------------------------------------ nodes
def test_an_admin_registers_a_node_and_the_change_is_audited_once(env):
    node, created = put_node(env, env.admin())
    assert created and node["properties"]["capacity"] == {
        "totalAccelerators": 8,
        "allocatedAccelerators": 0,
        "freeAccelerators": 8,
        "totalGpus": 8,
        "allocatedGpus": 0,
        "freeGpus": 8,
        "totalMemoryGb": 640,
        "allocatedMemoryGb": 0,
        "freeMemoryGb": 640,
    }
    (event,) = env.audit(node["id"])
    assert event.action == "ITL.Accelerator/sparkNodes/write" and event.actor_id == "admin-1"
    assert event.change_summary == "Registered sparkNode 'dgx-1'" and event.previous_state is None
    assert event.new_state["properties"]["owner"] == "owner-123" and event.request_id.startswith("req-")
    # an identical PUT writes nothing: the same etag, no audit item
    again, created = put_node(env, env.admin())
    assert not created and again["etag"] == node["etag"] and len(env.audit(node["id"])) == 1


def test_the_owning_supplier_changes_pricing_and_availability(env, node):
    env.clock.advance(1)  # audit items of one instant are in no particular order
    patched = env.patch_node("dgx-1", {"properties": {"pricing": {"pricePerGpuHour": 3.5}}}, ctx=env.supplier())
    assert patched["properties"]["pricing"]["pricePerGpuHour"] == 3.5 and patched["etag"] != node["etag"]
    env.clock.advance(1)
    patched = env.patch_node("dgx-1", {"properties": {"availability": "Maintenance"}}, ctx=env.supplier())
    assert patched["properties"]["availability"] == "Maintenance"
    env.clock.advance(1)
    replaced, created = put_node(env, env.supplier(), price=4.0, availability="Available")
    assert not created and replaced["properties"]["pricing"]["pricePerGpuHour"] == 4.0
    actions = [e.action for e in env.audit(node["id"])]
    assert actions == ["ITL.Accelerator/sparkNodes/write"] + ["ITL.Accelerator/sparkNodes/pricing/write"] * 3


@pytest.mark.parametrize(
    "patch",
    [
        {"properties": {"hardwareSpecs": {"gpuCount": 4}}},  # refused before it is even validated (403 beats 400)
        {"properties": {"owner": "someone-else"}},
        {"tags": {"team": "ml"}},
        {"sku": {"name": "DGX-H200-8GPU"}},
    ],
    ids=["hardware", "owner", "tags", "sku"],
)
def test_the_owning_supplier_may_change_nothing_else(env, node, patch):
    with pytest.raises(AuthorizationFailed):
        env.patch_node("dgx-1", patch, ctx=env.supplier())
    assert env.node().etag == node["etag"]
    (refusal,) = denied(env)
    assert refusal.actor_id == "owner-123" and refusal.action == "ITL.Accelerator/sparkNodes/write"


def test_a_supplier_changes_nothing_of_a_node_it_does_not_own_and_registers_none(env, node):
    with pytest.raises(AuthorizationFailed):
        env.patch_node("dgx-1", {"properties": {"pricing": {"pricePerGpuHour": 0.5}}}, ctx=env.supplier("someone-else"))
    with pytest.raises(AuthorizationFailed):
        put_node(env, env.supplier("owner-123"), "dgx-2")  # even one it would own
    with pytest.raises(AuthorizationFailed):
        put_node(env, env.consumer(), "dgx-3")
    assert env.node().etag == node["etag"] and env.repos.nodes.get(env.node("dgx-1").key) is not None
    assert len(denied(env)) == 3
    # reading is every role's
    for ctx in (env.consumer(), env.supplier("someone-else")):
        assert env.w.nodes.get(ctx, env.sub, "rg1", "dgx-1")["etag"] == node["etag"]


def test_a_caller_outside_the_subscription_gets_404_and_the_probe_is_audited_where_it_aimed(env, node):
    stranger = env.admin("eve", scopes=[OTHER_SUB])
    with pytest.raises(ResourceNotFound):
        env.w.nodes.get(stranger, env.sub, "rg1", "dgx-1")
    with pytest.raises(ResourceNotFound):
        env.w.nodes.delete(stranger, env.sub, "rg1", "dgx-1")
    assert [e.actor_id for e in denied(env)] == ["eve", "eve"]
    assert env.w.nodes.list(stranger, env.sub, None, top=10, skip_token=None) == ([], None)


def test_a_resource_group_scoped_caller_lists_only_its_group(env):
    env.add_node("in-rg1")
    env.add_node("in-rg2", rg="rg2")
    scoped = env.consumer("rg-user", scopes=[f"/subscriptions/{env.sub}/resourceGroups/rg2"])
    names, token = env.w.nodes.list(scoped, env.sub, None, top=10, skip_token=None)
    assert [n["name"] for n in names] == ["in-rg2"] and token is None
    with pytest.raises(ResourceNotFound):
        env.w.nodes.get(scoped, env.sub, "rg1", "in-rg1")


def test_node_etag_preconditions(env, node):
    with pytest.raises(PreconditionFailed):
        env.w.nodes.put(
            env.admin(),
            env.sub,
            "rg1",
            "dgx-1",
            SparkNodeWrite.model_validate(node_body(price=3.0)),
            if_match='"stale"',
        )
    with pytest.raises(PreconditionFailed):
        env.w.nodes.put(
            env.admin(), env.sub, "rg1", "dgx-1", SparkNodeWrite.model_validate(node_body()), if_none_match="*"
        )
    with pytest.raises(PreconditionFailed):
        env.w.nodes.patch(env.admin(), env.sub, "rg1", "dgx-1", {"tags": {"a": "b"}}, if_match='"stale"')
    with pytest.raises(PreconditionFailed):
        env.w.nodes.delete(env.admin(), env.sub, "rg1", "dgx-1", if_match='"stale"')
    assert env.node().etag == node["etag"]
    updated = env.w.nodes.patch(env.admin(), env.sub, "rg1", "dgx-1", {"tags": {"a": "b"}}, if_match=node["etag"])
    assert updated["tags"] == {"a": "b"}
    assert env.w.nodes.delete(env.admin(), env.sub, "rg1", "dgx-1", if_match=updated["etag"]) is True


def test_a_node_holding_gpus_is_neither_deleted_nor_shrunk_below_them(env, node):
    env.submit("j", 6, 480)
    env.run()
    with pytest.raises(Conflict, match="6 GPUs, 480 GiB"):
        env.w.nodes.delete(env.admin(), env.sub, "rg1", "dgx-1")
    with pytest.raises(Conflict):
        put_node(env, env.admin(), devices=4)
    assert env.node().device_total == 8 and env.allocation() == Allocation(6, 480)
    assert [e.change_summary for e in env.audit(node["id"])] == ["Registered sparkNode 'dgx-1'"]


def test_a_patch_may_not_remove_a_nodes_pricing(env, node):
    with pytest.raises(BadRequest, match=r"'properties\.pricing' cannot be null"):
        env.patch_node("dgx-1", {"properties": {"pricing": None}})


def test_a_suspended_subscription_takes_no_writes(env, node):
    env.w.subscriptions.put(env.admin(), env.sub, SubscriptionWrite.model_validate({"state": "Suspended"}))
    with pytest.raises(ReadOnlyDisabledSubscription):
        env.patch_node("dgx-1", {"properties": {"availability": "Cordoned"}})
    with pytest.raises(ReadOnlyDisabledSubscription):
        env.provision()
    assert env.allocation() == Allocation(0, 0)
    assert env.w.nodes.get(env.consumer(), env.sub, "rg1", "dgx-1")["properties"]["availability"] == "Available"


# ------------------------------------------------------------------------------------------------ jobs
def test_consumers_see_and_cancel_only_their_own_jobs(env, node):
    ann, bob = env.consumer("ann"), env.consumer("bob")
    env.submit("mine", 1, 80, ctx=ann)
    env.run()
    with pytest.raises(ResourceNotFound):
        env.w.jobs.get(bob, env.sub, "rg1", "mine")
    assert env.w.jobs.list(bob, env.sub, "rg1", submitted_by=None, top=10, skip_token=None) == ([], None)
    assert env.w.jobs.list(bob, env.sub, "rg1", submitted_by="ann", top=10, skip_token=None) == ([], None)
    with pytest.raises(ResourceNotFound):
        env.w.jobs.cancel(bob, env.sub, "rg1", "mine")
    assert env.w.jobs.delete(bob, env.sub, "rg1", "mine") is False  # 204, as for a missing job
    with pytest.raises(ResourceNotFound):
        env.w.jobs.get(env.admin("eve", scopes=[OTHER_SUB]), env.sub, "rg1", "mine")
    listed, _ = env.w.jobs.list(env.consumer("ann"), env.sub, None, submitted_by=None, top=10, skip_token=None)
    assert [j["name"] for j in listed] == ["mine"]
    env.w.jobs.cancel(env.consumer("ann"), env.sub, "rg1", "mine")
    env.run()
    assert env.status("mine") == "Canceled" and env.job("mine").canceled_by == "ann"


def test_a_supplier_sees_the_jobs_on_its_nodes_read_only(env, node):
    workload = {"image": "nvcr.io/nvidia/pytorch:24.10-py3", "env": {"MODE": "fast"}}
    env.submit("j", 1, 80, workload=workload)
    env.run()
    owner, other = env.supplier("owner-123"), env.supplier("someone-else")
    shown = env.w.jobs.get(owner, env.sub, "rg1", "j")
    assert shown["properties"]["workload"]["env"] == {"MODE": SECRET_MASK}  # only the submitter and admins see env
    assert [
        j["name"] for j in env.w.jobs.list(owner, env.sub, "rg1", submitted_by=None, top=10, skip_token=None)[0]
    ] == ["j"]
    with pytest.raises(ResourceNotFound):
        env.w.jobs.get(other, env.sub, "rg1", "j")
    assert env.w.jobs.list(other, env.sub, "rg1", submitted_by=None, top=10, skip_token=None) == ([], None)
    with pytest.raises(AuthorizationFailed):
        env.w.jobs.cancel(env.supplier("owner-123"), env.sub, "rg1", "j")
    with pytest.raises(AuthorizationFailed):
        env.submit("x", 1, 80, ctx=env.supplier("owner-123"))
    assert env.status("j") == "Running"


def test_a_pending_job_is_not_the_suppliers_to_see(env):
    env.add_node(availability="Cordoned")
    env.submit("j", 1, 80)
    env.run()
    with pytest.raises(ResourceNotFound):
        env.w.jobs.get(env.supplier("owner-123"), env.sub, "rg1", "j")


def test_listing_by_submitter_is_exact(env, node):
    for user in ("ann", "ann.ops", "annie"):
        for i in range(2):
            env.submit(f"{user.replace('.', '-')}-{i}", 1, 80, ctx=env.consumer(user))
    page, token = env.w.jobs.list(env.admin(), env.sub, "rg1", submitted_by="ann", top=1, skip_token=None)
    names = [j["name"] for j in page]
    while token:
        page, token = env.w.jobs.list(env.admin(), env.sub, "rg1", submitted_by="ann", top=1, skip_token=token)
        names += [j["name"] for j in page]
    assert names == ["ann-0", "ann-1"]
    everything, _ = env.w.jobs.list(env.admin(), env.sub, None, submitted_by=None, top=100, skip_token=None)
    assert len(everything) == 6


def test_job_etag_preconditions_and_an_echoed_job_with_masked_secrets_is_the_same_job(env, node):
    workload = {"image": "nvcr.io/nvidia/pytorch:24.10-py3", "secretEnv": {"TOKEN": "s3cr3t"}}
    accepted = env.submit("j", 1, 80, workload=workload)
    with pytest.raises(PreconditionFailed):
        env.w.jobs.submit(env.admin(), env.sub, "rg1", "j", job_body(1, 80, workload=workload), if_match='"stale"')
    with pytest.raises(PreconditionFailed):
        env.w.jobs.submit(env.admin(), env.sub, "rg1", "j", job_body(1, 80, workload=workload), if_none_match="*")
    # a GET body sent back (its secret masked) is recognised as the same job: nothing new starts
    echoed = {**workload, "secretEnv": {"TOKEN": SECRET_MASK}}
    again, shown = env.w.jobs.submit(
        env.admin(), env.sub, "rg1", "j", job_body(1, 80, workload=echoed), if_match=accepted.resource["etag"]
    )
    assert again is None and shown["properties"]["operationId"] == accepted.operation_id
    assert env.job("j").secret_env == {"TOKEN": "s3cr3t"} and len(env.sfn.started) == 1


# ------------------------------------------------------------------------------------------------ operations
def test_a_jobs_operation_is_read_by_whoever_may_see_the_job(env, node):
    accepted = env.submit("j", 1, 80, ctx=env.consumer("ann"))
    env.run()
    body, kind = env.w.operations.get(env.consumer("ann"), env.sub, "global", accepted.operation_id)
    assert kind == "job" and body["status"] == "Running" and body["name"] == accepted.operation_id
    assert env.w.operations.get(env.supplier("owner-123"), env.sub, "global", accepted.operation_id)[0] == body
    for ctx in (env.consumer("bob"), env.supplier("someone-else"), env.admin("eve", scopes=[OTHER_SUB])):
        with pytest.raises(ResourceNotFound):
            env.w.operations.get(ctx, env.sub, "global", accepted.operation_id)
    with pytest.raises(ResourceNotFound):
        env.w.operations.get(env.consumer("ann"), env.sub, "westeurope", accepted.operation_id)


def test_a_deleted_jobs_operation_is_still_read_by_its_submitter_only(env, node):
    accepted = env.submit("j", 1, 80, ctx=env.consumer("ann"))
    env.run()
    env.end_job("j")
    assert env.w.jobs.delete(env.consumer("ann"), env.sub, "rg1", "j")
    body, _ = env.w.operations.get(env.consumer("ann"), env.sub, "global", accepted.operation_id)
    assert body["status"] == "Succeeded"
    with pytest.raises(ResourceNotFound):  # the supplier saw it while it was on its node; the job is gone now
        env.w.operations.get(env.supplier("owner-123"), env.sub, "global", accepted.operation_id)


def test_an_instances_operation_is_read_within_the_callers_scope_only(env, node):
    accepted, _ = env.provision()
    assert env.w.operations.get(env.consumer(), env.sub, "eastus", accepted.operation_id)[0]["status"] == "Accepted"
    for ctx in (
        env.admin("eve", scopes=[OTHER_SUB]),
        env.admin("rg2-admin", scopes=[f"/subscriptions/{env.sub}/resourceGroups/rg2"]),
    ):
        with pytest.raises(ResourceNotFound):
            env.w.operations.get(ctx, env.sub, "eastus", accepted.operation_id)
    with pytest.raises(ResourceNotFound):
        env.w.operations.get(env.admin(), env.sub, "eastus", "00000000-0000-0000-0000-000000000000")


# ------------------------------------------------------------------------------------------------ instances
def test_only_admins_create_and_delete_instances_and_everyone_in_scope_reads_them(env, node):
    env.provision()
    env.run()
    for ctx in (env.consumer("owner-123"), env.supplier("owner-123")):
        with pytest.raises(AuthorizationFailed):
            env.provision("x", ctx=ctx)
        with pytest.raises(AuthorizationFailed):
            env.delete_instance("llama", ctx=ctx)
        assert (
            env.w.instances.get(ctx, env.sub, "rg1", "dgx-1", "llama")["properties"]["provisioningState"] == "Succeeded"
        )
    stranger = env.admin("eve", scopes=[OTHER_SUB])
    with pytest.raises(ResourceNotFound):
        env.w.instances.get(stranger, env.sub, "rg1", "dgx-1", "llama")
    with pytest.raises(ResourceNotFound):
        env.delete_instance("llama", ctx=stranger)
    assert env.allocation() == Allocation(2, 160, 1) and env.instance() is not None
