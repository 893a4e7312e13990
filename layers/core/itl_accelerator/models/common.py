"""Shared ARM envelope parts: base model config, ``systemData``, ``sku``, tags, list pages, error bodies."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal
from functools import cache
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    WithJsonSchema,
    field_validator,
)
from pydantic.alias_generators import to_camel

from itl_accelerator.billing.metering import MAX_PRICE_PER_GPU_HOUR
from itl_accelerator.domain.accelerators import KNOWN_KINDS

ProvisioningState = Literal["Succeeded", "Failed", "Canceled", "Accepted", "Provisioning", "Updating", "Deleting"]
CreatedByType = Literal["User", "Application", "ManagedIdentity", "Key"]

_DECIMAL_TEXT = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def strict_decimal(value: Any) -> Any:
    """A money amount as sent: a JSON number, or a string of ASCII digits with an optional ``.`` fraction — never a
    string Python's ``Decimal`` reads more loosely (``"2_5"`` is 25 to it, ``"١٢"`` 12, ``"1E+3"`` 1000, ``" 12"``
    12): ``ValueError`` for those, and for a boolean."""
    if isinstance(value, bool):
        raise ValueError("An amount is a number, not true or false.")
    if isinstance(value, str) and not _DECIMAL_TEXT.fullmatch(value):
        raise ValueError(
            f"'{value[:40]}' is not a decimal amount: ASCII digits with an optional '.' and fraction (e.g. '2.50')."
        )
    return value


#: Money amounts: Decimal in code (never float arithmetic), a JSON number on the wire; in, a JSON number or a plain
#: decimal string (:func:`strict_decimal`).
Money = Annotated[
    Decimal,
    BeforeValidator(strict_decimal),
    Field(ge=0, le=MAX_PRICE_PER_GPU_HOUR, max_digits=14, decimal_places=6),
    PlainSerializer(float, return_type=float, when_used="json"),
]

#: A decimal figure the API answers as a JSON number, unbounded (a spend so far, a threshold crossed): Decimal in code.
Number = Annotated[Decimal, PlainSerializer(float, return_type=float, when_used="json")]

#: ISO 4217 codes that name no money a price can be in: "no currency" and the code reserved for testing.
NOT_MONEY_CODES = frozenset({"XXX", "XTS"})


@cache
def currency_codes() -> frozenset[str]:
    """The ISO 4217 alphabetic codes a price may be in (from pycountry's ISO 4217 table, less
    :data:`NOT_MONEY_CODES`). Loaded on first use: a function that never validates a price never reads the table."""
    import pycountry

    return frozenset(c.alpha_3 for c in pycountry.currencies) - NOT_MONEY_CODES


def _iso_4217(value: str) -> str:
    if value not in currency_codes():
        raise ValueError(f"'{value[:16]}' is not an ISO 4217 currency code (e.g. USD, EUR, GBP).")
    return value


#: A currency: an upper-case ISO 4217 code that names money (refused otherwise, e.g. ``ABC``, ``usd``, ``XXX``).
CurrencyCode = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$"), AfterValidator(_iso_4217)]

#: The instants a request may name (UTC): from the Unix epoch to the start of year 9000. Wider bounds help nobody —
#: the provider holds nothing before 1970 — and a bound near year 1 or 9999 overflows Python's ``datetime`` as soon
#: as an offset is applied or an hour added (``0001-01-01T00:00:00+01:00`` is before year 1 in UTC).
EARLIEST_INSTANT = datetime(1970, 1, 1, tzinfo=UTC)
LATEST_INSTANT = datetime(9000, 1, 1, tzinfo=UTC)


def _bounded_instant(value: datetime) -> datetime:
    """``value`` in UTC; ``ValueError`` (400 naming the field) when it has no time zone or lies outside
    [:data:`EARLIEST_INSTANT`, :data:`LATEST_INSTANT`)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("A time must carry a time zone (e.g. 'Z' or '+01:00').")
    try:
        utc = value.astimezone(UTC)
    except OverflowError:
        utc = None
    if utc is None or not EARLIEST_INSTANT <= utc <= LATEST_INSTANT:
        raise ValueError("A time must lie between 1970-01-01T00:00:00Z and 9000-01-01T00:00:00Z.")
    return utc


def _instant_text(value: Any) -> Any:
    """An instant is an ISO 8601 string (pydantic would also read a number as epoch seconds)."""
    if not isinstance(value, str | datetime):
        raise ValueError("A time is an ISO 8601 date-time string with a zone, e.g. '2026-12-01T00:00:00Z'.")
    return value


