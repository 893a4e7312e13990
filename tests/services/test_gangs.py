"""Multi-node jobs (issue 32, part 1): a job asking for more devices than one node has runs on several nodes at once
— placed on all of them in one transaction or on none, never half placed, nothing held while it waits — as one DGX
Platform job given every node, metered and billed per node part under one allocation id, canceled and ended as a
whole (services/common/placement.py, "Gangs")."""

from __future__ import annotations

from decimal import Decimal

import pytest

from itl_accelerator.models.quotas import QuotaWrite
from tests.services.conftest import RG, Env
from tests.services.test_metering import DAY, export_rows, money, sync, t
from tests.services.test_retries import cost_of

GANG = {"accelerator": {"kind": "GPU", "count": 8, "nodes": 2, "memoryGb": 640, "model": "H100"}}


def test_a_16_gpu_job_runs_on_two_8_gpu_nodes_whole_or_not_at_all_and_bills_each_part(env: Env):
    env.add_node("a")
    env.add_node("b", owner="owner-b")
    env.w.quotas.put(
        env.admin(), env.sub, "eastus", "gpus-h100", QuotaWrite.model_validate({"properties": {"limit": {"value": 24}}})
    )
    # Given a small job on one of the two 8-GPU nodes, and a third node too small for a part
    env.clock.set(f"{DAY}T10:00:00")
    env.submit("small", 1, 80)
    env.run()
    assert env.job("small").node.name in ("a", "b")
    env.add_node("c", devices=4)
    # When a job of 2 nodes x 8 GPUs is submitted
    operation = env.submit("big", 16, 1280, **GANG).operation_id
    env.run()
    props = env.job_props("big")
    # Then while one of the two has a GPU taken it waits, holding nothing anywhere (never half placed)
    assert props["status"] == "Pending" and "2 nodes with 8 free GPUs" in props["statusReason"]
    assert env.allocation("a").devices + env.allocation("b").devices == 1 and env.allocation("c").devices == 0
    assert env.repos.quotas.in_location(env.sub, "eastus")[0].current == 1
    # When the small job ends
    env.clock.set(f"{DAY}T10:01:00")
    env.end_job("small", at=t(f"{DAY}T10:01:00"))
    # Then it runs on both, placed at once, as one platform job given both nodes
    big = env.job("big")
    assert big.status == "Running" and {big.node.name, *(n.name for n in big.gang_nodes)} == {"a", "b"}
    assert env.allocation("a").devices == env.allocation("b").devices == 8
    props = env.job_props("big")
    assert [n.rsplit("/", 1)[1] for n in props["assignedNodes"]] == [big.node.name, big.gang_nodes[0].name]
    assert "requestedGpus" not in props and props["accelerator"]["nodes"] == 2  # the seed's form is one node's
    (submitted,) = [c for c in env.dgx.calls if c[0] == "submit_job" and c[1]["name"].endswith("/big")]
    assert [n.rsplit("/", 1)[1] for n in submitted[1]["node_ids"]] == [big.node.name, big.gang_nodes[0].name]
    # And each part has its meter, earning for its node's owner, the quota counted once for all 16
    started = t(props["startedAt"][:19])
    first, second = env.meter(operation), env.meter(f"{operation}.part-2")
    assert first is not None and second is not None and first.start == second.start == started
    assert {first.node_name, second.node_name} == {"a", "b"} and second.job_allocation_id == operation
    assert {first.supplier, second.supplier} == {"owner-123", "owner-b"}
    assert env.repos.quotas.in_location(env.sub, "eastus")[0].current == 16
    # When it ends after 10 minutes
    env.clock.set(started + 600)
    env.end_job("big", at=started + 600)
    props = env.job_props("big")
    # Then both parts are released and billed: its cost is both parts' at the terms it locked
    assert props["status"] == "Succeeded" and env.allocation("a").devices == env.allocation("b").devices == 0
    assert props["gpuSeconds"] == 16 * 600 and Decimal(props["cost"]["amount"]) == 2 * cost_of(8, 600)
    assert env.meter(operation).end == env.meter(f"{operation}.part-2").end == started + 600
    # And the export bills each part under the job's allocation id, on its own node
    sync(env, "2025-03-11T01:00:00")
    env.w.billing_export.run(now=t("2025-03-11T01:30:00"))
    rows = [r for r in export_rows(env, DAY) if r["ResourceName"] == "big"]
    assert {r["x_AllocationId"] for r in rows} == {operation} and {r["x_NodeName"] for r in rows} == {"a", "b"}
    assert money(rows) == Decimal(props["cost"]["amount"])


