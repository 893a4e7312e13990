"""Capacity offers: ``GET .../providers/ITL.Accelerator/locations/{location}/offers[?resourceGroup=rg]`` — what a job
submitted now in the caller's scope could get, per accelerator kind, model and vendor in a location, before it is submitted
(as Lambda Cloud's and SkyPilot's launchable offers): the largest request placed at once on one node, the nodes and
how many take work, the price range per device-hour per currency, and what the quotas and budgets allow.

**From what placement reads, never a Scan.** The subscription's fleet shapes (one Query: kinds, models, nodes per
shape and how many are ``Available``, their prices), its quotas in the location (one Query), its budgets (one
Query), and per kind and model the placement index (services/common/placement.py's candidates, GSI5 by free
devices): the largest request placed now is found by a binary search of candidate reads — at most
``log2(devices per node) + 1`` bounded reads per offer, whatever the number of nodes. So an offer is what a
submission then gets (a test submits exactly it), as of the read: another job may take the room first.

**Scope.** Prices are those of the nodes in the resource groups the caller holds (as a job's price ceiling is made
of them, services/api/jobs.py); nodes drained for a waiting job are not offered (placement would not use them);
with ``resourceGroup`` — or, for a caller holding a single resource group of the subscription, that one — the budgets
covering work there decide (a spent budget that refuses new allocations: nothing is allowed; budgets in one currency:
only nodes billing in it are offered); without, only budgets covering every resource group do. ``largestMultiNode``:
the most whole free nodes of one model and price a gang gets now (services/common/placement.py, "Gangs"), from one
more read of the placement index — null below two. Needs ``sparkJobs/write``: offers are for those who submit.

**The earliest window** (issue 44, "When a waiting job will start"). Asked for a shape and a duration (``devices``
per node, ``durationMinutes``, ``nodes`` — :class:`WindowAsked`), each offer says when such a job would start at the
earliest (``earliestStart``): the capacity calendar (domain/calendar.py ``earliest_window``: running work ends by its
maximum duration, instances and work without one never, capacity reservations block their windows) of the placement
index's page of the offer's nodes whatever their room, within the prices and currencies it offers — one more read per
offer, the one placement's start estimates make; null with a reason where it cannot be known.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.arm import parse_location, validate_resource_group, validate_subscription_id
from itl_accelerator.auth import rbac
from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.accelerators import kind_of_key, model_of_key, vendor_key
from itl_accelerator.domain.calendar import earliest_window
from itl_accelerator.domain.quotas import QuotaUsage, quota_names
from itl_accelerator.domain.records import GANG_CANDIDATE_PAGES, MAX_GANG_NODES, Demand, FleetShape
from itl_accelerator.domain.scheduling import utc
from itl_accelerator.errors import InvalidParameter
from itl_accelerator.repositories.protocols import BudgetRepository, NodeRepository, QuotaRepository
from itl_accelerator.services.common.access import Access, Target
from itl_accelerator.services.common.budgets import view as budget_view
from itl_accelerator.services.common.context import CallContext

TYPE = f"{PROVIDER_NAMESPACE}/locations/offers"


@dataclass(frozen=True)
class WindowAsked:
    """The shape and duration an offer's ``earliestStart`` answers for: ``devices`` per node on ``nodes`` nodes (a
    gang's parts) for ``duration_minutes``."""

    devices: int
    duration_minutes: int
    nodes: int = 1

    @classmethod
    def of(cls, devices: int | None, duration_minutes: int | None, nodes: int | None) -> WindowAsked | None:
        """From the query (None: none asked); 400 ``InvalidParameter`` when ``devices`` and ``durationMinutes`` are not
        given together, or ``nodes`` without them."""
        if devices is None and duration_minutes is None:
            if nodes is not None:
                raise InvalidParameter("nodes applies with devices and durationMinutes.", target="nodes")
            return None
        if devices is None or duration_minutes is None:
            missing = "devices" if devices is None else "durationMinutes"
            raise InvalidParameter(
                f"The earliest window is asked with devices and durationMinutes together; {missing} is missing.",
                target=missing,
            )
        return cls(devices, duration_minutes, nodes or 1)


