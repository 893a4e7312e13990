"""Fleet changes (services/streams/fleet.py): a node registered, changed or removed, as the table's stream reports it
(domain.records.NodeChange built here from the node before and after the write), serves the waiting jobs at once
and fails those no node could ever hold any more."""

from __future__ import annotations

from itl_accelerator.domain.records import NodeChange, NodeState
from itl_accelerator.models.nodes import SparkNodeWrite
from tests.services.conftest import Allocation, Env, node_body


def change(env: Env, before: NodeState | None, after: NodeState | None, event: str = "evt-1") -> NodeChange:
    return NodeChange(event_id=event, subscription_id=env.sub, before=before, after=after)


def waiting(env: Env, name: str, devices: int, memory_gb: int, **props: object) -> None:
    env.submit(name, devices, memory_gb, **props)
    env.run()
    job = env.job(name)
    assert job.status == "Pending" and job.queued, env.job_props(name)["statusReason"]


def test_a_node_registered_places_the_waiting_job_at_once(env, node):
    env.submit("big", 8, 640)
    env.run()
    waiting(env, "next", 4, 320)
    env.add_node("dgx-2")
    report = env.w.fleet_changes.on_changes([change(env, None, env.node_state("dgx-2"))])
    assert (report.changes, report.placed, report.failed) == (1, 1, 0)
    env.run()
    assert env.status("next") == "Running"
    assert env.job_props("next")["assignedNode"].endswith("/sparkNodes/dgx-2")
    assert env.allocation("dgx-2") == Allocation(4, 320)


def test_a_node_uncordoned_places_the_waiting_job_at_once(env):
    env.add_node(availability="Cordoned")
    waiting(env, "j", 1, 80)
    before = env.node_state()
    env.patch_node("dgx-1", {"properties": {"availability": "Available"}})
    report = env.w.fleet_changes.on_changes([change(env, before, env.node_state())])
    assert report.placed == 1
    env.run()
    assert env.status("j") == "Running"


def test_a_node_cordoned_leaves_the_waiting_jobs_waiting(env, node):
    env.submit("a", 8, 640)
    env.run()
    waiting(env, "j", 1, 80)
    before = env.node_state()
    env.patch_node("dgx-1", {"properties": {"availability": "Cordoned"}})
    report = env.w.fleet_changes.on_changes([change(env, before, env.node_state())])
    assert (report.changes, report.placed, report.failed) == (1, 0, 0)
    env.run()
    assert env.status("j") == "Pending" and env.status("a") == "Running"


def test_a_node_shrunk_fails_the_waiting_job_that_can_no_longer_ever_fit(env, node):
    # Given an 8-GPU job waiting for the only node, which holds 2 GPUs for another job
    env.submit("small", 2, 160)
    env.run()
    waiting(env, "whole-node", 8, 640)
    # When the node is registered again with 4 GPUs (its allocations still fit)
    before = env.node_state()
    env.w.nodes.put(env.admin(), env.sub, "rg1", "dgx-1", SparkNodeWrite.model_validate(node_body(devices=4)))
    report = env.w.fleet_changes.on_changes([change(env, before, env.node_state())])
    # Then the waiting job fails at once, saying why, instead of waiting for its pending timeout
    assert report.failed == 1
    env.run()
    props = env.job_props("whole-node")
    assert props["status"] == "Failed"
    assert props["statusReason"] == (
        "Inadmissible: The job asks for 8 GPUs and 640 GiB of GPU memory; the largest node has 4 GPUs and 320 GiB."
    )
    assert env.status("small") == "Running" and env.allocation() == Allocation(2, 160)


def test_a_node_deleted_fails_the_waiting_job_no_node_can_hold_any_more(env, node):
    env.add_node("h200", model="H200", gpu_memory_gb=141, availability="Cordoned")
    waiting(env, "j", 1, 80, gpuModel="H200")
    before = env.node_state("h200")
    assert env.w.nodes.delete(env.admin(), env.sub, "rg1", "h200")
    report = env.w.fleet_changes.on_changes([change(env, before, None)])
    assert report.failed == 1
    env.run()
    assert env.job_props("j")["statusReason"] == "Inadmissible: No node of the subscription has GPU model 'h200'."


def test_reservations_and_releases_are_not_fleet_changes(env, node):
    waiting_before = env.node_state()
    env.submit("j", 2, 160)
    env.run()
    same = env.node_state()
    assert same.etag == waiting_before.etag  # a reservation changes the counters, not the node
    report = env.w.fleet_changes.on_changes([change(env, waiting_before, same)])
    assert (report.changes, report.placed, report.failed) == (0, 0, 0)


def test_a_batch_delivered_twice_places_each_job_once(env, node):
    env.submit("big", 8, 640)
    env.run()
    waiting(env, "next", 4, 320)
    env.add_node("dgx-2")
    record = change(env, None, env.node_state("dgx-2"))
    assert env.w.fleet_changes.on_changes([record]).placed == 1
    assert env.w.fleet_changes.on_changes([record]).placed == 0  # at-least-once delivery: the repeat is harmless
    env.run()
    assert env.status("next") == "Running" and env.allocation("dgx-2") == Allocation(4, 320)
