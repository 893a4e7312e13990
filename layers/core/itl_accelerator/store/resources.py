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
#: Free capacity kept beside each total (total - allocated, updated by every reservation and release): ``gpuFree``
#: is the sort key of the placement index GSI5.
FREE_ATTRIBUTES = {"gpuTotal": "gpuFree", "memoryGbTotal": "memoryGbFree"}


@dataclass
class StoredResource:
    """A resource as stored: its envelope ``document`` (without ``etag`` and computed fields), its ``etag``,
    numeric ``counters`` (capacity totals and allocations, GPUs / GiB) and, for a node, the suppliers that owned it
    before its current ``properties.owner`` (``former_owners``, oldest first: they keep reading what they earned)."""

    key: ResourceKey
    document: dict[str, Any]
    etag: str
    counters: dict[str, int] = field(default_factory=dict)
    former_owners: tuple[str, ...] = ()


@dataclass
class ResourceWrite:
    """What a create or replace writes: the envelope, the new etag, capacity ``totals`` (for nodes: GPUs, GiB),
    plain ``attributes`` beside the envelope, attributes to remove (``unset``, e.g. an index key that no longer
    applies) and the node's fleet ``shape`` (:func:`shape_sk`; counted so admission needs no scan)."""

    key: ResourceKey
    document: dict[str, Any]
    etag: str
    totals: dict[str, int] = field(default_factory=dict)
    attributes: dict[str, str] = field(default_factory=dict)
    unset: tuple[str, ...] = ()
    shape: str | None = None


def shape_sk(gpu_model: str, location: str, gpu_total: int, memory_gb_total: int) -> str:
    """Sort key of a fleet-shape item: how many nodes of the subscription have this GPU model, location and totals
    (GPUs, GiB). Admission reads the few shapes of a subscription instead of its nodes."""
    return f"SHAPE#{gpu_model or '-'}#{location}#{gpu_total:03d}#{memory_gb_total:07d}"


