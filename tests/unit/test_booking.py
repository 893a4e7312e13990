"""Where a capacity reservation is booked (domain/booking.py ``decide_booking``), as table cases: a node free for the
whole window takes it, best fit first; running work blocks until its maximum duration, open-ended work for good;
other bookings block their windows; a gang goes to nodes of one group, the cheaper first; memory left out is the
devices' whole memory; a node holding MAX_BOOKINGS_PER_NODE bookings not yet over takes no more."""

from __future__ import annotations

from dataclasses import replace

from itl_accelerator.domain.booking import MAX_BOOKINGS_PER_NODE, Ask, Booked, Unbookable, decide_booking
from itl_accelerator.domain.records import Booking, Hold
from tests.unit.scheduling_builders import node

NOW, HOUR = 1_900_000_000, 3600
START, END = NOW + 24 * HOUR, NOW + 26 * HOUR


def ask(devices: int = 8, nodes: int = 1, memory_gb: int = 0) -> Ask:
    return Ask("GPU", None, "H100", "eastus", devices, memory_gb, nodes, START, END)


def names(decided: Booked | Unbookable) -> list[str]:
    assert isinstance(decided, Booked), decided
    return [n.name for n in decided.nodes]


def test_best_fit_at_the_window_start_and_work_until_its_maximum_duration():
    busy = replace(node("busy", used=4), holds=(Hold("sparkJobs/rg1/a", 4, 320, START + HOUR),))
    idle = node("idle")
    ended = replace(node("ended", used=4), holds=(Hold("sparkJobs/rg1/b", 4, 320, START),))
    assert names(decide_booking(ask(4), [idle, ended, busy], NOW)) == ["busy"]  # 4 left there: the tightest fit
    assert names(decide_booking(ask(8), [busy, ended, idle], NOW)) == ["ended"]  # its job ends as the window starts


def test_open_ended_work_and_other_windows_block_a_node():
    held = replace(node("held", used=8), holds=(Hold("sparkOllamaInstances/rg1/held/llama", 8, 640, 0),))
    booked = replace(node("booked"), bookings=(Booking("capacityReservations/rg1/x", 6, 480, START + HOUR, END),))
    decided = decide_booking(ask(4), [held, booked], NOW)
    assert isinstance(decided, Unbookable) and decided.matching == 2
    assert {b.node.name for b in decided.blockers} == {"held", "booked"}
    assert names(decide_booking(ask(2), [held, booked], NOW)) == ["booked"]  # 2 beside the other window


def test_a_gang_goes_to_nodes_of_one_group_the_cheaper_first():
    fleet = [node("a", price="3"), node("b", price="2"), node("c", price="3"), node("d", price="2")]
    assert sorted(names(decide_booking(ask(8, nodes=2), fleet, NOW))) == ["b", "d"]
    assert isinstance(decide_booking(ask(8, nodes=3), fleet, NOW), Unbookable)  # no group of three


def test_memory_left_out_is_the_devices_whole_memory():
    half_memory_taken = node("n", used=0, used_memory_gb=400)
    half_memory_taken = replace(half_memory_taken, holds=(Hold("sparkJobs/rg1/m", 0, 400, 0),))
    assert isinstance(decide_booking(ask(8), [half_memory_taken], NOW), Unbookable)  # 640 GiB asked, 240 free
    assert names(decide_booking(ask(8, memory_gb=200), [half_memory_taken], NOW)) == ["n"]


def test_a_node_takes_at_most_its_share_of_bookings_not_yet_over():
    many = tuple(
        Booking(f"capacityReservations/rg1/r{i}", 1, 80, NOW + (100 + i) * HOUR, NOW + (101 + i) * HOUR)
        for i in range(MAX_BOOKINGS_PER_NODE)
    )
    full = replace(node("full"), bookings=many)
    assert isinstance(decide_booking(ask(1), [full], NOW), Unbookable)
    over = replace(full, bookings=(*many[1:], Booking("capacityReservations/rg1/old", 1, 80, NOW - 2 * HOUR, NOW)))
    assert names(decide_booking(ask(1), [over], NOW)) == ["full"]  # one of them is over: room for one more
