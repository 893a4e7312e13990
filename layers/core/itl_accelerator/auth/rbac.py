"""Role → permission table and the one permission check every route uses.

Permissions are ARM action strings (``ITL.Accelerator/<type>/<verb>``). :data:`PERMISSIONS` also feeds
``GET /providers/ITL.Accelerator/operations`` (ARM_CONTRACT.md line 26), so the list a client sees is the list
this table enforces.
"""

from __future__ import annotations

from dataclasses import dataclass

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.auth.principal import Principal

ROLE_CONSUMER = "itl-accelerator-consumer"
ROLE_ADMIN = "itl-accelerator-admin"
ROLE_SUPPLIER = "itl-accelerator-supplier"
ROLES = (ROLE_CONSUMER, ROLE_ADMIN, ROLE_SUPPLIER)


@dataclass(frozen=True)
class Permission:
    """One permission: ARM action string plus the display text of the operations list."""

    name: str
    resource: str
    operation: str
    description: str


def _permission(path: str, resource: str, operation: str, description: str) -> Permission:
    return Permission(f"{PROVIDER_NAMESPACE}/{path}", resource, operation, description)


NODES_READ = _permission("sparkNodes/read", "Spark nodes", "Read spark node", "Gets or lists GPU nodes.")
NODES_WRITE = _permission(
    "sparkNodes/write", "Spark nodes", "Write spark node", "Registers or updates any property of a GPU node."
)
NODES_DELETE = _permission(
    "sparkNodes/delete", "Spark nodes", "Delete spark node", "Deregisters a GPU node without allocations."
)
NODES_PRICING_WRITE = _permission(
    "sparkNodes/pricing/write",
    "Spark nodes",
    "Set pricing and availability",
    "Changes pricing and availability of GPU nodes whose owner is the caller.",
)
NODES_USAGE_READ = _permission(
    "sparkNodes/usage/read",
    "Spark nodes",
    "Read node usage",
    "Reads the usage statistics and earnings of GPU nodes (suppliers: of the nodes they own).",
)
INSTANCES_READ = _permission(
    "sparkNodes/sparkOllamaInstances/read", "Ollama instances", "Read instance", "Gets or lists Ollama instances."
)
INSTANCES_WRITE = _permission(
    "sparkNodes/sparkOllamaInstances/write",
    "Ollama instances",
    "Provision instance",
    "Provisions an Ollama instance on a node (reserves GPUs).",
)
INSTANCES_DELETE = _permission(
    "sparkNodes/sparkOllamaInstances/delete",
    "Ollama instances",
    "Delete instance",
    "Deprovisions an Ollama instance and releases its GPUs.",
)
JOBS_READ = _permission("sparkJobs/read", "Spark jobs", "Read job", "Gets or lists GPU jobs (consumers: their own).")
JOBS_WRITE = _permission(
    "sparkJobs/write",
    "Spark jobs",
    "Submit job",
    "Submits a GPU job, to be placed on a node and run (reserves GPUs); lists what a job could get now (offers).",
)
JOBS_DELETE = _permission(
    "sparkJobs/delete", "Spark jobs", "Delete job", "Deletes a finished job (consumers: their own)."
)
JOBS_CANCEL = _permission(
    "sparkJobs/cancel/action",
    "Spark jobs",
    "Cancel job",
    "Cancels a job in any state before it ends (consumers: their own).",
)
OPERATIONS_READ = _permission(
    "locations/operationStatuses/read",
    "Operations",
    "Read operation status",
    "Reads the status of a long-running operation on a resource the caller may see.",
)
QUOTAS_READ = _permission(
    "locations/quotas/read",
    "Quotas",
    "Read GPU quotas",
    "Reads the GPU quotas of a subscription and what is in use against them.",
)
QUOTAS_WRITE = _permission(
    "locations/quotas/write",
    "Quotas",
    "Set GPU quotas",
    "Sets or removes a GPU quota of a subscription (the provider's operators).",
)
COSTS_READ = _permission(
    "costQuery/action",
    "Costs",
    "Query costs",
    "Queries what the subscription's work cost and reads its FOCUS billing files (consumers: their own work; "
    "suppliers: their nodes' earnings).",
)
BUDGETS_READ = _permission(
    "budgets/read", "Budgets", "Read budgets", "Reads the budgets of a subscription and where they stand."
)
BUDGETS_WRITE = _permission(
    "budgets/write",
    "Budgets",
    "Set budgets",
    "Creates, changes or deletes a budget of a subscription (the provider's operators).",
)
RESERVATIONS_READ = _permission(
    "capacityReservations/read",
    "Capacity reservations",
    "Read capacity reservation",
    "Gets or lists capacity reservations (consumers: their own; suppliers: those booked on their nodes).",
)
RESERVATIONS_WRITE = _permission(
    "capacityReservations/write",
    "Capacity reservations",
    "Book capacity reservation",
    "Books accelerators for a future window (billed for every hour of it).",
)
RESERVATIONS_DELETE = _permission(
    "capacityReservations/delete",
    "Capacity reservations",
    "Cancel capacity reservation",
    "Cancels a capacity reservation (before its window: nothing billed; consumers: their own).",
)
AUDIT_READ = _permission(
    "auditEvents/read", "Audit events", "Read audit events", "Lists audit events of a subscription."
)
REGISTER = _permission(
    "register/action", "Subscriptions", "Register subscription", "Sets the registration state of a subscription."
)
SUBSCRIPTION_READ = _permission(
    "subscriptions/read", "Subscriptions", "Read subscription", "Gets the registration state of a subscription."
)
SLO_READ = _permission(
    "slo/read",
    "Service level objectives",
    "Read SLO report",
    "Reads the API's attainment of its service level objectives and the error budget left (the whole provider's).",
)

