"""Refusals reveal nothing: an operation of a resource group the caller cannot see answers exactly like an
unknown one, and a supplier's forbidden patch is refused (and audited) before its values are judged."""

from __future__ import annotations

from tests.conftest import ADMIN, SEED_NODE, SUPPLIER, nodes_path
from tests.integration.instance_helpers import SEED_INSTANCE, instances_path, relative, wait_state


def test_operation_of_a_hidden_group_is_indistinguishable_from_an_unknown_one(admin, caller, sub, dgx):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    status_url = relative(admin.post(instances_path(sub), json=SEED_INSTANCE).json()["status_url"])
    other_group = caller([ADMIN], [f"/subscriptions/{sub}/resourceGroups/rg2"])
    hidden = other_group.get(status_url)
    unknown = other_group.get(status_url.rsplit("/", 1)[0] + "/00000000-0000-0000-0000-000000000000")
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.json()["error"]["code"] == unknown.json()["error"]["code"]
    assert "rg1" not in hidden.json()["error"]["message"]
    assert hidden.json()["error"]["message"].replace(status_url.rsplit("/", 1)[1], "ID") == unknown.json()["error"][
        "message"
    ].replace("00000000-0000-0000-0000-000000000000", "ID")
    wait_state(admin, instances_path(sub, name="instance-1"), ("Succeeded",))


def test_supplier_patch_outside_pricing_is_403_even_when_invalid(admin, caller, sub):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    stranger = caller([SUPPLIER], [f"/subscriptions/{sub}"], subject="bob")
    refused = stranger.patch(nodes_path(sub, name="dgx-1"), json={"sku": {"capacity": 64}})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "AuthorizationFailed"
    owner = caller([SUPPLIER], [f"/subscriptions/{sub}"], subject="owner-123")
    assert owner.patch(nodes_path(sub, name="dgx-1"), json={"sku": {"capacity": 64}}).status_code == 403
    # an owner's bad price is still a 400: it may touch pricing, the value is wrong
    bad_price = owner.patch(nodes_path(sub, name="dgx-1"), json={"properties": {"pricing": {"pricePerGpuHour": -1}}})
    assert bad_price.status_code == 400
    denied = admin.get(
        f"/subscriptions/{sub}/providers/ITL.Accelerator/auditEvents", params={"startTime": "2020-01-01T00:00:00Z"}
    ).json()["value"]
    assert [e["actor_id"] for e in denied if e["outcome"] == "Denied"] == ["bob", "owner-123"]
