"""Every file of the repository that is made from another, written from the tables the code already holds:
``./dev generate`` writes each one, ``./dev generate --check`` (and tests/unit/test_generated_template.py) fails,
with the difference, when one differs from what its source gives. It lives at the repository's root, beside what it
writes (template.yaml, functions/, the layer's casing table, docs/, the MCP server's schemas), and ships in none of
them: it is neither the provider's code nor the local runtime's.

What it writes:

- template.yaml's generated regions (below);
- each API handler module's ``handlers`` region (functions/itl_functions/{module}.py, from :data:`API_FUNCTIONS`);
- the catch-all route's casing table (layers/core/itl_accelerator/api/canonical.py ``route-paths``, from the routers);
- a sample event for a row that has none (``events/{Name}Function.json``, below);
- docs/openapi.json, the API's OpenAPI document, from the routers and models (FastAPI's ``openapi()``);
- the MCP server's copy of the API's schemas (mcp_server/itl_accelerator_mcp/api_schemas.json: ``components.schemas``
  of that document, ``itl_accelerator_mcp.schemas.render``).

template.yaml stays the deployable source of truth (``sam validate --lint``, ``sam build`` and the local runtime read
it as they always did); a region is the text between its two marker lines::

      # >>> generated: <region> - from <source>; ./dev generate writes this, edit the source
      ...
      # <<< generated: <region>

Regions and their sources:

- ``api-functions``: one ``AWS::Serverless::Function`` per ARM operation, from :data:`API_FUNCTIONS` (one row per
  function: its handler, description, policies, environment) and the routers (each handler's route gives the event's
  ``Path`` and ``Method``, so the template cannot disagree with the route it serves).
- ``events/{Name}Function.json``: a sample API Gateway event for a row of :data:`API_FUNCTIONS` that has none yet
  (its route with :data:`SAMPLE_PATH_PARAMETERS`, ``api-version`` and no body), so ``./dev invoke`` runs a new
  operation at once; an existing event is never rewritten (it holds a chosen body and query).
- ``slo-alarms``: the multiwindow, multi-burn-rate alarms of both SLOs and their composite alarms, from
  ``itl_accelerator.slo.BURN_RATE_ALERTS`` (the table the SLO report reads too) and :data:`OBJECTIVES`.

Hand-written stays what is said once (the functions with their own authorizer setting, code or comments, the
workflow steps, the state machines, the data and the alarms of the fleet).
"""

from __future__ import annotations

import argparse
import difflib
import functools
import json
import re
import sys
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The repository's root, where template.yaml is.
REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TEMPLATE = REPO_ROOT / "template.yaml"

# ------------------------------------------------------------------------------------------------ API functions
#: Policy sets of template.yaml (each a managed policy the template declares once), by what a function does.
READ = ("TableReadPolicy", "AuditAppendPolicy", "RateCounterPolicy")
WRITE = (*READ, "TableCreatePolicy", "TableUpdatePolicy")
DELETE = (*WRITE, "TableDeletePolicy")


@dataclass(frozen=True)
class ApiFunction:
    """One API function: ``name`` (its logical id without ``Function``), ``handler`` (``module.attribute`` in
    ``itl_functions``: the generator writes that line of the module), ``operation`` (the route's operation id: its
    route gives the event's path and method, its router the module's import), ``description``, ``policies`` (names of the template's managed
    policies), ``environment`` (variable → YAML value, e.g. ``!Ref JobLifecycleStateMachine``), ``timeout``
    (seconds; the template's global when None) and ``hot`` (SnapStart already under ``ApiSnapStart: HotPaths``:
    the paths callers wait on, benchmarks/idle_cost.py)."""

    name: str
    handler: str
    operation: str
    description: str
    policies: tuple[str, ...] = READ
    environment: dict[str, str] = field(default_factory=dict)
    timeout: int | None = None
    hot: bool = False


_PROVISION = {"PROVISION_STATE_MACHINE_ARN": "!Ref ProvisionInstanceStateMachine"}
_DEPROVISION = {"DEPROVISION_STATE_MACHINE_ARN": "!Ref DeprovisionInstanceStateMachine"}
_JOB = {"JOB_STATE_MACHINE_ARN": "!Ref JobLifecycleStateMachine"}

