"""The provider's resource types, each described once: ARM type, key prefix, parent, path parameters, permissions.

Everything that differs between sparkNodes, sparkOllamaInstances and sparkJobs and is not business logic lives
here; the store's keys, the access checks, audit items, 404 messages and resource ids are derived from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.arm import resource_id, validate_resource_group, validate_resource_name, validate_subscription_id
from itl_accelerator.auth import rbac
from itl_accelerator.auth.rbac import Permission
from itl_accelerator.errors import ResourceNotFound


@dataclass(frozen=True)
class ResourceType:
    """One resource type of ``ITL.Accelerator``.

    ``segment``: the ARM type segment (``sparkNodes``); ``singular``: its name in messages; ``key_code``: the sort-key
    prefix of its items (repositories/dynamodb/keys.py); ``parent``: the type it lives under (None for a top-level type);
    ``name_param``: its path parameter; ``read``/``write``/``delete``: the permissions of those verbs.
    """

    segment: str
    singular: str
    key_code: str
    name_param: str
    read: Permission
    write: Permission
    delete: Permission
    parent: ResourceType | None = None

    @property
    def lineage(self) -> tuple[ResourceType, ...]:
        """The types from the top-level one down to this one."""
        return (*(self.parent.lineage if self.parent else ()), self)

    @property
    def type_name(self) -> str:
        """ARM ``type``: ``ITL.Accelerator/sparkNodes/sparkOllamaInstances``."""
        return "/".join([PROVIDER_NAMESPACE, *(t.segment for t in self.lineage)])

    def id(self, subscription_id: str, resource_group: str, names: tuple[str, ...]) -> str:
        """ARM id of the resource named ``names`` (top-level name first)."""
        return resource_id(
            subscription_id, resource_group, *((t.segment, n) for t, n in zip(self.lineage, names, strict=True))
        )

    def collection_id(self, subscription_id: str, resource_group: str | None, parent_names: tuple[str, ...]) -> str:
        """ARM path of a collection: under a parent, in a resource group, or (``resource_group`` None) in the
        whole subscription."""
        if resource_group is None:
            return f"/subscriptions/{subscription_id}/providers/{self.type_name}"
        if self.parent is None:
            return resource_id(subscription_id, resource_group) + f"/{self.segment}"
        return self.parent.id(subscription_id, resource_group, parent_names) + f"/{self.segment}"

    def envelope(
        self,
        subscription_id: str,
        resource_group: str,
        names: tuple[str, ...],
        *,
        system_data: dict[str, Any],
        properties: dict[str, Any],
        location: str | None = None,
        tags: dict[str, str] | None = None,
        sku: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The ARM envelope of a new resource document (ARM_CONTRACT.md 19, 20): ``id``, ``name`` (the leaf's, as
        supplied), ``type``, then ``location``, ``tags`` and ``sku`` where the type has them (None: left out),
        ``systemData`` and ``properties``. The one place a first document's members are named; ``etag`` is added
        when it is rendered."""
        document: dict[str, Any] = {
            "id": self.id(subscription_id, resource_group, names),
            "name": names[-1],
            "type": self.type_name,
        }
        if location is not None:
            document["location"] = location
        if tags is not None:
            document["tags"] = tags
        if sku is not None:
            document["sku"] = sku
        return {**document, "systemData": system_data, "properties": properties}

    def validate_names(self, subscription_id: str, resource_group: str, names: tuple[str, ...]) -> None:
        """400 on an invalid subscription id, resource group or resource name (``target`` the path parameter)."""
        validate_subscription_id(subscription_id)
        validate_resource_group(resource_group)
        for rtype, name in zip(self.lineage, names, strict=True):
            validate_resource_name(name, target=rtype.name_param if rtype is not self else "name")

    def validate_collection(
        self, subscription_id: str, resource_group: str | None, parent_names: tuple[str, ...] = ()
    ) -> None:
        """400 on an invalid subscription id, resource group or parent name of a collection path."""
        validate_subscription_id(subscription_id)
        if resource_group is not None:
            validate_resource_group(resource_group)
            for rtype, name in zip(self.lineage[:-1], parent_names, strict=True):
                validate_resource_name(name, target=rtype.name_param)

    def not_found(self, names: tuple[str, ...], resource_group: str | None = None) -> ResourceNotFound:
        """ARM's 404 for the resource (the same text whether it is missing or hidden by scope)."""
        where = f" under resource group '{resource_group}'" if resource_group else ""
        path = "/".join(f"{t.segment}/{n}" for t, n in zip(self.lineage, names, strict=True))
        return ResourceNotFound(f"The Resource '{PROVIDER_NAMESPACE}/{path}'{where} was not found.")


NODES = ResourceType(
    segment="sparkNodes",
    singular="sparkNode",
    key_code="NODE",
    name_param="nodeName",
    read=rbac.NODES_READ,
    write=rbac.NODES_WRITE,
    delete=rbac.NODES_DELETE,
)
INSTANCES = ResourceType(
    segment="sparkOllamaInstances",
    singular="sparkOllamaInstance",
    key_code="INSTANCE",
    name_param="instanceName",
    read=rbac.INSTANCES_READ,
    write=rbac.INSTANCES_WRITE,
    delete=rbac.INSTANCES_DELETE,
    parent=NODES,
)

JOBS = ResourceType(
    segment="sparkJobs",
    singular="sparkJob",
    key_code="JOB",
    name_param="jobName",
    read=rbac.JOBS_READ,
    write=rbac.JOBS_WRITE,
    delete=rbac.JOBS_DELETE,
)

RESERVATIONS = ResourceType(
    segment="capacityReservations",
    singular="capacityReservation",
    key_code="CAPRES",
    name_param="reservationName",
    read=rbac.RESERVATIONS_READ,
    write=rbac.RESERVATIONS_WRITE,
    delete=rbac.RESERVATIONS_DELETE,
)

#: Every resource type, by ARM type segment.
RESOURCE_TYPES: dict[str, ResourceType] = {t.segment: t for t in (NODES, INSTANCES, JOBS, RESERVATIONS)}
