"""GPU quota counters in memory: the DynamoDB implementation's ``DynamoQuotaRepository``
(repositories/dynamodb/quotas.py). Reservations and releases count GPUs in and out (repositories/memory/nodes.py),
the limit is checked in the reservation's own all-or-nothing change."""

from __future__ import annotations

import copy

from itl_accelerator.domain.quotas import QuotaUsage
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.errors import EtagMismatch, ItemExists
from itl_accelerator.repositories.memory.nodes import quota_key
from itl_accelerator.repositories.memory.state import MemoryState, StoredQuota, audit_size, check_size


def _usage(subscription_id: str, stored: StoredQuota) -> QuotaUsage:
    return QuotaUsage(
        subscription_id=subscription_id,
        location=stored.location,
        name=stored.name,
        current=stored.used,
        limit=stored.limit,
        document=copy.deepcopy(stored.document),
        etag=stored.etag,
    )


class MemoryQuotaRepository:
    """:class:`~itl_accelerator.repositories.protocols.QuotaRepository` in memory."""

    def __init__(self, state: MemoryState):
        self._s = state

    def get(self, subscription_id: str, location: str, name: str) -> QuotaUsage | None:
        with self._s.lock:
            stored = self._s.quotas.get(quota_key(subscription_id, location, name))
            return _usage(subscription_id, stored) if stored else None

    def in_location(self, subscription_id: str, location: str) -> list[QuotaUsage]:
        """In the order of the table's sort keys (quota name, lower case)."""
        with self._s.lock:
            found = [
                (key[2], _usage(subscription_id, stored))
                for key, stored in self._s.quotas.items()
                if key[:2] == (subscription_id.lower(), location.lower())
            ]
            return [usage for _, usage in sorted(found, key=lambda entry: entry[0])]

    def set_limit(self, usage: QuotaUsage, audit: AuditEvent, *, expected_etag: str | None) -> None:
        with self._s.lock:
            check_size(usage.document or {}, audit_size(audit))
            key = quota_key(usage.subscription_id, usage.location, usage.name)
            stored = self._s.quotas.get(key)
            held = stored.etag if stored is not None else None
            if held != expected_etag:
                raise EtagMismatch()
            if self._s.audit_taken(audit):
                raise ItemExists()
            stored = self._s.quotas.setdefault(key, StoredQuota(usage.location, usage.name))
            stored.location, stored.name = usage.location, usage.name
            stored.limit = usage.limit
            stored.document = copy.deepcopy(usage.document) if usage.limit is not None else None
            stored.etag = usage.etag if usage.limit is not None else None
            self._s.put_audit(audit)
