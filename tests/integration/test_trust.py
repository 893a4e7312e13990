"""Trust (issue 14): what a hostile supplier, a nosy consumer and a racing client can no longer do — change the
terms a running allocation is billed by, read another user's job through its operation, read workload secrets,
read the earnings of a node's previous owner — and state a user sees that is now right (an operation Running while
its job runs, a cancel under way). Each case has the value a user should see."""

from __future__ import annotations

import json
import time
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest

from tests.conftest import CONSUMER, SUPPLIER, node_body, nodes_path
from tests.integration.instance_helpers import relative, wait_for
from tests.integration.test_bad_input import assert_refused
from tests.integration.test_jobs import job_body, jobs_path, sim, wait_job

pytestmark = pytest.mark.usefixtures("schedules")

GREEDY = "greedy"
RD1_PRICING = {"currency": "USD", "pricePerGpuHour": 3.6, "billingIncrementSeconds": 1, "minimumBillableSeconds": 0}


@pytest.fixture
def rd1(admin: Any, sub: str) -> str:
    """Node ``rd1``: 8 GPUs at 3.60 USD per GPU-hour, billed per second, owned by the supplier ``greedy``."""
    body = node_body()
    body["properties"] = {**body["properties"], "owner": GREEDY, "pricing": RD1_PRICING}
    assert admin.put(nodes_path(sub, name="rd1"), json=body).status_code == 201
    return nodes_path(sub, name="rd1")


@pytest.fixture
def held_jobs(dgx: Any) -> Any:
    """The DGX simulator holding every job Running until the test releases it (``dgx.config.hold_jobs = False``)."""
    dgx.config.hold_jobs = True
    yield dgx
    dgx.config.hold_jobs = False


# ------------------------------------------------------------------------------------------------ locked terms
@pytest.mark.parametrize(
    "new_terms",
    [
        {"billingIncrementSeconds": 3600, "minimumBillableSeconds": 3600},
        {"currency": "EUR"},
        {"pricePerGpuHour": 360},
    ],
    ids=["rounding", "currency", "price"],
)
def test_a_supplier_changing_its_terms_mid_run_does_not_reprice_the_running_job(caller, sub, rd1, held_jobs, new_terms):
    consumer = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="carol")
    greedy = caller([SUPPLIER], [f"/subscriptions/{sub}"], subject=GREEDY)
    # Given a consumer's job of 8 GPUs running on rd1 (3.60 USD per GPU-hour, per second)
    assert consumer.put(jobs_path(sub, "train"), json=job_body(8, 640, workload=sim(seconds=1))).status_code == 201
    running = wait_job(consumer, jobs_path(sub, "train"), ("Running",))
    locked = running["properties"]["billingTerms"]
    assert {k: locked[k] for k in RD1_PRICING} == RD1_PRICING and locked["lockedAt"]
    # When the node's owner changes its terms while the job runs (accepted: new allocations get them)
    changed = greedy.patch(rd1, json={"properties": {"pricing": new_terms}})
    assert changed.status_code == 200, changed.text
    # (let go once it has run two whole seconds of the provider's clock, which bills in whole seconds from its
    # startedAt: a fast machine could otherwise start and end it within one second, 0 GPU-seconds to compare)
    started = datetime.fromisoformat(running["properties"]["startedAt"].replace("Z", "+00:00")).timestamp()
    wait_for(lambda: time.time() >= started + 2, timeout=30, interval=0.1, what="two seconds of the job's run")
    held_jobs.config.hold_jobs = False
    done = wait_job(consumer, jobs_path(sub, "train"))
    # Then the job is billed by the terms it started under: every GPU-second at 3.60 USD per GPU-hour, in USD
    props = done["properties"]
    assert props["status"] == "Succeeded" and props["billingTerms"] == locked
    assert props["billableGpuSeconds"] == props["gpuSeconds"] > 0
    expected = (Decimal(props["gpuSeconds"]) * Decimal("3.6") / 3600).quantize(Decimal("0.000001"))
    assert props["cost"] == {"amount": format(expected, "f"), "currency": "USD"}
    # And a job placed after the change locks the new terms
    assert consumer.put(jobs_path(sub, "next"), json=job_body(1, 80, workload=sim(seconds=0.2))).status_code == 201
    after = wait_job(consumer, jobs_path(sub, "next"))["properties"]["billingTerms"]
    assert {k: after[k] for k in new_terms} == new_terms


