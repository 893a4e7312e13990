"""Invariants of the scheduler over random fleets (hypothesis), the rules of issue 43 item 1:

- the pure layer (domain/scheduling.py): best fit is the one ordering over every node a part fits on; a gang gets
  exactly its size of distinct nodes of one group, each matching and with room, or nothing — and nothing only when
  no group has room; preemption targets are only jobs of the waiting job's subscription that said they may be
  preempted, of a strictly lower priority, holding capacity on the one node chosen, and stopping them gives the job
  room there within its price ceiling and every quota it counts in; the words of a waiting reason, read back as a
  job keeps them (services/common/placement.py ``reason_gist``), say what its type says (``gist``);
- the service over the in-memory twins (tests/services/conftest.py ``Env``): whatever is submitted and ends, no node
  holds more than it has or other than its jobs hold, and a gang holds all its parts or none.

Examples are derandomised: the same cases run on every machine, so a failure is reproducible and never flaky.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from itl_accelerator.domain import scheduling
from itl_accelerator.domain.quotas import quota_names
from itl_accelerator.domain.scheduling import Budgets
from itl_accelerator.domain.states import JobStatus
from itl_accelerator.services.common.placement import reason_gist
from tests.unit.scheduling_builders import OTHER_SUB, SUB, ceiling, decide, index_answer, job, node, quota, snapshot

PURE = settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PRICES = ("2.5", "3", "4")
PLATFORMS = (None, ("c1", "gpu"), ("c1", "debug"))


@st.composite
def fleets(draw, *, used: bool = True):
    """1 to 10 H100 nodes of 1 to 8 devices (80 GiB each), some of their devices held, at a few prices, in two
    locations, on the DGX Platform or one of two Slurm partitions; a few cordoned."""
    count = draw(st.integers(1, 10))
    made = []
    for i in range(count):
        devices = draw(st.sampled_from((1, 2, 4, 8)))
        made.append(
            node(
                f"n{i}",
                devices=devices,
                memory_gb=80 * devices,
                used=draw(st.integers(0, devices)) if used else 0,
                price=draw(st.sampled_from(PRICES)),
                location=draw(st.sampled_from(("eastus", "westus"))),
                availability=draw(st.sampled_from(("Available",) * 5 + ("Cordoned",))),
                slurm=draw(st.sampled_from(PLATFORMS)),
            )
        )
    return made


@st.composite
def jobs(draw, *, gang: bool = True, priority: st.SearchStrategy[int] = st.integers(0, 9)):
    devices = draw(st.sampled_from((1, 2, 3, 4, 8)))
    return job(
        devices=devices,
        memory_gb=draw(st.sampled_from((40 * devices, 80 * devices))),
        gang=draw(st.integers(1, 3)) if gang else 1,
        priority=draw(priority),
        location=draw(st.sampled_from(("", "eastus"))),
        ceiling=draw(st.sampled_from((None, ceiling("3"), ceiling("2.5", "4")))),
    )


def _group(n):
    return (n.accelerator.key, n.shape.location, n.terms, n.backend.type, n.backend.cluster, n.backend.partition)


# ----------------------------------------------------------------------------------------------- fits
@PURE
@given(fleets(), jobs(gang=False))
def test_best_fit_orders_every_node_a_part_fits_on_by_what_it_leaves(fleet, wanted):
    chosen = scheduling.best_fit(wanted, fleet)
    keys = [scheduling.fit_key(n.free_devices, n.free_memory_gb, wanted.devices, wanted.memory_gb) for n in chosen]
    assert keys == sorted(keys)
    fits = {
        n.key
        for n in fleet
        if n.memory_gb_total * wanted.devices >= wanted.memory_gb * n.device_total
        and n.free_devices >= wanted.devices  # room now (no bookings here: all that is free)
        and n.free_memory_gb >= wanted.memory_gb
    }
    assert {n.key for n in chosen} == fits and len(chosen) == len(fits)


@PURE
@given(fleets(), jobs())
def test_a_gang_gets_all_its_parts_on_one_group_or_nothing(fleet, wanted):
    terms = scheduling.within(wanted, None)
    room = index_answer(wanted, fleet, terms)
    chosen = scheduling.gang_fit(wanted, room, terms)
    matching = [n for n in room if scheduling.matches(wanted, n, terms)]
    groups = Counter(_group(n) for n in matching)
    if chosen is None:
        assert all(size < wanted.gang_size for size in groups.values())  # nothing only when nothing fits
        return
    assert len(chosen) == wanted.gang_size == len({n.key for n in chosen})
    assert len({_group(n) for n in chosen}) == 1
    for part in chosen:  # each has room for its part, as the index read it, and meets every constraint
        assert part.free_devices >= wanted.devices and part.free_memory_gb >= wanted.memory_gb
        assert scheduling.matches(wanted, part, terms)


# ----------------------------------------------------------------------------------------------- preemption
@st.composite
def held_fleets(draw):
    """Nodes full or nearly, each held by 0 to 3 jobs of either subscription: some agreed to be preempted, some are
    parts of gangs, some canceling, some ended (a stale index entry) — what the preemption index may answer."""
    made, victims = [], []
    for i in range(draw(st.integers(1, 6))):
        devices = draw(st.sampled_from((2, 4, 8)))
        blank = node(
            f"n{i}",
            devices=devices,
            memory_gb=80 * devices,
            price=draw(st.sampled_from(PRICES)),
            availability=draw(st.sampled_from(("Available",) * 4 + ("Cordoned",))),
        )
        held = 0
        for v in range(draw(st.integers(0, 3))):
            size = draw(st.integers(1, devices - held)) if held < devices else 0
            if not size:
                break
            held += size
            victims.append(
                job(
                    f"n{i}-v{v}",
                    sub=draw(st.sampled_from((SUB, SUB, OTHER_SUB))),
                    devices=size,
                    priority=draw(st.integers(0, 6)),
                    preemptible=draw(st.sampled_from((True, True, True, False))),
                    on=blank,
                    status=draw(st.sampled_from((JobStatus.RUNNING, JobStatus.SCHEDULED, JobStatus.SUCCEEDED))),
                    cancel_requested=draw(st.sampled_from((False, False, False, True))),
                    gang_nodes=draw(st.sampled_from(((),) * 5 + ((blank.key,),))),
                )
            )
        made.append(replace(blank, devices_allocated=held, memory_gb_allocated=80 * held))
    order = draw(st.permutations(range(len(victims))))
    return made, [victims[i] for i in order]


@st.composite
def quota_sets(draw):
    """Limited quotas of the waiting job's subscription in eastus: of all GPUs, of H100s, both or none."""
    chosen = draw(st.sampled_from(((), ("gpus",), ("gpus-h100",), ("gpus", "gpus-h100"))))
    return [quota(name, draw(st.integers(0, 24)), draw(st.integers(0, 24))) for name in chosen]


