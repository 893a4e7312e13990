"""Subscription registration records in memory: the DynamoDB implementation's ``DynamoSubscriptionRepository``
(repositories/dynamodb/subscriptions.py). Their ``state`` decides whether the subscription takes writes
(:meth:`~.state.MemoryState.refusing_state`)."""

from __future__ import annotations

import copy
from typing import Any

from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.errors import StoreError
from itl_accelerator.repositories.memory.state import MemoryState, audit_size, check_size


class MemorySubscriptionRepository:
    """:class:`~itl_accelerator.repositories.protocols.SubscriptionRepository` in memory."""

    def __init__(self, state: MemoryState):
        self._s = state

    def get(self, subscription_id: str) -> dict[str, Any] | None:
        with self._s.lock:
            found = self._s.subscriptions.get(subscription_id.lower())
            return copy.deepcopy(found) if found is not None else None

    def put(self, subscription_id: str, record: dict[str, Any], audit: AuditEvent) -> None:
        """Set the record (it must have a ``state``: ``KeyError`` otherwise, as in the DynamoDB implementation) with
        its audit event; an audit event already stored refuses both (a bare ``StoreError``)."""
        with self._s.lock:
            if "state" not in record:
                raise KeyError("state")
            check_size(record, audit_size(audit))
            if self._s.audit_taken(audit):
                raise StoreError("the audit event exists")
            self._s.subscriptions[subscription_id.lower()] = copy.deepcopy(record)
            self._s.put_audit(audit)
