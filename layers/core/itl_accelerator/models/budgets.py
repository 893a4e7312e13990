"""Budgets on the wire, in the shape of Azure Cost Management's budgets (``amount``, ``timeGrain``, ``timePeriod``,
``filter``, ``notifications``), plus the provider's ``currency`` (allocations lock theirs: a budget counts one) and
``actionAtLimit`` (what happens once it is spent). Amounts are decimal numbers in ``currency``; thresholds percent."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Literal

from pydantic import Field, model_validator

from itl_accelerator.models.common import ApiModel, CurrencyCode, Number, SystemData

#: The most notifications a budget has (Azure: 5).
MAX_NOTIFICATIONS = 5


class BudgetTimePeriod(ApiModel):
    """From ``startDate`` (the first of a month, UTC) to ``endDate`` (exclusive; none: open-ended)."""

    start_date: datetime
    end_date: datetime | None = None

    @model_validator(mode="after")
    def _first_of_month(self) -> BudgetTimePeriod:
        start = self.start_date
        if start.tzinfo is None:
            raise ValueError("'startDate' must carry a time zone (e.g. 'Z').")
        if (start.day, start.hour, start.minute, start.second, start.microsecond) != (1, 0, 0, 0, 0):
            raise ValueError("'startDate' is the first of a month at 00:00 UTC (a budget counts calendar months).")
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
    threshold: Decimal = Field(gt=0, le=1000)
    contact_emails: list[str] = Field(default_factory=list, max_length=50)
    threshold_type: Literal["Actual"] = "Actual"


class BudgetPropertiesWrite(ApiModel):
    """What a budget's ``PUT`` sets."""

    model_config = ApiModel.model_config | {"extra": "ignore"}

    category: Literal["Cost"] = "Cost"
    amount: Decimal = Field(gt=0, le=Decimal("1e12"))
    currency: CurrencyCode = "USD"
    time_grain: Literal["Monthly"] = "Monthly"
    time_period: BudgetTimePeriod
    filter: BudgetFilterBody | None = None
    notifications: dict[str, Notification] = Field(default_factory=dict, max_length=MAX_NOTIFICATIONS)
    action_at_limit: Literal["None", "RefuseNewAllocations", "StopAll"] = "None"


class BudgetWrite(ApiModel):
    """Body of ``PUT .../budgets/{budgetName}`` (read-only members echoed back are ignored)."""

    model_config = ApiModel.model_config | {"extra": "ignore"}

    properties: BudgetPropertiesWrite


class CurrentSpend(ApiModel):
    """What the budget's scope spent this month, as of the last evaluation."""

    amount: Number
    unit: str


class BudgetStatus(ApiModel):
    """Where the budget stands in ``period``: the thresholds crossed (notified) and whether it is spent."""

    period: str
    thresholds_crossed: list[Number]
    exceeded: bool


class BudgetProperties(BudgetPropertiesWrite):
    current_spend: CurrentSpend
    status: BudgetStatus


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
