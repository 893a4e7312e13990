"""The ARM resource-provider contract (/work/shared/ARM_CONTRACT.md), line by line, for the synchronous
``sparkNodes`` resource: lines 1-10 and 19-27 (11-18 are long-running operations, not built yet).

Every request goes through the API Gateway emulator of template.yaml (real authorizer, real handlers), so what is
asserted here is what a client of the deployed API sees.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import ADMIN, CONSUMER, SEED_NODE, node_body, nodes_path

NODE_TYPE = "ITL.Accelerator/sparkNodes"
PASCAL_CASE = re.compile(r"^[A-Z][A-Za-z0-9]*$")
#: The 400 codes ARM_CONTRACT.md line 22 allows.
BAD_REQUEST_CODES = {
    "InvalidRequestContent",
    "InvalidParameter",
    "InvalidResourceName",
    "MissingApiVersionParameter",
    "UnsupportedApiVersionValue",
}

#: Audit query for every event of a subscription (the default time range is all time).
AUDIT_ALL = {"$top": 1000}


# ------------------------------------------------------------------------------------------------ helpers
def assert_arm_error(response: Any, status: int, code: str | set[str] | None = None) -> dict[str, Any]:
    """The response is ``status`` with an ARM error body ``{"error": {"code", "message", "target"?, "details"?}}``
    (and ``code`` when given: one code, or a set of acceptable codes). Returns the ``error`` object."""
    assert response.status_code == status, f"expected {status}, got {response.status_code}: {response.text}"
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error.get("code"), str) and PASCAL_CASE.match(error["code"]), error
    assert isinstance(error.get("message"), str) and error["message"].strip(), error
    assert set(error) <= {"code", "message", "target", "details", "additionalInfo"}, error
    if "target" in error:
        assert error["target"] is None or isinstance(error["target"], str), error
    if "details" in error:
        assert isinstance(error["details"], list), error
        for detail in error["details"]:
            assert isinstance(detail.get("code"), str) and isinstance(detail.get("message"), str), detail
    if isinstance(code, str):
        assert error["code"] == code, error
    elif code is not None:
        assert error["code"] in code, error
    assert response.headers.get("x-ms-request-id"), "every response carries x-ms-request-id"
    return error


def node_id(sub: str, rg: str, name: str) -> str:
    return f"/subscriptions/{sub}/resourceGroups/{rg}/providers/ITL.Accelerator/sparkNodes/{name}"


def sub_nodes_path(sub: str) -> str:
    return f"/subscriptions/{sub}/providers/ITL.Accelerator/sparkNodes"


def relative(url: str) -> str:
    """An absolute nextLink → path + query, to call through the test client."""
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}" if parts.query else parts.path


def create(admin: Any, sub: str, name: str, rg: str = "rg1", **overrides: Any) -> dict[str, Any]:
    response = admin.put(nodes_path(sub, rg, name), json=node_body(**overrides))
    assert response.status_code == 201, response.text
    return response.json()


def collect_pages(caller: Any, first_path: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Follow ``nextLink`` from ``first_path``; returns (all items, every page body)."""
    items: list[dict[str, Any]] = []
    pages: list[dict[str, Any]] = []
    path: str | None = first_path
    while path is not None:
        response = caller.get(path)
        assert response.status_code == 200, response.text
        page = response.json()
        pages.append(page)
        items.extend(page["value"])
        link = page.get("nextLink")
        assert link != "", "nextLink is never the empty string"
        path = relative(link) if link else None
        assert len(pages) < 50, "paging does not terminate"
    return items, pages


def audit_count(admin: Any, sub: str) -> int:
    response = admin.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/auditEvents", params=AUDIT_ALL)
    assert response.status_code == 200, response.text
    return len(response.json()["value"])


# ------------------------------------------------------------------------------------------------ 1-6: create / update
def test_line_01_put_new_201_existing_200_full_replace(admin, sub):
    # Given no node, when PUT with tags and an interconnect
    path = nodes_path(sub, name="dgx-1")
    first = admin.put(path, json=node_body(tags={"env": "dev", "team": "gpu"}))
    # Then 201 and the body is what was sent plus id, name, type, provisioningState
    assert first.status_code == 201, first.text
    node = first.json()
    assert node["id"] == node_id(sub, "rg1", "dgx-1")
    assert node["name"] == "dgx-1"
    assert node["type"] == NODE_TYPE
    assert node["location"] == SEED_NODE["location"]
    assert node["sku"] == SEED_NODE["sku"]
    assert node["tags"] == {"env": "dev", "team": "gpu"}
    assert node["properties"]["provisioningState"] == "Succeeded"
    sent_props = SEED_NODE["properties"]
    assert node["properties"]["owner"] == sent_props["owner"]
    assert node["properties"]["hardwareSpecs"] == sent_props["hardwareSpecs"]
    assert node["properties"]["pricing"]["pricePerGpuHour"] == 2.5
    assert node["properties"]["pricing"]["currency"] == "USD"

    # When PUT again with fewer fields (no tags, no interconnect, other price)
    body = node_body()
    body["properties"]["hardwareSpecs"] = {
        k: v for k, v in body["properties"]["hardwareSpecs"].items() if k != "interconnect"
    }
    body["properties"]["pricing"] = {"currency": "EUR", "pricePerGpuHour": 3}
    second = admin.put(path, json=body)
    # Then 200 and the resource is fully replaced: what was left out is gone
    assert second.status_code == 200, second.text
    replaced = second.json()
    assert replaced["tags"] == {}
    assert "interconnect" not in replaced["properties"]["hardwareSpecs"]
    assert replaced["properties"]["pricing"]["currency"] == "EUR"
    assert replaced["properties"]["pricing"]["pricePerGpuHour"] == 3
    assert admin.get(path).json() == replaced