@PURE
@given(held_fleets(), jobs(gang=False, priority=st.integers(3, 9)) | jobs(), quota_sets(), st.booleans())
def test_preemption_stops_only_what_it_may_and_only_enough_to_make_room(held, wanted, quotas, spent):
    fleet, victims = held
    budgets = Budgets(refusal="spent", refused_by="b") if spent else Budgets()
    decided = scheduling.preemption_targets(
        snapshot(wanted, fleet, preemptible=victims, quotas=quotas, budgets=budgets)
    )
    if decided is None:
        return
    assert not spent and wanted.gang_size == 1 and wanted.priority > 0  # never across a budget; no gang preempts
    target = next(n for n in fleet if n.key == decided.node)
    assert target.availability == "Available"
    assert scheduling.matches(wanted, target, scheduling.within(wanted, None))  # its ceiling, its constraints
    assert decided.victims and len({v.key for v in decided.victims}) == len(decided.victims)
    for victim in decided.victims:
        assert victim.key.subscription_id == wanted.key.subscription_id  # never across a subscription
        assert victim.properties.get("preemptible") is True  # never one that did not agree
        assert victim.priority < wanted.priority
        assert victim.status in (JobStatus.SCHEDULED, JobStatus.RUNNING) and not victim.cancel_requested
        assert not victim.gang_nodes and victim.node == target.key
    freed = sum(v.devices for v in decided.victims)
    assert target.free_devices + freed >= wanted.devices
    assert target.free_memory_gb + sum(v.memory_gb for v in decided.victims) >= wanted.memory_gb
    for limited in quotas:  # never across a quota: each it counts in has room once the victims let go
        if limited.name in quota_names(target.shape.gpu_model):
            assert (limited.headroom or 0) + freed >= wanted.devices


