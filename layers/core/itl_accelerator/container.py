"""Wiring: settings → AWS clients → store → services. Built on first use, never at import time.

Tests and the local runtime pass their own ``dynamodb_client`` (or rely on ``AWS_ENDPOINT_URL``, which boto3
reads itself) — AWS clients are injectable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3

from itl_accelerator.services.access import Access
from itl_accelerator.services.audit import AuditQueryService
from itl_accelerator.services.nodes import SparkNodeService
from itl_accelerator.services.subscriptions import SubscriptionService
from itl_accelerator.settings import Settings, get_settings
from itl_accelerator.store.dynamodb import DynamoStore


@dataclass
class Container:
    """The services of one process."""

    settings: Settings
    store: DynamoStore
    nodes: SparkNodeService
    subscriptions: SubscriptionService
    audit: AuditQueryService

    @classmethod
    def build(cls, settings: Settings | None = None, *, dynamodb_client: Any | None = None) -> Container:
        """Build from settings (default: :func:`get_settings`) and an optional injected DynamoDB client."""
        settings = settings or get_settings()
        store = DynamoStore(dynamodb_client or boto3.client("dynamodb"), settings.table_name)
        access = Access(store)
        return cls(
            settings=settings,
            store=store,
            nodes=SparkNodeService(store, access),
            subscriptions=SubscriptionService(store, access),
            audit=AuditQueryService(store, access),
        )