#: Every ARM operation's function, in template order. A new operation is its route, its service method, its test
#: and one row here.
API_FUNCTIONS: tuple[ApiFunction, ...] = (
    ApiFunction('SparkNodesCreate', 'spark_nodes.create', 'SparkNodes_Create', 'POST to the sparkNodes collection (ITL form: name in body)', WRITE),
    ApiFunction('SparkNodesCreateOrUpdate', 'spark_nodes.create_or_update', 'SparkNodes_CreateOrUpdate', 'PUT a sparkNode (create or replace; force=true ends the capacity reservations it would break)', DELETE),
    ApiFunction('SparkNodesGet', 'spark_nodes.get', 'SparkNodes_Get', 'GET a sparkNode'),
    ApiFunction('SparkNodesUpdate', 'spark_nodes.update', 'SparkNodes_Update', 'PATCH a sparkNode (force=true ends the capacity reservations it would break)', (*READ, 'TableUpdatePolicy', 'TableDeletePolicy')),
    ApiFunction('SparkNodesDelete', 'spark_nodes.delete', 'SparkNodes_Delete', 'DELETE a sparkNode', (*READ, 'TableDeletePolicy', 'TableUpdatePolicy')),
    ApiFunction('SparkNodesListByResourceGroup', 'spark_nodes.list_by_resource_group', 'SparkNodes_ListByResourceGroup', 'List sparkNodes of a resource group'),
    ApiFunction('SparkNodesListBySubscription', 'spark_nodes.list_by_subscription', 'SparkNodes_ListBySubscription', 'List sparkNodes of a subscription'),
    ApiFunction('OperationsList', 'provider.list_operations', 'Operations_List', "List the provider's operations (permissions)", ()),
    ApiFunction('SubscriptionsCreateOrUpdate', 'provider.put_subscription', 'Subscriptions_CreateOrUpdate', 'PUT a subscription registration state', (*READ, 'TableSubscriptionWritePolicy')),
    ApiFunction('SubscriptionsGet', 'provider.get_subscription', 'Subscriptions_Get', 'GET a subscription registration'),
    ApiFunction('QuotasGet', 'quotas.get', 'Quotas_Get', 'GET a GPU quota of a subscription in a location'),
    ApiFunction('QuotasList', 'quotas.list_quotas', 'Quotas_List', 'List the GPU quotas of a subscription in a location'),
    ApiFunction('QuotasCreateOrUpdate', 'quotas.put', 'Quotas_CreateOrUpdate', "PUT a GPU quota (the provider's operators)", (*READ, 'TableUpdatePolicy')),
    ApiFunction('QuotasDelete', 'quotas.delete', 'Quotas_Delete', "DELETE a GPU quota's limit (the provider's operators)", (*READ, 'TableUpdatePolicy')),
    ApiFunction('BudgetsGet', 'budgets.get', 'Budgets_Get', "GET a budget of a subscription, with this month's spend"),
    ApiFunction('BudgetsList', 'budgets.list_budgets', 'Budgets_List', 'List the budgets of a subscription'),
    ApiFunction('BudgetsCreateOrUpdate', 'budgets.put', 'Budgets_CreateOrUpdate', "PUT a monthly budget (the provider's operators)", DELETE),
    ApiFunction('BudgetsDelete', 'budgets.delete', 'Budgets_Delete', "DELETE a budget (the provider's operators)", DELETE),
    ApiFunction('CapacityReservationsGet', 'capacity_reservations.get', 'CapacityReservations_Get', 'GET a capacity reservation'),
    ApiFunction('CapacityReservationsListByResourceGroup', 'capacity_reservations.list_by_resource_group', 'CapacityReservations_ListByResourceGroup', 'List the capacity reservations of a resource group'),
    ApiFunction('CapacityReservationsListBySubscription', 'capacity_reservations.list_by_subscription', 'CapacityReservations_ListBySubscription', 'List the capacity reservations of a subscription'),
    ApiFunction('CapacityReservationsCreateOrUpdate', 'capacity_reservations.create_or_update', 'CapacityReservations_CreateOrUpdate', 'PUT a capacity reservation - books devices for a future window (one transaction)', WRITE),
    ApiFunction('CapacityReservationsDelete', 'capacity_reservations.delete', 'CapacityReservations_Delete', 'DELETE a capacity reservation - cancels it (unbilled before its window)', DELETE),
    ApiFunction('OffersList', 'offers.list_offers', 'Offers_List', 'List what a job could get now in a location (the placement index, quotas, budgets)'),
    ApiFunction('UsagesList', 'quotas.usages', 'Usages_List', 'List what a subscription holds against its GPU quotas in a location'),
    ApiFunction('CostsQuery', 'costs.query', 'Costs_Query', "Query what a subscription's work cost (from the roll-ups' cost days)"),
    ApiFunction('BillingExportsGet', 'billing_exports.get', 'BillingExports_Get', "GET a page of a subscription's FOCUS billing file of a day (the caller's rows of the day's export)"),
    ApiFunction('AuditEventsList', 'provider.list_audit_events', 'AuditEvents_List', 'Query audit events (admins)'),
    ApiFunction('SparkOllamaInstancesCreate', 'spark_ollama_instances.create', 'SparkOllamaInstances_Create', 'POST to the sparkOllamaInstances collection (seed form) - starts provisioning', (*WRITE, 'StartProvisionPolicy'), environment=_PROVISION),
    ApiFunction('SparkOllamaInstancesCreateOrUpdate', 'spark_ollama_instances.create_or_update', 'SparkOllamaInstances_CreateOrUpdate', 'PUT an instance - starts provisioning', (*WRITE, 'StartProvisionPolicy'), environment=_PROVISION, hot=True),
    ApiFunction('SparkOllamaInstancesGet', 'spark_ollama_instances.get', 'SparkOllamaInstances_Get', 'GET an instance', hot=True),
    ApiFunction('SparkOllamaInstancesDelete', 'spark_ollama_instances.delete', 'SparkOllamaInstances_Delete', 'DELETE an instance - starts deprovisioning', (*WRITE, 'StartDeprovisionPolicy'), environment=_DEPROVISION),
    ApiFunction('SparkOllamaInstancesListByNode', 'spark_ollama_instances.list_by_node', 'SparkOllamaInstances_ListByNode', 'List the instances of a node'),
    ApiFunction('OperationStatusesGet', 'operations.get_status', 'OperationStatuses_Get', 'Azure-AsyncOperation status of a long-running operation', hot=True),
    ApiFunction('OperationResultsGet', 'operations.get_result', 'OperationResults_Get', 'Location result of a long-running operation', hot=True),
    ApiFunction('SparkJobsCreate', 'spark_jobs.create', 'SparkJobs_Create', 'POST to the sparkJobs collection (seed form) - submits a job', (*READ, 'TableCreatePolicy', 'StartJobPolicy'), environment=_JOB, hot=True),
    ApiFunction('SparkJobsCreateOrUpdate', 'spark_jobs.create_or_update', 'SparkJobs_CreateOrUpdate', 'PUT a sparkJob - submits a job', (*READ, 'TableCreatePolicy', 'StartJobPolicy'), environment=_JOB, hot=True),
    ApiFunction('SparkJobsGet', 'spark_jobs.get', 'SparkJobs_Get', 'GET a sparkJob', hot=True),
    ApiFunction('SparkJobsCancel', 'spark_jobs.cancel', 'SparkJobs_Cancel', 'POST cancel on a sparkJob - resumes its waiting execution at once', (*WRITE, 'CompleteTasksPolicy')),
    ApiFunction('SparkJobsDelete', 'spark_jobs.delete', 'SparkJobs_Delete', 'DELETE a finished sparkJob', (*READ, 'TableDeletePolicy')),
    ApiFunction('SparkJobsListByResourceGroup', 'spark_jobs.list_by_resource_group', 'SparkJobs_ListByResourceGroup', 'List the sparkJobs of a resource group (?submitted_by=)'),
    ApiFunction('SparkJobsListBySubscription', 'spark_jobs.list_by_subscription', 'SparkJobs_ListBySubscription', 'List the sparkJobs of a subscription (?submitted_by=)'),
    ApiFunction('SparkJobsGetLogs', 'job_logs.get_logs', 'SparkJobs_GetLogs', "GET a page of a sparkJob's log (whoever may read the job), proxied from the DGX Platform", (*READ, 'DgxApiKeyReadPolicy'), environment={'DGX_ATTEMPTS': '"2"', 'DGX_CALL_BUDGET_SECONDS': '"8"'},
                timeout=15),  # one DGX call, bounded well within API Gateway's 29 s
    ApiFunction('SparkNodesGetStats', 'usage_stats.node_stats', 'SparkNodes_GetStats', 'GET the usage and earnings of a node (its supplier and admins)'),
    ApiFunction('SparkOllamaInstancesGetStats', 'usage_stats.instance_stats', 'SparkOllamaInstances_GetStats', 'GET the usage of an instance (per hour, from the roll-ups)'),
    ApiFunction('SparkJobsGetStats', 'usage_stats.job_stats', 'SparkJobs_GetStats', 'GET the usage of a job (per hour, from the roll-ups)'),
    ApiFunction('SloReport', 'slo.get', 'Slo_Get', "GET the API's SLO attainment and error budget left over a month (admins), from API Gateway's metrics", ('AuditAppendPolicy', 'ApiMetricsReadPolicy', 'RateCounterPolicy'), environment={'API_NAME': '!Sub "${AWS::StackName}-api"', 'API_STAGE': '!Ref StageName', 'SLO_AVAILABILITY_PERCENT': '!Ref AvailabilitySloPercent', 'SLO_LATENCY_PERCENT': '!Ref LatencySloPercent', 'SLO_LATENCY_THRESHOLD_MS': '!Ref LatencyThresholdMs'}),
)  # fmt: skip