def test_an_instance_locks_the_terms_of_its_node_when_it_is_accepted(admin, sub, rd1):
    created = admin.put(rd1 + "/sparkOllamaInstances/llm", json={"properties": {"model": "mistral:7b", "gpus": 1,
                                                                                  "memoryGb": 80}})  # fmt: skip
    assert created.status_code == 201, created.text
    terms = created.json()["properties"]["billingTerms"]
    assert {k: terms[k] for k in RD1_PRICING} == RD1_PRICING
    assert admin.patch(rd1, json={"properties": {"pricing": {"pricePerGpuHour": 9.5}}}).status_code == 200
    shown = admin.get(rd1 + "/sparkOllamaInstances/llm").json()["properties"]["billingTerms"]
    assert shown == terms


@pytest.mark.parametrize(
    ("pricing", "target"),
    [
        ({"pricePerGpuHour": None}, "properties.pricing.pricePerGpuHour"),
        ({"pricePerAcceleratorHour": None}, "properties.pricing.pricePerAcceleratorHour"),
        ({"currency": None}, "properties.pricing.currency"),
        ({"billingIncrementSeconds": None}, "properties.pricing.billingIncrementSeconds"),
        ({"currency": "ABC"}, "properties.pricing.currency"),
        ({"currency": "usd"}, "properties.pricing.currency"),
        ({"currency": "XXX"}, "properties.pricing.currency"),
        ({"minimumBillableSeconds": 86400}, "properties.pricing.minimumBillableSeconds"),
        ({"minimumBillableSeconds": 3601}, "properties.pricing.minimumBillableSeconds"),
        ({"billingIncrementSeconds": 3601}, "properties.pricing.billingIncrementSeconds"),
        ({"billingIncrementSeconds": 0}, "properties.pricing.billingIncrementSeconds"),
    ],
)
def test_pricing_that_is_null_unknown_or_out_of_bounds_is_refused_naming_the_field(admin, sub, rd1, pricing, target):
    before = admin.get(rd1).json()
    refused = admin.patch(rd1, json={"properties": {"pricing": pricing}})
    error = assert_refused(refused, 400, "InvalidRequestContent")
    assert target in json.dumps(error), error
    assert admin.get(rd1).json() == before  # nothing was written
    # and the same terms in a PUT body are refused the same way (a null included)
    body = node_body()
    body["properties"] = {**body["properties"], "pricing": {**RD1_PRICING, **pricing}}
    assert_refused(admin.put(nodes_path(sub, name="other"), json=body), 400, "InvalidRequestContent")
    assert admin.get(nodes_path(sub, name="other")).status_code == 404


def test_a_null_pricing_object_is_refused_and_real_currencies_are_accepted(admin, sub, rd1):
    assert_refused(admin.patch(rd1, json={"properties": {"pricing": None}}), 400, "InvalidRequestContent")
    for currency in ("EUR", "JPY", "CHF"):
        response = admin.patch(rd1, json={"properties": {"pricing": {"currency": currency}}})
        assert response.status_code == 200 and response.json()["properties"]["pricing"]["currency"] == currency


# ------------------------------------------------------------------------------------------------ operations
def test_another_consumers_job_operations_are_as_missing_as_an_unknown_id(caller, sub, rd1, held_jobs):
    bob = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="bob")
    carol = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="carol")
    workload = {**sim(seconds=1), "env": {"HF_TOKEN": "hf_secret_bob"}}
    accepted = bob.post(jobs_path(sub), json={"name": "bobs", "requested_gpus": 1, "requested_memory_gb": 80,
                                              "workload": workload})  # fmt: skip
    assert accepted.status_code == 202
    status_url = relative(accepted.headers["Azure-AsyncOperation"])
    result_url = relative(accepted.headers["Location"])
    unknown = status_url.rsplit("/", 1)[0] + "/00000000-0000-0000-0000-000000000000"
    for path in (status_url, result_url, unknown, unknown.replace("operationStatuses", "operationResults")):
        refused = carol.get(path)
        error = assert_refused(refused, 404, "ResourceNotFound")
        assert "hf_secret_bob" not in refused.text and "bob" not in error["message"]
    # the job's owner reads both
    assert bob.get(status_url).status_code == 200
    held_jobs.config.hold_jobs = False
    wait_job(bob, jobs_path(sub, "bobs"))
    result = bob.get(result_url)
    assert result.status_code == 200 and result.json()["properties"]["workload"]["env"] == {"HF_TOKEN": "hf_secret_bob"}