def test_line_02_identical_put_200_no_second_write(admin, sub):
    # Given a node
    path = nodes_path(sub, name="dgx-1")
    created = create(admin, sub, "dgx-1")
    events_before = audit_count(admin, sub)
    # When the identical PUT is repeated
    again = admin.put(path, json=node_body())
    # Then 200, and nothing was written: same etag, same lastModifiedAt, no new audit event
    assert again.status_code == 200, again.text
    assert again.json()["etag"] == created["etag"]
    assert again.headers["ETag"] == created["etag"]
    assert again.json()["systemData"] == created["systemData"]
    assert again.json() == created
    assert audit_count(admin, sub) == events_before


def test_line_02_get_body_put_back_is_identical(admin, sub):
    # Given a node, when its GET body (with read-only id/type/etag/systemData/capacity/provisioningState) is PUT back
    path = nodes_path(sub, name="dgx-1")
    created = create(admin, sub, "dgx-1")
    got = admin.get(path).json()
    again = admin.put(path, json=got)
    # Then it is an identical PUT: 200, nothing changed
    assert again.status_code == 200, again.text
    assert again.json() == created


def test_line_03_body_name_mismatch_400(admin, sub):
    # Given a PUT whose body names another node
    response = admin.put(nodes_path(sub, name="dgx-1"), json=node_body(name="dgx-2"))
    # Then 400, and nothing was created under either name
    error = assert_arm_error(response, 400, BAD_REQUEST_CODES)
    assert error.get("target") in (None, "name")
    assert admin.get(nodes_path(sub, name="dgx-1")).status_code == 404
    assert admin.get(nodes_path(sub, name="dgx-2")).status_code == 404


def test_line_03_body_name_equal_accepted(admin, sub):
    # Given a PUT whose body repeats the URL's name (in another casing)
    response = admin.put(nodes_path(sub, name="dgx-1"), json=node_body(name="DGX-1"))
    # Then it is accepted; the resource is named after the URL
    assert response.status_code == 201, response.text
    assert response.json()["name"] == "dgx-1"


def test_line_03_provisioning_state_equal_ignored(admin, sub):
    # Given a node, when PUT with provisioningState equal to the current one
    create(admin, sub, "dgx-1")
    body = node_body()
    body["properties"] = {**body["properties"], "provisioningState": "Succeeded"}
    response = admin.put(nodes_path(sub, name="dgx-1"), json=body)
    # Then it is ignored
    assert response.status_code == 200, response.text
    assert response.json()["properties"]["provisioningState"] == "Succeeded"


@pytest.mark.parametrize("state", ["Failed", "Deleting", "Accepted"])
def test_line_03_provisioning_state_different_400(admin, sub, state):
    # Given a node, when PUT with a different provisioningState
    created = create(admin, sub, "dgx-1")
    body = node_body()
    body["properties"] = {**body["properties"], "provisioningState": state}
    response = admin.put(nodes_path(sub, name="dgx-1"), json=body)
    # Then 400 and the node is unchanged
    assert_arm_error(response, 400, BAD_REQUEST_CODES)
    assert admin.get(nodes_path(sub, name="dgx-1")).json() == created


def test_line_03_provisioning_state_different_on_create_400(admin, sub):
    # Given no node, when PUT sets provisioningState to something else than what a create produces
    body = node_body()
    body["properties"] = {**body["properties"], "provisioningState": "Failed"}
    response = admin.put(nodes_path(sub, name="dgx-1"), json=body)
    # Then 400 and nothing is created
    assert_arm_error(response, 400, BAD_REQUEST_CODES)
    assert admin.get(nodes_path(sub, name="dgx-1")).status_code == 404


