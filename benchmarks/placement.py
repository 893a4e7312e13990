"""Placement of jobs onto nodes: DynamoDB requests and time per placement as the fleet grows, and the GPU
fragmentation best fit leaves, beside a first-fit baseline. Prints two tables.

Run from the repository root: ``python -m benchmarks.placement`` (``./dev bench`` runs it too).

(a) On moto, with the table of template.yaml and the real repositories and placement code (``Placement``):
    fleets of 10, 100 and 1,000 nodes of 8 devices — a mixed fleet, in turn NVIDIA H100 GPUs, AMD MI300X GPUs,
    Google TPU v5e and Huawei 910B NPUs (:data:`MIXED_FLEET`), a third of them partly used — then ``PLACEMENTS``
    jobs placed one by one, each asking for one of the four in turn (a kind, and for the GPUs their model). For each
    placement: the DynamoDB calls it made (counted at botocore) and its wall time, and that it landed on a node of
    what it asked for. The count must not grow with the fleet or its mix: one ``Query`` of the placement index (its
    partition of the job's kind), one ``TransactWriteItems``. Then the location's capacity offers once
    (services/api/offers.py, ``GET .../locations/{location}/offers``): its DynamoDB calls must grow with the offers
    (kinds and models: 4 here), never with the nodes. Then one preemption: every H100 node that can be filled runs a
    preemptible priority-1 job, and a priority-9 job of 8 H100s waits; the calls to choose and stop its victim must
    not grow with the fleet or the candidates (one Query of at most 50, at most 5 nodes). And one multi-node job (2
    whole MI300X nodes at once): the same bounded candidate reads and one transaction, whatever the fleet.
(b) 10,000 jobs onto 1,000 nodes: a discrete-event simulation — jobs of 1, 2, 4 or 8 GPUs arrive (Poisson, at
    110 % of the fleet's capacity, so jobs must wait), run an exponential time, and release — choosing nodes by the service's own
    best-fit order (:func:`itl_accelerator.services.common.placement.best_fit_key`) and, beside it, by first fit (the first
    node in a fixed order that fits). Waiting jobs are served in order with backfill, as the service does.
    Fragmentation is the free GPUs stranded on partly used nodes whenever a job has to wait (they exist, but no
    node has enough of them together); lower is better.
"""

from __future__ import annotations

import dataclasses
import heapq
import random
import statistics
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from benchmarks.requests_and_cold_start import _table, dynamodb_calls

FLEETS = (10, 100, 1_000)
PLACEMENTS = 30
SIM_JOBS = 10_000
SIM_NODES = 1_000
GPUS_PER_NODE = 8
#: Offered load of the simulation: GPU-time asked for per GPU-time the fleet has (above 1: jobs must wait).
OFFERED_LOAD = 1.1
TABLE = "itl-accelerator-bench-placement"
#: The mixed fleet's nodes, in turn: (kind, vendor, model, GiB per device), and what a job of each asks for (its
#: accelerator key: a GPU's model, another kind's ``kind:``, any model).
MIXED_FLEET = (
    ("GPU", "NVIDIA", "H100", 80, "h100"),
    ("GPU", "AMD", "MI300X", 192, "mi300x"),
    ("TPU", "Google", "v5e", 16, "tpu:"),
    ("NPU", "Huawei", "910B", 64, "npu:"),
)


# ------------------------------------------------------------------------------------------------ (a) on moto
@dataclass
class FleetRow:
    nodes: int
    placements: int
    calls: Counter[str]
    ms: list[float]
    offers: int = 0
    offer_calls: int = 0
    offer_ms: float = 0.0
    candidates: int = 0
    preempt_calls: Counter[str] | None = None
    preempt_ms: float = 0.0
    estimate_calls: Counter[str] | None = None
    estimate_ms: float = 0.0
    estimated: int = 0
    known: int = 0
    gang_calls: Counter[str] | None = None
    gang_ms: float = 0.0


