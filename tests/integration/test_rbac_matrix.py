"""RBAC x tenancy matrix for sparkNodes, through API Gateway (emulated from template.yaml) and the real handlers.

Rules under test (DESIGN.md, Identity/RBAC/tenancy):

- a target outside the caller's ARM scopes is 404 ``ResourceNotFound`` (its existence is not leaked); a list whose
  scope the caller does not hold is 200 with the out-of-scope nodes left out;
- inside the caller's scopes but without the role's permission: 403 ``AuthorizationFailed``;
- consumers read only; admins do everything; suppliers read, and change only ``properties.pricing`` and
  ``properties.availability`` of nodes whose ``properties.owner`` is their token subject (they cannot create or
  delete, nor touch anything else, nor a node they do not own).

Every matrix cell works on the same data: ``dgx-1`` in ``rg1`` (owned by :data:`SUPPLIER_SUBJECT`) and ``dgx-2`` in
``rg2``, both created by the subscription's admin. Single-resource operations target ``rg1`` (``dgx-1``, or the new
name ``dgx-new`` for creates); "list by resource group" lists ``rg1``. What varies is the scope the caller holds:

==============  ===============================================  ========================================
scope           caller's ``subscriptions`` claim                 relation to the target in ``rg1``
==============  ===============================================  ========================================
own_sub         ``/subscriptions/{sub}``                         in scope (whole subscription)
own_rg          ``/subscriptions/{sub}/resourceGroups/rg1``      in scope (its resource group)
foreign_rg      ``/subscriptions/{sub}/resourceGroups/rg2``      out of scope (same subscription)
foreign_sub     ``/subscriptions/{other subscription}``          out of scope (another tenant)
==============  ===============================================  ========================================
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.conftest import ADMIN, CONSUMER, SEED_NODE, SUPPLIER, node_body, nodes_path

#: The supplier of the matrix owns ``dgx-1`` (the seed body's owner).
SUPPLIER_SUBJECT = SEED_NODE["properties"]["owner"]
SUBJECTS = {CONSUMER: "consumer-1", ADMIN: "admin-2", SUPPLIER: SUPPLIER_SUBJECT}

SCOPES = ("own_sub", "own_rg", "foreign_rg", "foreign_sub")
SCOPE_CLAIMS: dict[str, Callable[[str], list[str]]] = {
    "own_sub": lambda sub: [f"/subscriptions/{sub}"],
    "own_rg": lambda sub: [f"/subscriptions/{sub}/resourceGroups/rg1"],
    "foreign_rg": lambda sub: [f"/subscriptions/{sub}/resourceGroups/rg2"],
    "foreign_sub": lambda sub: [f"/subscriptions/{sub}-other"],
}

NEW_PRICE = 9.99

# ---------------------------------------------------------------------------------------------------------------
# The expected-status table. One row per (role, operation); columns in the order of SCOPES.
# Writes in the matrix change only pricing (PUT replace, PATCH), so the owning supplier may make them; the supplier
# cases that must fail (tags, hardwareSpecs, someone else's node) are the explicit tests below the matrix.
# ---------------------------------------------------------------------------------------------------------------
# fmt: off
EXPECTED_STATUS: dict[tuple[str, str], tuple[int, int, int, int]] = {
    #                                     own_sub  own_rg  foreign_rg  foreign_sub
    (CONSUMER, "POST create"):             (403,    403,    404,        404),
    (CONSUMER, "PUT create"):              (403,    403,    404,        404),
    (CONSUMER, "PUT replace"):             (403,    403,    404,        404),
    (CONSUMER, "GET"):                     (200,    200,    404,        404),
    (CONSUMER, "PATCH"):                   (403,    403,    404,        404),
    (CONSUMER, "DELETE"):                  (403,    403,    404,        404),
    (CONSUMER, "list by resource group"):  (200,    200,    200,        200),
    (CONSUMER, "list by subscription"):    (200,    200,    200,        200),

    (ADMIN, "POST create"):                (201,    201,    404,        404),
    (ADMIN, "PUT create"):                 (201,    201,    404,        404),
    (ADMIN, "PUT replace"):                (200,    200,    404,        404),
    (ADMIN, "GET"):                        (200,    200,    404,        404),
    (ADMIN, "PATCH"):                      (200,    200,    404,        404),
    (ADMIN, "DELETE"):                     (200,    200,    404,        404),
    (ADMIN, "list by resource group"):     (200,    200,    200,        200),
    (ADMIN, "list by subscription"):       (200,    200,    200,        200),

    (SUPPLIER, "POST create"):             (403,    403,    404,        404),
    (SUPPLIER, "PUT create"):              (403,    403,    404,        404),
    (SUPPLIER, "PUT replace"):             (200,    200,    404,        404),
    (SUPPLIER, "GET"):                     (200,    200,    404,        404),
    (SUPPLIER, "PATCH"):                   (200,    200,    404,        404),
    (SUPPLIER, "DELETE"):                  (403,    403,    404,        404),
    (SUPPLIER, "list by resource group"):  (200,    200,    200,        200),
    (SUPPLIER, "list by subscription"):    (200,    200,    200,        200),
}
# fmt: on

#: What a 200 list shows (node names), whatever the role: only nodes inside the caller's scopes.
LIST_VISIBLE: dict[tuple[str, str], list[str]] = {
    ("list by resource group", "own_sub"): ["dgx-1"],
    ("list by resource group", "own_rg"): ["dgx-1"],
    ("list by resource group", "foreign_rg"): [],
    ("list by resource group", "foreign_sub"): [],
    ("list by subscription", "own_sub"): ["dgx-1", "dgx-2"],
    ("list by subscription", "own_rg"): ["dgx-1"],
    ("list by subscription", "foreign_rg"): ["dgx-2"],
    ("list by subscription", "foreign_sub"): [],
}

ERROR_CODES = {403: "AuthorizationFailed", 404: "ResourceNotFound"}


def _short(role: str) -> str:
    return role.removeprefix("itl-accelerator-")


CASES = [
    pytest.param(role, operation, scope, statuses[i], id=f"{_short(role)}-{operation.replace(' ', '_')}-{scope}")
    for (role, operation), statuses in EXPECTED_STATUS.items()
    for i, scope in enumerate(SCOPES)
]


# --------------------------------------------------------------------------------------------------- helpers
def seed_nodes(admin: Any, sub: str) -> None:
    """dgx-1 in rg1 (owned by the matrix supplier) and dgx-2 in rg2, created by the subscription's admin."""
    for rg, name in (("rg1", "dgx-1"), ("rg2", "dgx-2")):
        response = admin.put(nodes_path(sub, rg, name), json=node_body())
        assert response.status_code == 201, response.text