def test_a_jobs_operation_is_running_while_the_job_runs(admin, sub, rd1, held_jobs):
    accepted = admin.put(jobs_path(sub, "op"), json=job_body(workload=sim(seconds=1)))
    status_url = relative(accepted.headers["Azure-AsyncOperation"])
    wait_job(admin, jobs_path(sub, "op"), ("Running",))
    assert admin.get(status_url).json()["status"] == "Running"
    held_jobs.config.hold_jobs = False
    wait_job(admin, jobs_path(sub, "op"))
    assert admin.get(status_url).json()["status"] == "Succeeded"


def test_a_cancel_under_way_shows_on_the_job_until_it_ends(admin, sub, rd1):
    assert admin.put(jobs_path(sub, "c"), json=job_body(workload=sim(forever=True))).status_code == 201
    wait_job(admin, jobs_path(sub, "c"), ("Running",))
    canceled = admin.post(jobs_path(sub, "c") + "/cancel")
    assert canceled.status_code == 202
    body = canceled.json()
    assert body["properties"]["cancelRequestedBy"] == "admin-1" and body["properties"]["cancelRequestedAt"]
    assert "Cancel requested by admin-1" in body["properties"]["statusReason"]
    done = wait_job(admin, jobs_path(sub, "c"))
    assert done["properties"]["status"] == "Canceled"


# ------------------------------------------------------------------------------------------------ secrets
def test_workload_secrets_are_write_only_and_env_values_are_the_submitters(caller, admin, sub, rd1, dgx, aws):
    carol = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="carol")
    greedy = caller([SUPPLIER], [f"/subscriptions/{sub}"], subject=GREEDY)
    workload = {**sim(seconds=0.5), "env": {"MODE": "fast"}, "secretEnv": {"HF_TOKEN": "hf_secret_carol"}}
    accepted = carol.put(jobs_path(sub, "s"), json=job_body(workload=workload))
    assert accepted.status_code == 201
    # The submitter sees her env values and her secret's name, never its value — not even in the 201
    for shown in (accepted.json(), wait_job(carol, jobs_path(sub, "s"))):
        assert shown["properties"]["workload"]["env"]["MODE"] == "fast"
        assert shown["properties"]["workload"]["secretEnv"] == {"HF_TOKEN": "******"}
    # The node's supplier sees the job with every value masked
    seen = greedy.get(jobs_path(sub, "s")).json()["properties"]["workload"]
    assert seen["env"]["MODE"] == "******" and seen["secretEnv"] == {"HF_TOKEN": "******"}
    assert "fast" not in greedy.get(jobs_path(sub)).text
    # The DGX Platform got the secret as an environment variable
    (platform_job,) = [j for j in dgx.jobs.values() if f"/subscriptions/{sub}/" in j["name"]]
    assert platform_job["env"]["HF_TOKEN"] == "hf_secret_carol" and platform_job["env"]["MODE"] == "fast"
    # No audit item holds either value
    events = admin.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/auditEvents").json()["value"]
    assert events and "hf_secret_carol" not in json.dumps(events) and '"fast"' not in json.dumps(events)
    # And the job sent back as it was shown (the secret as its mask) is the same job (200), not a new one
    shown = wait_job(carol, jobs_path(sub, "s"))
    shown["properties"].pop("status")  # set by the provider (a submission may only say Pending)
    again = carol.put(jobs_path(sub, "s"), json=shown)
    assert again.status_code == 200, again.text


