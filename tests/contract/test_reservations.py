"""The capacity reservation repository's contract (repositories/protocols.py ``CapacityReservationRepository``) on both
stores: a booking writes the reservation, its booking on each node and its meters together, or nothing — refused when
a node's calendar (a booking, a cancellation) or holds (a placement, a release) moved since it was read; a placement
is refused when a booking landed since its node was read; a cancellation removes the bookings and, before the
window, the meters."""

from __future__ import annotations

from dataclasses import replace

import pytest

from itl_accelerator.billing.reservations import reservation_meters
from itl_accelerator.domain.records import Booking, Reservation, ResourceKey
from itl_accelerator.domain.reservations import CapacityReservation
from itl_accelerator.domain.states import JobStatus
from itl_accelerator.repositories.errors import EtagMismatch, ItemExists, NodeChanged
from itl_accelerator.repositories.protocols import Effects, Expect, Repositories, Scope
from tests.contract.builders import (
    PROVIDER,
    TERMS,
    create_node,
    make_audit,
    make_job,
    make_node,
    names_of,
)
from tests.contract.test_jobs import submit

START, END = 1_900_000_800, 1_900_008_000  # two whole hours


def make_reservation(sub: str, name: str, nodes: tuple[ResourceKey, ...], devices: int = 4) -> CapacityReservation:
    key = ResourceKey(sub, "rg1", "capacityReservations", (name,))
    return CapacityReservation(
        key=key,
        document={
            "id": f"/subscriptions/{sub}/resourceGroups/rg1/providers/{PROVIDER}/capacityReservations/{name}",
            "name": name,
            "type": f"{PROVIDER}/capacityReservations",
            "location": "eastus",
            "systemData": {"createdAt": "2030-03-17T00:00:00Z"},
            "properties": {"provisioningState": "Succeeded"},
        },
        etag=f"e-{name}",
        kind="GPU",
        model="H100",
        location="eastus",
        devices=devices,
        memory_gb=devices * 80,
        start=START,
        end=END,
        nodes=nodes,
        terms=TERMS,
        booked_by="ann",
        allocation_id=f"alloc-{name}",
        suppliers=("supplier-1",),
    )


def booked(repos: Repositories, reservation: CapacityReservation, sub: str) -> None:
    nodes = [repos.nodes.get(k) for k in reservation.nodes]
    assert all(nodes)
    read = [n for n in nodes if n is not None]
    repos.reservations.book(reservation, read, reservation_meters(reservation, read), make_audit(sub))


def meters_of(repos: Repositories, reservation: CapacityReservation) -> list[tuple[int, int, int | None]]:
    from itl_accelerator.domain.usage import MeterRef

    found = [repos.meters.get(MeterRef(reservation.key.subscription_id, m)) for m in reservation.meter_ids]
    return [(m.gpus, m.start, m.end) for m in found if m is not None]


def test_a_booking_writes_the_reservation_its_bookings_and_meters_together(repos: Repositories, sub: str) -> None:
    one, two = create_node(repos, make_node(sub, "n1")), create_node(repos, make_node(sub, "n2"))
    reservation = make_reservation(sub, "week-1", (one.key, two.key))
    booked(repos, reservation, sub)
    assert repos.reservations.get(reservation.key) == reservation
    for key in (one.key, two.key):
        stored = repos.nodes.get(key)
        assert stored is not None
        assert stored.bookings == (Booking("capacityReservations/rg1/week-1", 4, 320, START, END),)
        assert stored.calendar_revision == 1
    assert meters_of(repos, reservation) == [(4, START, END), (4, START, END)]
    assert names_of(repos.reservations.page(Scope(sub), 10, None).items) == ["week-1"]
    assert names_of(repos.reservations.page(Scope(sub, "rg2"), 10, None).items) == []
    with pytest.raises(ItemExists):
        booked(repos, reservation, sub)