def snapshot(admin: Any, sub: str) -> dict[str, dict[str, Any]]:
    """Every node of the subscription as its admin sees it, by name."""
    listed = admin.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/sparkNodes")
    assert listed.status_code == 200, listed.text
    return {n["name"]: n for n in listed.json()["value"]}


def repriced_body() -> dict[str, Any]:
    body = node_body()
    body["properties"]["pricing"] = {**body["properties"]["pricing"], "pricePerGpuHour": NEW_PRICE}
    return body


def new_node_body() -> dict[str, Any]:
    body = node_body()
    body["properties"]["owner"] = SUPPLIER_SUBJECT
    return body


def send(operation: str, who: Any, sub: str) -> Any:
    """Perform ``operation`` as ``who`` against the matrix target."""
    if operation == "POST create":
        return who.post(nodes_path(sub), json={"name": "dgx-new", **new_node_body()})
    if operation == "PUT create":
        return who.put(nodes_path(sub, name="dgx-new"), json=new_node_body())
    if operation == "PUT replace":
        return who.put(nodes_path(sub, name="dgx-1"), json=repriced_body())
    if operation == "GET":
        return who.get(nodes_path(sub, name="dgx-1"))
    if operation == "PATCH":
        return who.patch(
            nodes_path(sub, name="dgx-1"), json={"properties": {"pricing": {"pricePerGpuHour": NEW_PRICE}}}
        )
    if operation == "DELETE":
        return who.delete(nodes_path(sub, name="dgx-1"))
    if operation == "list by resource group":
        return who.get(nodes_path(sub))
    if operation == "list by subscription":
        return who.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/sparkNodes")
    raise AssertionError(f"unknown operation {operation}")


