"""Budgets on the wire, in the shape of Azure Cost Management's budgets (``amount``, ``timeGrain``, ``timePeriod``,
``filter``, ``notifications``), plus the provider's ``currency`` (allocations lock theirs: a budget counts one) and
``actionAtLimit`` (what happens once it is spent).

Money is exact (issue 26): ``amount`` is taken as a JSON number or a plain decimal string (ASCII digits, an optional
``.`` fraction: ``models.common.strict_decimal``) of at most 15 significant digits and 6 decimals (below 10^9) —
every such number survives a JSON parser's float unchanged — and is answered, like
``currentSpend.amount`` and every other money amount of the API (a job's ``cost``, ``/stats``), as a plain decimal
string (``"1000"``, ``"80.000000"``: never an exponent, never a float). Thresholds are percent (JSON numbers)."""

from __future__ import annotations

from datetime import UTC
from decimal import Decimal
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    StringConstraints,
    field_validator,
    model_validator,
)

from itl_accelerator.models.common import ApiModel, CurrencyCode, Instant, Number, SystemData, strict_decimal

#: A budget's amount: positive, exact, at most 15 significant digits and 6 decimals; answered as a decimal string.
BudgetAmount = Annotated[
    Decimal,
    BeforeValidator(strict_decimal),
    Field(gt=0, max_digits=15, decimal_places=6),
    PlainSerializer(lambda d: format(d, "f"), return_type=str, when_used="json"),
]
#: A spend so far: a decimal string with 6 decimals (metering's precision).
SpendAmount = Annotated[Decimal, PlainSerializer(lambda d: format(d, "f"), return_type=str, when_used="json")]


def _email(value: str) -> str:
    """An e-mail address as email-validator (RFC 5322/6531 syntax, no DNS lookup) reads it, normalised; ValueError
    otherwise (a CR or LF, a display name, no domain...)."""
    from email_validator import EmailNotValidError, validate_email

    try:
        return str(validate_email(value, check_deliverability=False).normalized)
    except EmailNotValidError as exc:
        raise ValueError(f"'{value[:80]!s}' is not an e-mail address: {exc}") from None


EmailAddress = Annotated[str, StringConstraints(max_length=320), AfterValidator(_email)]

#: The most notifications a budget has (Azure: 5).
MAX_NOTIFICATIONS = 5


class BudgetTimePeriod(ApiModel):
    """From ``startDate`` (the first of a month at 00:00 UTC) to ``endDate`` (exclusive; none: open-ended). Any offset
    is read as the instant it names and answered in UTC: ``2026-12-01T05:00:00+05:00`` is the first of December,
    ``2026-12-01T00:00:00+05:00`` (the 30th of November at 19:00 UTC) is refused."""

    start_date: Instant
    end_date: Instant | None = None

    @model_validator(mode="after")
    def _first_of_month(self) -> BudgetTimePeriod:
        start = self.start_date.astimezone(UTC)
        if (start.day, start.hour, start.minute, start.second, start.microsecond) != (1, 0, 0, 0, 0):
            raise ValueError(
                f"'startDate' is the first of a month at 00:00 UTC (a budget counts calendar months); "
                f"{start.isoformat().replace('+00:00', 'Z')} is not."
            )
        if self.end_date is not None and self.end_date <= start:
            raise ValueError("'endDate' is after 'startDate'.")
        return self


class BudgetComparison(ApiModel):
    """``name`` is one of ``values``: a dimension (``ResourceGroupName``) or, under ``tags``, a tag."""

    name: str = Field(min_length=1, max_length=512)
    operator: Literal["In"] = "In"
    values: list[str] = Field(min_length=1, max_length=50)


class BudgetFilterBody(ApiModel):
    """What the budget covers: some resource groups (``dimensions`` ``ResourceGroupName``) or the work carrying a
    tag with one of some values (``tags``). None: the whole subscription."""

    dimensions: BudgetComparison | None = None
    tags: BudgetComparison | None = None

    @model_validator(mode="after")
    def _one(self) -> BudgetFilterBody:
        if (self.dimensions is None) == (self.tags is None):
            raise ValueError("A budget's filter has exactly one of 'dimensions' and 'tags'.")
        if self.dimensions is not None and self.dimensions.name != "ResourceGroupName":
            raise ValueError("A budget filters by the dimension 'ResourceGroupName' (or by 'tags').")
        return self


