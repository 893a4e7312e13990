"""Budgets through the API and the functions of template.yaml: operators set them (201, then 200, etag
preconditions), callers holding the subscription read them — admins with this month's spend, others without it —
bad bodies are 400 naming the field, and deleting is 200 then 204."""

from __future__ import annotations

from typing import Any

from tests.conftest import CONSUMER
from tests.integration.test_bad_input import assert_refused


def budget_path(sub: str, name: str | None = None) -> str:
    base = f"/subscriptions/{sub}/providers/ITL.Accelerator/budgets"
    return f"{base}/{name}" if name else base


def budget_body(amount: str = "250", **props: Any) -> dict[str, Any]:
    return {
        "properties": {
            "amount": amount,
            "currency": "EUR",
            "timePeriod": {"startDate": "2026-01-01T00:00:00Z"},
            "notifications": {"eighty": {"threshold": 80, "contactEmails": ["fin@example.com"]}},
            "filter": {"tags": {"name": "team", "operator": "In", "values": ["nlp"]}},
            "actionAtLimit": "RefuseNewAllocations",
            **props,
        }
    }


def test_operators_set_budgets_and_everyone_in_the_subscription_reads_them(admin, caller, sub):
    consumer = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="ann")
    assert_refused(consumer.put(budget_path(sub, "nlp"), json=budget_body()), 403, "AuthorizationFailed")
    created = admin.put(budget_path(sub, "nlp"), json=budget_body())
    assert created.status_code == 201, created.text
    budget = created.json()
    assert budget["type"] == "ITL.Accelerator/budgets" and budget["name"] == "nlp" and budget["etag"]
    assert budget["properties"]["currency"] == "EUR" and budget["properties"]["actionAtLimit"] == "RefuseNewAllocations"
    assert budget["properties"]["status"]["exceeded"] is False
    assert budget["properties"]["currentSpend"] == {"amount": "0.000000", "unit": "EUR"}  # evaluated at once, exact
    assert budget["properties"]["amount"] == "250"
    assert admin.put(budget_path(sub, "nlp"), json=budget_body()).json()["etag"] == budget["etag"]  # idempotent
    stale = admin.put(budget_path(sub, "nlp"), json=budget_body("300"), headers={"If-Match": '"stale"'})
    assert_refused(stale, 412, "PreconditionFailed")
    changed = admin.put(budget_path(sub, "NLP"), json=budget_body("300"), headers={"If-Match": budget["etag"]})
    assert changed.status_code == 200 and changed.json()["name"] == "nlp"
    listed = consumer.get(budget_path(sub))
    assert listed.status_code == 200 and [b["name"] for b in listed.json()["value"]] == ["nlp"]
    shown = consumer.get(budget_path(sub, "nlp")).json()["properties"]
    assert shown["amount"] == "300" and "currentSpend" not in shown and "status" not in shown
    assert shown["notifications"]["eighty"] == {"enabled": True, "operator": "GreaterThanOrEqualTo", "threshold": 80,
                                                "thresholdType": "Actual"}  # fmt: skip
    rg_admin = caller(["itl-accelerator-admin"], [f"/subscriptions/{sub}/resourceGroups/rg1"], subject="rg-admin")
    assert rg_admin.get(budget_path(sub)).json()["value"] == []  # a tag budget covers work beyond rg1
    assert_refused(rg_admin.get(budget_path(sub, "nlp")), 404, "ResourceNotFound")
    assert admin.delete(budget_path(sub, "nlp")).status_code == 200
    assert admin.delete(budget_path(sub, "nlp")).status_code == 204
    assert_refused(consumer.get(budget_path(sub, "nlp")), 404, "ResourceNotFound")


def test_a_bad_budget_is_400_naming_the_field(admin, sub):
    for props, field in [
        ({"amount": "-5"}, "amount"),
        ({"currency": "ABC"}, "currency"),
        ({"timePeriod": {"startDate": "2026-01-15T00:00:00Z"}}, "startDate"),
        ({"actionAtLimit": "Explode"}, "actionAtLimit"),
        ({"filter": {"dimensions": {"name": "Color", "values": ["red"]}}}, "ResourceGroupName"),
        ({"notifications": {"a": {"threshold": 80, "contactEmails": ["a@b.com\r\nBcc: x@y.com"]}}}, "contactEmails"),
        ({"notifications": {"a": {"threshold": 80}, "b": {"threshold": 80}}}, "same threshold"),
        ({"timePeriod": {"startDate": "9999-12-31T23:00:00-05:00"}}, "startDate"),
    ]:
        refused = admin.put(budget_path(sub, "bad"), json=budget_body(**props))
        assert_refused(refused, 400, None)
        assert field in refused.text, (props, refused.text)
    assert admin.get(budget_path(sub, "bad")).status_code == 404