def expected_after(operation: str, before: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Node name → price per GPU-hour once ``operation`` has succeeded."""
    prices = {name: n["properties"]["pricing"]["pricePerGpuHour"] for name, n in before.items()}
    if operation in ("POST create", "PUT create"):
        prices["dgx-new"] = SEED_NODE["properties"]["pricing"]["pricePerGpuHour"]
    elif operation in ("PUT replace", "PATCH"):
        prices["dgx-1"] = NEW_PRICE
    elif operation == "DELETE":
        del prices["dgx-1"]
    return prices


# --------------------------------------------------------------------------------------------------- the matrix
def test_matrix_covers_every_role_operation_and_scope():
    """The table is complete: 3 roles x 8 operations, 4 scopes each (a missing row would silently shrink the matrix)."""
    operations = {op for _, op in EXPECTED_STATUS}
    assert {role for role, _ in EXPECTED_STATUS} == {CONSUMER, ADMIN, SUPPLIER}
    assert len(operations) == 8
    assert len(EXPECTED_STATUS) == 24
    assert {op for op, _ in LIST_VISIBLE} == {op for op in operations if op.startswith("list")}


@pytest.mark.parametrize(("role", "operation", "scope", "expected"), CASES)
def test_rbac_matrix(role, operation, scope, expected, sub, admin, caller):
    # Given dgx-1 (rg1, owned by the supplier's subject) and dgx-2 (rg2), created by the subscription's admin
    seed_nodes(admin, sub)
    before = snapshot(admin, sub)
    # And a caller holding only `role` in `scope`
    who = caller([role], SCOPE_CLAIMS[scope](sub), subject=SUBJECTS[role])

    # When it performs the operation
    response = send(operation, who, sub)

    # Then the status is the table's
    assert response.status_code == expected, response.text
    if expected in ERROR_CODES:
        assert response.json()["error"]["code"] == ERROR_CODES[expected]
    # And a list shows exactly the nodes inside the caller's scopes
    if operation.startswith("list"):
        assert sorted(n["name"] for n in response.json()["value"]) == LIST_VISIBLE[(operation, scope)]
        assert response.json()["nextLink"] is None
    if operation == "GET" and expected == 200:
        assert response.json() == before["dgx-1"]

    # And the data changed only if the operation succeeded, and then exactly as asked
    after = snapshot(admin, sub)
    if expected < 300 and operation not in ("GET", "list by resource group", "list by subscription"):
        prices = {name: n["properties"]["pricing"]["pricePerGpuHour"] for name, n in after.items()}
        assert prices == expected_after(operation, before)
    else:
        assert after == before


# --------------------------------------------------------------------------------------------------- suppliers
@pytest.fixture
def owned_node(admin, sub) -> dict[str, Any]:
    """dgx-1 in rg1, owned by SUPPLIER_SUBJECT, as created by the admin."""
    created = admin.put(nodes_path(sub, name="dgx-1"), json=node_body())
    assert created.status_code == 201, created.text
    return created.json()


@pytest.fixture
def supplier(caller, sub):
    """The owner of dgx-1, a supplier of the whole subscription."""
    return caller([SUPPLIER], [f"/subscriptions/{sub}"], subject=SUPPLIER_SUBJECT)


def test_owner_supplier_changes_pricing_with_patch(owned_node, supplier, admin, sub):
    # Given a supplier that owns dgx-1
    # When it patches the node's price
    response = supplier.patch(
        nodes_path(sub, name="dgx-1"), json={"properties": {"pricing": {"pricePerGpuHour": 3.75}}}
    )
    # Then the price changes, and nothing else
    assert response.status_code == 200, response.text
    got = admin.get(nodes_path(sub, name="dgx-1")).json()
    assert got["properties"]["pricing"]["pricePerGpuHour"] == 3.75
    assert got["etag"] != owned_node["etag"]
    expected = copy.deepcopy(owned_node)
    # one price under its two names (the seed's pricePerGpuHour and any kind's pricePerAcceleratorHour)
    expected["properties"]["pricing"]["pricePerGpuHour"] = 3.75
    expected["properties"]["pricing"]["pricePerAcceleratorHour"] = 3.75
    volatile = ("etag", "systemData")
    assert {k: v for k, v in got.items() if k not in volatile} == {
        k: v for k, v in expected.items() if k not in volatile
    }
    assert got["systemData"]["lastModifiedBy"] == SUPPLIER_SUBJECT


def test_owner_supplier_changes_availability_with_patch(owned_node, supplier, admin, sub):
    # Given a supplier that owns dgx-1 (Available)
    assert owned_node["properties"]["availability"] == "Available"
    # When it cordons the node
    response = supplier.patch(nodes_path(sub, name="dgx-1"), json={"properties": {"availability": "Cordoned"}})
    # Then the node is cordoned
    assert response.status_code == 200, response.text
    assert admin.get(nodes_path(sub, name="dgx-1")).json()["properties"]["availability"] == "Cordoned"


def test_owner_supplier_changes_pricing_and_availability_with_put(owned_node, supplier, admin, sub):
    # Given a supplier that owns dgx-1
    body = node_body()
    body["properties"]["pricing"]["pricePerGpuHour"] = 4.2
    body["properties"]["availability"] = "Maintenance"
    # When it PUTs the node back with only pricing and availability changed
    response = supplier.put(nodes_path(sub, name="dgx-1"), json=body)
    # Then both change
    assert response.status_code == 200, response.text
    got = admin.get(nodes_path(sub, name="dgx-1")).json()
    assert got["properties"]["pricing"]["pricePerGpuHour"] == 4.2
    assert got["properties"]["availability"] == "Maintenance"


FORBIDDEN_SUPPLIER_PATCHES = {
    "tags": {"tags": {"env": "prod"}},
    "hardwareSpecs": {"properties": {"hardwareSpecs": {"interconnect": "PCIe"}}},
    "owner": {"properties": {"owner": "someone-else"}},
    "sku": {"sku": {"name": "DGX-H200-8GPU"}},
    "pricing and tags together": {"properties": {"pricing": {"pricePerGpuHour": 1.0}}, "tags": {"env": "prod"}},
}


@pytest.mark.parametrize("patch", list(FORBIDDEN_SUPPLIER_PATCHES.values()), ids=list(FORBIDDEN_SUPPLIER_PATCHES))
def test_owner_supplier_cannot_change_anything_but_pricing_and_availability(owned_node, supplier, admin, sub, patch):
    # Given a supplier that owns dgx-1
    # When it patches something other than pricing or availability
    response = supplier.patch(nodes_path(sub, name="dgx-1"), json=patch)
    # Then it is refused and the node is unchanged
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "AuthorizationFailed"
    assert admin.get(nodes_path(sub, name="dgx-1")).json() == owned_node


def test_owner_supplier_cannot_change_hardware_specs_with_put(owned_node, supplier, admin, sub):
    # Given a supplier that owns dgx-1
    body = node_body()
    body["properties"]["hardwareSpecs"]["cpuCores"] = 56
    # When it PUTs the node with different hardware specs
    response = supplier.put(nodes_path(sub, name="dgx-1"), json=body)
    # Then it is refused and the node is unchanged
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "AuthorizationFailed"
    assert admin.get(nodes_path(sub, name="dgx-1")).json() == owned_node


@pytest.mark.parametrize("method", ["PATCH", "PUT"])
def test_non_owner_supplier_cannot_change_pricing(owned_node, caller, admin, sub, method):
    # Given a supplier of the subscription that does not own dgx-1
    other = caller([SUPPLIER], [f"/subscriptions/{sub}"], subject="supplier-not-owner")
    # When it changes the node's price
    if method == "PATCH":
        response = other.patch(
            nodes_path(sub, name="dgx-1"), json={"properties": {"pricing": {"pricePerGpuHour": 0.5}}}
        )
    else:
        body = node_body()
        body["properties"]["pricing"]["pricePerGpuHour"] = 0.5
        response = other.put(nodes_path(sub, name="dgx-1"), json=body)
    # Then it is refused and the price is unchanged
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "AuthorizationFailed"
    assert admin.get(nodes_path(sub, name="dgx-1")).json() == owned_node


def test_supplier_cannot_register_a_node_even_one_it_would_own(supplier, admin, sub):
    # Given a supplier of the subscription
    # When it registers a node naming itself the owner
    response = supplier.put(nodes_path(sub, name="dgx-mine"), json=new_node_body())
    # Then it is refused and no node exists
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "AuthorizationFailed"
    assert admin.get(nodes_path(sub, name="dgx-mine")).status_code == 404


# --------------------------------------------------------------------------------------------------- list scoping
def test_resource_group_scoped_caller_listing_by_subscription_sees_only_its_group(admin, caller, sub):
    # Given nodes in three resource groups of the subscription
    for rg, name in (("rg1", "a-1"), ("rg2", "b-1"), ("rg1", "a-2"), ("rg3", "c-1"), ("rg2", "b-2"), ("rg1", "a-3")):
        assert admin.put(nodes_path(sub, rg, name), json=node_body()).status_code == 201
    # And a consumer holding only rg1
    consumer = caller([CONSUMER], [f"/subscriptions/{sub}/resourceGroups/rg1"], subject="consumer-rg1")
    # When it lists the whole subscription, one node per page, following nextLink to the end
    seen: list[str] = []
    path: str | None = f"/subscriptions/{sub}/providers/ITL.Accelerator/sparkNodes?$top=1"
    for _ in range(20):
        assert path is not None
        page = consumer.get(path)
        assert page.status_code == 200, page.text
        seen += [n["name"] for n in page.json()["value"]]
        link = page.json()["nextLink"]
        if link is None:
            break
        parts = urlsplit(link)
        path = f"{parts.path}?{parts.query}"
    else:
        pytest.fail("nextLink never ended")
    # Then it sees exactly rg1's nodes, each once
    assert sorted(seen) == ["a-1", "a-2", "a-3"]
    # And the subscription's admin sees all six
    assert len(admin.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/sparkNodes").json()["value"]) == 6
