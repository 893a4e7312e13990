"""What every resource service shares: access checks and audit items named after the resource type, ARM
envelopes, paged lists, and the mapping of the store's typed failures to ARM errors.

Each service (nodes, instances, jobs) holds one :class:`ResourceKernel` and a :class:`ResourceType`; only its own
business rules are its own.
"""

from __future__ import annotations

from typing import Any

from itl_accelerator.auth.rbac import Operation
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
from itl_accelerator.resources import ResourceType
from itl_accelerator.services.access import Access
from itl_accelerator.services.audit_log import build_event
from itl_accelerator.services.capacity import insufficient
from itl_accelerator.services.context import CallContext
from itl_accelerator.store.errors import (
    CapacityShortfall,
    EtagMismatch,
    InvalidSkipToken,
    ItemMissing,
    NodeMissing,
    NodeUnavailable,
    StoreError,
    SubscriptionNotWritable,
    WorkloadChanged,
)
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.resources import IndexView, StoredResource
from itl_accelerator.store.workloads import WorkloadStore


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
    """Shared behaviour of the resource services over one ``store`` and ``access`` check."""

    def __init__(self, store: WorkloadStore, access: Access):
        self.store = store
        self.access = access

    def key(self, rtype: ResourceType, subscription_id: str, resource_group: str, *names: str) -> ResourceKey:
        """A validated key (400 on a bad subscription id, resource group or name)."""
        rtype.validate_names(subscription_id, resource_group, names)
        return ResourceKey(subscription_id, resource_group, rtype.segment, names)

    def require(self, ctx: CallContext, rtype: ResourceType, key: ResourceKey, *actions: Operation) -> None:
        """404 outside the caller's scopes (the same answer as a missing resource), 403 (audited) without any of
        ``actions`` (default: the type's read)."""
        self.access.require_any(
            ctx,
            actions or (rtype.read,),
            subscription_id=key.subscription_id,
            resource_group=key.resource_group,
            resource_id=rtype.id(key.subscription_id, key.resource_group, key.names),
            resource_type=rtype.type_name,
            resource_name=key.names[-1],
            missing=rtype.not_found(key.names, key.resource_group),
        )

    def audit(
        self,
        ctx: CallContext,
        rtype: ResourceType,
        key: ResourceKey,
        action: Operation,
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
        parent_names: tuple[str, ...] = (),
        *,
        top: int,
        skip_token: str | None,
        view: IndexView | None = None,
    ) -> tuple[list[StoredResource], str | None]:
        """A page of a collection, only what the caller may see: under a parent, in a resource group, or (with
        ``resource_group`` None) in the whole subscription — one ``Query`` per page (per visible resource group
        for a caller holding only some groups). Empty outside the caller's scopes; 400 for a foreign
        ``$skipToken``; 404 ``ParentResourceNotFound`` for a child collection of a missing parent (one extra
        ``GetItem``, only when the first page is empty). ``view``: list through an index partition instead (e.g. one
        user's jobs)."""
        rtype.validate_collection(subscription_id, resource_group, parent_names)
        if not ctx.principal.can_see(subscription_id, resource_group):
            return [], None
        self.access.require_any(
            ctx,
            (rtype.read,),
            subscription_id=subscription_id,
            resource_group=resource_group,
            resource_id=rtype.collection_id(subscription_id, resource_group, parent_names),
            resource_type=rtype.type_name,
            resource_name="*",
        )
        visible = None if resource_group else ctx.principal.resource_groups_in(subscription_id)
        try:
            items, token = self.store.list_resources(
                subscription_id=subscription_id,
                type_segment=rtype.segment,
                resource_group=resource_group,
                parent_names=parent_names,
                visible_resource_groups=visible,
                limit=top,
                skip_token=skip_token,
                view=view,
            )
        except InvalidSkipToken as exc:
            raise InvalidParameter("The $skipToken is not valid for this list.", target="$skipToken") from exc
        if rtype.parent and resource_group and not items and skip_token is None:
            parent = ResourceKey(subscription_id, resource_group, rtype.parent.segment, parent_names)
            if self.store.get_resource(parent) is None:
                raise self.parent_missing(rtype, parent_names)
        return items, token

    @staticmethod
    def parent_missing(rtype: ResourceType, parent_names: tuple[str, ...]) -> ParentResourceNotFound:
        """404 ``ParentResourceNotFound`` for the parent of ``rtype`` named ``parent_names``."""
        assert rtype.parent is not None
        path = "/".join(f"{t.segment}/{n}" for t, n in zip(rtype.parent.lineage, parent_names, strict=True))
        return ParentResourceNotFound(f"The parent resource '{path}' was not found.")

    @staticmethod
    def write_error(
        exc: StoreError, *, node: str = "", gpus: int = 0, memory_gb: int = 0, if_match: str | None = None
    ) -> ArmError:
        """The ARM error a caller sees for a store failure of a write (``node``/``gpus``/``memory_gb`` describe a
        reservation, for capacity messages)."""
        if isinstance(exc, SubscriptionNotWritable):
            return subscription_conflict(exc)
        if isinstance(exc, CapacityShortfall):
            return insufficient(node, exc.free_gpus, exc.free_memory_gb, gpus, memory_gb)
        if isinstance(exc, NodeUnavailable):
            return NodeNotAvailable(f"The node '{node}' is {exc.availability} and takes no new work.")
        if isinstance(exc, NodeMissing):
            return ParentResourceNotFound(f"The node '{node}' was not found.")
        if isinstance(exc, EtagMismatch | ItemMissing) and if_match is not None:
            return PreconditionFailed("The resource changed since the ETag in 'If-Match' was issued.")
        if isinstance(exc, WorkloadChanged):
            return AnotherOperationInProgress("Another request changed this resource at the same time; retry.")
        return Conflict("The resource was changed by another request at the same time; retry the request.")