def _route(operation: str) -> tuple[str, str, str]:
    """``(path, method, router module)`` of the route whose operation id is ``operation``, among every router of the
    API. Raises ``LookupError`` when none has it."""
    from itl_accelerator.api.app import all_routers

    for router in all_routers():
        for route in router.routes:
            if getattr(route, "operation_id", None) == operation:
                (method,) = sorted(route.methods)  # type: ignore[attr-defined]
                return route.path, method.lower(), route.endpoint.__module__  # type: ignore[attr-defined]
    raise LookupError(f"no route of the API has the operation id {operation!r}")


def _handler_route(function: ApiFunction) -> tuple[str, str]:
    """``(path, method)`` of the route ``function`` serves."""
    path, method, _ = _route(function.operation)
    return path, method


def _scalar(text: str) -> str:
    """``text`` as a YAML plain scalar where it can be one, else single-quoted."""
    plain = re.fullmatch(r"[A-Za-z0-9][^:#'\"]*", text) and not re.search(r"\s-\s*$|:\s|\s#", text)
    return text if plain else "'" + text.replace("'", "''") + "'"


# ------------------------------------------------------------------------------------------------ checkov
#: The checkov checks that do not apply to a generated function, with why: written as its ``Metadata.checkov.skip``
#: (the hand-written functions carry their own). The checks that apply to no function at all (VPC, environment
#: encryption, dead-letter queue) are skipped once, with their reasons, in .checkov.yaml. docs/ARCHITECTURE.md,
#: "Security posture".
API_POOL = (
    "CKV_AWS_115",
    "Not reserved: API functions share the account's pool behind the stage throttle and the per-subscription rate limits; the system's own duties reserve theirs (SystemReservedConcurrency)",
)
#: Reserved concurrency of the functions that keep allocations honest (workflow steps, stream consumers): the
#: template's parameter, none when it is 0 (an account whose concurrency quota is too small to reserve).
SYSTEM_CONCURRENCY = "!If [ReservesSystemConcurrency, !Ref SystemReservedConcurrency, !Ref AWS::NoValue]"


