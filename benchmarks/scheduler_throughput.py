"""The scheduler's admissions per second in Kueue's published shape — 15,000 workloads over 30 queues (here 30
subscriptions) onto 1,000 nodes, which Kueue's own run admits in ~351 s, about 43 a second — three ways:

(a) **The pure layer.** domain/scheduling.py's decisions (``Snapshot``, ``inadmissible``, ``best_fit``, ``matches``,
    ``within``, ``waiting``) called over an in-memory fleet the way services/common/placement.py calls them: per
    attempt the admission check on the subscription's shapes, best fit over the placement index's page (its nodes
    with room, fewest free first, 25 of them: repositories/dynamodb/nodes.py ``candidates``), the reservation, or why
    it waits. No DynamoDB at all: what the decisions cost.
(b) **The DynamoDB repositories on moto.** The real ``Placement`` doing what the job workflow's Place step does per
    workload (read the job, ``inadmissible``, ``place``), with every DynamoDB request counted by operation at botocore
    (benchmarks/requests_and_cold_start.py ``dynamodb_calls`` wraps the same method), and transaction conflicts,
    conditions that failed and retries counted per admission. moto serializes every request (local/itl_local/aws.py
    ``make_dynamodb_faithful``), so it never answers ``TransactionConflict`` by itself; here a transaction touching an
    item another transaction in flight touches is cancelled as DynamoDB cancels it ("Transaction conflict handling in
    DynamoDB", Amazon DynamoDB Developer Guide, "Amazon DynamoDB Transactions: How it works"), and the concurrent runs
    hold each request for DynamoDB's latency (:data:`LATENCY_MS`, a sleep that lets other threads run) so
    transactions overlap as they would there. moto is slow (tens of ms of CPU a request): (b) runs the shape scaled
    down by fifty, :data:`MOTO_SHAPE` (300 workloads / 6 subscriptions / 20 nodes: 15 workloads a node and 3.3 nodes a
    subscription, as a tenth of Kueue's shape, 1,500 / 30 / 100, has), ``--quick`` by a hundred. One placer, then several placers at once — spread over the subscriptions, or
    all on one subscription's queue.
(c) **A model of (b) at DynamoDB's latencies**: a simulation in time of N concurrent placers, each admission taking
    the requests per admission counted in (b) at :data:`LATENCY_MS`; a transaction sent while another one holds its
    subscription's items (its quota counters, and the node best fit gives every placer of it) is cancelled and sent
    again (:func:`model`). Its conflicts are printed beside those (b) measured, for Kueue's 30 subscriptions.

The work: every subscription owns a thirtieth of the nodes (8 devices each) and a thirtieth of the workloads, asking
for 1, 1, 2, 4 and 8 devices in turn. It is served in rounds, as waiting jobs are when capacity frees: each round
offers every subscription the head of its queue up to :data:`OFFERED_LOAD` of its capacity, in order, with backfill;
a workload that does not fit waits (and is told why) for the next round; at the end of a round the workloads
admitted in it end and give their devices back (Kueue's run, too, finishes its workloads to admit the next). An
admission is one workload placed; every attempt — placed or told to wait — is a decision.

Run from the repository root: ``python -m benchmarks.scheduler_throughput`` (``--quick``: (a) a tenth of Kueue's
shape, (b) half its own; ``./dev bench`` runs it with ``--quick``, about two minutes on a busy 2-core machine).
"""

from __future__ import annotations

import argparse
import dataclasses
import heapq
import json
import os
import random
import sys
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from benchmarks.requests_and_cold_start import _table

#: Kueue's published run: 15,000 workloads over 30 ClusterQueues onto 1,000 nodes, admitted in ~351 s.
KUEUE_PER_SECOND = 15_000 / 351
GPUS_PER_NODE = 8
MEMORY_GB_PER_DEVICE = 80
#: Devices a subscription's workloads ask for, in turn.
SIZES = (1, 1, 2, 4, 8)
#: Per round, each subscription is offered the head of its queue up to this share of its devices.
OFFERED_LOAD = 1.2
#: The placement index's page (repositories/dynamodb/nodes.py ``CANDIDATE_PAGE``).
CANDIDATE_PAGE = 25
#: Assumed DynamoDB latencies (ms, in-region client, items of a few KiB): DynamoDB advertises "single-digit
#: millisecond" reads and writes; a strongly consistent GetItem ~5 ms, a Query of a 25-item page ~8 ms, a
#: TransactWriteItems (two-phase, 4-6 items) ~15 ms. Assumptions, not measurements.
LATENCY_MS = {"GetItem": 5.0, "Query": 8.0, "TransactWriteItems": 15.0, "UpdateItem": 8.0, "PutItem": 8.0}
TABLE = "itl-accelerator-bench-throughput"
GOAL_PURE, GOAL_DYNAMODB, GOAL_CONFLICTS = 2_000, 100, 0.05


