"""What every resource service shares: access checks and audit items named after the resource type, ARM
envelopes, paged lists, and the mapping of the repositories' typed failures to ARM errors.

Each service (nodes, instances, jobs) holds one :class:`ResourceKernel` and a :class:`ResourceType`; only its own
business rules are its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from itl_accelerator import errors
from itl_accelerator.auth.rbac import Permission
from itl_accelerator.domain.records import ResourceKey
from itl_accelerator.errors import (
    AnotherOperationInProgress,
    ArmError,
    Conflict,
    InvalidParameter,
    NodeNotAvailable,
    ParentResourceNotFound,
    PreconditionFailed,
    ReadOnlyDisabledSubscription,
    SubscriptionNotRegistered,
)
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.errors import (
    CapacityShortfall,
    EtagMismatch,
    InvalidSkipToken,
    ItemMissing,
    NodeMissing,
    NodeUnavailable,
    QuotaExceeded,
    StoreError,
    SubscriptionNotWritable,
    WorkloadChanged,
)
from itl_accelerator.repositories.protocols import Page, Repositories, Scope
from itl_accelerator.resources import ResourceType
from itl_accelerator.services.common.access import Access, Target
from itl_accelerator.services.common.audit_events import build_event
from itl_accelerator.services.common.capacity import insufficient
from itl_accelerator.services.common.context import CallContext

T = TypeVar("T")


def quota_exceeded(exc: QuotaExceeded, devices: int) -> ArmError:
    """409 ``QuotaExceeded`` naming the quota, its limit and what the subscription holds against it."""
    return errors.QuotaExceeded(
        f"The GPU quota '{exc.name}' of the subscription in '{exc.location}' allows {exc.limit} GPUs and "
        f"{exc.current} are in use; the request needs {devices} more. Free some, or ask the provider's operators to "
        "raise the quota."
    )


def with_etag(document: dict[str, Any], etag: str) -> dict[str, Any]:
    """The envelope as returned: the stored document plus its ``etag`` (ARM_CONTRACT.md line 21)."""
    return {**document, "etag": etag}


def subscription_conflict(exc: SubscriptionNotWritable) -> ArmError:
    """409 for a write in a subscription whose registration state forbids it (ARM_CONTRACT.md line 27)."""
    if exc.state in ("Warned", "Suspended"):
        return ReadOnlyDisabledSubscription(
            f"The subscription is in state '{exc.state}': only read and delete operations are allowed."
        )
    return SubscriptionNotRegistered(
        f"The subscription is in state '{exc.state}' and is not registered with the ITL.Accelerator provider."
    )


class ResourceKernel:
    """Shared behaviour of the resource services over the ``repositories`` and one ``access`` check."""

    def __init__(self, repositories: Repositories, access: Access):
        self.repositories = repositories
        self.access = access

    def key(self, rtype: ResourceType, subscription_id: str, resource_group: str, *names: str) -> ResourceKey:
        """A validated key (400 on a bad subscription id, resource group or name)."""
        rtype.validate_names(subscription_id, resource_group, names)
        return ResourceKey(subscription_id, resource_group, rtype.segment, names)

    def require(self, ctx: CallContext, rtype: ResourceType, key: ResourceKey, *actions: Permission) -> Permission:
        """404 outside the caller's scopes (the same answer as a missing resource), 403 (audited) without any of
        ``actions`` (default: the type's read); otherwise the permission the caller acts with (the first of
        ``actions`` its roles grant)."""
        wanted = actions or (rtype.read,)
        checks = self.access.require_any(
            ctx,
            wanted,
            Target(
                subscription_id=key.subscription_id,
                resource_group=key.resource_group,
                resource_id=rtype.id(key.subscription_id, key.resource_group, key.names),
                resource_type=rtype.type_name,
                resource_name=key.names[-1],
                missing=rtype.not_found(key.names, key.resource_group),
            ),
        )
        return next(a for a in wanted if a.name == checks[-1].action)

    def audit(
        self,
        ctx: CallContext,
        rtype: ResourceType,
        key: ResourceKey,
        action: Permission,
        summary: str,
        previous: dict[str, Any] | None,
        new: dict[str, Any] | None,
    ) -> AuditEvent:
        """The audit item of a change to the resource at ``key``."""
        return build_event(
            ctx,
            subscription_id=key.subscription_id,
            action=action.name,
            resource_id=rtype.id(key.subscription_id, key.resource_group, key.names),
            resource_type=rtype.type_name,
            resource_name=key.names[-1],
            change_summary=summary,
            previous_state=previous,
            new_state=new,
        )

    def list_page(
        self,
        ctx: CallContext,
        rtype: ResourceType,
        subscription_id: str,
        resource_group: str | None,
        fetch: Callable[[Scope, str | None], Page[T]],
        parent_names: tuple[str, ...] = (),
        *,
        skip_token: str | None,
    ) -> Page[T]:
        """A page of a collection, only what the caller may see: under a parent, in a resource group, or (with
        ``resource_group`` None) in the whole subscription. ``fetch(scope, token)`` reads one page from the
        repository (one ``Query``; one per visible resource group for a caller holding only some groups). Empty
        outside the caller's scopes; 400 for a foreign ``$skipToken``; 404 ``ParentResourceNotFound`` for a child
        collection of a missing parent (one extra read, only when the first page is empty)."""
        rtype.validate_collection(subscription_id, resource_group, parent_names)
        if not ctx.principal.can_see(subscription_id, resource_group):
            return Page([], None)
        self.access.require_any(
            ctx,
            (rtype.read,),
            Target(
                subscription_id=subscription_id,
                resource_group=resource_group,
                resource_id=rtype.collection_id(subscription_id, resource_group, parent_names),
                resource_type=rtype.type_name,
                resource_name="*",
            ),
        )
        visible = None if resource_group else ctx.principal.resource_groups_in(subscription_id)
        scope = Scope(subscription_id, resource_group, tuple(visible) if visible is not None else None)
        try:
            page = fetch(scope, skip_token)
        except InvalidSkipToken as exc:
            raise InvalidParameter("The $skipToken is not valid for this list.", target="$skipToken") from exc
        if rtype.parent and resource_group and not page.items and skip_token is None:
            parent = ResourceKey(subscription_id, resource_group, rtype.parent.segment, parent_names)
            if self.repositories.nodes.get(parent) is None:
                raise self.parent_missing(rtype, parent_names)
        return page

    @staticmethod
    def parent_missing(rtype: ResourceType, parent_names: tuple[str, ...]) -> ParentResourceNotFound:
        """404 ``ParentResourceNotFound`` for the parent of ``rtype`` named ``parent_names``."""
        assert rtype.parent is not None
        path = "/".join(f"{t.segment}/{n}" for t, n in zip(rtype.parent.lineage, parent_names, strict=True))
        return ParentResourceNotFound(f"The parent resource '{path}' was not found.")

    @staticmethod
    def write_error(
        exc: StoreError, *, node: str = "", devices: int = 0, memory_gb: int = 0, if_match: str | None = None
    ) -> ArmError:
        """The ARM error a caller sees for a repository's failure of a write (``node``/``devices``/``memory_gb`` describe a
        reservation, for capacity messages)."""
        if isinstance(exc, SubscriptionNotWritable):
            return subscription_conflict(exc)
        if isinstance(exc, CapacityShortfall):
            return insufficient(node, exc.free_devices, exc.free_memory_gb, devices, memory_gb)
        if isinstance(exc, QuotaExceeded):
            return quota_exceeded(exc, devices)
        if isinstance(exc, NodeUnavailable):
            return NodeNotAvailable(f"The node '{node}' is {exc.availability} and takes no new work.")
        if isinstance(exc, NodeMissing):
            return ParentResourceNotFound(f"The node '{node}' was not found.")
        if isinstance(exc, EtagMismatch | ItemMissing) and if_match is not None:
            return PreconditionFailed("The resource changed since the ETag in 'If-Match' was issued.")
        if isinstance(exc, WorkloadChanged):
            return AnotherOperationInProgress("Another request changed this resource at the same time; retry.")
        return Conflict("The resource was changed by another request at the same time; retry the request.")