def _function_block(
    name: str,
    handler: str,
    description: str,
    policies: tuple[str, ...],
    environment: dict[str, str],
    timeout: int | None,
    snapstart: str | None = None,
    api: tuple[str, str] | None = None,
    skips: tuple[tuple[str, str], ...] = (),
    concurrency: str | None = None,
) -> list[str]:
    """One ``AWS::Serverless::Function`` block (its lines, then a blank one): the checkov checks ``skips`` skipped
    with their reasons, SnapStart under condition ``snapstart``, reserved ``concurrency`` (a YAML value), an ``Api``
    event of ``api`` = (path, method)."""
    lines = [f"  {name}Function:", "    Type: AWS::Serverless::Function"]
    if skips:
        lines += ["    Metadata:", "      checkov:", "        skip:"]
        for check, why in skips:
            lines += [f"          - id: {check}", f"            comment: {_scalar(why)}"]
    lines.append("    Properties:")
    if snapstart:
        lines.append(f'      SnapStart: !If [{snapstart}, {{ApplyOn: PublishedVersions}}, !Ref "AWS::NoValue"]')
    lines += [f"      Description: {_scalar(description)}", f"      Handler: itl_functions.{handler}"]
    if timeout is not None:
        lines.append(f"      Timeout: {timeout}")
    if concurrency is not None:
        lines.append(f"      ReservedConcurrentExecutions: {concurrency}")
    if environment:
        lines += ["      Environment:", "        Variables:"]
        lines += [f"          {variable}: {value}" for variable, value in environment.items()]
    if policies:
        lines.append("      Policies:")
        lines += [f"        - !Ref {policy}" for policy in policies]
    if api:
        path, method = api
        lines += ["      Events:", "        Api:", "          Type: Api", "          Properties:"]
        lines += ["            RestApiId: !Ref Api", f"            Path: {path}", f"            Method: {method}"]
    return [*lines, ""]


def render_api_functions(functions: Iterable[ApiFunction] = API_FUNCTIONS) -> list[str]:
    """The ``api-functions`` region's lines (indented as resources of template.yaml)."""
    lines: list[str] = []
    for f in functions:
        condition = "HasHotPathSnapStart" if f.hot else "HasApiSnapStart"
        lines += _function_block(
            f.name,
            f.handler,
            f.description,
            f.policies,
            f.environment,
            f.timeout,
            condition,
            _handler_route(f),
            skips=(API_POOL,),
        )
    return lines[:-1]


# ------------------------------------------------------------------------------------------------ workflows
@dataclass(frozen=True)
class Step:
    """One Lambda task of a state machine: ``name`` (its logical id without ``Function``; the ASL calls it as
    ``${<name>FunctionArn}``), ``handler`` (in ``itl_functions``), ``description``, ``policies``, ``timeout``
    (seconds) and ``environment`` (variable → YAML value)."""

    name: str
    handler: str
    description: str
    policies: tuple[str, ...]
    timeout: int
    environment: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Workflow:
    """A Step Functions state machine: ``name`` (logical id), ``asl`` (its definition under statemachines/) and
    the ``steps`` its definition calls - every one named there as ``${<Step>FunctionArn}``, and no other."""

    name: str
    asl: str
    steps: tuple[Step, ...]


_CALLBACK_URL = {"DGX_CALLBACK_URL": '!If [HasPublicApiUrl, !Sub "${PublicApiUrl}/dgx/callbacks", ""]'}

