"""Given the API (its emulator recording its request log, the local stand-in for API Gateway's metrics), when an
admin asks ``GET /subscriptions/{sub}/providers/ITL.Accelerator/slo?month=YYYY-MM``, then it gets the month's
attainment and error budget left for both SLOs, counted from the requests the API answered; anyone else is
refused as for any subscription-level read, and a bad month is 400."""

from __future__ import annotations

import time

import pytest

from tests.conftest import ADMIN, CONSUMER


def slo_path(sub: str) -> str:
    return f"/subscriptions/{sub}/providers/ITL.Accelerator/slo"


def test_an_admin_reads_the_months_slos_counted_from_the_apis_requests(admin, sub):
    month = time.strftime("%Y-%m", time.gmtime())
    before = admin.get(slo_path(sub), params={"month": month})
    assert before.status_code == 200, before.text
    counted = before.json()["objectives"][0]["requests"]
    # When requests are made (each one counted, the refused one too)
    for _ in range(3):
        assert admin.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/sparkNodes").status_code == 200
    assert admin.get("/health").status_code == 200
    report = admin.get(slo_path(sub)).json()  # the current month by default
    # Then they are in the month's figures (with the reads before, and any other test's meanwhile)
    availability, latency = report["objectives"]
    assert availability["requests"] >= counted + 5
    assert (availability["name"], availability["goalPercent"], latency["name"], latency["thresholdMs"]) == (
        "availability",
        99.9,
        "latency",
        1000,
    )
    assert report["month"] == month and report["complete"] is False
    assert availability["errorBudget"]["minutes"] in (43.2, 44.64, 41.76, 40.32)  # 0.1 % of 28-31 days
    assert availability["attainmentPercent"] is not None and 0 <= availability["attainmentPercent"] <= 100
    assert "request log" in report["source"]


@pytest.mark.parametrize("month", ["2026-13", "last-month", "2999-01"])
def test_a_bad_month_is_400(admin, sub, month):
    response = admin.get(slo_path(sub), params={"month": month})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "InvalidParameter" and response.json()["error"]["target"] == "month"


def test_only_admins_of_the_whole_subscription_read_it(caller, sub, admin):
    consumer = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="bob")
    assert consumer.get(slo_path(sub)).json()["error"]["code"] == "AuthorizationFailed"
    group_admin = caller([ADMIN], [f"/subscriptions/{sub}/resourceGroups/rg1"], subject="carol")
    assert group_admin.get(slo_path(sub)).status_code == 403
    stranger = caller([ADMIN], ["/subscriptions/another-sub"], subject="dave")
    assert stranger.get(slo_path(sub)).status_code == 404
    # and the refusals are in the subscription's audit trail
    events = admin.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/auditEvents").json()["value"]
    denied = [e for e in events if e["action"] == "ITL.Accelerator/slo/read" and e["outcome"] == "Denied"]
    assert {e["actor_id"] for e in denied} == {"bob", "carol", "dave"}
