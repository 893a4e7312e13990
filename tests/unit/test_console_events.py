"""The local console's event lines: a state change names its resource and the change; a budget's notice names the
budget, what it reached and its spend (issue 26: they printed ``None (new) -> None``)."""

from __future__ import annotations

import io
import re

from itl_local.console import Console

BUDGET = "/subscriptions/sub-1/providers/ITL.Accelerator/budgets/team"


def line(event: dict) -> str:
    out = io.StringIO()
    Console(out).event(event)
    return re.sub(r"^\S+ ", "", out.getvalue().strip())  # without the time


def test_a_budget_threshold_crossed_names_the_budget_the_threshold_and_the_spend():
    detail = {"budgetId": BUDGET, "budget": "team", "threshold": "80", "spend": "80.500000", "amount": "100",
              "currency": "USD", "period": "2026-12"}  # fmt: skip
    assert line({"detail-type": "Budget Threshold Crossed", "detail": detail}) == (
        f"event Budget Threshold Crossed {BUDGET} reached threshold 80 %: 80.500000 of 100 USD in 2026-12"
    )


def test_a_budget_exceeded_names_its_action():
    detail = {"budgetId": BUDGET, "budget": "team", "spend": "101.000000", "amount": "100", "currency": "USD",
              "period": "2026-12", "action": "StopAll"}  # fmt: skip
    assert line({"detail-type": "Budget Exceeded", "detail": detail}) == (
        f"event Budget Exceeded {BUDGET} reached the amount: 101.000000 of 100 USD in 2026-12, action StopAll"
    )


def test_a_state_change_names_the_resource_and_the_change():
    detail = {"resourceId": "/x/sparkJobs/j", "previousState": None, "state": "Pending"}
    assert line({"detail-type": "Job State Changed", "detail": detail}) == (
        "event Job State Changed /x/sparkJobs/j (new) -> Pending"
    )
