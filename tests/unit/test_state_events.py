"""Stream records → state-change events (itl_accelerator/state_events.py), and their publishing: what makes an event,
what it says, and that a refusal by EventBridge is retried or makes the batch come again."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from itl_accelerator.events import EventsNotPublished, StateEventPublisher
from itl_accelerator.repositories.dynamodb.streams import state_change, state_changes

SUB_ID = "/subscriptions/Sub-A/resourceGroups/RG1/providers/ITL.Accelerator"


def image(sk: str, resource_id: str, **attributes: str) -> dict[str, Any]:
    doc = {"id": resource_id, "name": resource_id.rsplit("/", 1)[-1], "properties": {"submittedBy": "bob"}}
    values = {"PK": "SUB#sub-a", "SK": sk, "resourceGroup": "RG1", "doc": json.dumps(doc), **attributes}
    return {k: {"S": v} for k, v in values.items()}


def record(event_id: str, sk: str, resource_id: str, old: dict[str, str] | None, new: dict[str, str] | None) -> dict:
    change: dict[str, Any] = {
        "Keys": {"PK": {"S": "SUB#sub-a"}, "SK": {"S": sk}},
        "SequenceNumber": "100" + event_id[-1],
        "ApproximateCreationDateTime": 1764583200,
    }
    if old is not None:
        change["OldImage"] = image(sk, resource_id, **old)
    if new is not None:
        change["NewImage"] = image(sk, resource_id, **new)
    name = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
    return {"eventID": event_id, "eventName": name, "dynamodb": change}


JOB = ("JOB#rg1#job-1", f"{SUB_ID}/sparkJobs/job-1")
NODE = ("NODE#rg1#dgx-1", f"{SUB_ID}/sparkNodes/dgx-1")
INSTANCE = ("INSTANCE#rg1#dgx-1#i-1", f"{SUB_ID}/sparkNodes/dgx-1/sparkOllamaInstances/i-1")


def test_a_job_status_change_is_a_job_state_changed_event():
    change = state_change(record("e1", *JOB, {"status": "Running"}, {"status": "Succeeded"}))
    assert change is not None and change.detail_type == "Job State Changed"
    assert change.detail() == {
        "eventId": "e1",
        "sequenceNumber": "1001",
        "resourceId": JOB[1],
        "resourceType": "ITL.Accelerator/sparkJobs",
        "subscriptionId": "Sub-A",  # as the ARM id spells it, not the key's lower case
        "resourceGroup": "RG1",
        "name": "job-1",
        "previousState": "Running",
        "state": "Succeeded",
        "time": "2025-12-01T10:00:00Z",
        "submittedBy": "bob",
        "statusReason": None,
    }


def test_created_and_removed_items_have_no_previous_state_and_the_deleted_state():
    created = state_change(record("e1", *NODE, None, {"availability": "Available"}))
    removed = state_change(record("e2", *INSTANCE, {"provisioningState": "Deleting"}, None))
    assert created and (created.detail_type, created.previous_state, created.state) == (
        "Node State Changed",
        None,
        "Available",
    )
    assert removed and (removed.detail_type, removed.previous_state, removed.state) == (
        "Instance State Changed",
        "Deleting",
        "Deleted",
    )


def test_changes_that_leave_the_state_as_it_was_and_other_items_make_no_event():
    renewed = record("e1", *INSTANCE, {"provisioningState": "Provisioning"}, {"provisioningState": "Provisioning"})
    audit = {"eventID": "e2", "dynamodb": {"Keys": {"PK": {"S": "SUB#a#AUDIT"}, "SK": {"S": "2026#x"}}}}
    job_state_only = record("e3", *JOB, {"status": "Running", "provisioningState": "Accepted"}, {"status": "Running"})
    assert state_changes([renewed, audit, job_state_only]) == []


def test_a_local_pollers_datetime_is_read_as_lambdas_epoch_seconds():
    raw = record("e1", *JOB, {"status": "Pending"}, {"status": "Scheduled"})
    raw["dynamodb"]["ApproximateCreationDateTime"] = datetime(2026, 12, 1, 10, 30, tzinfo=UTC)
    change = state_change(raw)
    assert change is not None and change.time == "2026-12-01T10:30:00Z"


class FakeEventBridge:
    """Refuses the entries at the given positions of the first ``refusals`` calls."""

    def __init__(self, refuse: set[int], refusals: int):
        self.calls: list[list[dict[str, Any]]] = []
        self.refuse, self.refusals = refuse, refusals

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls.append(Entries)
        refusing = len(self.calls) <= self.refusals
        results = [
            {"ErrorCode": "InternalFailure", "ErrorMessage": "x"} if refusing and i in self.refuse else {"EventId": "i"}
            for i in range(len(Entries))
        ]
        return {"FailedEntryCount": sum("ErrorCode" in r for r in results), "Entries": results}


def batch(count: int) -> list[dict[str, Any]]:
    return [record(f"e{i}", *JOB, {"status": "Pending"}, {"status": "Scheduled"}) for i in range(count)]


def test_events_go_in_calls_of_ten_in_stream_order():
    bridge = FakeEventBridge(set(), 0)
    report = StateEventPublisher(bridge, "bus-1", sleep=lambda s: None).publish(
        state_changes(batch(23)), len(batch(23))
    )
    assert [len(c) for c in bridge.calls] == [10, 10, 3]
    assert [json.loads(e["Detail"])["eventId"] for c in bridge.calls for e in c] == [f"e{i}" for i in range(23)]
    assert {e["EventBusName"] for c in bridge.calls for e in c} == {"bus-1"}
    assert report.as_metrics() == {"published": 23, "ignored": 0, "retried": 0}


def test_entries_eventbridge_refuses_are_sent_again():
    bridge = FakeEventBridge({1, 3}, refusals=1)
    report = StateEventPublisher(bridge, "bus-1", sleep=lambda s: None).publish(state_changes(batch(5)), len(batch(5)))
    assert [len(c) for c in bridge.calls] == [5, 2]
    assert [json.loads(e["Detail"])["eventId"] for e in bridge.calls[1]] == ["e1", "e3"]
    assert report.retried == 2 and report.published == 5


def test_a_batch_eventbridge_keeps_refusing_is_to_be_delivered_again():
    bridge = FakeEventBridge({0}, refusals=99)
    with pytest.raises(EventsNotPublished):
        StateEventPublisher(bridge, "bus-1", attempts=3, sleep=lambda s: None).publish(
            state_changes(batch(2)), len(batch(2))
        )
    assert len(bridge.calls) == 3


def test_no_bus_is_refused_at_once():
    with pytest.raises(ValueError, match="EVENT_BUS_NAME"):
        StateEventPublisher(FakeEventBridge(set(), 0), "")


def test_only_a_changed_limit_is_a_limit_change():
    """A quota's limit set or removed and a budget created, changed or deleted move their etag; an allocation
    counted in a quota or a budget's evaluation does not — and neither is a limit change (issue 26)."""
    from itl_accelerator.repositories.dynamodb.streams import limit_changes

    quota, budget = ("QUOTA#eastus#gpus-a100-80gb", "/q"), ("BUDGET#team", "/b")
    records = [
        record("e1", *quota, {"used": "2"}, {"used": "4"}),  # an allocation counted: no etag on either side
        record("e2", *quota, {"used": "4"}, {"used": "4", "etag": "q1"}),  # a limit set
        record("e3", *quota, {"etag": "q1"}, {"etag": "q1", "used": "5"}),  # counted again under the limit
        record("e4", *budget, None, {"etag": "b1"}),  # created
        record("e5", *budget, {"etag": "b1"}, {"etag": "b1", "stateSpend": "3"}),  # evaluated
        record("e6", *budget, {"etag": "b1"}, None),  # deleted
        record("e7", *JOB, {"etag": "j1"}, {"etag": "j2"}),  # not a limit
    ]
    assert [(c.event_id, c.kind, c.name, c.subscription_id) for c in limit_changes(records)] == [
        ("e2", "quota", "eastus#gpus-a100-80gb", "sub-a"),
        ("e4", "budget", "team", "sub-a"),
        ("e6", "budget", "team", "sub-a"),
    ]