@dataclass(frozen=True)
class Shape:
    """``workloads`` over ``subscriptions`` onto ``nodes``."""

    workloads: int
    subscriptions: int
    nodes: int

    def scaled(self, by: int) -> Shape:
        return Shape(self.workloads // by, self.subscriptions, self.nodes // by)

    def __str__(self) -> str:
        return f"{self.workloads:,} workloads / {self.subscriptions} subscriptions / {self.nodes:,} nodes"


KUEUE_SHAPE = Shape(15_000, 30, 1_000)
#: (b)'s shapes on moto (a request costs moto tens of ms of CPU): 15 workloads a node and 3.3 nodes a subscription, as
#: 1,500 / 30 / 100 has, in fewer subscriptions; ``--quick`` halves it.
MOTO_SHAPE, MOTO_QUICK = Shape(300, 6, 20), Shape(150, 3, 10)


# ------------------------------------------------------------------------------------------------ the workload
def subscription(s: int) -> str:
    return f"sub-{s:02d}"


def make_node(sub: str, i: int) -> Any:
    from itl_accelerator.domain.records import Node, ResourceKey
    from itl_accelerator.resources import NODES

    key = ResourceKey(sub, "rg", NODES.segment, (f"n{i:04d}",))
    accelerator = {"kind": "GPU", "vendor": "NVIDIA", "model": "H100", "count": GPUS_PER_NODE}
    return Node(
        key=key,
        document={
            "id": NODES.id(sub, "rg", key.names),
            "name": key.names[0],
            "type": NODES.type_name,
            "location": "us-east-1",
            "properties": {
                "owner": "o",
                "accelerator": {**accelerator, "memoryGbPerDevice": MEMORY_GB_PER_DEVICE},
                "pricing": {"pricePerAcceleratorHour": 2.5},
                "availability": "Available",
            },
            "systemData": {},
        },
        etag='"e"',
        device_total=GPUS_PER_NODE,
        memory_gb_total=GPUS_PER_NODE * MEMORY_GB_PER_DEVICE,
    )


def make_job(sub: str, j: int) -> Any:
    from itl_accelerator.domain.records import Job, ResourceKey
    from itl_accelerator.domain.states import ProvisioningState
    from itl_accelerator.resources import JOBS

    devices = SIZES[j % len(SIZES)]
    key = ResourceKey(sub, "rg", JOBS.segment, (f"w{j:05d}",))
    return Job(
        key=key,
        document={"id": JOBS.id(sub, "rg", key.names), "name": key.names[0], "systemData": {}, "properties": {}},
        etag='"e"',
        state=ProvisioningState.ACCEPTED,
        operation_id=str(uuid.uuid4()),
        devices=devices,
        memory_gb=devices * MEMORY_GB_PER_DEVICE,
        gpu_model="h100",
        submitted_by="bench",
        submitted_at="2026-01-01T00:00:00.000000Z",
    )


def fleet(shape: Shape) -> dict[str, list[Any]]:
    """Each subscription's nodes (node i belongs to subscription i mod S)."""
    nodes: dict[str, list[Any]] = {subscription(s): [] for s in range(shape.subscriptions)}
    for i in range(shape.nodes):
        nodes[subscription(i % shape.subscriptions)].append(make_node(subscription(i % shape.subscriptions), i))
    return nodes


def queues(shape: Shape) -> dict[str, deque[Any]]:
    """Each subscription's waiting workloads, in submission order."""
    found: dict[str, deque[Any]] = {subscription(s): deque() for s in range(shape.subscriptions)}
    for j in range(shape.workloads):
        sub = subscription(j % shape.subscriptions)
        found[sub].append(make_job(sub, j))
    return found


def offered(waiting: dict[str, deque[Any]], capacity: dict[str, int], *, by_subscription: bool) -> list[Any]:
    """One round's attempts: each subscription's queue head up to :data:`OFFERED_LOAD` of its devices, interleaved
    across the subscriptions (the first of each, then the second...) or, ``by_subscription``, one queue after
    another."""
    heads: list[list[Any]] = []
    for sub, queue in waiting.items():
        head, asked = [], 0
        for job in queue:
            if asked >= OFFERED_LOAD * capacity[sub]:
                break
            head.append(job)
            asked += job.devices
        heads.append(head)
    if by_subscription:
        return [job for head in heads for job in head]
    return [head[i] for i in range(max(map(len, heads), default=0)) for head in heads if i < len(head)]


@dataclass
class Run:
    """What serving every queue to the end did: workloads ``submitted``, ``admitted``, still ``waiting`` (none once
    served to the end), ``attempts`` (decisions: placed or told to wait), ``rounds``, the ``seconds`` the attempts
    took; the devices held at the end (the last round's admissions, not released) by node and as the admitted asked."""

    label: str
    submitted: int
    admitted: int = 0
    waiting: int = 0
    attempts: int = 0
    rounds: int = 0
    seconds: float = 0.0
    placers: int = 1
    held_by_node: dict[str, tuple[int, int]] = field(default_factory=dict)
    held_asked: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    conflicts: int = 0
    condition_failures: int = 0
    conflicting: Counter[str] = field(default_factory=Counter)

    @property
    def per_second(self) -> float:
        return self.admitted / self.seconds if self.seconds else 0.0

    @property
    def transactions(self) -> int:
        return self.calls["TransactWriteItems"]

    def per_admission(self, count: float) -> float:
        return count / self.admitted if self.admitted else 0.0

    @property
    def conflict_share(self) -> float:
        return self.conflicts / self.transactions if self.transactions else 0.0


# ------------------------------------------------------------------------------------------------ (a) pure
class InMemoryFleet:
    """The fleet as the scheduler's snapshot sees it, kept in memory: what the placement index answers (a subscription's
    nodes with room, fewest free devices first, one page) and the subscription's shapes; the reservation and the
    release are the repositories' arithmetic on the node."""

    def __init__(self, nodes: dict[str, list[Any]]):
        from itl_accelerator.domain.records import FleetShape

        self.nodes = nodes
        self.shapes: dict[str, tuple[FleetShape, ...]] = {}
        for sub, held in nodes.items():
            counted = Counter(n.shape for n in held)
            self.shapes[sub] = tuple(dataclasses.replace(s, nodes=c, available_nodes=c) for s, c in counted.items())

    def page(self, job: Any) -> tuple[Any, ...]:
        room = [
            n
            for n in self.nodes[job.key.subscription_id]
            if n.free_devices >= job.devices and n.free_memory_gb >= job.memory_gb
        ]
        return tuple(sorted(room, key=lambda n: n.free_devices)[:CANDIDATE_PAGE])


def admit_pure(memory: InMemoryFleet, job: Any) -> Any | None:
    """One attempt, as ``Placement`` makes it (services/common/placement.py ``inadmissible`` then ``place``), over a
    snapshot read whole from ``memory``: the node reserved, or None (it waits, told why)."""
    from itl_accelerator.domain import scheduling
    from itl_accelerator.domain.scheduling import Budgets, ReadCandidates, Snapshot

    sub = job.key.subscription_id
    budgets = Budgets()
    within = scheduling.within(job, budgets.currencies)
    snapshot = Snapshot(
        job,
        budgets=budgets,
        shapes=memory.shapes[sub],
        quotas={"us-east-1": {}},  # none limited (the quota counters still count: they are the repositories')
        candidates={ReadCandidates(within): memory.page(job)},
    )
    if (refused := scheduling.inadmissible(snapshot)) is not None:
        raise AssertionError(scheduling.render(refused))
    for node in scheduling.best_fit(job, snapshot.candidates_for(ReadCandidates(within)))[:5]:
        if scheduling.matches(job, node, within) and node.free_devices >= job.devices:
            node.devices_allocated += job.devices
            node.memory_gb_allocated += job.memory_gb
            return node
    scheduling.render(scheduling.waiting(snapshot))  # told why it waits (services/common/placement.py ``_tell``)
    return None


def measure_pure(shape: Shape) -> Run:
    """(a) over ``shape``."""
    nodes = fleet(shape)
    memory = InMemoryFleet(nodes)
    waiting = queues(shape)
    capacity = {sub: GPUS_PER_NODE * len(held) for sub, held in nodes.items()}
    run = Run("(a) pure decisions (domain/scheduling.py), in memory", shape.workloads)
    running: list[tuple[Any, Any]] = []
    while any(waiting.values()):
        for node, job in running:  # the last round's workloads end
            node.devices_allocated -= job.devices
            node.memory_gb_allocated -= job.memory_gb
        running = []
        attempts = offered(waiting, capacity, by_subscription=False)
        started = time.perf_counter()
        placed = [(admit_pure(memory, job), job) for job in attempts]
        run.seconds += time.perf_counter() - started
        running = [(node, job) for node, job in placed if node is not None]
        for _, job in running:
            waiting[job.key.subscription_id].remove(job)
        run.rounds += 1
        run.attempts += len(attempts)
        run.admitted += len(running)
    run.waiting = sum(map(len, waiting.values()))
    run.held_by_node = {str(n.key): (n.devices_allocated, n.device_total) for held in nodes.values() for n in held}
    run.held_asked = sum(job.devices for _, job in running)
    return run


# ------------------------------------------------------------------------------------------------ (b) on moto
@dataclass
class _Wire:
    """What the botocore wrapper does now: count the requests of threads that ``counting``; hold each request for
    ``latency`` (ms by operation; None: no hold); cancel a transaction that shares an item with one in flight."""

    latency: dict[str, float] | None = None
    calls: Counter[str] = field(default_factory=Counter)
    conflicts: int = 0
    condition_failures: int = 0
    #: the items conflicts were on, by kind (:func:`_kind`)
    conflicting: Counter[str] = field(default_factory=Counter)
    in_flight: Counter[tuple[str, str]] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    local: threading.local = field(default_factory=threading.local)

    def counting(self) -> bool:
        return bool(getattr(self.local, "counting", False))


def _items(params: dict[str, Any]) -> list[tuple[str, str]]:
    """The items a ``TransactWriteItems`` touches (table, key)."""
    found = []
    for entry in params.get("TransactItems", []):
        for op in entry.values():
            key = op.get("Key") or {k: op["Item"][k] for k in ("PK", "SK")}
            found.append((op["TableName"], json.dumps(key, sort_keys=True)))
    return found


def _kind(item: tuple[str, str]) -> str:
    """What an item of :func:`_items` is: a quota counter, a node, a job..."""
    from itl_accelerator.repositories.dynamodb import keys
    from itl_accelerator.resources import JOBS, NODES

    sort_key = json.loads(item[1])["SK"]["S"]
    if sort_key.startswith(f"QUOTA{keys.SEP}"):
        return "quota counter"
    named = {keys.TYPE_CODES[NODES.segment]: "node", keys.TYPE_CODES[JOBS.segment]: "job"}
    return named.get(sort_key.split(keys.SEP)[0], "other")


def _conflict() -> Exception:
    from botocore.exceptions import ClientError

    return ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "Transaction cancelled [TransactionConflict]"},
            "CancellationReasons": [{"Code": "TransactionConflict"}],
        },
        "TransactWriteItems",
    )


