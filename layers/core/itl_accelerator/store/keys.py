"""Key builders for the single table — the only place key formats are written.

Every key begins with the (lower-cased) subscription, so no access path crosses tenants. Names are lower-cased in
keys (ARM names match case-insensitively); the casing last supplied lives in the item. ``#`` never occurs in a
validated name, so it is a safe separator. Item types (also documented beside the table in template.yaml):

=================  =============================  ==========================================  ==========================
item               PK                             SK                                          GSI1PK / GSI1SK
=================  =============================  ==========================================  ==========================
Subscription       ``SUB#{sub}#SUBSCRIPTION``     ``SUBSCRIPTION``                            —
SparkNode          ``SUB#{sub}``                  ``NODE#{rg}#{node}``                        —
SparkOllamaInst.   ``SUB#{sub}``                  ``INSTANCE#{rg}#{node}#{instance}``         —
OperationStatus    ``SUB#{sub}``                  ``OP#{operationId}``                        —
AuditEvent         ``SUB#{sub}#AUDIT``            ``{timestamp}#{eventId}``                   ``SUB#{sub}#RES#{resourceId}`` / ``{timestamp}#{eventId}``
=================  =============================  ==========================================  ==========================
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from itl_accelerator.resources import RESOURCE_TYPES

SEP = "#"

#: Leaf type codes of resource items, by ARM resource type segment (resources.py describes each type once).
TYPE_CODES: dict[str, str] = {segment: t.key_code for segment, t in RESOURCE_TYPES.items()}
#: Parent type segment of child resource types.
PARENT_TYPES: dict[str, str] = {segment: t.parent.segment for segment, t in RESOURCE_TYPES.items() if t.parent}


def subscription_pk(subscription_id: str) -> str:
    """Partition of a subscription's resources and operation statuses."""
    return f"SUB{SEP}{subscription_id.lower()}"


SUBSCRIPTION_SK = "SUBSCRIPTION"


def registration_key(subscription_id: str) -> dict[str, str]:
    """Key of a subscription's registration item, alone in its partition ``SUB#{sub}#SUBSCRIPTION``: IAM's
    ``dynamodb:LeadingKeys`` sees partition keys only, so a partition of its own lets template.yaml grant writing
    registrations (``SUB#*#SUBSCRIPTION``; ``{sub}`` is lower-cased) without any resource item."""
    return {"PK": f"{subscription_pk(subscription_id)}{SEP}{SUBSCRIPTION_SK}", "SK": SUBSCRIPTION_SK}


def placement_partition(subscription_id: str) -> str:
    """GSI5 partition of a subscription's ``Available`` nodes (sorted by free GPUs: best fit first)."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}AVAILABLE"


def owner_token(user_id: str) -> str:
    """A user id as a key part: URL-safe base64 of its UTF-8 (exact for any id — ``+``, ``@``, ``.``, ``#`` —
    and never containing the separator)."""
    return base64.urlsafe_b64encode(user_id.encode()).decode().rstrip("=")


def submitter_partition(subscription_id: str, user_id: str) -> str:
    """GSI3 partition of the jobs one user submitted in a subscription."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}SUBMITTER{SEP}{owner_token(user_id)}"


def node_owner_partition(subscription_id: str, owner: str) -> str:
    """GSI4 partition of the jobs placed on the nodes of one supplier (a node's ``owner``)."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}NODEOWNER{SEP}{owner_token(owner)}"


def pending_partition(subscription_id: str) -> str:
    """GSI4 partition of a subscription's jobs waiting for capacity (sorted by priority, then submission)."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}PENDING"


def operation_sk(operation_id: str) -> str:
    """Sort key of an operation status item (in the subscription's partition)."""
    return f"OP{SEP}{operation_id.lower()}"


def audit_pk(subscription_id: str) -> str:
    """Partition of a subscription's audit events (sorted by time)."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}AUDIT"


def audit_sk(timestamp: str, event_id: str) -> str:
    """Audit sort key: ISO timestamp first so a time range is one ``BETWEEN``."""
    return f"{timestamp}{SEP}{event_id}"


def audit_by_resource_pk(subscription_id: str, resource_id: str) -> str:
    """GSI1 partition of the audit events of one resource."""
    return f"SUB{SEP}{subscription_id.lower()}{SEP}RES{SEP}{resource_id.lower()}"


@dataclass(frozen=True)
class ResourceKey:
    """Identifies one resource: subscription, resource group, ARM type segment of the leaf, and the names from the
    top-level resource down to the leaf (``("dgx-1",)`` for a node)."""

    subscription_id: str
    resource_group: str
    type_segment: str
    names: tuple[str, ...]

    @property
    def pk(self) -> str:
        """Partition key."""
        return subscription_pk(self.subscription_id)

    def parent(self) -> ResourceKey:
        """Key of the parent resource (e.g. the node of an instance). ``KeyError`` for a top-level type."""
        return ResourceKey(self.subscription_id, self.resource_group, PARENT_TYPES[self.type_segment], self.names[:-1])

    @property
    def sk(self) -> str:
        """Sort key: ``{TYPE}#{rg}#{name}[#{child}]`` lower-cased."""
        parts = [TYPE_CODES[self.type_segment], self.resource_group.lower(), *(n.lower() for n in self.names)]
        return SEP.join(parts)


def collection_prefix(type_segment: str, resource_group: str | None, parent_names: tuple[str, ...] = ()) -> str:
    """``begins_with`` prefix for a list: by subscription (``resource_group`` None), by resource group, or under a
    parent. Always ends with the separator so ``rg1`` never matches ``rg10``."""
    parts = [TYPE_CODES[type_segment]]
    if resource_group is not None:
        parts.append(resource_group.lower())
        parts.extend(n.lower() for n in parent_names)
    return SEP.join(parts) + SEP