def test_a_booking_on_a_node_whose_calendar_or_holds_moved_writes_nothing(repos: Repositories, sub: str) -> None:
    one, two = create_node(repos, make_node(sub, "n1")), create_node(repos, make_node(sub, "n2"))
    first = make_reservation(sub, "first", (two.key,))
    booked(repos, first, sub)  # n2's calendar moves after "second" read it
    second = make_reservation(sub, "second", (one.key, two.key))
    with pytest.raises(NodeChanged):
        repos.reservations.book(second, [one, two], reservation_meters(second, [one, two]), make_audit(sub))
    assert repos.reservations.get(second.key) is None
    assert (repos.nodes.get(one.key) or one).bookings == ()
    assert meters_of(repos, second) == []
    # a placement on n1 since it was read (its holds moved) refuses a booking read before it
    read = repos.nodes.get(one.key)
    assert read is not None
    job = submit(repos, make_job(sub, queued=True, devices=2, memory_gb=160))
    placed = replace(job, status=JobStatus.SCHEDULED, etag="j2", queued=False, node=one.key, capacity_reserved=True)
    repos.jobs.update(job, placed, make_audit(sub), expect=Expect(etag="j1"),
                      effects=Effects(reservation=Reservation.on(read, 2, 160, for_job=job.key)))  # fmt: skip
    third = make_reservation(sub, "third", (one.key,))
    with pytest.raises(NodeChanged):
        repos.reservations.book(third, [read], reservation_meters(third, [read]), make_audit(sub))