@contextmanager
def wired(wire: _Wire) -> Iterator[None]:
    """Wrap ``BaseClient._make_api_call`` (every DynamoDB request of any client) with ``wire``."""
    from unittest import mock

    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

    original = BaseClient._make_api_call

    def call(self: Any, operation: str, params: dict[str, Any]) -> Any:
        if self.meta.service_model.service_name != "dynamodb":
            return original(self, operation, params)
        counted = wire.counting()
        if counted:
            with wire.lock:
                wire.calls[operation] += 1
        if wire.latency is not None and counted:
            time.sleep(wire.latency.get(operation, 5.0) / 1000)
        if operation != "TransactWriteItems":
            return original(self, operation, params)
        items = _items(params)
        with wire.lock:
            if held := [i for i in items if wire.in_flight[i]]:
                if counted:
                    wire.conflicts += 1
                    wire.conflicting.update({_kind(i) for i in held})
                raise _conflict()
            wire.in_flight.update(items)
        try:
            return original(self, operation, params)
        except ClientError as exc:
            reasons = exc.response.get("CancellationReasons") or []
            if counted and any(r.get("Code") == "ConditionalCheckFailed" for r in reasons):
                with wire.lock:
                    wire.condition_failures += 1
            raise
        finally:
            with wire.lock:
                wire.in_flight.subtract(items)

    with mock.patch.object(BaseClient, "_make_api_call", call):
        yield


