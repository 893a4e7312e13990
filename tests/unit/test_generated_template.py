"""Every generated file is what its source gives (``./dev generate`` writes them, tools/generate.py): template.yaml's
regions (an ARM operation's function block comes from its row in ``API_FUNCTIONS`` and its route, the SLO alarms from
``slo.BURN_RATE_ALERTS``), the handler modules' lines, the casing table, the sample events, docs/openapi.json and the
MCP server's schemas. A hand edit of one, or a source changed without ``./dev generate``, fails here with the
difference."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import replace
from decimal import Decimal

import pytest

from itl_accelerator import slo
from itl_local.template import DEFAULT_TEMPLATE, Template, load_handler
from tools import generate
from tools.generate import API_FUNCTIONS, ApiFunction, RegionMissing

CASING = DEFAULT_TEMPLATE.parent / generate.CASING_TABLE


def test_template_yaml_is_what_its_tables_generate() -> None:
    current = DEFAULT_TEMPLATE.read_text()
    wanted = generate.generate(current)
    assert wanted == current, "".join(
        difflib.unified_diff(current.splitlines(True), wanted.splitlines(True), "template.yaml", "generated", n=1)
    )


def test_every_function_of_the_table_is_in_the_template_with_its_routes_path_and_method() -> None:
    resources = Template().resources
    for row in API_FUNCTIONS:
        props = resources[f"{row.name}Function"]["Properties"]
        assert props["Handler"] == f"itl_functions.{row.handler}"
        event = props["Events"]["Api"]["Properties"]
        assert (event["Path"], event["Method"]) == generate._handler_route(row)
        assert load_handler(props["Handler"]).operation_id == row.operation  # the module's line serves it
        assert sorted(p["Ref"] for p in props.get("Policies", [])) == sorted(row.policies)


def test_a_new_row_is_a_whole_function_block_with_its_routes_path() -> None:
    lines = generate.render_api_functions(
        [
            ApiFunction(
                "SparkJobsPeek", "spark_jobs.peek", "SparkJobs_Get", "GET: a sparkJob, peeked", environment={"A": '"1"'}
            )
        ]
    )
    text = "\n".join(lines)
    assert "  SparkJobsPeekFunction:\n    Type: AWS::Serverless::Function" in text
    assert "Description: 'GET: a sparkJob, peeked'" in text  # quoted where a plain scalar would not parse
    assert "/providers/ITL.Accelerator/sparkJobs/{jobName}\n            Method: get" in text
    assert '          A: "1"' in text


def test_an_operation_no_route_has_is_refused_naming_it() -> None:
    with pytest.raises(LookupError, match="SparkJobs_Peek"):
        generate.render_api_functions([ApiFunction("Nothing", "spark_jobs.peek", "SparkJobs_Peek", "x")])


def test_a_row_of_a_new_module_creates_it_with_its_router_and_handler_line(tmp_path) -> None:
    rows = (*API_FUNCTIONS, ApiFunction("SparkJobsPeek", "job_peeks.peek", "SparkJobs_Get", "GET a job, peeked"))
    written = generate.handler_modules(tmp_path, rows)
    text = written[tmp_path / "job_peeks.py"]
    assert "from itl_accelerator.api.routes import spark_jobs as routes\n" in text
    assert 'peek = operation_handler(routes.router, "SparkJobs_Get")\n' in text
    assert written[tmp_path / "spark_nodes.py"].count("operation_handler(routes.router") == 7


def test_a_module_whose_operations_are_in_two_routers_is_refused(tmp_path) -> None:
    rows = (ApiFunction("A", "mixed.a", "SparkJobs_Get", "a"), ApiFunction("B", "mixed.b", "SparkNodes_Get", "b"))
    with pytest.raises(ValueError, match="one router a module"):
        generate.handler_modules(tmp_path, rows)


def test_a_changed_burn_rate_changes_the_alarms(monkeypatch: pytest.MonkeyPatch) -> None:
    first = slo.BURN_RATE_ALERTS[0]
    monkeypatch.setattr(slo, "BURN_RATE_ALERTS", (replace(first, burn_rate=Decimal("10")), *slo.BURN_RATE_ALERTS[1:]))
    text = "\n".join(generate.render_slo_alarms())
    assert "Threshold: 10\n" in text and "Threshold: 14.4\n" not in text
    assert "faster than 10x over 1 h" in text


def test_a_template_without_a_regions_markers_is_refused_naming_it() -> None:
    text = DEFAULT_TEMPLATE.read_text().replace("# <<< generated: slo-alarms", "# end of the alarms")
    with pytest.raises(RegionMissing, match="slo-alarms"):
        generate.generate(text)


def test_check_exits_1_with_the_difference_when_a_region_was_edited_by_hand(tmp_path, capsys) -> None:
    edited = tmp_path / "template.yaml"
    edited.write_text(DEFAULT_TEMPLATE.read_text().replace("Description: GET a sparkJob\n", "Description: hand\n", 1))
    # every sample event and the casing table as they are in the repository: neither is written
    events = ["--events", str(DEFAULT_TEMPLATE.parent / "events"), "--casing-table", str(CASING)]
    assert generate.main(["--check", "--template", str(edited), *events]) == 1
    assert "+      Description: GET a sparkJob" in capsys.readouterr().out
    assert generate.main(["--template", str(edited), *events]) == 0
    assert edited.read_text() == DEFAULT_TEMPLATE.read_text()


def test_check_passes_on_the_repository_as_committed(capsys) -> None:
    """``./dev generate --check`` over every generated file at once, as CI's test run checks it."""
    assert generate.main(["--check"]) == 0, capsys.readouterr().out


