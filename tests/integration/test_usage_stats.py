"""``GET .../stats`` through the API Gateway emulator, after real instances and jobs ran on the DGX simulator and
the usage schedules fired: the figures match their run times and their cost, failed provisioning bills nothing,
and the access rules hold — consumers see their own resources' stats, suppliers their nodes', admins all."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest

from tests.conftest import CONSUMER, SEED_NODE, SUPPLIER, TABLE, nodes_path
from tests.integration.instance_helpers import SEED_INSTANCE, instances_path, wait_for, wait_gone, wait_state
from tests.integration.test_jobs import job_body, jobs_path, sim, wait_job

pytestmark = pytest.mark.usefixtures("schedules")


def fire(name: str, **extra: Any) -> Any:
    """Fire one schedule of template.yaml now, through its function's handler (as EventBridge Scheduler would)."""
    from itl_local.schedules import find
    from itl_local.schedules import fire as fire_schedule
    from itl_local.template import Template

    return fire_schedule(find(Template(), name), extra=extra or None)


def fire_usage_schedules() -> None:
    """The usage sync and the roll-up, as their schedules would run them next."""
    fire("usage-sync")
    fire("usage-rollup")


def meter_of(aws: Any, sub: str, allocation_id: str) -> dict[str, Any]:
    item = aws.get_item(
        TableName=TABLE, Key={"PK": {"S": f"SUB#{sub}"}, "SK": {"S": f"METER#{allocation_id}"}}, ConsistentRead=True
    ).get("Item")
    assert item is not None, f"no meter {allocation_id}"
    return {"start": int(item["start"]["N"]), "end": int(item["end"]["N"]) if "end" in item else None}


@pytest.fixture
def node(admin: Any, sub: str) -> str:
    body = {**SEED_NODE, "properties": {**SEED_NODE["properties"], "owner": "supplier-1"}}
    assert admin.post(nodes_path(sub), json=body).status_code == 201
    return nodes_path(sub, name="dgx-1")


