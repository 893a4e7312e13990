"""Subscription registration records (ARM RPC subscription lifecycle) and their audit, in one transaction."""

from __future__ import annotations

import json
from typing import Any

from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.store import keys
from itl_accelerator.store.audit import AuditLog
from itl_accelerator.store.codec import to_json, typed


class SubscriptionRegistry(AuditLog):
    """Item type ``Subscription`` of template.yaml: ``PK=SUB#{sub}#SUBSCRIPTION``, ``SK=SUBSCRIPTION`` (a
    partition of its own, so IAM can grant writing registrations and nothing else)."""

    def get_subscription(self, subscription_id: str) -> dict[str, Any] | None:
        """The registration record (``state``, ``registrationDate``, ``properties``) or None. One ``GetItem``."""
        key = keys.registration_key(subscription_id)
        item = self.get_item(key["PK"], key["SK"])
        return json.loads(item["doc"]) if item else None

    def put_subscription(self, subscription_id: str, record: dict[str, Any], audit: AuditEvent) -> None:
        """Set a subscription's registration record and audit it, in one transaction."""
        item = {
            **keys.registration_key(subscription_id),
            "entityType": "Subscription",
            "state": record["state"],
            "doc": to_json(record),
        }
        self.transact([{"Put": {"TableName": self._table, "Item": typed(item)}}, self.audit_put(audit)])
