"""When a waiting job will start (domain/calendar.py), over calendars built in memory: a free node, work that ends
by its maximum duration, open-ended work, the queue (each job sees the holds of those ahead), backfill around them,
gangs, holds past their end, work placed before holds were written, and when an estimate is news."""

from __future__ import annotations

import math
from dataclasses import replace

from itl_accelerator.domain import calendar
from itl_accelerator.domain.calendar import Estimate, Unknown, estimate_queue
from itl_accelerator.domain.records import Booking, Hold, StartEstimate
from tests.unit.scheduling_builders import ceiling, job, node

NOW = 1_800_000_000
HOUR = 3600


def held(name, *holds, **kw):
    """A node holding ``holds`` ((gpus, until) pairs; until 0: open-ended; 80 GiB a device)."""
    made = node(name, **kw)
    entries = tuple(Hold(f"sparkJobs/rg1/{name}-{i}", g, 80 * g, until) for i, (g, until) in enumerate(holds))
    return replace(
        made,
        holds=entries,
        devices_allocated=sum(h.devices for h in entries),
        memory_gb_allocated=sum(h.memory_gb for h in entries),
    )


def estimate(waiting, fleet, now=NOW):
    queue = [(j, None) for j in waiting]
    return estimate_queue(queue, {j.key: fleet for j in waiting}, now)


def starts(waiting, fleet, now=NOW):
    return [e.start for e in estimate(waiting, fleet, now)]


def test_a_job_that_fits_now_starts_now():
    (only,) = estimate([job(devices=2, max_duration_seconds=HOUR)], [node("a")])
    assert only == Estimate(only.job, 1, NOW, (node("a").key,))


def test_a_job_waiting_for_running_work_starts_when_that_work_reaches_its_maximum_duration():
    fleet = [held("a", (8, NOW + 2 * HOUR)), held("b", (6, NOW + HOUR), (2, NOW + 3 * HOUR))]
    assert starts([job(devices=4, max_duration_seconds=HOUR)], fleet) == [NOW + HOUR]  # b frees 6 at +1 h
    assert starts([job(devices=8, max_duration_seconds=HOUR)], fleet) == [NOW + 2 * HOUR]  # a is whole first


def test_open_ended_work_in_the_way_makes_the_start_unknown_saying_why():
    fleet = [held("a", (8, 0)), held("b", (4, 0), (4, NOW + HOUR))]
    (unknown,) = estimate([job(devices=8, max_duration_seconds=HOUR)], fleet)
    assert unknown.start is None and unknown.why == Unknown.OPEN_ENDED
    assert "without a maximum duration" in unknown.stored(NOW).why
    # a job small enough for what the open-ended work leaves is known
    assert starts([job(devices=4, max_duration_seconds=HOUR)], fleet) == [NOW + HOUR]


def test_no_node_it_may_use_is_said_apart_from_open_ended_work():
    fleet = [held("dear", (8, NOW + HOUR), price="9")]
    (unknown,) = estimate_queue([(job(devices=8, ceiling=ceiling("5")), ceiling("5").terms)], {}, NOW)
    assert unknown.why == Unknown.NO_NODES
    waiting = job(devices=8, ceiling=ceiling("5"))
    (priced,) = estimate_queue([(waiting, ceiling("5").terms)], {waiting.key: fleet}, NOW)
    assert priced.start is None and priced.why == Unknown.NO_NODES


def test_jobs_are_estimated_in_queue_order_each_seeing_the_ones_ahead():
    fleet = [held("a", (8, NOW + HOUR))]
    first = job("first", devices=8, max_duration_seconds=2 * HOUR)
    second = job("second", devices=8, max_duration_seconds=HOUR)
    estimates = estimate([first, second], fleet)
    assert [e.start for e in estimates] == [NOW + HOUR, NOW + 3 * HOUR]
    assert [e.position for e in estimates] == [1, 2]


