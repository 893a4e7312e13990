"""Small fleets for the pure scheduling layer's tests (domain/scheduling.py): nodes, jobs and snapshots built in
memory — no repository, no clock. Every value overridable; defaults are an 8-GPU H100 node in eastus at 2.5 USD."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from decimal import Decimal
from typing import Any, TypeVar

from itl_accelerator.billing.metering import MAX_MINIMUM_BILLABLE_SECONDS, BillingTerms
from itl_accelerator.domain.pricing import ANY_INCREMENT, CeilingBasis, PriceCeiling
from itl_accelerator.domain.pricing import within as within_terms
from itl_accelerator.domain.quotas import QuotaUsage
from itl_accelerator.domain.records import FleetShape, Job, Node
from itl_accelerator.domain.runs import JobRun
from itl_accelerator.domain.scheduling import Budgets, ReadCandidates, Snapshot, Unread, Within
from itl_accelerator.domain.states import JobStatus
from tests.contract.builders import make_job, make_node

T = TypeVar("T")
SUB = "sub-a"
OTHER_SUB = "sub-b"


def node(
    name: str,
    *,
    sub: str = SUB,
    devices: int = 8,
    memory_gb: int = 640,
    used: int = 0,
    used_memory_gb: int | None = None,
    model: str = "H100",
    location: str = "eastus",
    price: str = "2.5",
    currency: str = "USD",
    availability: str = "Available",
    slurm: tuple[str, str] | None = None,
) -> Node:
    """A node with ``used`` of its ``devices`` devices held (and that share of its memory unless said); ``slurm``: the
    (cluster, partition) it runs work in, else the DGX Platform."""
    made = make_node(
        sub,
        name,
        devices=devices,
        memory_gb=memory_gb,
        model=model,
        location=location,
        availability=availability,
        pricing={"currency": currency, "pricePerGpuHour": float(Decimal(price))},
    )
    if slurm is not None:
        made.document["properties"]["backend"] = {"type": "Slurm", "cluster": slurm[0], "partition": slurm[1]}
    held_memory = used * memory_gb // devices if used_memory_gb is None else used_memory_gb
    return replace(made, devices_allocated=used, memory_gb_allocated=held_memory)


def job(
    name: str = "waiting",
    *,
    sub: str = SUB,
    devices: int = 2,
    memory_gb: int | None = None,
    priority: int = 5,
    status: JobStatus = JobStatus.PENDING,
    gang: int = 1,
    model: str = "",
    location: str = "",
    preemptible: bool = False,
    on: Node | None = None,
    submitted_at: str = "2024-05-01T00:00:00.000000Z",
    ceiling: PriceCeiling | None = None,
    **fields: Any,
) -> Job:
    """A job of ``devices`` H100-sized devices (80 GiB each unless ``memory_gb``); ``on``: the node it holds devices of
    (it is then ``Scheduled`` unless ``status`` says otherwise); ``gang``: its ``accelerator.nodes``."""
    if on is not None and status == JobStatus.PENDING:
        status = JobStatus.SCHEDULED
    made = make_job(
        sub,
        name,
        devices=devices,
        memory_gb=80 * devices if memory_gb is None else memory_gb,
        priority=priority,
        status=status,
        submitted_at=submitted_at,
        gpu_model=model,
        location=location,
        capacity_reserved=on is not None,
        node=on.key if on is not None else None,
        **fields,
    )
    properties = made.document["properties"]
    if gang > 1:
        properties["accelerator"] = {"kind": "GPU", "count": devices, "nodes": gang}
    if preemptible:
        properties["preemptible"] = True
    if ceiling is not None:
        properties["priceCeiling"] = ceiling.as_properties()
    return replace(made, run=JobRun.of_properties(properties))  # its run as read from the document so made


def ceiling(*prices: str, currency: str = "USD") -> PriceCeiling:
    """A price ceiling fixed at submission admitting ``prices`` (none: it admits nothing)."""
    terms = tuple(BillingTerms(Decimal(p), currency, ANY_INCREMENT, MAX_MINIMUM_BILLABLE_SECONDS) for p in prices)
    return PriceCeiling(CeilingBasis.PRICES_AT_SUBMISSION, terms, "2024-05-01T00:00:00Z")


def shapes(nodes: Iterable[Node]) -> tuple[FleetShape, ...]:
    """The fleet shapes ``nodes`` count in (one per hardware, place and pricing, with its number of nodes)."""
    counted: dict[str, FleetShape] = {}
    for each in nodes:
        shape = each.shape
        seen = counted.get(shape.sort_key)
        counted[shape.sort_key] = replace(shape, nodes=seen.nodes + 1) if seen else shape
    return tuple(counted.values())


def quota(name: str, limit: int, current: int = 0, *, location: str = "eastus", sub: str = SUB) -> QuotaUsage:
    return QuotaUsage(sub, location, name, current, limit)


def snapshot(
    of: Job,
    fleet: Iterable[Node] = (),
    *,
    budgets: Budgets | None = None,
    quotas: Iterable[QuotaUsage] = (),
    preemptible: Iterable[Job] | None = None,
) -> Snapshot:
    """What placement would have read for ``of`` but the placement index's candidates (:func:`decide` answers those):
    the fleet's shapes, every node by key, the ``quotas`` of every location of the fleet (and eastus), the budgets
    (default: none refusing, any currency), the preemption candidates when given."""
    fleet = tuple(fleet)
    made = Snapshot(
        of,
        budgets=budgets or Budgets(),
        shapes=shapes(fleet),
        nodes={n.key: n for n in fleet},
        preemptible=None if preemptible is None else tuple(preemptible),
    )
    quotas = tuple(quotas)
    for location in {"eastus", *(n.shape.location for n in fleet)}:
        made = made.with_quotas(location, [q for q in quotas if q.location == location])
    return made


def index_answer(job: Job, fleet: Iterable[Node], within: Within) -> list[Node]:
    """What the placement index answers for ``job`` (repositories/dynamodb/nodes.py ``candidates``): the nodes of
    ``fleet`` with room for a part of it, billing within ``within`` (None: any terms)."""
    return [
        n
        for n in fleet
        if n.free_devices >= job.devices
        and n.free_memory_gb >= job.memory_gb
        and (within is None or within_terms(n.terms, within))
    ]


def decide(decision: Callable[[Snapshot], T], snap: Snapshot, fleet: Iterable[Node] = ()) -> T:
    """``decision`` over ``snap``, its candidates read as the placement index answers them (services/common/
    placement.py): the nodes of ``fleet`` with room for a part of the job, billing within the read's terms."""
    fleet = tuple(fleet)
    job = snap.job
    while True:
        try:
            return decision(snap)
        except Unread as unread:
            read = unread.part
            if not isinstance(read, ReadCandidates):
                raise
            room = index_answer(job, fleet, read.within)
            snap = snap.with_candidates(read, room)
