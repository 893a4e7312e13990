"""SnapStart where a caller waits, nowhere else (issue 27: SnapStart on all 74 functions was 144 of an idle
deployment's 182 USD a month). An API operation's function (and the MCP server's) is answered while its caller
waits, and its cold start (about 1.3-1.9 s of import and app build, ``./dev bench`` (b)) is over the latency SLO's
1,000 ms; a workflow step, schedule or stream consumer is waited on by no one, and the plain handlers (probes, the
catch-all path, DGX callbacks) start faster than a bare boto3 client. By default (``ApiSnapStart=HotPaths``) only
the functions an ARM client calls most have it, so an idle deployment stays under 40 USD a month
(benchmarks/idle_cost.py)."""

from __future__ import annotations

from benchmarks.idle_cost import has_snapstart, model
from benchmarks.requests_and_cold_start import PLAIN_API_FUNCTIONS
from itl_local.template import Template

TEMPLATE = Template()
API = {r.function_id for r in TEMPLATE.routes}
#: What an ARM client calls through an operation's life: the operation polls (Azure-AsyncOperation, Location), the
#: resource's PUT and GET for jobs and instances (POST create too), and the MCP server an assistant waits on.
HOT_PATHS = {
    "OperationStatusesGetFunction",
    "OperationResultsGetFunction",
    "SparkJobsCreateFunction",
    "SparkJobsCreateOrUpdateFunction",
    "SparkJobsGetFunction",
    "SparkOllamaInstancesCreateOrUpdateFunction",
    "SparkOllamaInstancesGetFunction",
    "McpFunction",
}


def _snapstart(condition: str) -> dict[str, object]:
    return {"Fn::If": [condition, {"ApplyOn": "PublishedVersions"}, {"Ref": "AWS::NoValue"}]}


def test_snapstart_is_on_the_functions_callers_wait_on_and_no_others():
    waited_on, not_waited_on = [], []
    for name, props in TEMPLATE.functions().items():
        (waited_on if name in API and name not in PLAIN_API_FUNCTIONS else not_waited_on).append((name, props))
    assert len(waited_on) >= 40 and len(not_waited_on) >= 30
    assert HOT_PATHS <= {name for name, _ in waited_on}
    for name, props in waited_on:
        condition = "HasHotPathSnapStart" if name in HOT_PATHS else "HasApiSnapStart"
        assert props.get("SnapStart") == _snapstart(condition), name
    for name, props in not_waited_on:
        assert "SnapStart" not in props, name
    assert "SnapStart" not in TEMPLATE.doc["Globals"]["Function"]  # else every function would have it


def test_the_default_puts_snapstart_on_the_hot_paths_only_and_enabled_on_every_waited_on_function():
    def snapstarted(value: str) -> set[str]:
        template = Template(parameters={"ApiSnapStart": value})
        return {name for name, props in template.functions().items() if has_snapstart(template, props)}

    assert TEMPLATE.parameters["ApiSnapStart"] == "HotPaths"
    assert snapstarted("HotPaths") == HOT_PATHS
    assert snapstarted("Disabled") == set()
    assert len(snapstarted("Enabled")) >= 40


def test_an_idle_deployment_costs_under_40_usd_a_month_by_default_and_more_with_snapstart_everywhere():
    # (the schedules' DynamoDB request units, cents a month, are measured by the benchmark: left out here)
    default = sum(model(TEMPLATE, 150, {}).values())
    everywhere = sum(model(Template(parameters={"ApiSnapStart": "Enabled"}), 150, {}).values())
    assert default < 40 < everywhere
