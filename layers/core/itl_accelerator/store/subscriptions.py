"""Subscription registration records (ARM RPC subscription lifecycle) and their audit, in one transaction."""

from __future__ import annotations

import json
from typing import Any

from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.store import keys
from itl_accelerator.store.audit import AuditLog
from itl_accelerator.store.codec import to_json, typed


class SubscriptionRegistry(AuditLog):
    """Item type ``Subscription`` of template.yaml: ``PK=SUB#{sub}``, ``SK=SUBSCRIPTION``."""

    def get_subscription(self, subscription_id: str) -> dict[str, Any] | None:
        """The registration record (``state``, ``registrationDate``, ``properties``) or None. One ``GetItem``."""
        item = self.get_item(keys.subscription_pk(subscription_id), keys.SUBSCRIPTION_SK)
        return json.loads(item["doc"]) if item else None

    def put_subscription(self, subscription_id: str, record: dict[str, Any], audit: AuditEvent) -> None:
        """Set a subscription's registration record and audit it, in one transaction."""
        item = {
            "PK": keys.subscription_pk(subscription_id),
            "SK": keys.SUBSCRIPTION_SK,
            "entityType": "Subscription",
            "state": record["state"],
            "doc": to_json(record),
        }
        self.transact([{"Put": {"TableName": self._table, "Item": typed(item)}}, self.audit_put(audit)])