class OfferService:
    """Offers of a location (module docstring). ``clock``: epoch seconds."""

    def __init__(
        self,
        nodes: NodeRepository,
        quotas: QuotaRepository,
        budgets: BudgetRepository,
        access: Access,
        clock: Callable[[], float] = time.time,
    ):
        self._nodes = nodes
        self._quotas = quotas
        self._budgets = budgets
        self._access = access
        self._clock = clock

    def in_location(
        self,
        ctx: CallContext,
        subscription_id: str,
        location: str,
        resource_group: str | None = None,
        window: WindowAsked | None = None,
    ) -> list[dict[str, Any]]:
        """The offers of ``location``, by kind then model (``{"id", "name", "type", "properties"}`` each), each with
        its ``earliestStart`` for ``window`` when asked. 400 for a malformed location; 404 outside the caller's
        scopes; 403 (audited) without ``sparkJobs/write``."""
        validate_subscription_id(subscription_id)
        where = parse_location(location)
        groups = ctx.principal.resource_groups_in(subscription_id)
        if resource_group is None and groups is not None and len(groups) == 1:
            (resource_group,) = groups  # the one group the caller can submit into: its budgets decide
        if resource_group is not None:
            validate_resource_group(resource_group)
        resource_id = f"/subscriptions/{subscription_id}/providers/{PROVIDER_NAMESPACE}/locations/{where}/offers"
        target = Target.of_subscription(subscription_id, resource_id, TYPE, "offers", resource_group)
        self._access.require_any(ctx, (rbac.JOBS_WRITE,), target)
        visible = {g.lower() for g in groups} if groups is not None else None
        shapes = [
            s
            for s in self._nodes.fleet_shapes(subscription_id)
            if s.location == where and (visible is None or not s.resource_group or s.resource_group in visible)
        ]
        quotas = {u.name: u for u in self._quotas.in_location(subscription_id, where)}
        now = datetime.fromtimestamp(self._clock(), UTC)
        budget = self._budget(subscription_id, now, resource_group)
        by_key: dict[tuple[str, str], list[FleetShape]] = {}
        for shape in shapes:
            by_key.setdefault((shape.gpu_model, vendor_key(shape.vendor)), []).append(shape)
        # a name per model, and per vendor where two make devices of one key (GPUs that name no model)
        shared = {key for key, _ in by_key if sum(1 for other, _ in by_key if other == key) > 1}
        offers = []
        for key, vendor in sorted(by_key, key=lambda kv: (kind_of_key(kv[0]), model_of_key(kv[0]), kv[1])):
            group = by_key[(key, vendor)]
            offer = self._offer(subscription_id, where, key, group, quotas, budget, named=key in shared)
            if window is not None:
                offer["properties"]["earliestStart"] = self._earliest(
                    subscription_id, where, key, group, budget, window
                )
            offers.append(offer)
        return offers

    def _earliest(
        self,
        subscription_id: str,
        location: str,
        key: str,
        shapes: list[FleetShape],
        budget: dict[str, Any],
        window: WindowAsked,
    ) -> dict[str, Any]:
        """When a job of ``window``'s shape and duration would start at the earliest on the offer's nodes (module
        docstring, "The earliest window"): ``startTime`` (UTC ISO 8601; null: ``reason`` says why) and what was asked."""
        asked = {"devices": window.devices, "nodes": window.nodes, "durationMinutes": window.duration_minutes}
        currencies: list[str] | None = budget["currencies"]
        priced = tuple(
            s.terms for s in shapes if s.terms is not None and (currencies is None or s.terms.currency in currencies)
        )
        kind, vendor = kind_of_key(key), next((s.vendor for s in shapes if s.vendor), None)
        if budget["refusal"] or not priced:
            return {
                **asked,
                "startTime": None,
                "reason": budget["refusal"] or "No node it offers bills in a currency the budgets count.",
            }
        demand = Demand(0, 0, key, location, within=priced, kind=kind, vendor=vendor)
        nodes = self._nodes.candidates(
            subscription_id, demand, pages=GANG_CANDIDATE_PAGES if window.nodes > 1 else None
        )
        now = self._clock()
        found = earliest_window(nodes, window.devices, window.duration_minutes * 60.0, now, window.nodes)
        if found is None:
            return {
                **asked,
                "startTime": None,
                "reason": "Work without a maximum duration (an instance, or a job without maxDurationMinutes) holds "
                "the nodes that could take it, or too few such nodes exist.",
            }
        return {**asked, "startTime": utc(math.ceil(found[0])), "reason": None}

    # ----------------------------------------------------------------------------------------------- one offer
    def _offer(
        self,
        subscription_id: str,
        location: str,
        key: str,
        shapes: list[FleetShape],
        quotas: dict[str, QuotaUsage],
        budget: dict[str, Any],
        *,
        named: bool = False,
    ) -> dict[str, Any]:
        """The offer of the ``shapes`` of one accelerator ``key`` and vendor; ``named``: its name says its vendor
        (another vendor's devices share its key)."""
        kind, model = kind_of_key(key), model_of_key(key)  # the kind as known kinds are spelt (TPU, Neuron)
        vendor = next((s.vendor for s in shapes if s.vendor), None)  # None: shapes counted before vendors were
        allowed_currencies: list[str] | None = budget["currencies"]
        priced = [
            s.terms
            for s in shapes
            if s.terms is not None and (allowed_currencies is None or s.terms.currency in allowed_currencies)
        ]
        largest, memory = self._largest_now(subscription_id, location, key, kind, vendor, shapes, priced)
        headroom = self._quota_headroom(key, quotas)
        allowed = (
            0 if budget["refusal"] else largest if headroom is None else max(0, min(largest, headroom["available"]))
        )
        name = f"{kind.lower()}-{model}" if model else kind.lower()
        if named and vendor:
            name = f"{name}-{vendor_key(vendor)}"
        return {
            "id": f"/subscriptions/{subscription_id}/providers/{PROVIDER_NAMESPACE}/locations/{location}/offers/{name}",
            "name": name,
            "type": TYPE,
            "properties": {
                "accelerator": {"kind": kind, "vendor": vendor, "model": model or None},
                "location": location,
                "nodes": sum(s.nodes for s in shapes),
                "availableNodes": sum(s.available_nodes for s in shapes),
                "devicesPerNode": max(s.device_total for s in shapes),
                "largestSingleNode": {"devices": largest, "memoryGb": memory},
                "largestMultiNode": None
                if budget["refusal"]
                else self._largest_gang(subscription_id, location, key, kind, vendor, shapes, priced, headroom),
                "pricePerAcceleratorHour": _price_ranges(priced),
                "quota": headroom,
                "budget": {
                    "refusal": budget["refusal"],
                    "currencies": allowed_currencies,
                    "excludedCurrencies": sorted(
                        {
                            s.terms.currency
                            for s in shapes
                            if s.terms is not None
                            and allowed_currencies is not None
                            and s.terms.currency not in allowed_currencies
                        }
                    ),
                },
                "allowedNow": allowed,
            },
        }

    def _largest_now(
        self,
        subscription_id: str,
        location: str,
        key: str,
        kind: str,
        vendor: str | None,
        shapes: list[FleetShape],
        priced: list[BillingTerms],
    ) -> tuple[int, int]:
        """The largest number of devices one node takes now (and its free GiB of device memory), by binary search
        over the placement index's candidate reads: (0, 0) when none has room. Only nodes billing within ``priced``
        (the prices of the nodes the caller sees, in the currencies its budgets allow): a job's price ceiling is
        made of them, so placement would use no other."""
        within = tuple(priced)
        low, high, memory = 0, max(s.device_total for s in shapes), 0
        while low < high:
            wanted = (low + high + 1) // 2
            found = self._nodes.candidates(
                subscription_id, Demand(wanted, 0, key, location, within=within, kind=kind, vendor=vendor)
            )
            if found:
                # the device memory a request of ``wanted`` devices may ask there: what is free, up to what its devices
                # carry (placement's rule: memory is per device, domain/records.py per_device_memory_fits)
                low, memory = (
                    wanted,
                    max(
                        min(n.free_memory_gb, wanted * n.memory_gb_total // max(n.device_total, 1))
                        for n in found
                        if n.free_devices >= wanted
                    ),
                )
            else:
                high = wanted - 1
        return low, memory

    def _largest_gang(
        self,
        subscription_id: str,
        location: str,
        key: str,
        kind: str,
        vendor: str | None,
        shapes: list[FleetShape],
        priced: list[BillingTerms],
        headroom: dict[str, Any] | None,
    ) -> dict[str, int] | None:
        """The largest gang of whole free nodes placed now (placement's own grouping: one model, one location, one
        price; its read of the placement index), as many as the tightest quota allows (``headroom``); None below two
        nodes (and never past the most a job may ask, :data:`MAX_GANG_NODES`)."""
        per_node = max(s.device_total for s in shapes)
        found = self._nodes.candidates(
            subscription_id,
            Demand(per_node, 0, key, location, within=tuple(priced), kind=kind, vendor=vendor),
            pages=GANG_CANDIDATE_PAGES,
        )
        groups: dict[BillingTerms, list[Any]] = {}
        for node in found:
            if node.free_devices >= per_node and node.terms is not None:
                groups.setdefault(node.terms, []).append(node)
        most = MAX_GANG_NODES if headroom is None else min(MAX_GANG_NODES, headroom["available"] // per_node)
        best = max(groups.values(), key=len, default=[])[:most]
        if len(best) < 2:
            return None
        memory = min(min(n.free_memory_gb, n.memory_gb_total) for n in best)
        return {
            "nodes": len(best),
            "devicesPerNode": per_node,
            "memoryGbPerNode": memory,
            "devices": per_node * len(best),
        }

    @staticmethod
    def _quota_headroom(key: str, quotas: dict[str, QuotaUsage]) -> dict[str, Any] | None:
        """The tightest limited quota an allocation of ``key`` counts in (domain/quotas.py ``quota_names``: its kind's —
        ``gpus`` for every GPU — and its model's): its name, limit, use and what is left; None when none is limited."""
        limited = [quotas[n] for n in quota_names(key) if n in quotas and quotas[n].headroom is not None]
        if not limited:
            return None
        tightest = min(limited, key=lambda u: u.headroom or 0)
        return {
            "name": tightest.name,
            "limit": tightest.limit,
            "current": tightest.current,
            "available": max(0, tightest.headroom or 0),
        }

    def _budget(self, subscription_id: str, now: datetime, resource_group: str | None) -> dict[str, Any]:
        """What the budgets covering work in ``resource_group`` (without tags) say (services/common/budgets.py
        ``view``): a refusal's message, and the currencies they allow (None: any). Without a resource group: the
        budgets covering the whole subscription."""
        said = budget_view(self._budgets.in_subscription(subscription_id), now, resource_group or "", {})
        return {
            "refusal": said.refusal.message if said.refusal else None,
            "currencies": sorted(said.currencies) if said.currencies is not None else None,
        }


def _price_ranges(terms: list[BillingTerms]) -> list[dict[str, str]]:
    """``[{"currency", "min", "max"}]`` per device-hour, per currency (never mixed), as decimal strings."""
    by_currency: dict[str, list[Decimal]] = {}
    for t in terms:
        by_currency.setdefault(t.currency, []).append(t.price_per_gpu_hour)
    return [
        {"currency": c, "min": format(min(p).normalize(), "f"), "max": format(max(p).normalize(), "f")}
        for c, p in sorted(by_currency.items())
    ]
