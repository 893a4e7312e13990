"""Capacity reservations (issue 44; services/api/reservations.py, domain/reservations.py) as users meet them: a
booking that fits is 201 with its nodes, locked price and total cost, and its nodes' calendars and meters say so; one
that overlaps is 409 naming the window and the nodes that block it; running work blocks a window until its maximum
duration ends, open-ended work for good; concurrent bookings for the last devices — exactly one wins; a cancellation
before the window bills nothing; consumers see their own, suppliers what was sold on their nodes."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from itl_accelerator.errors import (
    BadRequest,
    BudgetExceeded,
    Conflict,
    InsufficientCapacity,
    PropertyChangeNotAllowed,
    QuotaExceeded,
    ResourceNotFound,
)
from itl_accelerator.models.reservations import CapacityReservationWrite
from tests.services.conftest import RG, SUB, Env

#: 2025-03-11T09:00Z: the next day's working hours (the test clock starts 2025-03-10T08:00Z)
NINE = int(datetime(2025, 3, 11, 9, tzinfo=UTC).timestamp())
HOUR = 3600


def at(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def body(devices: int = 8, start: int = NINE, hours: int = 8, **accelerator: Any) -> CapacityReservationWrite:
    extra = accelerator.pop("extra", {})
    return CapacityReservationWrite.model_validate(
        {
            "location": "eastus",
            "properties": {
                "accelerator": {"kind": "GPU", "count": devices, "model": "H100", **accelerator},
                "startTime": at(start),
                "endTime": at(start + hours * HOUR),
                **extra,
            },
        }
    )


def book(env: Env, name: str, payload: CapacityReservationWrite, ctx=None) -> tuple[dict[str, Any], bool]:
    return env.w.reservations.book(ctx or env.consumer(), SUB, RG, name, payload)


def test_a_booking_that_fits_names_its_nodes_price_and_cost_and_is_on_the_node_calendar(env: Env, node):
    reservation, created = book(env, "week-1", body(8, hours=8))
    props = reservation["properties"]
    assert created and props["provisioningState"] == "Succeeded" and props["state"] == "Scheduled"
    assert [n["id"].rsplit("/", 1)[-1] for n in props["reservedNodes"]] == ["dgx-1"]
    assert props["billingTerms"]["pricePerGpuHour"] == 2.5 and props["hours"] == 8
    assert props["totalCost"] == {"amount": "160.000000", "currency": "USD"}  # 8 GPUs x 8 h x 2.50
    assert (props["startTime"], props["endTime"]) == (at(NINE), at(NINE + 8 * HOUR))
    stored = env.node()
    assert [(b.devices, b.start, b.end) for b in stored.bookings] == [(8, NINE, NINE + 8 * HOUR)]
    assert stored.calendar_revision == 1
    meters = [m for m in env.state.meters.values() if m.descriptor.get("capacityReservationId")]
    assert [(m.gpus, m.start, m.end) for m in meters] == [(8, NINE, NINE + 8 * HOUR)]
    assert env.w.reservations.get(env.consumer(), SUB, RG, "week-1")["etag"] == reservation["etag"]


def test_an_overlapping_booking_is_409_naming_the_window_and_the_node_that_blocks_it(env: Env, node):
    book(env, "morning", body(6, hours=4))
    with pytest.raises(InsufficientCapacity) as refused:
        book(env, "overlap", body(4, start=NINE + 3 * HOUR, hours=2))
    message = refused.value.message
    assert "2025-03-11T12:00Z to 2025-03-11T14:00Z" in message and "dgx-1" in message
    assert "6 booked by a reservation 2025-03-11T09:00Z to 2025-03-11T13:00Z" in message
    assert [d["target"].rsplit("/", 1)[-1] for d in refused.value.details] == ["dgx-1"]
    # what is left beside it, and the hours after it, still book
    assert book(env, "beside", body(2, start=NINE + 3 * HOUR, hours=2))[1]
    assert book(env, "after", body(8, start=NINE + 5 * HOUR, hours=2))[1]


def test_running_work_blocks_a_window_until_its_maximum_duration_and_open_ended_work_for_good(env: Env, node):
    env.submit("short", 8, 640, maxDurationMinutes=60)  # ends by 09:00 today
    env.run()
    assert env.status("short") == "Running"
    assert book(env, "today", body(8, start=NINE - 23 * HOUR, hours=1))[1]  # free again once "short" ends
    env.add_node("dgx-2")
    accepted, _ = env.provision("llama", devices=8, memory_gb=640, node="dgx-2")
    assert accepted is not None
    env.run()
    with pytest.raises(InsufficientCapacity) as refused:
        book(env, "gang", body(8, nodes=2))
    assert "8 held by running work open-ended" in refused.value.message
    assert book(env, "one", body(8))[1]  # dgx-1 alone is free tomorrow


def test_twenty_concurrent_bookings_for_the_last_8_devices_exactly_one_wins(env: Env, node):
    book(env, "half", body(8, hours=1))  # 09:00-10:00 taken: the last 8 devices are those of 10:00-11:00
    outcomes: list[str] = []
    barrier = threading.Barrier(20)

    def one(i: int) -> None:
        barrier.wait()
        try:
            book(env, f"race-{i}", body(8, start=NINE + HOUR, hours=1))
            outcomes.append("won")
        except InsufficientCapacity:
            outcomes.append("409")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["409"] * 19 + ["won"]
    assert len([b for b in env.node().bookings if b.start == NINE + HOUR]) == 1


def test_a_booking_that_meets_a_concurrent_one_decides_again_on_what_it_then_reads(env: Env, node):
    def concurrent(_: Any) -> None:
        env.nodes_hooks.after.pop("bookable", None)
        book(env, "first", body(8, hours=1))

    env.nodes_hooks.after["bookable"] = concurrent
    with pytest.raises(InsufficientCapacity):
        book(env, "second", body(8, hours=1))
    assert [b.reservation for b in env.node().bookings] == ["capacityReservations/rg1/first"]


def test_a_cancellation_before_the_window_bills_nothing_and_frees_the_window(env: Env, node):
    book(env, "week-1", body(8))
    assert env.w.reservations.cancel(env.consumer(), SUB, RG, "week-1") is True
    assert env.node().bookings == ()
    assert not [m for m in env.state.meters.values() if m.descriptor.get("capacityReservationId")]
    assert env.w.reservations.cancel(env.consumer(), SUB, RG, "week-1") is False  # 204
    assert book(env, "again", body(8))[1]


def test_a_cancellation_once_the_window_began_bills_it_whole_and_frees_the_rest(env: Env, node):
    book(env, "week-1", body(8, hours=4))
    env.clock.set(NINE + HOUR)
    env.w.reservations.cancel(env.consumer(), SUB, RG, "week-1")
    assert env.node().bookings == ()
    meters = [m for m in env.state.meters.values() if m.descriptor.get("capacityReservationId")]
    assert [(m.start, m.end) for m in meters] == [(NINE, NINE + 4 * HOUR)]


def test_consumers_see_their_own_suppliers_what_was_sold_on_their_nodes(env: Env, node):
    book(env, "anns", body(8))
    bob = env.consumer("bob")
    with pytest.raises(ResourceNotFound):
        env.w.reservations.get(bob, SUB, RG, "anns")
    assert env.w.reservations.in_scope(bob, SUB, None, top=10, skip_token=None)[0] == []
    assert env.w.reservations.cancel(bob, SUB, RG, "anns") is False  # not bob's to cancel: as if missing
    assert env.node().bookings != ()
    owner = env.supplier("owner-123")
    assert [r["name"] for r in env.w.reservations.in_scope(owner, SUB, RG, top=10, skip_token=None)[0]] == ["anns"]
    with pytest.raises(ResourceNotFound):
        env.w.reservations.get(env.supplier("someone-else"), SUB, RG, "anns")
    assert env.w.reservations.get(env.admin(), SUB, RG, "anns")["name"] == "anns"
    with pytest.raises(Conflict):
        book(env, "anns", body(8), ctx=bob)  # the name is taken: nothing more is said


def test_a_booking_cannot_be_changed_the_same_one_again_is_200(env: Env, node):
    first, _ = book(env, "week-1", body(8))
    again, created = book(env, "week-1", body(8))
    assert not created and again["etag"] == first["etag"]
    with pytest.raises(PropertyChangeNotAllowed):
        book(env, "week-1", body(4))


def test_budgets_and_quotas_are_checked_for_the_whole_window(env: Env, node):
    env.w.budgets.put(
        env.admin(),
        SUB,
        "small",
        _budget(amount=100),  # the window costs 160
    )
    with pytest.raises(BudgetExceeded) as refused:
        book(env, "week-1", body(8))
    assert "160.00 USD" in refused.value.message and "100.00 USD left" in refused.value.message
    assert book(env, "four", body(4))[1]  # 4 x 8 h x 2.50 = 80


def test_a_reservation_larger_than_a_quota_is_refused(env: Env, node):
    env.w.quotas.put(env.admin(), SUB, "eastus", "gpus", _quota(4))
    with pytest.raises(QuotaExceeded):
        book(env, "week-1", body(8))


@pytest.mark.parametrize(
    ("start", "why"),
    [(NINE - 2 * 24 * HOUR, "in the future"), (NINE + 60 * 24 * HOUR, "at most 56 days ahead")],
)
def test_a_window_must_start_ahead_and_not_too_far(env: Env, node, start: int, why: str):
    with pytest.raises(BadRequest) as refused:
        book(env, "w", body(8, start=start))
    assert why in refused.value.message and refused.value.target == "properties.startTime"


def test_a_window_is_on_whole_hours():
    with pytest.raises(ValueError, match="whole UTC hours"):
        body(8, start=NINE + 60)


def _budget(amount: int) -> Any:
    from itl_accelerator.models.budgets import BudgetWrite

    return BudgetWrite.model_validate(
        {
            "properties": {
                "amount": amount,
                "currency": "USD",
                "timeGrain": "Monthly",
                "timePeriod": {"startDate": "2025-03-01T00:00:00Z"},
                "actionAtLimit": "RefuseNewAllocations",
            }
        }
    )


def _quota(limit: int) -> Any:
    from itl_accelerator.models.quotas import QuotaWrite

    return QuotaWrite.model_validate({"properties": {"limit": {"value": limit}}})


def test_a_node_under_a_reservation_is_not_deleted_or_cordoned_unless_forced(env: Env, node):
    from itl_accelerator.errors import NodeReserved

    book(env, "week-1", body(8))
    admin = env.admin()
    with pytest.raises(NodeReserved) as refused:
        env.w.nodes.delete(admin, SUB, RG, "dgx-1")
    assert "week-1 (2025-03-11T09:00:00Z to 2025-03-11T17:00:00Z)" in refused.value.message
    owner = env.supplier("owner-123")
    with pytest.raises(NodeReserved):
        env.patch_node("dgx-1", {"properties": {"availability": "Maintenance"}}, ctx=owner)
    # a change that breaks nothing booked goes through: a new price (the reservation's is locked)
    env.patch_node("dgx-1", {"properties": {"pricing": {"pricePerGpuHour": 3.0}}}, ctx=owner)
    assert (
        env.w.reservations.get(env.consumer(), SUB, RG, "week-1")["properties"]["totalCost"]["amount"] == "160.000000"
    )
    # forced before the window: the reservation ends unbilled, and its owner can read why in the audit
    env.w.nodes.patch(owner, SUB, RG, "dgx-1", {"properties": {"availability": "Maintenance"}}, force=True)
    with pytest.raises(ResourceNotFound):
        env.w.reservations.get(env.consumer(), SUB, RG, "week-1")
    assert not [m for m in env.state.meters.values() if m.descriptor.get("capacityReservationId")]
    assert env.node().bookings == ()
    said = [e.change_summary for e in env.audit() if e.resource_type == "ITL.Accelerator/capacityReservations"]
    assert sorted(said) == ["Booked capacity reservation", "Ended capacity reservation: its node was changed "
                            "(billed up to 2025-03-10T08:00Z)"]  # fmt: skip


def test_a_forced_delete_in_the_window_bills_the_reservation_up_to_then(env: Env, node):
    book(env, "week-1", body(8, hours=8))
    env.clock.set(NINE + 2 * HOUR + 600)
    assert env.w.nodes.delete(env.admin(), SUB, RG, "dgx-1", force=True)
    meters = [m for m in env.state.meters.values() if m.descriptor.get("capacityReservationId")]
    assert [(m.start, m.end) for m in meters] == [(NINE, NINE + 2 * HOUR + 600)]