# ------------------------------------------------------------------------------------------------ earnings
def test_a_nodes_earnings_stay_with_the_supplier_that_earned_them(caller, admin, sub, rd1):
    from itl_accelerator.settings import get_settings
    from itl_accelerator.wiring import Wiring

    scope = [f"/subscriptions/{sub}"]
    greedy = caller([SUPPLIER], scope, subject=GREEDY)
    heir = caller([SUPPLIER], scope, subject="heir")
    # Given a job run on rd1 while greedy owned it
    assert admin.put(jobs_path(sub, "earn"), json=job_body(2, 160, workload=sim(seconds=1))).status_code == 201
    cost = wait_job(admin, jobs_path(sub, "earn"))["properties"]["cost"]
    # When the node is handed to another supplier and the usage is metered and rolled up
    assert admin.patch(rd1, json={"properties": {"owner": "heir"}}).status_code == 200
    wiring = Wiring.build(get_settings())
    wait_for(lambda: not wiring.usage_sync.run().meters, what="the usage sync to settle")
    wiring.usage_rollups.run()
    # Then the previous owner still reads what it earned, and the new owner none of it
    assert greedy.get(rd1 + "/stats").json()["totals"]["cost"] == [cost]
    assert heir.get(rd1 + "/stats").json()["totals"]["cost"] == []
    # and the admin sees the node's whole figures; a supplier that never owned it is refused
    assert admin.get(rd1 + "/stats").json()["totals"]["cost"] == [cost]
    assert_refused(caller([SUPPLIER], scope, subject="stranger").get(rd1 + "/stats"), 403, "AuthorizationFailed")


# ------------------------------------------------------------------------------------------------ names
def test_a_job_name_another_user_holds_is_taken_and_nothing_else_is_learned(caller, sub, rd1):
    bob = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="bob")
    carol = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="carol")
    assert bob.put(jobs_path(sub, "Shared"), json=job_body(workload=sim(forever=True))).status_code == 201
    # Job names are unique in a resource group (ARM): Carol learns the name is taken, by any form of the request,
    # and nothing about the job — not its casing, its state or its etag
    for response in (
        carol.put(jobs_path(sub, "shared"), json=job_body()),
        carol.put(jobs_path(sub, "shared"), json=job_body(), headers={"If-None-Match": "*"}),
        carol.put(jobs_path(sub, "shared"), json=job_body(), headers={"If-Match": '"nope"'}),
        carol.post(jobs_path(sub), json={"name": "shared", "requested_gpus": 1, "requested_memory_gb": 80}),
    ):
        error = assert_refused(response, 409, "Conflict")
        assert "Shared" not in error["message"] and "bob" not in response.text
    assert_refused(carol.get(jobs_path(sub, "shared")), 404, "ResourceNotFound")
    assert carol.delete(jobs_path(sub, "shared")).status_code == 204
    assert [j["name"] for j in bob.get(jobs_path(sub)).json()["value"]] == ["Shared"]
    bob.post(jobs_path(sub, "Shared") + "/cancel")
    wait_job(bob, jobs_path(sub, "Shared"))


# ------------------------------------------------------------------------------------------------ understood requests
def test_an_unknown_query_parameter_is_refused_naming_it(admin, sub, rd1):
    for path in (jobs_path(sub) + "?submitedBy=bob", rd1 + "?$expand=all", rd1 + "/stats?hour=2"):
        error = assert_refused(admin.get(path), 400, "InvalidParameter")
        assert error["target"] == path.split("?")[1].split("=")[0] and "not known here" in error["message"]


def test_a_query_parameter_given_twice_is_refused_naming_it(admin, sub, rd1):
    """``hours=1&hours=2`` answered as if only the last counted (issue 26: the API's rule the MCP endpoint follows)."""
    for path, name in ((rd1 + "/stats?hours=1&hours=2", "hours"), (jobs_path(sub) + "?$top=1&$top=5", "$top")):
        error = assert_refused(admin.get(path), 400, "InvalidParameter")
        assert error["target"] == name and "more than once" in error["message"]


def test_submitted_by_in_camel_case_filters_as_the_seeds_spelling_does(caller, admin, sub, rd1):
    bob = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="bob")
    assert bob.put(jobs_path(sub, "b"), json=job_body(workload=sim(seconds=0.2))).status_code == 201
    assert admin.put(jobs_path(sub, "a"), json=job_body(workload=sim(seconds=0.2))).status_code == 201
    for query in ("?submittedBy=bob", "?submitted_by=bob"):
        assert [j["name"] for j in admin.get(jobs_path(sub) + query).json()["value"]] == ["b"]
    assert_refused(admin.get(jobs_path(sub) + "?submittedBy=bob&submitted_by=admin-1"), 400, "InvalidParameter")
    wait_job(admin, jobs_path(sub, "a"))
    wait_job(admin, jobs_path(sub, "b"))


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x", "requestedGpus": 1, "requested_gpus": 4, "requested_memory_gb": 80},
        {"name": "x", "requested_gpus": 1, "requested_memory_gb": 80, "requestedMemoryGb": 160},
    ],
)
def test_one_property_given_twice_with_different_values_is_refused(admin, sub, rd1, body):
    error = assert_refused(admin.post(jobs_path(sub), json=body), 400, "InvalidRequestContent")
    assert "same property with different values" in error["message"]
    assert admin.get(jobs_path(sub, "x")).status_code == 404