def test_line_04_location_change_400(admin, sub):
    # Given a node in us-east-1
    created = create(admin, sub, "dgx-1")
    # When PUT moves it to eu-west-1, or PATCH does
    put = admin.put(nodes_path(sub, name="dgx-1"), json=node_body(location="eu-west-1"))
    patch = admin.patch(nodes_path(sub, name="dgx-1"), json={"location": "eu-west-1"})
    # Then 400 both times and the node stays where it was
    assert_arm_error(put, 400, BAD_REQUEST_CODES)
    assert_arm_error(patch, 400, BAD_REQUEST_CODES)
    assert admin.get(nodes_path(sub, name="dgx-1")).json() == created


@pytest.mark.parametrize("again", ["eastus", "EastUS", "east us", "EAST  US"])
def test_line_04_location_compared_ignoring_case_and_spaces(admin, sub, again):
    # Given a node created in "East US"
    create(admin, sub, "dgx-1", location="East US")
    # When PUT again with the same location written differently
    response = admin.put(nodes_path(sub, name="dgx-1"), json=node_body(location=again))
    # Then it is not a change of location
    assert response.status_code == 200, response.text


def test_line_05_patch_merges_properties_tags_replace_null_removes(admin, sub):
    # Given a node with two tags and an interconnect
    path = nodes_path(sub, name="dgx-1")
    created = create(admin, sub, "dgx-1", tags={"env": "dev", "team": "gpu"})
    # When PATCHed: one pricing field, one hardware field removed with null, availability set, one tag sent
    patch = {
        "properties": {
            "pricing": {"pricePerGpuHour": 2.75},
            "hardwareSpecs": {"interconnect": None},
            "availability": "Cordoned",
        },
        "tags": {"env": "prod"},
    }
    response = admin.patch(path, json=patch)
    # Then 200 with the merged resource
    assert response.status_code == 200, response.text
    node = response.json()
    props = node["properties"]
    assert props["pricing"]["pricePerGpuHour"] == 2.75
    assert props["pricing"]["currency"] == "USD", "merge inside properties keeps unsent siblings"
    assert props["availability"] == "Cordoned"
    assert "interconnect" not in props["hardwareSpecs"], "null removes an optional key"
    assert props["hardwareSpecs"] == {
        k: v for k, v in created["properties"]["hardwareSpecs"].items() if k != "interconnect"
    }
    assert props["owner"] == created["properties"]["owner"]
    assert node["tags"] == {"env": "prod"}, "tags replace the whole set"
    assert node["sku"] == created["sku"]
    assert node["location"] == created["location"]
    assert node["etag"] != created["etag"]
    assert node["systemData"]["createdAt"] == created["systemData"]["createdAt"]
    # And a GET shows the same resource
    assert admin.get(path).json() == node


def test_line_05_patch_without_tags_keeps_tags(admin, sub):
    # Given a node with tags, when a PATCH does not mention tags
    create(admin, sub, "dgx-1", tags={"env": "dev"})
    response = admin.patch(nodes_path(sub, name="dgx-1"), json={"properties": {"availability": "Maintenance"}})
    # Then the tags are kept
    assert response.status_code == 200, response.text
    assert response.json()["tags"] == {"env": "dev"}
    assert response.json()["properties"]["availability"] == "Maintenance"


def test_line_05_patch_missing_404(admin, sub):
    # Given no node, when PATCHed
    response = admin.patch(nodes_path(sub, name="ghost"), json={"properties": {"availability": "Cordoned"}})
    # Then 404 ResourceNotFound, and the PATCH did not create it
    assert_arm_error(response, 404, "ResourceNotFound")
    assert admin.get(nodes_path(sub, name="ghost")).status_code == 404


def test_line_06_post_creates_same_as_put_and_existing_409(admin, sub):
    # Given the seed's POST body and the same node created by PUT under another name
    posted = admin.post(nodes_path(sub), json={**SEED_NODE, "tags": {"env": "dev"}})
    put = admin.put(nodes_path(sub, name="dgx-2"), json=node_body(tags={"env": "dev"}))
    # Then both are 201 and the resources are alike but for their name and id
    assert posted.status_code == 201, posted.text
    assert put.status_code == 201, put.text
    volatile = {"name", "id", "etag", "systemData"}
    assert {k: v for k, v in posted.json().items() if k not in volatile} == {
        k: v for k, v in put.json().items() if k not in volatile
    }
    assert posted.json()["id"] == node_id(sub, "rg1", "dgx-1")
    assert posted.headers["ETag"] == posted.json()["etag"]

    # When the same name is POSTed again (also in another casing)
    for name in ("dgx-1", "DGX-1"):
        again = admin.post(nodes_path(sub), json={**SEED_NODE, "name": name, "sku": {"name": "DGX-H100-8GPU"}})
        # Then 409 Conflict and the node is unchanged
        assert_arm_error(again, 409, "Conflict")
    assert admin.get(nodes_path(sub, name="dgx-1")).json() == posted.json()


