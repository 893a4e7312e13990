"""The scheduler's decisions, pure: admission, best fit (one node, a gang), why a workload waits, and preemption
targets — over a :class:`Snapshot` of what placement read. services/common/placement.py ``Placement`` reads the
snapshot, asks these functions, and writes what they decided (Kueue's split: ``GetTargets`` decides,
``IssuePreemptions`` acts). The rules are the module docstring of services/common/placement.py and
domain/preemption.py; each function below names the one it decides.

**A snapshot read as needed.** A decision reads only what its rules reach (the quotas of the locations it looks at,
the fleet's shapes only when no node has room...), so each part of the snapshot is read when first needed: a
decision that reaches a part not read yet raises :class:`Unread` naming it (a ``Read*`` value), the service reads
exactly that (the same request as always) into the snapshot and asks again. A decision is a function of the snapshot
alone, and the requests per placement stay what they were (benchmarks/placement.py).

**Typed reasons, rendered once.** A decision says why in a small dataclass (:data:`Inadmissible`,
:data:`WaitingReason`); :func:`render` alone turns one into the words users read (a job's ``statusReason``), and
:func:`gist` says what it names without parsing them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from enum import StrEnum
from typing import ClassVar

from itl_accelerator.arm import normalize_location
from itl_accelerator.billing.metering import MAX_MINIMUM_BILLABLE_SECONDS, MAX_PRICE_PER_GPU_HOUR, BillingTerms, iso
from itl_accelerator.domain import preemption
from itl_accelerator.domain.accelerators import model_key, model_of_key, vendor_key
from itl_accelerator.domain.pricing import ANY_INCREMENT, CeilingBasis, PriceCeiling, describe_terms
from itl_accelerator.domain.pricing import within as within_terms
from itl_accelerator.domain.quotas import QuotaUsage, quota_names
from itl_accelerator.domain.records import (
    GANG_CANDIDATE_PAGES,
    Booking,
    FleetShape,
    Job,
    Node,
    ResourceKey,
    per_device_memory_fits,
)
from itl_accelerator.domain.reservations import CapacityReservation
from itl_accelerator.domain.states import Availability, JobStatus

#: The terms a node must bill within: a job's price ceiling in its budgets' currencies (None: any terms).
Within = tuple[BillingTerms, ...] | None


# ----------------------------------------------------------------------------------------------- the snapshot
@dataclass(frozen=True)
class Budgets:
    """What the budgets covering a workload say now (services/common/budgets.py ``BudgetView``): the refusal of a spent
    one (its message, and the budget's name; None: none refuses), the currencies they let it be billed in (None: any)
    and their names, in order."""

    refusal: str | None = None
    refused_by: str = ""
    currencies: frozenset[str] | None = None
    names: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReadBudgets:
    """The budgets covering the workload (one ``Query`` of the subscription's)."""


@dataclass(frozen=True)
class ReadShapes:
    """The subscription's fleet shapes (one ``Query``)."""


@dataclass(frozen=True)
class ReadQuotas:
    """The subscription's limited quotas in ``location`` (one ``Query``)."""

    location: str


@dataclass(frozen=True)
class ReadCandidates:
    """The placement index's candidates for the workload's demand, billing ``within`` (the index's filter), over
    ``pages`` pages (None: the repository's one)."""

    within: Within = None
    pages: int | None = None


@dataclass(frozen=True)
class ReadNode:
    """One node as it is now (one ``GetItem``)."""

    key: ResourceKey


@dataclass(frozen=True)
class ReadPreemptible:
    """The subscription's preemption candidates of the workload's kind below its priority (one ``Query`` of at most
    ``domain/preemption.py`` ``MAX_CANDIDATES``)."""


@dataclass(frozen=True)
class ReadReservation:
    """The capacity reservation the job runs in (one ``GetItem``; then its nodes, one ``GetItem`` each, at most
    ``MAX_GANG_NODES``)."""


@dataclass(frozen=True)
class ReservationSeen:
    """The job's capacity reservation as read: ``found`` (None: gone — cancelled, or never booked); ``known`` False
    when no reservation store could be asked (its nodes are then the candidates holding its booking)."""

    found: CapacityReservation | None
    known: bool = True


Read = ReadBudgets | ReadShapes | ReadQuotas | ReadCandidates | ReadNode | ReadPreemptible | ReadReservation


class Unread(Exception):
    """A decision reached a part of the snapshot not read yet: ``part`` says which."""

    def __init__(self, part: Read):
        super().__init__(part)
        self.part = part


@dataclass(frozen=True)
class Snapshot:
    """What placement knows of the world when deciding for ``job`` (a workload, as read): the parts read so far. A
    part missing is read on demand (:class:`Unread`); the ``with_*`` methods return the snapshot with one part
    more. Quotas are the limited ones (``limit`` set) by location, then by name."""

    job: Job
    budgets: Budgets | None = None
    shapes: tuple[FleetShape, ...] | None = None
    quotas: Mapping[str, Mapping[str, QuotaUsage]] = field(default_factory=dict)
    candidates: Mapping[ReadCandidates, tuple[Node, ...]] = field(default_factory=dict)
    nodes: Mapping[ResourceKey, Node | None] = field(default_factory=dict)
    preemptible: tuple[Job, ...] | None = None
    #: the capacity reservation the job runs in, as read (None: not read yet)
    reservation: ReservationSeen | None = None
    #: when the decision is made (epoch seconds): bookings count from then on (:func:`room`)
    now: float = 0.0

    def budgets_seen(self) -> Budgets:
        if self.budgets is None:
            raise Unread(ReadBudgets())
        return self.budgets

    def fleet_shapes(self) -> tuple[FleetShape, ...]:
        if self.shapes is None:
            raise Unread(ReadShapes())
        return self.shapes

    def quotas_in(self, location: str) -> Mapping[str, QuotaUsage]:
        if location not in self.quotas:
            raise Unread(ReadQuotas(location))
        return self.quotas[location]

    def candidates_for(self, read: ReadCandidates) -> tuple[Node, ...]:
        if read not in self.candidates:
            raise Unread(read)
        return self.candidates[read]

    def node(self, key: ResourceKey) -> Node | None:
        if key not in self.nodes:
            raise Unread(ReadNode(key))
        return self.nodes[key]

    def preemption_candidates(self) -> tuple[Job, ...]:
        if self.preemptible is None:
            raise Unread(ReadPreemptible())
        return self.preemptible

    def reservation_seen(self) -> ReservationSeen:
        if self.reservation is None:
            raise Unread(ReadReservation())
        return self.reservation

    def with_quotas(self, location: str, limited: Iterable[QuotaUsage]) -> Snapshot:
        return replace(self, quotas={**self.quotas, location: {u.name: u for u in limited if u.limit is not None}})

    def with_candidates(self, read: ReadCandidates, nodes: Iterable[Node]) -> Snapshot:
        return replace(self, candidates={**self.candidates, read: tuple(nodes)})

    def with_node(self, key: ResourceKey, node: Node | None) -> Snapshot:
        return replace(self, nodes={**self.nodes, key: node})


# ----------------------------------------------------------------------------------------------- the reasons
class Wait(StrEnum):
    """What a waiting workload waits for: the heading of its reason, the kind :func:`gist` compares."""

    BUDGET = "Waiting for budget"
    QUOTA = "Waiting for quota"
    CAPACITY = "Waiting for capacity"
    PRICE = "Waiting for a node within its price ceiling"
    WINDOW = "Waiting for the window of its capacity reservation"
    RESERVATION = "Waiting for room in its capacity reservation"


@dataclass(frozen=True)
class QuotaSeen:
    """A limited quota as a reason quotes it: its name, location, limit and devices in use (domain/quotas.py)."""

    name: str
    location: str
    limit: int
    current: int

    @classmethod
    def of(cls, usage: QuotaUsage) -> QuotaSeen:
        return cls(usage.name, usage.location, usage.limit or 0, usage.current)


@dataclass(frozen=True)
class Wanted:
    """What a job asks that no node of the subscription has: its ``kind`` and ``model`` ("" any), its ``vendor`` when
    none of its kind and vendor exists at all (``unheld``), and its ``location`` ("" any)."""

    kind: str
    model: str = ""
    vendor: str | None = None
    unheld: bool = False
    location: str = ""


@dataclass(frozen=True)
class NoNodes:
    """Inadmissible: the subscription has no node."""


@dataclass(frozen=True)
class NoSuchNodes:
    """Inadmissible: no node has the accelerator or location ``wanted``."""

    wanted: Wanted


@dataclass(frozen=True)
class TooLarge:
    """Inadmissible: the largest matching node (``largest_devices`` devices, ``largest_memory_gb`` GiB) is too small."""

    devices: int
    memory_gb: int
    wanted: Wanted
    largest_devices: int
    largest_memory_gb: int


@dataclass(frozen=True)
class GangTooWide:
    """Inadmissible: at most ``most`` nodes of one model, location and price could hold a part of the gang."""

    kind: str
    gang_size: int
    devices: int
    memory_gb: int
    most: int


@dataclass(frozen=True)
class BeyondQuota:
    """Inadmissible: on every shape that could hold the job, a quota's limit is below the ``total`` devices it asks
    (each quota said once, in the order met)."""

    kind: str
    total: int
    quotas: tuple[QuotaSeen, ...]


@dataclass(frozen=True)
class PricedNowhere:
    """Inadmissible: its price ceiling, fixed at submission (``fixed_at``), admits no terms; ``budgets``: what the
    budgets covering it let it be billed in, said when they narrowed it."""

    fixed_at: str
    budgets: Budgets


@dataclass(frozen=True)
class BudgetSpent:
    """Waiting: the budget ``budget`` covering it is spent; ``message``: the refusal's words (409 BudgetExceeded)."""

    wait: ClassVar[Wait] = Wait.BUDGET
    budget: str
    message: str


@dataclass(frozen=True)
class QuotaFull:
    """Waiting: ``quota`` has less headroom than the ``gang_size`` x ``devices`` devices of ``kind`` the job needs."""

    wait: ClassVar[Wait] = Wait.QUOTA
    kind: str
    quota: QuotaSeen
    devices: int
    gang_size: int = 1


@dataclass(frozen=True)
class NoRoom:
    """Waiting: no node has room for a job of one node now (``vendor``: who must make its devices, None any)."""

    wait: ClassVar[Wait] = Wait.CAPACITY
    kind: str
    devices: int
    memory_gb: int
    vendor: str | None = None


@dataclass(frozen=True)
class GangNoRoom:
    """Waiting: fewer than ``gang_size`` nodes of one model, location, price and platform have room for a part."""

    wait: ClassVar[Wait] = Wait.CAPACITY
    kind: str
    gang_size: int
    devices: int
    memory_gb: int


@dataclass(frozen=True)
class PricedOut:
    """Waiting: only ``nodes`` nodes above its ``ceiling`` (or in a currency its ``budgets`` do not count, when
    ``currency_refused``) have room; ``lowest``: the lowest terms among them."""

    wait: ClassVar[Wait] = Wait.PRICE
    kind: str
    nodes: int
    lowest: BillingTerms
    ceiling: PriceCeiling | None
    budgets: Budgets
    currency_refused: bool


@dataclass(frozen=True)
class RunsIntoBooking:
    """Waiting: nodes have ``devices`` free now, but a capacity reservation booked them from ``starts`` (epoch
    seconds, the earliest such window) and the job, ending by its maximum duration (``max_minutes``; 0: none), would
    run into it (:func:`room`)."""

    wait: ClassVar[Wait] = Wait.CAPACITY
    kind: str
    devices: int
    starts: int
    max_minutes: int


@dataclass(frozen=True)
class BeforeWindow:
    """Waiting: the window of the capacity reservation ``reservation`` (its name) it runs in opens at ``starts``
    (epoch seconds)."""

    wait: ClassVar[Wait] = Wait.WINDOW
    reservation: str
    starts: int


@dataclass(frozen=True)
class ReservationFull:
    """Waiting: the reservation ``reservation`` books ``devices`` devices of ``kind`` per node, and its other jobs
    hold too many of them now for this one — or (``squatted``) preemptible work holds them until it stops."""

    wait: ClassVar[Wait] = Wait.RESERVATION
    kind: str
    reservation: str
    devices: int
    #: its booking has room, but preemptible work holds the node's devices until it stops (:func:`squats`)
    squatted: bool = False


@dataclass(frozen=True)
class ReservationGone:
    """Inadmissible: the capacity reservation ``reservation`` (its name) it names does not exist (cancelled, or never
    booked)."""

    reservation: str


@dataclass(frozen=True)
class WindowOver:
    """Inadmissible: the window of its capacity reservation ``reservation`` ended at ``ended`` (epoch seconds)."""

    reservation: str
    ended: int


@dataclass(frozen=True)
class OutsideReservation:
    """Inadmissible: the job asks for more than its capacity reservation ``reservation`` books (``why``: in words,
    :func:`reservation_misfit`)."""

    reservation: str
    why: str


Inadmissible = (
    NoNodes
    | NoSuchNodes
    | TooLarge
    | GangTooWide
    | BeyondQuota
    | PricedNowhere
    | ReservationGone
    | WindowOver
    | OutsideReservation
)
WaitingReason = (
    BudgetSpent | QuotaFull | NoRoom | GangNoRoom | PricedOut | RunsIntoBooking | BeforeWindow | ReservationFull
)
Reason = Inadmissible | WaitingReason


# ----------------------------------------------------------------------------------------------- in words, once
def render(reason: Reason) -> str:
    """``reason`` in the words users read (a job's ``statusReason``, a failed job's error): the one place they are
    made."""
    match reason:
        case NoNodes():
            return "The subscription has no nodes."
        case NoSuchNodes(wanted=wanted):
            return f"No node of the subscription has {_wanted(wanted)}."
        case TooLarge():
            return _too_large(reason)
        case GangTooWide(kind=kind, gang_size=size, devices=devices, memory_gb=memory, most=most):
            return (
                f"The job asks for {size} nodes with {devices} {kind}s and {memory} GiB each, of "
                f"one model, in one location, at one price; the subscription has at most {most} such nodes."
            )
        case BeyondQuota(kind=kind, total=total, quotas=quotas):
            said = "; ".join(f"the {kind} quota '{q.name}' in '{q.location}' allows {q.limit}" for q in quotas)
            return f"The job asks for {total} {kind}s; {said}."
        case PricedNowhere():
            return _priced_nowhere(reason)
        case ReservationGone(reservation=name):
            return f"The capacity reservation '{name}' the job names does not exist (cancelled, or never booked)."
        case WindowOver(reservation=name, ended=ended):
            return f"The window of its capacity reservation '{name}' ended at {utc(ended)}."
        case OutsideReservation(reservation=name, why=why):
            return f"The job asks for more than its capacity reservation '{name}' books: {why}."
        case _:
            return _waiting(reason)


def utc(epoch: float) -> str:
    """``epoch`` (seconds) as reasons say a time: billing/metering.py ``iso``'s UTC ISO 8601 to the second
    (``2026-12-10T09:00:00Z``), from a whole or fractional second."""
    return iso(int(epoch))


def _waiting(reason: WaitingReason) -> str:
    """A waiting reason in words (:func:`render`)."""
    match reason:
        case BudgetSpent(message=message):
            return f"{reason.wait}: {message}"
        case QuotaFull(kind=kind, quota=q, devices=devices, gang_size=size):
            needs = f"{devices * size} ({size} nodes of {devices})" if size > 1 else str(devices)
            return (
                f"{reason.wait}: the {kind} quota '{q.name}' of the subscription in '{q.location}' allows "
                f"{q.limit} {kind}s and {q.current} are in use; the job needs {needs}."
            )
        case NoRoom(kind=kind, devices=devices, memory_gb=memory, vendor=vendor):
            made = f"{vendor} " if vendor else ""  # a job of one vendor's devices: say whose (not AMD's)
            return (
                f"{reason.wait}: no node of the subscription has {devices} free {made}{kind}s and "
                f"{memory} GiB of {kind} memory now."
            )
        case GangNoRoom(kind=kind, gang_size=size, devices=devices, memory_gb=memory):
            return (
                f"{reason.wait}: the job needs {size} nodes with {devices} free {kind}s and "
                f"{memory} GiB of {kind} memory each, of one model, in one location, at one price, at "
                "once; fewer have room now."
            )
        case PricedOut():
            return _priced_out(reason)
        case _:
            return _reservation_waiting_words(reason)


def _reservation_waiting_words(reason: RunsIntoBooking | BeforeWindow | ReservationFull) -> str:
    """A waiting reason of capacity reservations in words (:func:`_waiting`): another's window in the way (not named:
    it may be another consumer's), or its own reservation's window not open yet or full."""
    match reason:
        case RunsIntoBooking(kind=kind, devices=devices, starts=starts, max_minutes=minutes):
            ending = f"with its maximum duration of {minutes} minutes" if minutes else "without a maximum duration"
            return (
                f"{reason.wait}: the nodes with {devices} free {kind}s now are booked by a capacity reservation from "
                f"{utc(starts)}, and the job, {ending}, would run into that window."
            )
        case BeforeWindow(reservation=name, starts=starts):
            return f"{reason.wait}: '{name}' opens at {utc(starts)}."
        case ReservationFull(kind=kind, reservation=name, devices=devices, squatted=True):
            return (
                f"{reason.wait}: '{name}' books {devices} {kind}s per node; preemptible work holds them until it stops."
            )
        case ReservationFull(kind=kind, reservation=name, devices=devices):
            return (
                f"{reason.wait}: '{name}' books {devices} {kind}s per node and its other jobs hold too many of them "
                "now."
            )


def gist(reason: WaitingReason) -> tuple[str, str]:
    """What ``reason`` says without its figures: what it waits for, and the name it quotes first ("" none): a
    budget's, a quota's. Two reasons of one gist are the same news (a waiting job is not told again for figures
    alone: services/common/placement.py ``Placement._tell``)."""
    match reason:
        case BudgetSpent(budget=name):
            return reason.wait, name
        case QuotaFull(quota=quota):
            return reason.wait, quota.name
        case PricedOut(budgets=budgets, currency_refused=True) if budgets.names:
            return reason.wait, budgets.names[0]
        case BeforeWindow(reservation=name) | ReservationFull(reservation=name):
            return reason.wait, name
        case _:
            return reason.wait, ""


def _wanted(wanted: Wanted) -> str:
    """What no node has, in words (``GPU model 'h100' and location 'eastus'``, ``AMD GPUs``)."""
    if wanted.model:
        held = f"{wanted.kind} model '{wanted.model}'"
    elif wanted.unheld:
        held = f"{wanted.vendor} {wanted.kind}s" if wanted.vendor else f"{wanted.kind}s"
    else:
        held = ""
    return " and ".join(part for part in (held, f"location '{wanted.location}'" if wanted.location else "") if part)


def _too_large(reason: TooLarge) -> str:
    kind, wanted = reason.wanted.kind, _wanted(reason.wanted)
    return (
        f"The job asks for {reason.devices} {kind}s and {reason.memory_gb} GiB of {kind} memory; the largest node"
        f"{' with ' + wanted if wanted else ''} has {reason.largest_devices} {kind}s and "
        f"{reason.largest_memory_gb} GiB."
    )


def _budget_words(budgets: Budgets) -> str:
    """What the budgets covering a job allow, in words (``the budget 'b' covering it counts USD only``); "" when they
    allow every currency."""
    if budgets.currencies is None:
        return ""
    counted = ", ".join(sorted(budgets.currencies)) or "no single currency"
    names = ", ".join(f"'{name}'" for name in budgets.names)
    return f"the budget {names} covering it counts {counted} only"


def _priced_nowhere(reason: PricedNowhere) -> str:
    counted = _budget_words(reason.budgets)
    return (
        "No node that could hold the job was in the submitter's resource groups"
        + (f" and billing in a currency its budget counts ({counted})" if counted else "")
        + f" when it was submitted ({reason.fixed_at}), so its price ceiling admits no price. Submit it again "
        "with properties.maxPrice to let it run on any node of the subscription billing within that price."
    )


def _priced_out(reason: PricedOut) -> str:
    """How many nodes with room bill above the ceiling, the lowest terms among them (no node named: it may lie outside
    the submitter's scope), and the ceiling (and the budget, when it refused the currency)."""
    ceiling = reason.ceiling
    why = f"the job's price ceiling is {ceiling.describe(reason.kind)}" if ceiling is not None else ""
    if reason.currency_refused:
        why = _budget_words(reason.budgets) + (f", and {why}" if why else "")
    many = reason.nodes != 1
    nodes = f"{reason.nodes} node{'s' if many else ''} with room now bill{'' if many else 's'}"
    lowest = describe_terms(reason.lowest, reason.kind)
    return f"{reason.wait}: {nodes} above it (the lowest: {lowest}); {why}."


# ----------------------------------------------------------------------------------------------- fits
def fit_key(free_devices: int, free_memory_gb: int, devices: int, memory_gb: int) -> tuple[int, int]:
    """The order of best fit, written once: the node left with the fewest free devices after placing ``devices``, then
    the least free memory (GiB) after ``memory_gb``; lowest first."""
    return free_devices - devices, free_memory_gb - memory_gb


def best_fit(job: Job, nodes: Iterable[Node], *, now: float = 0.0) -> list[Node]:
    """The nodes among ``nodes`` (the placement index's candidates: room now, as read) a part of ``job`` fits on (its
    memory per device, and its :func:`room` at ``now`` beside the nodes' bookings), best fit first (:func:`fit_key`
    over that room; ties keep the index's order)."""
    fitting = [
        n
        for n in nodes
        if per_device_memory_fits(n.device_total, n.memory_gb_total, job.devices, job.memory_gb)
        and has_room(job, n, now)
    ]
    return sorted(fitting, key=lambda n: fit_key(*room(job, n, now), job.devices, job.memory_gb))


# ----------------------------------------------------------------------------------------------- bookings (issue 44)
def own_booking(node: Node, reservation: str) -> Booking | None:
    """The booking of the capacity reservation ``reservation`` (domain/records.py ``holder_id`` of it) on ``node``;
    None when it has none there (or ``reservation`` is "")."""
    return next((b for b in node.bookings if reservation and b.reservation == reservation), None)


def booked_unused(node: Node, booking: Booking) -> tuple[int, int]:
    """What of ``booking`` the work run in its reservation does not hold on ``node`` now (devices, GiB): that work's
    holds (``Hold.reservation``) are in the node's allocation already, so the booking keeps only the rest aside."""
    used = [h for h in node.holds if h.reservation == booking.reservation]
    return (
        max(booking.devices - sum(h.devices for h in used), 0),
        max(booking.memory_gb - sum(h.memory_gb for h in used), 0),
    )


def blocking(node: Node, start: float, end: float, own: str = "") -> tuple[Booking, ...]:
    """The bookings on ``node`` other than ``own``'s (a reservation's ref) in force at some time of ``[start, end)``
    (epoch seconds; ``end`` ``math.inf``: from ``start`` on)."""
    return tuple(b for b in node.bookings if b.reservation != own and b.overlaps(start, end))


def run_span(job: Job, node: Node, now: float) -> tuple[float, float] | None:
    """``[now, end)``: what ``job`` would hold ``node`` for if placed there at ``now`` — until its maximum duration
    (``math.inf`` without one: Slurm's time limit); a job of a capacity reservation at most until its window's end,
    and only inside it (None: the window is not open on ``node`` at ``now``, or ``node`` holds no booking of it)."""
    duration = float(job.max_duration_seconds) if job.max_duration_seconds else math.inf
    if not job.reservation:
        return now, now + duration
    booking = own_booking(node, job.reservation)
    if booking is None or not booking.start <= now < booking.end:
        return None
    return now, min(now + duration, float(booking.end))


def room(job: Job, node: Node, now: float) -> tuple[int, int]:
    """Free devices and GiB ``job`` may take on ``node`` at ``now`` (issue 44, "Jobs in a reservation", backfill):
    what is free now, less what every other capacity reservation's booking in force at any time of the job's
    :func:`run_span` keeps aside (:func:`booked_unused`) — so a job that ends before a window opens may use its devices
    and one that would run into it may not. A job of a reservation takes only out of that reservation's booking on
    the node, inside its window (0, 0 outside it). A preemptible job counts no booking (:func:`squats`)."""
    span = run_span(job, node, now)
    if span is None:
        return 0, 0
    aside = [booked_unused(node, b) for b in blocking(node, *span, own=job.reservation) if not squats(job)]
    devices = node.free_devices - sum(d for d, _ in aside)
    memory = node.free_memory_gb - sum(m for _, m in aside)
    own = own_booking(node, job.reservation)
    if own is not None:
        own_devices, own_memory = booked_unused(node, own)
        devices, memory = min(devices, own_devices), min(memory, own_memory)
    return devices, memory


def squats(job: Job) -> bool:
    """Whether ``job`` may hold booked devices whatever the windows (issue 44: booked capacity serves preemptible work
    until its reservation's work needs it, which then preempts it — :func:`preemption_targets`): a preemptible job
    not itself run in a reservation."""
    return job.run.preemptible and not job.reservation


def has_room(job: Job, node: Node, now: float) -> bool:
    """Whether a part of ``job`` fits in its :func:`room` on ``node`` at ``now``."""
    devices, memory = room(job, node, now)
    return devices >= job.devices and memory >= job.memory_gb


def open_ended_refusal(node: Node, devices: int, memory_gb: int, now: float) -> tuple[Booking, ...]:
    """The bookings on ``node`` that work held open-ended from ``now`` (an instance: services/api/instances.py) of
    ``devices``/``memory_gb`` would take devices from — every booking not over, what its reservation's work does not
    hold of it kept aside (:func:`booked_unused`) — when what is left is too little; () when it fits beside them."""
    ahead = blocking(node, now, math.inf)
    aside = [booked_unused(node, b) for b in ahead]
    free_devices = node.free_devices - sum(d for d, _ in aside)
    free_memory = node.free_memory_gb - sum(m for _, m in aside)
    return ahead if free_devices < devices or free_memory < memory_gb else ()


def reservation_nodes(snapshot: Snapshot) -> tuple[Node, ...]:
    """The nodes of the capacity reservation the job runs in, each holding its booking: those the reservation names
    (read one by one), or — no reservation store to ask — the placement index's candidates holding its booking."""
    job = snapshot.job
    seen = snapshot.reservation_seen()
    if not seen.known:
        nodes: Iterable[Node | None] = snapshot.candidates_for(ReadCandidates())
    elif seen.found is None:
        return ()
    else:
        nodes = [snapshot.node(key) for key in seen.found.nodes]
    return tuple(n for n in nodes if n is not None and own_booking(n, job.reservation) is not None)


def reservation_fit(snapshot: Snapshot) -> list[Node]:
    """Where a job of a capacity reservation may go now: its reservation's nodes that may take work, meet its
    constraints (whatever their price: it pays through the reservation) and have :func:`room` for a part, best fit
    first (a gang: the first ``gang_size`` of them; none when fewer)."""
    job = snapshot.job
    usable = [n for n in reservation_nodes(snapshot) if n.placeable and matches(job, n, None)]
    fitting = best_fit(job, usable, now=snapshot.now)
    if job.gang_size > 1:
        return fitting[: job.gang_size] if len(fitting) >= job.gang_size else []
    return fitting


def reservation_misfit(job: Job, reservation: CapacityReservation) -> str | None:
    """How ``job``'s request exceeds what ``reservation`` books, in words (None: it fits): its kind and model, devices
    and GiB per node, and nodes (a gang: at most the reservation's node count)."""
    kind = reservation.kind
    wanted = model_of_key(job.gpu_model)
    if job.kind.lower() != kind.lower():
        return f"it books {kind}s, the job asks for {job.kind}s"
    if wanted and reservation.model and model_key(reservation.model) != model_key(wanted):
        return f"it books {kind} model {reservation.model}, the job asks for {wanted}"
    if job.devices > reservation.devices or job.memory_gb > reservation.memory_gb:
        return (
            f"it books {reservation.devices} {kind}s and {reservation.memory_gb} GiB per node, the job asks for "
            f"{job.devices} and {job.memory_gb} GiB"
        )
    if job.gang_size > len(reservation.nodes):
        count = len(reservation.nodes)
        return f"it books {count} node{'s' if count != 1 else ''}, the job asks for {job.gang_size}"
    return None


def reservation_refusal(snapshot: Snapshot) -> ReservationGone | WindowOver | None:
    """Why a waiting job of a capacity reservation can no longer run in it (None: it still may): the reservation is
    gone (cancelled), or its window is over. Unknown (no reservation store to ask, or no reservation named): None."""
    if not snapshot.job.reservation:
        return None
    seen = snapshot.reservation_seen()
    name = reservation_name(snapshot.job.reservation)
    if not seen.known:
        return None
    if seen.found is None:
        return ReservationGone(name)
    return WindowOver(name, seen.found.end) if snapshot.now >= seen.found.end else None


def _reservation_inadmissible(snapshot: Snapshot) -> Inadmissible | None:
    """Why a job of a capacity reservation can never run in it (None: it may): :func:`reservation_refusal`, or the
    job asks for more than it books. Unknown (no reservation store to ask): admissible."""
    refused = reservation_refusal(snapshot)
    found = snapshot.reservation_seen().found
    if refused is not None or found is None:
        return refused
    misfit = reservation_misfit(snapshot.job, found)
    return None if misfit is None else OutsideReservation(reservation_name(snapshot.job.reservation), misfit)


def _reservation_waiting(snapshot: Snapshot) -> WaitingReason:
    """Why a job of a capacity reservation waits: its window opens later, or its reservation's other jobs hold the
    devices it books."""
    job, now = snapshot.job, snapshot.now
    name = reservation_name(job.reservation)
    found = snapshot.reservation_seen().found
    if found is not None and now < found.start:
        return BeforeWindow(name, found.start)
    nodes = reservation_nodes(snapshot)
    bookings = [b for n in nodes if (b := own_booking(n, job.reservation)) is not None]
    if bookings and now < min(b.start for b in bookings):
        return BeforeWindow(name, min(b.start for b in bookings))
    booked = max((b.devices for b in bookings), default=0)
    unused = [booked_unused(n, b) for n in nodes if (b := own_booking(n, job.reservation)) is not None]
    squatted = any(d >= job.devices and m >= job.memory_gb for d, m in unused)
    return ReservationFull(job.kind, name, booked, squatted)


def reservation_name(ref: str) -> str:
    """A reservation's name from its ref (``capacityReservations/{rg}/{name}``)."""
    return ref.rsplit("/", 1)[-1]


def _booked_out(job: Job, nodes: Sequence[Node], now: float) -> RunsIntoBooking | None:
    """When ``nodes`` have room now but none beside the bookings the job would run into: why (the earliest window in
    the way); None otherwise."""
    if not nodes or any(has_room(job, n, now) for n in nodes):
        return None
    windows = [b.start for n in nodes for b in blocking(n, *(run_span(job, n, now) or (now, now)))]
    if not windows:
        return None
    return RunsIntoBooking(job.kind, job.devices, min(windows), job.max_duration_seconds // 60)


def within(job: Job, currencies: frozenset[str] | None) -> Within:
    """The terms a node taking ``job`` must bill within: its price ceiling, in the ``currencies`` its budgets count
    (None: no constraint — a job from before ceilings, with no budget; services/common/budgets.py)."""
    ceiling = job.price_ceiling
    if ceiling is not None:
        return ceiling.in_currencies(currencies).terms
    if currencies is None:
        return None
    top = Decimal(MAX_PRICE_PER_GPU_HOUR)
    return tuple(BillingTerms(top, c, ANY_INCREMENT, MAX_MINIMUM_BILLABLE_SECONDS) for c in sorted(currencies))


def matches(job: Job, node: Node, terms: Within) -> bool:
    """Whether ``node`` (as read now) meets the job's constraints: its platform takes work, accelerator kind, vendor
    and model, location, device memory per device, its pricing within ``terms`` (its free capacity is judged by the
    reservation itself)."""
    return (
        node.backend_placeable  # its platform takes work on it (a Slurm node DOWN or drained does not)
        and node.kind.lower() == job.kind.lower()
        and (job.vendor is None or vendor_key(node.accelerator.vendor) == vendor_key(job.vendor))
        and (not model_of_key(job.gpu_model) or node.accelerator.key == job.gpu_model)
        and (not job.location or normalize_location(node.location) == job.location)
        and per_device_memory_fits(node.device_total, node.memory_gb_total, job.devices, job.memory_gb)
        and within_terms(node.terms, terms)
    )


def gang_groups(job: Job, nodes: Iterable[Node], terms: Within, *, now: float | None = None) -> list[list[Node]]:
    """The nodes among ``nodes`` a part of ``job`` fits on (:func:`matches`; with ``now``, also its :func:`room` there
    beside the nodes' bookings), grouped as a gang must be placed — one accelerator model, location, price and
    platform (backend type, cluster, partition: on a Slurm cluster a gang is one job of one partition) — each group
    best fit first, the groups in the order of their best node."""

    def free(n: Node) -> tuple[int, int]:
        return (n.free_devices, n.free_memory_gb) if now is None else room(job, n, now)

    fitting = sorted(
        (n for n in nodes if matches(job, n, terms) and (now is None or has_room(job, n, now))),
        key=lambda n: fit_key(*free(n), job.devices, job.memory_gb),
    )
    groups: dict[tuple[str, str, BillingTerms, str, str, str], list[Node]] = {}
    for node in fitting:
        where = (node.backend.type, node.backend.cluster, node.backend.partition)
        groups.setdefault((node.accelerator.key, normalize_location(node.location), node.terms, *where), []).append(
            node
        )
    return list(groups.values())


def gang_fit(job: Job, nodes: Iterable[Node], terms: Within, *, now: float = 0.0) -> list[Node] | None:
    """The ``job.gang_size`` nodes a gang goes to: the best of the first group (:func:`gang_groups`) with room for
    every part at ``now`` beside the nodes' bookings; None when no group has."""
    groups = gang_groups(job, nodes, terms, now=now)
    return next((g[: job.gang_size] for g in groups if len(g) >= job.gang_size), None)


# ----------------------------------------------------------------------------------------------- admission
def inadmissible(snapshot: Snapshot) -> Inadmissible | None:
    """Why no node of the subscription could ever hold the job (None when one could: it is admissible), judged on
    the fleet's shapes (placement.py, "Admission"): no node; no node of its accelerator or location; none large enough;
    for a gang, too few of one model, location and price; a quota below what it asks on every shape that could hold
    it; a price ceiling that admits no terms."""
    job = snapshot.job
    if job.reservation and (refused := _reservation_inadmissible(snapshot)) is not None:
        return refused
    shapes = snapshot.fleet_shapes()
    if not shapes:
        return NoNodes()
    matching = [s for s in shapes if s.matches(job.gpu_model, job.location, job.kind, job.vendor)]
    wanted = Wanted(
        job.kind,
        model_of_key(job.gpu_model),
        job.vendor,
        not any(s.matches(job.gpu_model, "", job.kind, job.vendor) for s in shapes),
        job.location,
    )
    if not matching:
        return NoSuchNodes(wanted)
    fits = [s for s in matching if s.could_hold(job.devices, job.memory_gb)]
    if not fits:
        largest = max(matching, key=lambda s: (s.device_total, s.memory_gb_total))
        return TooLarge(job.devices, job.memory_gb, wanted, largest.device_total, largest.memory_gb_total)
    if job.gang_size > 1:
        together: dict[tuple[str, str, BillingTerms | None], int] = {}
        for shape in fits:
            group = (shape.gpu_model, shape.location, shape.terms)
            together[group] = together.get(group, 0) + shape.nodes
        if max(together.values()) < job.gang_size:
            return GangTooWide(job.kind, job.gang_size, job.devices, job.memory_gb, max(together.values()))
    return _beyond_quota(snapshot, fits) or _priced_nowhere_now(snapshot)


def _beyond_quota(snapshot: Snapshot, fits: Sequence[FleetShape]) -> BeyondQuota | None:
    """Whether no quota would ever let the job run on any of the shapes that could hold it (None when one would): on
    each, a limit below all it asks (a gang's quota counts all its parts)."""
    job = snapshot.job
    total = job.devices * job.gang_size
    refusals: list[QuotaSeen] = []
    for shape in fits:
        here = snapshot.quotas_in(shape.location)
        blocking = [here[n] for n in quota_names(shape.gpu_model) if n in here and (here[n].limit or 0) < total]
        if not blocking:
            return None
        refusals.append(QuotaSeen.of(blocking[0]))
    return BeyondQuota(job.kind, total, tuple(dict.fromkeys(refusals)))


def _priced_nowhere_now(snapshot: Snapshot) -> PricedNowhere | None:
    """Whether the job's price ceiling admits no node (domain/pricing.py): none that could hold it was among those its
    submitter could see, in a currency its budgets count, when it was submitted — so nothing admits it, whatever frees
    up later. None when its ceiling admits some terms (or it has none)."""
    ceiling = snapshot.job.price_ceiling
    if ceiling is None or ceiling.terms or ceiling.basis != CeilingBasis.PRICES_AT_SUBMISSION:
        return None
    return PricedNowhere(ceiling.fixed_at, snapshot.budgets_seen())


# ----------------------------------------------------------------------------------------------- why it waits
def waiting(snapshot: Snapshot) -> WaitingReason:
    """Why the job waits (placement.py, "Price ceiling", "Gangs"), the first that holds: a spent budget; every node
    with room now above its price ceiling or in a currency its budget does not count; every node that could take it
    now (or, with none, every shape that could ever) held back by a full quota; no node with room."""
    budgets = snapshot.budgets_seen()
    if budgets.refusal is not None:
        return BudgetSpent(budgets.refused_by, budgets.refusal)
    if snapshot.job.reservation:
        return _reservation_waiting(snapshot)
    if snapshot.job.gang_size > 1:
        return _gang_waiting(snapshot, budgets)
    return _single_waiting(snapshot, budgets)


def _single_waiting(snapshot: Snapshot, budgets: Budgets) -> WaitingReason:
    job = snapshot.job
    room = [
        n
        for n in snapshot.candidates_for(ReadCandidates())
        if per_device_memory_fits(n.device_total, n.memory_gb_total, job.devices, job.memory_gb)
    ]
    terms = within(job, budgets.currencies)
    if room and terms is not None:
        priced = [n for n in room if within_terms(n.terms, terms)]
        if not priced:
            lowest = min((n.terms for n in room), key=lambda t: (t.price_per_gpu_hour, t.currency))
            refused = budgets.currencies is not None and lowest.currency not in budgets.currencies
            return PricedOut(job.kind, len(room), lowest, job.price_ceiling, budgets, refused)
        room = priced
    full: list[QuotaUsage] = []
    for node in room:
        if (blocking := _full_quota(snapshot, node.shape, job.devices)) is None:
            break
        full.append(blocking)
    else:
        if full or (not room and (full := _quota_wherever(snapshot, job.devices))):
            return QuotaFull(job.kind, QuotaSeen.of(full[0]), job.devices)
    return _booked_out(job, room, snapshot.now) or NoRoom(job.kind, job.devices, job.memory_gb, job.vendor)


def _gang_waiting(snapshot: Snapshot, budgets: Budgets) -> WaitingReason:
    job = snapshot.job
    terms = within(job, budgets.currencies)
    nodes = snapshot.candidates_for(ReadCandidates(terms, GANG_CANDIDATE_PAGES))
    room_for_all = [g for g in gang_groups(job, nodes, terms) if len(g) >= job.gang_size]
    total = job.devices * job.gang_size
    if room_for_all:  # nodes enough have room: a quota holds it back
        quota = _full_quota(snapshot, room_for_all[0][0].shape, total)
        walls = [quota] if quota is not None else []
    else:
        walls = _quota_wherever(snapshot, total)
    if walls:
        return QuotaFull(job.kind, QuotaSeen.of(walls[0]), job.devices, job.gang_size)
    if room_for_all and not any(len(g) >= job.gang_size for g in gang_groups(job, nodes, terms, now=snapshot.now)):
        booked = _booked_out(job, room_for_all[0], snapshot.now)
        if booked is not None:
            return booked
    return GangNoRoom(job.kind, job.gang_size, job.devices, job.memory_gb)


def _full_quota(snapshot: Snapshot, shape: FleetShape, need: int) -> QuotaUsage | None:
    """The first quota the job counts in on a node of ``shape`` (domain/quotas.py ``quota_names``: its kind's and its
    model's, in its location) with less headroom than ``need`` devices; None when none."""
    here = snapshot.quotas_in(shape.location)
    return next((here[n] for n in quota_names(shape.gpu_model) if n in here and (here[n].headroom or 0) < need), None)


def _quota_wherever(snapshot: Snapshot, need: int) -> list[QuotaUsage]:
    """When no node has room now: the full quotas (less headroom than ``need`` devices) that would hold the job back
    on every shape of node that could ever hold it — so a job a full quota holds back is told of the quota, not of
    the capacity its own work takes. Empty when some shape's quotas have room (capacity is what it waits for)."""
    job = snapshot.job
    able = [
        shape
        for shape in snapshot.fleet_shapes()
        if shape.matches(job.gpu_model, job.location, job.kind, job.vendor)
        and shape.could_hold(job.devices, job.memory_gb)
    ]
    blocking = [_full_quota(snapshot, shape, need) for shape in able]
    return [q for q in blocking if q is not None] if able and all(blocking) else []


# ----------------------------------------------------------------------------------------------- preemption
@dataclass(frozen=True)
class PreemptionTargets:
    """What preempting for a job decided: the node held for it, and the workloads to stop there (as read, lowest
    priority first)."""

    node: ResourceKey
    victims: tuple[Job, ...]


#: The bound a job of a capacity reservation reads preemption candidates below: above every priority (0-9) — in the
#: index's sort-key text order too (``"9#..." < "90"``) — since it may stop any preemptible work on its booking.
ANY_PRIORITY = 90


def may_preempt(job: Job, budgets: Budgets) -> bool:
    """Whether ``job`` (waiting, as read) may preempt now (domain/preemption.py): of one node (a gang neither preempts
    nor is preempted), priority above 0 (nothing is lower) — or run in a capacity reservation, whose booked devices
    preemptible work only borrows — its budgets allowing it, no node held for it already."""
    return (
        job.drain_node is None
        and budgets.refusal is None
        and job.status == JobStatus.PENDING
        and (job.priority > 0 or bool(job.reservation))
        and job.gang_size == 1
    )


def preemptible_by(job: Job, found: Iterable[Job]) -> list[Job]:
    """The workloads among ``found`` (the index's candidates, in its order) ``job`` may stop: they said they may be
    preempted and hold capacity now (``Job.preemption_candidate``), their priority is strictly lower, they are
    ``Scheduled`` or ``Running`` and of its subscription (the index holds only those; checked again here). A job of a
    capacity reservation may stop any of them not run in its reservation, whatever their priority."""
    return [
        v
        for v in found
        if v.preemption_candidate
        and (v.priority < job.priority or (bool(job.reservation) and v.reservation != job.reservation))
        and v.status in (JobStatus.SCHEDULED, JobStatus.RUNNING)
        and v.key.subscription_id == job.key.subscription_id
    ]


def preemption_targets(snapshot: Snapshot) -> PreemptionTargets | None:
    """The node and victims whose stopping gives the job room within its price ceiling, budget currencies and quotas
    (domain/preemption.py ``choose``: the fewest victims, then the lowest highest priority, then the fewest devices);
    None when the job may not preempt or no node can be freed enough. Looks at the victims' nodes in their order, at
    most twice :data:`~itl_accelerator.domain.preemption.MAX_NODES` of them, until that many it may use."""
    job, budgets = snapshot.job, snapshot.budgets_seen()
    if not may_preempt(job, budgets):
        return None
    if job.reservation:
        return _reservation_targets(snapshot)
    victims = preemptible_by(job, snapshot.preemption_candidates())
    terms = within(job, budgets.currencies)
    rooms: list[preemption.Room] = []
    for node_key in list(dict.fromkeys(v.node_key for v in victims))[: 2 * preemption.MAX_NODES]:
        if len(rooms) == preemption.MAX_NODES:
            break
        node = snapshot.node(node_key)
        if node is None or node.availability != Availability.AVAILABLE or not matches(job, node, terms):
            continue
        here = snapshot.quotas_in(node.shape.location)
        headrooms = [here[name].headroom or 0 for name in quota_names(node.shape.gpu_model) if name in here]
        shortfall = max([job.devices - h for h in headrooms if h < job.devices], default=0)
        rooms.append(preemption.Room(node.key, node.free_devices, node.free_memory_gb, shortfall))
    candidates = [preemption.Victim(v.key, v.node_key, v.devices, v.memory_gb, v.priority) for v in victims]
    chosen = preemption.choose(job.devices, job.memory_gb, rooms, candidates)
    if chosen is None:
        return None
    by_key = {v.key: v for v in victims}
    return PreemptionTargets(chosen[0].node, tuple(by_key[v.key] for v in chosen[1]))


def _reservation_targets(snapshot: Snapshot) -> PreemptionTargets | None:
    """For a job of a capacity reservation, in its window: the node of its reservation and the preemptible work there
    (:func:`squats`) whose stopping gives it room in its booking (domain/preemption.py ``choose``: the fewest victims);
    None when its booking has no room for it there whatever is stopped (its reservation's other jobs hold it)."""
    job, now = snapshot.job, snapshot.now
    rooms: list[preemption.Room] = []
    nodes = [n for n in reservation_nodes(snapshot) if n.placeable and matches(job, n, None)]
    for node in nodes[: preemption.MAX_NODES]:
        booking = own_booking(node, job.reservation)
        if booking is None or not booking.start <= now < booking.end:
            continue
        unused_devices, unused_memory = booked_unused(node, booking)
        if unused_devices < job.devices or unused_memory < job.memory_gb:
            continue
        aside = [booked_unused(node, b) for b in blocking(node, now, booking.end, own=job.reservation)]
        free_devices = node.free_devices - sum(d for d, _ in aside)
        rooms.append(preemption.Room(node.key, free_devices, node.free_memory_gb - sum(m for _, m in aside)))
    victims = [
        (v, room.node)
        for v in preemptible_by(job, snapshot.preemption_candidates())
        for room in rooms
        if room.node.same(v.node_key)
    ]
    candidates = [preemption.Victim(v.key, node, v.devices, v.memory_gb, v.priority) for v, node in victims]
    chosen = preemption.choose(job.devices, job.memory_gb, rooms, candidates)
    if chosen is None or not chosen[1]:
        return None
    by_key = {v.key: v for v, _ in victims}
    return PreemptionTargets(chosen[0].node, tuple(by_key[v.key] for v in chosen[1]))


# ----------------------------------------------------------------------------------------------- starvation
def starving(job: Job, now: float, starvation_seconds: float) -> bool:
    """Whether ``job`` (the first waiting, as read) starves (placement.py, "No starvation"): of one node (a gang cannot
    use one drained node), not run in a capacity reservation, no node held for it yet, not ended, and waiting ``starvation_seconds`` since it was
    submitted, at ``now`` (epoch seconds)."""
    if job.drain_node is not None or job.status.final or job.gang_size > 1 or job.reservation:
        return False  # a job of a capacity reservation waits for its window and its booking, never another node
    submitted = datetime.fromisoformat(job.submitted_at.replace("Z", "+00:00")).timestamp()
    return now - submitted >= starvation_seconds


def drain_target(job: Job, nodes: Iterable[Node]) -> Node | None:
    """The node to drain for a starving ``job`` among ``nodes`` (the placement index's nodes of its kind, model and
    location, whatever their room): of those that could ever hold it, the one nearest to fitting (the most free
    devices; ties keep the index's order); None when none could."""
    able = [
        n
        for n in nodes
        if n.device_total >= job.devices
        and per_device_memory_fits(n.device_total, n.memory_gb_total, job.devices, job.memory_gb)
    ]
    return max(able, key=lambda n: n.free_devices) if able else None
