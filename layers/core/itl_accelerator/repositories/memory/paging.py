"""Paged lists of resources, shared by the in-memory node, instance and job repositories: the DynamoDB
implementation's ``Lister`` (repositories/dynamodb/listing.py) over a list of records."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from itl_accelerator.repositories.memory.state import decode_token, encode_token
from itl_accelerator.repositories.protocols import Page, Scope

T = TypeVar("T")


def scope_id(scope: Scope) -> str:
    """The part of a list's identity its scope gives: subscription, resource group or visible groups (lower case)."""
    if scope.resource_group is not None:
        return f"{scope.subscription_id.lower()}|rg:{scope.resource_group.lower()}"
    if scope.visible_groups is not None:
        return f"{scope.subscription_id.lower()}|groups:{','.join(sorted({g.lower() for g in scope.visible_groups}))}"
    return f"{scope.subscription_id.lower()}|all"


def in_scope(scope: Scope, resource_group: str) -> bool:
    """Whether a resource of ``resource_group`` (of the scope's subscription) is listed in ``scope``: one group, the
    visible groups (a caller holding only some), or the whole subscription."""
    group = resource_group.lower()
    if scope.resource_group is not None:
        return group == scope.resource_group.lower()
    if scope.visible_groups is not None:
        return group in {g.lower() for g in scope.visible_groups}
    return True


def page(
    entries: Iterable[tuple[str, T]], list_id: str, limit: int, token: str | None, *, descending: bool = False
) -> Page[T]:
    """One page of ``entries`` (sort key, item) in sort-key order (``descending``: the other way), after the
    position ``token`` names; the token of the next page when more follow (None on the last — the DynamoDB
    implementation asks for one item more than it returns to tell). Raises :class:`InvalidSkipToken` for a token of
    another list."""
    after = decode_token(token, list_id) if token else None

    def beyond(key: str) -> bool:
        return after is None or (key < after if descending else key > after)

    ordered = sorted((e for e in entries if beyond(e[0])), key=lambda e: e[0], reverse=descending)
    taken = ordered[:limit]
    more = len(ordered) > limit and bool(taken)
    return Page([item for _, item in taken], encode_token(list_id, taken[-1][0]) if more else None)