# ------------------------------------------------------------------------------------------------ 7-10: read / delete
def test_line_07_get_missing_404_resource_not_found(admin, sub):
    # Given no node, when read
    response = admin.get(nodes_path(sub, name="ghost"))
    # Then 404 ResourceNotFound
    assert_arm_error(response, 404, "ResourceNotFound")


@pytest.mark.parametrize("collection", ["resourceGroup", "subscription"])
def test_line_07_empty_collection_200_empty_value(admin, sub, collection):
    # Given a subscription without nodes, when listed
    path = nodes_path(sub) if collection == "resourceGroup" else sub_nodes_path(sub)
    response = admin.get(path)
    # Then 200 {"value": []} with no nextLink
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["value"] == []
    assert body.get("nextLink") is None
    assert set(body) <= {"value", "nextLink"}


def test_line_08_delete_existing_200_missing_204_empty(admin, sub):
    # Given a node
    create(admin, sub, "dgx-1")
    # When deleted: 200
    first = admin.delete(nodes_path(sub, name="dgx-1"))
    assert first.status_code == 200, first.text
    # When deleted again, or a name that never existed: 204 with an empty body
    for name in ("dgx-1", "never-was"):
        again = admin.delete(nodes_path(sub, name=name))
        assert again.status_code == 204, again.text
        assert again.content == b""
        assert again.headers.get("x-ms-request-id")


def test_line_09_after_delete_get_404_and_lists_leave_it_out(admin, sub):
    # Given two nodes in two resource groups
    create(admin, sub, "dgx-1")
    create(admin, sub, "dgx-2", rg="rg2")
    create(admin, sub, "dgx-3")
    # When one is deleted
    assert admin.delete(nodes_path(sub, name="dgx-1")).status_code == 200
    # Then GET → 404 and neither list shows it
    assert_arm_error(admin.get(nodes_path(sub, name="dgx-1")), 404, "ResourceNotFound")
    assert [n["name"] for n in admin.get(nodes_path(sub)).json()["value"]] == ["dgx-3"]
    assert sorted(n["name"] for n in admin.get(sub_nodes_path(sub)).json()["value"]) == ["dgx-2", "dgx-3"]


def test_line_10_paging_top_2_over_5_nodes_follows_next_link(admin, sub):
    # Given five nodes
    names = [f"node-{i}" for i in range(5)]
    for name in names:
        create(admin, sub, name)
    # When listed two at a time, following nextLink
    items, pages = collect_pages(admin, nodes_path(sub) + "?$top=2")
    # Then every node is seen exactly once, pages hold at most two, and the last page has no nextLink
    assert sorted(n["name"] for n in items) == names
    assert len(items) == len(names)
    assert [len(p["value"]) for p in pages[:3]] == [2, 2, 1]
    assert all(len(p["value"]) <= 2 for p in pages)
    assert pages[-1].get("nextLink") is None
    for page in pages[:-1]:
        link = page["nextLink"]
        parts = urlsplit(link)
        assert parts.scheme in ("http", "https") and parts.netloc, f"nextLink is absolute: {link}"
        assert parts.path == nodes_path(sub)
        query = parse_qs(parts.query)
        assert query.get("$skipToken") and query["$skipToken"][0]
        assert "api-version" not in query or query["api-version"] == ["2026-11-01"]


def test_line_10_next_link_keeps_api_version(admin, sub):
    # Given three nodes, when listed one at a time with an api-version
    for i in range(3):
        create(admin, sub, f"n{i}")
    response = admin.get(nodes_path(sub), params={"$top": 1, "api-version": "2026-11-01"})
    # Then the nextLink carries the api-version too and works
    link = response.json()["nextLink"]
    assert parse_qs(urlsplit(link).query)["api-version"] == ["2026-11-01"]
    items, _ = collect_pages(admin, relative(link))
    assert len(items) == 2


def test_line_10_list_by_subscription_across_resource_groups(admin, sub):
    # Given nodes in two resource groups
    create(admin, sub, "a-1", rg="rg-a")
    create(admin, sub, "a-2", rg="rg-a")
    create(admin, sub, "b-1", rg="rg-b")
    # When listed by resource group
    in_a = admin.get(nodes_path(sub, "rg-a")).json()
    in_b = admin.get(nodes_path(sub, "rg-b")).json()
    # Then each group holds its own
    assert sorted(n["name"] for n in in_a["value"]) == ["a-1", "a-2"]
    assert [n["name"] for n in in_b["value"]] == ["b-1"]
    # When listed by subscription (also paged)
    everything = admin.get(sub_nodes_path(sub)).json()
    paged, _ = collect_pages(admin, sub_nodes_path(sub) + "?$top=2")
    # Then all three, with their resource group in the id
    expected = sorted([node_id(sub, "rg-a", "a-1"), node_id(sub, "rg-a", "a-2"), node_id(sub, "rg-b", "b-1")])
    assert sorted(n["id"] for n in everything["value"]) == expected
    assert sorted(n["id"] for n in paged) == expected
    assert everything.get("nextLink") is None