def measure_fleets() -> list[FleetRow]:
    """(a): requests and time per placement on fleets of each size in :data:`FLEETS`."""
    import os

    import boto3
    from moto import mock_aws

    from itl_accelerator.auth.principal import ArmScope, Principal
    from itl_accelerator.domain.records import (
        Instance,
        Job,
        Node,
        Release,
        Reservation,
        ResourceKey,
        gang_releases,
    )
    from itl_accelerator.domain.states import OperationKind, ProvisioningState
    from itl_accelerator.repositories.dynamodb import dynamodb_repositories
    from itl_accelerator.repositories.protocols import Effects, Expect
    from itl_accelerator.resources import JOBS, NODES
    from itl_accelerator.services.api.offers import OfferService
    from itl_accelerator.services.common.access import Access
    from itl_accelerator.services.common.audit_events import build_event
    from itl_accelerator.services.common.context import CallContext
    from itl_accelerator.services.common.kernel import ResourceKernel
    from itl_accelerator.services.common.lro import new_operation
    from itl_accelerator.services.common.placement import Placement
    from itl_accelerator.settings import Settings
    from itl_accelerator.state_machines import StateMachines
    from itl_local.aws import create_table, make_dynamodb_faithful
    from itl_local.template import Template

    os.environ.update({"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"})
    os.environ.pop("AWS_ENDPOINT_URL", None)
    make_dynamodb_faithful()
    ctx = CallContext(Principal(subject="bench", roles=["itl-accelerator-admin"]), "bench", "bench")

    def audit(sub: str, resource_id: str) -> Any:
        return build_event(
            ctx,
            subscription_id=sub,
            action="bench",
            resource_id=resource_id,
            resource_type="bench",
            resource_name="bench",
            change_summary="bench",
        )

    rows = []
    with mock_aws():
        client = boto3.client("dynamodb")
        create_table(client, Template(), TABLE)
        repos = dynamodb_repositories(client, TABLE)
        placement = Placement(ResourceKernel(repos, Access(repos.audit)), StateMachines(None), Settings())
        rng = random.Random(7)
        for fleet in FLEETS:
            sub = f"sub-bench-{fleet}"
            for i in range(fleet):
                key = ResourceKey(sub, "rg", NODES.segment, (f"n{i:04d}",))
                kind, vendor, model, per_device, _ = MIXED_FLEET[i % len(MIXED_FLEET)]
                node = Node(
                    key=key,
                    document={
                        "id": NODES.id(sub, "rg", key.names),
                        "name": key.names[0],
                        "type": NODES.type_name,
                        "location": "us-east-1",
                        "properties": {
                            "owner": "o",
                            "accelerator": {
                                "kind": kind,
                                "vendor": vendor,
                                "model": model,
                                "count": 8,
                                "memoryGbPerDevice": per_device,
                            },
                            "pricing": {"pricePerAcceleratorHour": 2.5},
                            "availability": "Available",
                        },
                        "systemData": {},
                    },
                    etag='"e"',
                    device_total=8,
                    memory_gb_total=8 * per_device,
                )
                repos.nodes.create(node, audit(sub, node.arm_id))
                if i % 3 == 0:  # a third partly used: 1-6 GPUs taken, by an instance-like workload
                    used = rng.randint(1, 6)
                    held_key = ResourceKey(sub, "rg", "sparkOllamaInstances", (key.names[0], "held"))
                    held = Instance(
                        key=held_key,
                        document={"id": f"{node.arm_id}/held", "systemData": {}, "properties": {}},
                        etag='"e"',
                        state=ProvisioningState.SUCCEEDED,
                        devices=used,
                        memory_gb=per_device * used,
                        capacity_reserved=True,
                    )
                    operation = new_operation(
                        ctx,
                        held_key,
                        kind=OperationKind.PROVISION,
                        location="us-east-1",
                        operation_id=str(uuid.uuid4()),
                        resource_id=held.arm_id,
                    )
                    reservation = Reservation.on(node, used, per_device * used, child=1)
                    repos.instances.accept(held, operation, audit(sub, held.arm_id), reservation)
            # one multi-node job first: 2 whole MI300X nodes of 8 GPUs at once (services/common/placement.py, "Gangs")
            gang_key = ResourceKey(sub, "rg", JOBS.segment, ("gang",))
            gang = Job(
                key=gang_key,
                document={
                    "id": JOBS.id(sub, "rg", gang_key.names),
                    "name": "gang",
                    "systemData": {},
                    "properties": {"accelerator": {"kind": "GPU", "count": 8, "nodes": 2, "memoryGb": 8 * 192}},
                },
                etag='"e"',
                state=ProvisioningState.ACCEPTED,
                operation_id=str(uuid.uuid4()),
                devices=8,
                memory_gb=8 * 192,
                gpu_model="mi300x",
                submitted_by="bench",
                submitted_at="2026-01-01T00:00:00.000000Z",
            )
            gang_operation = new_operation(
                ctx, gang_key, kind=OperationKind.JOB, location="global", operation_id=str(gang.operation_id),
                resource_id=gang.arm_id,
            )  # fmt: skip
            repos.jobs.submit(gang, gang_operation, audit(sub, gang.arm_id))
            stored_gang = repos.jobs.get(gang_key)
            assert stored_gang is not None
            with dynamodb_calls() as counted:
                started = time.perf_counter()
                placed_gang = placement.place(ctx, stored_gang)
                gang_ms = (time.perf_counter() - started) * 1000
            assert placed_gang is not None, "two whole MI300X nodes were free"
            gang_calls = counted
            held = repos.jobs.get(gang_key)  # it ends at once: its nodes are the other jobs' again
            assert held is not None and len(held.gang_nodes) == 1
            repos.jobs.update(
                held,
                dataclasses.replace(held, capacity_reserved=False, etag='"e2"'),
                audit(sub, gang.arm_id),
                expect=Expect(),
                effects=Effects(release=Release.of(held), more_releases=gang_releases(held)),
            )
            calls: Counter[str] = Counter()
            ms: list[float] = []
            for j in range(PLACEMENTS):
                devices = rng.choice((1, 1, 2))  # 30 of them fit even the 10-node fleet
                kind, _, model, per_device, wanted = MIXED_FLEET[j % len(MIXED_FLEET)]
                job_key = ResourceKey(sub, "rg", JOBS.segment, (f"job-{j}",))
                job = Job(
                    key=job_key,
                    document={
                        "id": JOBS.id(sub, "rg", job_key.names),
                        "name": job_key.names[0],
                        "systemData": {},
                        "properties": {},
                    },
                    etag='"e"',
                    state=ProvisioningState.ACCEPTED,
                    operation_id=str(uuid.uuid4()),
                    devices=devices,
                    memory_gb=per_device * devices,
                    gpu_model=wanted,
                    kind=kind,
                    submitted_by="bench",
                    submitted_at="2026-01-01T00:00:00.000000Z",
                )
                operation = new_operation(
                    ctx,
                    job_key,
                    kind=OperationKind.JOB,
                    location="global",
                    operation_id=str(job.operation_id),
                    resource_id=job.arm_id,
                )
                repos.jobs.submit(job, operation, audit(sub, job.arm_id))
                stored = repos.jobs.get(job_key)
                assert stored is not None
                with dynamodb_calls() as counted:
                    started = time.perf_counter()
                    placed = placement.place(ctx, stored)
                    ms.append((time.perf_counter() - started) * 1000)
                assert placed is not None, "the fleet had room"
                on = repos.nodes.get(placed.node)
                assert on is not None and on.kind == kind and (kind != "GPU" or on.accelerator.model == model), (
                    f"a {kind} {model} job landed on {on and on.accelerator}"
                )
                calls.update(counted)
            offers = OfferService(repos.nodes, repos.quotas, repos.budgets, Access(repos.audit))
            asker = CallContext(
                Principal(
                    subject="bench",
                    roles=["itl-accelerator-admin"],
                    scopes=[s for s in [ArmScope.parse(f"/subscriptions/{sub}")] if s],
                ),
                "bench",
                "bench",
            )
            with dynamodb_calls() as counted:
                started = time.perf_counter()
                listed = offers.in_location(asker, sub, "us-east-1")
                offer_ms = (time.perf_counter() - started) * 1000
            row = FleetRow(fleet, PLACEMENTS, calls, ms, len(listed), sum(counted.values()), offer_ms)
            row.gang_calls, row.gang_ms = gang_calls, gang_ms

            # preemption: every H100 node that can be filled runs a preemptible priority-1 job of 8 GPUs; then a
            # priority-9 job of 8 H100s waits, and placement preempts for it (services/common/placement.py)
            def h100_job(name: str, priority: int, preemptible: bool, sub: str = sub) -> Any:
                job_key = ResourceKey(sub, "rg", JOBS.segment, (name,))
                job = Job(
                    key=job_key,
                    document={
                        "id": JOBS.id(sub, "rg", job_key.names),
                        "name": name,
                        "systemData": {},
                        "properties": {"preemptible": True} if preemptible else {},
                    },
                    etag='"e"',
                    state=ProvisioningState.ACCEPTED,
                    operation_id=str(uuid.uuid4()),
                    devices=8,
                    memory_gb=640,
                    gpu_model="h100",
                    priority=priority,
                    max_duration_seconds=3600,  # each holds its node until an hour from its placement
                    submitted_by="bench",
                    submitted_at="2026-01-01T00:00:00.000000Z",
                )
                operation = new_operation(
                    ctx, job_key, kind=OperationKind.JOB, location="global", operation_id=str(job.operation_id),
                    resource_id=job.arm_id,
                )  # fmt: skip
                repos.jobs.submit(job, operation, audit(sub, job.arm_id))
                stored = repos.jobs.get(job_key)
                assert stored is not None
                return stored

            filled = 0
            while placement.place(ctx, h100_job(f"low-{filled}", 1, True)) is not None:
                filled += 1
            high = h100_job("high", 9, False)
            assert placement.place(ctx, high) is None, "the H100 nodes are full"
            high = repos.jobs.get(high.key)
            with dynamodb_calls() as counted:
                started = time.perf_counter()
                preempted = placement.preempt_for(ctx, high, placement._budget_view(high))
                row.preempt_ms = (time.perf_counter() - started) * 1000
            assert preempted, "a preemptible job held a node the high job could use"
            row.candidates, row.preempt_calls = filled, counted

            # start estimates: the subscription's queue (the high job and 24 more of 8 H100s or 2 MI300X) estimated
            # by one dispatch's estimate pass (services/common/placement.py estimate_starts, domain/calendar.py)
            queued = [repos.jobs.get(high.key) or high] + [
                h100_job(f"queued-{q}", rng.randint(1, 8), False) for q in range(24)
            ]
            waiting = [(j, placement._budget_view(j)) for j in queued]
            with dynamodb_calls() as counted:
                started = time.perf_counter()
                row.estimated = placement.estimate_starts(waiting)
                row.estimate_ms = (time.perf_counter() - started) * 1000
            row.known = sum(1 for j in queued if (repos.jobs.get(j.key) or j).start_estimate is not None
                            and (repos.jobs.get(j.key) or j).start_estimate.at is not None)  # fmt: skip
            row.estimate_calls = counted
            rows.append(row)
    return rows