def _mapping_filters(function_id: str) -> list:
    from itl_local.template import Template

    (mapping,) = [m for m in Template().stream_mappings() if m.function_id == function_id]
    return mapping.filters


@pytest.mark.parametrize(
    ("event_name", "sk", "new_image", "passes"),
    [
        ("MODIFY", "INSTANCE#dgx-1#llama", {"provisioningState": {"S": "Succeeded"}}, True),
        ("INSERT", "JOB#train", {"status": {"S": "Pending"}}, True),
        ("MODIFY", "NODE#dgx-1", {"availability": {"S": "Draining"}}, True),
        ("REMOVE", "INSTANCE#dgx-1#llama", None, True),
        # a lease renewal, a task token, a job's next check: no state changed, the consumer is not invoked
        ("MODIFY", "INSTANCE#dgx-1#llama", {"leaseUntil": {"N": "5000"}, "bookkeeping": {"BOOL": True}}, False),
        ("MODIFY", "JOB#train", {"bookkeeping": {"BOOL": True}}, False),
        ("MODIFY", "METER#op-1", {"meteredUntil": {"N": "1"}}, False),
        # a capacity reservation booked and cancelled
        ("INSERT", "CAPRES#rg1#tuesday", {"etag": {"S": "x"}}, True),
        ("REMOVE", "CAPRES#rg1#tuesday", None, True),
    ],
)
def test_the_state_events_filter_passes_state_changes_not_bookkeeping(event_name, sk, new_image, passes):
    from itl_local.streams import matches

    record: dict = {"eventName": event_name, "dynamodb": {"Keys": {"PK": {"S": "SUB#s"}, "SK": {"S": sk}}}}
    if new_image is not None:
        record["dynamodb"]["NewImage"] = new_image
    assert any(matches(p, record) for p in _mapping_filters("StateEventsFunction")) is passes


