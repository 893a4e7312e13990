"""Subscription registration records (item type ``Subscription``: ``SUB#{sub}#SUBSCRIPTION`` / ``SUBSCRIPTION``, a
partition of its own so IAM can grant writing registrations and nothing else)."""

from __future__ import annotations

import json
from typing import Any

from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import to_json, typed
from itl_accelerator.repositories.dynamodb.table import Table


class DynamoSubscriptionRepository:
    """:class:`~itl_accelerator.repositories.protocols.SubscriptionRepository` over the table."""

    def __init__(self, table: Table):
        self._t = table

    def get(self, subscription_id: str) -> dict[str, Any] | None:
        key = keys.registration_key(subscription_id)
        item = self._t.get_item(key["PK"], key["SK"])
        return dict(json.loads(item["doc"])) if item else None

    def put(self, subscription_id: str, record: dict[str, Any], audit: AuditEvent) -> None:
        item = {
            **keys.registration_key(subscription_id),
            "entityType": "Subscription",
            "state": record["state"],
            "doc": to_json(record),
        }
        self._t.transact([{"Put": {"TableName": self._t.name, "Item": typed(item)}}, self._t.audit_put(audit)])
