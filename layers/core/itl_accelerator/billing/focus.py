"""Charge lines → a FOCUS 1.2 cost-and-usage file (gzipped CSV) and its manifest.

One :class:`ChargeLine` is one allocation's GPU time in one UTC window of at most an hour (or a correction of an
earlier-exported line): what the allocation is billed as (billing/descriptor.py ``BillingDescriptor``, which it
extends) and that window's charge (a capacity reservation's hour is two: its used and unused portions, below). It
becomes one FOCUS row, whose columns are one table, :data:`COLUMNS`: each
column's name and how its cell is computed from the line. docs/BILLING.md lists every column; the choices are these.

**Format: CSV, gzipped, not Parquet.** Costs must reach the reader as the exact decimal text metering computed, and
CSV carries text as it is (Parquet would need a decimal128 precision/scale chosen up front, or floats). The writer
uses only the standard library (``csv``, ``gzip``), so the Lambda layer gains no pyarrow (~100 MB, over the layer
limit). It streams: one row is formatted, compressed and hashed at a time, in constant memory whatever the count.
UTF-8, a header row of column names, RFC 4180 quoting and line ends (CRLF), an empty cell for null. gzip with
``mtime=0`` and no file name: the same lines give byte-identical output and so the same SHA-256.

**Numbers** are plain decimal text from :class:`~decimal.Decimal` (``format(x, "f")``): never an exponent or a
float artefact, ``-0`` written ``0``. ``BilledCost`` and ``EffectiveCost`` are the line's ``cost`` exactly as given
(metering rounded it to 6 decimals); ``ListUnitPrice`` and ``ContractedUnitPrice`` its ``price_per_gpu_hour``.
``PricingQuantity`` is billable GPU-hours and ``ConsumedQuantity`` used GPU-hours: GPU-seconds / 3600, which for
most second counts has no finite decimal, so rounded half-even to 13 decimals (trailing zeros dropped).
``ListCost`` and ``ContractedCost`` are price * billable GPU-seconds / 3600 rounded the same way: the charge before
metering's rounding to 6 decimals (so they differ from ``BilledCost`` by that rounding only, never by a discount:
none exist). FOCUS requires ``ListUnitPrice * PricingQuantity`` to match ``ListCost``; focus-validator checks it
within 1e-9 (absolute below 1, relative above; only with a public price list, the tests enable it); 13 decimals is the fewest that keeps every whole GPU-second at every
price the API accepts (up to 1,000,000 per GPU-hour) inside that, whereas the 6-decimal ``cost`` would miss it by up
to 5e-7. The exact integer GPU-seconds are in ``x_ConsumedGpuSeconds`` and ``x_BillableGpuSeconds``.

**Dates** are ISO 8601 in UTC with ``Z`` (``2025-01-31T23:00:00Z``); whole seconds, so windows must be. Periods have
exclusive ends: ``ChargePeriodStart``/``End`` = the window; ``BillingPeriodStart``/``End`` = the UTC calendar month
holding ``window_start`` (end = the first instant of the next month), also for a window that runs into the next month.

**Fixed values and mappings**, chosen against the 1.2 rules focus-validator bundles (``model-1.2.0.1.json``):

- ``ProviderName`` and ``InvoiceIssuerName`` "ITL Accelerator": the provider sells the accelerator time and charges
  for it.
  ``PublisherName`` = the node's supplier (``properties.owner``): as on a marketplace, the supplier produces what is
  sold and sets its price; the provider sells it and is paid. (focus-validator reads ProviderName ≠
  InvoiceIssuerName as "paid to a third party" and then requires ``BilledCost`` 0: should invoicing move to another
  ITL entity, both names move together.)
- ``BillingAccountId`` ``/subscriptions/{sub}`` (fully qualified, as FOCUS recommends and like ``SubAccountId``);
  ``BillingAccountName`` null: the provider knows no display name of a subscription (naming is not supported here).
  ``SubAccountId`` ``/subscriptions/{sub}/resourceGroups/{rg}``, ``SubAccountName`` the resource group; one kind of
  sub account, so no ``SubAccountType``.
- ``ChargeCategory`` "Usage", ``ChargeFrequency`` "Usage-Based", ``PricingCategory`` "Standard" (the node's price in
  force, no commitments, no spot), ``PricingUnit`` and ``ConsumedUnit`` the device-hours of the allocation's
  accelerator kind: "GPU-Hours", "TPU-Hours", "NPU-Hours" (FOCUS unit format ``<count unit>-<plural time unit>``;
  the price is published per device-hour of the node's kind). ``ChargeDescription`` names the kind and model
  ("TPU time (Google v5e) of job train-1 on node tpu-1 (TPU-V5E-8)"). ``ChargeClass`` "Correction" on a line
  that corrects an already exported one, null otherwise: FOCUS reserves it for corrections of a previously invoiced
  period, and until invoices exist a published daily file is what FinOps tools have taken in. A correction's costs
  and quantities are the delta (may be negative); its price, SKU and periods are those of the line it corrects.
- ``ServiceCategory`` "AI and Machine Learning"; ``ServiceName`` / ``ServiceSubcategory`` per service: instances →
  "ITL Accelerator Ollama Instances" / "Generative AI" (LLM serving); jobs → "ITL Accelerator Jobs" / "Machine
  Learning" (training, batch inference); capacity reservations → "ITL Accelerator Capacity Reservations" /
  "Machine Learning" (devices held for that work; FOCUS allows under "AI and Machine Learning" only "AI
  Platforms", "Bots", "Generative AI", "Machine Learning", "Natural Language Processing" and "Other").
- ``CapacityReservationId`` / ``CapacityReservationStatus`` (FOCUS 1.2; docs/BILLING.md, "Capacity reservations"):
  null / null on a line of no reservation. A reservation is billed every hour of its window at its locked price, by
  its own meters (one per node); a job in it is metered at price 0 and carries its id, so it is billed nothing
  more. A job's line: the reservation's id / "Used". A reservation's hour: its id, split by the device-seconds that
  jobs in it used on its node in that hour (recorded when the export claims the hour,
  :data:`USED_GPU_SECONDS_KEY`) into a "Used" line of those and an "Unused" line of the rest, whose costs add up to
  the hour's exactly (:func:`split_reserved`) — FOCUS: unused capacity is shown as rows "Unused", consumption as
  rows "Used". So a file's ``BilledCost`` of a reservation is devices x hours x price, once; its "Unused" rows are
  what nothing used.
- ``ResourceId`` / ``ResourceName`` / ``ResourceType`` the ARM id, name and type of the instance, job or capacity
  reservation; ``SkuId``
  the node's SKU name; ``RegionId`` and ``RegionName`` the node's location (nodes have no other region name).
- ``Tags`` the resource's ARM tags as a JSON object (keys sorted), null when it has none: ARM tags are the one
  user-defined scheme, so keys carry no prefix; the provider defines no tags of its own.
- ``InvoiceId`` null: no invoices exist yet. (focus-validator 2.2.1 then reports ``InvoiceId-C-005-C``, "not null
  when invoiced", failed although its OR rule ``InvoiceId-C-003-C`` passes; without the column it fails the
  recommended presence rule and its dependants. ``./dev focus-validate`` explains and discounts that one.)
- ``CommitmentDiscountStatus`` present and always null (no commitment discount applies to any row): FOCUS does not
  require it here, but the validator's ``ConsumedQuantity`` nullability rules query it and fail when it is absent.
- Custom columns (``x_`` prefix, after the FOCUS ones): ``x_NodeId`` and ``x_NodeName`` (the node the work ran on),
  ``x_ConsumedGpuSeconds`` and ``x_BillableGpuSeconds`` (exact integers of device-seconds of the row's kind: the
  names kept from when every device was a GPU, so a finance import keeps working), ``x_AcceleratorKind`` and
  ``x_AcceleratorModel`` (what the devices were: ``GPU``/``H100``; a model not recorded, for allocations metered
  before kinds existed, is empty), and ``x_AllocationId``: the allocation a
  row bills (one instance provisioning, one job — the operation that started it), so the rows of a job deleted
  and submitted again under the same name, which share a ``ResourceId``, stay told apart; ``x_Attempt``: which run
  of a job retried on failure the row is of (1, 2, ...; 1 for every other row), each attempt metered on its own.

**Applicability criteria** (:data:`FOCUS_APPLICABILITY_CRITERIA`, passed to focus-validator): the provider bills
provisioned resources, has capacity reservations, regions, resource types, sub accounts (resource groups) and tags,
and measures usage. Not given: account naming, availability zones, commitment discounts, several pricing
categories / sub account types / billing account types, negotiated pricing, pricing in another currency than the
billing one, virtual currency, and a public price list — prices are each node's, set by its supplier; there is no
provider-wide list and no price ids (so no ``SkuPriceId``, ``SkuMeter``, ``SkuPriceDetails``). Nor
``UNIT_PRICING_SUPPORTED``, although prices are per unit: the validator applies a rule when *any* of its criteria is
given, and the only rules naming it are those that FOCUS applies to unit pricing *and* a published price list.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_EVEN, Context, Decimal
from functools import lru_cache
from typing import Any, BinaryIO

from itl_accelerator.billing.descriptor import REQUIRED_FIELDS, BillingDescriptor, stored_fields
from itl_accelerator.billing.metering import cost_of

FOCUS_VERSION = "1.2"
PROVIDER_NAME = "ITL Accelerator"
INVOICE_ISSUER_NAME = PROVIDER_NAME
SERVICE_CATEGORY = "AI and Machine Learning"
GPU_HOURS = "GPU-Hours"


def hours_unit(kind: str) -> str:
    """The FOCUS unit of device time of ``kind``: ``GPU-Hours``, ``TPU-Hours``."""
    return f"{kind}-Hours"


#: Decimals of GPU-hour quantities and of ListCost/ContractedCost (a GPU-second is 0.0002777777778 GPU-hours).
QUANTITY_DECIMALS = 13
#: zlib's default level: near level 9's size at a fraction of its time.
GZIP_LEVEL = 6

#: What this provider supports, in focus-validator's terms (``--applicability-criteria``); see the module docstring.
FOCUS_APPLICABILITY_CRITERIA: tuple[str, ...] = (
    "BILLING_BASED_ON_PROVISIONED_RESOURCES_SUPPORTED",
    "CAPACITY_RESERVATION_SUPPORTED",
    "REGION_SUPPORTED",
    "RESOURCE_TYPE_ASSIGNMENT_SUPPORTED",
    "SUB_ACCOUNT_SUPPORTED",
    "TAGGING_SUPPORTED",
    "USAGE_MEASUREMENT_SUPPORTED",
)


@dataclass(frozen=True)
class _Service:
    name: str
    subcategory: str
    noun: str


#: The service key of capacity reservations: a reservation's own meters bill under it (its whole window).
RESERVATIONS = "reservations"

SERVICES: dict[str, _Service] = {
    "instances": _Service("ITL Accelerator Ollama Instances", "Generative AI", "Ollama instance"),
    "jobs": _Service("ITL Accelerator Jobs", "Machine Learning", "job"),
    RESERVATIONS: _Service("ITL Accelerator Capacity Reservations", "Machine Learning", "capacity reservation"),
}

#: FOCUS CapacityReservationStatus values.
USED, UNUSED = "Used", "Unused"
#: The key, in a reservation's claimed descriptor (``billed.descriptor`` and its bill entry: never on a meter), of
#: the device-seconds that jobs in the reservation used on its node in the hour (services/schedules/billing_export.py
#: records it when it claims the hour): how much of the hour's charge is the used portion.
USED_GPU_SECONDS_KEY = "capacityReservationUsedGpuSeconds"

_CURRENCY = re.compile(r"^[A-Z]{3}$")
#: Wide enough that products and sums of bounded money and quantities are exact (the default context keeps 28 digits).
_EXACT = Context(prec=60)
_QUANTUM = Decimal(1).scaleb(-QUANTITY_DECIMALS)
_SECONDS_PER_HOUR = Decimal(3600)


@dataclass(frozen=True, kw_only=True)
class ChargeLine(BillingDescriptor):
    """One row: what an allocation is billed as (its :class:`~itl_accelerator.billing.descriptor.BillingDescriptor`
    fields, by keyword) and its usage in one UTC window (``window_start`` inclusive, ``window_end`` exclusive, at
    most an hour apart), or with ``correction`` the delta of an earlier-exported line (may be negative).
    ``ValueError`` when built invalid."""

    allocation_id: str  # the allocation billed: the operation that started the instance or job (x_AllocationId)
    window_start: datetime  # aware, whole seconds; inclusive
    window_end: datetime  # exclusive; at most an hour after window_start
    gpu_seconds: int  # used device-seconds (ConsumedQuantity)
    billable_gpu_seconds: int  # after the node's rounding rule (PricingQuantity)
    price_per_gpu_hour: Decimal  # list price = the price charged, per device-hour (ListUnitPrice, ContractedUnitPrice)
    currency: str  # ISO 4217 (BillingCurrency)
    cost: Decimal  # billable_gpu_seconds * price / 3600, rounded by metering; written as given (BilledCost)
    correction: bool = False  # a delta of an earlier-exported line (ChargeClass "Correction"); may be negative
    #: with capacity_reservation_id: "Used" (a job in the reservation; the used portion of the reservation's hour)
    #: or "Unused" (its unused portion); "" on a line of no reservation (CapacityReservationStatus)
    capacity_reservation_status: str = ""

    def __post_init__(self) -> None:
        # An invalid line is the caller's bug: refuse it here, before any byte of a file is written.
        for name in ("allocation_id", *REQUIRED_FIELDS):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"ChargeLine.{name} must be a non-empty string, not {value!r}")
        if self.service not in SERVICES:
            raise ValueError(f"ChargeLine.service must be one of {sorted(SERVICES)}, not {self.service!r}")
        for name in ("window_start", "window_end"):
            value = getattr(self, name)
            if not isinstance(value, datetime) or value.utcoffset() is None or value.microsecond:
                raise ValueError(f"ChargeLine.{name} must be a timezone-aware datetime in whole seconds: {value!r}")
        if not timedelta(0) < self.window_end - self.window_start <= timedelta(hours=1):
            raise ValueError(f"ChargeLine window must be (0, 1 h]: {self.window_start} .. {self.window_end}")
        for name in ("gpu_seconds", "billable_gpu_seconds"):
            value = getattr(self, name)
            if type(value) is not int or (value < 0 and not self.correction):
                raise ValueError(f"ChargeLine.{name} must be an int (>= 0 unless a correction): {value!r}")
        for name in ("price_per_gpu_hour", "cost"):
            value = getattr(self, name)
            if not isinstance(value, Decimal) or not value.is_finite():
                raise ValueError(f"ChargeLine.{name} must be a finite Decimal, not {value!r}")
        if self.price_per_gpu_hour < 0 or (self.cost < 0 and not self.correction):
            raise ValueError(f"ChargeLine price and cost must be >= 0 (unless a correction): {self!r}")
        if not isinstance(self.tags, dict) or not all(isinstance(v, str) for v in (*self.tags, *self.tags.values())):
            raise ValueError(f"ChargeLine.tags must map str to str: {self.tags!r}")
        if not isinstance(self.currency, str) or not _CURRENCY.match(self.currency):
            raise ValueError(f"ChargeLine.currency must be an ISO 4217 code: {self.currency!r}")
        allowed = (USED, UNUSED) if self.capacity_reservation_id else ("",)
        if self.capacity_reservation_status not in allowed:
            raise ValueError(
                f"ChargeLine.capacity_reservation_status must be one of {allowed} with capacity_reservation_id "
                f"{self.capacity_reservation_id!r}, not {self.capacity_reservation_status!r}"
            )


def _utc(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def billed_lines(
    allocation_id: str,
    descriptor: dict[str, Any],
    segments: list[dict[str, Any]],
    *,
    correction_of: int | None = None,
) -> Iterator[ChargeLine]:
    """The charge lines of an allocation-hour's billed price segments (``start``/``end`` epoch seconds,
    ``gpuSeconds``, ``billableGpuSeconds``, ``pricePerGpuHour``, ``currency``, ``cost``) — or, with
    ``correction_of`` (the hour's start, epoch seconds), of a correction's deltas (the same keys but the window's),
    each over that hour. ``descriptor``: what the allocation is billed as, as stored (billing/descriptor.py: every
    shape it has had reads as it did; ``KeyError`` when a field without default is missing).

    A capacity reservation's own hour (``service`` :data:`RESERVATIONS`) is split by the device-seconds its claim
    recorded as used by jobs in it (:data:`USED_GPU_SECONDS_KEY`, none when absent): a ``Used`` line of those and an
    ``Unused`` line of the rest (:func:`split_reserved`), whose costs add up to the segment's exactly; a correction
    of it is one line, ``Used`` when jobs used the hour, else ``Unused``. A job in a reservation is ``Used``."""
    billed = stored_fields(descriptor)
    # a job's later attempt or further node part bills under the job's allocation id (billing/descriptor.py)
    allocation = billed["job_allocation_id"] or allocation_id
    reserved = bool(billed["capacity_reservation_id"]) and billed["service"] == RESERVATIONS
    used_left = int(descriptor.get(USED_GPU_SECONDS_KEY) or 0) if reserved else 0
    status = (UNUSED if reserved and used_left <= 0 else USED) if billed["capacity_reservation_id"] else ""
    for part in segments:
        if correction_of is None:
            start, end = int(part["start"]), int(part["end"])
        else:
            start, end = correction_of, correction_of + 3600
        line = ChargeLine(
            **billed,
            allocation_id=allocation,
            window_start=_utc(start),
            window_end=_utc(end),
            gpu_seconds=int(part["gpuSeconds"]),
            billable_gpu_seconds=int(part["billableGpuSeconds"]),
            price_per_gpu_hour=Decimal(part["pricePerGpuHour"]),
            currency=part["currency"],
            cost=Decimal(part["cost"]),
            correction=correction_of is not None,
            capacity_reservation_status=status,
        )
        if not reserved or correction_of is not None:
            yield line
            continue
        used = min(used_left, line.gpu_seconds)
        used_left -= used
        yield from split_reserved(line, used)


def split_reserved(line: ChargeLine, used: int) -> Iterator[ChargeLine]:
    """A reservation's hour ``line`` as its used portion (``used`` of its device-seconds; ``Used``) and its unused
    portion (the rest; ``Unused``), the empty one left out. The used portion bills ``min(used, billable)``
    billable device-seconds at metering's rounding (billing/metering.py ``cost_of``), the unused one the rest of the
    line's billable seconds and exactly the rest of its cost: the two add up to the line, never a micro-unit more."""
    if used <= 0:
        yield replace(line, capacity_reservation_status=UNUSED)
        return
    if used >= line.gpu_seconds:
        yield replace(line, capacity_reservation_status=USED)
        return
    billable = min(used, line.billable_gpu_seconds)
    cost = min(cost_of(billable, line.price_per_gpu_hour), line.cost)
    yield replace(line, gpu_seconds=used, billable_gpu_seconds=billable, cost=cost, capacity_reservation_status=USED)
    yield replace(
        line,
        gpu_seconds=line.gpu_seconds - used,
        billable_gpu_seconds=line.billable_gpu_seconds - billable,
        cost=line.cost - cost,
        capacity_reservation_status=UNUSED,
    )


def _num(value: Decimal) -> str:
    """Plain decimal text: no exponent, zero without a sign, and always a decimal point (``1`` is written ``1.0``):
    readers infer a CSV column's type from its cells, and a day whose quantities are all whole GPU-hours would
    otherwise read as an integer column, which FOCUS forbids (focus-validator: "MUST be of type DECIMAL")."""
    text = format(abs(value) if value.is_zero() else value, "f")
    return text if "." in text else text + ".0"


@lru_cache(maxsize=4096)
def _per_hour(gpu_seconds: int, price: Decimal = Decimal(1)) -> str:
    """``price * gpu_seconds / 3600`` (GPU-hours, when ``price`` is 1) to :data:`QUANTITY_DECIMALS` decimals, without
    trailing zeros (the scale of a computed value means nothing). Cached: most windows are whole hours on a few
    GPU counts at a few prices, so the same few values recur."""
    exact = _EXACT.divide(_EXACT.multiply(price, Decimal(gpu_seconds)), _SECONDS_PER_HOUR)
    return _num(exact.quantize(_QUANTUM, ROUND_HALF_EVEN, _EXACT).normalize(_EXACT))


#: Text of an integer (GPU-seconds recur: whole hours on a few GPU counts).
_int_text = lru_cache(maxsize=4096)(str)


@lru_cache(maxsize=4096)
def _instant(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@lru_cache(maxsize=256)
def billing_period(year: int, month: int) -> tuple[str, str]:
    """The UTC calendar month as FOCUS instants: (inclusive start, exclusive end = first instant of the next)."""
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC) if month == 12 else datetime(year, month + 1, 1, tzinfo=UTC)
    return _instant(start), _instant(end)


@lru_cache(maxsize=4096)
def _billing_period_of(window_start: datetime) -> tuple[str, str]:
    start = window_start.astimezone(UTC)
    return billing_period(start.year, start.month)


_TAGS_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@lru_cache(maxsize=256)
def _tags_cell(items: tuple[tuple[str, str], ...]) -> str:
    """The Tags cell of a resource's tags, cached by their items: a resource's windows, and often many resources,
    share one tag set (ARM caps a set at 50 tags of <= 768 characters, so the cache stays below ~20 MB)."""
    return _TAGS_JSON.encode(dict(items))


#: How one cell of a row is computed from a line (what is billed and its charge): its CSV text, "" for null.
Cell = Callable[[ChargeLine], str]


def _fixed(text: str) -> Cell:
    """A cell that is the same on every row ("" for a column that is always null)."""
    return lambda line: text


def _price(line: ChargeLine) -> str:
    return _num(line.price_per_gpu_hour)


def _cost(line: ChargeLine) -> str:
    return _num(line.cost)


def _list_cost(line: ChargeLine) -> str:
    return _per_hour(line.billable_gpu_seconds, line.price_per_gpu_hour)


def _unit(line: ChargeLine) -> str:
    return hours_unit(line.accelerator_kind)


def _description(line: ChargeLine) -> str:
    kind, model = line.accelerator_kind, line.accelerator_model
    time = f"{kind} time ({model})" if model else f"{kind} time"
    noun = SERVICES[line.service].noun
    where = f"on node {line.node_name} ({line.sku})"
    if line.service == RESERVATIONS:
        booked = f"{line.gpus} {kind}{'' if line.gpus == 1 else 's'} booked"
        portion = "used by jobs in it" if line.capacity_reservation_status == USED else "unused"
        description = f"{time} reserved by {noun} {line.resource_name} {where}, {booked}: {portion}"
    elif line.capacity_reservation_id:
        reservation = line.capacity_reservation_id.rsplit("/", 1)[-1]
        description = f"{time} of {noun} {line.resource_name} {where} in capacity reservation {reservation}"
        description += " (billed by the reservation)"
    else:
        description = f"{time} of {noun} {line.resource_name} {where}"
    return f"Correction: {description}" if line.correction else description


#: The FOCUS columns, one entry each: column name → its cell (the module docstring and docs/BILLING.md, "Columns",
#: say why each holds what it holds). In file order: the FOCUS-defined columns in the spec's (alphabetical) order,
#: then the provider's own (``x_`` prefix). A new billed field is a descriptor field and one entry here.
COLUMNS: dict[str, Cell] = {
    "BilledCost": _cost,
    "BillingAccountId": lambda line: f"/subscriptions/{line.subscription_id}",
    "BillingAccountName": _fixed(""),
    "BillingCurrency": lambda line: line.currency,
    "BillingPeriodEnd": lambda line: _billing_period_of(line.window_start)[1],
    "BillingPeriodStart": lambda line: _billing_period_of(line.window_start)[0],
    "CapacityReservationId": lambda line: line.capacity_reservation_id,
    "CapacityReservationStatus": lambda line: line.capacity_reservation_status,
    "ChargeCategory": _fixed("Usage"),
    "ChargeClass": lambda line: "Correction" if line.correction else "",
    "ChargeDescription": _description,
    "ChargeFrequency": _fixed("Usage-Based"),
    "ChargePeriodEnd": lambda line: _instant(line.window_end),
    "ChargePeriodStart": lambda line: _instant(line.window_start),
    "CommitmentDiscountStatus": _fixed(""),
    "ConsumedQuantity": lambda line: _per_hour(line.gpu_seconds),
    "ConsumedUnit": _unit,
    "ContractedCost": _list_cost,
    "ContractedUnitPrice": _price,
    "EffectiveCost": _cost,
    "InvoiceId": _fixed(""),
    "InvoiceIssuerName": _fixed(INVOICE_ISSUER_NAME),
    "ListCost": _list_cost,
    "ListUnitPrice": _price,
    "PricingCategory": _fixed("Standard"),
    "PricingQuantity": lambda line: _per_hour(line.billable_gpu_seconds),
    "PricingUnit": _unit,
    "ProviderName": _fixed(PROVIDER_NAME),
    "PublisherName": lambda line: line.supplier,
    "RegionId": lambda line: line.region,
    "RegionName": lambda line: line.region,
    "ResourceId": lambda line: line.resource_id,
    "ResourceName": lambda line: line.resource_name,
    "ResourceType": lambda line: line.resource_type,
    "ServiceCategory": _fixed(SERVICE_CATEGORY),
    "ServiceName": lambda line: SERVICES[line.service].name,
    "ServiceSubcategory": lambda line: SERVICES[line.service].subcategory,
    "SkuId": lambda line: line.sku,
    "SubAccountId": lambda line: f"/subscriptions/{line.subscription_id}/resourceGroups/{line.resource_group}",
    "SubAccountName": lambda line: line.resource_group,
    "Tags": lambda line: _tags_cell(tuple(line.tags.items())) if line.tags else "",
    "x_NodeId": lambda line: line.node_id,
    "x_NodeName": lambda line: line.node_name,
    "x_ConsumedGpuSeconds": lambda line: _int_text(line.gpu_seconds),
    "x_BillableGpuSeconds": lambda line: _int_text(line.billable_gpu_seconds),
    "x_AllocationId": lambda line: line.allocation_id,
    "x_AcceleratorKind": lambda line: line.accelerator_kind,
    "x_AcceleratorModel": lambda line: line.accelerator_model,
    "x_Attempt": lambda line: str(line.attempt),
}
#: FOCUS-defined columns written, in the spec's (alphabetical) order.
SPEC_COLUMNS: tuple[str, ...] = tuple(name for name in COLUMNS if not name.startswith("x_"))
#: Provider-defined columns, after the FOCUS ones.
CUSTOM_COLUMNS: tuple[str, ...] = tuple(name for name in COLUMNS if name.startswith("x_"))
FOCUS_COLUMNS: tuple[str, ...] = tuple(COLUMNS)
_CELLS: tuple[Cell, ...] = tuple(COLUMNS.values())


def focus_row(line: ChargeLine) -> dict[str, str]:
    """The FOCUS row of ``line``: every column of :data:`FOCUS_COLUMNS`, as CSV cell text ("" for null)."""
    return {name: cell(line) for name, cell in COLUMNS.items()}


@dataclass
class ExportSummary:
    """What :func:`write_focus_csv_gz` wrote: rows (without the header), cost per currency, GPU-seconds used and
    billable, and the SHA-256 (hex) and size of the gzipped bytes."""

    rows: int
    totals: dict[str, Decimal]
    gpu_seconds: int
    sha256: str
    size_bytes: int
    billable_gpu_seconds: int = 0


class _HashingSink:
    """A write-only file that hashes and counts what passes through to ``out``."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.sha256.update(view)
        self.size += len(view)
        self._out.write(view)
        return len(view)

    def flush(self) -> None:
        flush = getattr(self._out, "flush", None)
        if flush is not None:
            flush()


def focus_cells(line: ChargeLine) -> tuple[str, ...]:
    """The cells of ``line``'s FOCUS row in :data:`FOCUS_COLUMNS` order ("" for null)."""
    return tuple(cell(line) for cell in _CELLS)


def write_focus_csv_gz(lines: Iterable[ChargeLine], out: BinaryIO) -> ExportSummary:
    """Write ``lines`` to ``out`` as a gzipped FOCUS CSV, one line at a time (constant memory); ``out`` stays open."""
    sink = _HashingSink(out)
    totals: dict[str, Decimal] = {}
    rows = gpu_seconds = billable_gpu_seconds = 0
    gz = gzip.GzipFile(filename="", mode="wb", fileobj=sink, compresslevel=GZIP_LEVEL, mtime=0)
    with gz, io.TextIOWrapper(gz, encoding="utf-8", newline="") as text:
        writer = csv.writer(text)
        writer.writerow(FOCUS_COLUMNS)
        for line in lines:
            writer.writerow(focus_cells(line))
            rows += 1
            totals[line.currency] = _EXACT.add(totals.get(line.currency, Decimal(0)), line.cost)
            gpu_seconds += line.gpu_seconds
            billable_gpu_seconds += line.billable_gpu_seconds
    return ExportSummary(
        rows=rows,
        totals=dict(sorted(totals.items())),
        gpu_seconds=gpu_seconds,
        sha256=sink.sha256.hexdigest(),
        size_bytes=sink.size,
        billable_gpu_seconds=billable_gpu_seconds,
    )


def manifest(day: date, summary: ExportSummary, object_key: str) -> dict[str, Any]:
    """The JSON-able manifest written beside a day's export. ``billingPeriod`` is the month holding ``day``; each row
    carries its own (a correction of an earlier month's line keeps that month's)."""
    period_start, period_end = billing_period(day.year, day.month)
    return {
        "focusVersion": FOCUS_VERSION,
        "day": day.isoformat(),
        "billingPeriod": {"start": period_start, "end": period_end},
        "objectKey": object_key,
        "format": "csv",
        "compression": "gzip",
        "contentType": "text/csv; charset=utf-8",
        "columns": list(FOCUS_COLUMNS),
        "rows": summary.rows,
        "totals": {currency: _num(total) for currency, total in sorted(summary.totals.items())},
        "gpuSeconds": summary.gpu_seconds,
        "billableGpuSeconds": summary.billable_gpu_seconds,
        "sha256": summary.sha256,
        "sizeBytes": summary.size_bytes,
    }
