"""Resources with capacity counters (nodes): point reads, paged lists, and create / replace / delete, each with
its audit item and the subscription's state check in one transaction.

Lists are one ``Query`` a page, ordered by (resource group, name); a caller who holds only some resource groups of a
subscription gets one ``Query`` per visible group in turn, so a continuation token never names a hidden item.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.store import keys
from itl_accelerator.store.codec import decode_token, encode_token, plain, read_token, to_json, typed
from itl_accelerator.store.errors import (
    CapacityInUse,
    EtagMismatch,
    InvalidSkipToken,
    ItemExists,
    ItemMissing,
    StoreError,
    SubscriptionNotWritable,
    TransactionFailed,
)
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.subscriptions import SubscriptionRegistry

#: (total attribute, allocated attribute) pairs of capacity-bearing items (nodes): GPUs and GPU memory (GiB).
CAPACITY_DIMENSIONS: tuple[tuple[str, str], ...] = (
    ("gpuTotal", "gpuAllocated"),
    ("memoryGbTotal", "memoryGbAllocated"),
)
#: Number of child resources (instances) of a node; a node with children cannot be deleted.
CHILD_COUNT = "childCount"


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


class ResourceStore(SubscriptionRegistry):
    """Resource items (``SparkNode`` and the envelope part of every resource item)."""

    # ----------------------------------------------------------------------------------------------- resources
    def get_resource(self, key: ResourceKey) -> StoredResource | None:
        """One strongly consistent ``GetItem``; None when absent."""
        item = self.get_item(key.pk, key.sk)
        return self._resource_from_item(key, item) if item else None

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
        start = decode_token(skip_token, pk_attr="PK", pk=pk, sk_attr="SK", sk_prefix=prefix) if skip_token else None
        items, last = self._query_page(subscription_id, type_segment, prefix, limit, start)
        return items, encode_token(last) if last else None

    def _query_page(
        self, subscription_id: str, type_segment: str, prefix: str, limit: int, start: dict[str, Any] | None
    ) -> tuple[list[StoredResource], dict[str, Any] | None]:
        """One ``Query`` of ``limit`` items under ``prefix``; returns the items and the key to continue after (None
        when the collection is exhausted). Asks for one item more than it returns, so the last page has no key."""
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": "PK = :pk AND begins_with(SK, :prefix)",
            "ExpressionAttributeValues": typed({":pk": keys.subscription_pk(subscription_id), ":prefix": prefix}),
            "Limit": limit + 1,
        }
        if start:
            request["ExclusiveStartKey"] = start
        response = self._db.query(**request)
        raw = [plain(i) for i in response.get("Items", [])]
        items = [self._resource_from_item(self._key_of(i, subscription_id, type_segment), i) for i in raw[:limit]]
        if len(raw) > limit:
            last = raw[limit - 1]
            return items, {"PK": {"S": last["PK"]}, "SK": {"S": last["SK"]}}
        return items, response.get("LastEvaluatedKey")

    def _list_visible_groups(
        self, subscription_id: str, type_segment: str, groups: list[str], limit: int, skip_token: str | None
    ) -> tuple[list[StoredResource], str | None]:
        """A subscription-wide list for a caller who holds only some resource groups: the groups in name order, one
        ``Query`` each, until the page is full — so a page is empty only when nothing is left, and every
        continuation token names only items the caller may see (a filtered query's LastEvaluatedKey could name a
        hidden one). Token: ``{"g": group index, "PK"?, "SK"?}``. Cost: one ``Query`` per group visited."""
        ordered = sorted({g.lower() for g in groups})
        if not ordered:
            return [], None
        index, start = 0, None
        if skip_token:
            index, start = self._decode_group_token(skip_token, subscription_id, type_segment, ordered)
        page: list[StoredResource] = []
        while True:
            prefix = keys.collection_prefix(type_segment, ordered[index])
            items, last = self._query_page(subscription_id, type_segment, prefix, limit - len(page), start)
            page.extend(items)
            if last:
                return page, encode_token({**last, "g": {"S": str(index)}})
            if index + 1 >= len(ordered):
                return page, None
            index, start = index + 1, None
            if len(page) == limit:
                return page, encode_token({"g": {"S": str(index)}})

    @staticmethod
    def _decode_group_token(
        token: str, subscription_id: str, type_segment: str, ordered: list[str]
    ) -> tuple[int, dict[str, Any] | None]:
        flat = read_token(token)
        try:
            index = int(flat["g"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidSkipToken(token) from exc
        if not 0 <= index < len(ordered):
            raise InvalidSkipToken(token)
        if "SK" not in flat:
            return index, None
        prefix = keys.collection_prefix(type_segment, ordered[index])
        if flat.get("PK") != keys.subscription_pk(subscription_id) or not str(flat["SK"]).startswith(prefix):
            raise InvalidSkipToken(token)
        return index, {"PK": {"S": flat["PK"]}, "SK": {"S": flat["SK"]}}

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
            "doc": to_json(write.document),
            **write.attributes,
            **write.totals,
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
                        "Item": typed(item),
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
                        "Key": typed({"PK": item["PK"], "SK": item["SK"]}),
                        "UpdateExpression": "SET " + ", ".join(f"{n} = :v{i}" for i, n in enumerate(names)),
                        "ConditionExpression": f"attribute_exists(PK) AND {condition}",
                        "ExpressionAttributeNames": names,
                        "ExpressionAttributeValues": typed({**values, ":expected": expected_etag}),
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
                        "Key": typed({"PK": key.pk, "SK": key.sk}),
                        "ConditionExpression": f"attribute_exists(PK) AND etag = :expected AND {idle}",
                        "ExpressionAttributeValues": typed({":expected": expected_etag, ":zero": 0}),
                        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                    }
                },
                self.audit_put(audit),
            ],
            expected_etag=expected_etag,
        )

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
