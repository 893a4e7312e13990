"""Settings checked at a function's cold start (issue 28; ran-isenberg/aws-lambda-handler-cookbook's habit): each
function names what it cannot run without (``REQUIRED_BY_HANDLER``), template.yaml gives every function those
variables, and a function deployed without one fails its first call naming the variable — not at the first request
that happens to need it, after it accepted others."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from itl_accelerator.settings import REQUIRED_BY_HANDLER, SettingInvalid, SettingMissing, get_settings
from itl_local.template import Template

ARN = "arn:aws:states:us-east-1:123456789012:stateMachine:job-lifecycle"


@pytest.fixture
def fresh_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """The settings read afresh from the patched environment, and afresh again after (later tests see theirs)."""
    get_settings.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    get_settings.cache_clear()


def _environment(template: Template, props: dict[str, Any]) -> set[str]:
    own = (props.get("Environment") or {}).get("Variables") or {}
    shared = ((template.doc.get("Globals") or {}).get("Function") or {}).get("Environment", {}).get("Variables", {})
    return set(own) | set(shared)


def test_every_function_is_given_what_its_handler_needs() -> None:
    template = Template()
    handlers = {props["Handler"]: props for props in template.functions().values()}
    assert set(REQUIRED_BY_HANDLER) <= set(handlers), set(REQUIRED_BY_HANDLER) - set(handlers)
    for handler, needed in REQUIRED_BY_HANDLER.items():
        missing = {name.upper() for name in needed} - _environment(template, handlers[handler])
        assert not missing, f"template.yaml does not give {handler} {sorted(missing)}"


def test_every_function_that_starts_a_workflow_says_so() -> None:
    """A function given a state machine's ARN (it starts executions of it) lists it as needed: the table cannot
    quietly lag behind the template in the other direction either."""
    template = Template()
    for props in template.functions().values():
        given = {v for v in (props.get("Environment") or {}).get("Variables") or {} if v.endswith("_STATE_MACHINE_ARN")}
        needed = {n.upper() for n in REQUIRED_BY_HANDLER.get(props["Handler"], ())}
        assert given <= needed, f"{props['Handler']} is given {sorted(given - needed)} but does not check them"


def test_a_function_without_a_variable_it_needs_fails_its_first_call_naming_it(
    fresh_settings: pytest.MonkeyPatch,
) -> None:
    fresh_settings.setenv("_HANDLER", "itl_functions.spark_jobs.create")
    fresh_settings.delenv("JOB_STATE_MACHINE_ARN", raising=False)
    with pytest.raises(SettingMissing, match=r"JOB_STATE_MACHINE_ARN not set: itl_functions\.spark_jobs\.create"):
        get_settings()
    with pytest.raises(SettingMissing):  # not cached: every call fails the same way
        get_settings()
    fresh_settings.setenv("JOB_STATE_MACHINE_ARN", ARN)
    assert get_settings().job_state_machine_arn == ARN


def test_another_function_does_not_need_it(fresh_settings: pytest.MonkeyPatch) -> None:
    fresh_settings.setenv("_HANDLER", "itl_functions.spark_jobs.get")
    fresh_settings.delenv("JOB_STATE_MACHINE_ARN", raising=False)
    assert get_settings().lambda_handler == "itl_functions.spark_jobs.get"


def test_a_malformed_value_names_its_variable(fresh_settings: pytest.MonkeyPatch) -> None:
    fresh_settings.setenv("DGX_ATTEMPTS", "three")
    fresh_settings.setenv("JOB_STATE_MACHINE_ARN", "job-lifecycle")
    with pytest.raises(SettingInvalid) as refused:
        get_settings()
    assert "DGX_ATTEMPTS: Input should be a valid integer" in str(refused.value)
    assert "JOB_STATE_MACHINE_ARN: Value error, not a Step Functions state machine ARN" in str(refused.value)


def test_a_handler_refuses_its_first_invocation(fresh_settings: pytest.MonkeyPatch) -> None:
    """Through a real handler: every invocation reads the settings (a cache hit once they are good), so the
    deployment's mistake is the first call's error - and still so where an earlier test already warmed the handler
    (CI's whole run once did, and the tracer's first-call-only read let the call through)."""
    from types import SimpleNamespace

    from itl_functions import spark_jobs

    context = SimpleNamespace(
        function_name="SparkJobsCreate", memory_limit_in_mb=512, aws_request_id="r1",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:SparkJobsCreate",
    )  # fmt: skip

    fresh_settings.setenv("_HANDLER", "itl_functions.spark_jobs.create")
    fresh_settings.delenv("JOB_STATE_MACHINE_ARN", raising=False)
    with pytest.raises(SettingMissing, match="JOB_STATE_MACHINE_ARN"):
        spark_jobs.create({"httpMethod": "GET", "path": "/", "headers": {}, "requestContext": {}}, context)
