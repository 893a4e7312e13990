"""The wiring of one process: settings → AWS clients → repositories → services. Built on first use, never at import
time.

Each service is built — and its module imported — the first time something asks for it, so a function loads what
its own operation uses and nothing else: a node route never imports the DGX client (httpx), the job workflow or
the billing export; a workflow step never imports the API. This module is the composition root, the one place
that knows every service; it imports them where it builds them.

Tests and the local runtime pass their own clients (or rely on ``AWS_ENDPOINT_URL``, which boto3 reads itself) —
AWS clients are injectable.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import boto3

from itl_accelerator.lazy import OnFirstUse
from itl_accelerator.settings import Settings, get_settings

if TYPE_CHECKING:
    from itl_accelerator.api_metrics import ApiMetrics
    from itl_accelerator.dgx.client import DgxPlatformClient
    from itl_accelerator.events import StateEventPublisher
    from itl_accelerator.platforms.protocol import ExecutionPlatform
    from itl_accelerator.platforms.router import Platforms
    from itl_accelerator.repositories.protocols import Repositories
    from itl_accelerator.services.api.audit_query import AuditQueryService
    from itl_accelerator.services.api.billing_files import BillingFileService
    from itl_accelerator.services.api.budgets import BudgetService
    from itl_accelerator.services.api.costs import CostQueryService
    from itl_accelerator.services.api.instances import SparkOllamaInstanceService
    from itl_accelerator.services.api.job_logs import JobLogService
    from itl_accelerator.services.api.jobs import SparkJobService
    from itl_accelerator.services.api.nodes import SparkNodeService
    from itl_accelerator.services.api.offers import OfferService
    from itl_accelerator.services.api.operations import OperationService
    from itl_accelerator.services.api.quotas import QuotaService
    from itl_accelerator.services.api.rate_limits import RateLimiter
    from itl_accelerator.services.api.reservations import CapacityReservationService
    from itl_accelerator.services.api.slo_report import SloReportService
    from itl_accelerator.services.api.subscriptions import SubscriptionService
    from itl_accelerator.services.api.usage_stats import UsageStatsService
    from itl_accelerator.services.common.access import Access
    from itl_accelerator.services.common.kernel import ResourceKernel
    from itl_accelerator.services.common.placement import Placement
    from itl_accelerator.services.schedules.billing_export import BillingExport
    from itl_accelerator.services.schedules.budget_monitor import BudgetMonitor
    from itl_accelerator.services.schedules.job_tracker import JobTracker
    from itl_accelerator.services.schedules.reconciler import Reconciler
    from itl_accelerator.services.schedules.usage_rollups import UsageRollups
    from itl_accelerator.services.schedules.usage_sync import UsageSync
    from itl_accelerator.services.streams.audit_archive import AuditArchive
    from itl_accelerator.services.streams.fleet import FleetChanges
    from itl_accelerator.services.workflows.callbacks import DgxCallbacks
    from itl_accelerator.services.workflows.deprovision_steps import DeprovisionSteps
    from itl_accelerator.services.workflows.instance_base import InstanceWorkflowSteps
    from itl_accelerator.services.workflows.instance_steps import InstanceSteps
    from itl_accelerator.services.workflows.job_steps import JobSteps
    from itl_accelerator.state_machines import StateMachines


#: The provision or the deprovision steps (both take the same construction).
Steps = TypeVar("Steps", bound="InstanceWorkflowSteps")


class Wiring:
    """The services of one process, each built on first use (module docstring)."""

    def __init__(
        self,
        settings: Settings,
        *,
        dynamodb_client: Any | None = None,
        stepfunctions_client: Any | None = None,
        s3_client: Any | None = None,
        events_client: Any | None = None,
        cloudwatch_client: Any | None = None,
        repositories: Repositories | None = None,
        dgx: DgxPlatformClient | None = None,
        slurm: Callable[[str], ExecutionPlatform] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.settings = settings
        self._slurm = slurm
        self._events_client = events_client
        self._cloudwatch_client = cloudwatch_client
        self.clock = clock
        self._repositories = repositories
        self._dgx = dgx
        self._dynamodb_client = dynamodb_client
        self._stepfunctions_client = stepfunctions_client
        self._s3_client = s3_client

    @classmethod
    def build(
        cls,
        settings: Settings | None = None,
        *,
        dynamodb_client: Any | None = None,
        stepfunctions_client: Any | None = None,
        s3_client: Any | None = None,
        events_client: Any | None = None,
        cloudwatch_client: Any | None = None,
        repositories: Repositories | None = None,
        dgx: DgxPlatformClient | None = None,
        slurm: Callable[[str], ExecutionPlatform] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> Wiring:
        """The wiring over ``settings`` (default: :func:`get_settings`) and optional injected AWS clients, repositories
        and DGX client (each created on first use otherwise); ``clock`` (epoch seconds) is every service's time."""
        return cls(
            settings or get_settings(),
            dynamodb_client=dynamodb_client,
            stepfunctions_client=stepfunctions_client,
            s3_client=s3_client,
            events_client=events_client,
            cloudwatch_client=cloudwatch_client,
            repositories=repositories,
            dgx=dgx,
            slurm=slurm,
            clock=clock,
        )

    # ------------------------------------------------------------------------------------------- clients, repositories
    @cached_property
    def repositories(self) -> Repositories:
        """The repositories over the table (or those injected: tests of the services pass in-memory ones)."""
        if self._repositories is not None:
            return self._repositories
        from itl_accelerator.repositories.dynamodb import dynamodb_repositories

        return dynamodb_repositories(
            self._dynamodb_client or boto3.client("dynamodb"),
            self.settings.table_name,
            audit_retention_days=self.settings.audit_retention_days,
        )

    @cached_property
    def state_machines(self) -> StateMachines:
        from itl_accelerator.state_machines import StateMachines

        def make() -> Any:
            from botocore.config import Config

            attempts = self.settings.stepfunctions_max_attempts
            config = Config(retries={"mode": "adaptive", "total_max_attempts": attempts})
            return boto3.client("stepfunctions", config=config)

        return StateMachines(self._stepfunctions_client or OnFirstUse(make))

    @cached_property
    def platforms(self) -> Platforms:
        """Every execution platform (itl_accelerator/platforms): the DGX Platform and the configured Slurm clusters,
        each made on its first use."""
        from itl_accelerator.platforms.router import Platforms

        def slurm(name: str) -> ExecutionPlatform:
            from itl_accelerator.slurm.factory import slurm_platform

            return slurm_platform(name, self.settings)

        return Platforms(self.dgx, slurm if self._slurm is None else self._slurm)

    @cached_property
    def dgx(self) -> DgxPlatformClient:
        """The DGX Platform client, made (its API key read from Secrets Manager in AWS) on its first call."""
        if self._dgx is not None:
            return self._dgx

        def make() -> DgxPlatformClient:
            from itl_accelerator.dgx.factory import dgx_client

            return dgx_client(self.settings)

        return OnFirstUse(make)  # type: ignore[return-value]

    # ------------------------------------------------------------------------------------------- API services
    @cached_property
    def access(self) -> Access:
        from itl_accelerator.services.common.access import Access

        return Access(self.repositories.audit)

    @cached_property
    def rate_limiter(self) -> RateLimiter:
        """Counts every API request against the subscription's and the caller's rate limits (api/routing.py)."""
        from itl_accelerator.services.api.rate_limits import RateLimiter, limits_of

        return RateLimiter(self.repositories.rate_limits, limits_of(self.settings), self.clock)

    @cached_property
    def kernel(self) -> ResourceKernel:
        from itl_accelerator.services.common.kernel import ResourceKernel

        return ResourceKernel(self.repositories, self.access)

    @cached_property
    def nodes(self) -> SparkNodeService:
        from itl_accelerator.services.api.nodes import SparkNodeService

        return SparkNodeService(
            self.kernel,
            clusters=self.settings.slurm_cluster_names,
            default_backend=self.settings.default_node_backend or None,
            reservations=self.reservations,
        )

    @cached_property
    def instances(self) -> SparkOllamaInstanceService:
        from itl_accelerator.services.api.instances import SparkOllamaInstanceService

        return SparkOllamaInstanceService(self.kernel, self.state_machines, self.settings, self.clock)

    @cached_property
    def jobs(self) -> SparkJobService:
        from itl_accelerator.services.api.jobs import SparkJobService

        return SparkJobService(self.kernel, self.state_machines, self.settings, self.clock)

    @cached_property
    def reservations(self) -> CapacityReservationService:
        from itl_accelerator.services.api.reservations import CapacityReservationService

        return CapacityReservationService(self.kernel, self.clock)

    @cached_property
    def operations(self) -> OperationService:
        from itl_accelerator.services.api.operations import OperationService

        return OperationService(self.repositories, self.access, self.settings, self.clock)

    @cached_property
    def subscriptions(self) -> SubscriptionService:
        from itl_accelerator.services.api.subscriptions import SubscriptionService

        return SubscriptionService(self.repositories.subscriptions, self.access)

    @cached_property
    def audit(self) -> AuditQueryService:
        from itl_accelerator.services.api.audit_query import AuditQueryService

        return AuditQueryService(self.repositories.audit, self.access)

    @cached_property
    def usage_stats(self) -> UsageStatsService:
        from itl_accelerator.services.api.usage_stats import UsageStatsService

        return UsageStatsService(self.kernel, self.instances, self.jobs, self.repositories.usage, self.clock)

    @cached_property
    def quotas(self) -> QuotaService:
        from itl_accelerator.services.api.quotas import QuotaService

        return QuotaService(self.repositories.quotas, self.repositories.nodes, self.access)

    @cached_property
    def costs(self) -> CostQueryService:
        from itl_accelerator.services.api.costs import CostQueryService

        return CostQueryService(self.repositories.usage, self.access, self.clock)

    @cached_property
    def offers(self) -> OfferService:
        """What a job could get now in a location (from the fleet shapes, the placement index, quotas and budgets)."""
        from itl_accelerator.services.api.offers import OfferService

        return OfferService(
            self.repositories.nodes, self.repositories.quotas, self.repositories.budgets, self.access, self.clock
        )

    @cached_property
    def billing_files(self) -> BillingFileService:
        """Pages of a subscription's FOCUS billing file of a day (from the export's per-subscription entries)."""
        from itl_accelerator.services.api.billing_files import BillingFileService

        return BillingFileService(self.repositories.billing, self.access, self.clock)

    @cached_property
    def job_logs(self) -> JobLogService:
        """A job's log, proxied from the DGX Platform (the one API service that calls the platform)."""
        from itl_accelerator.services.api.job_logs import JobLogService

        return JobLogService(self.kernel, self.platforms)

    @cached_property
    def slo_report(self) -> SloReportService:
        """The SLO report, counting requests in the local emulator's request log when ``API_REQUEST_LOG`` names one,
        else in CloudWatch (API Gateway's metrics of ``API_NAME``/``API_STAGE``)."""
        from itl_accelerator.api_metrics import CloudWatchApiMetrics, RequestLogMetrics
        from itl_accelerator.services.api.slo_report import SloReportService

        settings = self.settings
        metrics: ApiMetrics
        if settings.api_request_log:
            metrics = RequestLogMetrics(settings.api_request_log, settings.slo_latency_threshold_ms)
        else:
            client = self._cloudwatch_client or boto3.client("cloudwatch")
            metrics = CloudWatchApiMetrics(
                client, settings.api_name, settings.api_stage, settings.slo_latency_threshold_ms
            )
        return SloReportService(metrics, settings)

    @cached_property
    def audit_archive(self) -> AuditArchive:
        """Expired audit events into ``AUDIT_ARCHIVE_BUCKET`` (raises ``ValueError`` when unset)."""
        from itl_accelerator.services.streams.audit_archive import AuditArchive

        return AuditArchive(
            self._s3_client or boto3.client("s3"),
            self.settings.audit_archive_bucket,
            self.settings.audit_archive_prefix,
        )

    @cached_property
    def state_events(self) -> StateEventPublisher:
        """The provider's events onto ``EVENT_BUS_NAME`` (raises ``ValueError`` when unset)."""
        from itl_accelerator.events import StateEventPublisher

        return StateEventPublisher(self._events_client or boto3.client("events"), self.settings.event_bus_name)

    # ------------------------------------------------------------------------------------------- workflows, schedules
    @cached_property
    def placement(self) -> Placement:
        from itl_accelerator.services.common.placement import Placement

        return Placement(self.kernel, self.state_machines, self.settings, self.clock)

    @cached_property
    def instance_steps(self) -> InstanceSteps:
        from itl_accelerator.services.workflows.instance_steps import InstanceSteps

        return self._instance_workflow_steps(InstanceSteps)

    @cached_property
    def deprovision_steps(self) -> DeprovisionSteps:
        from itl_accelerator.services.workflows.deprovision_steps import DeprovisionSteps

        return self._instance_workflow_steps(DeprovisionSteps)

    def _instance_workflow_steps(self, kind: type[Steps]) -> Steps:
        """Provision or deprovision steps over this wiring's kernel, DGX client and state machines; a release of
        GPUs tells placement to serve the waiting jobs."""
        steps = kind(
            self.kernel,
            self.platforms,
            self.state_machines,
            lease_grace_seconds=self.settings.workflow_lease_grace_seconds,
            callback_url=self.settings.dgx_callback_url or None,
            clock=self.clock,
        )
        steps.on_release = lambda ctx, subscription_id: self.placement.dispatch(ctx, subscription_id)
        return steps

    @cached_property
    def job_steps(self) -> JobSteps:
        from itl_accelerator.services.workflows.job_steps import JobSteps

        return JobSteps(self.kernel, self.placement, self.state_machines, self.platforms, self.settings, self.clock)

    @cached_property
    def dgx_callbacks(self) -> DgxCallbacks:
        """The DGX Platform's callbacks (POST /dgx/callbacks): its secret read, and the job tracker (with the DGX
        client) built, only when a callback needs them."""
        from itl_accelerator.dgx.callbacks import callback_secret
        from itl_accelerator.services.workflows.callbacks import DgxCallbacks

        return DgxCallbacks(
            self.repositories,
            self.state_machines,
            secret=lambda: callback_secret(self.settings),
            tolerance_seconds=self.settings.dgx_callback_tolerance_seconds,
            job_tracker=lambda: self.job_tracker,
            clock=self.clock,
        )

    @cached_property
    def job_tracker(self) -> JobTracker:
        from itl_accelerator.services.common.context import system_context
        from itl_accelerator.services.schedules.job_tracker import JobTracker
        from itl_accelerator.services.schedules.node_health import NodeHealthSweep

        def served(subscription_id: str) -> None:  # a node takes work again: serve the subscription's waiting jobs
            self.placement.dispatch(system_context("node-health", "", self.clock), subscription_id)

        sweep = NodeHealthSweep(self.repositories.nodes, self.platforms, self.settings, served, self.clock)
        return JobTracker(
            self.repositories,
            self.job_steps,
            self.state_machines,
            self.settings,
            self.clock,
            instance_steps=self.instance_steps,
            node_health=sweep if self.settings.slurm_clusters else None,
        )

    @cached_property
    def fleet_changes(self) -> FleetChanges:
        from itl_accelerator.services.streams.fleet import FleetChanges

        return FleetChanges(
            self.placement,
            self.repositories,
            self.state_machines,
            on_budgets=lambda changes: self.budget_monitor.on_change(changes),
        )

    @cached_property
    def reconciler(self) -> Reconciler:
        from itl_accelerator.services.schedules.reconciler import Reconciler

        return Reconciler(
            self.kernel,
            self.instance_steps,
            self.deprovision_steps,
            self.job_steps,
            self.placement,
            self.state_machines,
            self.settings,
            self.clock,
        )

    @cached_property
    def usage_sync(self) -> UsageSync:
        from itl_accelerator.services.schedules.usage_sync import UsageSync

        return UsageSync(self.repositories, self.platforms, self.settings, self.clock)

    @cached_property
    def usage_rollups(self) -> UsageRollups:
        from itl_accelerator.services.schedules.usage_rollups import UsageRollups

        return UsageRollups(self.repositories.usage, self.settings, self.clock)

    @cached_property
    def budget_monitor(self) -> BudgetMonitor:
        """The budget schedule; its events go to ``EVENT_BUS_NAME`` when one is set."""
        from itl_accelerator.services.schedules.budget_monitor import BudgetMonitor

        publish = self.state_events.put if self.settings.event_bus_name else None
        # the API services it cancels and deletes with are made when a budget's action first needs them: a run that
        # stops nothing (most) never loads the job and instance models at its cold start
        return BudgetMonitor(
            self.repositories,
            OnFirstUse(lambda: self.jobs),  # type: ignore[arg-type]
            OnFirstUse(lambda: self.instances),  # type: ignore[arg-type]
            publish=publish,
            clock=self.clock,
        )

    @cached_property
    def budgets(self) -> BudgetService:
        """Budgets of a subscription (Azure Cost Management's shape)."""
        from itl_accelerator.services.api.budgets import BudgetService
        from itl_accelerator.services.common.spend import SpendReader

        return BudgetService(self.repositories.budgets, SpendReader(self.repositories.meters), self.access, self.clock)

    @cached_property
    def billing_export(self) -> BillingExport:
        from itl_accelerator.services.schedules.billing_export import BillingExport

        return BillingExport(
            self.repositories.usage,
            self.repositories.billing,
            self._s3_client or boto3.client("s3"),
            self.settings,
            self.clock,
        )
