"""Capacity reservations as the API serves them (issue 44): book devices for a future window, read, list, cancel.

**Booking** (``PUT``; synchronous — 201 with the nodes that hold it, or 409): the window is on whole UTC hours, in the
future, at most ``MAX_ADVANCE_DAYS`` ahead (models/reservations.py). The service reads the placement index's nodes of
the asked kind, model and location in a bounded number of requests whatever the fleet's size (:meth:`_decide`: the
booking calendar index's nodes no booking holds from the window's start on, then the placement index's most free
ones), decides where it fits for the whole window (domain/booking.py ``decide_booking``: every other
reservation's window and every workload on those nodes until its maximum duration ends — work without one holds its
devices for good), and writes the reservation, its booking on each node and its meters in one transaction
conditioned on each node's calendar and hold revisions as read. A concurrent booking or placement on one of those
nodes makes the write fail; the service reads and decides again (up to :data:`BOOK_ATTEMPTS` times), so of concurrent
bookings for the last devices exactly one wins and the others get the 409 of what they then read.

The price per device-hour is the chosen nodes' pricing when booked, locked (``billingTerms``); ``totalCost`` is hours
x devices x nodes x price, billed whole through the reservation's meters whether jobs use it or not (docs/BILLING.md,
"Capacity reservations"). Budgets covering the reservation (its resource group and tags) must not be spent, must
count the nodes' currency, and must have room for the whole cost in it beside their spend and what the reservations
they cover booked already will still bill (their open meters' hours to come: :func:`committed_cost`; one read of the
subscription's open meters, as budget evaluations make); its devices must fit the subscription's quotas (a reservation larger than a quota's limit could never be used).

A reservation cannot be changed once booked: the same body again is 200 with it as it is; another is 409
``PropertyChangeNotAllowed`` (cancel and book again).

**Cancelling** (``DELETE``): before the window starts nothing is billed (its meters are deleted with it); once it has
started, the window is billed whole — as EC2 Capacity Blocks, capacity sold for a window is paid for — and its nodes'
devices are free for others from then on. 200, or 204 when there was none.

**Who sees what** (docs/RBAC.md, "Capacity reservations"): admins see and cancel every reservation; a consumer books,
sees and cancels its own; a supplier sees, read only, those booked on its nodes (what it sold). Anyone else gets the
answer a missing reservation gets (404).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from itl_accelerator.arm import normalize_location
from itl_accelerator.auth import rbac
from itl_accelerator.auth.principal import Principal
from itl_accelerator.billing.metering import (
    COST_QUANTUM,
    MAX_MINIMUM_BILLABLE_SECONDS,
    BillingTerms,
    iso,
    terms_properties,
)
from itl_accelerator.billing.reservations import reservation_meters
from itl_accelerator.domain.accelerators import accelerator_key, canonical_kind, job_vendor
from itl_accelerator.domain.booking import Ask, Blocker, Booked, Unbookable, decide_booking, memory_asked
from itl_accelerator.domain.pricing import ANY_INCREMENT, CeilingBasis, PriceCeiling
from itl_accelerator.domain.quotas import QuotaScope
from itl_accelerator.domain.records import Booking, Demand, Node, ResourceKey, reservation_of_ref
from itl_accelerator.domain.reservations import CapacityReservation
from itl_accelerator.domain.usage import Meter
from itl_accelerator.errors import (
    BadRequest,
    BudgetCurrencyMismatch,
    BudgetExceeded,
    Conflict,
    InsufficientCapacity,
    PreconditionFailed,
    PropertyChangeNotAllowed,
    QuotaExceeded,
)
from itl_accelerator.models.reservations import MAX_ADVANCE_DAYS, CapacityReservationWrite
from itl_accelerator.repositories.errors import (
    EtagMismatch,
    ItemExists,
    NodeChanged,
    SubscriptionNotWritable,
)
from itl_accelerator.repositories.protocols import Page, Scope
from itl_accelerator.resources import RESERVATIONS
from itl_accelerator.services.common import arm_rules
from itl_accelerator.services.common.budgets import covering
from itl_accelerator.services.common.budgets import view as budget_view
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.services.common.kernel import ResourceKernel, with_etag

#: Reads-and-decisions of a booking whose nodes changed meanwhile (a concurrent booking or placement), before 409.
BOOK_ATTEMPTS = 5
#: Pages of the booking calendar index a booking reads first (25 nodes each: those no booking holds from its start).
CALENDAR_PAGES = 2
#: Pages of the placement index a booking reads when those cannot take it (25 nodes each; the most free now first).
BOOKING_PAGES = 2
#: How long a booking stays on its nodes' calendars after its window (seconds): past it, the next booking on the node
#: removes it (a job of the reservation stopped at the window's end releases its devices within the grace period).
EXPIRED_KEPT_SECONDS = 3600
#: Blocking nodes named in a 409's message (all are in its ``details``).
NAMED_BLOCKERS = 5


def visible_to(principal: Principal, reservation: CapacityReservation) -> bool:
    """Admins see every reservation; a consumer those it booked; a supplier those booked on its nodes."""
    if rbac.ROLE_ADMIN in principal.roles:
        return True
    if rbac.ROLE_CONSUMER in principal.roles and reservation.booked_by == principal.subject:
        return True
    return rbac.ROLE_SUPPLIER in principal.roles and principal.subject in reservation.suppliers


def may_change(principal: Principal, reservation: CapacityReservation) -> bool:
    """Admins cancel every reservation; anyone else only those it booked."""
    return rbac.ROLE_ADMIN in principal.roles or reservation.booked_by == principal.subject


def render(reservation: CapacityReservation, now: float) -> dict[str, Any]:
    """The reservation as returned: its stored envelope, ``etag``, and its ``state`` at ``now``."""
    document = with_etag(reservation.document, reservation.etag)
    document["properties"] = {**document["properties"], "state": str(reservation.state(now))}
    return document


def _hour(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%MZ")


def _until(t: int) -> str:
    return "open-ended" if not t else f"until {_hour(t)}"


def describe_blocker(b: Blocker) -> str:
    """What takes a node in a window, in words: how many devices work holds there and until when, and how many other
    reservations booked and over which windows — never whose they are (another user's job or reservation is not the
    caller's to learn of: docs/RBAC.md)."""
    held = [f"{h.devices} held by running work {_until(h.until)}" for h in b.holders]
    booked = [f"{x.devices} booked by a reservation {_hour(x.start)} to {_hour(x.end)}" for x in b.bookings]
    return f"{b.node.name} ({b.node.device_total} in all: {'; '.join(held + booked) or 'too small'})"


def unbookable(ask: Ask, found: Unbookable) -> InsufficientCapacity:
    """409 ``InsufficientCapacity``: the window and the nodes that block it (each in ``details``)."""
    shape = f"{ask.devices} {ask.kind}{f' ({ask.model})' if ask.model else ''} on each of {ask.node_count} node(s)"
    where = f" in '{ask.location}'" if ask.location else ""
    window = f"{_hour(ask.start)} to {_hour(ask.end)}"
    if not found.matching:
        return InsufficientCapacity(
            f"No node{where} could hold {shape} at any time (kind, model, size, price ceiling or budget currency), "
            f"so {window} cannot be booked."
        )
    named = "; ".join(describe_blocker(b) for b in found.blockers[:NAMED_BLOCKERS])
    more = len(found.blockers) - NAMED_BLOCKERS
    return InsufficientCapacity(
        f"{shape}{where} is not free for all of {window}: {found.matching} node(s) could hold it, "
        f"{len(found.blockers)} are taken then — {named}{f' (and {more} more)' if more > 0 else ''}.",
        details=[
            {"code": "CapacityTaken", "target": b.node.arm_id, "message": describe_blocker(b)} for b in found.blockers
        ],
    )


class CapacityReservationService:
    """Capacity reservation operations over the shared kernel; ``clock`` returns epoch seconds."""

    def __init__(self, kernel: ResourceKernel, clock: Callable[[], float] = time.time):
        self._kernel = kernel
        self._reservations = kernel.repositories.reservations
        self._nodes = kernel.repositories.nodes
        self._clock = clock

    def key(self, subscription_id: str, resource_group: str, name: str) -> ResourceKey:
        return self._kernel.key(RESERVATIONS, subscription_id, resource_group, name)

    def _visible(self, ctx: CallContext, key: ResourceKey, *, to_change: bool = False) -> CapacityReservation:
        found = self._reservations.get(key)
        if (
            found is None
            or not visible_to(ctx.principal, found)
            or (to_change and not may_change(ctx.principal, found))
        ):
            raise RESERVATIONS.not_found(key.names, key.resource_group)
        return found

    # ----------------------------------------------------------------------------------------------- reads
    def get(self, ctx: CallContext, subscription_id: str, resource_group: str, name: str) -> dict[str, Any]:
        """The reservation; 404 when missing, outside the caller's scopes, or not the caller's to see."""
        key = self.key(subscription_id, resource_group, name)
        self._kernel.require(ctx, RESERVATIONS, key, RESERVATIONS.read)
        return render(self._visible(ctx, key), self._clock())

    def in_scope(
        self, ctx: CallContext, subscription_id: str, resource_group: str | None, *, top: int, skip_token: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of the reservations of a resource group (or the subscription) the caller may see (one ``Query``;
        a consumer's or supplier's page holds only its own, so it may be shorter than ``top`` with more to follow)."""

        def fetch(scope: Scope, token: str | None) -> Page[CapacityReservation]:
            return self._reservations.page(scope, top, token)

        page = self._kernel.list_page(ctx, RESERVATIONS, subscription_id, resource_group, fetch, skip_token=skip_token)
        now = self._clock()
        return [render(r, now) for r in page.items if visible_to(ctx.principal, r)], page.token

    # ----------------------------------------------------------------------------------------------- booking
    def book(
        self,
        ctx: CallContext,
        subscription_id: str,
        resource_group: str,
        name: str,
        body: CapacityReservationWrite,
        *,
        if_match: str | None = None,
        if_none_match: str | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Book (module docstring). Returns ``(reservation, created)``. Errors: 400 (names, body, a window not in the
        future or too far ahead), 403, 409 (``InsufficientCapacity`` with the blocking nodes; ``QuotaExceeded``;
        ``BudgetExceeded``; ``BudgetCurrencyMismatch``; ``PropertyChangeNotAllowed``: another body for a booked
        name; ``Conflict``: another user's reservation of that name), 412."""
        key = self.key(subscription_id, resource_group, name)
        self._kernel.require(ctx, RESERVATIONS, key, RESERVATIONS.write)
        arm_rules.check_body_name(body.name, name)
        existing = self._reservations.get(key)
        arm_rules.check_preconditions(
            existing.etag if existing else None, if_match=if_match, if_none_match=if_none_match
        )
        if existing is not None:  # a replay (also once its window began) is answered before the window is judged
            return self._again(ctx, existing, body), False
        ask = self._ask(body)
        for _ in range(BOOK_ATTEMPTS):
            now = self._clock()
            decided = self._decide(subscription_id, ask, now)
            if isinstance(decided, Unbookable):
                raise unbookable(ask, decided)
            reservation = self._reservation(ctx, key, body, ask, decided)
            self._admit(reservation, body)
            nodes = list(decided.nodes)
            try:
                self._reservations.book(
                    reservation,
                    nodes,
                    reservation_meters(reservation, nodes),
                    self._kernel.audit(
                        ctx,
                        RESERVATIONS,
                        key,
                        RESERVATIONS.write,
                        "Booked capacity reservation",
                        None,
                        render(reservation, now),
                    ),
                    expired_before=int(now) - EXPIRED_KEPT_SECONDS,
                )
            except NodeChanged:
                continue
            except ItemExists as exc:
                raise Conflict("Another request booked a reservation of this name at the same time; retry.") from exc
            except SubscriptionNotWritable as exc:
                raise self._kernel.write_error(exc) from exc
            return render(reservation, now), True
        raise Conflict("The nodes kept changing while the reservation was booked; retry the request.")

    def _ask(self, body: CapacityReservationWrite) -> Ask:
        """What ``body`` asks for (400 for a window not ahead, or beyond :data:`MAX_ADVANCE_DAYS`)."""
        props = body.properties
        start, end = int(props.start_time.timestamp()), int(props.end_time.timestamp())
        now = self._clock()
        if start <= now:
            raise BadRequest("startTime must be in the future: a window that has begun cannot be booked.",
                             target="properties.startTime")  # fmt: skip
        if start > now + MAX_ADVANCE_DAYS * 86400:
            raise BadRequest(f"startTime may be at most {MAX_ADVANCE_DAYS} days ahead.", target="properties.startTime")
        wanted = props.accelerator
        kind = canonical_kind(wanted.kind)
        ceiling = None
        if props.max_price is not None:
            stated = props.max_price
            minimum = stated.minimum_billable_seconds
            bound = BillingTerms(
                stated.price,
                stated.currency,
                stated.billing_increment_seconds or ANY_INCREMENT,
                MAX_MINIMUM_BILLABLE_SECONDS if minimum is None else minimum,
            )
            ceiling = PriceCeiling(CeilingBasis.MAX_PRICE, (bound,), iso(int(now)))
        return Ask(
            kind=kind,
            vendor=job_vendor(kind, wanted.model, wanted.vendor),
            model=wanted.model or "",
            location=normalize_location(body.location),
            devices=wanted.count,
            memory_gb=wanted.memory_gb or 0,
            node_count=wanted.nodes or 1,
            start=start,
            end=end,
            ceiling=ceiling,
        )

    def _decide(self, subscription_id: str, ask: Ask, now: float) -> Booked | Unbookable:
        """Where ``ask`` books (domain/booking.py), over two bounded reads of the subscription's nodes of its kind,
        model and location: first the booking calendar index's nodes no booking holds from the window's start on
        (:data:`CALENDAR_PAGES` pages, the longest free first: at any fleet size, the nodes most likely to take it);
        when those cannot, also the placement index's, most free now first (:data:`BOOKING_PAGES` pages: nodes booked
        around the window, and nodes stored before the calendar index)."""
        demand = Demand(
            0, 0, accelerator_key(ask.kind, ask.model or None), ask.location, kind=ask.kind, vendor=ask.vendor
        )
        first = self._nodes.bookable(subscription_id, demand, ask.start, pages=CALENDAR_PAGES)
        decided = decide_booking(ask, first, now)
        if isinstance(decided, Booked):
            return decided
        more = self._nodes.candidates(subscription_id, demand, pages=BOOKING_PAGES, most_free_first=True)
        seen = {n.key for n in first}
        return decide_booking(ask, [*first, *(n for n in more if n.key not in seen)], now)

    def _reservation(
        self, ctx: CallContext, key: ResourceKey, body: CapacityReservationWrite, ask: Ask, booked: Booked
    ) -> CapacityReservation:
        """The reservation record of a decision: its document (what was asked, and what was booked: its nodes, the
        locked price, hours and total cost, who booked it and when)."""
        nodes = booked.nodes
        terms = nodes[0].terms
        memory = memory_asked(ask, nodes[0])  # a gang's nodes are of one model
        hours = (ask.end - ask.start) // 3600
        total = terms.price_per_gpu_hour * ask.devices * len(nodes) * hours
        booked_at = ctx.now_iso()
        props = body.properties
        properties = {
            "accelerator": props.accelerator.model_dump(mode="json", by_alias=True, exclude_none=True)
            | {"kind": ask.kind},
            "startTime": iso(ask.start),
            "endTime": iso(ask.end),
            **({"maxPrice": props.max_price.for_kind(ask.kind)} if props.max_price else {}),
            "provisioningState": "Succeeded",
            "reservedNodes": [{"id": n.arm_id, "devices": ask.devices, "memoryGb": memory} for n in nodes],
            "billingTerms": terms_properties(terms, booked_at, ask.kind),
            "hours": hours,
            "totalCost": {"amount": format(total.quantize(COST_QUANTUM), "f"), "currency": terms.currency},
            "bookedBy": ctx.principal.subject,
            "bookedAt": booked_at,
        }
        document = RESERVATIONS.envelope(
            key.subscription_id,
            key.resource_group,
            key.names,
            system_data=arm_rules.stamp_system_data(ctx, None),
            properties=properties,
            location=ask.location,
            tags=dict(body.tags or {}),
        )
        return CapacityReservation(
            key=key,
            document=document,
            etag=arm_rules.new_etag(),
            kind=ask.kind,
            model=ask.model,
            location=ask.location,
            devices=ask.devices,
            memory_gb=memory,
            start=ask.start,
            end=ask.end,
            nodes=tuple(n.key for n in nodes),
            terms=terms,
            booked_by=ctx.principal.subject,
            allocation_id=str(uuid.uuid4()),
            suppliers=tuple(sorted({n.owner for n in nodes if n.owner})),
        )

    def _admit(self, reservation: CapacityReservation, body: CapacityReservationWrite) -> None:
        """The subscription's budgets and quotas allow the whole reservation (module docstring), else their 409."""
        key = reservation.key
        repositories = self._kernel.repositories
        moment = datetime.fromtimestamp(self._clock(), UTC)
        said = budget_view(
            repositories.budgets.in_subscription(key.subscription_id), moment, key.resource_group, dict(body.tags or {})
        )
        if said.refusal is not None:
            raise said.refusal
        currency, cost = reservation.terms.currency, reservation.total_cost
        booked = [m for m in repositories.meters.open_in(key.subscription_id) if m.capacity_reservation_id]
        for budget in said.budgets:
            if budget.currency != currency:
                raise BudgetCurrencyMismatch(
                    f"The budget '{budget.name}' counts {budget.currency}; the nodes free for this window bill in "
                    f"{currency}."
                )
            committed = sum(
                (
                    committed_cost(m, self._clock())
                    for m in booked
                    if covering([budget], moment, m.resource_group, m.tags)
                ),
                Decimal(0),
            )
            left = budget.amount - budget.state.spend - committed
            if budget.action.refuses and cost > left:
                raise BudgetExceeded(
                    f"The reservation costs {_money(cost)} {currency} for its whole window; the budget "
                    f"'{budget.name}' has {_money(max(left, Decimal(0)))} {currency} left this period"
                    + (
                        f", counting {_money(committed)} {currency} of reservations booked already."
                        if committed
                        else "."
                    )
                )
        scope = QuotaScope.of(reservation.location, accelerator_key(reservation.kind, reservation.model or None))
        devices = reservation.devices * len(reservation.nodes)
        for name in scope.names:
            usage = repositories.quotas.get(key.subscription_id, scope.location, name)
            if usage is not None and usage.limit is not None and devices > usage.limit:
                raise QuotaExceeded(
                    f"The quota '{name}' of the subscription in '{scope.location}' allows {usage.limit} devices at a "
                    f"time; the reservation books {devices}, which no job could use in full. Ask the provider's "
                    "operators to raise the quota."
                )

    def _again(self, ctx: CallContext, existing: CapacityReservation, body: CapacityReservationWrite) -> dict[str, Any]:
        """A PUT of a booked name: the same booking again (window, accelerator, location, maxPrice and tags) is 200 with
        it as it is; anything else is 409."""
        if not may_change(ctx.principal, existing):
            raise Conflict(
                f"The reservation name '{existing.key.name}' is taken in this resource group; names are unique in a "
                "resource group."
            )
        props = existing.document["properties"]
        sent = body.properties
        same = (
            int(sent.start_time.timestamp()) == existing.start
            and int(sent.end_time.timestamp()) == existing.end
            and sent.accelerator.model_dump(mode="json", by_alias=True, exclude_none=True) | {"kind": existing.kind}
            == props["accelerator"]
            and normalize_location(body.location) == existing.location
            and (sent.max_price.for_kind(existing.kind) if sent.max_price else None) == props.get("maxPrice")
            and dict(body.tags or {}) == dict(existing.document.get("tags") or {})
        )
        if not same:
            raise PropertyChangeNotAllowed(
                f"The reservation '{existing.key.name}' is booked; a booking cannot be changed. Cancel it (DELETE) "
                "and book again."
            )
        return render(existing, self._clock())

    # ----------------------------------------------------------------------------------------------- cancel
    def cancel(
        self, ctx: CallContext, subscription_id: str, resource_group: str, name: str, *, if_match: str | None = None
    ) -> bool:
        """Cancel (module docstring): True when it was there (200), False when not (204)."""
        key = self.key(subscription_id, resource_group, name)
        self._kernel.require(ctx, RESERVATIONS, key, RESERVATIONS.delete)
        found = self._reservations.get(key)
        if found is None or not may_change(ctx.principal, found):
            if if_match is not None:
                raise PreconditionFailed("The 'If-Match' condition does not match the resource's current ETag.")
            return False
        arm_rules.check_preconditions(found.etag, if_match=if_match, if_none_match=None)
        now = self._clock()
        begun = now >= found.start
        summary = "Cancelled capacity reservation" + (" (its window had begun: billed whole)" if begun else "")
        audit = self._kernel.audit(ctx, RESERVATIONS, key, RESERVATIONS.delete, summary, render(found, now), None)
        try:
            self._reservations.cancel(found, audit, bill_until=None if begun else int(now))
        except EtagMismatch as exc:
            raise Conflict("The reservation changed while it was being cancelled; retry.") from exc
        return True

    # ----------------------------------------------------------------------------------------------- a node going
    def in_the_way(self, node: Node) -> list[Booking]:
        """The bookings on ``node`` not yet over (what a change taking it out of service would break)."""
        now = self._clock()
        return [b for b in node.bookings if b.end > now]

    def end_on_node(self, ctx: CallContext, node: Node, why: str) -> list[str]:
        """End every reservation booked on ``node`` that is not over (its supplier or an admin forced the node out of
        service: ``why``), billed only for what it served — up to now, nothing when its window had not begun — with
        an audit event each. The names of those ended."""
        now = int(self._clock())
        ended = []
        for booking in self.in_the_way(node):
            key = reservation_of_ref(node.key.subscription_id, booking.reservation)
            found = self._reservations.get(key) if key is not None else None
            if found is None:
                continue
            audit = self._kernel.audit(
                ctx, RESERVATIONS, found.key, RESERVATIONS.delete,
                f"Ended capacity reservation: {why} (billed up to {_hour(now)})", render(found, now), None,
            )  # fmt: skip
            try:
                self._reservations.cancel(found, audit, bill_until=now)
            except EtagMismatch:
                continue  # cancelled meanwhile
            ended.append(found.key.name)
        return ended


def committed_cost(meter: Meter, now: float) -> Decimal:
    """What a reservation's meter will still bill after ``now`` (its hours from the next whole hour to its end, in its
    currency): spend a budget has not counted yet but the subscription is committed to (the hour under way counts in
    the spend as it passes, so the figure never undercounts)."""
    if meter.end is None:
        return Decimal(0)
    from_hour = max(meter.start, -(-int(now) // 3600) * 3600)
    hours = max(0, meter.end - from_hour) // 3600
    return meter.terms.price_per_gpu_hour * meter.gpus * hours


def _money(amount: Decimal) -> str:
    return format(amount.quantize(Decimal("0.01")), "f")
