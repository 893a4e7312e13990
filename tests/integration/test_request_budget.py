"""Given the store's request budget (a read is 1 GetItem, a list page 1 Query, a write 1 TransactWriteItems plus at
most 1 read, a refusal at most its audit PutItem, never a Scan) and the rate limits' price (every request first
counts itself: 2 UpdateItem, its caller's and its subscription's counter), when each sparkNodes operation runs
through API Gateway (emulated from template.yaml) on moto, then the DynamoDB calls it makes, counted at botocore,
stay within it.

This asserts request counts, not timings (the timings are benchmarks/requests_and_cold_start.py's business).
"""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks.requests_and_cold_start import (
    BUDGETS,
    LABELS,
    RATE_COUNTERS,
    Measured,
    dynamodb_calls,
    fits_budget,
    measure_requests,
)


@pytest.fixture(scope="module")
def measured(gateway, make_token, sub_module) -> dict[str, Measured]:
    """Every operation once, in one fresh subscription, through the session's emulator and moto."""
    results = measure_requests(gateway, make_token, sub_module)
    return {m.label: m for m in results}


@pytest.fixture(scope="module")
def sub_module() -> str:
    import uuid

    return f"sub-budget-{uuid.uuid4().hex[:10]}"


def describe(m: Measured) -> str:
    return f"{m.method} {m.path} -> {m.status}, DynamoDB calls {dict(m.calls)}, budget {BUDGETS[m.kind]}"


@pytest.mark.parametrize("label", LABELS)
def test_operation_answers_as_expected(measured, label):
    # The counts below only mean something for the path they are meant to measure (a 500 makes few calls).
    m = measured[label]
    assert m.status == m.expected_status, describe(m)


@pytest.mark.parametrize("label", LABELS)
def test_operation_stays_within_its_request_budget(measured, label):
    m = measured[label]
    assert fits_budget(m.kind, m.calls), describe(m)


def test_no_operation_scans(measured):
    scanning = {label: m.calls["Scan"] for label, m in measured.items() if m.calls["Scan"]}
    assert scanning == {}


@pytest.mark.parametrize("label", [label for label in LABELS if label != "identical PUT (no-op)"])
def test_every_change_is_exactly_one_transaction(measured, label):
    m = measured[label]
    if m.changes:
        assert m.calls["TransactWriteItems"] == 1, describe(m)
    else:
        assert m.calls["TransactWriteItems"] == 0, describe(m)


def test_identical_put_reads_once_and_writes_nothing_but_its_rate_counters(measured):
    m = measured["identical PUT (no-op)"]
    assert +m.calls == Counter({"GetItem": 1, "UpdateItem": RATE_COUNTERS}), describe(m)


def test_refused_read_audits_the_refusal_and_reads_nothing(measured):
    m = measured["get refused (403, no role)"]
    assert +m.calls == Counter({"PutItem": 1, "UpdateItem": RATE_COUNTERS}), describe(m)


@pytest.mark.parametrize("label", LABELS)
def test_every_request_counts_itself_on_two_counters_first(measured, label):
    m = measured[label]
    assert m.calls["UpdateItem"] == RATE_COUNTERS, describe(m)


# ------------------------------------------------------------------------------------------------ the counter itself
def test_the_counter_sees_calls_of_clients_created_before_it(aws):
    # Given a client created outside the counting window (as the handlers' clients are, on first use)
    client = aws
    # When it is used inside the window, and again after it
    with dynamodb_calls() as calls:
        client.list_tables()
        client.describe_table(TableName=client.list_tables()["TableNames"][0])
    client.list_tables()
    # Then exactly the calls inside are counted, by API name
    assert calls == Counter({"ListTables": 2, "DescribeTable": 1})


@pytest.mark.parametrize(
    ("kind", "calls", "fits"),
    [
        ("read", {"GetItem": 1}, True),
        ("read", {"GetItem": 2}, False),
        ("read", {"GetItem": 1, "Scan": 1}, False),
        ("list", {"Query": 1}, True),
        ("list", {"Query": 2}, False),
        ("list", {"Scan": 1}, False),
        ("write", {"GetItem": 1, "TransactWriteItems": 1}, True),
        ("write", {"GetItem": 2, "TransactWriteItems": 1}, False),
        ("write", {"GetItem": 1, "TransactWriteItems": 2}, False),
        ("write", {"GetItem": 1, "PutItem": 1}, False),
        ("denied", {"PutItem": 1}, True),
        ("denied", {"PutItem": 1, "GetItem": 1}, False),
    ],
)
def test_budget_rules(kind, calls, fits):
    # every request's own budget comes on top of its rate counters, which must be exactly there
    assert fits_budget(kind, Counter({**calls, "UpdateItem": RATE_COUNTERS})) is fits
    assert fits_budget(kind, Counter(calls)) is False
    assert fits_budget(kind, Counter({**calls, "UpdateItem": RATE_COUNTERS + 1})) is False
