"""Audit completeness for sparkNodes changes, and the admin audit query API.

Rules under test (DESIGN.md, Identity/RBAC/tenancy/audit): every state change writes exactly one audit item in the
same transaction as the change (actor, actor type, action, resource id, previous/new state, request and
correlation ids, source IP, user agent, timestamp); a change that does not happen writes no *Succeeded* item;
a refused attempt (403) is audited once with outcome ``Denied``. Audit events are read back through
``GET /subscriptions/{sub}/providers/ITL.Accelerator/auditEvents`` (admins holding the whole subscription) and
counted in the table itself (partition ``SUB#{sub}#AUDIT``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from boto3.dynamodb.types import TypeDeserializer

from tests.conftest import ADMIN, CONSUMER, SEED_NODE, SUPPLIER, TABLE, node_body, nodes_path

OWNER = SEED_NODE["properties"]["owner"]
NODE_TYPE = "ITL.Accelerator/sparkNodes"
WRITE = "ITL.Accelerator/sparkNodes/write"
DELETE = "ITL.Accelerator/sparkNodes/delete"
PRICING_WRITE = "ITL.Accelerator/sparkNodes/pricing/write"
USER_AGENT = "itl-audit-tests/1.0"
#: An explicit lower time bound for listing "everything". Listing with no ``startTime`` at all is its own test
#: (:func:`test_audit_list_without_time_bounds_returns_every_event`), so one defect there does not hide the rest.
SINCE = "2020-01-01T00:00:00Z"


# --------------------------------------------------------------------------------------------------- helpers
def audit_path(sub: str) -> str:
    return f"/subscriptions/{sub}/providers/ITL.Accelerator/auditEvents"


def node_id(sub: str, name: str = "dgx-1", rg: str = "rg1") -> str:
    return nodes_path(sub, rg, name)


def relative(link: str) -> str:
    """An absolute nextLink as a path + query the test client can call."""
    parts = urlsplit(link)
    assert parts.scheme and parts.netloc, f"nextLink is not absolute: {link}"
    return f"{parts.path}?{parts.query}"


def audit_events(who: Any, sub: str, **params: Any) -> list[dict[str, Any]]:
    """Every audit event the query returns, following nextLink to the end."""
    events: list[dict[str, Any]] = []
    response = who.get(audit_path(sub), params=params)
    for _ in range(100):
        assert response.status_code == 200, response.text
        page = response.json()
        events += page["value"]
        if page["nextLink"] is None:
            return events
        response = who.get(relative(page["nextLink"]))
    raise AssertionError("nextLink never ended")


def table_audit_items(aws: Any, sub: str) -> list[dict[str, Any]]:
    """The subscription's audit items as stored (read straight from the table)."""
    deserializer = TypeDeserializer()
    items: list[dict[str, Any]] = []
    request: dict[str, Any] = {
        "TableName": TABLE,
        "KeyConditionExpression": "PK = :pk",
        "ExpressionAttributeValues": {":pk": {"S": f"SUB#{sub.lower()}#AUDIT"}},
    }
    while True:
        response = aws.query(**request)
        items += [{k: deserializer.deserialize(v) for k, v in i.items()} for i in response.get("Items", [])]
        if "LastEvaluatedKey" not in response:
            return items
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def stored_state(node: dict[str, Any]) -> dict[str, Any]:
    """A node as returned, without what is computed on read (etag, capacity): the state an audit item records."""
    state = {k: v for k, v in node.items() if k != "etag"}
    state["properties"] = {k: v for k, v in node["properties"].items() if k != "capacity"}
    return state


def traced_headers() -> dict[str, str]:
    return {"x-ms-correlation-request-id": str(uuid.uuid4()), "User-Agent": USER_AGENT}