@contextmanager
def counted(wire: _Wire) -> Iterator[None]:
    wire.local.counting = True
    try:
        yield
    finally:
        wire.local.counting = False


class MotoBench:
    """The table of template.yaml on moto, the real repositories and ``Placement``; each run in subscriptions of its
    own (``prefix``)."""

    def __init__(self) -> None:
        import boto3

        from itl_accelerator.auth.principal import Principal
        from itl_accelerator.repositories.dynamodb import dynamodb_repositories
        from itl_accelerator.services.common.access import Access
        from itl_accelerator.services.common.context import CallContext
        from itl_accelerator.services.common.kernel import ResourceKernel
        from itl_accelerator.services.common.placement import Placement
        from itl_accelerator.settings import Settings
        from itl_accelerator.state_machines import StateMachines
        from itl_local.aws import create_table
        from itl_local.template import Template

        client = boto3.client("dynamodb")
        create_table(client, Template(), TABLE)
        self.repos = dynamodb_repositories(client, TABLE)
        self.placement = Placement(
            ResourceKernel(self.repos, Access(self.repos.audit)), StateMachines(None), Settings()
        )
        self.ctx = CallContext(Principal(subject="bench", roles=["itl-accelerator-admin"]), "bench", "bench")

    def audit(self, sub: str, resource_id: str) -> Any:
        from itl_accelerator.services.common.audit_events import build_event

        return build_event(
            self.ctx,
            subscription_id=sub,
            action="bench",
            resource_id=resource_id,
            resource_type="bench",
            resource_name="bench",
            change_summary="bench",
        )

    def load(self, shape: Shape, prefix: str) -> tuple[dict[str, list[Any]], dict[str, deque[Any]]]:
        """Create the fleet and submit the workloads of ``shape`` under subscriptions named ``prefix``-."""
        from itl_accelerator.domain.states import OperationKind
        from itl_accelerator.services.common.lro import new_operation

        def renamed(record: Any) -> Any:
            key = dataclasses.replace(record.key, subscription_id=f"{prefix}-{record.key.subscription_id}")
            document = {**record.document, "id": record.document["id"].replace("/sub-", f"/{prefix}-sub-", 1)}
            return dataclasses.replace(record, key=key, document=document)

        nodes = {f"{prefix}-{sub}": [renamed(n) for n in held] for sub, held in fleet(shape).items()}
        for sub, held in nodes.items():
            for node in held:
                self.repos.nodes.create(node, self.audit(sub, node.arm_id))
        waiting = {f"{prefix}-{sub}": deque(map(renamed, q)) for sub, q in queues(shape).items()}
        for sub, queue in waiting.items():
            for job in queue:
                operation = new_operation(
                    self.ctx, job.key, kind=OperationKind.JOB, location="global",
                    operation_id=str(job.operation_id), resource_id=job.arm_id,
                )  # fmt: skip
                self.repos.jobs.submit(job, operation, self.audit(sub, job.arm_id))
        return nodes, waiting

    def attempt(self, job: Any) -> bool:
        """What the job workflow's Place step does (services/workflows/job_steps.py ``place``): read the job, admit
        it, place it. True when placed."""
        current = self.repos.jobs.get(job.key)
        assert current is not None
        if (reason := self.placement.inadmissible(current)) is not None:
            raise AssertionError(reason)
        return self.placement.place(self.ctx, current) is not None

    def release(self, job: Any) -> None:
        """The workload ends: its devices (and quota) go back, one transaction (not counted)."""
        from itl_accelerator.domain.records import Release
        from itl_accelerator.repositories.protocols import Effects, Expect

        held = self.repos.jobs.get(job.key)
        assert held is not None and held.capacity_reserved
        ended = dataclasses.replace(held, capacity_reserved=False, etag=f'"{uuid.uuid4().hex}"')
        self.repos.jobs.update(
            held, ended, self.audit(job.key.subscription_id, job.arm_id), expect=Expect(),
            effects=Effects(release=Release.of(held)),
        )  # fmt: skip

    def measure(self, wire: _Wire, shape: Shape, label: str, *, placers: int = 1, by_subscription: bool = False) -> Run:
        """Serve ``shape``'s queues to the end with ``placers`` threads (each attempt: :meth:`attempt`)."""
        prefix = uuid.uuid4().hex[:6]
        nodes, waiting = self.load(shape, prefix)
        capacity = {sub: GPUS_PER_NODE * len(held) for sub, held in nodes.items()}
        run = Run(label, shape.workloads, placers=placers)
        before = (Counter(wire.calls), wire.conflicts, wire.condition_failures, Counter(wire.conflicting))
        running: list[Any] = []
        lock = threading.Lock()

        def serve(work: Iterator[Any], placed: list[Any]) -> None:
            with counted(wire):
                while True:
                    with lock:
                        job = next(work, None)
                    if job is None:
                        return
                    if self.attempt(job):
                        with lock:
                            placed.append(job)

        while any(waiting.values()):
            for job in running:
                self.release(job)
            attempts = offered(waiting, capacity, by_subscription=by_subscription)
            running = []
            work = iter(attempts)
            started = time.perf_counter()
            if placers == 1:
                serve(work, running)
            else:
                with ThreadPoolExecutor(placers) as pool:
                    for done in [pool.submit(serve, work, running) for _ in range(placers)]:
                        done.result()
            run.seconds += time.perf_counter() - started
            for job in running:
                waiting[job.key.subscription_id].remove(job)
            run.rounds += 1
            run.attempts += len(attempts)
            run.admitted += len(running)
        run.waiting = sum(map(len, waiting.values()))
        run.calls = wire.calls - before[0]
        run.conflicts, run.condition_failures = wire.conflicts - before[1], wire.condition_failures - before[2]
        run.conflicting = wire.conflicting - before[3]
        for held in nodes.values():
            for node in held:
                now = self.repos.nodes.get(node.key)
                assert now is not None
                run.held_by_node[str(node.key)] = (now.devices_allocated, now.device_total)
        run.held_asked = sum(job.devices for job in running)
        return run


