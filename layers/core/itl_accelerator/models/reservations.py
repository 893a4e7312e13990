"""Capacity reservations on the wire (issue 44): devices of one kind booked for a future window, in the shape of the
other tracked resources (``location``, ``tags``, ``properties``), with AWS EC2 Capacity Blocks' words where ARM has
none (``startTime``/``endTime``, ``state`` ``Scheduled``/``Active``/``Expired``).

A window is on whole UTC hours (``2026-12-08T09:00:00Z``; any offset is read as the instant it names), starts in the
future, lasts 1 hour to :data:`MAX_WINDOW_HOURS` and starts at most :data:`MAX_ADVANCE_DAYS` ahead. What is booked is
said as a job says what it asks for (``accelerator``: kind, count per node, model, vendor, memory per node, nodes),
with an optional ``maxPrice`` per device-hour (the most its window may be locked at)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import field_validator, model_validator

from itl_accelerator.models.asks import JobAccelerator, MaxPrice
from itl_accelerator.models.common import ApiModel, SystemData, TrackedResourceWrite

#: The longest window (hours): four weeks (EC2 Capacity Blocks sell up to 182 days in blocks of 1-14 days; a
#: marketplace of suppliers' nodes starts smaller).
MAX_WINDOW_HOURS = 28 * 24
#: How far ahead a window may start (days): eight weeks, as EC2 Capacity Blocks.
MAX_ADVANCE_DAYS = 56


def _whole_hour(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("A time must say its offset (e.g. '2026-12-08T09:00:00Z').")
    value = value.astimezone(UTC)
    if value.minute or value.second or value.microsecond:
        raise ValueError("A reservation's window starts and ends on whole UTC hours (e.g. '2026-12-08T09:00:00Z').")
    return value


class CapacityReservationPropertiesWrite(ApiModel):
    """What a client books: ``accelerator`` (as a job's: ``count`` devices of ``kind`` per node, ``nodes`` of them at
    once — a gang's —, ``model``/``vendor``/``memoryGb`` when said), the window ``startTime``..``endTime`` (whole UTC
    hours, the end exclusive) and an optional ``maxPrice``. Read-only properties a client echoes back are accepted and
    ignored."""

    accelerator: JobAccelerator
    start_time: datetime
    end_time: datetime
    max_price: MaxPrice | None = None
    # read-only, accepted so a GET body can be sent back
    provisioning_state: str | None = None
    state: str | None = None
    reserved_nodes: list[Any] | None = None
    billing_terms: dict[str, Any] | None = None
    total_cost: dict[str, Any] | None = None
    hours: int | None = None
    booked_by: str | None = None
    booked_at: str | None = None

    @field_validator("start_time", "end_time")
    @classmethod
    def _hours(cls, value: datetime) -> datetime:
        return _whole_hour(value)

    @model_validator(mode="after")
    def _window(self) -> CapacityReservationPropertiesWrite:
        hours = (self.end_time - self.start_time).total_seconds() / 3600
        if hours < 1:
            raise ValueError("endTime must be at least one hour after startTime.")
        if hours > MAX_WINDOW_HOURS:
            raise ValueError(f"A reservation's window lasts at most {MAX_WINDOW_HOURS} hours.")
        return self


class CapacityReservationWrite(TrackedResourceWrite):
    """PUT body: ``{"location", "tags"?, "properties": {...}}``: ``location`` is where its nodes are."""

    properties: CapacityReservationPropertiesWrite


class ReservedNode(ApiModel):
    """One node a reservation holds devices on: its ARM id, and how many devices and GiB it keeps there."""

    id: str
    devices: int
    memory_gb: int


class ReservationCost(ApiModel):
    """What the whole window costs at the locked price (billed used or not): a decimal string in ``currency``."""

    amount: str
    currency: str


class CapacityReservationProperties(ApiModel):
    """A reservation as returned: what was booked, ``provisioningState`` (``Succeeded``: booking is synchronous),
    ``state`` (``Scheduled`` before the window, ``Active`` in it, ``Expired`` after), ``reservedNodes``,
    ``billingTerms`` (the price per device-hour locked at booking), ``hours``, ``totalCost`` (hours x devices x
    price), ``bookedBy`` (the token's subject) and ``bookedAt``."""

    accelerator: dict[str, Any]
    start_time: str
    end_time: str
    max_price: dict[str, Any] | None = None
    provisioning_state: Literal["Succeeded"]
    state: Literal["Scheduled", "Active", "Expired"]
    reserved_nodes: list[ReservedNode]
    billing_terms: dict[str, Any]
    hours: int
    total_cost: ReservationCost
    booked_by: str
    booked_at: str


class CapacityReservation(ApiModel):
    """A capacity reservation resource."""

    id: str
    name: str
    type: str
    location: str
    tags: dict[str, str] = {}
    etag: str
    system_data: SystemData
    properties: CapacityReservationProperties


class CapacityReservationList(ApiModel):
    """A page of capacity reservations."""

    value: list[CapacityReservation]
    next_link: str | None = None
