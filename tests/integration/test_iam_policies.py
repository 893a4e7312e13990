"""Given every AWS call the functions made while the other tests ran (recorded per function by the session's
``aws_calls``; moto itself never checks IAM), when each is evaluated against that function's policies in
template.yaml, then every one is allowed — action, resource and condition keys — so what works locally does not
fail with AccessDenied once deployed (where a Step Functions Catch would quietly compensate it).

Marked ``last``: tests/conftest.py runs these after every other collected test, whatever the selection.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from itl_local.iam import uncovered
from tests.conftest import DESELECTED

pytestmark = pytest.mark.last


def test_every_aws_call_of_every_function_is_allowed_by_its_policies(aws_calls: Any, template: Any) -> None:
    # Given what the tests run before this one made the functions do
    if not aws_calls.calls:
        pytest.skip("no function made an AWS call in this session (run it with the tests that exercise them)")
    # When each call's authorizations are evaluated against its function's policies
    denied = uncovered(template, list(aws_calls.calls), aws_calls.bindings)
    # Then none is refused
    assert not denied, "calls the function's policies in template.yaml do not allow:\n" + "\n".join(
        str(d) for d in denied
    )


def test_the_whole_suite_records_calls_of_every_function_it_invokes_that_holds_policies(
    aws_calls: Any, template: Any, request: pytest.FixtureRequest
) -> None:
    """The recording reaches every function (API functions on the gateway's pool, steps on moto's execution
    threads): after the whole integration suite, a function granted policies that ran and made no recorded call
    would mean its calls escaped the recorder, or that it holds grants it never uses."""
    # Given a session that ran every integration module and deselected nothing (a selection may well invoke a
    # function only on a path that reads nothing, such as a refused body)
    ran = {Path(str(item.path)).name for item in request.session.items}
    modules = {p.name for p in Path(__file__).parent.glob("test_*.py")}
    if not modules <= ran or request.config.stash.get(DESELECTED, 0):
        pytest.skip("only part of the integration suite ran")
    # Then every invoked function that holds policies made AWS calls that were recorded
    functions = template.functions()
    with_calls = {call.function for call in aws_calls.calls}
    silent = sorted(f for f in aws_calls.invocations if functions.get(f, {}).get("Policies") and f not in with_calls)
    assert aws_calls.invocations and not silent, f"invoked, granted policies, no AWS call recorded: {silent}"