# ----------------------------------------------------------------------------------------------- reasons
@PURE
@given(fleets(), jobs(), quota_sets(), st.sampled_from((None, frozenset({"USD"}), frozenset({"EUR"}))))
def test_a_waiting_reason_read_back_from_its_words_says_what_its_type_says(fleet, wanted, quotas, currencies):
    budgets = Budgets(currencies=currencies, names=("team-budget",) if currencies else ())
    decided = decide(scheduling.waiting, snapshot(wanted, fleet, quotas=quotas, budgets=budgets), fleet)
    assert reason_gist(scheduling.render(decided)) == scheduling.gist(decided)


@PURE
@given(
    st.sampled_from(("team", "q3-spend", "ml_research")),
    st.sampled_from(("gpus", "gpus-h100", "tpus-v5e")),
    st.integers(0, 64),
)
def test_the_gist_of_a_budget_or_quota_reason_is_its_name(budget, quota_name, limit):
    spent = scheduling.BudgetSpent(budget, f"Budget '{budget}' is spent.")
    full = scheduling.QuotaFull("GPU", scheduling.QuotaSeen(quota_name, "eastus", limit, limit), 1)
    for decided in (spent, full):
        assert reason_gist(scheduling.render(decided)) == scheduling.gist(decided)


# ----------------------------------------------------------------------------------------------- admission
@PURE
@given(fleets(used=False), jobs())
def test_a_job_admitted_on_an_empty_fleet_fits_somewhere_and_a_refused_one_nowhere(fleet, wanted):
    """On an idle fleet with no quota, admission never refuses a job that fits now (a refusal is for ever: the job
    fails at once), and a refused job fits nowhere. (Not the converse: admission judges on shapes, which count
    cordoned nodes and price-only differences, and a job may wait for those.)"""
    terms = scheduling.within(wanted, None)
    refused = scheduling.inadmissible(snapshot(wanted, fleet))
    placed = scheduling.gang_fit(wanted, index_answer(wanted, fleet, terms), terms)
    if placed is not None:
        assert refused is None, scheduling.render(refused)
    if refused is not None:
        assert placed is None


# ----------------------------------------------------------------------------------------------- the service
SERVICE = settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))


@st.composite
def workloads(draw):
    nodes = [
        (draw(st.sampled_from((2, 4, 8))), draw(st.sampled_from((2.5, 3.0)))) for _ in range(draw(st.integers(1, 4)))
    ]
    submitted = [
        (
            draw(st.sampled_from((1, 2, 4, 8))),
            draw(st.integers(1, 3)),
            draw(st.integers(0, 9)),
            draw(st.booleans()),
        )
        for _ in range(draw(st.integers(1, 8)))
    ]
    ends = draw(st.lists(st.integers(0, 7), max_size=4))
    return nodes, submitted, ends


def _holds_what_its_jobs_hold(env, node_names, job_names):
    held = Counter()
    for name in job_names:
        found = env.job(name)
        if not found.capacity_reserved:
            continue  # waiting, or ended (an ended gang still says where it ran)
        parts = (found.node, *found.gang_nodes)
        assert len(parts) == found.gang_size == len(set(parts))  # a gang holds all its parts or none
        for part in parts:
            held[part.name] += found.devices
    for name in node_names:
        n = env.node(name)
        assert (
            n.devices_allocated == held[name] <= n.device_total
        )  # never over-committed, never more than its jobs hold


@SERVICE
@given(workloads())
def test_no_node_is_ever_over_committed_and_no_gang_half_placed(world):
    from tests.services.conftest import Env

    env = Env()
    nodes, submitted, ends = world
    node_names = [f"n{i}" for i in range(len(nodes))]
    for name, (devices, price) in zip(node_names, nodes, strict=True):
        env.add_node(name, devices=devices, price=price)
    job_names = []
    for i, (devices, gang, priority, preemptible) in enumerate(submitted):
        accelerator = {"kind": "GPU", "count": devices, "memoryGb": 80 * devices, "nodes": gang}
        env.submit(
            f"j{i}",
            devices * gang,
            80 * devices * gang,
            priority=priority,
            preemptible=preemptible and gang == 1,
            accelerator=accelerator,
        )
        job_names.append(f"j{i}")
        env.run()
        _holds_what_its_jobs_hold(env, node_names, job_names)
    for index in ends:
        if index < len(job_names) and env.status(job_names[index]) == "Running":
            env.end_job(job_names[index])
            env.run()
            _holds_what_its_jobs_hold(env, node_names, job_names)
