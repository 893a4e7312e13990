"""The DynamoDB store: resources, their audit events and subscription registrations in one table.

Budgets (DESIGN.md): a read is one ``GetItem``; a list page is one ``Query``; a change is one
``TransactWriteItems`` holding the resource write, its audit item and (for writes) a check of the subscription's
registration state. No ``Scan`` anywhere. The DynamoDB client is injected (tests pass moto-backed clients).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.store import keys
from itl_accelerator.store.keys import ResourceKey

#: (total attribute, allocated attribute) pairs of capacity-bearing items (nodes): GPUs and GPU memory (GiB).
CAPACITY_DIMENSIONS: tuple[tuple[str, str], ...] = (
    ("gpuTotal", "gpuAllocated"),
    ("memoryGbTotal", "memoryGbAllocated"),
)
#: Number of child resources (instances) of a node; a node with children cannot be deleted.
CHILD_COUNT = "childCount"
#: Subscription states that allow writes (a subscription never notified counts as Registered).
WRITABLE_SUBSCRIPTION_STATES = ("Registered",)

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


class StoreError(Exception):
    """Base of the store's typed failures; services map them to ARM errors by type."""


class ItemExists(StoreError):
    """A create found the key taken."""


class ItemMissing(StoreError):
    """The item to replace or delete is gone."""


class EtagMismatch(StoreError):
    """The item changed since it was read (optimistic concurrency)."""


class CapacityInUse(StoreError):
    """The write would leave allocations above capacity, or delete a node holding allocations."""

    def __init__(self, allocated: dict[str, int]):
        super().__init__(f"allocated: {allocated}")
        self.allocated = allocated


class SubscriptionNotWritable(StoreError):
    """The subscription's registration state forbids writes."""

    def __init__(self, state: str):
        super().__init__(state)
        self.state = state


class TransactionFailed(StoreError):
    """A transaction was cancelled by conditions: ``failed`` maps item position → the item as it was ({} if absent)."""

    def __init__(self, failed: dict[int, dict[str, Any]]):
        super().__init__(f"conditions failed at {sorted(failed)}")
        self.failed = failed


class StoreBusy(StoreError):
    """DynamoDB refused the write for now (a conflicting concurrent transaction, throttling): nothing was written,
    the same request may be retried. Step Functions retries it by this name."""


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


class InvalidSkipToken(StoreError):
    """A ``$skipToken`` that this store did not issue for this list."""


@dataclass
class StoredResource:
    """A resource as stored: its envelope ``document`` (without ``etag`` and computed fields), its ``etag``, and
    numeric ``counters`` (capacity totals and allocations, GPUs / GiB)."""

    key: ResourceKey
    document: dict[str, Any]
    etag: str
    counters: dict[str, int] = field(default_factory=dict)


@dataclass
class ResourceWrite:
    """What a create or replace writes: the envelope, the new etag, and capacity ``totals`` (for nodes)."""

    key: ResourceKey
    document: dict[str, Any]
    etag: str
    totals: dict[str, int] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)


