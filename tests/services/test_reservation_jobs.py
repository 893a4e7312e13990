"""Capacity reservations in scheduling (issue 44, "Jobs in a reservation", backfill) as users see them: a booking
keeps its window's devices for its reservation — a job that ends before the window opens runs now (backfill), one
that would run into it waits, saying so, with an estimate after the window; a job that names the reservation waits
for its window, runs in it out of its booking (shared with the reservation's other jobs), is billed nothing more and
is stopped when the window ends; an instance is refused capacity a future booking needs.

A reservation and its bookings are written into the in-memory store directly (the booking's own rules are
tests/services/test_reservations.py's): a window of this test's day, in EUR, whatever the nodes' prices now."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.records import Booking, ResourceKey, node_key
from itl_accelerator.domain.reservations import CapacityReservation
from itl_accelerator.errors import ArmError
from itl_accelerator.repositories.memory.state import fold
from tests.services.conftest import RG, START, SUB, Env
from tests.services.fakes import iso

HOUR = 3600
WINDOW = (int(START) + 2 * HOUR, int(START) + 4 * HOUR)  # 10:00 to 12:00 on the test's day
RESERVATION_ID = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/ITL.Accelerator/capacityReservations/week"
REF = "capacityReservations/rg1/week"
OTHER_REF = "capacityReservations/rg9/someone-elses"


def book(env: Env, ref: str, devices: int, window: tuple[int, int] = WINDOW, node: str = "dgx-1") -> None:
    """A booking of ``devices`` (80 GiB each) on ``node`` over ``window``, as the booking transaction writes it."""
    stored = env.state.nodes[fold(node_key(SUB, RG, node))].node
    stored.bookings = (*stored.bookings, Booking(ref, devices, 80 * devices, *window))
    stored.calendar_revision += 1


def reservation(env: Env, devices: int = 8, window: tuple[int, int] = WINDOW, nodes=("dgx-1",)) -> CapacityReservation:
    """The reservation 'week' of ``devices`` per node on ``nodes`` over ``window`` at 2 EUR, booked by ann: in the
    store with its bookings, as the booking transaction writes them."""
    for name in nodes:
        book(env, REF, devices, window, name)
    booked = CapacityReservation(
        ResourceKey(SUB, RG, "capacityReservations", ("week",)),
        {"id": RESERVATION_ID, "name": "week", "properties": {}},
        "etag-1",
        "GPU",
        "h100",
        "eastus",
        devices,
        80 * devices,
        *window,
        tuple(node_key(SUB, RG, n) for n in nodes),
        BillingTerms(Decimal("2"), "EUR"),
        "ann",
    )
    env.state.reservations[fold(booked.key)] = booked
    return booked


def props_of(env: Env, name: str) -> dict[str, Any]:
    return env.job_props(name)


# ----------------------------------------------------------------------------------------------- backfill
def test_a_job_that_ends_before_a_window_opens_runs_on_its_devices_now(env: Env, node):
    book(env, OTHER_REF, 8)
    env.submit("short", 8, 640, maxDurationMinutes=120)  # 08:00 to 10:00 at the latest: ends as the window opens
    env.run()
    assert env.status("short") == "Running"


def test_a_job_that_would_run_into_a_window_waits_saying_so_and_is_estimated_after_it(env: Env, node):
    book(env, OTHER_REF, 6)
    env.submit("long", 4, 320, maxDurationMinutes=180)  # would run to 11:00, into the window
    env.submit("small", 2, 160, maxDurationMinutes=180)  # the 2 not booked are its
    env.run()
    props = props_of(env, "long")
    assert props["status"] == "Pending"
    assert props["statusReason"] == (
        "Waiting for capacity: the nodes with 4 free GPUs now are booked by a capacity reservation from "
        f"{iso(WINDOW[0])}, and the job, with its maximum duration of 180 minutes, would run into that window."
    )
    assert props["estimatedStartTime"].startswith(iso(WINDOW[1])[:-1])  # after the window ends
    assert env.status("small") == "Running"


# ----------------------------------------------------------------------------------------------- in a reservation
def test_a_job_in_its_reservation_waits_for_the_window_runs_in_it_billed_nothing_more_and_stops_at_its_end(
    env: Env, node
):
    reservation(env)
    operation = env.submit("mine", 4, 320, maxDurationMinutes=600, capacityReservationId=RESERVATION_ID).operation_id
    env.submit("other", 1, 80, maxDurationMinutes=30)
    env.run()
    # Before the window: it waits, saying when the window opens, estimated to start then; others backfill
    props = props_of(env, "mine")
    assert props["status"] == "Pending"
    assert props["statusReason"] == (
        f"Waiting for the window of its capacity reservation: 'week' opens at {iso(WINDOW[0])}."
    )
    assert props["estimatedStartTime"].startswith(iso(WINDOW[0])[:-1])
    assert env.status("other") == "Running"
    # When the window opens (the waiting jobs served again by the reconciler's periodic retry)
    env.clock.set(WINDOW[0])
    env.w.reconciler.run()
    env.run(advance=0)
    # Then it runs, until the window's end at the latest, billed nothing more than the reservation
    props = props_of(env, "mine")
    assert props["status"] == "Running", props["statusReason"]
    assert props["capacityReservationEndsAt"] == iso(WINDOW[1])
    assert Decimal(str(props["billingTerms"]["pricePerGpuHour"])) == 0 and props["billingTerms"]["currency"] == "EUR"
    meter = env.meter(operation)
    assert meter is not None and meter.terms.price_per_gpu_hour == 0 and meter.terms.currency == "EUR"
    assert meter.capacity_reservation_id == RESERVATION_ID
    hold = next(h for h in env.node().holds if h.holder == "sparkJobs/rg1/mine")
    assert hold.reservation == REF and hold.until == WINDOW[1]
    # When the window ends while it still runs, the tracker stops it, saying why, billed to the window's end
    env.clock.set(WINDOW[1] + 1)
    env.track()
    env.run(advance=env.settings.job_preemption_grace_seconds + 10)
    props = props_of(env, "mine")
    assert props["status"] == "Failed"
    assert props["statusReason"].startswith(
        f"ReservationEnded: the window of its capacity reservation 'week' ended at {iso(WINDOW[1])}"
    )
    assert env.meter(operation).end == WINDOW[1]


def test_two_jobs_of_a_reservation_share_its_booking_and_others_get_none_of_it(env: Env, node):
    reservation(env, devices=8, window=(int(START) - HOUR, int(START) + 3 * HOUR))  # open now
    env.submit("first", 4, 320, maxDurationMinutes=60, capacityReservationId=RESERVATION_ID)
    env.submit("second", 4, 320, maxDurationMinutes=60, capacityReservationId=RESERVATION_ID)
    env.submit("third", 4, 320, maxDurationMinutes=60, capacityReservationId=RESERVATION_ID)
    env.submit("outsider", 1, 80, maxDurationMinutes=30)
    env.run()
    assert [env.status(n) for n in ("first", "second", "third")] == ["Running", "Running", "Pending"]
    assert props_of(env, "third")["statusReason"] == (
        "Waiting for room in its capacity reservation: 'week' books 8 GPUs per node and its other jobs hold too "
        "many of them now."
    )
    assert env.status("outsider") == "Pending"  # the node's 8 are the reservation's
    assert env.node().devices_allocated == 8


@pytest.mark.parametrize(
    ("named", "asked", "said"),
    [
        ("/subscriptions/x/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/n", {}, "must be the ARM id"),
        (RESERVATION_ID.replace(SUB, "sub-other"), {}, "must be the ARM id"),
        (RESERVATION_ID + "x", {}, "does not exist"),
        (RESERVATION_ID, {"devices": 8}, "it books 4 GPUs and 320 GiB per node, the job asks for 8 and 640 GiB"),
    ],
)
def test_a_job_naming_a_reservation_it_cannot_use_is_refused_at_submission(env: Env, node, named, asked, said):
    reservation(env, devices=4)
    devices = asked.get("devices", 2)
    with pytest.raises(ArmError) as refused:
        env.submit("bad", devices, 80 * devices, capacityReservationId=named)
    assert refused.value.status == 400 and refused.value.code == "InvalidParameter"
    assert said in refused.value.message and refused.value.target == "properties.capacityReservationId"


def test_a_job_whose_reservation_was_cancelled_fails_at_admission_saying_so(env: Env, node):
    reservation(env)
    env.submit("late", 2, 160, capacityReservationId=RESERVATION_ID)
    assert env.w.reservations.cancel(
        env.consumer("ann"), SUB, RG, "week"
    )  # cancelled between its submission and its admission
    env.run()
    props = props_of(env, "late")
    assert props["status"] == "Failed"
    assert props["statusReason"] == (
        "Inadmissible: The capacity reservation 'week' the job names does not exist (cancelled, or never booked)."
    )


def test_a_waiting_job_is_unaffected_by_bookings_of_no_window_in_its_way(env: Env, node):
    book(env, OTHER_REF, 8, (int(START) + 100 * HOUR, int(START) + 101 * HOUR))
    env.submit("j", 8, 640, maxDurationMinutes=60)
    env.run()
    assert env.status("j") == "Running"


# ----------------------------------------------------------------------------------------------- instances
def test_an_instance_is_refused_devices_a_future_booking_needs_naming_the_window(env: Env, node):
    book(env, OTHER_REF, 6)
    with pytest.raises(ArmError) as refused:
        env.provision("llama", devices=4, memory_gb=320)
    assert refused.value.status == 409 and refused.value.code == "CapacityReserved"
    assert f"from {iso(WINDOW[0])} to {iso(WINDOW[1])} (6 GPUs)" in refused.value.message
    accepted, _ = env.provision("small", devices=2, memory_gb=160)  # the 2 no booking needs are its
    assert accepted is not None


# ----------------------------------------------------------------------------------------------- preemptible work
def test_preemptible_work_borrows_booked_devices_and_is_preempted_when_the_reservations_job_needs_them(env: Env, node):
    reservation(env, devices=8)
    grace = env.settings.job_preemption_grace_seconds
    # Given a preemptible job placed on the booked devices though it would run into the window
    borrowed = env.submit("borrower", 8, 640, ctx=env.consumer("bob"), maxDurationMinutes=600, preemptible=True)
    env.submit("steady", 1, 80, maxDurationMinutes=600)  # not preemptible: the booking keeps the node from it
    env.run()
    assert env.status("borrower") == "Running" and env.status("steady") == "Pending"
    # And the reservation's job, submitted before the window, waiting for it
    env.submit("mine", 8, 640, maxDurationMinutes=60, capacityReservationId=RESERVATION_ID)
    env.run()
    assert env.status("mine") == "Pending"
    # When the window opens and the waiting jobs are served again
    env.clock.set(WINDOW[0])
    env.w.reconciler.run()
    env.run(advance=0)
    # Then the borrower is told why it is preempted, with its grace period, whatever its priority
    props = props_of(env, "borrower")
    assert props["statusReason"] == (
        f"Preempted: the devices it holds are booked by a capacity reservation from {iso(WINDOW[0])} to "
        f"{iso(WINDOW[1])}, whose job needs them now: asked to stop with a {grace} s grace period."
    )
    assert props_of(env, "mine")["statusReason"] == (
        "Waiting for room in its capacity reservation: 'week' books 8 GPUs per node; preemptible work holds them "
        "until it stops."
    )
    # And once its grace period is over, it ended Preempted, billed to then, and the reservation's job runs
    env.run(advance=grace + 10)
    assert env.status("borrower") == "Preempted"
    assert env.meter(borrowed.operation_id).end == WINDOW[0] + grace
    assert env.status("mine") == "Running" and env.status("steady") == "Pending"


def test_a_job_waiting_for_a_reservation_cancelled_meanwhile_fails_saying_so(env: Env, node):
    reservation(env)
    env.submit("waiting", 2, 160, maxDurationMinutes=60, capacityReservationId=RESERVATION_ID)
    env.run()
    assert env.status("waiting") == "Pending"
    # When the reservation is cancelled (its bookings gone with it) and the waiting jobs are served again
    assert env.w.reservations.cancel(env.consumer("ann"), SUB, RG, "week")
    env.state.nodes[fold(node_key(SUB, RG, "dgx-1"))].node.bookings = ()
    env.clock.advance(env.settings.job_placement_retry_seconds + 1)
    env.w.reconciler.run()
    env.run(advance=0)
    props = props_of(env, "waiting")
    assert props["status"] == "Failed"
    assert props["statusReason"] == (
        "Inadmissible: The capacity reservation 'week' the job names does not exist (cancelled, or never booked)."
    )


def test_a_booking_written_between_placements_read_and_its_write_keeps_its_window(env: Env, node):
    # When a reservation books the node after placement read its candidates (the booking's transaction bumps the
    # node's calendar revision, so the placement's conditional write fails and it reads the node again)
    env.nodes_hooks.after["candidates"] = lambda _: book(env, OTHER_REF, 8)
    env.submit("long", 8, 640, maxDurationMinutes=180)
    env.run()
    # Then the job does not land beside the window it would run into: it waits, saying so
    props = props_of(env, "long")
    assert props["status"] == "Pending" and "booked by a capacity reservation" in props["statusReason"]
    assert env.node().devices_allocated == 0
