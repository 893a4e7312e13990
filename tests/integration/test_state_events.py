"""Given a rule on the provider's event bus that sends one subscription's events to a queue (as a user subscribes to
them: docs/EVENTS.md), when a node is registered, a job runs to its end and an instance is provisioned and deleted,
then every change of state reaches the rule's target as an event of source ``itl.accelerator`` — in order per
resource, each with its ARM id, old and new state, subscription, time and an id to dedupe by — and nothing else
does (a price change, a lease renewal). A capacity reservation's booking and cancellation reach a rule of its owner's
(``detail.bookedBy``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from tests.conftest import CONSUMER, EVENT_BUS, SEED_NODE, nodes_path
from tests.integration.instance_helpers import SEED_INSTANCE, instances_path, wait_for, wait_gone, wait_state
from tests.integration.test_jobs import jobs_path, wait_job

pytestmark = pytest.mark.usefixtures("schedules")


class Subscriber:
    """A rule on the bus matching ``pattern``, targeting an SQS queue; :meth:`events` drains what arrived."""

    def __init__(self, name: str, pattern: dict[str, Any]):
        self.events_client, self.sqs = boto3.client("events"), boto3.client("sqs")
        self.name = name
        self.queue = self.sqs.create_queue(QueueName=name)["QueueUrl"]
        arn = self.sqs.get_queue_attributes(QueueUrl=self.queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        self.events_client.put_rule(Name=name, EventBusName=EVENT_BUS, EventPattern=json.dumps(pattern))
        self.events_client.put_targets(Rule=name, EventBusName=EVENT_BUS, Targets=[{"Id": "queue", "Arn": arn}])
        self.received: list[dict[str, Any]] = []

    def drain(self) -> list[dict[str, Any]]:
        while True:
            batch = self.sqs.receive_message(QueueUrl=self.queue, MaxNumberOfMessages=10).get("Messages", [])
            if not batch:
                return self.received
            for message in batch:
                self.received.append(json.loads(message["Body"]))
                self.sqs.delete_message(QueueUrl=self.queue, ReceiptHandle=message["ReceiptHandle"])

    def states(self, resource_id: str) -> list[tuple[str | None, str]]:
        """``(previousState, state)`` of the events received for ``resource_id``, in sequence order."""
        mine = sorted(
            (e for e in self.drain() if e["detail"]["resourceId"] == resource_id),
            key=lambda e: int(e["detail"]["sequenceNumber"]),
        )
        return [(e["detail"]["previousState"], e["detail"]["state"]) for e in mine]

    def wait_until(self, resource_id: str, state: str, timeout: float = 60) -> list[tuple[str | None, str]]:
        """The changes of ``resource_id`` received once one of them reached ``state`` (it and all before it)."""
        return wait_for(
            lambda: (s := self.states(resource_id)) and s[-1][1] == state and s,
            timeout=timeout,
            interval=0.2,
            what=f"an event of {resource_id} reaching {state}",
        )

    def wait_for_changes(
        self, resource_id: str, changes: list[tuple[str | None, str]], timeout: float = 60
    ) -> list[tuple[str | None, str]]:
        """The changes of ``resource_id`` received, once they are ``changes`` (failing when more or others come)."""
        return wait_for(
            lambda: (s := self.states(resource_id)) == changes and s,
            timeout=timeout,
            interval=0.2,
            what=f"the events of {resource_id} to be {changes} (so far {self.states(resource_id)})",
        )

    def close(self) -> None:
        self.events_client.remove_targets(Rule=self.name, EventBusName=EVENT_BUS, Ids=["queue"])
        self.events_client.delete_rule(Name=self.name, EventBusName=EVENT_BUS)
        self.sqs.delete_queue(QueueUrl=self.queue)


@pytest.fixture
def subscriber(aws: Any, sub: str) -> Iterator[Subscriber]:
    """Every event of the test's subscription, as a user's rule would select them."""
    s = Subscriber(f"events-{sub}", {"source": ["itl.accelerator"], "detail": {"subscriptionId": [sub]}})
    yield s
    s.close()


def test_a_jobs_life_reaches_a_rule_target_one_event_per_state(admin, sub, dgx, subscriber):
    # Given a node, registered (an event of its own)
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    node_id = f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1"
    assert subscriber.wait_until(node_id, "Available") == [(None, "Available")]
    # When a job is submitted and runs to its end
    job = {"name": "job-1", "status": "Pending", "requested_gpus": 4, "requested_memory_gb": 320}
    assert admin.post(jobs_path(sub), json=job).status_code == 202
    wait_job(admin, jobs_path(sub, "job-1"))
    job_id = f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/sparkJobs/job-1"
    # Then its every state reached the target, in order, the first with no previous state
    states = subscriber.wait_until(job_id, "Succeeded")
    assert states == [
        (None, "Pending"),
        ("Pending", "Scheduled"),
        ("Scheduled", "Running"),
        ("Running", "Succeeded"),
    ]
    # And each is a documented event: its source and detail-type, the ARM id, subscription and an id to dedupe by
    events = [e for e in subscriber.received if e["detail"]["resourceId"] == job_id]
    for event in events:
        assert event["source"] == "itl.accelerator" and event["detail-type"] == "Job State Changed"
        detail = event["detail"]
        assert detail["subscriptionId"] == sub and detail["resourceGroup"] == "rg1" and detail["name"] == "job-1"
        assert detail["resourceType"] == "ITL.Accelerator/sparkJobs" and detail["submittedBy"] == "admin-1"
        assert detail["time"].endswith("Z") and detail["eventId"]
    assert len({e["detail"]["eventId"] for e in events}) == len(events)
    assert events[-1]["detail"]["statusReason"]


def test_an_instances_life_and_a_nodes_changes_reach_the_target(admin, sub, dgx, subscriber):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    node = nodes_path(sub, name="dgx-1")
    # a change that is no change of state (the price) makes no event; cordoning the node does
    assert admin.patch(node, json={"properties": {"pricing": {"pricePerGpuHour": 3.0}}}).status_code == 200
    assert admin.patch(node, json={"properties": {"availability": "Cordoned"}}).status_code == 200
    assert admin.patch(node, json={"properties": {"availability": "Available"}}).status_code == 200
    node_changes = [(None, "Available"), ("Available", "Cordoned"), ("Cordoned", "Available")]
    assert subscriber.wait_for_changes(node, node_changes, timeout=30) == node_changes
    # an instance provisioned, then deleted: its states, then Deleted
    assert admin.post(instances_path(sub), json=SEED_INSTANCE).status_code == 202
    instance = instances_path(sub, name="instance-1")
    wait_state(admin, instance, ("Succeeded",))
    assert admin.delete(instance).status_code == 202
    wait_gone(admin, instance)
    states = subscriber.wait_until(instance, "Deleted")
    assert states[0] == (None, "Accepted") and ("Provisioning", "Succeeded") in states
    assert states[-2:] == [("Succeeded", "Deleting"), ("Deleting", "Deleted")]
    kinds = {e["detail-type"] for e in subscriber.received}
    assert kinds == {"Node State Changed", "Instance State Changed"}


def test_a_reservation_booked_and_cancelled_reaches_its_owners_rule(caller, admin, sub, dgx, aws):
    # Given the consumer's own rule: her reservations' events, whatever the subscription's other events
    owners = Subscriber(
        f"booker-{sub}",
        {"source": ["itl.accelerator"], "detail-type": ["Capacity Reservation State Changed"],
         "detail": {"subscriptionId": [sub], "bookedBy": ["cora"]}},
    )  # fmt: skip
    try:
        assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
        cora = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="cora")
        start = (int(time.time()) // 3600 + 25) * 3600  # tomorrow, on a whole hour
        at = lambda epoch: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))  # noqa: E731
        body = {
            "location": SEED_NODE["location"],
            "properties": {
                "accelerator": {"kind": "GPU", "count": 4},
                "startTime": at(start),
                "endTime": at(start + 7200),
            },
        }
        path = f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/capacityReservations/tuesday"
        # When she books a window, and cancels it before it starts
        assert cora.put(path, json=body).status_code == 201
        assert owners.wait_until(path, "Scheduled") == [(None, "Scheduled")]
        assert cora.delete(path).status_code == 200
        # Then her rule received both, each saying whose it is, its window and the node that held it
        assert owners.wait_until(path, "Deleted") == [(None, "Scheduled"), ("Scheduled", "Deleted")]
        for event in owners.received:
            detail = event["detail"]
            assert event["detail-type"] == "Capacity Reservation State Changed" and detail["bookedBy"] == "cora"
            assert (detail["startTime"], detail["endTime"]) == (at(start), at(start + 7200))
            assert detail["reservedNodes"] == [nodes_path(sub, name="dgx-1")]
            assert detail["resourceType"] == "ITL.Accelerator/capacityReservations" and detail["name"] == "tuesday"
    finally:
        owners.close()
