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


#: The most ``Query`` calls one page of a filtered list makes (a resource's events by one actor): past it the page is
#: answered short, with the token of where the reading stopped.
MAX_QUERIES_PER_PAGE = 8


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
        *,
        actor_id: str | None = None,
        newest_first: bool = False,
    ) -> Page[AuditEvent]:
        """One page, in as many ``Query`` calls as a filter needs: of one resource through GSI1 (and of one actor
        among them by a filter: a resource's trail is short), of one actor through GSI3, else the subscription's
        partition; ``BETWEEN`` the bounds on the sort key, whose time comes first (an empty key value is refused:
        "0" sorts before every timestamp, "\uffff" after); newest first when asked (``ScanIndexForward`` false).
        The next page's token is the key of the last event returned."""
        start = start or "0"
        end = end or "\uffff"
        if resource_id:
            index, pk_attr, sk_attr = "GSI1", "GSI1PK", "GSI1SK"
            pk = keys.audit_by_resource_pk(subscription_id, resource_id)
        elif actor_id:
            index, pk_attr, sk_attr = "GSI3", "GSI3PK", "GSI3SK"
            pk = keys.audit_by_actor_pk(subscription_id, actor_id)
        else:
            index, pk_attr, sk_attr, pk = "", "PK", "SK", keys.audit_pk(subscription_id)
        key_attrs = ("PK", "SK", pk_attr, sk_attr) if index else ("PK", "SK")
        request: dict[str, Any] = {
            "TableName": self._t.name,
            "KeyConditionExpression": f"{pk_attr} = :pk AND {sk_attr} BETWEEN :start AND :end",
            "ExpressionAttributeValues": {":pk": pk, ":start": start, ":end": end + "\uffff"},
            "Limit": limit + 1,
            "ScanIndexForward": not newest_first,
        }
        if index:
            request["IndexName"] = index
        if resource_id and actor_id:
            request["FilterExpression"] = "actor_id = :actor"
            request["ExpressionAttributeValues"][":actor"] = actor_id
        request["ExpressionAttributeValues"] = typed(request["ExpressionAttributeValues"])
        if token:
            start_key = decode_token(token, pk_attr=pk_attr, pk=pk, sk_attr=sk_attr, sk_prefix="")
            if set(start_key) != set(key_attrs):  # a token of another list (by resource, by actor, the whole trail)
                raise InvalidSkipToken(token)
            request["ExclusiveStartKey"] = start_key
        raw: list[dict[str, Any]] = []
        for _ in range(MAX_QUERIES_PER_PAGE):  # a filtered page may come back short while more lie beyond it
            response = self._t.client.query(**request)
            raw += [plain(i) for i in response.get("Items", [])]
            if len(raw) > limit or "LastEvaluatedKey" not in response:
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        else:
            # read enough for one request: a short page, and the token of where the reading stopped (ARM lists
            # may answer fewer items than $top with a nextLink)
            return Page([audit_from_item(i) for i in raw], encode_token(response["LastEvaluatedKey"]))
        events = [audit_from_item(i) for i in raw[:limit]]
        if len(raw) > limit:
            last = raw[limit - 1]
            return Page(events, encode_token({a: {"S": last[a]} for a in key_attrs}))
        return Page(events, None)
