"""The audit trail in memory: the DynamoDB implementation's ``DynamoAuditRepository``
(repositories/dynamodb/audit.py) — append-only, ordered by ``{timestamp}#{eventId}``, listed by subscription or by
resource (the resource id matches case-insensitively, like GSI1's lower-cased key)."""

from __future__ import annotations

from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.errors import ItemExists
from itl_accelerator.repositories.memory import paging
from itl_accelerator.repositories.memory.state import MemoryState
from itl_accelerator.repositories.protocols import Page


class MemoryAuditRepository:
    """:class:`~itl_accelerator.repositories.protocols.AuditRepository` in memory."""

    def __init__(self, state: MemoryState):
        self._s = state

    def append(self, event: AuditEvent) -> None:
        """Append ``event``; one with the same timestamp and id is refused (``ItemExists``: the table's put is
        conditional on ``attribute_not_exists``)."""
        with self._s.lock:
            if self._s.audit_taken(event):
                raise ItemExists()
            self._s.put_audit(event)

    def page(
        self,
        subscription_id: str,
        start: str | None,
        end: str | None,
        resource_id: str | None,
        limit: int,
        token: str | None,
        *,
        actor_id: str | None = None,
        newest_first: bool = False,
    ) -> Page[AuditEvent]:
        """Events whose sort key ``{timestamp}#{eventId}`` lies between ``start`` and ``end`` followed by any text
        (the table's ``BETWEEN :start AND :end + U+FFFF``; None: unbounded), of one resource and/or actor, oldest
        first or newest first. A token is of the list its index names: the resource's, else the actor's, else the
        subscription's (as the table's GSI1, GSI3 and partition)."""
        with self._s.lock:
            subscription = subscription_id.lower()
            resource = resource_id.lower() if resource_id else None
            start = start or ""
            last = (end or "\uffff") + "\uffff"
            entries = [
                (sk, event.model_copy(deep=True))
                for (sub, sk), event in self._s.audit.items()
                if sub == subscription
                and start <= sk <= last
                and (resource is None or event.resource_id.lower() == resource)
                and (actor_id is None or event.actor_id == actor_id)
            ]
            listed = f"resource:{resource}" if resource else f"actor:{actor_id}" if actor_id else ""
            return paging.page(entries, f"audit|{subscription}|{listed}", limit, token, descending=newest_first)