def parse_ts(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def create_node(admin: Any, sub: str, name: str = "dgx-1", rg: str = "rg1") -> dict[str, Any]:
    response = admin.put(nodes_path(sub, rg, name), json=node_body())
    assert response.status_code == 201, response.text
    return response.json()


def repriced(price: float) -> dict[str, Any]:
    body = node_body()
    body["properties"]["pricing"]["pricePerGpuHour"] = price
    return body


# --------------------------------------------------------------------------------------------------- changes
# Each change: (needs an existing dgx-1, acting role, request, expected status, expected action)
Change = Callable[[Any, str, dict[str, str]], Any]
CHANGES: dict[str, tuple[bool, str, Change, int, str]] = {
    "create via POST": (
        False,
        ADMIN,
        lambda who, sub, h: who.post(nodes_path(sub), json=SEED_NODE, headers=h),
        201,
        WRITE,
    ),
    "create via PUT": (
        False,
        ADMIN,
        lambda who, sub, h: who.put(node_id(sub), json=node_body(), headers=h),
        201,
        WRITE,
    ),
    "replace via PUT": (
        True,
        ADMIN,
        lambda who, sub, h: who.put(node_id(sub), json=repriced(3.1), headers=h),
        200,
        WRITE,
    ),
    "PATCH": (
        True,
        ADMIN,
        lambda who, sub, h: who.patch(node_id(sub), json={"tags": {"env": "prod"}}, headers=h),
        200,
        WRITE,
    ),
    "DELETE": (True, ADMIN, lambda who, sub, h: who.delete(node_id(sub), headers=h), 200, DELETE),
    "supplier PATCH of its price": (
        True,
        SUPPLIER,
        lambda who, sub, h: who.patch(
            node_id(sub), json={"properties": {"pricing": {"pricePerGpuHour": 2.9}}}, headers=h
        ),
        200,
        PRICING_WRITE,
    ),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_each_successful_change_leaves_exactly_one_complete_audit_item(change, sub, admin, caller, aws):
    existing, role, send, status, action = CHANGES[change]
    # Given (for an update or delete) dgx-1, created by the admin
    before = create_node(admin, sub) if existing else None
    items_before = len(table_audit_items(aws, sub))
    who = admin if role == ADMIN else caller([role], [f"/subscriptions/{sub}"], subject=OWNER)
    subject = "admin-1" if role == ADMIN else OWNER

    # When the change is made, with a correlation id and a user agent
    headers = traced_headers()
    started = datetime.now(UTC)
    response = send(who, sub, headers)
    finished = datetime.now(UTC)
    assert response.status_code == status, response.text

    # Then the table holds exactly one more audit item
    assert len(table_audit_items(aws, sub)) == items_before + 1
    # And the audit API shows it for the node, with every field right
    events = [
        e
        for e in audit_events(admin, sub, startTime=SINCE, resourceId=node_id(sub))
        if e["request_id"] == response.headers["x-ms-request-id"]
    ]
    assert len(events) == 1, events
    event = events[0]
    assert event["outcome"] == "Succeeded"
    assert event["actor_id"] == subject
    assert event["actor_type"] == "User"
    assert event["action"] == action
    assert event["subscription_id"] == sub
    assert event["resource_id"] == node_id(sub)
    assert event["resource_type"] == NODE_TYPE
    assert event["resource_name"] == "dgx-1"
    assert event["correlation_id"] == headers["x-ms-correlation-request-id"]
    assert event["user_agent"] == USER_AGENT
    assert isinstance(event["source_ip"], str) and event["source_ip"]
    assert started <= parse_ts(event["timestamp"]) <= finished
    after = admin.get(node_id(sub))
    assert event["previous_state"] == (stored_state(before) if before else None)
    assert event["new_state"] == (stored_state(after.json()) if after.status_code == 200 else None)
    if change == "DELETE":
        assert after.status_code == 404


def test_identical_repeated_put_leaves_no_audit_item(sub, admin, aws):
    # Given dgx-1, created by PUT
    first = create_node(admin, sub)
    items_before = table_audit_items(aws, sub)
    assert len(items_before) == 1
    # When the very same PUT is sent again
    again = admin.put(node_id(sub), json=node_body(), headers=traced_headers())
    # Then nothing changed: same etag, and no audit item
    assert again.status_code == 200, again.text
    assert again.json()["etag"] == first["etag"]
    assert table_audit_items(aws, sub) == items_before
    assert [e["request_id"] for e in audit_events(admin, sub, startTime=SINCE)] == [items_before[0]["request_id"]]


# --------------------------------------------------------------------------------------------------- failed changes
def _stale_if_match(h: dict[str, str]) -> dict[str, str]:
    return {**h, "If-Match": '"0123456789abcdef0123456789abcdef"'}


# Each failure: (acting role and subject, request, expected status, expected error code)
FAILURES: dict[str, tuple[tuple[str, str], Change, int, str]] = {
    "PUT with a bad body": (
        (ADMIN, "admin-1"),
        lambda who, sub, h: who.put(
            node_id(sub), json={**node_body(), "sku": {"name": "DGX-H100-8GPU", "capacity": 4}}, headers=h
        ),
        400,
        "InvalidRequestContent",
    ),
    "PATCH with a bad value": (
        (ADMIN, "admin-1"),
        lambda who, sub, h: who.patch(node_id(sub), json={"properties": {"hardwareSpecs": {"gpuCount": 0}}}, headers=h),
        400,
        "InvalidRequestContent",
    ),
    "PUT with a stale If-Match": (
        (ADMIN, "admin-1"),
        lambda who, sub, h: who.put(node_id(sub), json=repriced(7.0), headers=_stale_if_match(h)),
        412,
        "PreconditionFailed",
    ),
    "PATCH with a stale If-Match": (
        (ADMIN, "admin-1"),
        lambda who, sub, h: who.patch(node_id(sub), json={"tags": {"x": "y"}}, headers=_stale_if_match(h)),
        412,
        "PreconditionFailed",
    ),
    "DELETE with a stale If-Match": (
        (ADMIN, "admin-1"),
        lambda who, sub, h: who.delete(node_id(sub), headers=_stale_if_match(h)),
        412,
        "PreconditionFailed",
    ),
    "supplier changing tags": (
        (SUPPLIER, OWNER),
        lambda who, sub, h: who.patch(node_id(sub), json={"tags": {"env": "prod"}}, headers=h),
        403,
        "AuthorizationFailed",
    ),
    "supplier changing another owner's price": (
        (SUPPLIER, "not-the-owner"),
        lambda who, sub, h: who.patch(
            node_id(sub), json={"properties": {"pricing": {"pricePerGpuHour": 0.1}}}, headers=h
        ),
        403,
        "AuthorizationFailed",
    ),
    "supplier deleting": (
        (SUPPLIER, OWNER),
        lambda who, sub, h: who.delete(node_id(sub), headers=h),
        403,
        "AuthorizationFailed",
    ),
    "consumer replacing": (
        (CONSUMER, "consumer-1"),
        lambda who, sub, h: who.put(node_id(sub), json=repriced(0.2), headers=h),
        403,
        "AuthorizationFailed",
    ),
}

DENIED_ACTIONS = {
    "supplier changing tags": WRITE,
    "supplier changing another owner's price": WRITE,
    "supplier deleting": DELETE,
    "consumer replacing": WRITE,
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_failed_change_leaves_the_node_unchanged_and_no_succeeded_audit_item(failure, sub, admin, caller, aws):
    (role, subject), send, status, code = FAILURES[failure]
    # Given dgx-1 (owned by OWNER), created by the admin
    created = create_node(admin, sub)
    before = admin.get(node_id(sub))
    items_before = table_audit_items(aws, sub)
    who = admin if role == ADMIN else caller([role], [f"/subscriptions/{sub}"], subject=subject)

    # When a change is attempted that must fail
    headers = traced_headers()
    response = send(who, sub, headers)

    # Then it fails with the expected error
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    # And the node is exactly as before (same etag, same body)
    after = admin.get(node_id(sub))
    assert after.status_code == 200
    assert after.headers["ETag"] == before.headers["ETag"] == created["etag"]
    assert after.json() == before.json()
    # And no new Succeeded audit item exists
    new_items = [i for i in table_audit_items(aws, sub) if i not in items_before]
    assert [i for i in new_items if i["outcome"] == "Succeeded"] == []
    if status == 403:
        # And a refusal is audited exactly once, as Denied, naming who tried what
        assert len(new_items) == 1, new_items
        events = [e for e in audit_events(admin, sub, startTime=SINCE) if e["outcome"] == "Denied"]
        assert len(events) == 1, events
        denied = events[0]
        assert denied["actor_id"] == subject
        assert denied["action"] == DENIED_ACTIONS[failure]
        assert denied["resource_id"] == node_id(sub)
        assert denied["request_id"] == response.headers["x-ms-request-id"]
        assert denied["correlation_id"] == headers["x-ms-correlation-request-id"]
        assert denied["user_agent"] == USER_AGENT
        assert denied["previous_state"] is None and denied["new_state"] is None


def test_denied_audit_item_is_written_even_though_the_change_is_not(sub, admin, caller, aws):
    # Given dgx-1 and a consumer of the subscription
    create_node(admin, sub)
    consumer = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="consumer-1")
    # When the consumer tries three times to delete it
    for _ in range(3):
        assert consumer.delete(node_id(sub)).status_code == 403
    # Then three Denied items are stored (one per attempt), besides the creation
    outcomes = sorted(i["outcome"] for i in table_audit_items(aws, sub))
    assert outcomes == ["Denied", "Denied", "Denied", "Succeeded"]
    # And the node still exists
    assert admin.get(node_id(sub)).status_code == 200


# --------------------------------------------------------------------------------------------------- the audit API
def make_five_events(admin: Any, sub: str) -> list[str]:
    """Five changes of dgx-1 (create + four price changes); returns their request ids, in order."""
    ids = []
    response = admin.put(node_id(sub), json=node_body())
    assert response.status_code == 201
    ids.append(response.headers["x-ms-request-id"])
    for price in (1.0, 2.0, 3.0, 4.0):
        response = admin.put(node_id(sub), json=repriced(price))
        assert response.status_code == 200
        ids.append(response.headers["x-ms-request-id"])
    return ids


def test_audit_paging_follows_next_link_to_the_end(sub, admin):
    # Given five audited changes
    request_ids = make_five_events(admin, sub)
    # When the audit is listed two at a time, following nextLink
    pages: list[list[str]] = []
    response = admin.get(audit_path(sub), params={"startTime": SINCE, "$top": "2"})
    while True:
        assert response.status_code == 200, response.text
        body = response.json()
        pages.append([e["request_id"] for e in body["value"]])
        if body["nextLink"] is None:
            break
        assert body["nextLink"].startswith("http://testserver/")
        assert len(pages) < 10, "nextLink never ended"
        response = admin.get(relative(body["nextLink"]))
    # Then the pages hold 2, 2 and 1 events, oldest first, each once; the last page has nextLink null
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [rid for page in pages for rid in page] == request_ids


def test_audit_list_without_time_bounds_returns_every_event(sub, admin):
    """The plain call an admin makes first: no startTime/endTime means all time."""
    # Given five audited changes
    request_ids = make_five_events(admin, sub)
    # When the audit is listed with no parameters at all
    response = admin.get(audit_path(sub))
    # Then every event comes back, oldest first
    assert response.status_code == 200, response.text
    assert [e["request_id"] for e in response.json()["value"]] == request_ids
    # And with only an upper bound (now), and two at a time without bounds, the same five
    until_now = iso(datetime.now(UTC))
    assert [e["request_id"] for e in audit_events(admin, sub, endTime=until_now)] == request_ids
    assert [e["request_id"] for e in audit_events(admin, sub, **{"$top": "2"})] == request_ids


def test_audit_paging_keeps_the_resource_filter(sub, admin):
    # Given three changes of dgx-1 interleaved with three of dgx-2
    for price in (1.0, 2.0, 3.0):
        for name in ("dgx-1", "dgx-2"):
            body = node_body() if price == 1.0 else repriced(price)
            assert admin.put(node_id(sub, name), json=body).status_code in (200, 201)
    # When dgx-1's events are listed one at a time
    events = audit_events(admin, sub, startTime=SINCE, resourceId=node_id(sub, "dgx-1"), **{"$top": "1"})
    # Then exactly dgx-1's three events come back, in order
    assert [e["resource_id"] for e in events] == [node_id(sub, "dgx-1")] * 3
    assert [e["previous_state"] is None for e in events] == [True, False, False]


def test_audit_filter_by_resource_id(sub, admin):
    # Given changes to two nodes in different resource groups
    create_node(admin, sub, "dgx-1", "rg1")
    create_node(admin, sub, "dgx-2", "rg2")
    assert admin.delete(node_id(sub, "dgx-2", "rg2")).status_code == 200
    # When the audit is filtered by each node's id
    first = audit_events(admin, sub, startTime=SINCE, resourceId=node_id(sub, "dgx-1", "rg1"))
    second = audit_events(admin, sub, startTime=SINCE, resourceId=node_id(sub, "dgx-2", "rg2"))
    unknown = audit_events(admin, sub, startTime=SINCE, resourceId=node_id(sub, "nope", "rg1"))
    # Then each shows only its own events
    assert [(e["resource_id"], e["action"]) for e in first] == [(node_id(sub, "dgx-1", "rg1"), WRITE)]
    assert [(e["resource_id"], e["action"]) for e in second] == [
        (node_id(sub, "dgx-2", "rg2"), WRITE),
        (node_id(sub, "dgx-2", "rg2"), DELETE),
    ]
    assert unknown == []
    # And unfiltered, all three
    assert len(audit_events(admin, sub, startTime=SINCE)) == 3


def test_audit_filter_by_resource_id_ignores_case(sub, admin):
    # Given a change to dgx-1 (ARM ids compare case-insensitively)
    create_node(admin, sub)
    # When filtered with the id in other casing
    events = audit_events(admin, sub, startTime=SINCE, resourceId=node_id(sub, "DGX-1", "RG1"))
    # Then the event is found
    assert len(events) == 1


def test_audit_newest_first_and_one_actors_events_in_full_pages(sub, admin, caller):
    # Given five changes by admin-1, then two by admin-2 (another admin of the subscription)
    first = make_five_events(admin, sub)
    other = caller([ADMIN], [f"/subscriptions/{sub}"], subject="admin-2")
    second = [other.put(node_id(sub), json=repriced(price)).headers["x-ms-request-id"] for price in (5.0, 6.0)]
    # When the trail is read newest first, two at a time (nextLink keeps the order)
    newest = audit_events(admin, sub, **{"$orderby": "timestamp desc", "$top": "2"})
    # Then what just happened comes first
    assert [e["request_id"] for e in newest] == (first + second)[::-1]
    # And one actor's events, one a page, are theirs only, each page full until the last
    of_two = audit_events(admin, sub, actor="admin-2", **{"$top": "1"})
    assert [(e["request_id"], e["actor_id"]) for e in of_two] == [(r, "admin-2") for r in second]
    page = admin.get(audit_path(sub), params={"actor": "admin-1", "$top": "4", "$orderby": "timestamp desc"}).json()
    assert [e["request_id"] for e in page["value"]] == first[::-1][:4] and page["nextLink"]
    assert "actor=admin-1" in page["nextLink"] and "orderby" in page["nextLink"]
    assert audit_events(admin, sub, actor="admin-2", resourceId=node_id(sub)) == of_two
    assert audit_events(admin, sub, actor="nobody") == []


@pytest.mark.parametrize("order", ["name desc", "timestamp sideways", "", "timestamp desc extra"])
def test_an_order_other_than_by_timestamp_is_invalid_parameter(order, sub, admin):
    response = admin.get(audit_path(sub), params={"$orderby": order})
    assert response.status_code == 400, response.text
    assert (response.json()["error"]["code"], response.json()["error"]["target"]) == ("InvalidParameter", "$orderby")


def test_audit_time_range_filter(sub, admin):
    # Given four changes, with marks taken between them
    create_node(admin, sub)  # e1
    mark_1 = datetime.now(UTC)
    assert admin.put(node_id(sub), json=repriced(1.0)).status_code == 200  # e2
    assert admin.put(node_id(sub), json=repriced(2.0)).status_code == 200  # e3
    mark_2 = datetime.now(UTC)
    assert admin.put(node_id(sub), json=repriced(3.0)).status_code == 200  # e4
    every = audit_events(admin, sub, startTime=SINCE)
    assert len(every) == 4

    def prices(events: list[dict[str, Any]]) -> list[Any]:
        return [e["new_state"]["properties"]["pricing"]["pricePerGpuHour"] for e in events]

    # When filtered by time, Then only events inside the range come back, oldest first
    assert prices(audit_events(admin, sub, startTime=iso(mark_1), endTime=iso(mark_2))) == [1.0, 2.0]
    assert prices(audit_events(admin, sub, startTime=iso(mark_1))) == [1.0, 2.0, 3.0]
    assert prices(audit_events(admin, sub, startTime=SINCE, endTime=iso(mark_1))) == [2.5]
    # And both bounds are inclusive: an event's own timestamp selects it
    e3 = every[2]
    assert audit_events(admin, sub, startTime=e3["timestamp"], endTime=e3["timestamp"]) == [e3]


def test_audit_time_filter_with_an_offset_time_zone(sub, admin):
    # Given one change
    create_node(admin, sub)
    stamp = parse_ts(audit_events(admin, sub, startTime=SINCE)[0]["timestamp"])
    # When the range is given in another time zone, ending just after the event
    from datetime import timedelta, timezone

    plus_two = timezone(timedelta(hours=2))
    end = (stamp + timedelta(milliseconds=1)).astimezone(plus_two).isoformat()
    start = (stamp - timedelta(milliseconds=1)).astimezone(plus_two).isoformat()
    # Then the event is found (times compare as instants, not as text)
    assert len(audit_events(admin, sub, startTime=start, endTime=end)) == 1
    # And a range entirely before it finds nothing
    earlier = (stamp - timedelta(seconds=1)).astimezone(plus_two).isoformat()
    assert audit_events(admin, sub, startTime=SINCE, endTime=earlier) == []


@pytest.mark.parametrize(
    ("roles", "scope"),
    [
        pytest.param([CONSUMER], "/subscriptions/{sub}", id="consumer"),
        pytest.param([SUPPLIER], "/subscriptions/{sub}", id="supplier"),
        pytest.param([ADMIN], "/subscriptions/{sub}/resourceGroups/rg1", id="admin-of-a-resource-group"),
    ],
)
def test_audit_api_is_refused_to_all_but_subscription_admins(roles, scope, sub, admin, caller):
    # Given an audited change in the subscription
    create_node(admin, sub)
    who = caller(roles, [scope.format(sub=sub)], subject="curious-1")
    # When a non-admin, or an admin of only one resource group, reads the audit
    response = who.get(audit_path(sub))
    # Then it is refused with 403 AuthorizationFailed
    assert response.status_code == 403, response.text
    assert response.json()["error"]["code"] == "AuthorizationFailed"
    assert "value" not in response.json()


def test_audit_api_of_a_foreign_subscription_is_not_found(sub, admin, caller):
    # Given an audited change in the subscription
    create_node(admin, sub)
    # And an admin of another subscription only
    foreign = caller([ADMIN], [f"/subscriptions/{sub}-other"], subject="foreign-admin")
    # When it reads this subscription's audit
    response = foreign.get(audit_path(sub))
    # Then it is told the subscription does not exist
    assert response.status_code == 404, response.text
    assert response.json()["error"]["code"] == "ResourceNotFound"


@pytest.mark.parametrize("token", ["not-a-token!!", "e30", "eyJQSyI6IjEifQ", "%%%"])
def test_malformed_skip_token_is_invalid_parameter(token, sub, admin):
    # Given an audited change
    create_node(admin, sub)
    # When the audit is listed with a $skipToken this API never issued
    response = admin.get(audit_path(sub), params={"$skipToken": token})
    # Then 400 InvalidParameter naming $skipToken
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "InvalidParameter"


def test_skip_token_of_another_subscription_is_invalid_parameter(caller):
    # Given an admin of two subscriptions, each with three audited changes
    sub_a, sub_b = f"sub-{uuid.uuid4().hex[:12]}", f"sub-{uuid.uuid4().hex[:12]}"
    admin = caller([ADMIN], [f"/subscriptions/{sub_a}", f"/subscriptions/{sub_b}"], subject="admin-2")
    for sub in (sub_a, sub_b):
        for name in ("n1", "n2", "n3"):
            assert admin.put(nodes_path(sub, name=name), json=node_body()).status_code == 201
    # And a continuation token of sub_a's audit
    link = admin.get(audit_path(sub_a), params={"startTime": SINCE, "$top": "1"}).json()["nextLink"]
    token = parse_qs(urlsplit(link).query)["$skipToken"][0]
    # When it is used on sub_b's audit
    response = admin.get(audit_path(sub_b), params={"startTime": SINCE, "$skipToken": token})
    # Then it is refused rather than leaking sub_a's events
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "InvalidParameter"


def test_audit_items_are_stored_with_the_change_not_only_reported(sub, admin, aws):
    """The API and the table agree: what the API lists is what is stored, field for field."""
    # Given five changes
    make_five_events(admin, sub)
    # When the audit is read through the API and straight from the table
    listed = audit_events(admin, sub, startTime=SINCE)
    stored = sorted(table_audit_items(aws, sub), key=lambda i: i["SK"])
    # Then both hold the same events, in the same order, with the same states
    assert [e["event_id"] for e in listed] == [i["event_id"] for i in stored]
    for event, item in zip(listed, stored, strict=True):
        assert item["actor_id"] == event["actor_id"] and item["action"] == event["action"]
        assert item["request_id"] == event["request_id"]
        new_state = json.loads(item["new_state"]) if isinstance(item.get("new_state"), str) else item.get("new_state")
        assert new_state == event["new_state"]
