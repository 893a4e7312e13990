"""The pure scheduling layer (domain/scheduling.py), table by table: each admission rule's case and the reason it
renders, why a job waits (in the order the rules are tried), best fit's ordering and ties, gangs grouped as they
must be placed, preemption targets (the fewest victims, never across a subscription, a budget or a quota, never a job
that did not agree to it), starvation, and a snapshot read part by part. No repository: a decision is a function of
its snapshot (tests/unit/scheduling_builders.py builds them)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from itl_accelerator.domain import scheduling
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
    Snapshot,
    TooLarge,
    Unread,
    Wait,
    gist,
    render,
)
from itl_accelerator.domain.states import JobStatus
from tests.unit.scheduling_builders import OTHER_SUB, ceiling, decide, job, node, quota, snapshot


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