# ------------------------------------------------------------------------------------------------ (b) simulation
@dataclass
class SimResult:
    policy: str
    waited: int
    mean_wait: float
    stranded: float
    utilisation: float
    decision_us: float


def simulate(order: str, seed: int = 11) -> SimResult:
    """(b) with ``order`` ``best`` (the service's best-fit key) or ``first`` (lowest node number that fits)."""
    from itl_accelerator.services.common.capacity import Capacity
    from itl_accelerator.services.common.placement import best_fit_key

    rng = random.Random(seed)
    free = [GPUS_PER_NODE] * SIM_NODES
    # nodes by free GPUs: a heap of node numbers per count (stale entries skipped when popped)
    buckets: list[list[int]] = [[] for _ in range(GPUS_PER_NODE + 1)]
    for node in range(SIM_NODES):
        heapq.heappush(buckets[GPUS_PER_NODE], node)
    sizes = (1, 1, 2, 2, 4, 8)
    mean_run = 100.0
    arrival_rate = OFFERED_LOAD * SIM_NODES * GPUS_PER_NODE / (statistics.mean(sizes) * mean_run)
    events: list[tuple[float, int, str, int, int]] = []
    t = 0.0
    jobs = []
    for j in range(SIM_JOBS):
        t += rng.expovariate(arrival_rate)
        jobs.append((rng.choice(sizes), rng.expovariate(1 / mean_run)))
        heapq.heappush(events, (t, j, "arrive", j, -1))
    horizon = t
    waiting: list[tuple[int, float]] = []
    waits: list[float] = []
    stranded: list[int] = []
    decisions: list[float] = []
    busy, last, seq = 0.0, 0.0, SIM_JOBS

    def lowest(count: int) -> int | None:
        heap = buckets[count]
        while heap and free[heap[0]] != count:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def choose(g: int) -> int | None:
        started = time.perf_counter()
        options = [(count, node) for count in range(g, GPUS_PER_NODE + 1) if (node := lowest(count)) is not None]
        if not options:
            chosen = None
        elif order == "first":
            chosen = min(node for _, node in options)
        else:
            chosen = min(
                options, key=lambda o: (best_fit_key(Capacity(GPUS_PER_NODE, GPUS_PER_NODE - o[0]), g, 0), o[1])
            )[1]
        decisions.append(time.perf_counter() - started)
        return chosen

    def move(node: int, delta: int) -> None:
        free[node] += delta
        heapq.heappush(buckets[free[node]], node)

    def start(j: int, node: int, now: float) -> None:
        nonlocal seq
        move(node, -jobs[j][0])
        seq += 1
        heapq.heappush(events, (now + jobs[j][1], seq, "end", j, node))

    while events:
        now, _, kind, j, node = heapq.heappop(events)
        if last < horizon:
            busy += (min(now, horizon) - last) * (SIM_NODES * GPUS_PER_NODE - sum(free))
        last = now
        if kind == "end":
            move(node, jobs[j][0])
            still = []
            for w, since in waiting:  # in order, with backfill
                chosen = choose(jobs[w][0]) if jobs[w][0] <= max(free) else None
                if chosen is None:
                    still.append((w, since))
                else:
                    waits.append(now - since)
                    start(w, chosen, now)
            waiting = still
            continue
        chosen = choose(jobs[j][0])
        if chosen is None:
            waiting.append((j, now))
            stranded.append(sum(f for f in free if 0 < f < GPUS_PER_NODE))
        else:
            waits.append(0.0)
            start(j, chosen, now)
    return SimResult(
        policy="best fit (the service)" if order == "best" else "first fit (baseline)",
        waited=sum(1 for w in waits if w > 0),
        mean_wait=statistics.mean(waits),
        stranded=statistics.mean(stranded) if stranded else 0.0,
        utilisation=busy / (horizon * SIM_NODES * GPUS_PER_NODE),
        decision_us=statistics.median(decisions) * 1e6,
    )