def test_line_10_list_items_equal_get(admin, sub):
    # Given a node, when listed, then the list item is the GET body
    create(admin, sub, "dgx-1")
    listed = admin.get(nodes_path(sub)).json()["value"]
    assert listed == [admin.get(nodes_path(sub, name="dgx-1")).json()]


# ------------------------------------------------------------------------------------------------ 19-21: envelope
def test_line_19_id_full_arm_path_and_type(admin, sub):
    # Given a node created with an api-version on the URL
    response = admin.put(nodes_path(sub, "rg1", "dgx-1"), params={"api-version": "2026-11-01"}, json=node_body())
    node = response.json()
    # Then its id is the full ARM path, without host or api-version, and type is the provider type
    assert node["id"] == node_id(sub, "rg1", "dgx-1")
    assert "api-version" not in node["id"] and "://" not in node["id"]
    assert node["type"] == NODE_TYPE
    # And the same in GET and both lists
    assert admin.get(nodes_path(sub, name="dgx-1")).json()["id"] == node["id"]
    assert [n["id"] for n in admin.get(nodes_path(sub)).json()["value"]] == [node["id"]]
    assert [n["type"] for n in admin.get(sub_nodes_path(sub)).json()["value"]] == [NODE_TYPE]


def _iso(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_line_20_system_data_fields_and_read_only(caller, sub):
    # Given two admins of the subscription
    alice = caller([ADMIN], [f"/subscriptions/{sub}"], subject="alice")
    bob = caller([ADMIN], [f"/subscriptions/{sub}"], subject="bob")
    # When alice creates a node, sending a forged systemData
    forged = {
        "createdBy": "mallory",
        "createdByType": "Key",
        "createdAt": "2000-01-01T00:00:00Z",
        "lastModifiedBy": "mallory",
        "lastModifiedByType": "Key",
        "lastModifiedAt": "2000-01-01T00:00:00Z",
    }
    created = alice.put(nodes_path(sub, name="dgx-1"), json=node_body(systemData=forged))
    assert created.status_code == 201, created.text
    data = created.json()["systemData"]
    # Then systemData has all six fields, set by the provider
    assert set(data) == {
        "createdBy",
        "createdByType",
        "createdAt",
        "lastModifiedBy",
        "lastModifiedByType",
        "lastModifiedAt",
    }
    assert data["createdBy"] == data["lastModifiedBy"] == "alice"
    assert data["createdByType"] == data["lastModifiedByType"] == "User"
    assert _iso(data["createdAt"]).year >= 2025
    assert _iso(data["createdAt"]).tzinfo is not None
    # When bob changes it
    updated = bob.patch(nodes_path(sub, name="dgx-1"), json={"tags": {"by": "bob"}, "systemData": forged})
    assert updated.status_code == 200, updated.text
    after = updated.json()["systemData"]
    # Then created* stay alice's and lastModified* are bob's, later
    assert after["createdBy"] == "alice" and after["createdAt"] == data["createdAt"]
    assert after["lastModifiedBy"] == "bob" and after["lastModifiedByType"] == "User"
    assert _iso(after["lastModifiedAt"]) >= _iso(data["lastModifiedAt"])


def test_line_21_etag_body_equals_header(admin, sub):
    # Given a node, when created, read and patched
    path = nodes_path(sub, name="dgx-1")
    responses = [admin.put(path, json=node_body()), admin.get(path), admin.patch(path, json={"tags": {"a": "b"}})]
    # Then each response's ETag header equals its body's etag
    for response in responses:
        assert response.status_code in (200, 201), response.text
        assert response.json()["etag"]
        assert response.headers["ETag"] == response.json()["etag"]
    # And a change gives a new etag
    assert responses[2].json()["etag"] != responses[0].json()["etag"]


def test_line_21_if_match_star_on_missing_412(admin, sub):
    # Given no node, when PUT with If-Match: *
    response = admin.put(nodes_path(sub, name="dgx-1"), json=node_body(), headers={"If-Match": "*"})
    # Then 412 and nothing is created
    assert_arm_error(response, 412, "PreconditionFailed")
    assert admin.get(nodes_path(sub, name="dgx-1")).status_code == 404


def test_line_21_stale_if_match_412_current_200(admin, sub):
    # Given a node that changed after its first etag was read
    path = nodes_path(sub, name="dgx-1")
    stale = create(admin, sub, "dgx-1")["etag"]
    current = admin.patch(path, json={"tags": {"v": "2"}}).json()["etag"]
    # When written with the stale etag (PUT, PATCH, DELETE)
    body = node_body(tags={"v": "3"})
    assert_arm_error(admin.put(path, json=body, headers={"If-Match": stale}), 412, "PreconditionFailed")
    assert_arm_error(
        admin.patch(path, json={"tags": {"v": "3"}}, headers={"If-Match": stale}), 412, "PreconditionFailed"
    )
    assert_arm_error(admin.delete(path, headers={"If-Match": stale}), 412, "PreconditionFailed")
    # Then nothing changed; with the current etag the write succeeds
    assert admin.get(path).json()["tags"] == {"v": "2"}
    ok = admin.put(path, json=body, headers={"If-Match": current})
    assert ok.status_code == 200, ok.text
    assert ok.json()["tags"] == {"v": "3"}


def test_line_21_if_none_match_star_on_existing_412(admin, sub):
    # Given no node, If-None-Match: * creates it
    path = nodes_path(sub, name="dgx-1")
    first = admin.put(path, json=node_body(), headers={"If-None-Match": "*"})
    assert first.status_code == 201, first.text
    # When the same PUT with If-None-Match: * is repeated on the existing node
    again = admin.put(path, json=node_body(tags={"changed": "yes"}), headers={"If-None-Match": "*"})
    # Then 412 and the node is unchanged
    assert_arm_error(again, 412, "PreconditionFailed")
    assert admin.get(path).json() == first.json()


# ------------------------------------------------------------------------------------------------ 22-25: errors, headers
def test_line_22_every_error_has_arm_body(admin, gateway, sub):
    # Given requests that fail in different ways
    create(admin, sub, "dgx-1")
    failures = [
        (admin.get(nodes_path(sub, name="ghost")), 404),
        (admin.get(nodes_path(sub, name="-bad")), 400),
        (admin.put(nodes_path(sub, name="dgx-2"), json={"location": "x"}), 400),
        (
            admin.put(
                nodes_path(sub, name="dgx-2"), content=b"{not json", headers={"Content-Type": "application/json"}
            ),
            400,
        ),
        (admin.get(nodes_path(sub), params={"api-version": "1999-01-01"}), 400),
        (admin.post(nodes_path(sub), json=SEED_NODE), 409),
        (admin.put(nodes_path(sub, name="dgx-3"), json=node_body(), headers={"If-Match": "*"}), 412),
        (gateway.get(nodes_path(sub)), 401),
        (admin.put(nodes_path(sub, name="dgx-2"), json={**node_body(), "pad": "x" * 70_000}), 413),
    ]
    # Then each is {"error": {"code", "message", ...}} with a PascalCase code and the request id
    for response, status in failures:
        assert_arm_error(response, status)


def test_line_22_forbidden_is_authorization_failed(caller, admin, sub):
    # Given a consumer (read-only) of the subscription and an existing node
    create(admin, sub, "dgx-1")
    consumer = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="carol")
    # When it tries to write, then 403 AuthorizationFailed
    assert_arm_error(
        consumer.put(nodes_path(sub, name="dgx-1"), json=node_body(tags={"x": "y"})), 403, "AuthorizationFailed"
    )
    assert_arm_error(consumer.delete(nodes_path(sub, name="dgx-1")), 403, "AuthorizationFailed")