def test_an_instance_property_given_twice_with_different_values_is_refused(admin, sub, rd1):
    body = {"name": "i", "model": "mistral:7b", "gpus": 1, "memory_gb": 80, "memoryGb": 160}
    error = assert_refused(admin.post(rd1 + "/sparkOllamaInstances", json=body), 400, "InvalidRequestContent")
    assert "same property with different values" in error["message"]


@pytest.mark.parametrize("key", ["team\u202egnp.exe", "a\u200bb", "x\u2066y"])
def test_a_tag_with_an_invisible_direction_character_is_refused_showing_it_escaped(admin, sub, rd1, key):
    error = assert_refused(admin.patch(rd1, json={"tags": {key: "v"}}), 400, "InvalidRequestContent")
    assert key not in error["message"] and key.encode("unicode_escape").decode() in error["message"]
    assert "''" not in error["message"]


def test_a_cancel_outside_the_callers_scope_names_the_job_not_the_route(caller, sub, rd1):
    stranger = caller([CONSUMER], ["/subscriptions/sub-elsewhere"], subject="eve")
    error = assert_refused(stranger.post(jobs_path(sub, "j") + "/cancel"), 404, "ResourceNotFound")
    assert "ITL.Accelerator/sparkJobs/j" in error["message"] and "cancel" not in error["message"]


def test_a_resource_group_scoped_admin_is_told_its_scope_is_why_it_cannot_read_the_audit_trail(caller, sub, rd1):
    scoped = caller(["itl-accelerator-admin"], [f"/subscriptions/{sub}/resourceGroups/rg1"], subject="rg-admin")
    error = assert_refused(
        scoped.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/auditEvents"), 403, "AuthorizationFailed"
    )
    assert "holds only resource groups" in error["message"] and "whole subscription" in error["message"]


def test_fixed_path_segments_match_whatever_their_casing(make_token, gateway_url, sub):
    import httpx

    token = make_token("admin-1", ["itl-accelerator-admin"], [f"/subscriptions/{sub}"])
    canonical = f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes"
    with httpx.Client(base_url=gateway_url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as http:
        # Given a node created through a path in another casing (ARM: these segments are case-insensitive)
        created = http.put(
            f"/SUBSCRIPTIONS/{sub}/resourcegroups/rg1/providers/itl.accelerator/SPARKNODES/dgx-1", json=node_body()
        )
        assert created.status_code == 201, created.text
        assert created.json()["id"] == f"{canonical}/dgx-1"  # the id is canonical
        # Then every casing reads and lists it, with the query as sent; its ETag works across spellings
        for path in (canonical, canonical.lower(), canonical.upper().replace(sub.upper(), sub)):
            listed = http.get(path, params={"$top": "5"})
            assert listed.status_code == 200, (path, listed.text)
            assert [n["name"] for n in listed.json()["value"]] == ["dgx-1"]
        etag = created.headers["ETag"]
        stale = http.patch(canonical.lower() + "/dgx-1", json={"tags": {}}, headers={"If-Match": '"stale"'})
        assert stale.status_code == 412
        assert (
            http.patch(canonical.lower() + "/dgx-1", json={"tags": {}}, headers={"If-Match": etag}).status_code == 200
        )
        # And a path no route matches in any casing is 404, with or without a token, as before
        for headers in ({}, {"Authorization": ""}):
            missing = http.get(f"/subscriptions/{sub}/providers/itl.accelerator/unknownThings", headers=headers)
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "NotFound"
        # And a token is still required for a route reached in another casing
        anonymous = httpx.get(f"{gateway_url}{canonical.lower()}", timeout=30)
        assert anonymous.status_code == 401