def test_a_short_job_backfills_before_a_larger_one_ahead_only_where_it_ends_in_time():
    fleet = [held("a", (4, NOW + HOUR))]  # 4 free now; all 8 at +1 h
    big = job("big", devices=8, max_duration_seconds=2 * HOUR)
    short = job("short", devices=4, max_duration_seconds=HOUR // 2)  # ends before big starts: backfills now
    long = job("long", devices=4, max_duration_seconds=2 * HOUR)  # would still run at +1 h: after big
    assert starts([big, short, long], fleet) == [NOW + HOUR, NOW, NOW + 3 * HOUR]


def test_a_job_without_a_maximum_duration_waits_for_every_finite_hold_it_would_overlap():
    fleet = [held("a", (4, NOW + HOUR))]
    ahead = job("ahead", devices=8, max_duration_seconds=HOUR)
    forever = job("forever", devices=4, max_duration_seconds=0)
    # 4 free now, but the job ahead takes the whole node at +1 h: an open-ended job can only start after it
    assert starts([ahead, forever], fleet) == [NOW + HOUR, NOW + 2 * HOUR]


def test_a_gang_starts_when_enough_nodes_of_one_group_are_free_together():
    fleet = [
        held("a", (8, NOW + HOUR)),
        held("b", (8, NOW + 3 * HOUR)),
        held("c", (8, NOW + 2 * HOUR)),
        held("dear", (8, NOW + HOUR // 2), price="3"),  # another price: never in the same gang
    ]
    (gang,) = estimate([job(devices=8, gang=2, max_duration_seconds=HOUR)], fleet)
    assert gang.start == NOW + 2 * HOUR and {k.name for k in gang.nodes} == {"a", "c"}


def test_a_hold_past_its_end_ends_now_and_unaccounted_work_is_open_ended():
    overdue = held("a", (8, NOW - 600))
    assert starts([job(devices=8, max_duration_seconds=HOUR)], [overdue]) == [NOW]
    legacy = replace(node("b"), devices_allocated=8, memory_gb_allocated=640)  # placed before holds were written
    assert starts([job(devices=8, max_duration_seconds=HOUR)], [legacy]) == [None]


def test_best_fit_at_the_start_time_chooses_the_node():
    fleet = [held("roomy", (2, NOW + HOUR)), held("tight", (6, NOW + HOUR))]
    (only,) = estimate([job(devices=2, max_duration_seconds=HOUR)], fleet)
    assert only.start == NOW and only.nodes == (fleet[1].key,)  # 2 free now on "tight": left full


def test_an_estimate_is_news_when_it_moves_a_minute_or_its_position_or_reason_changes():
    was = StartEstimate(NOW, 1, NOW - 100)
    assert not calendar.moved(was, StartEstimate(NOW + 59, 1, NOW))
    assert calendar.moved(was, StartEstimate(NOW + 60, 1, NOW))
    assert calendar.moved(was, StartEstimate(NOW, 2, NOW))
    assert calendar.moved(was, StartEstimate(None, 1, NOW, "why"))
    assert calendar.moved(None, StartEstimate(None, 1, NOW, "why"))
    assert not calendar.moved(StartEstimate(None, 1, NOW, "why"), StartEstimate(None, 1, NOW + 999, "why"))


def test_the_free_capacity_of_a_calendar_over_time():
    timeline = calendar.Timeline.of(held("a", (2, NOW + HOUR), (4, 0)), NOW)
    assert timeline.free_at(NOW) == (2, 160)
    assert timeline.free_at(NOW + HOUR) == (4, 320)
    assert timeline.fits(4, 320, NOW + HOUR, math.inf) and not timeline.fits(4, 320, NOW, NOW + 1)


# ----------------------------------------------------------------------------------------------- capacity reservations
REF = "capacityReservations/rg1/week"
RESERVATION_ID = "/subscriptions/sub-a/resourceGroups/rg1/providers/ITL.Accelerator/capacityReservations/week"


def with_booking(made, ref, devices, start, end, *holds):
    return replace(
        made,
        bookings=(Booking(ref, devices, 80 * devices, start, end),),
        holds=tuple(holds),
        devices_allocated=sum(h.devices for h in holds),
        memory_gb_allocated=sum(h.memory_gb for h in holds),
    )


def of_reservation(made):
    made.document["properties"]["capacityReservationId"] = RESERVATION_ID
    return made


def test_a_booking_blocks_its_window_for_a_job_that_cannot_end_before_it():
    fleet = [with_booking(node("n1"), "capacityReservations/rg9/other", 8, NOW + 2 * HOUR, NOW + 5 * HOUR)]
    short = job("short", devices=4, max_duration_seconds=2 * HOUR)
    long = job("long", devices=4, max_duration_seconds=3 * HOUR)
    assert starts([short], fleet) == [NOW]  # ends as the window opens
    assert starts([long], fleet) == [NOW + 5 * HOUR]  # after the window ends
    assert starts([job("endless", devices=4, max_duration_seconds=0)], fleet) == [NOW + 5 * HOUR]  # after it, for good


def test_a_job_of_a_reservation_starts_at_its_window_inside_its_booking_not_counted_twice():
    hold = Hold("sparkJobs/rg1/first", 4, 320, NOW + 3 * HOUR, reservation=REF)
    fleet = [with_booking(node("n1"), REF, 6, NOW + HOUR, NOW + 3 * HOUR)]
    mine = of_reservation(job("mine", devices=4, max_duration_seconds=10 * HOUR))
    assert starts([mine], fleet) == [NOW + HOUR]  # the window's start, however long its maximum duration
    # two of the reservation's jobs of 4 in a booking of 6: the second after the first (its run bounded by the window)
    second = of_reservation(job("second", devices=4, max_duration_seconds=HOUR))
    estimates = estimate([mine, second], fleet)
    assert [e.start for e in estimates] == [NOW + HOUR, None]
    assert estimates[1].why == Unknown.WINDOW_FULL
    running = [with_booking(node("n1"), REF, 8, NOW - HOUR, NOW + 3 * HOUR, hold)]
    assert starts([of_reservation(job("more", devices=4))], running) == [NOW]  # 8 booked, 4 held: 4 left
    assert starts([job("other", devices=1, max_duration_seconds=HOUR)], running) == [NOW + 3 * HOUR]  # none for others


def test_the_earliest_window_of_a_shape_counts_holds_and_bookings_and_a_gang_needs_one_group_at_once():
    a = held("a", (8, NOW + HOUR))
    b = with_booking(node("b"), "capacityReservations/rg9/other", 8, NOW + HOUR, NOW + 2 * HOUR)
    far = node("far", location="westus")
    assert calendar.earliest_window([a, b], 8, HOUR, NOW) == (NOW, (b.key,))  # b until its window opens
    assert calendar.earliest_window([a, b], 8, 2 * HOUR, NOW) == (NOW + HOUR, (a.key,))
    assert calendar.earliest_window([a, b], 8, HOUR, NOW, gang=2) == (NOW + 2 * HOUR, (a.key, b.key))
    assert calendar.earliest_window([a, far], 8, HOUR, NOW, gang=2) is None  # never one group
    assert calendar.earliest_window([held("c", (8, 0))], 1, HOUR, NOW) is None  # open-ended work
