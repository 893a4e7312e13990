"""The audit trail: append-only ``AuditEvent`` items, written in the same transaction as the change they record
(or alone, for refused attempts), and read by subscription and time or by resource (GSI1)."""

from __future__ import annotations

import json
from typing import Any

from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.store import keys
from itl_accelerator.store.codec import decode_token, encode_token, plain, to_json, typed
from itl_accelerator.store.errors import InvalidSkipToken
from itl_accelerator.store.table import Table


class AuditLog(Table):
    """Audit items of the table (item type ``AuditEvent`` in template.yaml)."""

    def _audit_item(self, audit: AuditEvent) -> dict[str, Any]:
        record = audit.model_dump()
        for state in ("previous_state", "new_state"):
            record[state] = to_json(record[state]) if record[state] is not None else None
        record = {k: v for k, v in record.items() if v is not None}
        sk = keys.audit_sk(audit.timestamp, audit.event_id)
        return {
            "PK": keys.audit_pk(audit.subscription_id),
            "SK": sk,
            "GSI1PK": keys.audit_by_resource_pk(audit.subscription_id, audit.resource_id),
            "GSI1SK": sk,
            "entityType": "AuditEvent",
            **record,
        }

    def audit_put(self, audit: AuditEvent) -> dict[str, Any]:
        """Transaction item: the append-only audit event of a change."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": typed(self._audit_item(audit)),
                "ConditionExpression": "attribute_not_exists(PK)",
            }
        }

    def append_audit(self, audit: AuditEvent) -> None:
        """Write one audit event on its own (refused attempts, which change nothing). Append-only."""
        put = self.audit_put(audit)["Put"]
        self._db.put_item(TableName=put["TableName"], Item=put["Item"], ConditionExpression=put["ConditionExpression"])

    def query_audit(
        self,
        *,
        subscription_id: str,
        start: str,
        end: str,
        resource_id: str | None,
        limit: int,
        skip_token: str | None,
    ) -> tuple[list[AuditEvent], str | None]:
        """One ``Query`` page of a subscription's audit events with ``start <= timestamp <= end`` (ISO strings),
        oldest first; by resource through GSI1 when ``resource_id`` is given. Raises :class:`InvalidSkipToken`."""
        if resource_id:
            pk_attr, sk_attr, pk = "GSI1PK", "GSI1SK", keys.audit_by_resource_pk(subscription_id, resource_id)
        else:
            pk_attr, sk_attr, pk = "PK", "SK", keys.audit_pk(subscription_id)
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": f"{pk_attr} = :pk AND {sk_attr} BETWEEN :start AND :end",
            "ExpressionAttributeValues": typed({":pk": pk, ":start": start, ":end": end + "\uffff"}),
            "Limit": limit + 1,
        }
        if resource_id:
            request["IndexName"] = "GSI1"
        if skip_token:
            start_key = decode_token(skip_token, pk_attr=pk_attr, pk=pk, sk_attr=sk_attr, sk_prefix="")
            if resource_id and not {"GSI1PK", "GSI1SK"} <= start_key.keys():
                raise InvalidSkipToken(skip_token)
            request["ExclusiveStartKey"] = start_key
        response = self._db.query(**request)
        raw = [plain(i) for i in response.get("Items", [])]
        events = [self._audit_from_item(i) for i in raw[:limit]]
        if len(raw) > limit:
            last = raw[limit - 1]
            key_attrs = ("PK", "SK", "GSI1PK", "GSI1SK") if resource_id else ("PK", "SK")
            return events, encode_token({a: {"S": last[a]} for a in key_attrs})
        return events, None

    @staticmethod
    def _audit_from_item(item: dict[str, Any]) -> AuditEvent:
        fields = {k: v for k, v in item.items() if k in AuditEvent.model_fields}
        for state in ("previous_state", "new_state"):
            if isinstance(fields.get(state), str):
                fields[state] = json.loads(fields[state])
        return AuditEvent.model_validate(fields)