#: An instant in a request body: an ISO 8601 string with a zone, within the bounds above, and converted to UTC
#: (``+05:00`` offsets are normalised, never dropped).
Instant = Annotated[datetime, BeforeValidator(_instant_text), AfterValidator(_bounded_instant)]


def parse_instant(value: str) -> datetime | None:
    """An instant in a query parameter (ISO 8601 with a zone, ``Z`` allowed), in UTC; None when it is not one
    (no zone, not ISO 8601, or outside the bounds of :data:`Instant`)."""
    try:
        return _bounded_instant(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None


#: A GPU model name (``H100``, ``A100-80GB``, ``H100 SXM``): letters, digits, spaces, ``.``, ``_``, ``-``, starting
#: with a letter or digit and not ending with ``.`` or a space, at most 58 characters — so every model, lower-cased
#: without its spaces, makes a quota name ``gpus-{model}`` (an ARM name: at most 63 characters, no final ``.``) one
#: can set, and a job can ask for it (issue 26: models with ``/``, ``+`` or a final ``.`` could be limited by no
#: quota).
GpuModel = Annotated[
    str, StringConstraints(min_length=1, max_length=58, pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9 ._-]*[A-Za-z0-9_-])?$")
]


def _not_null(value: Any) -> Any:
    if value is None:
        raise ValueError("may be left out, but not sent as null")
    return value


#: A member that may be left out but is never sent as ``null`` (typed ``X | None``, None meaning not sent): a ``null``
#: is refused naming the member. Its JSON schema says no ``null`` either (``WithJsonSchema`` beside it).
NOT_NULL = BeforeValidator(_not_null)
#: A price member that may be left out but not sent as null (its JSON schema: Money's).
OptionalMoney = Annotated[
    Decimal | None,
    NOT_NULL,
    BeforeValidator(lambda v: strict_decimal(v) if v is not None else v),
    Field(ge=0, le=MAX_PRICE_PER_GPU_HOUR, max_digits=14, decimal_places=6),
    PlainSerializer(lambda v: float(v) if v is not None else None, when_used="json"),
    WithJsonSchema({"type": "number", "minimum": 0, "maximum": MAX_PRICE_PER_GPU_HOUR}),
]


#: An accelerator kind as sent (``GPU``, ``tpu``, ``NPU``...; domain/accelerators.py says it in its usual spelling).
#: Its schema's ``examples`` are the kinds the provider knows, in their usual spelling (``KNOWN_KINDS``): the API's
#: contract says them, and the portal's forms offer them from it (portal/build.mjs reads docs/openapi.json).
AcceleratorKind = Annotated[
    str,
    StringConstraints(min_length=2, max_length=16, pattern=r"^[A-Za-z][A-Za-z0-9]+$"),
    Field(examples=list(KNOWN_KINDS.values())),
]
#: An accelerator vendor (``NVIDIA``, ``AMD``, ``Google``, ``AWS``, ``Intel``, ``Huawei``...).
AcceleratorVendor = Annotated[
    str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9 ._&-]*[A-Za-z0-9])?$")
]

TagKey = Annotated[str, StringConstraints(min_length=1, max_length=512)]
TagValue = Annotated[str, StringConstraints(max_length=256)]
MAX_TAGS = 50
#: ARM location names: letters, digits, spaces, '_' and '-' (compared ignoring case and spaces).
Location = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9 _-]*$")]