#: The three workflows and their steps (docs/ARCHITECTURE.md, "Long-running operations", "Jobs and placement").
#: A new step is its handler, its row here and its Task state in the ASL file.
WORKFLOWS: tuple[Workflow, ...] = (
    Workflow('ProvisionInstanceStateMachine', 'provision_instance.asl.json', (
        Step('InstanceRequest', 'instance_workflow.request', 'Provision step - ask the DGX Platform for the instance (and to call back when it is ready)', ('TableReadPolicy', 'AuditAppendPolicy', 'TableUpdatePolicy', 'DgxApiKeyReadPolicy'), 90, environment=_CALLBACK_URL),
        Step('InstanceAwaitReady', 'instance_workflow.await_ready', "Provision step - wait for the DGX Platform's ready callback on a task token (it, or the poll interval, ends the wait)", ('TableReadPolicy', 'TableUpdatePolicy', 'CompleteTasksPolicy'), 30),
        Step('InstancePoll', 'instance_workflow.poll', 'Provision step - poll the DGX instance', ('TableReadPolicy', 'DgxApiKeyReadPolicy'), 60),
        Step('InstanceComplete', 'instance_workflow.complete', 'Provision step - mark the instance Succeeded', ('TableReadPolicy', 'AuditAppendPolicy', 'TableUpdatePolicy'), 30),
        Step('InstanceCompensate', 'instance_workflow.compensate', 'Provision step - compensate (ask the DGX Platform to delete, record the failure)', ('TableReadPolicy', 'AuditAppendPolicy', 'TableUpdatePolicy', 'DgxApiKeyReadPolicy'), 120),
        Step('InstanceCheckRemoval', 'instance_workflow.check_removal', 'Provision step - has the DGX Platform removed the failed instance?', ('TableReadPolicy', 'TableUpdatePolicy', 'DgxApiKeyReadPolicy'), 60),
        Step('InstanceReleaseCapacity', 'instance_workflow.release_capacity', 'Provision step - Failed and capacity released, once the DGX Platform confirmed removal', ('TableReadPolicy', 'AuditAppendPolicy', 'TableUpdatePolicy', 'CompleteTasksPolicy'), 30),
        Step('InstanceCancel', 'instance_workflow.cancel', 'Provision step - end a provisioning overtaken by a delete', ('TableReadPolicy', 'TableUpdatePolicy', 'DgxApiKeyReadPolicy'), 30),
    )),
    Workflow('DeprovisionInstanceStateMachine', 'deprovision_instance.asl.json', (
        Step('DeprovisionStart', 'instance_workflow.deprovision_start', "Deprovision step - delete on the DGX Platform, renew the instance's lease", ('TableReadPolicy', 'TableUpdatePolicy', 'DgxApiKeyReadPolicy'), 90),
        Step('DeprovisionPoll', 'instance_workflow.deprovision_poll', 'Deprovision step - poll until the DGX instance is gone', ('TableReadPolicy', 'DgxApiKeyReadPolicy'), 90),
        Step('DeprovisionFinish', 'instance_workflow.deprovision_finish', 'Deprovision step - remove the instance and release capacity', ('TableReadPolicy', 'AuditAppendPolicy', 'TableUpdatePolicy', 'TableDeletePolicy', 'CompleteTasksPolicy'), 30),
        Step('DeprovisionFail', 'instance_workflow.deprovision_fail', 'Deprovision step - mark a failed deprovisioning', ('TableReadPolicy', 'AuditAppendPolicy', 'TableUpdatePolicy', 'CompleteTasksPolicy'), 30),
    )),
    Workflow('JobLifecycleStateMachine', 'job_lifecycle.asl.json', (
        Step('JobPlace', 'job_workflow.place', 'Job step - admission (could any node ever hold it?), then best-fit placement (conditional reservation on the node)', ('TableReadPolicy', 'AuditAppendPolicy', 'TableUpdatePolicy'), 60),
        Step('JobAwaitCapacity', 'job_workflow.await_capacity', 'Job step - wait for capacity on a task token (placement resumes it)', ('TableReadPolicy', 'AuditAppendPolicy', 'TableUpdatePolicy', 'CompleteTasksPolicy'), 60),
        Step('JobSubmit', 'job_workflow.submit', 'Job step - submit to the DGX Platform (and ask it to call back when the job ends)', ('TableReadPolicy', 'AuditAppendPolicy', 'TableUpdatePolicy', 'DgxApiKeyReadPolicy'), 90, environment=_CALLBACK_URL),
        Step('JobTrack', 'job_workflow.track', 'Job step - wait while it runs, on a task token (the job tracker resumes it)', ('TableReadPolicy', 'AuditAppendPolicy', 'TableUpdatePolicy', 'CompleteTasksPolicy'), 30),
        Step('JobStop', 'job_workflow.stop', 'Job step - stop the job on the DGX Platform', ('TableReadPolicy', 'DgxApiKeyReadPolicy'), 90),
        Step('JobFinish', 'job_workflow.finish', 'Job step - final status, cost, capacity released once; serve the waiting jobs; or a failed attempt recorded for its retry', ('TableReadPolicy', 'AuditAppendPolicy', 'TableUpdatePolicy', 'CompleteTasksPolicy'), 60),
        Step('JobAwaitRetry', 'job_workflow.await_retry', 'Job step - wait out a failed attempt\'s backoff on a task token (a cancel resumes it)', ('TableReadPolicy', 'AuditAppendPolicy', 'TableUpdatePolicy', 'CompleteTasksPolicy'), 30),
    )),
)  # fmt: skip

STATEMACHINES_DIR = DEFAULT_TEMPLATE.parent / "statemachines"


class WorkflowMismatch(ValueError):
    """A state machine's definition calls a function its workflow has no step for, or a step it never calls."""


def asl_functions(workflow: Workflow, statemachines: Path = STATEMACHINES_DIR) -> list[str]:
    """The steps ``workflow``'s ASL calls, in the order it first names them (``${XFunctionArn}`` → ``X``). Raises
    :class:`WorkflowMismatch` naming a placeholder without a step or a step without a placeholder."""
    text = (statemachines / workflow.asl).read_text()
    called = list(dict.fromkeys(re.findall(r"\$\{(\w+)FunctionArn\}", text)))
    steps = {step.name for step in workflow.steps}
    if set(called) != steps:
        raise WorkflowMismatch(
            f"statemachines/{workflow.asl}: calls without a step {sorted(set(called) - steps)},"
            f" steps it never calls {sorted(steps - set(called))}"
        )
    return called


def render_workflow_steps(workflows: Iterable[Workflow] = WORKFLOWS) -> list[str]:
    """The ``workflow-steps`` region's lines: every step's function, workflow by workflow."""
    lines: list[str] = []
    for workflow in workflows:
        for s in workflow.steps:
            lines += _function_block(
                s.name,
                s.handler,
                s.description,
                s.policies,
                s.environment,
                s.timeout,
                concurrency=SYSTEM_CONCURRENCY,
            )
    return lines[:-1]


def render_state_machines(workflows: Iterable[Workflow] = WORKFLOWS) -> list[str]:
    """The ``state-machines`` region's lines: each state machine with a substitution (the step's ``live`` alias)
    and an invoke permission for every step its ASL calls, in the ASL's order."""
    lines: list[str] = []
    for workflow in workflows:
        called = asl_functions(workflow)
        lines += [
            f"  {workflow.name}:",
            "    Type: AWS::Serverless::StateMachine",
            "    Properties:",
            "      Type: STANDARD",
            f"      DefinitionUri: statemachines/{workflow.asl}",
            "      Tracing:",
            "        Enabled: true",
            "      DefinitionSubstitutions:",
            *(f"        {name}FunctionArn: !Ref {name}Function.Alias" for name in called),
            "      Policies:",
        ]
        for name in called:
            lines += ["        - LambdaInvokePolicy:", f"            FunctionName: !Ref {name}Function"]
        lines.append("")
    return lines[:-1]


