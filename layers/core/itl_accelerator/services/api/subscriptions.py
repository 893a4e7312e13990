"""Subscription registration (ARM RPC subscription lifecycle, ARM_CONTRACT.md line 27)."""

from __future__ import annotations

from typing import Any

from itl_accelerator.arm import validate_subscription_id
from itl_accelerator.auth import rbac
from itl_accelerator.errors import ResourceNotFound
from itl_accelerator.models.subscriptions import SubscriptionWrite
from itl_accelerator.repositories.protocols import SubscriptionRepository
from itl_accelerator.services.common.access import Access
from itl_accelerator.services.common.audit_events import build_event
from itl_accelerator.services.common.context import CallContext


class SubscriptionService:
    """``PUT``/``GET /subscriptions/{id}``. A subscription never registered behaves as ``Registered``."""

    def __init__(self, subscriptions: SubscriptionRepository, access: Access):
        self._subscriptions = subscriptions
        self._access = access

    def put(self, ctx: CallContext, subscription_id: str, body: SubscriptionWrite) -> dict[str, Any]:
        """Set the registration state. Idempotent: the same state again writes nothing and returns 200.
        Needs ``ITL.Accelerator/register/action`` over the whole subscription."""
        validate_subscription_id(subscription_id)
        self._access.require_subscription(ctx, subscription_id, rbac.REGISTER)
        previous = self._subscriptions.get(subscription_id)
        record: dict[str, Any] = {
            "id": f"/subscriptions/{subscription_id}",
            "state": body.state.value,
            "registrationDate": body.registration_date or (previous or {}).get("registrationDate") or ctx.now_iso(),
            "properties": body.properties if body.properties is not None else (previous or {}).get("properties", {}),
        }
        if previous == record:
            return record
        audit = build_event(
            ctx,
            subscription_id=subscription_id,
            action=rbac.REGISTER.name,
            resource_id=record["id"],
            resource_type="subscriptions",
            resource_name=subscription_id,
            change_summary=f"Subscription state {(previous or {}).get('state', 'none')} -> {record['state']}",
            previous_state=previous,
            new_state=record,
        )
        self._subscriptions.put(subscription_id, record, audit)
        return record

    def get(self, ctx: CallContext, subscription_id: str) -> dict[str, Any]:
        """The registration record; 404 when the provider was never told of the subscription."""
        validate_subscription_id(subscription_id)
        self._access.require_subscription(ctx, subscription_id, rbac.SUBSCRIPTION_READ)
        record = self._subscriptions.get(subscription_id)
        if record is None:
            raise ResourceNotFound(f"The subscription '{subscription_id}' has no registration record.")
        return record