def test_line_23_request_id_on_every_response(admin, gateway, sub):
    # Given successful and failing requests of every kind, including ones the gateway refuses itself
    path = nodes_path(sub, name="dgx-1")
    responses = [
        admin.put(path, json=node_body()),
        admin.get(path),
        admin.get(nodes_path(sub)),
        admin.patch(path, json={"tags": {}}),
        admin.delete(path),
        admin.delete(path),  # 204
        admin.get(path),  # 404
        admin.put(nodes_path(sub, name="#bad".replace("#", "%23")), json=node_body()),  # 400
        gateway.get(path),  # 401 from the gateway (no token)
        gateway.get(path, headers={"Authorization": "Bearer not-a-token"}),  # 401 from the authorizer
        admin.get("/no/such/route"),  # gateway: no route
        admin.get("/providers/ITL.Accelerator/operations"),
    ]
    # Then every one carries a distinct x-ms-request-id
    ids = []
    for response in responses:
        value = response.headers.get("x-ms-request-id")
        assert value, f"{response.request.method} {response.request.url} → {response.status_code} lacks x-ms-request-id"
        ids.append(value)
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize("kind", ["success", "error"])
def test_line_23_correlation_ids_echoed(admin, sub, kind):
    # Given a client sending both correlation headers
    create(admin, sub, "dgx-1")
    headers = {"x-ms-correlation-request-id": "corr-123", "X-Correlation-Id": "itl-corr-456"}
    name = "dgx-1" if kind == "success" else "ghost"
    # When it reads a node (found or not)
    response = admin.get(nodes_path(sub, name=name), headers=headers)
    # Then both are echoed
    assert response.status_code == (200 if kind == "success" else 404)
    assert response.headers.get("x-ms-correlation-request-id") == "corr-123"
    assert response.headers.get("X-Correlation-Id") == "itl-corr-456"