@dataclass(frozen=True)
class IndexView:
    """Where a collection is listed from: the table (``PK`` = the subscription's partition, ``SK`` from the type's
    key code) or an index partition whose sort key is ``{rg}#{name}`` (e.g. GSI3 for one user's jobs)."""

    pk: str
    pk_attr: str = "PK"
    sk_attr: str = "SK"
    index: str | None = None

    @classmethod
    def table(cls, subscription_id: str) -> IndexView:
        return cls(keys.subscription_pk(subscription_id))

    @property
    def key_attributes(self) -> tuple[str, ...]:
        """The attributes of a continuation key of this view."""
        return ("PK", "SK") if self.index is None else ("PK", "SK", self.pk_attr, self.sk_attr)

    def prefix(self, type_segment: str, resource_group: str | None, parent_names: tuple[str, ...] = ()) -> str:
        """``begins_with`` prefix of a collection (by subscription, resource group, or under a parent)."""
        if self.index is None:
            return keys.collection_prefix(type_segment, resource_group, parent_names)
        if resource_group is None:
            return ""
        return keys.SEP.join([resource_group.lower(), *(n.lower() for n in parent_names)]) + keys.SEP


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
        return StoredResource(
            key=key,
            document=json.loads(item["doc"]),
            etag=item["etag"],
            counters=counters,
            former_owners=tuple(json.loads(item.get("formerOwners") or "[]")),
        )

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
        view: IndexView | None = None,
    ) -> tuple[list[StoredResource], str | None]:
        """One page of a collection, ordered by (resource group, name): one ``Query`` (one per visible group
        visited, see :meth:`_list_visible_groups`).

        ``resource_group`` None lists the whole subscription; ``visible_resource_groups`` (None = all) confines a
        subscription-wide list to the groups the caller may see. ``view`` lists through an index partition
        instead of the table (e.g. one user's jobs), the same way. Returns ``(items, next_skip_token)``; the token
        is None on the last page. Raises :class:`InvalidSkipToken`.
        """
        view = view or IndexView.table(subscription_id)
        if visible_resource_groups is not None:
            return self._list_visible_groups(
                subscription_id, type_segment, view, visible_resource_groups, limit, skip_token
            )
        prefix = view.prefix(type_segment, resource_group, parent_names)
        start = (
            decode_token(skip_token, pk_attr=view.pk_attr, pk=view.pk, sk_attr=view.sk_attr, sk_prefix=prefix)
            if skip_token
            else None
        )
        items, last = self._query_page(subscription_id, type_segment, view, prefix, limit, start)
        return items, encode_token(last) if last else None

    def _query_page(
        self,
        subscription_id: str,
        type_segment: str,
        view: IndexView,
        prefix: str,
        limit: int,
        start: dict[str, Any] | None,
    ) -> tuple[list[StoredResource], dict[str, Any] | None]:
        """One ``Query`` of ``limit`` items under ``prefix``; returns the items and the key to continue after (None
        when the collection is exhausted). Asks for one item more than it returns, so the last page has no key."""
        condition, values = f"{view.pk_attr} = :pk", {":pk": view.pk}
        if prefix:  # an empty prefix (a whole index partition) is no key condition at all: DynamoDB refuses ""
            condition, values = f"{condition} AND begins_with({view.sk_attr}, :prefix)", {**values, ":prefix": prefix}
        request: dict[str, Any] = {
            "TableName": self._table,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": typed(values),
            "Limit": limit + 1,
        }
        if view.index:
            request["IndexName"] = view.index
        if start:
            request["ExclusiveStartKey"] = start
        response = self._db.query(**request)
        raw = [plain(i) for i in response.get("Items", [])]
        items = [self._resource_from_item(self._key_of(i, subscription_id, type_segment), i) for i in raw[:limit]]
        if len(raw) > limit:
            last = raw[limit - 1]
            return items, {a: {"S": last[a]} for a in view.key_attributes}
        return items, response.get("LastEvaluatedKey")

    def _list_visible_groups(
        self,
        subscription_id: str,
        type_segment: str,
        view: IndexView,
        groups: list[str],
        limit: int,
        skip_token: str | None,
    ) -> tuple[list[StoredResource], str | None]:
        """A subscription-wide list for a caller who holds only some resource groups: the groups in name order, one
        ``Query`` each, until the page is full — so a page is empty only when nothing is left, and every
        continuation token names only items the caller may see (a filtered query's LastEvaluatedKey could name a
        hidden one). Token: ``{"g": group index, key attributes?}``. Cost: one ``Query`` per group visited."""
        ordered = sorted({g.lower() for g in groups})
        if not ordered:
            return [], None
        index, start = 0, None
        if skip_token:
            index, start = self._decode_group_token(skip_token, type_segment, view, ordered)
        page: list[StoredResource] = []
        while True:
            prefix = view.prefix(type_segment, ordered[index])
            items, last = self._query_page(subscription_id, type_segment, view, prefix, limit - len(page), start)
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
        token: str, type_segment: str, view: IndexView, ordered: list[str]
    ) -> tuple[int, dict[str, Any] | None]:
        flat = read_token(token)
        try:
            index = int(flat["g"])
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidSkipToken(token) from exc
        if not 0 <= index < len(ordered):
            raise InvalidSkipToken(token)
        if set(flat) == {"g"}:
            return index, None
        if set(flat) != {"g", *view.key_attributes} or not all(isinstance(v, str) for v in flat.values()):
            raise InvalidSkipToken(token)
        prefix = view.prefix(type_segment, ordered[index])
        if flat[view.pk_attr] != view.pk or not flat[view.sk_attr].startswith(prefix):
            raise InvalidSkipToken(token)
        return index, {a: {"S": flat[a]} for a in view.key_attributes}

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
                item[FREE_ATTRIBUTES[total_attr]] = write.totals[total_attr]
        if write.totals:
            item[CHILD_COUNT] = 0
        items = [
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
        ]
        if write.shape:
            items.append(self._shape_count(write.key.subscription_id, write.shape, +1))
        self._transact(items, resource_failure=ItemExists)

    def replace_resource(
        self, write: ResourceWrite, expected_etag: str, audit: AuditEvent, *, previous_shape: str | None = None
    ) -> None:
        """Replace the writable part of a resource (allocations untouched; free capacity recomputed from them) if
        its etag is still ``expected_etag`` and new capacity totals still cover what is allocated; moves the node
        from ``previous_shape`` to the write's shape when they differ.

        Raises :class:`ItemMissing`, :class:`EtagMismatch`, :class:`CapacityInUse`, :class:`SubscriptionNotWritable`.
        """
        item = self._resource_item(write)
        settable = {k: v for k, v in item.items() if k not in ("PK", "SK")}
        names = {f"#a{i}": k for i, k in enumerate(settable)}
        values = {f":v{i}": v for i, v in enumerate(settable.values())}
        assignments = [f"#a{i} = :v{i}" for i in range(len(settable))]
        condition = "etag = :expected"
        for total_attr, allocated_attr in CAPACITY_DIMENSIONS:
            if total_attr in write.totals:
                condition += f" AND (attribute_not_exists({allocated_attr}) OR {allocated_attr} <= :{total_attr})"
                values[f":{total_attr}"] = write.totals[total_attr]
                assignments.append(f"{FREE_ATTRIBUTES[total_attr]} = :{total_attr} - {allocated_attr}")
        expression = "SET " + ", ".join(assignments)
        if write.unset:
            names.update({f"#u{i}": a for i, a in enumerate(write.unset)})
            expression += " REMOVE " + ", ".join(f"#u{i}" for i in range(len(write.unset)))
        items = [
            {
                "Update": {
                    "TableName": self._table,
                    "Key": typed({"PK": item["PK"], "SK": item["SK"]}),
                    "UpdateExpression": expression,
                    "ConditionExpression": f"attribute_exists(PK) AND {condition}",
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": typed({**values, ":expected": expected_etag}),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            self.audit_put(audit),
            self.subscription_check(write.key.subscription_id),
        ]
        if write.shape and previous_shape != write.shape:
            items.append(self._shape_count(write.key.subscription_id, write.shape, +1))
            if previous_shape:
                items.append(self._shape_count(write.key.subscription_id, previous_shape, -1))
        self._transact(items, expected_etag=expected_etag)

    def delete_resource(
        self, key: ResourceKey, expected_etag: str, audit: AuditEvent, *, shape: str | None = None
    ) -> None:
        """Delete a resource that holds no allocations, if its etag is still ``expected_etag`` (and count it out of
        its fleet ``shape``).

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
                *([self._shape_count(key.subscription_id, shape, -1)] if shape else []),
            ],
            expected_etag=expected_etag,
        )

    def _shape_count(self, subscription_id: str, shape: str, delta: int) -> dict[str, Any]:
        """Transaction item: count a node in (``+1``) or out of (``-1``) its fleet shape."""
        _, model, location, gpus, memory = shape.split(keys.SEP)
        return {
            "Update": {
                "TableName": self._table,
                "Key": typed({"PK": keys.subscription_pk(subscription_id), "SK": shape}),
                "UpdateExpression": "ADD nodes :d SET entityType = :t, gpuModelKey = :model, #loc = :loc, "
                "gpuTotal = :g, memoryGbTotal = :m",
                "ExpressionAttributeNames": {"#loc": "location"},
                "ExpressionAttributeValues": typed(
                    {
                        ":d": delta,
                        ":t": "FleetShape",
                        ":model": "" if model == "-" else model,
                        ":loc": location,
                        ":g": int(gpus),
                        ":m": int(memory),
                    }
                ),
            }
        }

    def fleet_shapes(self, subscription_id: str) -> list[dict[str, Any]]:
        """The node shapes of a subscription that have nodes: ``gpuModelKey``, ``location``, ``gpuTotal``,
        ``memoryGbTotal`` (GPUs, GiB), ``nodes``. One ``Query`` (a subscription has few shapes)."""
        response = self._db.query(
            TableName=self._table,
            KeyConditionExpression="PK = :pk AND begins_with(SK, :shape)",
            ExpressionAttributeValues=typed({":pk": keys.subscription_pk(subscription_id), ":shape": "SHAPE#"}),
            ConsistentRead=True,
        )
        return [plain(i) for i in response.get("Items", []) if int(plain(i).get("nodes", 0)) > 0]

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
