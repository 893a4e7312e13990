"""Request rate limits through API Gateway (emulated from template.yaml) and the real functions on moto: the
functions' own per-subscription and per-caller limits (429 ``TooManyRequests`` with ``Retry-After``, ARM's
``x-ms-ratelimit-remaining-*`` headers counting down), and the stage's throttling at the edge (the template's
``THROTTLED`` gateway response).

The suite runs with limits far out of reach (tests/conftest.py ``SUITE_RATE_LIMIT``: tests burst and poll by design),
so these tests spend a subscription's budget where the functions keep it — its counter items in the table — and
then burst the last few requests of it: the same counters, limits and code every request goes through, without a
minute of requests. The counters are per UTC minute, so each test starts with enough of its minute left to finish
in it. The edge test runs an emulator of its own, on a clock it moves: no sleeping, nothing timed.
"""

from __future__ import annotations

import math
import time
from typing import Any

import boto3
from starlette.testclient import TestClient

from itl_accelerator.domain.rate_limits import RequestKind, seconds_to_window_end, window_start
from itl_accelerator.repositories.dynamodb import keys
from tests.conftest import ADMIN, SUITE_RATE_LIMIT, TABLE, node_body, nodes_path
from tests.integration.instance_helpers import wait_for

READS, WRITES = "x-ms-ratelimit-remaining-subscription-reads", "x-ms-ratelimit-remaining-subscription-writes"
GLOBAL_READS = "x-ms-ratelimit-remaining-subscription-global-reads"
GLOBAL_WRITES = "x-ms-ratelimit-remaining-subscription-global-writes"
#: Seconds of its minute a test needs left to run in one window (a handful of requests; ample on a busy machine).
ROOM = 20


def minute_with_room() -> int:
    """The start of the current counting window, once at least :data:`ROOM` seconds of it are left (waiting for
    the next one otherwise)."""
    wait_for(lambda: seconds_to_window_end(time.time()) >= ROOM, timeout=ROOM + 5, interval=0.2, what="a fresh minute")
    return window_start(time.time())


def spend(subscription: str, kind: RequestKind, window: int, count: int, caller: str | None = None) -> None:
    """Record ``count`` requests already made in ``window`` on the counter the functions keep (the subscription's,
    or ``caller``'s in it)."""
    boto3.client("dynamodb").put_item(
        TableName=TABLE,
        Item={
            "PK": {"S": keys.rate_counter_pk(subscription)},
            "SK": {"S": keys.rate_counter_sk(kind, window, caller)},
            "n": {"N": str(count)},
        },
    )


def test_a_burst_past_the_subscriptions_write_limit_is_429_with_retry_after_and_the_headers_count_down(
    admin: Any, sub: str
) -> None:
    # Given a subscription with 3 writes left this minute (every caller together)
    window = minute_with_room()
    spend(sub, RequestKind.WRITES, window, SUITE_RATE_LIMIT - 3)
    # When its admin sends a burst of 5 creates
    before = time.time()
    answers = [admin.put(nodes_path(sub, name=f"dgx-{i}"), json=node_body()) for i in range(5)]
    after = time.time()
    assert window_start(after) == window, "the minute ended during the burst: rerun"
    # Then 3 are created and 2 refused, each answer saying what is left: the subscription's writes counting down
    # to 0, and the caller's own — a refused request spends nothing, so the caller's count stops at 3
    assert [a.status_code for a in answers] == [201, 201, 201, 429, 429], [a.text for a in answers]
    assert [a.headers[GLOBAL_WRITES] for a in answers] == ["2", "1", "0", "0", "0"]
    assert [int(a.headers[WRITES]) for a in answers] == [SUITE_RATE_LIMIT - n for n in (1, 2, 3, 3, 3)]
    assert not any(READS in a.headers or GLOBAL_READS in a.headers for a in answers)
    # And a refusal is ARM's 429 with Retry-After: the seconds to the minute's end
    refused = answers[3]
    body = refused.json()["error"]
    assert body["code"] == "TooManyRequests" and "the subscription's limit" in body["message"], body
    end = window + 60
    assert math.ceil(end - after) <= int(refused.headers["Retry-After"]) <= math.ceil(end - before)
    assert refused.headers["x-ms-request-id"]
    # And the refused creates did nothing, while reads have a budget of their own
    missing = admin.get(nodes_path(sub, name="dgx-3"))
    assert missing.status_code == 404 and int(missing.headers[GLOBAL_READS]) == SUITE_RATE_LIMIT - 1


def test_one_caller_past_its_own_limit_is_refused_while_the_others_in_the_subscription_go_on(
    admin: Any, caller: Any, sub: str
) -> None:
    other = caller([ADMIN], [f"/subscriptions/{sub}"], subject="admin-2")
    # Given the admin with one write left in this subscription this minute
    window = minute_with_room()
    spend(sub, RequestKind.WRITES, window, SUITE_RATE_LIMIT - 1, caller="admin-1")
    # When it writes twice, then another caller writes
    first, second = (admin.put(nodes_path(sub, name=f"dgx-{i}"), json=node_body()) for i in range(2))
    theirs = other.put(nodes_path(sub, name="dgx-9"), json=node_body())
    assert window_start(time.time()) == window, "the minute ended during the test: rerun"
    # Then its first passes with nothing left, its second is refused by its own limit, the other's passes
    assert (first.status_code, first.headers[WRITES]) == (201, "0")
    assert second.status_code == 429 and "your limit" in second.json()["error"]["message"]
    assert second.headers["Retry-After"].isdigit() and second.headers[WRITES] == "0"
    assert GLOBAL_WRITES not in second.headers  # refused by its own limit: the subscription's was not touched
    assert theirs.status_code == 201 and int(theirs.headers[WRITES]) == SUITE_RATE_LIMIT - 1
    # And the subscription's allowance counted the two that passed, not the refused one
    assert int(theirs.headers[GLOBAL_WRITES]) == SUITE_RATE_LIMIT - 2


def test_the_stage_throttles_a_burst_at_the_edge_with_the_templates_gateway_response(
    aws: Any, make_token: Any, sub: str
) -> None:
    from itl_local.gateway import ApiGatewayEmulator
    from itl_local.template import Template

    # Given the API with a stage bucket of 3 requests refilled at 1 per second, on a clock the test moves
    now = [1000.0]
    template = Template(parameters={"ApiThrottlingRateLimit": "1", "ApiThrottlingBurstLimit": "3"})
    headers = {"Authorization": f"Bearer {make_token('admin-1', [ADMIN], [f'/subscriptions/{sub}'])}"}
    with TestClient(ApiGatewayEmulator(template, clock=lambda: now[0]), base_url="http://testserver") as client:
        # When 5 requests arrive at once
        burst = [client.get(nodes_path(sub), headers=headers) for _ in range(5)]
        # Then 3 reach the function and 2 are refused at the edge, before any function or authorizer: the
        # template's THROTTLED response, an ARM error with Retry-After
        assert [r.status_code for r in burst] == [200, 200, 200, 429, 429]
        throttled = burst[3]
        assert throttled.json()["error"]["code"] == "TooManyRequests"
        assert throttled.headers["Retry-After"] == "1" and throttled.headers["x-amzn-ErrorType"] == "THROTTLED"
        assert throttled.headers["x-ms-request-id"] == throttled.headers["x-amzn-RequestId"]
        assert GLOBAL_READS not in throttled.headers  # not counted by the functions: it never reached one
        # And after a second the bucket holds one request again, and only one
        now[0] += 1.0
        assert [client.get(nodes_path(sub), headers=headers).status_code for _ in range(2)] == [200, 429]