def test_line_23_itl_correlation_id_alone_is_echoed(admin, sub):
    # Given a client (the ITL Control Plane) sending only X-Correlation-Id
    response = admin.get(nodes_path(sub), headers={"X-Correlation-Id": "cp-789"})
    # Then it is echoed, and ARM's correlation header carries the same value
    assert response.status_code == 200
    assert response.headers.get("X-Correlation-Id") == "cp-789"
    assert response.headers.get("x-ms-correlation-request-id") == "cp-789"


def test_line_23_correlation_id_reaches_audit(admin, sub):
    # Given a write carrying a correlation id
    admin.put(nodes_path(sub, name="dgx-1"), json=node_body(), headers={"x-ms-correlation-request-id": "corr-audit"})
    # Then the audit event of that write records it (it is logged)
    events = admin.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/auditEvents", params=AUDIT_ALL).json()["value"]
    assert [e["correlation_id"] for e in events if e["resource_name"] == "dgx-1"] == ["corr-audit"]


def test_line_24_names_case_insensitive_keep_last_casing(admin, sub):
    # Given a node created as dgx-1
    created = create(admin, sub, "dgx-1")
    # When read as DGX-1 (and its resource group as RG1), then it is found
    got = admin.get(nodes_path(sub, "RG1", "DGX-1"))
    assert got.status_code == 200, got.text
    assert got.json()["etag"] == created["etag"]
    # When PUT as DGX-1: it is the same node (200, not 201) and now carries the new casing
    renamed = admin.put(nodes_path(sub, name="DGX-1"), json=node_body())
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["name"] == "DGX-1"
    assert renamed.json()["id"].endswith("/sparkNodes/DGX-1")
    # And every read shows the casing last supplied, with still only one node
    assert admin.get(nodes_path(sub, name="dgx-1")).json()["name"] == "DGX-1"
    assert [n["name"] for n in admin.get(nodes_path(sub)).json()["value"]] == ["DGX-1"]
    # And it is deleted by any casing
    assert admin.delete(nodes_path(sub, name="Dgx-1")).status_code == 200
    assert admin.get(nodes_path(sub, name="DGX-1")).status_code == 404


@pytest.mark.parametrize(
    "name", ["-leading-dash", "trailing.", "a" * 64, "has%20space", "semi%3Bcolon", "hash%23tag", "n%C3%B6de"]
)
def test_line_24_invalid_names_400_invalid_resource_name(admin, sub, name):
    # Given an invalid node name, when PUT, GET or DELETE
    path = nodes_path(sub, name=name)
    for response in (admin.put(path, json=node_body()), admin.get(path), admin.delete(path)):
        # Then 400 InvalidResourceName
        assert_arm_error(response, 400, "InvalidResourceName")


def test_line_24_invalid_name_in_post_body_400(admin, sub):
    # Given the ITL POST form with an invalid name in the body
    response = admin.post(nodes_path(sub), json={**SEED_NODE, "name": "bad name!"})
    # Then 400 InvalidResourceName and nothing is listed
    assert_arm_error(response, 400, "InvalidResourceName")
    assert admin.get(nodes_path(sub)).json()["value"] == []


@pytest.mark.parametrize("version", [None, "2026-11-01"])
def test_line_25_api_version_absent_or_supported_ok(admin, sub, version):
    # Given a request without api-version, or with the supported one
    params = {"api-version": version} if version else {}
    # When a node is created, read and listed
    put = admin.put(nodes_path(sub, name="dgx-1"), params=params, json=node_body())
    get = admin.get(nodes_path(sub, name="dgx-1"), params=params)
    listed = admin.get(nodes_path(sub), params=params)
    # Then all succeed
    assert (put.status_code, get.status_code, listed.status_code) == (201, 200, 200)


@pytest.mark.parametrize("version", ["2020-01-01", "2026-11-01-preview", "latest", "2026-11-1"])
def test_line_25_unknown_api_version_400(admin, sub, version):
    # Given an unknown api-version, when a node is written, read or listed
    params = {"api-version": version}
    responses = [
        admin.put(nodes_path(sub, name="dgx-1"), params=params, json=node_body()),
        admin.get(nodes_path(sub, name="dgx-1"), params=params),
        admin.get(nodes_path(sub), params=params),
        admin.get("/providers/ITL.Accelerator/operations", params=params),
    ]
    # Then each is 400 UnsupportedApiVersionValue, naming the supported version; nothing was created
    for response in responses:
        error = assert_arm_error(response, 400, "UnsupportedApiVersionValue")
        assert "2026-11-01" in error["message"]
    assert admin.get(nodes_path(sub, name="dgx-1")).status_code == 404