def test_a_refused_entry_is_sent_again_after_a_pause_growing_with_each_attempt():
    bridge = FakeEventBridge({0}, refusals=99)
    slept: list[float] = []
    with pytest.raises(EventsNotPublished, match="1 state-change events refused by EventBridge"):
        StateEventPublisher(bridge, "bus-1", attempts=4, backoff=0.5, sleep=slept.append).publish(
            state_changes(batch(2)), len(batch(2))
        )
    assert slept == pytest.approx([0.5, 1.0, 1.5])  # none after the last attempt
    assert [len(c) for c in bridge.calls] == [2, 1, 1, 1]


def test_the_state_events_filter_names_every_kind_the_decoder_publishes():
    from itl_accelerator.repositories.dynamodb.streams import STATE_EVENT_PREFIXES

    for pattern in _mapping_filters("StateEventsFunction")[:2]:
        named = {p["prefix"] for p in pattern["dynamodb"]["Keys"]["SK"]["S"]}
        assert named == set(STATE_EVENT_PREFIXES)


# ------------------------------------------------------------------------------------------ capacity reservations
RESERVATION = ("CAPRES#rg1#tuesday", f"{SUB_ID}/capacityReservations/tuesday")
#: 2025-12-01T10:00Z, the records' ApproximateCreationDateTime; the window is 2025-12-02 09:00-17:00 UTC
WINDOW = {"startTime": "2025-12-02T09:00:00Z", "endTime": "2025-12-02T17:00:00Z"}


def reservation_image(**extra: Any) -> dict[str, Any]:
    doc = {
        "id": RESERVATION[1],
        "name": "tuesday",
        "properties": {
            **WINDOW,
            "bookedBy": "cora",
            "provisioningState": "Succeeded",
            "reservedNodes": [{"id": f"{SUB_ID}/sparkNodes/dgx-1", "devices": 8, "memoryGb": 640}],
        },
    }
    values = {"PK": "SUB#sub-a", "SK": RESERVATION[0], "resourceGroup": "RG1", "doc": json.dumps(doc), **extra}
    return {k: {"S": v} for k, v in values.items()}


def reservation_record(event_id: str, old: bool, new: bool, at: int = 1764583200) -> dict[str, Any]:
    change: dict[str, Any] = {
        "Keys": {"PK": {"S": "SUB#sub-a"}, "SK": {"S": RESERVATION[0]}},
        "SequenceNumber": "200" + event_id[-1],
        "ApproximateCreationDateTime": at,
    }
    if old:
        change["OldImage"] = reservation_image()
    if new:
        change["NewImage"] = reservation_image(etag="e2")
    return {"eventID": event_id, "eventName": "MODIFY", "dynamodb": change}


def test_a_booked_reservation_is_an_event_to_its_owner_with_its_window_and_nodes():
    booked = state_change(reservation_record("r1", old=False, new=True))
    assert booked is not None and booked.detail_type == "Capacity Reservation State Changed"
    assert booked.detail() == {
        "eventId": "r1",
        "sequenceNumber": "2001",
        "resourceId": RESERVATION[1],
        "resourceType": "ITL.Accelerator/capacityReservations",
        "subscriptionId": "Sub-A",
        "resourceGroup": "RG1",
        "name": "tuesday",
        "previousState": None,
        "state": "Scheduled",  # booked ahead of its window
        "time": "2025-12-01T10:00:00Z",
        "bookedBy": "cora",  # its owner: what a rule matches to tell her
        **WINDOW,
        "reservedNodes": [f"{SUB_ID}/sparkNodes/dgx-1"],
    }


def test_a_cancelled_reservation_says_what_it_was_when_cancelled_and_other_writes_make_no_event():
    before = state_change(reservation_record("r2", old=True, new=False))  # 2025-12-01T10:00Z: before the window
    during = state_change(reservation_record("r3", old=True, new=False, at=1764669600 + 3600))  # 2025-12-02T11:00Z
    assert before and (before.previous_state, before.state, before.detail()["bookedBy"]) == (
        "Scheduled",
        "Deleted",
        "cora",
    )
    assert during and (during.previous_state, during.state) == ("Active", "Deleted")
    # a write of the item that neither books nor cancels it changes no state (its state follows the clock)
    assert state_change(reservation_record("r4", old=True, new=True)) is None
