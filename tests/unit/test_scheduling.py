"""The pure scheduling layer (domain/scheduling.py), table by table: each admission rule's case and the reason it
renders, why a job waits (in the order the rules are tried), best fit's ordering and ties, gangs grouped as they
must be placed, preemption targets (the fewest victims, never across a subscription, a budget or a quota, never a job
that did not agree to it), starvation, and a snapshot read part by part. No repository: a decision is a function of
its snapshot (tests/unit/scheduling_builders.py builds them)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain import scheduling
from itl_accelerator.domain.records import Booking, Hold, ResourceKey
from itl_accelerator.domain.reservations import CapacityReservation
from itl_accelerator.domain.scheduling import (
    BeyondQuota,
    Budgets,
    BudgetSpent,
    GangNoRoom,
    GangTooWide,
    NoNodes,
    NoRoom,
    NoSuchNodes,
    PricedNowhere,
    PricedOut,
    QuotaFull,
    ReadNode,
    ReadPreemptible,
    ReadQuotas,
    ReadShapes,
    ReservationSeen,
    RunsIntoBooking,
    Snapshot,
    TooLarge,
    Unread,
    Wait,
    gist,
    render,
)
from itl_accelerator.domain.states import JobStatus
from tests.unit.scheduling_builders import OTHER_SUB, SUB, ceiling, decide, job, node, quota, snapshot


# ----------------------------------------------------------------------------------------------- admission
@pytest.mark.parametrize(
    ("asked", "fleet", "quotas", "decided", "words"),
    [
        (job(), [], [], NoNodes(), "The subscription has no nodes."),
        (
            job(model="b200"),
            [node("a")],
            [],
            NoSuchNodes,
            "No node of the subscription has GPU model 'b200'.",
        ),
        (
            job(location="westeurope"),
            [node("a")],
            [],
            NoSuchNodes,
            "No node of the subscription has location 'westeurope'.",
        ),
        (
            job(devices=16),
            [node("a"), node("b", devices=4, memory_gb=320)],
            [],
            TooLarge(16, 1280, scheduling.Wanted("GPU", "", "NVIDIA", False, ""), 8, 640),
            "The job asks for 16 GPUs and 1280 GiB of GPU memory; the largest node has 8 GPUs and 640 GiB.",
        ),
        (  # more memory than one device carries
            job(devices=1, memory_gb=100),
            [node("a")],
            [],
            TooLarge,
            "the largest node has 8 GPUs and 640 GiB.",
        ),
        (  # three nodes, but only two at one price
            job(gang=3),
            [node("a"), node("b"), node("c", price="3")],
            [],
            GangTooWide("GPU", 3, 2, 160, 2),
            "the subscription has at most 2 such nodes.",
        ),
        (  # a quota below all a gang asks, on every shape that could hold it
            job(devices=4, gang=2),
            [node("a"), node("b")],
            [quota("gpus", 6)],
            BeyondQuota("GPU", 8, (scheduling.QuotaSeen("gpus", "eastus", 6, 0),)),
            "The job asks for 8 GPUs; the GPU quota 'gpus' in 'eastus' allows 6.",
        ),
        (  # a ceiling fixed when no node was in sight admits nothing, ever
            job(ceiling=ceiling()),
            [node("a")],
            [],
            PricedNowhere,
            "so its price ceiling admits no price",
        ),
    ],
    ids=["no-nodes", "no-model", "no-location", "too-many", "too-much-memory", "gang-too-wide", "quota", "priced"],
)
def test_a_job_no_node_could_ever_hold_is_inadmissible_saying_why(asked, fleet, quotas, decided, words):
    found = scheduling.inadmissible(snapshot(asked, fleet, quotas=quotas))
    if isinstance(decided, type):
        assert isinstance(found, decided)
    else:
        assert found == decided
    assert words in render(found)


@pytest.mark.parametrize(
    ("asked", "fleet", "quotas"),
    [
        (job(), [node("a", used=8)], []),  # full now: it waits, it is not refused
        (job(gang=2), [node("a"), node("b", availability="Cordoned")], []),  # shapes count cordoned nodes
        (job(devices=8), [node("a"), node("far", location="westus")], [quota("gpus", 4)]),  # westus has no quota
        (job(ceiling=ceiling("3")), [node("a", price="9")], []),  # a ceiling admitting some terms
    ],
    ids=["full-now", "gang-of-cordoned", "quota-elsewhere", "ceiling-above"],
)
def test_a_job_some_node_could_hold_is_admissible(asked, fleet, quotas):
    assert scheduling.inadmissible(snapshot(asked, fleet, quotas=quotas)) is None


def test_a_gang_is_admitted_only_on_nodes_of_one_model_location_and_price():
    fleet = [node("a"), node("b", model="H200", memory_gb=1128), node("c", location="westus")]
    assert scheduling.inadmissible(snapshot(job(gang=2), fleet)) == GangTooWide("GPU", 2, 2, 160, 1)
    assert scheduling.inadmissible(snapshot(job(gang=2), [*fleet, node("d", location="westus")])) is None


# ----------------------------------------------------------------------------------------------- why it waits
def test_a_spent_budget_is_said_before_anything_else():
    spent = Budgets(refusal="Budget 'team' is spent for 2024-05.", refused_by="team", names=("team",))
    decided = scheduling.waiting(snapshot(job(), [node("a", used=8)], budgets=spent, quotas=[quota("gpus", 0)]))
    assert decided == BudgetSpent("team", "Budget 'team' is spent for 2024-05.")
    assert render(decided) == "Waiting for budget: Budget 'team' is spent for 2024-05."
    assert gist(decided) == (Wait.BUDGET, "team")


def test_nodes_with_room_only_above_the_ceiling_are_counted_with_the_lowest_price():
    fleet = [node("a", price="9"), node("b", price="7"), node("c", used=8, price="1")]
    decided = decide(scheduling.waiting, snapshot(job(ceiling=ceiling("5")), fleet), fleet)
    assert isinstance(decided, PricedOut) and decided.nodes == 2 and decided.lowest.price_per_gpu_hour == Decimal("7")
    assert render(decided).startswith("Waiting for a node within its price ceiling: 2 nodes with room now bill above")
    assert gist(decided) == (Wait.PRICE, "")


def test_a_currency_the_budget_does_not_count_names_the_budget():
    euros = Budgets(currencies=frozenset({"EUR"}), names=("eu-team",))
    fleet = [node("a", price="1")]
    decided = decide(scheduling.waiting, snapshot(job(), fleet, budgets=euros), fleet)
    assert isinstance(decided, PricedOut) and decided.currency_refused
    assert "the budget 'eu-team' covering it counts EUR only" in render(decided)
    assert gist(decided) == (Wait.PRICE, "eu-team")


def test_room_held_back_by_a_full_quota_names_the_quota_with_its_figures():
    fleet = [node("a")]
    decided = decide(scheduling.waiting, snapshot(job(devices=4), fleet, quotas=[quota("gpus-h100", 8, 6)]), fleet)
    assert decided == QuotaFull("GPU", scheduling.QuotaSeen("gpus-h100", "eastus", 8, 6), 4)
    assert render(decided) == (
        "Waiting for quota: the GPU quota 'gpus-h100' of the subscription in 'eastus' allows 8 GPUs and 6 are in use; "
        "the job needs 4."
    )
    assert gist(decided) == (Wait.QUOTA, "gpus-h100")


def test_no_room_anywhere_but_a_full_quota_on_every_shape_is_still_the_quota():
    fleet = [node("a", used=8)]
    decided = decide(scheduling.waiting, snapshot(job(), fleet, quotas=[quota("gpus", 8, 8)]), fleet)
    assert isinstance(decided, QuotaFull) and decided.quota.name == "gpus"


def test_no_room_with_quota_to_spare_waits_for_capacity_saying_the_vendor():
    fleet = [node("a", used=7)]
    decided = decide(scheduling.waiting, snapshot(job(devices=2), fleet, quotas=[quota("gpus", 100)]), fleet)
    assert decided == NoRoom("GPU", 2, 160, "NVIDIA")
    assert render(decided) == (
        "Waiting for capacity: no node of the subscription has 2 free NVIDIA GPUs and 160 GiB of GPU memory now."
    )
    assert gist(decided) == (Wait.CAPACITY, "")


def test_a_gang_with_too_few_nodes_of_one_price_with_room_waits_for_capacity():
    fleet = [node("a"), node("b", price="3"), node("c", used=8)]
    decided = decide(scheduling.waiting, snapshot(job(gang=2), fleet), fleet)
    assert decided == GangNoRoom("GPU", 2, 2, 160)


def test_a_gang_with_room_but_a_quota_too_small_for_all_its_parts_names_the_quota():
    fleet = [node("a"), node("b")]
    decided = decide(scheduling.waiting, snapshot(job(devices=4, gang=2), fleet, quotas=[quota("gpus", 10, 4)]), fleet)
    assert isinstance(decided, QuotaFull) and decided.gang_size == 2
    assert render(decided).endswith("the job needs 8 (2 nodes of 4).")


# ----------------------------------------------------------------------------------------------- best fit
def test_best_fit_leaves_the_fewest_free_devices_then_the_least_memory_ties_in_the_index_order():
    fleet = [
        node("roomy"),
        node("tight", used=5),  # 3 free: 1 left
        node("tight-memory", used=5, used_memory_gb=420),  # 3 free, 220 GiB free: 1 left, less memory left
        node("same", used=5),  # a tie with "tight": the index's order
        node("too-small-memory", devices=8, memory_gb=64),  # 8 GiB a device: a part of 80 GiB a device never fits
    ]
    chosen = scheduling.best_fit(job(devices=2), fleet)
    assert [n.name for n in chosen] == ["tight-memory", "tight", "same", "roomy"]


@pytest.mark.parametrize(
    ("free", "after"),
    [((8, 640), (6, 480)), ((2, 160), (0, 0)), ((3, 100), (1, -60))],
)
def test_the_fit_key_is_what_remains_after_placing(free, after):
    assert scheduling.fit_key(*free, 2, 160) == after


def test_a_gang_goes_to_one_group_of_model_location_price_and_platform_best_fit_first():
    fleet = [
        node("dgx-a", used=4),
        node("slurm-a", used=6, slurm=("c1", "gpu")),
        node("slurm-b", slurm=("c1", "gpu")),
        node("slurm-other-partition", used=6, slurm=("c1", "debug")),
        node("dgx-b"),
        node("dgx-dear", used=6, price="3"),
    ]
    groups = scheduling.gang_groups(job(gang=2), fleet, None)
    assert [[n.name for n in g] for g in groups] == [
        ["slurm-a", "slurm-b"],
        ["slurm-other-partition"],
        ["dgx-dear"],
        ["dgx-a", "dgx-b"],
    ]
    assert [n.name for n in scheduling.gang_fit(job(gang=2), fleet, None) or []] == ["slurm-a", "slurm-b"]
    assert scheduling.gang_fit(job(gang=3), fleet, None) is None  # no group of three: nothing, never half


def test_a_node_a_job_cannot_use_is_not_matched_whatever_its_room():
    wanted = job(model="h100", location="eastus")
    assert scheduling.matches(wanted, node("a"), None)
    assert not scheduling.matches(wanted, node("b", model="H200", memory_gb=1128), None)
    assert not scheduling.matches(wanted, node("c", location="westus"), None)
    assert not scheduling.matches(wanted, node("d", price="9"), ceiling("5").terms)
    assert not scheduling.matches(wanted, node("e", currency="EUR", price="1"), ceiling("5").terms)
    drained = node("f")
    drained = type(drained)(**{**drained.__dict__, "backend_status": {"placeable": False, "state": "DRAIN"}})
    assert not scheduling.matches(wanted, drained, None)


# ----------------------------------------------------------------------------------------------- preemption
def _preemption(waiting, fleet, victims, **kw):
    return scheduling.preemption_targets(snapshot(waiting, fleet, preemptible=victims, **kw))


def test_preemption_chooses_the_node_needing_the_fewest_victims():
    a, b = node("a", used=8), node("b", used=8)
    on_a = [job(f"a{i}", devices=2, priority=1, preemptible=True, on=a) for i in range(4)]
    on_b = [
        job("b0", devices=4, priority=2, preemptible=True, on=b),
        job("b1", devices=4, priority=2, preemptible=True, on=b),
    ]
    decided = _preemption(job(devices=4, priority=8), [a, b], [*on_a, *on_b])
    assert decided is not None and decided.node == b.key and [v.key.name for v in decided.victims] == ["b0"]


def test_preemption_ties_on_victims_go_to_the_lower_highest_priority():
    a, b = node("a", used=8), node("b", used=8)
    victims = [
        job("a0", devices=8, priority=3, preemptible=True, on=a),
        job("b0", devices=8, priority=1, preemptible=True, on=b),
    ]
    decided = _preemption(job(devices=4, priority=8), [a, b], victims)
    assert decided is not None and decided.node == b.key


@pytest.mark.parametrize(
    "said",
    [
        {"sub": OTHER_SUB},
        {"preemptible": False},
        {"priority": 8},
        {"priority": 9},
        {"gang_nodes": (node("z").key,)},
        {"cancel_requested": True},
        {"status": JobStatus.SUCCEEDED},
    ],
    ids=["another-subscription", "not-preemptible", "same-priority", "higher", "gang-part", "canceling", "ended"],
)
def test_preemption_never_stops_a_job_it_may_not(said):
    a = node("a", used=8)
    victim = job(
        "v", **{"devices": 8, "priority": 1, "preemptible": True, "on": a, "status": JobStatus.RUNNING, **said}
    )
    assert _preemption(job(devices=4, priority=8), [a], [victim]) is None
    allowed = job("v", devices=8, priority=1, preemptible=True, on=a, status=JobStatus.RUNNING)
    assert _preemption(job(devices=4, priority=8), [a], [allowed]) is not None  # the same job, as it may be


@pytest.mark.parametrize(
    ("waiting", "budgets"),
    [
        (job(devices=4, priority=0), Budgets()),
        (job(devices=4, priority=8, gang=2), Budgets()),
        (job(devices=4, priority=8), Budgets(refusal="spent", refused_by="b")),
        (job(devices=4, priority=8, drain_node=node("x").key), Budgets()),
    ],
    ids=["priority-0", "gang", "budget-spent", "node-held-already"],
)
def test_a_job_that_may_not_preempt_preempts_nothing(waiting, budgets):
    a = node("a", used=8)
    victim = job("v", devices=8, priority=0, preemptible=True, on=a, status=JobStatus.RUNNING)
    assert not scheduling.may_preempt(waiting, budgets)
    assert _preemption(waiting, [a], [victim], budgets=budgets) is None


def test_preemption_never_frees_a_node_where_a_quota_stays_full():
    a = node("a", used=8)
    victim = job("v", devices=2, priority=1, preemptible=True, on=a, status=JobStatus.RUNNING)
    # 2 devices freed, but the quota is 4 short: stopping it would not let the job in
    assert _preemption(job(devices=2, priority=8), [a], [victim], quotas=[quota("gpus", 8, 12)]) is None
    # with the quota 2 short, the victim's 2 devices are enough
    decided = _preemption(job(devices=2, priority=8), [a], [victim], quotas=[quota("gpus", 10, 10)])
    assert decided is not None and [v.key.name for v in decided.victims] == ["v"]


def test_preemption_never_takes_a_node_above_the_ceiling_or_not_available():
    dear, cordoned = node("dear", used=8, price="9"), node("cordoned", used=8, availability="Cordoned")
    victims = [job(n.name + "-v", devices=8, priority=1, preemptible=True, on=n) for n in (dear, cordoned)]
    assert _preemption(job(devices=4, priority=8, ceiling=ceiling("5")), [dear, cordoned], victims) is None


# ----------------------------------------------------------------------------------------------- starvation
def test_a_job_starves_once_it_waited_the_starvation_time_unless_held_or_a_gang():
    submitted = job(submitted_at="2024-05-01T00:00:00Z")
    at = 1714521600  # 2024-05-01T00:00:00Z
    assert not scheduling.starving(submitted, at + 599, 600)
    assert scheduling.starving(submitted, at + 600, 600)
    assert not scheduling.starving(job(gang=2), at + 600, 600)
    assert not scheduling.starving(job(drain_node=node("a").key), at + 600, 600)


def test_the_node_drained_for_a_starving_job_is_the_nearest_to_fitting():
    fleet = [node("small", devices=4, memory_gb=320, used=0), node("a", used=6), node("b", used=3)]
    assert scheduling.drain_target(job(devices=6), fleet).name == "b"  # the small one never could
    assert scheduling.drain_target(job(devices=16), fleet) is None


# ----------------------------------------------------------------------------------------------- the snapshot
@pytest.mark.parametrize(
    ("decision", "empty", "part"),
    [
        (scheduling.inadmissible, Snapshot(job()), ReadShapes()),
        (scheduling.waiting, Snapshot(job(), budgets=Budgets(), shapes=()), scheduling.ReadCandidates()),
        (scheduling.preemption_targets, Snapshot(job(priority=8), budgets=Budgets()), ReadPreemptible()),
    ],
    ids=["admission-reads-shapes", "waiting-reads-candidates", "preemption-reads-candidates"],
)
def test_a_decision_names_the_first_part_it_has_not_read(decision, empty, part):
    with pytest.raises(Unread) as unread:
        decision(empty)
    assert unread.value.part == part


def test_a_decision_reads_the_quotas_only_of_the_locations_it_looks_at():
    fleet = [node("a"), node("far", location="westus")]
    bare = Snapshot(job(devices=16), shapes=snapshot(job(), fleet).shapes)
    assert isinstance(scheduling.inadmissible(bare), TooLarge)  # decided on the shapes alone
    sized = Snapshot(job(devices=4), shapes=bare.shapes)
    with pytest.raises(Unread) as unread:
        scheduling.inadmissible(sized)
    assert unread.value.part == ReadQuotas("eastus")


def test_preemption_reads_each_victims_node_as_it_is_now():
    a = node("a", used=8)
    victim = job("v", devices=8, priority=1, preemptible=True, on=a, status=JobStatus.RUNNING)
    bare = Snapshot(job(devices=4, priority=8), budgets=Budgets(), preemptible=(victim,))
    with pytest.raises(Unread) as unread:
        scheduling.preemption_targets(bare)
    assert unread.value.part == ReadNode(a.key)
    gone = bare.with_node(a.key, None)  # deleted meanwhile: passed over
    assert scheduling.preemption_targets(gone) is None


# ----------------------------------------------------------------------------------------------- capacity reservations
NOW = 1_800_000_000  # a whole hour
HOUR = 3600
RESERVATION_ID = f"/subscriptions/{SUB}/resourceGroups/rg1/providers/ITL.Accelerator/capacityReservations/week"
REF = "capacityReservations/rg1/week"


def booked(made, *bookings, holds=()):
    """``made`` with ``bookings`` ((ref, devices, start, end); 80 GiB a device) and ``holds`` on it (its allocation
    counting them)."""
    entries = tuple(Booking(ref, d, 80 * d, start, end) for ref, d, start, end in bookings)
    return replace(
        made,
        bookings=entries,
        holds=tuple(holds),
        devices_allocated=made.devices_allocated + sum(h.devices for h in holds),
        memory_gb_allocated=made.memory_gb_allocated + sum(h.memory_gb for h in holds),
    )


def in_reservation(made, reservation_id=RESERVATION_ID):
    made.document["properties"]["capacityReservationId"] = reservation_id
    return made


@pytest.mark.parametrize(
    ("max_minutes", "window", "room"),
    [
        (60, (NOW + 2 * HOUR, NOW + 4 * HOUR), 8),  # ends before the window opens: backfill on all 8
        (120, (NOW + 2 * HOUR, NOW + 4 * HOUR), 8),  # ends exactly as it opens ([start, end) windows)
        (180, (NOW + 2 * HOUR, NOW + 4 * HOUR), 2),  # would run into it: the 6 booked are kept aside
        (0, (NOW + 200 * HOUR, NOW + 201 * HOUR), 2),  # no maximum duration: every booking from now on counts
        (60, (NOW - HOUR, NOW + HOUR), 2),  # in force now
        (60, (NOW - 2 * HOUR, NOW), 8),  # over
    ],
)
def test_a_nodes_room_is_what_is_free_less_the_bookings_the_job_would_run_into(max_minutes, window, room):
    fleet_node = booked(node("n1"), ("capacityReservations/rg9/other", 6, *window))
    waiting = job(max_duration_seconds=max_minutes * 60)
    assert scheduling.room(waiting, fleet_node, NOW)[0] == room


def test_a_booking_keeps_aside_only_what_its_reservations_work_does_not_hold():
    hold = Hold("sparkJobs/rg1/in-it", 4, 320, NOW + HOUR, reservation=REF)
    fleet_node = booked(node("n1"), (REF, 6, NOW - HOUR, NOW + 3 * HOUR), holds=[hold])
    assert scheduling.room(job(devices=1), fleet_node, NOW) == (2, 160)  # 8 - 4 held - 2 still booked
    mine = in_reservation(job(devices=2))
    assert scheduling.room(mine, fleet_node, NOW) == (2, 160)  # the booking's 6 less the 4 its other job holds
    assert scheduling.room(in_reservation(job(devices=3)), fleet_node, NOW)[0] < 3


@pytest.mark.parametrize(
    ("window", "room"),
    [
        ((NOW + HOUR, NOW + 3 * HOUR), (0, 0)),  # not open yet
        ((NOW - HOUR, NOW + 3 * HOUR), (6, 480)),  # open: its booking, not the node's 8
        ((NOW - 3 * HOUR, NOW), (0, 0)),  # over
    ],
)
def test_a_job_of_a_reservation_takes_out_of_its_booking_only_inside_its_window(window, room):
    fleet_node = booked(node("n1"), (REF, 6, *window))
    assert scheduling.room(in_reservation(job(devices=2)), fleet_node, NOW) == room


def test_best_fit_passes_over_nodes_whose_room_is_booked_and_waits_saying_which_window():
    later = (NOW + 2 * HOUR, NOW + 4 * HOUR)
    fleet = [booked(node("n1"), ("capacityReservations/rg9/other", 8, *later))]
    short, long = job(devices=4, max_duration_seconds=HOUR), job(devices=4, max_duration_seconds=3 * HOUR)
    assert [n.name for n in scheduling.best_fit(short, fleet, now=NOW)] == ["n1"]
    assert scheduling.best_fit(long, fleet, now=NOW) == []
    reason = decide(scheduling.waiting, replace(snapshot(long, fleet), now=NOW), fleet)
    assert reason == RunsIntoBooking("GPU", 4, NOW + 2 * HOUR, 180)
    assert render(reason) == (
        "Waiting for capacity: the nodes with 4 free GPUs now are booked by a capacity reservation from "
        "2027-01-15T10:00:00Z, and the job, with its maximum duration of 180 minutes, would run into that window."
    )
    assert gist(reason) == (Wait.CAPACITY, "")


def test_a_gang_counts_the_bookings_on_each_of_its_nodes():
    later = (NOW + HOUR, NOW + 2 * HOUR)
    fleet = [node("a"), booked(node("b"), ("capacityReservations/rg9/other", 8, *later)), node("c")]
    gang = job(devices=4, gang=2, max_duration_seconds=2 * HOUR)
    assert [n.name for n in scheduling.gang_fit(gang, fleet, None, now=NOW) or []] == ["a", "c"]
    assert scheduling.gang_fit(job(devices=4, gang=3, max_duration_seconds=2 * HOUR), fleet, None, now=NOW) is None
    assert len(scheduling.gang_fit(job(devices=4, gang=3, max_duration_seconds=HOUR), fleet, None, now=NOW) or []) == 3


def _reservation(nodes=("n1",), *, devices=6, start=NOW + HOUR, end=NOW + 3 * HOUR, kind="GPU", model="h100"):
    key = ResourceKey(SUB, "rg1", "capacityReservations", ("week",))
    terms = BillingTerms(Decimal("2.5"), "EUR")
    node_keys = tuple(node(n).key for n in nodes)
    return CapacityReservation(
        key,
        {"id": RESERVATION_ID},
        "e",
        kind,
        model,
        "eastus",
        devices,
        80 * devices,
        start,
        end,
        node_keys,
        terms,
        "x",
    )


@pytest.mark.parametrize(
    ("reservation", "asked", "said"),
    [
        (None, {}, "The capacity reservation 'week' the job names does not exist (cancelled, or never booked)."),
        (_reservation(end=NOW), {}, "The window of its capacity reservation 'week' ended at 2027-01-15T08:00:00Z."),
        (
            _reservation(devices=2),
            {"devices": 4},
            "The job asks for more than its capacity reservation 'week' books: it books 2 GPUs and 160 GiB per node, "
            "the job asks for 4 and 320 GiB.",
        ),
        (
            _reservation(),
            {"gang": 2},
            "The job asks for more than its capacity reservation 'week' books: it books 1 node, the job asks for 2.",
        ),
        (
            _reservation(model="a100"),
            {"model": "h100"},
            "The job asks for more than its capacity reservation 'week' books: it books GPU model a100, the job asks "
            "for h100.",
        ),
    ],
)
def test_a_job_is_inadmissible_when_its_reservation_is_gone_over_or_too_small(reservation, asked, said):
    waiting = in_reservation(job(**asked))
    seen = replace(snapshot(waiting, [node("n1")]), reservation=ReservationSeen(reservation), now=NOW)
    assert render(decide(scheduling.inadmissible, seen)) == said


def test_a_job_of_a_reservation_waits_for_its_window_then_for_room_in_it():
    booking = (REF, 6, NOW + HOUR, NOW + 3 * HOUR)
    fleet = [booked(node("n1"), booking)]
    waiting = in_reservation(job(devices=4))
    seen = replace(snapshot(waiting, fleet), reservation=ReservationSeen(_reservation()), now=NOW)
    reason = decide(scheduling.waiting, seen, fleet)
    assert render(reason) == "Waiting for the window of its capacity reservation: 'week' opens at 2027-01-15T09:00:00Z."
    assert gist(reason) == (Wait.WINDOW, "week")
    assert decide(scheduling.reservation_fit, seen, fleet) == []
    opened = replace(seen, now=NOW + HOUR)
    assert [n.name for n in decide(scheduling.reservation_fit, opened, fleet)] == ["n1"]
    hold = Hold("sparkJobs/rg1/first", 4, 320, NOW + 2 * HOUR, reservation=REF)
    full = [booked(node("n1"), booking, holds=[hold])]
    crowded = replace(snapshot(waiting, full), reservation=ReservationSeen(_reservation()), now=NOW + HOUR)
    assert decide(scheduling.reservation_fit, crowded, full) == []  # 6 booked, 4 held by the other: 2 left
    said = render(decide(scheduling.waiting, crowded, full))
    assert said == (
        "Waiting for room in its capacity reservation: 'week' books 6 GPUs per node and its other jobs hold too many "
        "of them now."
    )
    assert scheduling.room(in_reservation(job(devices=2)), full[0], NOW + HOUR) == (2, 160)  # shared by its jobs


def test_without_a_reservation_store_its_nodes_are_the_candidates_holding_its_booking():
    fleet = [node("n0"), booked(node("n1"), (REF, 6, NOW - HOUR, NOW + HOUR))]
    waiting = in_reservation(job(devices=2))
    seen = replace(snapshot(waiting, fleet), reservation=ReservationSeen(None, known=False), now=NOW)
    assert decide(scheduling.inadmissible, seen, fleet) is None
    assert [n.name for n in decide(scheduling.reservation_fit, seen, fleet)] == ["n1"]


def test_preemptible_work_counts_no_booking_and_a_reservations_job_may_stop_it_whatever_its_priority():
    fleet_node = booked(node("n1", used=8), (REF, 8, NOW - HOUR, NOW + HOUR))
    borrower = job("borrower", devices=8, priority=9, preemptible=True, on=fleet_node, status=JobStatus.RUNNING)
    assert scheduling.room(job(devices=8, preemptible=True), booked(node("n2"), (REF, 8, NOW, NOW + HOUR)), NOW)[0] == 8
    mine = in_reservation(job(devices=8, priority=0))
    seen = replace(
        snapshot(mine, [fleet_node], preemptible=[borrower]), reservation=ReservationSeen(_reservation()), now=NOW
    )
    targets = decide(scheduling.preemption_targets, seen, [fleet_node])
    assert (
        targets is not None and targets.node == fleet_node.key and [v.key.name for v in targets.victims] == ["borrower"]
    )
    # its own reservation's work is never its victim, nor is anything outside its window
    own = replace(
        borrower,
        document={**borrower.document, "properties": {**borrower.properties, "capacityReservationId": RESERVATION_ID}},
    )
    assert decide(scheduling.preemption_targets, replace(seen, preemptible=(own,)), [fleet_node]) is None
    assert decide(scheduling.preemption_targets, replace(seen, now=NOW + HOUR), [fleet_node]) is None


def test_a_gang_in_a_reservation_gets_its_reservations_nodes_or_none():
    window = (REF, 8, NOW - HOUR, NOW + HOUR)
    fleet = [booked(node("n1"), window), booked(node("n2"), window), node("n3")]
    gang = in_reservation(job(devices=4, gang=2))
    found = _reservation(nodes=("n1", "n2"), devices=8, start=NOW - HOUR, end=NOW + HOUR)
    seen = replace(snapshot(gang, fleet), reservation=ReservationSeen(found), now=NOW)
    assert sorted(n.name for n in decide(scheduling.reservation_fit, seen, fleet)) == ["n1", "n2"]
    three = in_reservation(job(devices=4, gang=3))
    assert decide(scheduling.reservation_fit, replace(seen, job=three), fleet) == []  # n3 holds no booking of it