def _plain(item: dict[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def _typed(values: dict[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in values.items()}


def _encode_token(last_key: dict[str, Any]) -> str:
    plain = {k: v["S"] for k, v in last_key.items()}
    return base64.urlsafe_b64encode(json.dumps(plain, separators=(",", ":")).encode()).decode().rstrip("=")


def _decode_token(token: str, *, pk_attr: str, pk: str, sk_attr: str, sk_prefix: str) -> dict[str, Any]:
    try:
        padded = token + "=" * (-len(token) % 4)
        plain = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise InvalidSkipToken(token) from exc
    if (
        not isinstance(plain, dict)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in plain.items())
        or plain.get(pk_attr) != pk
        or not str(plain.get(sk_attr, "")).startswith(sk_prefix)
        or not {"PK", "SK"} <= plain.keys()
        or not plain.keys() <= {"PK", "SK", "GSI1PK", "GSI1SK"}
    ):
        raise InvalidSkipToken(token)
    return {k: {"S": v} for k, v in plain.items()}


class DynamoStore:
    """Single-table store. ``client`` is a boto3 DynamoDB *client*; ``table_name`` the table of template.yaml."""

    def __init__(self, client: Any, table_name: str):
        self._db = client
        self._table = table_name

    # ----------------------------------------------------------------------------------------------- resources
    def get_resource(self, key: ResourceKey) -> StoredResource | None:
        """One strongly consistent ``GetItem``; None when absent."""
        response = self._db.get_item(
            TableName=self._table, Key=_typed({"PK": key.pk, "SK": key.sk}), ConsistentRead=True
        )
        item = response.get("Item")
        return self._resource_from_item(key, _plain(item)) if item else None

    @staticmethod
    def _resource_from_item(key: ResourceKey, item: dict[str, Any]) -> StoredResource:
        counters = {attr: int(item[attr]) for pair in CAPACITY_DIMENSIONS for attr in pair if attr in item}
        return StoredResource(key=key, document=json.loads(item["doc"]), etag=item["etag"], counters=counters)

    def list_resources(
        self,
        *,
        subscription_id: str,
        type_segment: str,
        resource_group: str | None = None,
        parent_names: tuple[str, ...] = (),
        visible_resource_groups: list[str] | None = None,
        limit: int,
        skip_token: str | None = None,
    ) -> tuple[list[StoredResource], str | None]:
        """One ``Query`` page of a collection, ordered by (resource group, name).

        ``resource_group`` None lists the whole subscription; ``visible_resource_groups`` (None = all) filters a
        subscription-wide list to the groups the caller may see. Returns ``(items, next_skip_token)``; the token is
        None on the last page. Raises :class:`InvalidSkipToken`.
        """
        pk = keys.subscription_pk(subscription_id)
        if visible_resource_groups is not None:
            return self._list_visible_groups(subscription_id, type_segment, visible_resource_groups, limit, skip_token)
        prefix = keys.collection_prefix(type_segment, resource_group, parent_names)
        start = _decode_token(skip_token, pk_attr="PK", pk=pk, sk_attr="SK", sk_prefix=prefix) if skip_token else None
        items, last = self._query_page(subscription_id, type_segment, prefix, limit, start)
        return items, _encode_token(last) if last else None

    def _query_page(
        self, subscription_id: str, type_segment: str, prefix: str, limit: int, start: dict[str, Any] | None
    ) -> tuple[list[StoredResource], dict[str, Any] | None]:
        """One ``Query`` of ``limit`` items under ``prefix``; returns the items and the key to continue after (None
        when the collection is exhausted). Asks for one item more than it returns, so the last page has no key."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :prefix)",
            "ExpressionAttributeValues": _typed({":pk": keys.subscription_pk(subscription_id), ":prefix": prefix}),
            "Limit": limit + 1,
        }
        if start:
            request["ExclusiveStartKey"] = start
        response = self._db.query(**request)
        raw = [_plain(i) for i in response.get("Items", [])]
        items = [self._resource_from_item(self._key_of(i, subscription_id, type_segment), i) for i in raw[:limit]]
        if len(raw) > limit:
            last = raw[limit - 1]
            return items, {"PK": {"S": last["PK"]}, "SK": {"S": last["SK"]}}
        return items, response.get("LastEvaluatedKey")

    def _list_visible_groups(
        self, subscription_id: str, type_segment: str, groups: list[str], limit: int, skip_token: str | None
    ) -> tuple[list[StoredResource], str | None]:
        """A subscription-wide list for a caller who holds only some resource groups: one group per ``Query``, in
        name order, so every continuation token names only items the caller may see (a filtered query's
        LastEvaluatedKey could name a hidden one). Token: ``{"g": group index, "PK"?, "SK"?}``."""
        ordered = sorted({g.lower() for g in groups})
        if not ordered:
            return [], None
        index, start = 0, None
        if skip_token:
            index, start = self._decode_group_token(skip_token, subscription_id, type_segment, ordered)
        prefix = keys.collection_prefix(type_segment, ordered[index])
        items, last = self._query_page(subscription_id, type_segment, prefix, limit, start)
        if last:
            return items, _encode_token({**last, "g": {"S": str(index)}})
        if index + 1 < len(ordered):
            return items, _encode_token({"g": {"S": str(index + 1)}})
        return items, None

    @staticmethod
    def _decode_group_token(
        token: str, subscription_id: str, type_segment: str, ordered: list[str]
    ) -> tuple[int, dict[str, Any] | None]:
        try:
            plain = json.loads(base64.urlsafe_b64decode((token + "=" * (-len(token) % 4)).encode()))
            index = int(plain["g"])
        except (binascii.Error, ValueError, UnicodeDecodeError, KeyError, TypeError) as exc:
            raise InvalidSkipToken(token) from exc
        if not 0 <= index < len(ordered):
            raise InvalidSkipToken(token)
        if "SK" not in plain:
            return index, None
        prefix = keys.collection_prefix(type_segment, ordered[index])
        if plain.get("PK") != keys.subscription_pk(subscription_id) or not str(plain["SK"]).startswith(prefix):
            raise InvalidSkipToken(token)
        return index, {"PK": {"S": plain["PK"]}, "SK": {"S": plain["SK"]}}

    @staticmethod
    def _key_of(item: dict[str, Any], subscription_id: str, type_segment: str) -> ResourceKey:
        return ResourceKey(subscription_id, item["resourceGroup"], type_segment, tuple(json.loads(item["names"])))

    def _resource_item(self, write: ResourceWrite) -> dict[str, Any]:
        key = write.key
        return {
            "PK": key.pk,
            "SK": key.sk,
            "entityType": key.type_segment,
            "resourceGroup": key.resource_group,
            "rgKey": key.resource_group.lower(),
            "names": json.dumps(list(key.names)),
            "id": write.document["id"],
            "etag": write.etag,
            "doc": json.dumps(write.document, separators=(",", ":")),
            **write.attributes,
            **write.totals,
        }

    def subscription_check(self, subscription_id: str) -> dict[str, Any]:
        """Transaction item: the subscription's state allows writes (Registered, or never notified)."""
        return {
            "ConditionCheck": {
                "TableName": self._table,
                "Key": _typed(keys.registration_key(subscription_id)),
                "ConditionExpression": "attribute_not_exists(#state) OR #state = :registered",
                "ExpressionAttributeNames": {"#state": "state"},
                "ExpressionAttributeValues": _typed({":registered": WRITABLE_SUBSCRIPTION_STATES[0]}),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def create_resource(self, write: ResourceWrite, audit: AuditEvent) -> None:
        """Create a resource with its audit item in one transaction (allocations start at 0).

        Raises :class:`ItemExists`, :class:`SubscriptionNotWritable`.
        """
        item = self._resource_item(write)
        for total_attr, allocated_attr in CAPACITY_DIMENSIONS:
            if total_attr in write.totals:
                item[allocated_attr] = 0
        if write.totals:
            item[CHILD_COUNT] = 0
        self._transact(
            [
                {
                    "Put": {
                        "TableName": self._table,
                        "Item": _typed(item),
                        "ConditionExpression": "attribute_not_exists(PK)",
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                self.audit_put(audit),
                self.subscription_check(write.key.subscription_id),
            ],
            resource_failure=ItemExists,
        )

    def replace_resource(self, write: ResourceWrite, expected_etag: str, audit: AuditEvent) -> None:
        """Replace the writable part of a resource (allocations untouched) if its etag is still ``expected_etag``
        and new capacity totals still cover what is allocated.

        Raises :class:`ItemMissing`, :class:`EtagMismatch`, :class:`CapacityInUse`, :class:`SubscriptionNotWritable`.
        """
        item = self._resource_item(write)
        settable = {k: v for k, v in item.items() if k not in ("PK", "SK")}
        names = {f"#a{i}": k for i, k in enumerate(settable)}
        values = {f":v{i}": v for i, v in enumerate(settable.values())}
        condition = "etag = :expected"
        for total_attr, allocated_attr in CAPACITY_DIMENSIONS:
            if total_attr in write.totals:
                condition += f" AND (attribute_not_exists({allocated_attr}) OR {allocated_attr} <= :{total_attr})"
                values[f":{total_attr}"] = write.totals[total_attr]
        self._transact(
            [
                {
                    "Update": {
                        "TableName": self._table,
                        "Key": _typed({"PK": item["PK"], "SK": item["SK"]}),
                        "UpdateExpression": "SET " + ", ".join(f"{n} = :v{i}" for i, n in enumerate(names)),
                        "ConditionExpression": f"attribute_exists(PK) AND {condition}",
                        "ExpressionAttributeNames": names,
                        "ExpressionAttributeValues": _typed({**values, ":expected": expected_etag}),
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                self.audit_put(audit),
                self.subscription_check(write.key.subscription_id),
            ],
            expected_etag=expected_etag,
        )

    def delete_resource(self, key: ResourceKey, expected_etag: str, audit: AuditEvent) -> None:
        """Delete a resource that holds no allocations, if its etag is still ``expected_etag``.

        Deletes are allowed whatever the subscription state (ARM: Warned/Suspended allow DELETE).
        Raises :class:`ItemMissing`, :class:`EtagMismatch`, :class:`CapacityInUse`.
        """
        idle = " AND ".join(
            f"(attribute_not_exists({a}) OR {a} = :zero)" for a in (*(a for _, a in CAPACITY_DIMENSIONS), CHILD_COUNT)
        )
        self._transact(
            [
                {
                    "Delete": {
                        "TableName": self._table,
                        "Key": _typed({"PK": key.pk, "SK": key.sk}),
                        "ConditionExpression": f"attribute_exists(PK) AND etag = :expected AND {idle}",
                        "ExpressionAttributeValues": _typed({":expected": expected_etag, ":zero": 0}),
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                self.audit_put(audit),
            ],
            expected_etag=expected_etag,
        )

    def transact(self, items: list[dict[str, Any]]) -> None:
        """Run one ``TransactWriteItems``.

        Raises :class:`TransactionFailed` naming, by position, each item whose condition failed and the item as it
        was (``ReturnValuesOnConditionCheckFailure``); :class:`StoreBusy` when DynamoDB cancelled it for a
        conflicting concurrent transaction or throttling (nothing was written; retrying is safe); any other
        ``ClientError`` unchanged."""
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
                i: _plain(r.get("Item") or {})
                for i, r in enumerate(reasons)
                if r.get("Code") == "ConditionalCheckFailed"
            }
            if not failed:
                raise StoreBusy(",".join(r.get("Code", "") for r in reasons if r.get("Code") != "None")) from exc
            raise TransactionFailed(failed) from exc

    def _transact(
        self,
        items: list[dict[str, Any]],
        *,
        expected_etag: str | None = None,
        resource_failure: type[StoreError] | None = None,
    ) -> None:
        """:meth:`transact` for one resource: item 0 is the resource, item 1 its audit, item 2 (if any) the
        subscription check. Failures become typed errors by position, never by message."""
        try:
            self.transact(items)
        except TransactionFailed as exc:
            if 2 in exc.failed:
                raise SubscriptionNotWritable(str(exc.failed[2].get("state", "Unregistered"))) from exc
            if 0 not in exc.failed:
                raise
            if resource_failure is not None:
                raise resource_failure() from exc
            old = exc.failed[0]
            if not old:
                raise ItemMissing() from exc
            if expected_etag is not None and old.get("etag") != expected_etag:
                raise EtagMismatch() from exc
            raise CapacityInUse(
                {a: int(old.get(a, 0)) for a in (*(a for _, a in CAPACITY_DIMENSIONS), CHILD_COUNT)}
            ) from exc

    # ----------------------------------------------------------------------------------------------- audit
    def _audit_item(self, audit: AuditEvent) -> dict[str, Any]:
        record = audit.model_dump()
        for state in ("previous_state", "new_state"):
            record[state] = json.dumps(record[state], separators=(",", ":")) if record[state] is not None else None
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
                "Item": _typed(self._audit_item(audit)),
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
            "ExpressionAttributeValues": _typed({":pk": pk, ":start": start, ":end": end + "\uffff"}),
            "Limit": limit + 1,
        }
        if resource_id:
            request["IndexName"] = "GSI1"
        if skip_token:
            start_key = _decode_token(skip_token, pk_attr=pk_attr, pk=pk, sk_attr=sk_attr, sk_prefix="")
            if resource_id and not {"GSI1PK", "GSI1SK"} <= start_key.keys():
                raise InvalidSkipToken(skip_token)
            request["ExclusiveStartKey"] = start_key
        response = self._db.query(**request)
        raw = [_plain(i) for i in response.get("Items", [])]
        events = [self._audit_from_item(i) for i in raw[:limit]]
        if len(raw) > limit:
            last = raw[limit - 1]
            key_attrs = ("PK", "SK", "GSI1PK", "GSI1SK") if resource_id else ("PK", "SK")
            return events, _encode_token({a: {"S": last[a]} for a in key_attrs})
        return events, None

    @staticmethod
    def _audit_from_item(item: dict[str, Any]) -> AuditEvent:
        fields = {k: v for k, v in item.items() if k in AuditEvent.model_fields}
        for state in ("previous_state", "new_state"):
            if isinstance(fields.get(state), str):
                fields[state] = json.loads(fields[state])
        return AuditEvent.model_validate(fields)

    # ----------------------------------------------------------------------------------------------- subscriptions
    def get_subscription(self, subscription_id: str) -> dict[str, Any] | None:
        """The registration record (``state``, ``registrationDate``, ``properties``) or None. One ``GetItem``."""
        response = self._db.get_item(
            TableName=self._table,
            Key=_typed(keys.registration_key(subscription_id)),
            ConsistentRead=True,
        )
        item = response.get("Item")
        return json.loads(_plain(item)["doc"]) if item else None

    def put_subscription(self, subscription_id: str, record: dict[str, Any], audit: AuditEvent) -> None:
        """Set a subscription's registration record and audit it, in one transaction."""
        item = {
            **keys.registration_key(subscription_id),
            "entityType": "Subscription",
            "state": record["state"],
            "doc": json.dumps(record, separators=(",", ":")),
        }
        self._db.transact_write_items(
            TransactItems=[{"Put": {"TableName": self._table, "Item": _typed(item)}}, self.audit_put(audit)]
        )