def test_line_25_empty_api_version_400(admin, sub):
    # Given api-version present but empty, then 400 MissingApiVersionParameter
    assert_arm_error(admin.get(nodes_path(sub) + "?api-version="), 400, "MissingApiVersionParameter")


# ------------------------------------------------------------------------------------------------ 26-27: provider level
def test_line_26_operations_lists_every_permission_with_display(caller):
    # Given any authenticated caller (a consumer holding no subscription)
    nobody = caller([CONSUMER], [], subject="dave")
    # When the operations are listed
    response = nobody.get("/providers/ITL.Accelerator/operations")
    # Then every permission string is there, each once, with display text
    assert response.status_code == 200, response.text
    entries = response.json()["value"]
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names))
    assert {
        "ITL.Accelerator/sparkNodes/read",
        "ITL.Accelerator/sparkNodes/write",
        "ITL.Accelerator/sparkNodes/delete",
        "ITL.Accelerator/register/action",
    } <= set(names)
    for entry in entries:
        assert entry["name"].startswith("ITL.Accelerator/")
        display = entry["display"]
        for field in ("provider", "resource", "operation", "description"):
            assert isinstance(display.get(field), str) and display[field].strip(), entry
        assert isinstance(entry.get("isDataAction"), bool)
    assert response.json().get("nextLink") is None


def test_line_26_operations_cover_what_is_enforced(admin, caller, sub):
    # Given the permission names the operations list shows
    names = {e["name"] for e in admin.get("/providers/ITL.Accelerator/operations").json()["value"]}
    # When a caller is refused an action
    create(admin, sub, "dgx-1")
    consumer = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="erin")
    refused = consumer.delete(nodes_path(sub, name="dgx-1"))
    # Then the action named in the refusal is one of the listed permissions
    message = assert_arm_error(refused, 403, "AuthorizationFailed")["message"]
    actions = re.findall(r"'(ITL\.Accelerator/[^']+)'", message)
    assert actions and set(actions) <= names, message


@pytest.mark.parametrize("state", ["Registered", "Warned", "Suspended", "Deleted", "Unregistered"])
def test_line_27_subscription_put_state_idempotent(admin, sub, state):
    # Given a subscription, when its state is PUT twice
    first = admin.put(f"/subscriptions/{sub}", json={"state": state})
    second = admin.put(f"/subscriptions/{sub}", json={"state": state})
    # Then both are 200 with the same record, and GET returns it
    assert first.status_code == 200, first.text
    assert second.status_code == 200, second.text
    assert first.json()["state"] == state
    assert second.json() == first.json()
    assert first.json()["id"] == f"/subscriptions/{sub}"
    assert admin.get(f"/subscriptions/{sub}").json() == first.json()


@pytest.mark.parametrize("state", ["Warned", "Suspended"])
def test_line_27_warned_suspended_allow_get_and_delete_only(admin, sub, state):
    # Given two nodes in a subscription that becomes Warned/Suspended
    create(admin, sub, "dgx-1")
    create(admin, sub, "dgx-2")
    assert admin.put(f"/subscriptions/{sub}", json={"state": state}).status_code == 200
    # When nodes are written (PUT new, PUT existing, POST, PATCH), then 409
    writes = [
        admin.put(nodes_path(sub, name="dgx-3"), json=node_body()),
        admin.put(nodes_path(sub, name="dgx-1"), json=node_body(tags={"x": "y"})),
        admin.post(nodes_path(sub), json={**SEED_NODE, "name": "dgx-4"}),
        admin.patch(nodes_path(sub, name="dgx-1"), json={"tags": {"x": "y"}}),
    ]
    for response in writes:
        assert_arm_error(response, 409)
    assert admin.get(nodes_path(sub, name="dgx-3")).status_code == 404
    assert admin.get(nodes_path(sub, name="dgx-1")).json()["tags"] == {}
    # When read and deleted, then it works
    assert admin.get(nodes_path(sub, name="dgx-1")).status_code == 200
    assert sorted(n["name"] for n in admin.get(nodes_path(sub)).json()["value"]) == ["dgx-1", "dgx-2"]
    assert admin.get(sub_nodes_path(sub)).status_code == 200
    assert admin.delete(nodes_path(sub, name="dgx-2")).status_code == 200
    assert admin.get(nodes_path(sub, name="dgx-2")).status_code == 404
    # When Registered again, writes work again
    assert admin.put(f"/subscriptions/{sub}", json={"state": "Registered"}).json()["state"] == "Registered"
    assert admin.put(nodes_path(sub, name="dgx-3"), json=node_body()).status_code == 201
    assert admin.patch(nodes_path(sub, name="dgx-1"), json={"tags": {"x": "y"}}).status_code == 200
    assert admin.post(nodes_path(sub), json={**SEED_NODE, "name": "dgx-4"}).status_code == 201