def test_a_stale_openapi_document_or_mcp_schemas_fail_check_and_are_written_back(tmp_path, capsys) -> None:
    repo = DEFAULT_TEMPLATE.parent
    openapi, mcp_schemas = tmp_path / "openapi.json", tmp_path / "api_schemas.json"
    openapi.write_text((repo / generate.OPENAPI).read_text().replace('"title": "SparkJob"', '"title": "Job"', 1))
    mcp_schemas.write_text((repo / generate.MCP_SCHEMAS).read_text().replace('"minimum": 1', '"minimum": 2', 1))
    paths = ["--openapi", str(openapi), "--mcp-schemas", str(mcp_schemas)]
    assert generate.main(["--check", *paths]) == 1
    out = capsys.readouterr()
    added = [line for line in out.out.splitlines() if line.startswith("+ ")]
    assert any('"title": "SparkJob"' in line for line in added) and any('"minimum": 1' in line for line in added)
    assert str(openapi) in out.err and str(mcp_schemas) in out.err
    assert generate.main(paths) == 0
    assert openapi.read_text() == (repo / generate.OPENAPI).read_text()
    assert mcp_schemas.read_text() == (repo / generate.MCP_SCHEMAS).read_text()
    assert generate.main(["--check", *paths]) == 0


def test_a_rows_sample_event_is_the_shape_events_holds_for_its_route() -> None:
    row = next(f for f in API_FUNCTIONS if f.name == "SparkJobsGet")
    kept = json.loads((DEFAULT_TEMPLATE.parent / "events" / "SparkJobsGetFunction.json").read_text())
    made = generate.sample_event(row)
    for key in ("resource", "path", "httpMethod", "headers", "pathParameters", "queryStringParameters", "body"):
        assert made[key] == kept[key], key
    assert made["requestContext"]["authorizer"] == kept["requestContext"]["authorizer"]


def test_a_row_without_a_sample_event_gets_one_and_check_fails_until_then(tmp_path, capsys) -> None:
    template = tmp_path / "template.yaml"
    template.write_text(DEFAULT_TEMPLATE.read_text())
    events = tmp_path / "events"
    events.mkdir()
    for source in (DEFAULT_TEMPLATE.parent / "events").glob("*.json"):
        if source.name != "QuotasGetFunction.json":
            (events / source.name).write_text(source.read_text())
    casing = ["--casing-table", str(CASING)]
    assert generate.main(["--check", "--template", str(template), *casing]) == 1
    assert "missing sample event: QuotasGetFunction.json" in capsys.readouterr().out
    assert generate.main(["--template", str(template), *casing]) == 0
    written = json.loads((events / "QuotasGetFunction.json").read_text())
    assert written["path"] == "/subscriptions/sub-123/providers/ITL.Accelerator/locations/us-east-1/quotas/gpus"
    assert generate.main(["--check", "--template", str(template), *casing]) == 0


