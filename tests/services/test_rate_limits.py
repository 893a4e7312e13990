"""Request rate limits, in memory and in milliseconds: the limiter on the in-memory counters, then the whole API app
(its ARM protocol middleware and ArmRoute) on an in-memory Wiring, as every Lambda function builds it — the local
stack runs the same functions, so it enforces the same limits.

Given limits per minute for a subscription (every caller) and for one caller in it, when requests come, then each
answer carries what is left (ARM's ``x-ms-ratelimit-remaining-subscription-[global-]{reads,writes}``), the request
past a limit is 429 ``TooManyRequests`` with ``Retry-After`` = seconds to the minute's end and nothing else happens,
a refused request spends nothing (so one noisy caller never throttles the others), and the next minute starts
afresh.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient
from starlette.types import Receive, Scope, Send

from itl_accelerator.api.app import build_app
from itl_accelerator.auth.principal import ArmScope, Principal
from itl_accelerator.auth.rbac import ROLE_ADMIN, ROLE_CONSUMER
from itl_accelerator.domain.rate_limits import RateCounter, RateLimits, RequestKind
from itl_accelerator.repositories.errors import StoreBusy
from itl_accelerator.repositories.memory import MemoryState, memory_repositories
from itl_accelerator.repositories.protocols import Repositories
from itl_accelerator.services.api.rate_limits import RateLimiter
from itl_accelerator.wiring import Wiring
from tests.services.conftest import START, make_settings, node_body
from tests.services.fakes import FakeClock

SUB, OTHER = "sub-rate", "sub-other"
#: 10 s into a minute: 50 s to its end.
T0 = START + 10
LIMITS = RateLimits(subscription_reads=5, subscription_writes=3, caller_reads=4, caller_writes=2)


def limiter(clock: FakeClock, limits: RateLimits = LIMITS, repos: Repositories | None = None) -> RateLimiter:
    return RateLimiter((repos or memory_repositories()).rate_limits, limits, clock)


# ------------------------------------------------------------------------------------------------------ the limiter
def test_each_request_is_counted_and_told_what_is_left_until_the_limit_then_refused() -> None:
    clock = FakeClock(T0)
    limits = limiter(clock)
    budgets = [limits.admit("alice", SUB, RequestKind.WRITES, in_scope=True) for _ in range(3)]
    # the refused third spent nothing: it says what the caller has left (0), not the subscription's (not counted)
    assert [(b.caller_remaining, b.subscription_remaining) for b in budgets] == [(1, 2), (0, 1), (0, None)]
    assert [b.refusal is None for b in budgets] == [True, True, False]
    refusal = budgets[2].refusal
    assert refusal is not None and refusal.status == 429 and refusal.code == "TooManyRequests"
    assert refusal.headers == {"Retry-After": "50"}
    assert "your limit of 2 writes per minute" in refusal.message


def test_reads_and_writes_have_budgets_of_their_own() -> None:
    limits = limiter(FakeClock(T0))
    for _ in range(2):
        limits.admit("alice", SUB, RequestKind.WRITES, in_scope=True)
    read = limits.admit("alice", SUB, RequestKind.READS, in_scope=True)
    assert (read.caller_remaining, read.subscription_remaining, read.refusal) == (3, 4, None)


def test_callers_share_the_subscriptions_budget_and_each_has_its_own() -> None:
    limits = limiter(FakeClock(T0))
    alice = [limits.admit("alice", SUB, RequestKind.WRITES, in_scope=True) for _ in range(2)]
    bob = limits.admit("bob", SUB, RequestKind.WRITES, in_scope=True)
    assert (alice[-1].caller_remaining, bob.caller_remaining) == (0, 1)
    assert bob.subscription_remaining == 0 and bob.refusal is None
    carol = limits.admit("carol", SUB, RequestKind.WRITES, in_scope=True)
    assert carol.refusal is not None and "the subscription's limit of 3 writes per minute" in carol.refusal.message
    # ... and one caller's budget in one subscription is not spent in another
    elsewhere = limits.admit("alice", OTHER, RequestKind.WRITES, in_scope=True)
    assert (elsewhere.caller_remaining, elsewhere.subscription_remaining) == (1, 2)


def test_a_stranger_spends_its_own_budget_only_and_learns_nothing_of_the_subscriptions() -> None:
    limits = limiter(FakeClock(T0))
    probes = [limits.admit("mallory", SUB, RequestKind.READS, in_scope=False) for _ in range(6)]
    assert [p.subscription_remaining for p in probes] == [None] * 6
    assert [p.caller_remaining for p in probes] == [3, 2, 1, 0, 0, 0]
    assert [p.refusal is None for p in probes] == [True] * 4 + [False] * 2
    member = limits.admit("alice", SUB, RequestKind.READS, in_scope=True)
    assert member.subscription_remaining == 4


def test_a_refused_request_spends_nothing_and_the_next_minute_starts_afresh() -> None:
    clock = FakeClock(T0)
    limits = limiter(clock)
    for _ in range(5):
        limits.admit("alice", SUB, RequestKind.WRITES, in_scope=True)  # 2 admitted, 3 refused by her own limit
    bob = limits.admit("bob", SUB, RequestKind.WRITES, in_scope=True)
    assert (bob.refusal, bob.subscription_remaining) == (None, 0)  # alice's refused three spent nothing of his
    clock.advance(49.5)  # 0.5 s before the minute ends: Retry-After is rounded up
    late = limits.admit("alice", SUB, RequestKind.WRITES, in_scope=True)
    assert late.refusal is not None and late.retry_after == 1
    clock.advance(0.5)
    fresh = limits.admit("alice", SUB, RequestKind.WRITES, in_scope=True)
    assert (fresh.refusal, fresh.caller_remaining, fresh.subscription_remaining, fresh.retry_after) == (None, 1, 2, 60)


def test_one_noisy_caller_of_a_resource_group_never_throttles_the_other_callers() -> None:
    """Issue 26: a caller holding one resource group hammered the API; its refused requests counted against the
    subscription, and every other caller was 429 for the rest of the minute. Its own limit now protects them."""
    repos = memory_repositories()
    limits = limiter(FakeClock(T0), RateLimits(subscription_reads=10, subscription_writes=10, caller_reads=4,
                                               caller_writes=4), repos)  # fmt: skip
    noisy = [limits.admit("noisy", SUB, RequestKind.READS, in_scope=True) for _ in range(200)]
    assert sum(a.refusal is None for a in noisy) == 4
    others = [limits.admit(who, SUB, RequestKind.READS, in_scope=True) for who in ("ann", "bob") for _ in range(3)]
    assert [a.refusal for a in others] == [None] * 6  # 4 + 6 of the subscription's 10
    assert others[-1].subscription_remaining == 0
    late = limits.admit("carol", SUB, RequestKind.READS, in_scope=True)  # the subscription's 11th: refused ...
    assert late.refusal is not None and "the subscription's limit of 10" in late.refusal.message
    assert repos.rate_limits.take(RateCounter(SUB, RequestKind.READS, int(T0 // 60 * 60), "carol"), 5) == 1  # ... free


def test_a_limit_of_zero_is_neither_counted_nor_reported() -> None:
    repos = memory_repositories()
    off = RateLimits(subscription_reads=0, subscription_writes=3, caller_reads=0, caller_writes=0)
    limits = limiter(FakeClock(T0), off, repos)
    reads = [limits.admit("alice", SUB, RequestKind.READS, in_scope=True) for _ in range(100)]
    assert {(b.caller_remaining, b.subscription_remaining, b.refusal) for b in reads} == {(None, None, None)}
    write = limits.admit("alice", SUB, RequestKind.WRITES, in_scope=True)
    assert (write.caller_remaining, write.subscription_remaining) == (None, 2)
    counted = repos.rate_limits.take(RateCounter(SUB, RequestKind.READS, int(T0 // 60 * 60)), 1000)
    assert counted == 1  # nothing had counted the reads before


def test_a_busy_table_lets_the_request_through_uncounted() -> None:
    class Busy:
        def take(self, counter: RateCounter, limit: int) -> int | None:
            raise StoreBusy("ThrottlingException")

        def give_back(self, counter: RateCounter) -> None:
            raise StoreBusy("ThrottlingException")

    budget = RateLimiter(Busy(), LIMITS, FakeClock(T0)).admit("alice", SUB, RequestKind.WRITES, in_scope=True)
    assert (budget.refusal, budget.caller_remaining, budget.subscription_remaining) == (None, None, None)


@pytest.mark.parametrize(("method", "kind"), [("GET", "reads"), ("HEAD", "reads"), ("PUT", "writes"),
                                              ("PATCH", "writes"), ("POST", "writes"), ("DELETE", "writes")])  # fmt: skip
def test_get_and_head_are_reads_everything_else_writes(method: str, kind: str) -> None:
    assert RequestKind.of(method) == kind


# ------------------------------------------------------------------------------------------------------ the API app
ADMIN = Principal(subject="alice", roles=[ROLE_ADMIN], scopes=[ArmScope(subscription_id=SUB)])
BOB = Principal(subject="bob", roles=[ROLE_ADMIN], scopes=[ArmScope(subscription_id=SUB)])
NO_ROLE = Principal(subject="nora", roles=[], scopes=[ArmScope(subscription_id=SUB)])
STRANGER = Principal(subject="mallory", roles=[ROLE_CONSUMER], scopes=[ArmScope(subscription_id=OTHER)])
NODES = f"/subscriptions/{SUB}/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes"
CALLER_WRITES, SUB_WRITES = "x-ms-ratelimit-remaining-subscription-writes", "x-ms-ratelimit-remaining-subscription-global-writes"  # fmt: skip
CALLER_READS, SUB_READS = "x-ms-ratelimit-remaining-subscription-reads", "x-ms-ratelimit-remaining-subscription-global-reads"  # fmt: skip
RATE_HEADERS = {CALLER_WRITES, SUB_WRITES, CALLER_READS, SUB_READS}


class Api:
    """The full API app on an in-memory Wiring and a fake clock; each request as ``principal`` (the authorizer's
    context, as API Gateway hands it to a function), or without one."""

    def __init__(self, **limits: int):
        self.clock = FakeClock(T0)
        self.state = MemoryState()
        self.repos = memory_repositories(self.state)
        settings = make_settings(
            rate_limit_subscription_reads_per_minute=limits.get("subscription_reads", 5),
            rate_limit_subscription_writes_per_minute=limits.get("subscription_writes", 3),
            rate_limit_caller_reads_per_minute=limits.get("caller_reads", 4),
            rate_limit_caller_writes_per_minute=limits.get("caller_writes", 2),
        )
        wiring = Wiring.build(settings, repositories=self.repos, clock=self.clock)
        app = build_app(lambda: wiring)

        async def as_called(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                raw = dict(scope["headers"]).get(b"x-test-principal")
                authorizer = {"principal": raw.decode()} if raw else {}
                scope = {**scope, "aws.event": {"requestContext": {"requestId": "req-1", "authorizer": authorizer}}}
            await app(scope, receive, send)

        self.client = TestClient(as_called)

    def request(self, principal: Principal | None, method: str, path: str, **kw: Any) -> Any:
        headers = {"x-test-principal": principal.to_context()} if principal else {}
        return self.client.request(method, path, headers=headers, **kw)


@pytest.fixture
def api() -> Iterator[Api]:
    yield Api()


def remaining(response: Any) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k in RATE_HEADERS}


def test_every_answer_says_what_is_left_and_the_request_past_the_limit_is_429_with_retry_after(api: Api) -> None:
    answers = [api.request(ADMIN, "PUT", f"{NODES}/dgx-{i}", json=node_body()) for i in range(3)]
    assert [a.status_code for a in answers] == [201, 201, 429]
    assert [remaining(a) for a in answers] == [
        {CALLER_WRITES: "1", SUB_WRITES: "2"},
        {CALLER_WRITES: "0", SUB_WRITES: "1"},
        {CALLER_WRITES: "0"},  # refused by the caller's own limit: the subscription's counter was not touched
    ]
    refused = answers[2]
    assert refused.headers["Retry-After"] == "50"
    assert refused.json()["error"]["code"] == "TooManyRequests"
    assert refused.headers["x-ms-request-id"]  # the ARM protocol headers as on any answer
    # Then the refused PUT did nothing: no node dgx-2
    assert api.request(ADMIN, "GET", f"{NODES}/dgx-2").status_code == 404


def test_a_read_carries_the_read_headers_only_and_errors_carry_them_too(api: Api) -> None:
    missing = api.request(ADMIN, "GET", f"{NODES}/nope")
    assert missing.status_code == 404 and remaining(missing) == {CALLER_READS: "3", SUB_READS: "4"}
    bad = api.request(ADMIN, "PUT", f"{NODES}/dgx-1", content=b"{not json")
    assert bad.status_code == 400 and remaining(bad) == {CALLER_WRITES: "1", SUB_WRITES: "2"}


def test_the_limit_is_checked_before_permission_and_a_refused_request_still_counts(api: Api) -> None:
    # a caller without the role: 403 (audited) while within its budget, then 429 before any permission check
    first = [api.request(NO_ROLE, "DELETE", f"{NODES}/dgx-1") for _ in range(3)]
    assert [r.status_code for r in first] == [403, 403, 429]
    denied = [e for e in api.repos.audit.page(SUB, None, None, None, 100, None).items if e.outcome == "Denied"]
    assert len(denied) == 2
    # the refused one counted in the subscription's budget: one write left there for everyone
    assert remaining(api.request(BOB, "PUT", f"{NODES}/dgx-1", json=node_body()))[SUB_WRITES] == "0"


def test_the_next_minute_admits_again(api: Api) -> None:
    for i in range(3):
        api.request(ADMIN, "PUT", f"{NODES}/dgx-{i}", json=node_body())
    api.clock.advance(50)
    again = api.request(ADMIN, "PUT", f"{NODES}/dgx-9", json=node_body())
    assert again.status_code == 201 and remaining(again) == {CALLER_WRITES: "1", SUB_WRITES: "2"}


def test_a_stranger_is_counted_on_its_own_budget_and_sees_no_subscription_figure(api: Api) -> None:
    probes = [api.request(STRANGER, "GET", f"{NODES}/dgx-1") for _ in range(5)]
    assert [p.status_code for p in probes] == [404, 404, 404, 404, 429]
    assert [remaining(p) for p in probes[:2]] == [{CALLER_READS: "3"}, {CALLER_READS: "2"}]
    assert remaining(api.request(ADMIN, "GET", f"{NODES}/dgx-1"))[SUB_READS] == "4"


def test_requests_that_are_not_counted(api: Api) -> None:
    # no principal (API Gateway's authorizer did not pass it): 401, uncounted
    assert [api.request(None, "GET", f"{NODES}/dgx-1").status_code for _ in range(6)] == [401] * 6
    # the provider's operations list names no subscription: uncounted, no headers
    listed = [api.request(ADMIN, "GET", "/providers/ITL.Accelerator/operations") for _ in range(6)]
    assert {r.status_code for r in listed} == {200} and not any(remaining(r) for r in listed)
    # an invalid subscription id: the route's own 400, uncounted
    bad = api.request(ADMIN, "GET", "/subscriptions/not%20valid!/providers/ITL.Accelerator/sparkNodes")
    assert bad.status_code == 400 and not remaining(bad)
    # refused by the protocol checks before any route (unknown api-version): uncounted
    version = api.request(ADMIN, "GET", f"{NODES}/dgx-1", params={"api-version": "1999-01-01"})
    assert version.status_code == 400 and not remaining(version)
    # so the caller's whole budget is still there
    assert remaining(api.request(ADMIN, "GET", f"{NODES}/dgx-1")) == {CALLER_READS: "3", SUB_READS: "4"}


def test_with_every_limit_off_nothing_is_counted_or_reported() -> None:
    api = Api(subscription_reads=0, subscription_writes=0, caller_reads=0, caller_writes=0)
    answers = [api.request(ADMIN, "PUT", f"{NODES}/dgx-{i}", json=node_body()) for i in range(10)]
    assert {a.status_code for a in answers} == {201} and not any(remaining(a) for a in answers)
    assert api.state.rate_counters == {}


def test_the_429_body_is_an_arm_error(api: Api) -> None:
    for _ in range(2):
        api.request(ADMIN, "POST", NODES, json={"name": "x", **node_body()})
    refused = api.request(ADMIN, "POST", NODES, json={"name": "y", **node_body()})
    body = refused.json()
    assert refused.status_code == 429 and set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert json.dumps(body).count("Retry after 50 seconds") == 1