class Notification(ApiModel):
    """A notification when the spend reaches ``threshold`` percent of the amount: an event and an audit item,
    once per month (``contactEmails`` are carried in the event for whoever routes it)."""

    enabled: bool = True
    operator: Literal["GreaterThan", "GreaterThanOrEqualTo"] = "GreaterThanOrEqualTo"
    threshold: Number = Field(gt=0, le=1000, max_digits=8, decimal_places=4)
    contact_emails: list[EmailAddress] = Field(default_factory=list, max_length=50)
    threshold_type: Literal["Actual"] = "Actual"


class BudgetPropertiesWrite(ApiModel):
    """What a budget's ``PUT`` sets."""

    model_config = ApiModel.model_config | {"extra": "ignore"}

    category: Literal["Cost"] = "Cost"
    amount: BudgetAmount
    currency: CurrencyCode = "USD"
    time_grain: Literal["Monthly"] = "Monthly"
    time_period: BudgetTimePeriod
    filter: BudgetFilterBody | None = None
    notifications: dict[str, Notification] = Field(default_factory=dict, max_length=MAX_NOTIFICATIONS)
    action_at_limit: Literal["None", "RefuseNewAllocations", "StopAll"] = "None"

    @field_validator("notifications")
    @classmethod
    def _thresholds_once(cls, value: dict[str, Notification]) -> dict[str, Notification]:
        """Two notifications of one threshold would notify it twice: refused, as Azure refuses them."""
        seen: dict[Decimal, str] = {}
        for name, notification in value.items():
            if notification.threshold in seen:
                raise ValueError(
                    f"The notifications '{seen[notification.threshold]}' and '{name}' have the same threshold "
                    f"({notification.threshold} %): give each threshold once."
                )
            seen[notification.threshold] = name
        return value


class BudgetWrite(ApiModel):
    """Body of ``PUT .../budgets/{budgetName}`` (read-only members echoed back are ignored)."""

    model_config = ApiModel.model_config | {"extra": "ignore"}

    properties: BudgetPropertiesWrite


class CurrentSpend(ApiModel):
    """What the work the budget covers spent this month in its currency (``unit``), as of ``status.evaluatedAt``:
    a decimal string."""

    amount: SpendAmount
    unit: str


class OtherSpend(ApiModel):
    """Spend in another currency than the budget's, which it does not count (allocations locked before it existed)."""

    amount: SpendAmount
    currency: str


class BudgetStatus(ApiModel):
    """Where the budget stands in ``period`` (``YYYY-MM``) as of ``evaluatedAt`` (UTC): the thresholds crossed
    (notified), whether it is spent, and spend it covers in other currencies (not counted)."""

    period: str
    evaluated_at: str | None = None
    thresholds_crossed: list[Number]
    exceeded: bool
    spend_in_other_currencies: list[OtherSpend] = Field(default_factory=list)


class BudgetStanding(ApiModel):
    """Where a budget stands, as a caller who may not see its spend is shown it (services/api/budgets.py
    ``standing``): the share of its amount left this period (whole percent, rounded down), whether it is exceeded,
    and when that was evaluated."""

    remaining_percent: int
    exceeded: bool
    evaluated_at: str | None = None


class BudgetProperties(BudgetPropertiesWrite):
    """A budget as returned. ``currentSpend`` and ``status`` are shown to those who may read every charge the budget
    covers (admins); to others the budget is shown without them, and without its notifications' contact e-mails, but
    with its ``standing`` — the share left, so a consumer knows how near a budget that may refuse its work is
    (docs/RBAC.md, "Budgets")."""

    current_spend: CurrentSpend | None = None
    status: BudgetStatus | None = None
    standing: BudgetStanding | None = None


class Budget(ApiModel):
    """A budget (ARM proxy resource of the subscription)."""

    id: str
    name: str
    type: Literal["ITL.Accelerator/budgets"]
    etag: str
    system_data: SystemData | None = None
    properties: BudgetProperties


class BudgetList(ApiModel):
    value: list[Budget]
    next_link: str | None = None