def test_an_instance_s_stats_match_its_run_time_and_price(admin, caller, sub, node, aws):
    # Given an instance that ran from ready until its deletion was accepted
    created = admin.post(instances_path(sub), json=SEED_INSTANCE)
    assert created.status_code == 202, created.text
    path = instances_path(sub, name="instance-1")
    ready = wait_state(admin, path, ("Succeeded",))
    operation = ready["properties"]["operationId"]
    # When the usage schedules fire while it runs (at least two whole seconds), and again after it is gone
    fire_usage_schedules()
    started = meter_of(aws, sub, operation)["start"]
    wait_for(lambda: time.time() >= started + 2, what="two seconds of the instance's life")
    assert admin.delete(path).status_code == 202
    wait_gone(admin, path)
    meter = meter_of(aws, sub, operation)
    assert meter["end"] is not None and meter["end"] >= meter["start"] + 2
    fire_usage_schedules()
    # Then the subscription's roll-ups (the instance itself is gone, and with it its /stats route) hold exactly
    # its GPU-seconds, billed by the node's default rule (whole minutes, at least one) at 2.5 USD per GPU-hour
    from itl_accelerator.wiring import Wiring

    stats = Wiring.build().usage_stats.subscription(sub, 2)
    seconds = meter["end"] - meter["start"]
    billable = 2 * max(60, -(-seconds // 60) * 60)
    assert stats["totals"]["gpuSeconds"] == 2 * seconds
    assert stats["totals"]["billableGpuSeconds"] == billable
    expected = (Decimal(billable) * Decimal("2.5") / 3600).quantize(Decimal("0.000001"), ROUND_HALF_UP)
    assert stats["totals"]["cost"] == [{"amount": format(expected, "f"), "currency": "USD"}]


def test_a_running_instance_s_stats_are_served_to_whoever_may_read_it(admin, caller, sub, node, aws):
    created = admin.post(instances_path(sub), json=SEED_INSTANCE)
    assert created.status_code == 202
    path = instances_path(sub, name="instance-1")
    ready = wait_state(admin, path, ("Succeeded",))
    started = meter_of(aws, sub, ready["properties"]["operationId"])["start"]
    wait_for(lambda: time.time() >= started + 2, what="two seconds of the instance's life")
    fire_usage_schedules()
    consumer = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="carol")
    stats = consumer.get(path + "/stats")
    assert stats.status_code == 200, stats.text
    body = stats.json()
    assert body["interval"] == "PT1H" and body["hours"] == 24 and len(body["value"]) == 24
    assert body["resourceId"].endswith("/sparkOllamaInstances/instance-1")
    assert body["totals"]["gpuSeconds"] > 0 and body["totals"]["gpuSeconds"] % 2 == 0  # 2 GPUs
    assert body["totals"]["gpuUtilizationPercent"] is not None  # the simulator's metrics came through
    # another tenant's consumer cannot tell the instance exists
    outsider = caller([CONSUMER], ["/subscriptions/sub-other"], subject="mallory")
    assert outsider.get(path + "/stats").status_code == 404
    assert admin.delete(path).status_code == 202
    wait_gone(admin, path)


@pytest.mark.parametrize(
    "hours", ["0", "721", "1.5", "abc", "-3", "", "+5", " 5", "\u00b2", "1\u00b2", "\u2460", "\uff15", "9" * 5000]
)
def test_hours_outside_1_to_720_is_400_invalid_parameter(admin, sub, node, hours):
    response = admin.get(node + "/stats", params={"hours": hours})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "InvalidParameter"
    assert response.json()["error"]["target"] == "hours"


def test_node_stats_are_the_supplier_s_and_the_admin_s_only(admin, caller, sub, node):
    scope = [f"/subscriptions/{sub}"]
    owner = caller([SUPPLIER], scope, subject="supplier-1")
    other_supplier = caller([SUPPLIER], scope, subject="supplier-2")
    consumer = caller([CONSUMER], scope, subject="carol")
    ok = owner.get(node + "/stats", params={"hours": "720"})
    assert ok.status_code == 200 and len(ok.json()["value"]) == 720
    assert "allocatedPercent" in ok.json()["totals"]
    assert admin.get(node + "/stats").status_code == 200
    for refused in (other_supplier, consumer):
        response = refused.get(node + "/stats")
        assert response.status_code == 403, response.text
        assert response.json()["error"]["code"] == "AuthorizationFailed"


def test_failed_provisioning_bills_nothing(admin, sub, node, aws):
    body = {**SEED_INSTANCE, "name": "broken", "model": "unknown-model:1b"}
    assert admin.post(instances_path(sub), json=body).status_code == 202
    failed = wait_state(admin, instances_path(sub, name="broken"), ("Failed",))
    fire_usage_schedules()
    meters = aws.query(
        TableName=TABLE,
        KeyConditionExpression="PK = :pk AND begins_with(SK, :m)",
        ExpressionAttributeValues={":pk": {"S": f"SUB#{sub}"}, ":m": {"S": "METER#"}},
    )["Items"]
    assert meters == [] and failed["properties"]["provisioningState"] == "Failed"
    stats = admin.get(instances_path(sub, name="broken") + "/stats").json()
    assert stats["totals"]["gpuSeconds"] == 0 and stats["totals"]["cost"] == []


def test_a_job_s_stats_sum_to_its_cost_and_only_its_submitter_sees_them(admin, caller, sub, node):
    scope = [f"/subscriptions/{sub}"]
    alice = caller([CONSUMER], scope, subject="alice")
    bob = caller([CONSUMER], scope, subject="bob")
    assert alice.put(jobs_path(sub, "train"), json=job_body(2, 160, workload=sim(seconds=2))).status_code == 201
    done = wait_job(alice, jobs_path(sub, "train"))["properties"]
    assert done["status"] == "Succeeded"
    fire_usage_schedules()
    stats = alice.get(jobs_path(sub, "train") + "/stats")
    assert stats.status_code == 200, stats.text
    totals = stats.json()["totals"]
    assert totals["gpuSeconds"] == done["gpuSeconds"]
    assert totals["billableGpuSeconds"] == done["billableGpuSeconds"]
    assert totals["cost"] == [done["cost"]]  # the job's cost is the sum of its metered windows
    assert bob.get(jobs_path(sub, "train") + "/stats").status_code == 404
    assert json.dumps(totals)  # plain JSON: no Decimal leaked


def test_the_export_of_the_day_bills_a_finished_job_at_its_cost(admin, sub, node):
    import csv
    import gzip
    import io

    import boto3

    from itl_accelerator.wiring import Wiring
    from tests.conftest import BUCKET

    assert admin.put(jobs_path(sub, "billed"), json=job_body(1, 80, workload=sim(seconds=2))).status_code == 201
    done = wait_job(admin, jobs_path(sub, "billed"))["properties"]
    fire_usage_schedules()
    # When every open day up to today is exported (the daily schedule exports up to yesterday; an operator may
    # export today early, as here)
    wiring = Wiring.build()
    billing = wiring.repositories.billing
    today = datetime.now(UTC).date().isoformat()
    while (state := billing.export_day(today)) is None or state.state != "Exported":
        next_day = billing.export_cursor()
        assert next_day is not None
        result = fire("billing-export", day=next_day if next_day <= today else today)
        assert result["days"], result
    manifest = billing.export_day(today)
    data_key, _ = wiring.billing_export.object_keys(today)
    body = boto3.client("s3").get_object(Bucket=BUCKET, Key=data_key)["Body"].read()
    rows = list(csv.DictReader(io.StringIO(gzip.decompress(body).decode())))
    # Then the job's rows bill exactly its cost
    mine = [
        r
        for r in rows
        if r["ResourceId"].endswith(
            f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/sparkJobs/billed"
        )
    ]
    assert mine and sum(Decimal(r["BilledCost"]) for r in mine) == Decimal(done["cost"]["amount"])
    assert {r["BillingCurrency"] for r in mine} == {"USD"} and manifest is not None and manifest.state == "Exported"


def test_a_name_created_again_starts_without_the_figures_of_the_one_before(admin, caller, sub, node):
    scope = [f"/subscriptions/{sub}"]
    alice = caller([CONSUMER], scope, subject="alice")
    bob = caller([CONSUMER], scope, subject="bob")
    # Given alice's job that ran and was metered, then deleted
    assert alice.put(jobs_path(sub, "reused"), json=job_body(4, 320, workload=sim(seconds=3))).status_code == 201
    assert wait_job(alice, jobs_path(sub, "reused"))["properties"]["status"] == "Succeeded"
    fire_usage_schedules()
    assert alice.get(jobs_path(sub, "reused") + "/stats").json()["totals"]["gpuSeconds"] > 0
    assert alice.delete(jobs_path(sub, "reused")).status_code == 200
    # When bob submits a job of the same name, it runs, and the schedules run
    assert bob.put(jobs_path(sub, "reused"), json=job_body(1, 80, workload=sim(seconds=2))).status_code == 201
    mine = wait_job(bob, jobs_path(sub, "reused"))["properties"]
    fire_usage_schedules()
    # Then bob's stats are his job's alone: none of alice's usage or cost
    totals = bob.get(jobs_path(sub, "reused") + "/stats").json()["totals"]
    assert (totals["gpuSeconds"], totals["cost"]) == (mine["gpuSeconds"], [mine["cost"]]), (totals, mine)


def test_a_node_registered_again_for_another_supplier_shows_none_of_the_earnings_before(admin, caller, sub, node):
    scope = [f"/subscriptions/{sub}"]
    first, second = (caller([SUPPLIER], scope, subject=s) for s in ("supplier-1", "supplier-2"))
    assert admin.put(jobs_path(sub, "paid"), json=job_body(2, 160, workload=sim(seconds=2))).status_code == 201
    assert wait_job(admin, jobs_path(sub, "paid"))["properties"]["status"] == "Succeeded"
    fire_usage_schedules()
    assert first.get(node + "/stats").json()["totals"]["cost"], "supplier-1 earned from the job"
    # When the node is deleted and registered again under its name for supplier-2
    assert admin.delete(node).status_code == 200
    body = {**SEED_NODE, "properties": {**SEED_NODE["properties"], "owner": "supplier-2"}}
    assert admin.post(nodes_path(sub), json=body).status_code == 201
    # Then supplier-2 sees a node with no earnings yet, and supplier-1 no longer sees the node's stats
    totals = second.get(node + "/stats").json()["totals"]
    assert (totals["gpuSeconds"], totals["cost"]) == (0, []), totals
    assert first.get(node + "/stats").status_code == 403