def test_a_gang_the_fleet_could_never_hold_is_refused_at_once_saying_why(env: Env):
    env.add_node("a")
    env.add_node("b", model="A100", gpu_memory_gb=80)  # another model: no gang across models
    env.add_node("c", price=9.0)  # another price: a gang locks one set of terms
    env.submit("big", 16, 1280, **GANG)
    env.run()
    props = env.job_props("big")
    assert props["status"] == "Failed" and "at most 1 such nodes" in props["statusReason"]


def test_a_canceled_gang_stops_as_one_and_gives_every_part_back(env: Env):
    env.add_node("a")
    env.add_node("b")
    env.clock.set(f"{DAY}T10:00:00")
    env.submit("big", 16, 1280, ctx=env.consumer("ann"), **GANG)
    env.run()
    assert env.status("big") == "Running"
    env.clock.set(f"{DAY}T10:02:00")
    env.w.jobs.cancel(env.consumer("ann"), env.sub, RG, "big")
    env.run()
    props = env.job_props("big")
    assert props["status"] == "Canceled" and env.allocation("a").devices == env.allocation("b").devices == 0
    assert Decimal(props["cost"]["amount"]) == 2 * cost_of(8, 120)
    assert [str(j.status) for j in env.dgx.jobs.values()] == ["Canceled"]  # one platform job, stopped


def test_a_retried_gang_runs_its_next_attempt_on_both_nodes_again(env: Env):
    env.add_node("a")
    env.add_node("b")
    env.clock.set(f"{DAY}T10:00:00")
    operation = env.submit("big", 16, 1280, retryStrategy={"attempts": 2, "intervalSeconds": 5}, **GANG).operation_id
    env.run()
    env.clock.set(f"{DAY}T10:01:00")
    env.end_job("big", "Failed", exit_code=1, at=t(f"{DAY}T10:01:00"))
    big = env.job("big")
    assert big.status == "Running" and env.job_props("big")["attempt"] == 2 and len(big.gang_nodes) == 1
    assert env.allocation("a").devices == env.allocation("b").devices == 8
    assert env.meter(f"{operation}.part-2").end == t(f"{DAY}T10:01:00")
    second = env.meter(f"{operation}.attempt-2.part-2")
    assert second is not None and second.end is None and second.attempt == 2


def test_the_largest_gang_offered_is_what_a_gang_submitted_then_gets(env: Env):
    for name in ("a", "b", "c"):
        env.add_node(name)
    env.submit("small", 1, 80)
    env.run()  # one node has a GPU taken: two whole nodes are free
    (offer,) = [o for o in env.w.offers.in_location(env.admin(), env.sub, "eastus") if o["name"] == "gpu-h100"]
    gang = offer["properties"]["largestMultiNode"]
    assert gang == {"nodes": 2, "devicesPerNode": 8, "memoryGbPerNode": 640, "devices": 16}
    ask = {"kind": "GPU", "count": gang["devicesPerNode"], "memoryGb": gang["memoryGbPerNode"], "model": "H100"}
    env.submit("three", 24, 1920, accelerator={**ask, "nodes": 3})
    env.submit("two", 16, 1280, accelerator={**ask, "nodes": gang["nodes"]})
    env.run()
    assert (env.status("three"), env.status("two")) == ("Pending", "Running")


def test_a_gang_over_its_quota_is_refused_at_once_and_counts_all_its_parts(env: Env):
    env.add_node("a")
    env.add_node("b")
    env.w.quotas.put(
        env.admin(), env.sub, "eastus", "gpus-h100", QuotaWrite.model_validate({"properties": {"limit": {"value": 8}}})
    )
    env.submit("big", 16, 1280, **GANG)
    env.run()
    props = env.job_props("big")
    assert (
        props["status"] == "Failed"
        and "asks for 16 GPUs" in props["statusReason"]
        and "allows 8" in props["statusReason"]
    )


def test_a_gang_finds_its_nodes_among_many_others_in_the_index(env: Env):
    # Given 3 H100 nodes, one read before 24 A100 nodes in the placement index and two after them
    env.add_node("a-0")
    for i in range(24):
        env.add_node(f"b-{i:02d}", model="A100")
    env.add_node("c-0")
    env.add_node("c-1")
    env.submit("big", 24, 1920, accelerator={**GANG["accelerator"], "nodes": 3})
    env.run()
    big = env.job("big")
    assert big.status == "Running" and {big.node.name, *(n.name for n in big.gang_nodes)} == {"a-0", "c-0", "c-1"}


def test_a_multi_node_job_may_not_say_it_is_preemptible(env: Env):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="never preempted"):
        env.submit("big", 16, 1280, preemptible=True, **GANG)
