"""Capacity offers (services/api/offers.py): what a job submitted now could get in a location."""

from __future__ import annotations

from typing import Literal

from itl_accelerator.models.common import ApiModel


class OfferAccelerator(ApiModel):
    """The devices offered: a kind, who makes them (null: nodes registered before vendors were counted, until they
    are next written) and a model (null: the nodes name none). A job that names no model gets its kind's usual
    vendor's devices (NVIDIA GPUs): the offers of that vendor are its offers."""

    kind: str
    vendor: str | None = None
    model: str | None = None


class LargestRequest(ApiModel):
    """The largest request placed at once now: devices on one node, and the GiB of device memory free beside them."""

    devices: int
    memory_gb: int


class LargestGang(ApiModel):
    """The largest multi-node job placed at once now: ``nodes`` whole nodes of ``devicesPerNode`` devices and
    ``memoryGbPerNode`` GiB each, of one model, location and price (``devices`` in all) — ask for it with
    ``accelerator`` ``{count: devicesPerNode, memoryGb: memoryGbPerNode, nodes}``."""

    nodes: int
    devices_per_node: int
    memory_gb_per_node: int
    devices: int


class PriceRange(ApiModel):
    """Per device-hour, in one currency (decimal strings; never added across currencies)."""

    currency: str
    min: str
    max: str


class QuotaHeadroom(ApiModel):
    """The tightest quota with a limit the request would count in."""

    name: str
    limit: int
    current: int
    available: int


class BudgetAllowance(ApiModel):
    """What the budgets covering the work allow: ``refusal`` (a spent budget's message: nothing is allowed), the
    ``currencies`` its nodes must bill in (null: any), and ``excludedCurrencies``: the currencies of this offer's
    nodes the budgets do not count — those nodes are counted in its ``nodes`` but left out of what it offers (devices,
    prices), and this says why."""

    refusal: str | None = None
    currencies: list[str] | None = None
    excluded_currencies: list[str] = []


class EarliestStart(ApiModel):
    """When a job of ``devices`` per node on ``nodes`` nodes running ``durationMinutes`` would start at the earliest on
    the offer's nodes (domain/calendar.py: running work ends by its maximum duration, capacity reservations block their
    windows): ``startTime`` (UTC ISO 8601), null when it cannot be known — ``reason`` says why."""

    devices: int
    nodes: int
    duration_minutes: int
    start_time: str | None = None
    reason: str | None = None


class OfferProperties(ApiModel):
    accelerator: OfferAccelerator
    location: str
    nodes: int
    available_nodes: int
    devices_per_node: int
    largest_single_node: LargestRequest
    largest_multi_node: LargestGang | None = None
    price_per_accelerator_hour: list[PriceRange]
    quota: QuotaHeadroom | None = None
    budget: BudgetAllowance
    allowed_now: int
    #: asked with ``devices`` and ``durationMinutes`` only
    earliest_start: EarliestStart | None = None


class Offer(ApiModel):
    id: str
    name: str
    type: Literal["ITL.Accelerator/locations/offers"]
    properties: OfferProperties


class OfferList(ApiModel):
    value: list[Offer]
    next_link: str | None = None
