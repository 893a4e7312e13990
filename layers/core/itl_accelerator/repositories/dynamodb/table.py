"""The one DynamoDB table: the client, the table name, and the two primitives every store module builds on —
a consistent point read and one ``TransactWriteItems`` whose failures come back as typed errors.

Budgets (DESIGN.md): a read is one ``GetItem``; a list page is one ``Query``; a change is one
``TransactWriteItems``. No ``Scan`` anywhere. The client is injected (tests pass moto-backed clients).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import MAX_ITEM_BYTES, item_size, plain, to_json, typed
from itl_accelerator.repositories.errors import ItemTooLarge, StoreBusy, StoreError

#: DynamoDB error codes that mean "try again" (raised as :class:`StoreBusy`).
BUSY_ERROR_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TransactionConflictException",
        "TransactionInProgressException",
        "InternalServerError",
    }
)
#: Subscription states that allow writes (a subscription never notified counts as Registered).
WRITABLE_SUBSCRIPTION_STATES = ("Registered",)


class TransactionFailed(StoreError):
    """A transaction was cancelled by conditions: ``failed`` maps item position → the item as it was ({} if
    absent). Only the repositories read positions; they raise the typed errors of repositories/errors.py."""

    def __init__(self, failed: dict[int, dict[str, Any]]):
        super().__init__(f"conditions failed at {sorted(failed)}")
        self.failed = failed


class Table:
    """``client`` is a boto3 DynamoDB *client*; ``table_name`` the table of template.yaml. Shared by the
    repositories of one table (each repository holds one). ``audit_retention_seconds``: how long an audit event
    stays in the table (its TTL; 0: for ever)."""

    def __init__(self, client: Any, table_name: str, *, audit_retention_seconds: int = 0):
        self._db = client
        self._table = table_name
        self._audit_retention = audit_retention_seconds

    def get_item(self, pk: str, sk: str) -> dict[str, Any] | None:
        """One strongly consistent ``GetItem``, as plain values; None when absent."""
        response = self._db.get_item(TableName=self._table, Key=typed({"PK": pk, "SK": sk}), ConsistentRead=True)
        item = response.get("Item")
        return plain(item) if item else None

    def query_all(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        """Every item a ``Query`` matches (``kwargs``), page by page (plain values)."""
        start: dict[str, Any] | None = None
        while True:
            response = self._db.query(
                TableName=self._table, **kwargs, **({"ExclusiveStartKey": start} if start else {})
            )
            yield from map(plain, response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if not start:
                return

    def batch_get(self, wanted: list[dict[str, str]]) -> Iterator[dict[str, Any]]:
        """Every item of ``wanted`` (``{"PK", "SK"}`` keys) that exists, as plain values: ``BatchGetItem``s of 100,
        strongly consistent, asking again for what DynamoDB left unprocessed (throttling) after a growing pause (50
        ms doubling, at most 1 s, as AWS advises), so a busy table slows the caller down rather than losing items."""
        for i in range(0, len(wanted), 100):
            request: dict[str, Any] = {
                self._table: {"Keys": [typed(k) for k in wanted[i : i + 100]], "ConsistentRead": True}
            }
            pause = 0.05
            while request:
                response = self._db.batch_get_item(RequestItems=request)
                yield from map(plain, response.get("Responses", {}).get(self._table, []))
                request = response.get("UnprocessedKeys") or {}
                if request:
                    time.sleep(pause)
                    pause = min(1.0, pause * 2)

    def update_item(self, pk: str, sk: str, **kwargs: Any) -> dict[str, Any]:
        """One ``UpdateItem`` of the item ``pk``/``sk``; ``kwargs`` are the request's other parameters (the update
        expression, its names and typed values, ``ReturnValues``). Returns the attributes DynamoDB returned, as
        plain values ({} for none). Raises :class:`StoreBusy` when DynamoDB throttled it (nothing was written;
        retrying is safe); any other ``ClientError`` unchanged."""
        try:
            response = self._db.update_item(TableName=self._table, Key=typed({"PK": pk, "SK": sk}), **kwargs)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in BUSY_ERROR_CODES:
                raise StoreBusy(code) from exc
            raise
        return plain(response.get("Attributes") or {})

    def transact(self, items: list[dict[str, Any]]) -> None:
        """Run one ``TransactWriteItems``.

        Raises :class:`ItemTooLarge` (before sending) when an item would exceed DynamoDB's item size;
        :class:`TransactionFailed` naming, by position, each item whose condition failed and the item as it
        was (``ReturnValuesOnConditionCheckFailure``); :class:`StoreBusy` when DynamoDB cancelled it for a
        conflicting concurrent transaction or throttling (nothing was written; retrying is safe); any other
        ``ClientError`` unchanged."""
        for entry in items:
            for kind, op in entry.items():
                written = op.get("Item") if kind == "Put" else op.get("ExpressionAttributeValues")
                size = item_size(written) if kind in ("Put", "Update") and written else 0
                if size > MAX_ITEM_BYTES:
                    raise ItemTooLarge(size)
        try:
            self._db.transact_write_items(TransactItems=items)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code in BUSY_ERROR_CODES:
                raise StoreBusy(code) from exc
            if code != "TransactionCanceledException":
                raise
            reasons = exc.response.get("CancellationReasons") or []
            failed = {
                i: plain(r.get("Item") or {})
                for i, r in enumerate(reasons)
                if r.get("Code") == "ConditionalCheckFailed"
            }
            if not failed:
                raise StoreBusy(",".join(r.get("Code", "") for r in reasons if r.get("Code") != "None")) from exc
            raise TransactionFailed(failed) from exc

    def subscription_check(self, subscription_id: str) -> dict[str, Any]:
        """Transaction item: the subscription's state allows writes (Registered, or never notified)."""
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": typed(keys.registration_key(subscription_id)),
                "ConditionExpression": "attribute_not_exists(#state) OR #state = :registered",
                "ExpressionAttributeNames": {"#state": "state"},
                "ExpressionAttributeValues": typed({":registered": WRITABLE_SUBSCRIPTION_STATES[0]}),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def audit_put(self, audit: AuditEvent) -> dict[str, Any]:
        """Transaction item: the append-only audit event of a change (item type ``AuditEvent``)."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": typed(audit_item(audit, self._audit_retention)),
                "ConditionExpression": "attribute_not_exists(PK)",
            }
        }

    @property
    def client(self) -> Any:
        return self._db

    @property
    def name(self) -> str:
        return self._table


def _epoch(timestamp: str) -> int:
    """Epoch seconds of an audit event's UTC ISO 8601 ``timestamp`` (``...Z`` or an offset)."""
    return int(datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp())


def audit_item(audit: AuditEvent, retention_seconds: int = 0) -> dict[str, Any]:
    """The stored form of an audit event (plain values): its fields (states as JSON), keyed by subscription and
    time, by resource (GSI1) and by actor (GSI3; events stored before the actor index are not in it); with ``ttl`` (epoch s) ``retention_seconds`` after it happened when that is not 0
    — DynamoDB deletes it then, and the audit archive keeps it (services/streams/audit_archive.py)."""
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
        "GSI3PK": keys.audit_by_actor_pk(audit.subscription_id, audit.actor_id),
        "GSI3SK": sk,
        "entityType": "AuditEvent",
        **record,
        **({"ttl": _epoch(audit.timestamp) + retention_seconds} if retention_seconds else {}),
    }