#: The value a sample event gives each path parameter (the names the routes use).
SAMPLE_PATH_PARAMETERS = {
    "subscriptionId": "sub-123", "resourceGroupName": "rg1", "nodeName": "dgx-1", "instanceName": "instance-1", "reservationName": "week-1",
    "jobName": "job-1", "budgetName": "team-nlp", "location": "us-east-1", "quotaName": "gpus",
    "day": "2026-12-01", "operationId": "3f2b8c1e-7a4d-4e9b-9c61-5d0e2a7b4f13",
}  # fmt: skip
_SAMPLE_HEADERS = {
    "Accept": "application/json", "Host": "abc123.execute-api.us-east-1.amazonaws.com",
    "User-Agent": "itl-local-sample/1.0", "X-Forwarded-For": "203.0.113.10", "X-Forwarded-Port": "443",
    "X-Forwarded-Proto": "https", "Authorization": "Bearer ${DEV_TOKEN}",
}  # fmt: skip
_SAMPLE_PRINCIPAL = {
    "subject": "dev-admin", "display_name": "dev-admin", "actor_type": "User", "roles": ["itl-accelerator-admin"],
    "scopes": [{"subscription_id": "sub-123", "resource_group": None}],
}  # fmt: skip


def sample_event(function: ApiFunction) -> dict[str, Any]:
    """A REST proxy event (API Gateway's shape, as ``events/`` holds them) of ``function``'s route: the sample path
    parameters, ``api-version`` 2026-11-01, no body, a dev admin of sub-123 as the authorizer's principal. Raises
    ``KeyError`` for a path parameter :data:`SAMPLE_PATH_PARAMETERS` lacks."""
    resource, method = _handler_route(function)
    names = re.findall(r"\{(\w+)\}", resource)
    parameters = {name: SAMPLE_PATH_PARAMETERS[name] for name in names}
    path = re.sub(r"\{(\w+)\}", lambda m: parameters[m.group(1)], resource)
    query = {"api-version": "2026-11-01"}
    return {
        "resource": resource,
        "path": path,
        "httpMethod": method.upper(),
        "headers": _SAMPLE_HEADERS,
        "multiValueHeaders": {k: [v] for k, v in _SAMPLE_HEADERS.items()},
        "queryStringParameters": query,
        "multiValueQueryStringParameters": {k: [v] for k, v in query.items()},
        "pathParameters": parameters or None,
        "stageVariables": None,
        "requestContext": {
            "resourcePath": resource,
            "httpMethod": method.upper(),
            "path": f"/v1{path}",
            "accountId": "123456789012",
            "apiId": "abc123",
            "stage": "v1",
            "requestId": str(uuid.uuid5(uuid.NAMESPACE_URL, function.name)),
            "requestTimeEpoch": 1767225600000,
            "domainName": "abc123.execute-api.us-east-1.amazonaws.com",
            "protocol": "HTTP/1.1",
            "identity": {"sourceIp": "203.0.113.10", "userAgent": "itl-local-sample/1.0"},
            "authorizer": {
                "principal": json.dumps(_SAMPLE_PRINCIPAL, separators=(",", ":")),
                "principalId": "dev-admin",
                "integrationLatency": 42,
            },
        },
        "body": None,
        "isBase64Encoded": False,
    }


def missing_events(events_dir: Path, functions: Iterable[ApiFunction] = API_FUNCTIONS) -> dict[Path, str]:
    """The sample event file of each row that has none: path → its JSON text."""
    return {
        path: json.dumps(sample_event(f), indent=2) + "\n"
        for f in functions
        if not (path := events_dir / f"{f.name}Function.json").exists()
    }


# ------------------------------------------------------------------------------------------------ SLO alarms
@dataclass(frozen=True)
class Objective:
    """One SLO as its alarms compute it: ``goal`` (the template parameter holding the goal, percent), ``bad`` (what
    a bad answer is, for the descriptions), ``ratio`` (metric math: the bad share of ``requests``), ``metric_id``,
    ``metric`` and ``stat`` (the API Gateway metric the ratio reads besides ``Count``)."""

    name: str
    goal: str
    bad: str
    ratio: str
    metric_id: str
    metric: str
    stat: str


#: The API's two SLOs (docs/ARCHITECTURE.md, "Service level objectives").
OBJECTIVES: tuple[Objective, ...] = (
    Objective("Availability", "AvailabilitySloPercent", "5xx answers", "FILL(errors, 0) / requests", "errors",
              "5XXError", "Sum"),
    Objective("Latency", "LatencySloPercent", "answers slower than ${LatencyThresholdMs} ms",
              "(100 - FILL(fast, 100)) / 100", "fast", "Latency", '!Sub "PR(:${LatencyThresholdMs})"'),
)  # fmt: skip

_WINDOW_ID = {300: "5m", 1800: "30m", 3600: "1h", 21600: "6h", 259200: "3d"}
_WINDOW_TEXT = {300: "5 min", 1800: "30 min", 3600: "1 h", 21600: "6 h", 259200: "3 days"}
_AUDIENCE = {"page": "page the on-call", "ticket": "open a ticket"}


def _metric(metric_id: str, name: str, period: int, stat: str) -> list[str]:
    return [
        f"        - Id: {metric_id}",
        "          MetricStat:",
        "            Metric:",
        "              Namespace: AWS/ApiGateway",
        f"              MetricName: {name}",
        "              Dimensions:",
        "                - Name: ApiName",
        '                  Value: !Sub "${AWS::StackName}-api"',
        "                - Name: Stage",
        "                  Value: !Ref StageName",
        f"            Period: {period}",
        f"            Stat: {stat}",
        "          ReturnData: false",
    ]


