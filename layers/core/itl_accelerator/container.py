"""Wiring: settings → AWS clients → store → services. Built on first use, never at import time.

Tests and the local runtime pass their own clients (or rely on ``AWS_ENDPOINT_URL``, which boto3 reads itself) —
AWS clients are injectable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3

from itl_accelerator.dgx.factory import dgx_client
from itl_accelerator.services.access import Access
from itl_accelerator.services.audit import AuditQueryService
from itl_accelerator.services.billing_export import BillingExport
from itl_accelerator.services.instance_workflow import InstanceWorkflow
from itl_accelerator.services.instances import SparkOllamaInstanceService
from itl_accelerator.services.job_workflow import JobTracker, JobWorkflow
from itl_accelerator.services.jobs import SparkJobService
from itl_accelerator.services.kernel import ResourceKernel
from itl_accelerator.services.nodes import SparkNodeService
from itl_accelerator.services.operations import OperationService
from itl_accelerator.services.placement import Placement
from itl_accelerator.services.reconciler import Reconciler
from itl_accelerator.services.subscriptions import SubscriptionService
from itl_accelerator.services.usage import UsageRollups, UsageSync
from itl_accelerator.services.usage_stats import UsageStatsService
from itl_accelerator.settings import Settings, get_settings
from itl_accelerator.store.jobs import JobStore
from itl_accelerator.workflows import WorkflowStarter


@dataclass
class Container:
    """The services of one process."""

    settings: Settings
    store: JobStore
    access: Access
    nodes: SparkNodeService
    instances: SparkOllamaInstanceService
    operations: OperationService
    subscriptions: SubscriptionService
    audit: AuditQueryService
    instance_workflow: InstanceWorkflow
    jobs: SparkJobService
    placement: Placement
    job_workflow: JobWorkflow
    job_tracker: JobTracker
    reconciler: Reconciler
    usage_sync: UsageSync
    usage_rollups: UsageRollups
    usage_stats: UsageStatsService
    billing_export: BillingExport

    @classmethod
    def build(
        cls,
        settings: Settings | None = None,
        *,
        dynamodb_client: Any | None = None,
        stepfunctions_client: Any | None = None,
        s3_client: Any | None = None,
    ) -> Container:
        """Build from settings (default: :func:`get_settings`) and optional injected AWS clients. The Step
        Functions and DGX clients are created on first use."""
        settings = settings or get_settings()
        store = JobStore(dynamodb_client or boto3.client("dynamodb"), settings.table_name)
        access = Access(store)
        kernel = ResourceKernel(store, access)
        workflows = WorkflowStarter(stepfunctions_client or _LazyClient("stepfunctions"))
        instance_workflow = InstanceWorkflow(
            kernel, lambda: dgx_client(settings), lease_grace_seconds=settings.workflow_lease_grace_seconds
        )
        placement = Placement(kernel, workflows, settings)
        instance_workflow.on_release = placement.dispatch
        job_workflow = JobWorkflow(kernel, placement, workflows, lambda: dgx_client(settings), settings)
        instances = SparkOllamaInstanceService(kernel, workflows, settings)
        jobs = SparkJobService(kernel, workflows, settings)
        return cls(
            settings=settings,
            store=store,
            access=access,
            nodes=SparkNodeService(kernel),
            instances=instances,
            operations=OperationService(store, access),
            subscriptions=SubscriptionService(store, access),
            audit=AuditQueryService(store, access),
            instance_workflow=instance_workflow,
            jobs=jobs,
            placement=placement,
            job_workflow=job_workflow,
            job_tracker=JobTracker(store, job_workflow, workflows, settings),
            reconciler=Reconciler(
                kernel, instance_workflow, workflows, settings, job_workflow=job_workflow, placement=placement
            ),
            usage_sync=UsageSync(store, lambda: dgx_client(settings), settings),
            usage_rollups=UsageRollups(store, settings),
            usage_stats=UsageStatsService(kernel, instances, jobs, store),
            billing_export=BillingExport(store, s3_client or _LazyClient("s3"), settings),
        )


class _LazyClient:
    """A boto3 client created on first attribute access (read-only functions never pay for it)."""

    def __init__(self, service: str):
        self._service = service
        self._client: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            self._client = boto3.client(self._service)
        return getattr(self._client, name)