def measure_moto(shape: Shape, placers: int) -> list[Run]:
    """(b): one placer on ``shape`` at moto's own speed; then ``placers`` at once, with DynamoDB's latencies held,
    spread over the subscriptions and all on one subscription's queue at a time."""
    from moto import mock_aws

    from itl_local.aws import make_dynamodb_faithful

    os.environ.update({"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"})
    os.environ.pop("AWS_ENDPOINT_URL", None)
    make_dynamodb_faithful()
    wire = _Wire()
    runs = []
    with mock_aws(), wired(wire):
        bench = MotoBench()
        runs.append(bench.measure(wire, shape, "(b) moto, 1 placer, moto's own speed"))
        wire.latency = LATENCY_MS
        spread = f"(b) moto, {placers} placers at DynamoDB latency, spread over the subscriptions"
        runs.append(bench.measure(wire, shape, spread, placers=placers))
        hot = f"(b) moto, {placers} placers at DynamoDB latency, on one subscription's queue at a time"
        runs.append(bench.measure(wire, shape, hot, placers=placers, by_subscription=True))
    return runs


# ------------------------------------------------------------------------------------------------ (c) the model
@dataclass(frozen=True)
class Modelled:
    """Admissions a second of ``placers`` concurrent placers at :data:`LATENCY_MS`, and the share of transactions
    that conflict."""

    arrangement: str
    placers: int
    per_second: float
    conflicts: float


