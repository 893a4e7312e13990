"""The one settings model. Nothing else in the project reads ``os.environ`` (but for Powertools' own variables, which
observability.py reads as Powertools does).

A pydantic model read from the environment by :meth:`Settings.from_environ` (variable names case-insensitive, a
field's name or one of its ``AliasChoices``; a list field holds JSON), as pydantic-settings would - without
pydantic-settings, whose import (with asyncio and its source providers) cost every function about 90 ms of its cold
start (docs/ARCHITECTURE.md, "Cold start"). ``Settings(**values)`` is the values given and the defaults, nothing else.

Names follow the original service description (``CONTROL_PLANE_API_URL``, ``CONTROL_PLANE_AUTH_URL``,
``DGX_PLATFORM_API_URL``, ``DGX_PLATFORM_API_KEY``, ``SERVICE_NAME``, ``SERVICE_PORT``, ``LOG_LEVEL``) plus the
serverless ones (``TABLE_NAME``, the ``OIDC_*`` identity settings).
"""

from __future__ import annotations

import json
import os
import re
import typing
from collections.abc import Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any, Self

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic.alias_generators import to_camel

#: A Step Functions state machine's ARN (any partition; template.yaml passes ``!Ref`` of each state machine).
#: The slurmrestd REST versions the Slurm client speaks (itl_accelerator/slurm/versions.py): 22.05's, and 24.05-25.11's.
SlurmApiVersion = typing.Literal["v0.0.38", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44"]
#: An environment variable's name (POSIX portable names, what Slurm passes on).
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

STATE_MACHINE_ARN = re.compile(r"^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:stateMachine:[A-Za-z0-9_.-]{1,80}$")


class SettingMissing(RuntimeError):
    """A setting this function needs for what it was asked to do is not set: the deployment is wrong (template.yaml
    sets it on the functions that need it). Raised before anything is written, so the call fails loudly (500, the
    variable named in the log) instead of accepting work that cannot go on."""


class SettingInvalid(ValueError):
    """A setting's environment variable holds a value the model refuses (not a number, out of range, not an ARN...):
    raised at the settings' first read, the function's cold start, naming each variable and why."""


#: What each function cannot run without, by its handler (template.yaml's ``Handler``; Lambda passes it as
#: ``_HANDLER``): checked when the function first reads its settings, at its cold start (the cookbook's
#: ``init_environment_variables``), so a deployment that leaves one out fails its first call naming the variable
#: instead of accepting work it cannot go on with. tests/unit/test_settings_needed.py keeps template.yaml giving every
#: function the variables listed here. The local runtime serves every function from one process environment holding
#: them all (and no ``_HANDLER``), so there the check has nothing to find.
REQUIRED_BY_HANDLER: dict[str, tuple[str, ...]] = {
    "itl_functions.spark_ollama_instances.create": ("provision_state_machine_arn",),
    "itl_functions.spark_ollama_instances.create_or_update": ("provision_state_machine_arn",),
    "itl_functions.spark_ollama_instances.delete": ("deprovision_state_machine_arn",),
    "itl_functions.spark_jobs.create": ("job_state_machine_arn",),
    "itl_functions.spark_jobs.create_or_update": ("job_state_machine_arn",),
    "itl_functions.slo.get": ("api_name", "api_stage"),
    "itl_functions.streams.fleet_changes": ("deprovision_state_machine_arn",),
    "itl_functions.state_events.publish": ("event_bus_name", "audit_archive_bucket"),
    "itl_functions.schedules.reconcile": (
        "provision_state_machine_arn",
        "deprovision_state_machine_arn",
        "job_state_machine_arn",
    ),
    "itl_functions.schedules.monitor_budgets": ("deprovision_state_machine_arn",),
    "itl_functions.schedules.export_billing": ("billing_export_bucket",),
}


class SlurmClusterSettings(BaseModel):
    """One Slurm cluster the provider runs work on (docs/SLURM.md), an entry of ``SLURM_CLUSTERS`` (a JSON list;
    camelCase or snake_case keys): its ``name`` (what a node's ``properties.backend.cluster`` says), slurmrestd's
    ``url`` and REST ``apiVersion`` (``v0.0.38`` for Slurm 22.05; ``v0.0.41``-``v0.0.44`` for 24.05-25.11, AWS PCS),
    the Slurm ``user`` jobs run as (the key's token acts as it), the JWT signing key — ``jwtKeySecretId``, a Secrets
    Manager secret holding it base64 (in AWS; its name must start ``itl-accelerator/slurm/``: the functions' policy),
    or ``jwtKey`` (base64, locally) — the default ``partition``; the cluster's ``killWaitSeconds`` (slurm.conf
    KillWait: how long a cancelled job has after SIGTERM) and ``minJobAgeSeconds`` (MinJobAge: how long an ended job
    stays in slurmctld); ``jobEnvironment`` added to every job's; how a container image runs (``containerRuntime``:
    ``none`` — the command runs on the node as it is, the image only recorded — or ``pyxis``: ``srun
    --container-image``); the ``ollamaServeCommand`` an instance runs, and the ``workingDirectory`` jobs start in
    (their output goes there too). Units: seconds."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, alias_generator=to_camel)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")
    url: str = Field(pattern=r"^https?://[^\s]+$")
    api_version: SlurmApiVersion = "v0.0.38"
    user: str = Field(default="root", pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
    jwt_key: SecretStr = SecretStr("")
    jwt_key_secret_id: str = ""
    partition: str = ""
    kill_wait_seconds: int = Field(default=30, ge=0, le=65533)
    min_job_age_seconds: int = Field(default=300, ge=2, le=86400)
    job_environment: dict[str, str] = {}
    container_runtime: typing.Literal["none", "pyxis"] = "none"
    ollama_serve_command: str = "ollama serve"
    working_directory: str = "/tmp"  # noqa: S108 - a directory on the cluster's nodes, not here
    connect_timeout_seconds: float = Field(default=2.0, gt=0)
    read_timeout_seconds: float = Field(default=10.0, gt=0)

    @field_validator("url")
    @classmethod
    def _strip_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @field_validator("job_environment")
    @classmethod
    def _environment_names(cls, value: dict[str, str]) -> dict[str, str]:
        """Names only in the error (values may be secrets): a name Slurm cannot pass on is refused at cold start."""
        bad = sorted(k for k in value if not ENV_NAME.match(k))
        if bad:
            raise ValueError(f"jobEnvironment names that are no environment variable names: {bad}")
        return value


class Settings(BaseModel):
    """Runtime configuration, read from environment variables (case-insensitive names) by :meth:`from_environ`.

    Units: seconds for every ``*_seconds`` field, bytes for ``max_body_bytes``.
    """

    model_config = ConfigDict(extra="ignore", validate_by_name=True, validate_by_alias=True)

    service_name: str = "accelerator-provider"
    log_level: str = "INFO"
    # The function's handler as Lambda names it (``_HANDLER``, e.g. ``itl_functions.spark_jobs.create``): which
    # entry of REQUIRED_BY_HANDLER its cold start checks. Empty outside Lambda.
    lambda_handler: str = Field(default="", validation_alias="_handler")

    # The ITL Control Plane's API gateway, which the provider registers with (gateway_registration.py): the seed's
    # CONTROL_PLANE_API_URL, or CONTROLPLANE_API_URL as the ITL SDK and the ITL CLI name it. Empty: no registration.
    control_plane_api_url: str = Field(
        default="http://controlplane-api:8000",
        validation_alias=AliasChoices("control_plane_api_url", "controlplane_api_url"),
    )
    control_plane_auth_url: str = "https://auth.itlusions.com"
    dgx_platform_api_url: str = "http://127.0.0.1:9504"
    dgx_platform_api_key: SecretStr = SecretStr("")

    table_name: str = "itl-accelerator"

    # DGX Platform client. In AWS the key comes from Secrets Manager (DGX_PLATFORM_API_KEY_SECRET_ID, cached);
    # locally from DGX_PLATFORM_API_KEY.
    dgx_platform_api_key_secret_id: str = ""
    dgx_connect_timeout_seconds: float = Field(default=2.0, gt=0)
    dgx_read_timeout_seconds: float = Field(default=10.0, gt=0)
    dgx_attempts: int = Field(default=3, ge=1, le=10)
    # Upper bound of one client call including its retries, so a workflow step ends well within its Lambda timeout.
    dgx_call_budget_seconds: float = Field(default=20.0, gt=0, le=300)

    # DGX callbacks (docs/DGX_INTEGRATION.md, "Callbacks"): the URL the platform is asked to call when an instance is
    # ready or a job ended (the API's POST /dgx/callbacks; empty: none asked, polling alone), and the secret its
    # callbacks are signed with - from Secrets Manager (DGX_CALLBACK_SECRET_ID, cached) in AWS, else
    # DGX_CALLBACK_SECRET. A callback whose timestamp is further than the tolerance from now is refused (a replay).
    dgx_callback_url: str = ""
    dgx_callback_secret: SecretStr = SecretStr("")
    dgx_callback_secret_id: str = ""
    dgx_callback_tolerance_seconds: int = Field(default=300, ge=1, le=3600)

    # Slurm clusters (docs/SLURM.md): the clusters nodes may run on (SLURM_CLUSTERS, a JSON list of
    # SlurmClusterSettings); none: every node runs on the DGX Platform.
    slurm_clusters: list[SlurmClusterSettings] = []
    # The backend of a node registered without one (properties.backend): DEFAULT_NODE_BACKEND, a JSON object as a
    # node says it ({"type": "Slurm", "cluster": "local"}: every new node a node of that cluster, its Slurm nodeName
    # its own name unless it says one). Empty: the DGX Platform.
    default_node_backend: dict[str, str] = {}

    # Workflows (Step Functions). Poll interval and timeout go into each execution's input. The client retries a
    # throttled or failed call in botocore's adaptive mode (client-side rate limiting after throttling) this many
    # attempts in all, so a sweep that starts many executions slows to the account's StartExecution rate instead of
    # deferring the rest to the next run.
    stepfunctions_max_attempts: int = Field(default=6, ge=1, le=20)
    provision_state_machine_arn: str = ""
    deprovision_state_machine_arn: str = ""
    instance_poll_interval_seconds: int = Field(default=10, ge=1, le=300)
    instance_provision_timeout_seconds: int = Field(default=900, ge=1, le=21600)
    # Leases of workflow-owned resources (services/schedules/reconciler.py): how long an accepted operation may wait
    # for its workflow's first step, and the grace added to each step's own deadline.
    workflow_start_grace_seconds: int = Field(default=120, ge=1, le=3600)
    workflow_lease_grace_seconds: int = Field(default=120, ge=1, le=3600)
    # The reconciler reads the expired leases this many at a time (a run reads every page, time allowing).
    reconcile_batch_size: int = Field(default=100, ge=1, le=500)

    # Jobs (services/workflows/job_steps.py, services/common/placement.py). Seconds.
    job_state_machine_arn: str = ""
    # First wait before a running job's state is checked on the DGX Platform; it doubles up to the maximum (the
    # safety sweep behind the platform's callbacks: every running job is checked at least this often).
    job_poll_interval_seconds: int = Field(default=30, ge=1, le=3600)
    job_poll_max_interval_seconds: int = Field(default=300, ge=1, le=3600)
    # How often a live instance is checked on the DGX Platform (the job tracker's instance watch).
    instance_watch_interval_seconds: int = Field(default=300, ge=1, le=3600)
    # How long a job may wait for capacity before it fails; how often waiting jobs are retried without a release.
    job_pending_timeout_seconds: int = Field(default=7 * 24 * 3600, ge=60, le=365 * 24 * 3600)
    job_placement_retry_seconds: int = Field(default=60, ge=1, le=3600)
    # After this long at the head of the queue without fitting, a job has a node drained for it (no starvation).
    job_starvation_seconds: int = Field(default=900, ge=1, le=7 * 24 * 3600)
    # How long a preempted job has to stop on its own (SIGTERM, then SIGKILL) before the platform kills it.
    job_preemption_grace_seconds: int = Field(default=30, ge=0, le=3600)
    # Added to maxDurationMinutes for the tracking wait's own timeout; how long a stop may take on the platform.
    job_track_margin_seconds: int = Field(default=3600, ge=60, le=86400)
    job_stop_timeout_seconds: int = Field(default=300, ge=1, le=3600)
    # Workloads the job tracker reads per page of the lease index (a run reads every page due, time allowing).
    job_track_batch_size: int = Field(default=100, ge=1, le=1000)

    # Registration with the ITL gateway (gateway_registration.py), as itl-controlplane-sdk's provider server does it:
    # the gateway's /health is polled this many times, this many seconds apart (the SDK's API_GATEWAY_MAX_RETRIES
    # and API_GATEWAY_RETRY_INTERVAL, read too), then the provider is registered with this base URL (empty: the
    # public base URL; the template sets the API's URL).
    provider_base_url: str = ""
    provider_registration_attempts: int = Field(
        default=30,
        ge=1,
        le=300,
        validation_alias=AliasChoices("provider_registration_attempts", "api_gateway_max_retries"),
    )
    provider_registration_interval_seconds: float = Field(
        default=2.0,
        ge=0,
        le=60,
        validation_alias=AliasChoices("provider_registration_interval_seconds", "api_gateway_retry_interval"),
    )

    # State-change events (events.py): the EventBridge bus they are put on (the template's EventBus).
    event_bus_name: str = ""

    # Service level objectives (slo.py; template.yaml's AvailabilitySloPercent, LatencySloPercent,
    # LatencyThresholdMs): goals in percent of API requests, the latency threshold in milliseconds.
    slo_availability_percent: Decimal = Field(default=Decimal("99.9"), gt=0, lt=100)
    slo_latency_percent: Decimal = Field(default=Decimal("99"), gt=0, lt=100)
    slo_latency_threshold_ms: int = Field(default=1000, ge=1, le=29000)
    # Where the SLO report reads the API's requests: API Gateway's metrics of API_NAME / API_STAGE in CloudWatch,
    # or - when API_REQUEST_LOG names one - the local API Gateway emulator's request log (JSON lines).
    api_name: str = ""
    api_stage: str = ""
    api_request_log: str = ""

    # Powertools' switch for X-Ray tracing (observability.LambdaTracer): the X-Ray SDK is loaded only when tracing is on.
    powertools_trace_disabled: bool = False

    # Usage metering and billing (services/schedules/usage_sync.py, usage_rollups.py, billing_export.py). Seconds
    # unless named otherwise.
    # How often the usage sync runs (template.yaml's schedule; a synced meter is next due after half of it).
    usage_sync_interval_seconds: int = Field(default=300, ge=1, le=3600)
    # Hours re-read (on a meter's first sync of each new hour, and when it settles) so metrics that arrive late
    # update their own window.
    usage_late_windows: int = Field(default=2, ge=0, le=48)
    # Meters the sync reads per page of its index (a run reads every page due, time allowing), windows per meter
    # and run (a meter far behind catches up over several runs), hours per roll-up run, days per export run.
    usage_sync_batch_size: int = Field(default=500, ge=1, le=10000)
    usage_max_windows_per_meter: int = Field(default=48, ge=1, le=24 * 31)
    rollup_batch_hours: int = Field(default=48, ge=1, le=24 * 31)
    billing_export_max_days: int = Field(default=7, ge=1, le=62)
    # A day is exported once it ended this long ago (seconds): its last hours are synced and re-read by then
    # (the export runs every hour at :30; with 90 minutes, a day goes out at 01:30 UTC the next day).
    billing_export_grace_seconds: int = Field(default=5400, ge=0, le=86400)
    # Where the daily FOCUS export goes (template.yaml's BillingExportBucket) and under which key prefix.
    billing_export_bucket: str = ""
    billing_export_prefix: str = "focus/"
    # How long an audit event stays in the table (days; 0: for ever): each carries a DynamoDB TTL this long after it
    # happened; when DynamoDB deletes it, the audit archive (template.yaml's StateEventsFunction) copies it to
    # this bucket under this prefix (docs/ARCHITECTURE.md, "Audit retention").
    audit_retention_days: int = Field(default=400, ge=0, le=36500)
    audit_archive_bucket: str = ""
    audit_archive_prefix: str = "audit/"

    # OIDC (Keycloak). Empty issuer / JWKS URL derive from CONTROL_PLANE_AUTH_URL and the realm.
    oidc_realm: str = "itl"
    oidc_issuer: str = ""
    oidc_jwks_url: str = ""
    oidc_audience: str = "itl-accelerator"
    oidc_leeway_seconds: int = Field(default=30, ge=0, le=300)
    jwks_cache_seconds: int = Field(default=300, ge=0)
    jwks_fetch_timeout_seconds: float = Field(default=3.0, gt=0)
    # Dotted claim paths; every path that holds a list of strings contributes roles.
    roles_claim_paths: list[str] = ["realm_access.roles", "resource_access.itl-accelerator.roles"]
    subscriptions_claim: str = "subscriptions"

    # Public base URL (scheme://host[/stage]) for nextLink / Location; derived from the request when empty.
    public_base_url: str = ""
    # The web portal's origin (scheme://host[:port], template.yaml's PortalOrigin): API responses to requests from it
    # carry Access-Control-Allow-Origin (CORS; API Gateway answers the preflight). Empty: no CORS headers.
    cors_allowed_origin: str = ""
    max_body_bytes: int = Field(default=64 * 1024, gt=0)

    # Request rate limits (services/api/rate_limits.py; ARM's model: reads are GET/HEAD, writes everything else),
    # requests per UTC minute: every caller of a subscription together, and one caller in a subscription. 0: no
    # limit. Defaults as template.yaml's RateLimit* parameters.
    rate_limit_subscription_reads_per_minute: int = Field(default=1200, ge=0)
    rate_limit_subscription_writes_per_minute: int = Field(default=300, ge=0)
    rate_limit_caller_reads_per_minute: int = Field(default=600, ge=0)
    rate_limit_caller_writes_per_minute: int = Field(default=150, ge=0)
    default_page_size: int = Field(default=100, ge=1, le=1000)

    @field_validator(
        "control_plane_auth_url",
        "public_base_url",
        "oidc_issuer",
        "dgx_platform_api_url",
        "cors_allowed_origin",
        "control_plane_api_url",
        "provider_base_url",
    )
    @classmethod
    def _strip_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")

    @field_validator("provision_state_machine_arn", "deprovision_state_machine_arn", "job_state_machine_arn")
    @classmethod
    def _state_machine_arn(cls, value: str) -> str:
        """Empty (a function that starts no workflow), or a state machine's ARN: a wrong value fails the settings'
        first read, at the function's cold start, not the first workflow it starts."""
        if value and not STATE_MACHINE_ARN.match(value):
            raise ValueError(f"not a Step Functions state machine ARN: {value!r}")
        return value

    @classmethod
    def environment_names(cls) -> dict[str, tuple[str, ...]]:
        """Field name → the environment variables it is read from, upper case, first found wins: its own name, or
        its ``AliasChoices`` (``CONTROL_PLANE_API_URL``, then ``CONTROLPLANE_API_URL``) or alias (``_HANDLER``)."""
        names: dict[str, tuple[str, ...]] = {}
        for name, field in cls.model_fields.items():
            alias = field.validation_alias
            if isinstance(alias, AliasChoices):
                names[name] = tuple(str(choice).upper() for choice in alias.choices)
            elif isinstance(alias, str):
                names[name] = (alias.upper(),)
            else:
                names[name] = (name.upper(),)
        return names

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None, **values: Any) -> Self:
        """The settings of ``environ`` (default: ``os.environ``) — each field from the first of its
        :meth:`environment_names` set, in any case; a list field's value is JSON — with ``values`` over them.
        Raises :class:`SettingInvalid` naming each variable whose value is refused."""
        found = {key.upper(): value for key, value in (os.environ if environ is None else environ).items()}
        read: dict[str, Any] = {}
        source: dict[str, str] = {}  # field → the variable it was read from
        problems: list[str] = []
        for name, variables in cls.environment_names().items():
            variable = next((v for v in variables if v in found), None)
            if variable is None or name in values:
                continue
            value: Any = found[variable]
            annotation = cls.model_fields[name].annotation
            if typing.get_origin(annotation) in (list, dict, tuple, set):
                try:
                    value = json.loads(value)
                except ValueError:
                    problems.append(f"{variable}: not JSON (a {annotation} is expected)")
                    continue
            read[name] = value
            source[name] = variable
        try:
            settings = cls(**read, **values)
        except ValidationError as error:
            problems += [
                f"{source.get(str(e['loc'][0]), '.'.join(map(str, e['loc'])).upper())}: {e['msg']}"
                for e in error.errors()
            ]
        if problems:
            raise SettingInvalid("; ".join(problems))
        return settings

    def require(self, name: str) -> str:
        """The value of the setting ``name`` (a field of this model), which the caller cannot do without. Raises
        :class:`SettingMissing` naming its environment variable when it is empty."""
        value = getattr(self, name)
        if not value:
            raise SettingMissing(f"{name.upper()} is not set: this function cannot do what it was asked without it")
        return str(value)

    @property
    def slurm_cluster_names(self) -> frozenset[str]:
        """The names of the configured Slurm clusters."""
        return frozenset(c.name for c in self.slurm_clusters)

    def slurm_cluster(self, name: str) -> SlurmClusterSettings | None:
        """The configured Slurm cluster ``name`` (None: none)."""
        return next((c for c in self.slurm_clusters if c.name == name), None)

    @field_validator("slurm_clusters")
    @classmethod
    def _one_cluster_a_name(cls, value: list[SlurmClusterSettings]) -> list[SlurmClusterSettings]:
        names = [c.name for c in value]
        if len(set(names)) != len(names):
            raise ValueError(f"two Slurm clusters have one name: {sorted(n for n in names if names.count(n) > 1)[0]}")
        return value

    @property
    def issuer(self) -> str:
        """The expected ``iss`` claim: ``OIDC_ISSUER`` or ``{CONTROL_PLANE_AUTH_URL}/realms/{OIDC_REALM}``."""
        return self.oidc_issuer or f"{self.control_plane_auth_url}/realms/{self.oidc_realm}"

    @property
    def jwks_url(self) -> str:
        """The JWKS document URL: ``OIDC_JWKS_URL`` or Keycloak's ``{issuer}/protocol/openid-connect/certs``."""
        return self.oidc_jwks_url or f"{self.issuer}/protocol/openid-connect/certs"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once on first use (never at import time: a function's first invocation).
    Raises :class:`SettingInvalid` naming each variable whose value is refused, and :class:`SettingMissing` naming
    each one this function's handler needs (``REQUIRED_BY_HANDLER``) that is not set; neither is cached, so every
    call of a misconfigured function fails the same way."""
    settings = Settings.from_environ()
    missing = [
        name.upper() for name in REQUIRED_BY_HANDLER.get(settings.lambda_handler, ()) if not getattr(settings, name)
    ]
    if missing:
        raise SettingMissing(f"{', '.join(missing)} not set: {settings.lambda_handler} cannot run without it")
    return settings