def render_slo_alarms() -> list[str]:
    """The ``slo-alarms`` region's lines: per objective, one alarm per window of every row of
    ``BURN_RATE_ALERTS`` and one composite alarm per severity (a pair fires when both its windows do)."""
    from itl_accelerator.slo import BURN_RATE_ALERTS

    lines: list[str] = []
    for objective in OBJECTIVES:
        lines.append(
            f"  # {objective.name}: multiwindow, multi-burn-rate alarms (itl_accelerator/slo.py BURN_RATE_ALERTS;"
            " Google SRE workbook table 5-8)"
        )
        pairs: dict[str, list[tuple[str, str]]] = {}
        for alert in BURN_RATE_ALERTS:
            composite = f"{objective.name}{alert.severity.title()}Alarm"
            ids = []
            for window, which in ((alert.long_window, "long"), (alert.short_window, "short")):
                logical_id = f"{objective.name}{alert.severity.title()}{_WINDOW_ID[window]}Alarm"
                ids.append(logical_id)
                rate = f"{alert.burn_rate.normalize():f}"
                lines += [
                    f"  {logical_id}:",
                    "    Type: AWS::CloudWatch::Alarm",
                    "    Properties:",
                    f'      AlarmDescription: !Sub "{objective.name} SLO (${{{objective.goal}}} %): error budget burning'
                    f" faster than {rate}x over {_WINDOW_TEXT[window]} ({objective.bad}; {which} window of"
                    f' {composite})"',
                    "      ComparisonOperator: GreaterThanThreshold",
                    f"      Threshold: {rate}",
                    "      EvaluationPeriods: 1",
                    "      DatapointsToAlarm: 1",
                    "      TreatMissingData: notBreaching",
                    "      Metrics:",
                    "        - Id: burn",
                    f"          Label: burn rate over {_WINDOW_TEXT[window]}",
                    f'          Expression: !Sub "IF(requests > 0, {objective.ratio}, 0) / (1 - ${{{objective.goal}}}'
                    ' / 100)"',
                    "          ReturnData: true",
                    *_metric("requests", "Count", window, "Sum"),
                    *_metric(objective.metric_id, objective.metric, window, objective.stat),
                ]
            pairs.setdefault(alert.severity, []).append((ids[0], ids[1]))
        for severity, severity_pairs in pairs.items():
            rule = " OR ".join(f'(ALARM("${{{a}}}") AND ALARM("${{{b}}}"))' for a, b in severity_pairs)
            lines += [
                f"  {objective.name}{severity.title()}Alarm:",
                "    Type: AWS::CloudWatch::CompositeAlarm",
                "    Properties:",
                f'      AlarmName: !Sub "${{AWS::StackName}}-{objective.name.lower()}-slo-{severity}"',
                f"      AlarmDescription: {objective.name} SLO error budget burning fast enough to"
                f" {_AUDIENCE[severity]} (both windows of a pair above the burn rate)",
                f"      AlarmRule: !Sub '{rule}'",
                "      ActionsEnabled: true",
                "      AlarmActions: [!Ref OperationsAlarmTopic]",
                "      OKActions: [!Ref OperationsAlarmTopic]",
                "",
            ]
    return lines[:-1]


# ------------------------------------------------------------------------------------------------ regions
@dataclass(frozen=True)
class Region:
    """A generated region of template.yaml: its ``name``, the ``source`` its marker names, and its renderer."""

    name: str
    source: str
    render: Callable[[], list[str]]


REGIONS: tuple[Region, ...] = (
    Region("api-functions", "tools/generate.py API_FUNCTIONS and the routers", render_api_functions),
    Region("workflow-steps", "tools/generate.py WORKFLOWS", render_workflow_steps),
    Region("state-machines", "tools/generate.py WORKFLOWS and statemachines/*.asl.json", render_state_machines),
    Region("slo-alarms", "itl_accelerator/slo.py BURN_RATE_ALERTS and tools/generate.py OBJECTIVES",
           render_slo_alarms),
)  # fmt: skip


def render_route_paths() -> list[str]:
    """The ``route-paths`` region of api/canonical.py: every ARM route of the routers, as a Python string each."""
    from itl_accelerator.api.app import all_routers

    routes = {route.path for router in all_routers() for route in router.routes}  # type: ignore[attr-defined]
    return [f'    "{path}",' for path in sorted(p for p in routes if p.startswith(("/subscriptions", "/providers")))]


#: Where the API functions' handler modules are (``itl_functions``): each one's imports and handler lines are a
#: generated region, and a row naming a module that does not exist yet creates it.
HANDLER_MODULES = Path("functions/itl_functions")


def render_handlers(module: str, functions: Iterable[ApiFunction] = API_FUNCTIONS) -> list[str]:
    """The ``handlers`` region of ``itl_functions/{module}.py``: the import of the one router its operations live in
    and a line per row naming the module. Raises ``ValueError`` when its operations are in several routers (a
    function loads its own router only)."""
    rows = [f for f in functions if f.handler.rsplit(".", 1)[0] == module]
    routers = {_route(f.operation)[2] for f in rows}
    if len(routers) != 1:
        raise ValueError(f"itl_functions/{module}.py: its operations are in {sorted(routers)}; one router a module")
    package, _, name = routers.pop().rpartition(".")
    lines = [f"from {package} import {name} as routes", "from itl_functions.adapter import operation_handler", ""]
    return lines + [f'{f.handler.rsplit(".", 1)[1]} = operation_handler(routes.router, "{f.operation}")' for f in rows]


