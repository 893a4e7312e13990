"""Given every AWS call the functions made while the other tests ran (recorded per function by the session's
``aws_calls``; moto itself never checks IAM), when each is evaluated against that function's policies in
template.yaml, then every one is allowed — action, resource and condition keys — so what works locally does not
fail with AccessDenied once deployed (where a Step Functions Catch would quietly compensate it).

Marked ``last``: tests/conftest.py runs these after every other collected test, whatever the selection. When
``./dev test`` runs the suite on pytest-xdist workers, these run afterwards in a pytest run of their own, over what
every worker's session recorded (tests/recorded_calls.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DESELECTED
from tests.recorded_calls import CALLS_IN, RecordedCalls, reading_from

pytestmark = pytest.mark.last


@pytest.fixture
def recorded(request: pytest.FixtureRequest, template: Any) -> RecordedCalls:
    """What the suite's calls came to: read from every worker's summary when the suite ran on pytest-xdist workers
    (``ITL_TEST_CALLS_IN``), else this session's own recorder, evaluated now."""
    session = RecordedCalls(modules={Path(str(item.path)).name for item in request.session.items})
    directory = reading_from()
    if directory is not None:
        found = RecordedCalls.read(directory)
        assert found is not None, f"{CALLS_IN}={directory} holds no worker's summary: the suite recorded nothing"
        return found.merged(session)
    recorder = request.getfixturevalue("aws_calls")
    return RecordedCalls.of(recorder, template, request.session.items, request.config.stash.get(DESELECTED, 0))


def test_every_aws_call_of_every_function_is_allowed_by_its_policies(recorded: RecordedCalls) -> None:
    # Given what the tests run before this one made the functions do
    if not recorded.with_calls:
        pytest.skip("no function made an AWS call in this session (run it with the tests that exercise them)")
    # When each call's authorizations are evaluated against its function's policies
    # Then none is refused
    assert not recorded.denied, "calls the function's policies in template.yaml do not allow:\n" + "\n".join(
        recorded.denied
    )


def test_the_whole_suite_records_calls_of_every_function_it_invokes_that_holds_policies(
    recorded: RecordedCalls, template: Any
) -> None:
    """The recording reaches every function (API functions on the gateway's pool, steps on moto's execution
    threads): after the whole integration suite, a function granted policies that ran and made no recorded call
    would mean its calls escaped the recorder, or that it holds grants it never uses."""
    # Given a session that ran every integration module and deselected nothing (a selection may well invoke a
    # function only on a path that reads nothing, such as a refused body)
    modules = {p.name for p in Path(__file__).parent.glob("test_*.py")}
    if not modules <= recorded.modules or recorded.deselected:
        pytest.skip("only part of the integration suite ran")
    # Then every invoked function that holds policies made AWS calls that were recorded
    functions = template.functions()
    silent = sorted(
        f for f in recorded.invocations if functions.get(f, {}).get("Policies") and f not in recorded.with_calls
    )
    assert recorded.invocations and not silent, f"invoked, granted policies, no AWS call recorded: {silent}"
