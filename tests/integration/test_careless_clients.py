"""What a careless or hostile client sends must never earn a 5xx — least of all after its write was stored — and
the order of judgement is ARM's: authenticate → authorise → validate → apply. Each case here was once a 5xx, a
400 where ARM answers 403, or a change a role may not make; each asserts the right answer and what is stored."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import ADMIN, CONSUMER, SEED_NODE, SUPPLIER, TABLE, node_body, nodes_path
from tests.integration.instance_helpers import instances_path
from tests.integration.test_bad_input import assert_refused

PROVIDER = "/providers/ITL.Accelerator"


def audit_events(admin: Any, sub: str) -> list[dict[str, Any]]:
    response = admin.get(f"/subscriptions/{sub}{PROVIDER}/auditEvents", params={"$top": 1000})
    assert response.status_code == 200, response.text
    return response.json()["value"]


def raw(caller: Any, method: str, path: str, content: bytes | str, **headers: str) -> Any:
    """Send ``content`` as the body, byte for byte (no client-side JSON encoding)."""
    return caller.request(method, path, content=content, headers={"Content-Type": "application/json", **headers})


# ------------------------------------------------------------------------------------------------ order of judgement
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", "sparkNodes/n1", {"location": 5}),
        ("PUT", "sparkNodes/n1", "{not json"),
        ("POST", "sparkNodes", {"name": "n1", "sku": "x"}),
        ("PATCH", "sparkNodes/dgx-1", {"properties": [1]}),
        ("PUT", "sparkNodes/dgx-1/sparkOllamaInstances/i1", {"properties": {"gpus": "two"}}),
        ("POST", "sparkNodes/dgx-1/sparkOllamaInstances", {"name": "i1", "model": "", "gpus": -1}),
        ("PUT", "sparkNodes/n1", '{"location": NaN}'),
    ],
)
def test_a_consumer_writing_gets_403_whatever_its_body(method, path, body, caller, admin, sub):
    # Given a consumer of the subscription (it may read, never write) and an existing node
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    consumer = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="carol")
    base = f"/subscriptions/{sub}/resourceGroups/rg1{PROVIDER}/"
    # When it sends an invalid body to a write route
    content = body if isinstance(body, str) else json.dumps(body)
    response = raw(consumer, method, base + path, content)
    # Then the answer is about its permission, not its body — and the refusal is audited
    assert_refused(response, 403, "AuthorizationFailed")
    assert any(e["actor_id"] == "carol" and e["outcome"] == "Denied" for e in audit_events(admin, sub))


def test_a_subscription_put_by_a_non_admin_is_403_before_its_body_is_read(caller, sub):
    consumer = caller([CONSUMER], [f"/subscriptions/{sub}"])
    assert_refused(raw(consumer, "PUT", f"/subscriptions/{sub}", '{"state": 1e309}'), 403, "AuthorizationFailed")


# ------------------------------------------------------------------------------------------------ JSON (RFC 8259, I-JSON)
@pytest.mark.parametrize(
    ("content", "rule"),
    [
        ('{"state": "Registered", "properties": {"x": NaN}}', "NaN"),
        ('{"state": "Registered", "properties": {"x": Infinity}}', "Infinity"),
        ('{"state": "Registered", "properties": {"x": 1e309}}', "out of range"),
        ('{"state": "Registered", "properties": {"x": 9007199254740993}}', "2^53"),
        ('{"state": "Registered", "state": "Suspended"}', "appears twice"),
        ('{"state": "Registered", "properties": {"x": "\\ud800"}}', "surrogate"),
        ('{"state": "Suspended", "properties": ' + '{"a": ' * 300 + "1" + "}" * 300 + "}", "nested deeper"),
        ('{"state": "Suspended", "properties": ' + '{"a": ' * 33 + "1" + "}" * 33 + "}", "nested deeper"),
    ],
)
def test_json_outside_rfc_8259_and_i_json_is_400_and_stores_nothing(content, rule, admin, sub):
    # When an admin sends a subscription state with a body JSON or I-JSON rules out
    response = raw(admin, "PUT", f"/subscriptions/{sub}", content)
    # Then 400 naming the rule, and nothing was stored or audited
    error = assert_refused(response, 400, "InvalidRequestContent")
    assert rule in error["message"], error
    assert_refused(admin.get(f"/subscriptions/{sub}"), 404, "ResourceNotFound")
    assert [e for e in audit_events(admin, sub) if e["outcome"] == "Succeeded"] == []


def test_what_the_api_accepts_it_reads_back_and_lists(admin, sub):
    # Given the deepest and widest subscription properties the rules allow, in 4-byte characters
    deep: Any = "🚀" * 100
    for _ in range(30):
        deep = {"a": deep}
    wide = {f"k{i}": "🚀" * 400 for i in range(9)}  # ~14 KiB of characters, ~58 KiB of UTF-8
    body = {"state": "Registered", "properties": {"deep": deep, "wide": wide}}
    # When it is stored
    assert admin.put(f"/subscriptions/{sub}", json=body).status_code == 200
    # Then it reads back identical, and its audit trail pages without error
    assert admin.get(f"/subscriptions/{sub}").json()["properties"] == body["properties"]
    assert [e["outcome"] for e in audit_events(admin, sub)] == ["Succeeded"]


def test_a_change_too_large_for_one_item_is_400_naming_the_limit(admin, sub, monkeypatch):
    # Given a store whose item limit is far below what the body limit lets through (so the limit is reached)
    from itl_accelerator.repositories.dynamodb import table

    monkeypatch.setattr(table, "MAX_ITEM_BYTES", 4096)
    # When a change would store more than that
    response = admin.put(f"/subscriptions/{sub}", json={"state": "Registered", "properties": {"x": "y" * 5000}})
    # Then 400 naming the limit, and nothing stored
    error = assert_refused(response, 400, "InvalidRequestContent")
    assert "limit" in error["message"] and "KiB" in error["message"], error
    monkeypatch.undo()
    assert_refused(admin.get(f"/subscriptions/{sub}"), 404)


# ------------------------------------------------------------------------------------------------ headers
@pytest.mark.parametrize("method", ["PUT", "GET", "DELETE"])
def test_a_multibyte_correlation_id_is_echoed_whole_and_the_write_answered(method, admin, caller, sub):
    correlation = "a" + "é" * 32
    headers = {"X-Correlation-Id": correlation.encode(), "x-ms-correlation-request-id": ("ü" * 200).encode()}
    who = admin if method != "DELETE" else caller([CONSUMER], [f"/subscriptions/{sub}"])
    if method == "GET":
        assert admin.put(nodes_path(sub, name="n1"), json=node_body()).status_code == 201
    response = who.request(method, nodes_path(sub, name="n1"), json=node_body(), headers=headers)
    # Then the answer is the operation's own (201 created / 200 read / 403 refused), never a gateway 5xx
    assert response.status_code == {"PUT": 201, "GET": 200, "DELETE": 403}[method], response.text
    # and the echoed ids are ASCII, percent-encoded UTF-8 of at most 128 characters as sent
    from urllib.parse import unquote

    assert unquote(response.headers["X-Correlation-Id"]) == correlation
    assert unquote(response.headers["x-ms-correlation-request-id"]) == "ü" * 128


# ------------------------------------------------------------------------------------------------ suppliers
@pytest.mark.parametrize(
    "patch",
    [{"properties": None}, {"properties": [1]}, {"properties": "x"}, {"location": 5}, {"sku": None}, {"tags": 7}],
)
def test_a_suppliers_malformed_patch_is_400_like_an_admins(patch, admin, caller, sub):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    owner = caller([SUPPLIER], [f"/subscriptions/{sub}"], subject="owner-123")
    for who in (owner, admin):
        assert_refused(who.patch(nodes_path(sub, name="dgx-1"), json=patch), 400, "InvalidRequestContent")
    assert admin.get(nodes_path(sub, name="dgx-1")).json()["properties"]["pricing"]["pricePerGpuHour"] == 2.5


def test_a_supplier_cannot_change_the_casing_of_a_nodes_name(admin, caller, sub):
    # Given a node dgx-1 in rg1 owned by the supplier
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    owner = caller([SUPPLIER], [f"/subscriptions/{sub}"], subject="owner-123")
    current = admin.get(nodes_path(sub, name="dgx-1")).json()
    # When the supplier PUTs the node's current body to RG1/DGX-1
    response = owner.put(nodes_path(sub, "RG1", "DGX-1"), json=current)
    # Then nothing changes: no write, no audit, the name and id keep their casing
    assert response.status_code == 200, response.text
    stored = admin.get(nodes_path(sub, name="dgx-1")).json()
    assert (stored["name"], stored["id"], stored["etag"]) == (current["name"], current["id"], current["etag"])
    # And a price change through the other casing keeps the stored casing too
    current["properties"]["pricing"]["pricePerGpuHour"] = 3.0
    assert owner.put(nodes_path(sub, "RG1", "DGX-1"), json=current).status_code == 200
    stored = admin.get(nodes_path(sub, name="dgx-1")).json()
    assert (stored["name"], stored["id"]) == ("dgx-1", current["id"])
    assert stored["properties"]["pricing"]["pricePerGpuHour"] == 3.0


# ------------------------------------------------------------------------------------------------ probes and tokens
def test_a_cross_scope_probe_is_audited_where_it_was_aimed(admin, caller, sub):
    # Given an admin of another subscription
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    outsider = caller([ADMIN], ["/subscriptions/sub-elsewhere"], subject="mallory")
    # When it tries to delete a node of this subscription
    response = outsider.delete(nodes_path(sub, name="dgx-1"))
    # Then it sees 404, the node stays, and this subscription's trail names the attempt
    assert_refused(response, 404, "ResourceNotFound")
    assert admin.get(nodes_path(sub, name="dgx-1")).status_code == 200
    probes = [e for e in audit_events(admin, sub) if e["actor_id"] == "mallory"]
    assert len(probes) == 1 and probes[0]["outcome"] == "Denied", probes
    assert probes[0]["action"] == "ITL.Accelerator/sparkNodes/delete"
    assert "outside the caller's scopes" in probes[0]["change_summary"]


@pytest.mark.parametrize("subject", ["", "   ", "a\u0000b", "x" * 256])
def test_a_token_without_a_real_subject_is_401(subject, caller, sub):
    nobody = caller([ADMIN], [f"/subscriptions/{sub}"], subject=subject)
    assert_refused(nobody.get(nodes_path(sub)), 401, "AuthenticationFailed")


# ------------------------------------------------------------------------------------------------ audit query bounds
@pytest.mark.parametrize(
    "params",
    [
        {"startTime": "0001-01-01T00:00:00+01:00"},
        {"endTime": "9999-12-31T23:59:59-01:00"},
        {"startTime": "0001-01-01T00:00:00+14:00", "endTime": "9999-12-31T23:59:59-14:00"},
    ],
)
def test_audit_bounds_beyond_utc_mean_unbounded(params, admin, sub):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    response = admin.get(f"/subscriptions/{sub}{PROVIDER}/auditEvents", params=params)
    assert response.status_code == 200, response.text
    assert [e["action"] for e in response.json()["value"]] == ["ITL.Accelerator/sparkNodes/write"]


# ------------------------------------------------------------------------------------------------ parents
def test_listing_instances_of_a_missing_node_is_404_parent_not_found(admin, sub):
    assert_refused(admin.get(instances_path(sub, node="nope")), 404, "ParentResourceNotFound")
    # while an existing node without instances lists empty
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    assert admin.get(instances_path(sub)).json() == {"value": [], "nextLink": None}


def test_control_characters_are_refused_in_tag_names_and_values(admin, sub, aws):
    for tags in ({"a\u0007b": "x"}, {"ok": "line\nbreak"}, {"ok": "\u0085"}):
        assert_refused(admin.put(nodes_path(sub, name="n1"), json=node_body(tags=tags)), 400, "InvalidRequestContent")
    assert "Item" not in aws.get_item(
        TableName=TABLE, Key={"PK": {"S": f"SUB#{sub}"}, "SK": {"S": "NODE#rg1#n1"}}, ConsistentRead=True
    )
