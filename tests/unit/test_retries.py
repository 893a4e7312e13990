"""The retry rule (domain/retries.py): AWS Batch's evaluateOnExit matching, the backoff, the attempt ids."""

from __future__ import annotations

import pytest

from itl_accelerator.domain.retries import RetryStrategy, attempt_id, decides, delay_seconds, matches, should_retry

#: a strategy as a job's document holds it (wire names)
S = RetryStrategy.of_properties


@pytest.mark.parametrize(
    ("pattern", "value", "matched"),
    [
        ("3", "3", True),
        ("3", "33", False),
        ("13*", "137", True),
        ("13*", "1", False),
        ("*", "anything at all", True),
        ("Host EC2*", "Host EC2 (instance i-1) terminated.", True),
        ("The container exited with code 1.", "The container exited with code 1.", True),
        ("The container exited", "The container exited with code 1.", False),
    ],
)
def test_a_pattern_matches_exactly_or_by_its_prefix_when_it_ends_with_a_star(pattern, value, matched):
    assert matches(pattern, value) is matched


def test_the_first_matching_condition_decides_and_none_matching_retries():
    strategy = S(
        {
            "attempts": 3,
            "evaluateOnExit": [
                {"onExitCode": "137", "action": "EXIT"},
                {"onExitCode": "1*", "onReason": "The container*", "action": "RETRY"},
                {"onReason": "Out of memory*", "action": "EXIT"},
            ],
        }
    )
    assert decides(strategy, 137, "The container exited with code 137.") == "EXIT"
    assert decides(strategy, 12, "The container exited with code 12.") == "RETRY"
    assert decides(strategy, 12, "Out of memory on GPU 3") == "EXIT"
    assert decides(strategy, 2, "The container exited with code 2.") == "RETRY"  # none matches: AWS Batch retries
    assert decides(strategy, None, "The DGX Platform no longer knows the job.") == "RETRY"  # no exit code to match
    assert decides(S({"attempts": 2}), 1, "x") == "RETRY"


def test_attempts_bound_the_runs_and_no_strategy_never_retries():
    assert should_retry(S({"attempts": 3}), 1, 1, "x") and should_retry(S({"attempts": 3}), 2, 1, "x")
    assert not should_retry(S({"attempts": 3}), 3, 1, "x")
    assert not should_retry(S({"attempts": 1}), 1, 1, "x")
    assert not should_retry(None, 1, 1, "x")
    assert not should_retry(S({"attempts": 3, "evaluateOnExit": [{"onExitCode": "*", "action": "exit"}]}), 1, 1, "x")


def test_the_backoff_grows_by_its_rate_up_to_its_most():
    strategy = S({"attempts": 10, "intervalSeconds": 10, "backoffRate": 2.5, "maxDelaySeconds": 100})
    assert [delay_seconds(strategy, n) for n in range(1, 6)] == [10, 25, 63, 100, 100]  # 62.5 rounded up
    assert delay_seconds(S({"attempts": 2}), 1) == 10  # the defaults: 10 s, doubling, at most an hour
    assert delay_seconds(S({"attempts": 10}), 9) == 2560


def test_each_attempt_has_its_own_id_and_the_first_is_the_operation():
    assert attempt_id("op-1", 1) == "op-1"
    assert attempt_id("op-1", 2) == "op-1.attempt-2" != attempt_id("op-1", 3)


def test_the_next_attempt_starts_from_the_execution_input_alone():
    import json
    from pathlib import Path

    from itl_accelerator.services.workflows.io import JOB_EXECUTION_INPUT

    asl = json.loads((Path(__file__).resolve().parents[2] / "statemachines" / "job_lifecycle.asl.json").read_text())
    parameters = asl["States"]["NextAttempt"]["Parameters"]
    assert parameters == {f"{name}.$": f"$.{name}" for name in sorted(JOB_EXECUTION_INPUT)}
