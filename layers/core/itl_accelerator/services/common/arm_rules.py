"""ARM resource-provider rules shared by every resource service (ARM_CONTRACT.md 1-5, 20, 21, 24).

Pure functions over dicts: preconditions, name and read-only field checks, location immutability, JSON merge
patch, ``systemData`` stamping.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

from itl_accelerator.arm import normalize_location
from itl_accelerator.errors import BadRequest, InvalidParameter, PreconditionFailed
from itl_accelerator.services.common.context import CallContext

if TYPE_CHECKING:
    from itl_accelerator.domain.records import Workload

W = TypeVar("W", bound="Workload")


def new_etag() -> str:
    """A fresh strong entity tag (quoted, as in the ``ETag`` header)."""
    return f'"{uuid.uuid4().hex}"'


def _etag_matches(header_value: str, current: str) -> bool:
    wanted = {v.strip().removeprefix("W/") for v in header_value.split(",")}
    return "*" in wanted or current in wanted or current.strip('"') in {w.strip('"') for w in wanted}


def check_preconditions(current_etag: str | None, *, if_match: str | None, if_none_match: str | None) -> None:
    """RFC 9110 / ARM_CONTRACT.md line 21: ``If-Match`` on a missing resource or with a stale etag → 412;
    ``If-None-Match: *`` on an existing resource → 412. ``current_etag`` None means the resource is missing."""
    if if_match is not None:
        if current_etag is None or not _etag_matches(if_match, current_etag):
            raise PreconditionFailed("The 'If-Match' condition does not match the resource's current ETag.")
    if if_none_match is not None and current_etag is not None:
        if if_none_match.strip() == "*" or _etag_matches(if_none_match, current_etag):
            raise PreconditionFailed("The 'If-None-Match' condition failed: the resource already exists.")


def check_body_name(body_name: str | None, url_name: str) -> None:
    """ARM_CONTRACT.md line 3: the name comes from the URL; a body ``name`` that differs (ignoring case) → 400."""
    if body_name is not None and body_name.lower() != url_name.lower():
        raise BadRequest(
            f"The name '{body_name}' in the request body does not match the name '{url_name}' in the URL.",
            target="name",
        )


def check_provisioning_state(sent: str | None, current: str | None) -> None:
    """ARM_CONTRACT.md line 3: ``provisioningState`` is read-only; equal (or absent) → ignored, different → 400."""
    if sent is not None and sent != (current or "Succeeded"):
        raise BadRequest(
            "The property 'provisioningState' is read-only and cannot be set.",
            target="properties.provisioningState",
        )


def check_location_unchanged(sent: str, current: str) -> None:
    """ARM_CONTRACT.md line 4: ``location`` cannot change after creation (case and spaces ignored) → 400."""
    if normalize_location(sent) != normalize_location(current):
        raise InvalidParameter(
            f"The location of an existing resource cannot change from '{current}' to '{sent}'.", target="location"
        )


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch: objects merge recursively, ``null`` removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def stamp_system_data(ctx: CallContext, previous: dict[str, Any] | None) -> dict[str, Any]:
    """ARM ``systemData``: created* kept from ``previous`` (None on create), lastModified* set to the caller/now."""
    now = ctx.now_iso()
    who, kind = ctx.principal.subject, ctx.principal.actor_type
    created = previous or {"createdBy": who, "createdByType": kind, "createdAt": now}
    return {
        "createdBy": created["createdBy"],
        "createdByType": created["createdByType"],
        "createdAt": created["createdAt"],
        "lastModifiedBy": who,
        "lastModifiedByType": kind,
        "lastModifiedAt": now,
    }


def revised(ctx: CallContext, document: dict[str, Any], properties: dict[str, Any]) -> dict[str, Any]:
    """``document`` (a stored ARM resource) as ``ctx`` changes it: ``properties`` merged into its ``properties``
    (a None value removes that property; none is stored as null) and its ``systemData`` stamped
    (lastModified* = the caller, now). The one way a workflow step, placement or an API write revises a stored
    document; its other members are kept as they are."""
    merged = {**document["properties"], **properties}
    return {
        **document,
        "properties": {k: v for k, v in merged.items() if v is not None},
        "systemData": stamp_system_data(ctx, document["systemData"]),
    }


def changed_paths(before: Any, after: Any, prefix: str = "") -> set[str]:
    """Dotted paths whose values differ between two JSON documents (leaves and added/removed keys)."""
    if isinstance(before, dict) and isinstance(after, dict):
        paths: set[str] = set()
        for key in before.keys() | after.keys():
            paths |= changed_paths(before.get(key), after.get(key), f"{prefix}{key}.")
        return paths
    return set() if before == after else {prefix.rstrip(".")}


def changed(ctx: CallContext, record: W, properties: dict[str, Any] | None = None, **changes: Any) -> W:
    """``record`` with ``changes`` to its typed values (``status=...``, ``started_at=...``) and a new etag, its
    document revised as ``ctx`` changes it (:func:`revised`): the properties its typed values own
    (``Workload.arm_properties``, the one place they become properties) and ``properties``, those only its document
    holds (``statusReason``, ``logsUrl``; None removes one). A typed value is given once, here, never again as a
    property."""
    after = replace(record, **changes)
    document = revised(ctx, record.document, {**after.arm_properties(), **(properties or {})})
    return replace(after, document=document, etag=new_etag())
