"""Subscription registration (ARM RPC subscription lifecycle: PUT /subscriptions/{id} with a state)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from itl_accelerator.models.common import ApiModel


class SubscriptionState(StrEnum):
    """ARM subscription states. Only ``Registered`` (or never notified) allows writes; Warned and Suspended allow
    GET and DELETE only (ARM_CONTRACT.md line 27); Deleted and Unregistered allow GET and DELETE too."""

    REGISTERED = "Registered"
    WARNED = "Warned"
    SUSPENDED = "Suspended"
    DELETED = "Deleted"
    UNREGISTERED = "Unregistered"


class SubscriptionWrite(ApiModel):
    """Body of ``PUT /subscriptions/{id}``: ``state`` plus ARM's free-form ``properties``."""

    model_config = ApiModel.model_config | {"extra": "ignore"}

    state: SubscriptionState
    registration_date: str | None = None
    properties: dict[str, Any] | None = None


class Subscription(ApiModel):
    """The registration record as returned."""

    id: str
    state: SubscriptionState
    registration_date: str | None = None
    properties: dict[str, Any] = Field(default_factory=dict)