class ApiModel(BaseModel):
    """Base: camelCase aliases on the wire, field names (snake_case) accepted too, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        str_strip_whitespace=False,
    )


def lift_flat_fields(data: Any, fields: dict[str, str], *, keep_flat: bool = False) -> Any:
    """The seed's flat request form (``{"requested_gpus": 4, ...}`` at the top level) moved into ``properties``.

    ``fields`` maps each accepted flat spelling (snake_case and camelCase) to its property name. A property given
    twice with different values — two flat spellings (``requestedGpus`` and ``requested_gpus``), or flat and in
    ``properties`` — is refused (``ValueError``, a 400 naming it): no spelling silently wins. Anything that is not
    an object is returned unchanged for the model to refuse. ``keep_flat``: the flat members stay at the top level
    too (a model that declares them there validates them where the client sent them, and names them so)."""
    if not isinstance(data, dict):
        return data
    flat: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key in data:
        if key not in fields:
            continue
        prop = fields[key]
        if prop in flat and flat[prop] != data[key]:
            raise ValueError(f"'{spelled[prop]}' and '{key}' name the same property with different values.")
        flat[prop], spelled[prop] = data[key], key
    if not flat:
        return data
    rest = dict(data) if keep_flat else {k: v for k, v in data.items() if k not in fields}
    props = data.get("properties")
    if props is None:
        return {**rest, "properties": flat}
    if isinstance(props, dict):
        for prop, value in flat.items():
            if prop in props and props[prop] != value:
                raise ValueError(f"'{prop}' is given twice with different values (flat and in properties).")
        return {**rest, "properties": {**flat, **props}}
    return data


class BillingTermsLocked(ApiModel):
    """Read-only ``properties.billingTerms`` of an instance or job: the node's pricing as it was when the workload
    reserved its devices (``locked_at``, UTC ISO 8601) — what the workload is billed by until it ends, whatever the
    node's pricing says later (docs/BILLING.md, "Locked terms"). Units as the node's ``pricing``: the price per
    accelerator-hour, and on a GPU per GPU-hour under the seed's name (a workload placed before other kinds existed
    shows ``pricePerGpuHour`` only)."""

    price_per_gpu_hour: Money | None = None
    price_per_accelerator_hour: Money | None = None
    currency: str
    billing_increment_seconds: int
    minimum_billable_seconds: int
    locked_at: str


class SystemData(ApiModel):
    """ARM ``systemData`` (read-only, ARM_CONTRACT.md line 20). Times are UTC ISO 8601."""

    created_by: str
    created_by_type: CreatedByType
    created_at: datetime
    last_modified_by: str
    last_modified_by_type: CreatedByType
    last_modified_at: datetime


class Sku(ApiModel):
    """ARM ``sku``. For nodes ``capacity`` is the number of accelerator devices (must equal ``accelerator.count``
    and, on a GPU node, ``hardwareSpecs.gpuCount``)."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
    tier: Annotated[str, StringConstraints(max_length=64)] | None = None
    capacity: int | None = Field(strict=True, default=None, ge=1, le=64)


#: Invisible characters that make a text read differently from what it is (Trojan Source, CVE-2021-42574): the
#: bidirectional embeddings, overrides, isolates and marks, the zero-width space and word joiner, and the BOM.
#: (Zero-width joiners stay allowed: emoji sequences and several scripts need them.)
MISLEADING_CHARACTERS = frozenset(
    "\u061c\u200b\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2060\u2066\u2067\u2068\u2069\ufeff"
)


def has_control_characters(value: str) -> bool:
    """Whether ``value`` holds a C0/C1 control character, DEL, or one of :data:`MISLEADING_CHARACTERS` (such as
    the right-to-left override U+202E) — never valid in names, tags or ids here."""
    return any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or ch in MISLEADING_CHARACTERS for ch in value)


def validate_tags(value: dict[str, str] | None) -> dict[str, str]:
    """ARM tag rules: at most 50 tags, names 1-512 characters without ``<>%&\\?/``, values at most 256; no
    control characters in names or values."""
    value = value or {}
    if len(value) > MAX_TAGS:
        raise ValueError(f"At most {MAX_TAGS} tags are allowed.")
    for key, tag_value in value.items():
        if any(ch in key for ch in "<>%&\\?/"):
            raise ValueError(f"The tag name '{key[:64]}' contains a character that is not allowed (<>%&\\?/).")
        if has_control_characters(key) or has_control_characters(tag_value):
            shown = key[:64].encode("unicode_escape").decode("ascii")
            raise ValueError(
                f"The tag '{shown}' contains a control or invisible direction character in its name or value."
            )
    return value


class TrackedResourceWrite(ApiModel):
    """Fields common to PUT bodies of tracked resources. Read-only envelope fields a client may echo back from a
    GET (``id``, ``type``, ``etag``, ``systemData``) are accepted and ignored; ``name`` is checked by the service."""

    location: Location
    tags: dict[TagKey, TagValue] | None = None
    name: str | None = None
    id: str | None = None
    type: str | None = None
    etag: str | None = None
    system_data: dict[str, Any] | None = None

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: dict[str, str] | None) -> dict[str, str]:
        return validate_tags(value)


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """An ARM list page: ``value`` and ``nextLink`` (absolute URL with ``$skipToken``; null on the last page)."""

    model_config = ConfigDict(serialize_by_alias=True)

    value: list[T]
    next_link: str | None = Field(default=None, alias="nextLink")


class ErrorDetail(BaseModel):
    """ARM error detail (recursive)."""

    code: str
    message: str
    target: str | None = None
    details: list[ErrorDetail] | None = None


class ErrorResponse(BaseModel):
    """ARM error body: ``{"error": {...}}``."""

    error: ErrorDetail
