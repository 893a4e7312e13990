"""The repositories over the one DynamoDB table (template.yaml ``Table``): every attribute name, key format, index
and condition expression of the provider lives in this package (keys.py lists the item types)."""

from __future__ import annotations

from typing import Any

from itl_accelerator.repositories.dynamodb.audit import DynamoAuditRepository
from itl_accelerator.repositories.dynamodb.billing import DynamoBillingRepository
from itl_accelerator.repositories.dynamodb.budgets import DynamoBudgetRepository
from itl_accelerator.repositories.dynamodb.instances import DynamoInstanceRepository
from itl_accelerator.repositories.dynamodb.jobs import DynamoJobRepository
from itl_accelerator.repositories.dynamodb.meters import DynamoMeterRepository
from itl_accelerator.repositories.dynamodb.nodes import DynamoNodeRepository
from itl_accelerator.repositories.dynamodb.operations import DynamoLeaseIndex, DynamoOperationRepository
from itl_accelerator.repositories.dynamodb.probe import DynamoTableProbe
from itl_accelerator.repositories.dynamodb.quotas import DynamoQuotaRepository
from itl_accelerator.repositories.dynamodb.rate_limits import DynamoRateLimitRepository
from itl_accelerator.repositories.dynamodb.subscriptions import DynamoSubscriptionRepository
from itl_accelerator.repositories.dynamodb.table import Table
from itl_accelerator.repositories.dynamodb.usage import DynamoUsageRepository
from itl_accelerator.repositories.protocols import Repositories


def dynamodb_repositories(client: Any, table_name: str, *, audit_retention_days: int = 0) -> Repositories:
    """Every repository over ``table_name``, through one boto3 DynamoDB *client* (injected: tests pass moto's);
    audit events kept ``audit_retention_days`` in the table (0: for ever)."""
    table = Table(client, table_name, audit_retention_seconds=audit_retention_days * 86400)
    return Repositories(
        nodes=DynamoNodeRepository(table),
        instances=DynamoInstanceRepository(table),
        jobs=DynamoJobRepository(table),
        leases=DynamoLeaseIndex(table),
        quotas=DynamoQuotaRepository(table),
        budgets=DynamoBudgetRepository(table),
        rate_limits=DynamoRateLimitRepository(table),
        operations=DynamoOperationRepository(table),
        audit=DynamoAuditRepository(table),
        subscriptions=DynamoSubscriptionRepository(table),
        meters=DynamoMeterRepository(table),
        usage=DynamoUsageRepository(table),
        billing=DynamoBillingRepository(table),
        probe=DynamoTableProbe(table),
    )
