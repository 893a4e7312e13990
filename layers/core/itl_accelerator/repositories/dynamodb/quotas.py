"""GPU quota counters in the table (item type ``QuotaUsage``: ``SUB#{sub}`` / ``QUOTA#{location}#{name}``;
domain/quotas.py): ``used`` GPUs held now, ``quotaLimit`` when a limit is set, and ``headroom`` — the GPUs still
allowed (``quotaLimit - used``, or :data:`UNLIMITED` ``- used`` without a limit). DynamoDB conditions cannot do
arithmetic, so the headroom is kept beside the count: a reservation's transaction takes its GPUs from it on the
condition ``headroom >= gpus`` (creating the counter at its first use), a release gives them back, and setting a
limit recomputes it from the count in one update. Concurrent allocations therefore never exceed a limit, and a
quota check costs no request beyond the reservation's own transaction.
"""

from __future__ import annotations

import json
from typing import Any

from itl_accelerator.domain.quotas import QuotaScope, QuotaUsage
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import to_json, typed
from itl_accelerator.repositories.dynamodb.table import Table, TransactionFailed
from itl_accelerator.repositories.errors import EtagMismatch, ItemExists, QuotaExceeded

#: The headroom of a quota with no limit: more GPUs than any fleet holds.
UNLIMITED = 10**15


def quota_charge_items(table: str, subscription_id: str, scope: QuotaScope, devices: int) -> list[dict[str, Any]]:
    """Transaction items counting ``devices`` into every quota of ``scope`` (conditional on each one's headroom)."""
    items = []
    for name in scope.names:
        items.append(
            {
                "Update": {
                    "TableName": table,
                    "Key": typed(
                        {"PK": keys.subscription_pk(subscription_id), "SK": keys.quota_sk(scope.location, name)}
                    ),
                    "UpdateExpression": "SET used = if_not_exists(used, :zero) + :g, "
                    "headroom = if_not_exists(headroom, :unlimited) - :g, entityType = :t, #loc = :loc, quotaName = :n",
                    "ConditionExpression": "attribute_not_exists(headroom) OR headroom >= :g",
                    "ExpressionAttributeNames": {"#loc": "location"},
                    "ExpressionAttributeValues": typed(
                        {
                            ":zero": 0,
                            ":g": devices,
                            ":unlimited": UNLIMITED,
                            ":t": "QuotaUsage",
                            ":loc": scope.location,
                            ":n": name,
                        }
                    ),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
        )
    return items


def quota_release_items(table: str, subscription_id: str, scope: QuotaScope, devices: int) -> list[dict[str, Any]]:
    """Transaction items counting ``devices`` out of every quota of ``scope``."""
    return [
        {
            "Update": {
                "TableName": table,
                "Key": typed({"PK": keys.subscription_pk(subscription_id), "SK": keys.quota_sk(scope.location, name)}),
                "UpdateExpression": "SET used = if_not_exists(used, :zero) - :g, "
                "headroom = if_not_exists(headroom, :unlimited) + :g",
                "ExpressionAttributeValues": typed({":zero": 0, ":g": devices, ":unlimited": UNLIMITED}),
            }
        }
        for name in scope.names
    ]


def quota_exceeded(old: dict[str, Any]) -> QuotaExceeded:
    """The typed refusal of a quota counter whose condition failed (``old``: the counter as it was)."""
    limit = int(old["quotaLimit"]) if old.get("quotaLimit") is not None else UNLIMITED
    return QuotaExceeded(str(old.get("location", "")), str(old.get("quotaName", "")), limit, int(old.get("used", 0)))


def usage_from_item(subscription_id: str, item: dict[str, Any]) -> QuotaUsage:
    """A quota's usage from its counter item (plain values)."""
    return QuotaUsage(
        subscription_id=subscription_id,
        location=str(item["location"]),
        name=str(item["quotaName"]),
        current=int(item.get("used", 0)),
        limit=int(item["quotaLimit"]) if item.get("quotaLimit") is not None else None,
        document=json.loads(item["doc"]) if item.get("doc") else None,
        etag=item.get("etag"),
    )


class DynamoQuotaRepository:
    """:class:`~itl_accelerator.repositories.protocols.QuotaRepository` over the table."""

    def __init__(self, table: Table):
        self._t = table

    def get(self, subscription_id: str, location: str, name: str) -> QuotaUsage | None:
        item = self._t.get_item(keys.subscription_pk(subscription_id), keys.quota_sk(location, name))
        return usage_from_item(subscription_id, item) if item else None

    def in_location(self, subscription_id: str, location: str) -> list[QuotaUsage]:
        """One ``Query`` (consistent): a location has a handful of quotas."""
        items = self._t.query_all(
            KeyConditionExpression="PK = :pk AND begins_with(SK, :prefix)",
            ExpressionAttributeValues=typed(
                {":pk": keys.subscription_pk(subscription_id), ":prefix": keys.quota_prefix(location)}
            ),
            ConsistentRead=True,
        )
        return [usage_from_item(subscription_id, i) for i in items]

    def set_limit(self, usage: QuotaUsage, audit: AuditEvent, *, expected_etag: str | None) -> None:
        """Set (``usage.limit`` an int) or remove (None) a quota's limit with its ARM envelope and audit event, in
        one transaction; the headroom follows the count. ``expected_etag``: the etag the quota's limit must still
        have (None: no limit may be set now — a create). Raises ``EtagMismatch``."""
        key = typed(
            {"PK": keys.subscription_pk(usage.subscription_id), "SK": keys.quota_sk(usage.location, usage.name)}
        )
        values: dict[str, Any] = {":zero": 0, ":t": "QuotaUsage", ":loc": usage.location, ":n": usage.name}
        sets = ["entityType = :t", "#loc = :loc", "quotaName = :n"]
        removes: list[str] = []
        if usage.limit is None:
            values[":unlimited"] = UNLIMITED
            sets.append("headroom = :unlimited - if_not_exists(used, :zero)")
            removes += ["quotaLimit", "doc", "etag"]
        else:
            values.update({":limit": usage.limit, ":doc": to_json(usage.document or {}), ":etag": usage.etag or ""})
            sets += [
                "quotaLimit = :limit",
                "headroom = :limit - if_not_exists(used, :zero)",
                "doc = :doc",
                "etag = :etag",
            ]
        update: dict[str, Any] = {
            "TableName": self._t.name,
            "Key": key,
            "UpdateExpression": "SET " + ", ".join(sets) + (" REMOVE " + ", ".join(removes) if removes else ""),
            "ExpressionAttributeNames": {"#loc": "location"},
            "ExpressionAttributeValues": typed(values),
        }
        if expected_etag is None:
            update["ConditionExpression"] = "attribute_not_exists(etag)"
        else:
            update["ConditionExpression"] = "etag = :expected"
            update["ExpressionAttributeValues"] = typed({**values, ":expected": expected_etag})
        try:
            self._t.transact([{"Update": update}, self._t.audit_put(audit)])
        except TransactionFailed as exc:
            if 0 in exc.failed:
                raise EtagMismatch() from exc
            raise ItemExists() from exc  # the audit event's key was taken
