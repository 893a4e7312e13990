"""Given the seed's requests verbatim, when sent through API Gateway (emulated from template.yaml), then they
behave as the original service described."""

from __future__ import annotations

from tests.conftest import SEED_NODE, nodes_path


def test_seed_create_then_get_list_update_delete(admin, sub):
    # Given the seed's POST body
    created = admin.post(nodes_path(sub), json=SEED_NODE)
    # Then the node is created with an ARM envelope
    assert created.status_code == 201, created.text
    node = created.json()
    assert node["id"] == f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1"
    assert node["type"] == "ITL.Accelerator/sparkNodes"
    assert node["properties"]["provisioningState"] == "Succeeded"
    assert node["properties"]["capacity"] == {
        "totalAccelerators": 8,
        "allocatedAccelerators": 0,
        "freeAccelerators": 8,
        "totalGpus": 8,
        "allocatedGpus": 0,
        "freeGpus": 8,
        "totalMemoryGb": 640,
        "allocatedMemoryGb": 0,
        "freeMemoryGb": 640,
    }
    assert created.headers["ETag"] == node["etag"]

    # When listed and read
    listed = admin.get(nodes_path(sub))
    assert listed.status_code == 200
    assert [n["name"] for n in listed.json()["value"]] == ["dgx-1"]
    assert listed.json()["nextLink"] is None
    got = admin.get(nodes_path(sub, name="dgx-1"))
    assert got.status_code == 200 and got.json() == node

    # When its pricing is updated with PUT (the seed's "Update node pricing")
    body = {k: v for k, v in SEED_NODE.items() if k != "name"}
    body["properties"] = {**body["properties"], "pricing": {"currency": "USD", "pricePerGpuHour": 3.1}}
    replaced = admin.put(nodes_path(sub, name="dgx-1"), json=body)
    assert replaced.status_code == 200
    assert replaced.json()["properties"]["pricing"]["pricePerGpuHour"] == 3.1
    assert replaced.json()["etag"] != node["etag"]

    # When deleted, then it is gone
    assert admin.delete(nodes_path(sub, name="dgx-1")).status_code == 200
    assert admin.get(nodes_path(sub, name="dgx-1")).status_code == 404
    assert admin.get(nodes_path(sub)).json() == {"value": [], "nextLink": None}
