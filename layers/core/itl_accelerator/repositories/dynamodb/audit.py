"""The audit trail in the table (item type ``AuditEvent``: ``SUB#{sub}#AUDIT`` / ``{timestamp}#{eventId}``, and by
resource in GSI1): append-only, written in the same transaction as the change it records (table.py ``audit_put``)
or alone for a refused attempt."""

from __future__ import annotations

import json
from typing import Any

from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import decode_token, encode_token, plain, typed
from itl_accelerator.repositories.dynamodb.table import Table
from itl_accelerator.repositories.errors import InvalidSkipToken, ItemExists
from itl_accelerator.repositories.protocols import Page


def audit_from_item(item: dict[str, Any]) -> AuditEvent:
    """An audit event from its item (plain values)."""
    fields = {k: v for k, v in item.items() if k in AuditEvent.model_fields}
    for state in ("previous_state", "new_state"):
        if isinstance(fields.get(state), str):
            fields[state] = json.loads(fields[state])
    return AuditEvent.model_validate(fields)


class DynamoAuditRepository:
    """:class:`~itl_accelerator.repositories.protocols.AuditRepository` over the table."""

    def __init__(self, table: Table):
        self._t = table

    def append(self, event: AuditEvent) -> None:
        """One conditional ``PutItem``. Raises ``ItemExists`` for an event already appended (append-only)."""
        put = self._t.audit_put(event)["Put"]
        try:
            self._t.client.put_item(
                TableName=put["TableName"], Item=put["Item"], ConditionExpression=put["ConditionExpression"]
            )
        except self._t.client.exceptions.ConditionalCheckFailedException as exc:
            raise ItemExists() from exc

    def page(
        self,
        subscription_id: str,
        start: str | None,
        end: str | None,
        resource_id: str | None,
        limit: int,
        token: str | None,
    ) -> Page[AuditEvent]:
        """One ``Query`` page (by resource through GSI1): ``BETWEEN`` the bounds on the sort key, whose time comes
        first (an empty key value is refused: "0" sorts before every timestamp, "\uffff" after)."""
        start = start or "0"
        end = end or "\uffff"
        if resource_id:
            pk_attr, sk_attr, pk = "GSI1PK", "GSI1SK", keys.audit_by_resource_pk(subscription_id, resource_id)
        else:
            pk_attr, sk_attr, pk = "PK", "SK", keys.audit_pk(subscription_id)
        request: dict[str, Any] = {
            "TableName": self._t.name,
            "KeyConditionExpression": f"{pk_attr} = :pk AND {sk_attr} BETWEEN :start AND :end",
            "ExpressionAttributeValues": typed({":pk": pk, ":start": start, ":end": end + "\uffff"}),
            "Limit": limit + 1,
        }
        if resource_id:
            request["IndexName"] = "GSI1"
        if token:
            start_key = decode_token(token, pk_attr=pk_attr, pk=pk, sk_attr=sk_attr, sk_prefix="")
            wanted = {"PK", "SK", "GSI1PK", "GSI1SK"} if resource_id else {"PK", "SK"}
            if set(start_key) != wanted:  # a token of the other list (by resource, or the whole trail)
                raise InvalidSkipToken(token)
            request["ExclusiveStartKey"] = start_key
        response = self._t.client.query(**request)
        raw = [plain(i) for i in response.get("Items", [])]
        events = [audit_from_item(i) for i in raw[:limit]]
        if len(raw) > limit:
            last = raw[limit - 1]
            key_attrs = ("PK", "SK", "GSI1PK", "GSI1SK") if resource_id else ("PK", "SK")
            return Page(events, encode_token({a: {"S": last[a]} for a in key_attrs}))
        return Page(events, None)