def test_a_placement_on_a_node_booked_since_it_was_read_is_refused(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    read = repos.nodes.get(node.key)
    assert read is not None
    booked(repos, make_reservation(sub, "week-1", (node.key,)), sub)
    job = submit(repos, make_job(sub, queued=True, devices=2, memory_gb=160))
    placed = replace(job, status=JobStatus.SCHEDULED, etag="j2", queued=False, node=node.key, capacity_reserved=True)
    with pytest.raises(NodeChanged):
        repos.jobs.update(job, placed, make_audit(sub), expect=Expect(etag="j1"),
                          effects=Effects(reservation=Reservation.on(read, 2, 160, for_job=job.key)))  # fmt: skip
    again = repos.nodes.get(node.key)
    assert again is not None and again.devices_allocated == 0
    # read again, it is placed
    repos.jobs.update(job, placed, make_audit(sub), expect=Expect(etag="j1"),
                      effects=Effects(reservation=Reservation.on(again, 2, 160, for_job=job.key)))  # fmt: skip
    assert (repos.nodes.get(node.key) or again).devices_allocated == 2


@pytest.mark.parametrize(
    ("bill_until", "billed"),
    [(START - 60, []), (None, [(START, END)] * 2), (START + 3600, [(START, START + 3600)] * 2)],
)
def test_a_cancellation_removes_the_bookings_and_bills_the_meters_up_to_when_it_is_told(
    repos: Repositories, sub: str, bill_until: int | None, billed: list[tuple[int, int]]
) -> None:
    one, two = create_node(repos, make_node(sub, "n1")), create_node(repos, make_node(sub, "n2"))
    reservation = make_reservation(sub, "week-1", (one.key, two.key))
    booked(repos, reservation, sub)
    stale = replace(reservation, etag="other")
    with pytest.raises(EtagMismatch):
        repos.reservations.cancel(stale, make_audit(sub), bill_until=bill_until)
    repos.nodes.delete(repos.nodes.get(two.key) or two, make_audit(sub))  # a node deleted since: skipped
    repos.reservations.cancel(reservation, make_audit(sub), bill_until=bill_until)
    assert repos.reservations.get(reservation.key) is None
    stored = repos.nodes.get(one.key)
    assert stored is not None and stored.bookings == () and stored.calendar_revision == 2
    assert [(start, end) for _, start, end in meters_of(repos, reservation)] == billed


def test_a_change_of_the_node_keeps_its_calendar_whatever_the_writer_read(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    booked(repos, make_reservation(sub, "week-1", (node.key,)), sub)
    stored = repos.nodes.get(node.key)
    assert stored is not None
    # the node service writes a record made from the request: no bookings, no revisions
    written = replace(node, document={**node.document, "tags": {"team": "a"}}, etag="n2")
    repos.nodes.replace(stored, written, make_audit(sub))
    after = repos.nodes.get(node.key)
    assert after is not None and after.bookings == stored.bookings and after.calendar_revision == 1


def test_a_booking_removes_the_bookings_of_its_nodes_that_ended_long_ago(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    booked(repos, make_reservation(sub, "old", (node.key,)), sub)
    later = replace(make_reservation(sub, "later", (node.key,)), start=END + 7200, end=END + 10800)
    read = repos.nodes.get(node.key)
    assert read is not None
    repos.reservations.book(later, [read], reservation_meters(later, [read]), make_audit(sub), expired_before=END + 1)
    stored = repos.nodes.get(node.key)
    assert stored is not None and [b.reservation for b in stored.bookings] == ["capacityReservations/rg1/later"]
    assert repos.reservations.get(make_reservation(sub, "old", (node.key,)).key) is not None  # the record stays


def test_beside_a_booking_a_placement_on_holds_that_moved_since_it_read_them_is_refused(
    repos: Repositories, sub: str
) -> None:
    """Room beside a booking is judged on the holds read: two placements that read the same devices free there
    cannot both take them (without a booking, placements on one node do not wait for each other)."""
    node = create_node(repos, make_node(sub))
    booked(repos, make_reservation(sub, "week-1", (node.key,)), sub)
    read = repos.nodes.get(node.key)
    assert read is not None
    first, second = (submit(repos, make_job(sub, name, queued=True, devices=2, memory_gb=160)) for name in ("a", "b"))
    for job in (first, second):
        placed = replace(job, status=JobStatus.SCHEDULED, etag="j2", queued=False, node=node.key,
                         capacity_reserved=True)  # fmt: skip
        effects = Effects(reservation=Reservation.on(read, 2, 160, for_job=job.key))
        if job is first:
            repos.jobs.update(job, placed, make_audit(sub), expect=Expect(etag="j1"), effects=effects)
        else:
            with pytest.raises(NodeChanged):
                repos.jobs.update(job, placed, make_audit(sub), expect=Expect(etag="j1"), effects=effects)
    assert (repos.nodes.get(node.key) or read).devices_allocated == 2


def test_the_booking_calendar_index_reads_the_nodes_no_booking_holds_from_a_start_on(
    repos: Repositories, sub: str
) -> None:
    from itl_accelerator.domain.records import Demand

    one, two = create_node(repos, make_node(sub, "n1")), create_node(repos, make_node(sub, "n2"))
    create_node(repos, make_node(sub, "w1", location="westus"))
    booked(repos, make_reservation(sub, "week-1", (one.key,)), sub)
    demand = Demand(0, 0, "h100", "eastus")
    assert names_of(repos.nodes.bookable(sub, demand, START, pages=2)) == ["n2"]  # n1 is booked from START
    assert names_of(repos.nodes.bookable(sub, demand, END, pages=2)) == ["n2", "n1"]  # the longest free first
    stored = repos.nodes.get(one.key)
    assert stored is not None and stored.booked_until == END
    # a change of the node keeps its place in the index; a node that stops taking work leaves it
    repos.nodes.replace(stored, replace(stored, document={**stored.document, "tags": {"a": "b"}}, etag="n2"),
                        make_audit(sub))  # fmt: skip
    assert (repos.nodes.get(one.key) or stored).booked_until == END
    cordoned = make_node(sub, "n2", availability="Cordoned", etag="n3")
    repos.nodes.replace(repos.nodes.get(two.key) or two, cordoned, make_audit(sub))
    assert names_of(repos.nodes.bookable(sub, demand, END, pages=2)) == ["n1"]


def test_a_node_booked_since_it_was_read_is_not_deleted(repos: Repositories, sub: str) -> None:
    read = create_node(repos, make_node(sub))
    reservation = make_reservation(sub, "week-1", (read.key,))
    booked(repos, reservation, sub)  # lands between the delete's read and its write: same etag, calendar moved
    with pytest.raises(EtagMismatch):
        repos.nodes.delete(read, make_audit(sub))
    stored = repos.nodes.get(read.key)
    assert stored is not None and [b.reservation for b in stored.bookings] == [reservation.ref]
    repos.reservations.cancel(reservation, make_audit(sub), bill_until=None)
    now = repos.nodes.get(read.key)
    assert now is not None
    repos.nodes.delete(now, make_audit(sub))  # as read now: deleted
    assert repos.nodes.get(read.key) is None


def test_a_reservation_name_differing_in_case_is_the_same_item(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    reservation = make_reservation(sub, "Week-1", (node.key,))
    booked(repos, reservation, sub)
    upper = ResourceKey(sub, "RG1", "capacityReservations", ("WEEK-1",))
    found = repos.reservations.get(upper)
    assert found is not None and found.etag == reservation.etag
    again = replace(make_reservation(sub, "WEEK-1", (node.key,)), allocation_id="alloc-again")
    read = [repos.nodes.get(node.key)]
    with pytest.raises(ItemExists):
        repos.reservations.book(
            again, [n for n in read if n], reservation_meters(again, [n for n in read if n]), make_audit(sub)
        )