def test_a_route_missing_from_the_casing_table_fails_check_and_is_written_back(tmp_path, capsys) -> None:
    table = tmp_path / "canonical.py"
    logs = '    "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/ITL.Accelerator/sparkJobs/{jobName}/logs",\n'
    assert logs in CASING.read_text()
    table.write_text(CASING.read_text().replace(logs, ""))  # the defect of issue 28: .../logs not in the table
    args = ["--casing-table", str(table), "--events", str(DEFAULT_TEMPLATE.parent / "events")]
    assert generate.main(["--check", *args]) == 1
    assert "+" + logs in capsys.readouterr().out
    assert generate.main(args) == 0
    assert table.read_text() == CASING.read_text()


def test_each_state_machine_calls_exactly_its_workflows_steps_through_their_aliases() -> None:
    resources = Template().resources
    for workflow in generate.WORKFLOWS:
        props = resources[workflow.name]["Properties"]
        names = [s.name for s in workflow.steps]
        assert sorted(props["DefinitionSubstitutions"]) == sorted(f"{n}FunctionArn" for n in names)
        assert sorted(p["LambdaInvokePolicy"]["FunctionName"]["Ref"] for p in props["Policies"]) == sorted(
            f"{n}Function" for n in names
        )
        for step in workflow.steps:
            step_props = resources[f"{step.name}Function"]["Properties"]
            assert (step_props["Handler"], step_props["Timeout"]) == (f"itl_functions.{step.handler}", step.timeout)


def test_a_step_the_definition_never_calls_or_a_call_without_a_step_is_refused_naming_it(tmp_path) -> None:
    workflow = next(w for w in generate.WORKFLOWS if w.name == "JobLifecycleStateMachine")
    asl = (generate.STATEMACHINES_DIR / workflow.asl).read_text()
    (tmp_path / workflow.asl).write_text(asl.replace("${JobStopFunctionArn}", "${JobHaltFunctionArn}"))
    with pytest.raises(
        generate.WorkflowMismatch, match=r"calls without a step \['JobHalt'\].*never calls \['JobStop'\]"
    ):
        generate.asl_functions(workflow, tmp_path)


#: A workflow's function prefix, the prefix its handlers add (the deprovisioning steps share the instance handler
#: module with the provisioning ones) and the class of its steps.
STEP_NAMING = {
    "ProvisionInstanceStateMachine": ("Instance", "", "InstanceSteps"),
    "DeprovisionInstanceStateMachine": ("Deprovision", "deprovision_", "DeprovisionSteps"),
    "JobLifecycleStateMachine": ("Job", "", "JobSteps"),
}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_every_step_has_one_name_through_state_function_handler_and_method() -> None:
    from itl_accelerator.services.workflows.deprovision_steps import DeprovisionSteps
    from itl_accelerator.services.workflows.instance_steps import InstanceSteps
    from itl_accelerator.services.workflows.job_steps import JobSteps

    classes = {"InstanceSteps": InstanceSteps, "DeprovisionSteps": DeprovisionSteps, "JobSteps": JobSteps}
    for workflow in generate.WORKFLOWS:
        prefix, method_prefix, steps_class = STEP_NAMING[workflow.name]
        definition = json.loads((generate.STATEMACHINES_DIR / workflow.asl).read_text())
        tasks = {
            state_name: re.search(r"\$\{(\w+)FunctionArn\}", json.dumps(state)).group(1)  # type: ignore[union-attr]
            for state_name, state in definition["States"].items()
            if "FunctionArn}" in json.dumps(state.get("Arguments", state.get("Parameters", {})))
        }
        assert len(tasks) == len(workflow.steps), workflow.asl  # every step is one Task state
        for state_name, function in tasks.items():
            assert function == f"{prefix}{state_name}", (workflow.asl, state_name)
            step = next(s for s in workflow.steps if s.name == function)
            attribute = step.handler.rsplit(".", 1)[1]
            assert attribute == method_prefix + _snake(state_name), step
            method = _snake(state_name)
            assert callable(getattr(classes[steps_class], method, None)), f"{steps_class}.{method}"


def test_every_handler_module_is_what_its_rows_generate() -> None:
    for path, wanted in generate.handler_modules(DEFAULT_TEMPLATE.parent / generate.HANDLER_MODULES).items():
        assert path.exists() and path.read_text() == wanted, f"{path}: run ./dev generate"
