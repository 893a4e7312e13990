"""Budgets: created once by name (case-insensitive), replaced at their etag with the state evaluated for the change
(refused when an evaluation was written since it was read), listed per subscription and across all (the monitor's
work list), and evaluated with a state written only when no other evaluation came between (a threshold is notified
once)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from itl_accelerator.domain.budgets import Budget, BudgetAction, BudgetFilter, BudgetState, Threshold
from itl_accelerator.repositories.errors import EtagMismatch, ItemExists, StateMoved
from itl_accelerator.repositories.protocols import Repositories
from tests.contract.builders import all_pages, audit_events, make_audit


def make_budget(sub: str, name: str = "Team", *, etag: str = "e1", amount: str = "100") -> Budget:
    return Budget(
        subscription_id=sub,
        name=name,
        document={"id": f"/subscriptions/{sub}/providers/ITL.Accelerator/budgets/{name}", "name": name},
        etag=etag,
        amount=Decimal(amount),
        currency="USD",
        thresholds=(Threshold(Decimal(50)), Threshold(Decimal("99.5"), strictly_above=True)),
        action=BudgetAction.STOP_ALL,
        filter=BudgetFilter(resource_groups=("rg-a",)),
        start=datetime(2025, 3, 1, tzinfo=UTC),
    )


def test_a_budget_is_created_once_and_read_back_whole(repos: Repositories, sub: str) -> None:
    repos.budgets.put(make_budget(sub), make_audit(sub, "/budgets/Team"), expected_etag=None)
    with pytest.raises(ItemExists):
        repos.budgets.put(make_budget(sub, "TEAM"), make_audit(sub, "/budgets/TEAM"), expected_etag=None)
    got = repos.budgets.get(sub, "team")
    assert got is not None and got.name == "Team" and got.amount == Decimal(100)
    assert (got.action, got.filter, got.thresholds) == (
        BudgetAction.STOP_ALL,
        BudgetFilter(resource_groups=("rg-a",)),
        (Threshold(Decimal(50)), Threshold(Decimal("99.5"), strictly_above=True)),
    )
    assert len(audit_events(repos, sub)) == 1


def test_an_evaluation_is_written_only_if_none_came_between(repos: Repositories, sub: str) -> None:
    repos.budgets.put(make_budget(sub), make_audit(sub), expected_etag=None)
    read_by_a = repos.budgets.get(sub, "Team")
    read_by_b = repos.budgets.get(sub, "Team")
    assert read_by_a is not None and read_by_b is not None
    state = BudgetState(period="2025-03", spend=Decimal("60.5"), other=(("EUR", Decimal("3.25")),),
                        notified=(Decimal(50),), exceeded_notified=False, evaluated_at="2025-03-10T08:00:00Z")  # fmt: skip
    assert repos.budgets.record(read_by_a, state, [make_audit(sub, "/budgets/Team")]) is True
    assert repos.budgets.record(read_by_b, state, [make_audit(sub, "/budgets/Team")]) is False  # notified once
    got = repos.budgets.get(sub, "Team")
    assert got is not None and got.state == replace(state, version=read_by_a.state.version + 1)
    assert len(audit_events(repos, sub)) == 2  # the create and one evaluation


def test_a_replace_writes_its_state_at_the_etag_and_the_state_version_it_read(repos: Repositories, sub: str) -> None:
    repos.budgets.put(make_budget(sub), make_audit(sub), expected_etag=None)
    read = repos.budgets.get(sub, "Team")
    assert read is not None
    state = BudgetState(period="2025-03", spend=Decimal(120), notified=(Decimal(50),), exceeded=True)
    assert repos.budgets.record(read, state, [])
    lifted = replace(make_budget(sub, etag="e2", amount="500"), state=replace(state, exceeded=False))
    with pytest.raises(EtagMismatch):
        repos.budgets.put(lifted, make_audit(sub), expected_etag="stale", read_version=read.state.version + 1)
    with pytest.raises(StateMoved):  # an evaluation came after what this change was judged on
        repos.budgets.put(lifted, make_audit(sub), expected_etag="e1", read_version=read.state.version)
    repos.budgets.put(lifted, make_audit(sub), expected_etag="e1", read_version=read.state.version + 1)
    got = repos.budgets.get(sub, "Team")
    assert got is not None and got.amount == Decimal(500) and got.etag == "e2"
    assert (got.state.exceeded, got.state.spend, got.state.version) == (False, Decimal(120), read.state.version + 2)


def test_budgets_are_listed_per_subscription_and_across_all(repos: Repositories, sub: str) -> None:
    other = sub + "-other"
    for n in range(5):
        repos.budgets.put(make_budget(sub, f"b{n}"), make_audit(sub), expected_etag=None)
    repos.budgets.put(make_budget(other, "theirs"), make_audit(other), expected_etag=None)
    assert [b.name for b in repos.budgets.in_subscription(sub)] == [f"b{n}" for n in range(5)]
    every, pages = all_pages(repos.budgets.every, 2)
    assert {(b.subscription_id, b.name) for b in every} >= {(sub, "b0"), (sub, "b4"), (other, "theirs")}
    assert pages >= 3
    deleted = repos.budgets.get(sub, "b0")
    assert deleted is not None
    repos.budgets.delete(deleted, make_audit(sub))
    assert repos.budgets.get(sub, "b0") is None
    assert (sub, "b0") not in {(b.subscription_id, b.name) for b in all_pages(repos.budgets.every, 2)[0]}


def test_the_monitor_sweep_resumes_from_its_saved_page(repos: Repositories, sub: str) -> None:
    for n in range(5):
        repos.budgets.put(make_budget(sub, f"s{n}"), make_audit(sub), expected_etag=None)
    repos.budgets.save_sweep_cursor(None)
    assert repos.budgets.sweep_cursor() is None
    first = repos.budgets.every(2, None)
    repos.budgets.save_sweep_cursor(first.token)
    assert repos.budgets.sweep_cursor() == first.token
    resumed = repos.budgets.every(2, repos.budgets.sweep_cursor())
    assert not {(b.subscription_id, b.name) for b in resumed.items} & {(b.subscription_id, b.name) for b in first.items}
    repos.budgets.save_sweep_cursor(None)
    assert repos.budgets.sweep_cursor() is None