PERMISSIONS: tuple[Permission, ...] = (
    NODES_READ,
    NODES_WRITE,
    NODES_DELETE,
    NODES_PRICING_WRITE,
    NODES_USAGE_READ,
    INSTANCES_READ,
    INSTANCES_WRITE,
    INSTANCES_DELETE,
    JOBS_READ,
    JOBS_WRITE,
    JOBS_DELETE,
    JOBS_CANCEL,
    OPERATIONS_READ,
    QUOTAS_READ,
    QUOTAS_WRITE,
    COSTS_READ,
    BUDGETS_READ,
    BUDGETS_WRITE,
    RESERVATIONS_READ,
    RESERVATIONS_WRITE,
    RESERVATIONS_DELETE,
    AUDIT_READ,
    REGISTER,
    SUBSCRIPTION_READ,
    SLO_READ,
)

#: Permission by ARM action string.
BY_NAME: dict[str, Permission] = {op.name: op for op in PERMISSIONS}

#: The one role table. Consumers read nodes and instances and submit, read, cancel and delete jobs (their own:
#: the job service checks the submitter); suppliers read nodes, change pricing/availability of their own (ownership
#: is checked by the node service), read the usage and earnings of their own nodes and the jobs placed on
#: them; admins do everything.
ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
    ROLE_CONSUMER: frozenset(
        {
            NODES_READ.name,
            INSTANCES_READ.name,
            JOBS_READ.name,
            JOBS_WRITE.name,
            JOBS_DELETE.name,
            JOBS_CANCEL.name,
            OPERATIONS_READ.name,
            QUOTAS_READ.name,
            COSTS_READ.name,
            BUDGETS_READ.name,
            RESERVATIONS_READ.name,
            RESERVATIONS_WRITE.name,
            RESERVATIONS_DELETE.name,
            SUBSCRIPTION_READ.name,
        }
    ),
    ROLE_SUPPLIER: frozenset(
        {
            NODES_READ.name,
            NODES_PRICING_WRITE.name,
            NODES_USAGE_READ.name,
            INSTANCES_READ.name,
            JOBS_READ.name,
            OPERATIONS_READ.name,
            QUOTAS_READ.name,
            COSTS_READ.name,
            BUDGETS_READ.name,
            RESERVATIONS_READ.name,
            SUBSCRIPTION_READ.name,
        }
    ),
    ROLE_ADMIN: frozenset(op.name for op in PERMISSIONS),
}


def permissions_of(principal: Principal) -> frozenset[str]:
    """The union of the permissions of the caller's ITL roles (unknown roles grant nothing)."""
    granted: set[str] = set()
    for role in principal.roles:
        granted |= ROLE_PERMISSIONS.get(role, frozenset())
    return frozenset(granted)


def has_permission(principal: Principal, action: Permission | str) -> bool:
    """Whether the caller's roles grant ``action`` (an :class:`Permission` or its ARM action string)."""
    name = action.name if isinstance(action, Permission) else action
    return name in permissions_of(principal)