def main() -> int:
    rows = measure_fleets()
    print(
        "(a) Placement on moto: DynamoDB requests and wall time per placement as the fleet grows (a mixed fleet: "
        "H100, MI300X, TPU v5e, 910B NPU nodes in turn; jobs of each in turn, each placed on its own kind)"
    )
    names = sorted({name for r in rows for name in r.calls})
    print(
        _table(
            ["nodes", "placements", *(f"{n} / placement" for n in names), "ms / placement (median)", "p95"],
            [
                [
                    str(r.nodes),
                    str(r.placements),
                    *(f"{r.calls[n] / r.placements:.2f}" for n in names),
                    f"{statistics.median(r.ms):.1f}",
                    f"{sorted(r.ms)[int(len(r.ms) * 0.95)]:.1f}",
                ]
                for r in rows
            ],
            right=set(range(0, 4 + len(names))),
        )
    )
    print()
    print("    and one listing of the location's capacity offers (GET .../locations/{location}/offers) on each fleet:")
    print(
        _table(
            ["nodes", "offers", "DynamoDB requests", "requests / offer", "ms"],
            [
                [
                    str(r.nodes),
                    str(r.offers),
                    str(r.offer_calls),
                    f"{r.offer_calls / max(r.offers, 1):.2f}",
                    f"{r.offer_ms:.0f}",
                ]
                for r in rows
            ],
            right={0, 1, 2, 3, 4},
        )
    )
    print()
    print("    and one multi-node job (2 nodes x 8 MI300X at once, one transaction), placed before the others:")
    gang_kinds = sorted({name for r in rows for name in (r.gang_calls or {})})
    print(
        _table(
            ["nodes", *gang_kinds, "requests", "ms"],
            [
                [
                    str(r.nodes),
                    *(str((r.gang_calls or Counter())[n]) for n in gang_kinds),
                    str(sum((r.gang_calls or Counter()).values())),
                    f"{r.gang_ms:.0f}",
                ]
                for r in rows
            ],
            right=set(range(0, 3 + len(gang_kinds))),
        )
    )
    print()
    print(
        "    and one preemption (a priority-9 job of 8 H100s waits; every H100 node that could be filled runs a "
        "preemptible priority-1 job): DynamoDB requests to choose and stop its victim, whatever the candidates:"
    )
    kinds = sorted({name for r in rows for name in (r.preempt_calls or {})})
    print(
        _table(
            ["nodes", "preemptible running jobs", *kinds, "requests", "ms"],
            [
                [
                    str(r.nodes),
                    str(r.candidates),
                    *(str((r.preempt_calls or Counter())[n]) for n in kinds),
                    str(sum((r.preempt_calls or Counter()).values())),
                    f"{r.preempt_ms:.0f}",
                ]
                for r in rows
            ],
            right=set(range(0, 4 + len(kinds))),
        )
    )
    print()
    print(
        "    and the start estimates of 25 waiting jobs (the queue above, behind the H100 nodes' hour-long jobs):"
        " DynamoDB requests of one estimate pass, whatever the fleet (one Query per distinct demand, one UpdateItem"
        " per estimate that moved)"
    )
    kinds = sorted({n for r in rows for n in (r.estimate_calls or Counter())})
    print(
        _table(
            ["nodes", "waiting jobs", *kinds, "requests", "estimates written", "with a time", "ms"],
            [
                [
                    str(r.nodes),
                    "25",
                    *(str((r.estimate_calls or Counter())[n]) for n in kinds),
                    str(sum((r.estimate_calls or Counter()).values())),
                    str(r.estimated),
                    str(r.known),
                    f"{r.estimate_ms:.0f}",
                ]
                for r in rows
            ],
            right=set(range(0, 6 + len(kinds))),
        )
    )
    print()
    print(
        f"(b) {SIM_JOBS:,} jobs onto {SIM_NODES:,} nodes of {GPUS_PER_NODE} GPUs (simulated time, ~90 % offered load)"
    )
    results = [simulate("best"), simulate("first")]
    print(
        _table(
            [
                "policy",
                "jobs that waited",
                "mean wait (job-lengths/100)",
                "stranded free GPUs while a job waits",
                "GPU utilisation",
                "decision median us",
            ],
            [
                [
                    r.policy,
                    f"{r.waited:,}",
                    f"{r.mean_wait:.2f}",
                    f"{r.stranded:.1f}",
                    f"{r.utilisation:.1%}",
                    f"{r.decision_us:.0f}",
                ]
                for r in results
            ],
            right={1, 2, 3, 4, 5},
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
