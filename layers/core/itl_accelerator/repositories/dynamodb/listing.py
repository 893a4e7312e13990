"""Paged lists of resource items, shared by the node, instance and job repositories.

A page is one ``Query``, ordered by (resource group, name): of the subscription's partition under a type's key code,
or of an index partition whose sort key is ``{rg}#{name}`` (one user's jobs, the jobs on one supplier's nodes). A
caller who holds only some resource groups of a subscription gets one ``Query`` per visible group in turn (no
filter), so a page is empty only when nothing is left and a continuation token never names a hidden item.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from itl_accelerator.domain.records import ResourceKey
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import decode_token, encode_token, plain, read_token, typed
from itl_accelerator.repositories.dynamodb.table import Table
from itl_accelerator.repositories.errors import InvalidSkipToken
from itl_accelerator.repositories.protocols import Page, Scope

T = TypeVar("T")


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


def key_of(item: dict[str, Any], subscription_id: str, type_segment: str) -> ResourceKey:
    """The key of a resource item (its casing as last supplied)."""
    return ResourceKey(subscription_id, item["resourceGroup"], type_segment, tuple(json.loads(item["names"])))


class Lister:
    """Pages of one resource type (``type_segment``) of ``table``, each item decoded by ``decode(key, item)``."""

    def __init__(self, table: Table, type_segment: str, decode: Callable[[ResourceKey, dict[str, Any]], Any]):
        self._t = table
        self._type = type_segment
        self._decode = decode

    def page(
        self,
        scope: Scope,
        limit: int,
        token: str | None,
        *,
        parent_names: tuple[str, ...] = (),
        view: IndexView | None = None,
    ) -> Page[Any]:
        """One page (module docstring). Raises :class:`InvalidSkipToken`."""
        view = view or IndexView.table(scope.subscription_id)
        if scope.resource_group is None and scope.visible_groups is not None:
            return self._visible_groups(scope.subscription_id, view, list(scope.visible_groups), limit, token)
        prefix = view.prefix(self._type, scope.resource_group, parent_names)
        start = None
        if token:
            start = decode_token(token, pk_attr=view.pk_attr, pk=view.pk, sk_attr=view.sk_attr, sk_prefix=prefix)
            if set(start) != set(view.key_attributes):  # a token of another view of the same partition
                raise InvalidSkipToken(token)
        items, last = self._query(scope.subscription_id, view, prefix, limit, start)
        return Page(items, encode_token(last) if last else None)

    def _query(
        self, subscription_id: str, view: IndexView, prefix: str, limit: int, start: dict[str, Any] | None
    ) -> tuple[list[Any], dict[str, Any] | None]:
        """One ``Query`` of ``limit`` items under ``prefix``; the items and the key to continue after (None when the
        collection is exhausted). Asks for one item more than it returns, so the last page has no key."""
        condition, values = f"{view.pk_attr} = :pk", {":pk": view.pk}
        if prefix:  # an empty prefix (a whole index partition) is no key condition at all: DynamoDB refuses ""
            condition, values = f"{condition} AND begins_with({view.sk_attr}, :prefix)", {**values, ":prefix": prefix}
        request: dict[str, Any] = {
            "TableName": self._t.name,
            "KeyConditionExpression": condition,
            "ExpressionAttributeValues": typed(values),
            "Limit": limit + 1,
        }
        if view.index:
            request["IndexName"] = view.index
        if start:
            request["ExclusiveStartKey"] = start
        response = self._t.client.query(**request)
        raw = [plain(i) for i in response.get("Items", [])]
        items = [self._decode(key_of(i, subscription_id, self._type), i) for i in raw[:limit]]
        if len(raw) > limit:
            last = raw[limit - 1]
            return items, {a: {"S": last[a]} for a in view.key_attributes}
        return items, response.get("LastEvaluatedKey")

    def _visible_groups(
        self, subscription_id: str, view: IndexView, groups: list[str], limit: int, token: str | None
    ) -> Page[Any]:
        """A subscription-wide list for a caller who holds only some resource groups: the groups in name order, one
        ``Query`` each, until the page is full. Token: ``{"g": group index, key attributes?}``."""
        ordered = sorted({g.lower() for g in groups})
        if not ordered:
            return Page([], None)
        index, start = 0, None
        if token:
            index, start = self._decode_group_token(token, view, ordered)
        page: list[Any] = []
        while True:
            prefix = view.prefix(self._type, ordered[index])
            items, last = self._query(subscription_id, view, prefix, limit - len(page), start)
            page.extend(items)
            if last:
                return Page(page, encode_token({**last, "g": {"S": str(index)}}))
            if index + 1 >= len(ordered):
                return Page(page, None)
            index, start = index + 1, None
            if len(page) == limit:
                return Page(page, encode_token({"g": {"S": str(index)}}))

    def _decode_group_token(self, token: str, view: IndexView, ordered: list[str]) -> tuple[int, dict[str, Any] | None]:
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
        prefix = view.prefix(self._type, ordered[index])
        if flat[view.pk_attr] != view.pk or not flat[view.sk_attr].startswith(prefix):
            raise InvalidSkipToken(token)
        return index, {a: {"S": flat[a]} for a in view.key_attributes}
