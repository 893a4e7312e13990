"""The repositories over the one DynamoDB table (template.yaml ``Table``): every attribute name, key format, index
and condition expression of the provider lives in this package (keys.py lists the item types).

Each repository's module is imported when the repository is first used, not when the package is: a function loads
the code of the items it touches (a node's GET never loads the usage, billing or job items' code) - its cold start.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, cast

from itl_accelerator.lazy import OnFirstUse
from itl_accelerator.repositories.protocols import Repositories

#: Each repository: its module in this package and its class (one constructor argument, the table).
_REPOSITORIES = {
    "nodes": ("nodes", "DynamoNodeRepository"),
    "instances": ("instances", "DynamoInstanceRepository"),
    "jobs": ("jobs", "DynamoJobRepository"),
    "leases": ("operations", "DynamoLeaseIndex"),
    "quotas": ("quotas", "DynamoQuotaRepository"),
    "budgets": ("budgets", "DynamoBudgetRepository"),
    "reservations": ("reservations", "DynamoCapacityReservationRepository"),
    "rate_limits": ("rate_limits", "DynamoRateLimitRepository"),
    "operations": ("operations", "DynamoOperationRepository"),
    "audit": ("audit", "DynamoAuditRepository"),
    "subscriptions": ("subscriptions", "DynamoSubscriptionRepository"),
    "meters": ("meters", "DynamoMeterRepository"),
    "usage": ("usage", "DynamoUsageRepository"),
    "billing": ("billing", "DynamoBillingRepository"),
    "probe": ("probe", "DynamoTableProbe"),
}


def dynamodb_repositories(client: Any, table_name: str, *, audit_retention_days: int = 0) -> Repositories:
    """Every repository over ``table_name``, through one boto3 DynamoDB *client* (injected: tests pass moto's);
    audit events kept ``audit_retention_days`` in the table (0: for ever). Each is built on its first use."""
    from itl_accelerator.repositories.dynamodb.table import Table

    table = Table(client, table_name, audit_retention_seconds=audit_retention_days * 86400)

    def build(module: str, cls: str) -> Callable[[], Any]:
        return lambda: getattr(importlib.import_module(f"{__name__}.{module}"), cls)(table)

    return Repositories(
        **{field: cast(Any, OnFirstUse(build(module, cls))) for field, (module, cls) in _REPOSITORIES.items()}
    )
