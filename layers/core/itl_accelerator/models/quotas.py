"""GPU quotas and usages on the wire, in the shapes of Azure's Microsoft.Quota (a quota's ``properties.limit``
``{"limitObjectType": "LimitValue", "value": n}`` and ``properties.name``) and of the ARM ``usages`` lists
(``currentValue``, ``limit``, ``unit``, ``name``). Units: GPUs (``unit`` ``Count``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from itl_accelerator.models.common import ApiModel, SystemData

#: The most GPUs a quota may allow (far above any fleet).
MAX_QUOTA_GPUS = 1_000_000


class LimitValue(ApiModel):
    """A quota's limit: ``value`` GPUs held at once (0 refuses every allocation)."""

    limit_object_type: Literal["LimitValue"] = "LimitValue"
    value: int = Field(strict=True, ge=0, le=MAX_QUOTA_GPUS)


class QuotaPropertiesWrite(ApiModel):
    """What a ``PUT`` of a quota sets."""

    model_config = ApiModel.model_config | {"extra": "ignore"}

    limit: LimitValue


class QuotaWrite(ApiModel):
    """Body of ``PUT .../locations/{location}/quotas/{quotaName}``; the read-only members of a quota echoed back
    (``id``, ``name``, ``type``, ``etag``, ``systemData``, ``properties.currentValue``...) are ignored."""

    model_config = ApiModel.model_config | {"extra": "ignore"}

    properties: QuotaPropertiesWrite


class QuotaName(ApiModel):
    """A quota's name and its display text (``gpus`` → ``GPUs``; ``gpus-h100`` → ``GPUs (h100)``)."""

    value: str
    localized_value: str


class QuotaProperties(ApiModel):
    """A quota as returned: its ``limit``, ``name``, ``unit`` and the GPUs the subscription holds against it now."""

    limit: LimitValue
    name: QuotaName
    unit: Literal["Count"] = "Count"
    current_value: int
    quota_period: str | None = None
    is_quota_applicable: bool = True


class Quota(ApiModel):
    """A GPU quota of a subscription in a location (ARM proxy resource)."""

    id: str
    name: str
    type: Literal["ITL.Accelerator/locations/quotas"]
    etag: str
    system_data: SystemData | None = None
    properties: QuotaProperties


class QuotaList(ApiModel):
    """The quotas set in a location."""

    value: list[Quota]
    next_link: str | None = None


class Usage(ApiModel):
    """What a subscription holds against one quota: ``currentValue`` GPUs of ``limit`` (-1: no limit set)."""

    name: QuotaName
    current_value: int
    limit: int
    unit: Literal["Count"] = "Count"


class UsageList(ApiModel):
    """The usages of a location: every quota in use or limited, ``gpus`` always first."""

    value: list[Usage]
    next_link: str | None = None