def admission_ms(run: Run) -> tuple[float, float, float]:
    """From one placer's counts: ms of reads per admission, transactions per admission, ms per transaction."""
    reads = sum(
        run.per_admission(n) * LATENCY_MS.get(op, 5.0) for op, n in run.calls.items() if op != "TransactWriteItems"
    )
    return reads, run.per_admission(run.transactions), LATENCY_MS["TransactWriteItems"]


#: An arrangement: the subscription placer ``i`` of ``n`` serves next, over ``s`` subscriptions.
Arrangement = Callable[[int, int, int, random.Random], int]


def arrangements() -> dict[str, Arrangement]:
    """Where concurrent placers work: each admission of a subscription at random (the job workflow's Place steps of
    jobs submitted all over); all on one subscription's queue (its jobs submitted at once); one subscription per
    placer, placer i on subscription i mod S (a per-subscription placer: beyond S placers, several share one)."""
    return {
        "at random over the subscriptions": lambda i, n, s, rng: rng.randrange(s),
        "all on one subscription": lambda i, n, s, rng: 0,
        "one subscription per placer (partitioned)": lambda i, n, s, rng: i % s,
    }


def model(
    run: Run, placers: int, arrangement: Arrangement, subscriptions: int, seconds: float = 30.0
) -> tuple[float, float]:
    """Admissions a second and the share of transactions conflicting, for ``placers`` concurrent placers over
    ``subscriptions``: a simulation in time at :data:`LATENCY_MS`. Each admission takes its reads (``run``'s per
    admission, at their latencies), then its transaction(s); a transaction holds its subscription's items (its quota
    counters, and the best-fit node every placer of it picks) for its latency, and one sent while another holds
    them is cancelled (TransactionConflict) after as long and sent again at once (services/common/placement.py
    ``place`` retries a busy store without a pause). Every latency varies uniformly by half either way (a fixed one
    would lock the placers in step, never meeting)."""
    reads, transactions, mean_write = admission_ms(run)
    rng = random.Random(43)

    def write() -> float:
        return mean_write * rng.uniform(0.5, 1.5)

    busy_until = [0.0] * subscriptions
    events = [(rng.uniform(0, reads), i, arrangement(i, placers, subscriptions, rng)) for i in range(placers)]
    heapq.heapify(events)
    admitted = sent = conflicts = 0
    while events:
        at, i, sub = heapq.heappop(events)
        if at > seconds * 1000:
            continue
        sent += 1
        if busy_until[sub] > at:
            conflicts += 1
            heapq.heappush(events, (at + write(), i, sub))
            continue
        held = busy_until[sub] = at + write()
        if rng.random() < transactions - int(transactions):  # a failed condition (a stale index): once more
            heapq.heappush(events, (held, i, sub))
            continue
        admitted += 1
        heapq.heappush(events, (held + reads * rng.uniform(0.5, 1.5), i, arrangement(i, placers, subscriptions, rng)))
    return admitted / seconds, conflicts / sent if sent else 0.0


