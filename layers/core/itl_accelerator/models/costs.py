"""Cost queries on the wire, modelled on Azure Cost Management's query API (``POST .../query``): a ``timeframe`` (or a
``Custom`` ``timePeriod``), a ``dataset`` with ``granularity``, ``aggregation``, ``grouping`` and ``filter``; the answer
is ``columns`` and ``rows``. Costs are in the currency each allocation locked (a ``Currency`` column), GPU time in
GPU-seconds."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, field_validator, model_validator

from itl_accelerator.models.common import ApiModel, Instant

#: The dimensions a query groups and filters by (Azure's names where Azure has one).
Dimension = Literal[
    "ResourceGroupName",
    "ResourceType",
    "ResourceId",
    "ResourceName",
    "SubmittedBy",
    "NodeId",
    "Supplier",
    "AcceleratorKind",
    "AcceleratorModel",
]
#: What a query sums: the cost (by currency), the GPU-seconds used, and those billed (increments and minimums).
Measure = Literal["Cost", "GpuSeconds", "BillableGpuSeconds"]
Timeframe = Literal["MonthToDate", "TheLastMonth", "WeekToDate", "Custom"]
Granularity = Literal["None", "Hourly", "Daily", "Monthly"]


class TimePeriod(ApiModel):
    """A ``Custom`` timeframe: ``from`` (inclusive) up to ``to`` (exclusive), date-times with a zone between 1970
    and 9000 (converted to UTC). An hour counts in the period where it *starts*: ``[10:30, 11:30)`` holds the hour
    of 11:00 and not that of 10:00, an empty period holds none, and two adjacent periods never share an hour."""

    from_: Instant = Field(alias="from")
    to: Instant


class Aggregation(ApiModel):
    """One summed column: ``name`` the measure, ``function`` ``Sum``."""

    name: Measure
    function: Literal["Sum"] = "Sum"


class Grouping(ApiModel):
    """Group rows by a dimension (``type`` ``Dimension``) or by a tag's value (``type`` ``TagKey``, ``name`` the tag)."""

    type: Literal["Dimension", "TagKey"]
    name: str = Field(min_length=1, max_length=512)

    @model_validator(mode="after")
    def _known(self) -> Grouping:
        if self.type == "Dimension" and self.name not in DIMENSIONS:
            raise ValueError(f"'{self.name}' is not a dimension: one of {', '.join(DIMENSIONS)}.")
        return self


class Comparison(ApiModel):
    """``name`` (a dimension, or a tag for ``tags``) is one of ``values``."""

    name: str = Field(min_length=1, max_length=512)
    operator: Literal["In"] = "In"
    values: list[str] = Field(min_length=1, max_length=100)


class QueryFilter(ApiModel):
    """Exactly one of: ``and`` (every filter holds), ``or`` (one does), ``dimensions``, ``tags``."""

    and_: list[QueryFilter] | None = Field(default=None, alias="and", min_length=2, max_length=20)
    or_: list[QueryFilter] | None = Field(default=None, alias="or", min_length=2, max_length=20)
    dimensions: Comparison | None = None
    tags: Comparison | None = None

    @model_validator(mode="after")
    def _one(self) -> QueryFilter:
        given = [x for x in (self.and_, self.or_, self.dimensions, self.tags) if x is not None]
        if len(given) != 1:
            raise ValueError("A filter has exactly one of 'and', 'or', 'dimensions', 'tags'.")
        if self.dimensions is not None and self.dimensions.name not in DIMENSIONS:
            raise ValueError(f"'{self.dimensions.name}' is not a dimension: one of {', '.join(DIMENSIONS)}.")
        return self


class Dataset(ApiModel):
    """What to compute: ``granularity`` (one row per hour, day or month; ``None``: over the whole period), the
    summed columns (default: ``totalCost``), up to 3 groupings and a filter."""

    granularity: Granularity = "None"
    aggregation: dict[str, Aggregation] = Field(
        default_factory=lambda: {"totalCost": Aggregation(name="Cost")}, min_length=1, max_length=3
    )
    grouping: list[Grouping] = Field(default_factory=list, max_length=3)
    filter: QueryFilter | None = None

    @field_validator("grouping")
    @classmethod
    def _groups_once(cls, value: list[Grouping]) -> list[Grouping]:
        seen = set()
        for g in value:
            key = (g.type, g.name.lower() if g.type == "TagKey" else g.name)
            if key in seen:
                raise ValueError(f"The grouping by {g.type} '{g.name}' is given twice: group by each once.")
            seen.add(key)
        return value


class CostQuery(ApiModel):
    """Body of ``POST .../costQuery``."""

    type: Literal["ActualCost", "Usage"] = "ActualCost"
    timeframe: Timeframe = "MonthToDate"
    time_period: TimePeriod | None = None
    dataset: Dataset = Field(default_factory=Dataset)

    @model_validator(mode="after")
    def _period(self) -> CostQuery:
        if (self.timeframe == "Custom") != (self.time_period is not None):
            raise ValueError("'timePeriod' is given exactly when 'timeframe' is 'Custom'.")
        return self


class Column(ApiModel):
    """A column of the answer: its ``name`` and ``type`` (``Number``, ``String``)."""

    name: str
    type: Literal["Number", "String"]


class CostQueryResultProperties(ApiModel):
    columns: list[Column]
    rows: list[list[float | int | str]]
    next_link: str | None = None


class CostQueryResult(ApiModel):
    """The answer, as Azure Cost Management's: columns and rows."""

    id: str
    name: str
    type: Literal["ITL.Accelerator/costQuery"]
    properties: CostQueryResultProperties


DIMENSIONS: tuple[str, ...] = get_args(Dimension)


class BillingFileProperties(ApiModel):
    """One page of a subscription's FOCUS billing file of a day: the FOCUS 1.2 columns of the provider's daily export,
    each row's cells as the file's exact text ("" for null)."""

    day: str
    focus_version: str
    columns: list[Column]
    rows: list[list[str]]
    next_link: str | None = None


class BillingFile(ApiModel):
    """A page of the billing file (services/api/billing_files.py): the rows the caller may see of the day's export
    that bill the subscription; follow ``nextLink`` for the rest."""

    id: str
    name: str
    type: Literal["ITL.Accelerator/billingExports"]
    properties: BillingFileProperties