def handler_modules(directory: Path, functions: Iterable[ApiFunction] = API_FUNCTIONS) -> dict[Path, str]:
    """Each handler module's text as its rows give it (a missing module: a docstring and its region)."""
    rows = tuple(functions)
    out: dict[Path, str] = {}
    for module in sorted({f.handler.rsplit(".", 1)[0] for f in rows}):
        path = directory / f"{module}.py"
        region = Region("handlers", "tools/generate.py API_FUNCTIONS", functools.partial(render_handlers, module, rows))
        text = (
            path.read_text()
            if path.exists()
            else f'"""{module} functions: one handler per operation (see template.yaml)."""\n\n'
            f"# >>> generated: handlers - from x\n# <<< generated: handlers\n"
        )
        out[path] = generate(text, (region,), indent="", file=f"{HANDLER_MODULES}/{module}.py")
    return out


#: The casing table of the catch-all route (a Python module: its cold start loads neither the routers nor YAML).
CASING_TABLE = Path("layers/core/itl_accelerator/api/canonical.py")
CASING_REGIONS: tuple[Region, ...] = (Region("route-paths", "the routers' ARM routes", render_route_paths),)


class RegionMissing(ValueError):
    """template.yaml lacks a region's markers (or has them twice, or out of order)."""


def generate(text: str, regions: Iterable[Region] = REGIONS, *, indent: str = "  ", file: str = "template.yaml") -> str:
    """``text`` (template.yaml, or ``file``) with every region between its markers (indented by ``indent``) rewritten
    from its source. Raises :class:`RegionMissing` naming a region whose markers are not there exactly once."""
    for region in regions:
        begin = f"{indent}# >>> generated: {region.name} - from {region.source}; ./dev generate writes this, edit the source"
        end = f"{indent}# <<< generated: {region.name}"
        pattern = re.compile(rf"^{indent}# >>> generated: {re.escape(region.name)} .*?^{re.escape(end)}$", re.M | re.S)
        found = pattern.findall(text)
        if len(found) != 1:
            raise RegionMissing(f"{file}: region {region.name!r} found {len(found)} times (want its markers once)")
        start, stop = pattern.search(text).span()  # type: ignore[union-attr]  # found once, above
        text = text[:start] + "\n".join([begin, *region.render(), end]) + text[stop:]
    return text


#: The API's OpenAPI document and the MCP server's copy of its schemas.
OPENAPI = Path("docs/openapi.json")
MCP_SCHEMAS = Path("mcp_server/itl_accelerator_mcp/api_schemas.json")


def render_openapi() -> dict[str, Any]:
    """The API's OpenAPI document, as FastAPI makes it from the routers and models."""
    from itl_accelerator.api.app import build_app

    document: dict[str, Any] = build_app(with_docs=True).openapi()
    return document


def openapi_files(openapi: Path, mcp_schemas: Path) -> dict[Path, str]:
    """docs/openapi.json's text and the MCP server's schemas made from it: path → text."""
    from itl_accelerator_mcp import schemas

    document = render_openapi()
    return {openapi: json.dumps(document, indent=2) + "\n", mcp_schemas: schemas.render(document)}


def _shown(path: Path) -> str:
    """``path`` as the repository names it, when it is in the repository."""
    return str(path.resolve().relative_to(REPO_ROOT)) if path.resolve().is_relative_to(REPO_ROOT) else str(path)


def main(argv: list[str] | None = None) -> int:
    """``./dev generate [--check]``: write every generated file (exit 0), or with ``--check`` change nothing, print
    the difference and exit 1 when any is not what its source gives. The options put a file elsewhere (tests)."""
    parser = argparse.ArgumentParser(prog="./dev generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 with a diff when out of date")
    parser.add_argument("--template", type=Path, default=DEFAULT_TEMPLATE)
    parser.add_argument(
        "--functions-dir", type=Path, default=None, help="the handler modules (functions/itl_functions)"
    )
    parser.add_argument("--casing-table", type=Path, default=None, help="api/canonical.py (beside the template)")
    parser.add_argument("--events", type=Path, default=None, help="sample events' folder (events/ beside the template)")
    parser.add_argument("--openapi", type=Path, default=REPO_ROOT / OPENAPI, help="the API's OpenAPI document")
    parser.add_argument("--mcp-schemas", type=Path, default=REPO_ROOT / MCP_SCHEMAS, help="the MCP server's schemas")
    args = parser.parse_args(argv)
    casing = args.casing_table or args.template.parent / CASING_TABLE
    files = {
        args.template: generate(args.template.read_text()),
        casing: generate(casing.read_text(), CASING_REGIONS, indent="    ", file=str(CASING_TABLE)),
        **handler_modules(args.functions_dir or DEFAULT_TEMPLATE.parent / HANDLER_MODULES),
        **openapi_files(args.openapi, args.mcp_schemas),
    }
    stale = {path: wanted for path, wanted in files.items() if not path.exists() or wanted != path.read_text()}
    events = missing_events(args.events or args.template.parent / "events")
    if args.check:
        if not stale and not events:
            return 0
        for path, wanted in stale.items():
            current = path.read_text() if path.exists() else ""
            sys.stdout.writelines(
                difflib.unified_diff(current.splitlines(True), wanted.splitlines(True), _shown(path), "generated")
            )
        for path in events:
            print(f"missing sample event: {path.name}")
        out_of_date = [_shown(path) for path in stale] + [f"{_shown(path)} (missing)" for path in events]
        print(f"out of date with their sources: {', '.join(out_of_date)}; run ./dev generate", file=sys.stderr)
        return 1
    for path, text in {**stale, **events}.items():
        path.write_text(text)
        print(f"wrote {_shown(path)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