# ------------------------------------------------------------------------------------------------ report
def check(run: Run) -> None:
    """The counts hold together: every workload admitted or waiting; no node over-committed; the devices held at the
    end are those the last round's admissions asked for."""
    assert run.admitted + run.waiting == run.submitted, run
    assert all(0 <= held <= total for held, total in run.held_by_node.values()), run.label
    assert sum(held for held, _ in run.held_by_node.values()) == run.held_asked, run.label


def figures_table(pure: Run, runs: list[Run], modelled: list[Modelled]) -> str:
    rows = [
        ["Kueue (its published run: 15,000 / 30 queues / 1,000 nodes in ~351 s)", "—", f"{KUEUE_PER_SECOND:.0f}", "—"]
    ]
    rows.append([pure.label, str(pure.placers), f"{pure.per_second:,.0f}", "—"])
    for r in runs:
        rows.append([r.label, str(r.placers), f"{r.per_second:,.0f}", f"{r.conflict_share:.1%}"])
    for m in modelled:
        rows.append(
            [
                f"(c) model at DynamoDB latency, {m.arrangement}",
                str(m.placers),
                f"{m.per_second:,.0f}",
                f"{m.conflicts:.1%}",
            ]
        )
    return _table(["figure", "placers", "admissions / s", "transactions conflicting"], rows, right={1, 2, 3})


def counts_table(runs: list[Run]) -> str:
    ops = sorted({op for r in runs for op in r.calls})
    rows = []
    for r in runs:
        retries = r.transactions - r.admitted
        rows.append(
            [
                r.label.removeprefix("(b) moto, "),
                f"{r.admitted:,}",
                f"{r.waiting:,}",
                f"{r.attempts:,}",
                *(f"{r.per_admission(r.calls[op]):.2f}" for op in ops),
                f"{r.per_admission(sum(r.calls.values())):.2f}",
                f"{r.per_admission(r.conflicts):.3f}",
                f"{r.per_admission(r.condition_failures):.3f}",
                f"{r.per_admission(retries):.3f}",
            ]
        )
    headers = ["run", "admitted", "waiting", "attempts", *ops, "requests", "conflicts", "conditions failed", "retries"]
    return _table(headers, rows, right=set(range(1, len(headers))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scheduler_throughput", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="(a) a tenth of Kueue's shape, (b) half of its own")
    parser.add_argument("--placers", type=int, default=8, help="concurrent placers of (b) (default 8)")
    args = parser.parse_args(argv)
    pure_shape = KUEUE_SHAPE.scaled(10) if args.quick else KUEUE_SHAPE
    moto_shape = MOTO_QUICK if args.quick else MOTO_SHAPE
    started = time.perf_counter()
    pure = measure_pure(pure_shape)
    runs = measure_moto(moto_shape, args.placers)
    print(f"(b) done: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    for r in (pure, *runs):
        check(r)
    modelled = [
        Modelled(name, n, *model(runs[0], n, arrangement, KUEUE_SHAPE.subscriptions))
        for name, arrangement in arrangements().items()
        for n in (1, 8, 16, 30, 64)
        if n != 1 or name.startswith("at random")
    ]
    print(
        f"Scheduler throughput in Kueue's shape: (a) {pure_shape}; (b) {moto_shape} (moto is slow: a fiftieth or less, 15 workloads a node and 3.3 nodes a subscription kept)"
    )
    print(figures_table(pure, runs, modelled))
    print()
    print(f"(b) DynamoDB requests, conflicts and retries per admission ({args.placers} placers where said):")
    print(counts_table(runs))
    for r in runs[1:]:
        on = ", ".join(f"{kind} {n / max(r.conflicts, 1):.0%}" for kind, n in r.conflicting.most_common())
        print(f"    conflicts of '{r.label.removeprefix('(b) moto, ')}' were on: {on or 'none'}")
    reads, transactions, write = admission_ms(runs[0])
    each = arrangements()
    in_moto = moto_shape.subscriptions
    spread_model = model(runs[0], args.placers, each["one subscription per placer (partitioned)"], in_moto)[1]
    hot_model = model(runs[0], args.placers, each["all on one subscription"], in_moto)[1]
    print()
    print(
        f"(c) assumed latencies (ms): {', '.join(f'{op} {ms:g}' for op, ms in LATENCY_MS.items())}; one admission = "
        f"{reads:.0f} ms of reads + {transactions:.2f} transactions x {write:g} ms = {reads + transactions * write:.0f} ms "
        f"for one placer. Conflicts measured in (b) at {args.placers} placers: spread {runs[1].conflict_share:.1%} "
        f"(model over {moto_shape.subscriptions} subscriptions {spread_model:.1%}), "
        f"one subscription {runs[2].conflict_share:.1%} "
        f"(model {hot_model:.1%}). The model's rows are for Kueue's {KUEUE_SHAPE.subscriptions} subscriptions."
    )
    best = max((m for m in modelled if m.conflicts < GOAL_CONFLICTS), key=lambda m: m.per_second)
    print(
        f"Goals: pure >= {GOAL_PURE:,}/s: {pure.per_second:,.0f}/s ({'met' if pure.per_second >= GOAL_PURE else 'NOT met'}); "
        f">= {GOAL_DYNAMODB}/s at DynamoDB latency with < {GOAL_CONFLICTS:.0%} conflicting: best modelled "
        f"{best.per_second:,.0f}/s at {best.conflicts:.1%} ({best.placers} placers, {best.arrangement}: "
        f"{'met' if best.per_second >= GOAL_DYNAMODB else 'NOT met'})."
    )
    print(SATURATION)
    print(f"({time.perf_counter() - started:.0f} s)")
    return 0


SATURATION = """
Where it saturates: the decisions are not it (a). Every placement of a subscription writes the same items: its
quota counters (domain/quotas.py: the kind's and the model's in the location, written even when no limit is set)
and — because best fit and the placement index (fewest free devices first) give every concurrent placer the same
first candidate — the same fullest node. DynamoDB cancels a transaction touching an item another transaction holds
(TransactionConflict), so placers on one subscription serialize on those items: at most one placement per
transaction latency, ~1,000/15 = ~67 a second per subscription however many placers. Placement.place retries a
busy store at once, three times on the same node and then the next of 5 candidates (no back-off, no re-read), so a
conflict costs a transaction and often conflicts again; after 15 it leaves the job waiting. Placers on different
subscriptions share no item (nodes, quota counters and the placement index are per subscription): the throughput
grows with the placers, bounded by a subscription's audit partition (~1,000 WCU/s, ~125-250 audited changes a
second: docs/ARCHITECTURE.md) and, at random, by the placers that meet on one subscription.
What would lift it: placers partitioned by subscription (one at a time per subscription — a per-subscription
dispatcher; Kueue admits from one scheduling loop: no item shared, no conflict); a back-off with jitter before
a retry. For several placers on one subscription, both hot items must go: quota counters written only when a limit
is set (or sharded), and then the node — concurrent placers spread over the top-k fits (a random pick among the k
best, not always the first). Spreading over the top-k alone does nothing while the quota counters are shared.
"""


if __name__ == "__main__":
    raise SystemExit(main())
