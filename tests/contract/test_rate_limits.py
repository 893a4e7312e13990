"""RateLimitRepository: one counter per subscription, kind, one-minute window and caller (or every caller), counted
atomically and never past its limit — concurrent requests each get a count of their own, none is lost, and a request
at the limit counts nothing."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from itl_accelerator.domain.rate_limits import WINDOW_SECONDS, RateCounter, RequestKind
from itl_accelerator.repositories.protocols import Repositories

#: 2024-05-01T00:10:00Z, a window's start.
WINDOW = 1714522200


def test_a_counter_starts_at_one_and_counts_each_request(repos: Repositories, sub: str) -> None:
    counter = RateCounter(sub, RequestKind.WRITES, WINDOW)
    assert [repos.rate_limits.take(counter, 100) for _ in range(4)] == [1, 2, 3, 4]


def test_counters_of_other_kinds_windows_callers_and_subscriptions_are_apart(repos: Repositories, sub: str) -> None:
    base = RateCounter(sub, RequestKind.WRITES, WINDOW)
    repos.rate_limits.take(base, 100)
    repos.rate_limits.take(base, 100)
    others = [
        RateCounter(sub, RequestKind.READS, WINDOW),
        RateCounter(sub, RequestKind.WRITES, WINDOW + WINDOW_SECONDS),
        RateCounter(sub, RequestKind.WRITES, WINDOW, "alice"),
        RateCounter(sub, RequestKind.WRITES, WINDOW, "Alice"),  # token subjects are case-sensitive
        RateCounter(f"{sub}-2", RequestKind.WRITES, WINDOW),
    ]
    assert [repos.rate_limits.take(c, 100) for c in others] == [1, 1, 1, 1, 1]
    assert repos.rate_limits.take(base, 100) == 3


def test_a_subscription_is_one_whatever_its_casing(repos: Repositories, sub: str) -> None:
    repos.rate_limits.take(RateCounter(sub.upper(), RequestKind.READS, WINDOW, "alice"), 100)
    assert repos.rate_limits.take(RateCounter(sub, RequestKind.READS, WINDOW, "alice"), 100) == 2


def test_any_caller_subject_is_a_counter_of_its_own(repos: Repositories, sub: str) -> None:
    subjects = ["a#b", "user@example.com", "ünïcødé", "x" * 1024, "service-account-ci"]
    for subject in subjects:
        repos.rate_limits.take(RateCounter(sub, RequestKind.READS, WINDOW, subject), 100)
    assert [repos.rate_limits.take(RateCounter(sub, RequestKind.READS, WINDOW, s), 100) for s in subjects] == [2] * 5


def test_concurrent_requests_each_get_a_count_of_their_own(repos: Repositories, sub: str) -> None:
    counter = RateCounter(sub, RequestKind.WRITES, WINDOW, "alice")
    with ThreadPoolExecutor(max_workers=8) as pool:
        counts = list(pool.map(lambda _: repos.rate_limits.take(counter, 100), range(24)))
    assert sorted(counts) == list(range(1, 25))


def test_at_the_limit_nothing_is_counted_and_a_count_handed_back_frees_one(repos: Repositories, sub: str) -> None:
    counter = RateCounter(sub, RequestKind.WRITES, WINDOW, "alice")
    assert [repos.rate_limits.take(counter, 3) for _ in range(5)] == [1, 2, 3, None, None]
    assert repos.rate_limits.take(counter, 10) == 4  # the two refused left no trace
    repos.rate_limits.give_back(counter)
    assert repos.rate_limits.take(counter, 4) == 4


def test_racing_requests_never_pass_the_limit(repos: Repositories, sub: str) -> None:
    counter = RateCounter(sub, RequestKind.READS, WINDOW)
    with ThreadPoolExecutor(max_workers=8) as pool:
        counts = list(pool.map(lambda _: repos.rate_limits.take(counter, 10), range(24)))
    assert sorted(c for c in counts if c is not None) == list(range(1, 11)) and counts.count(None) == 14


def test_the_table_keeps_counters_in_their_own_partition_with_a_ttl(
    dynamodb_backend: Repositories, moto_dynamodb: Any, sub: str
) -> None:
    # DynamoDB only: the item the policy and the TTL rely on
    dynamodb_backend.rate_limits.take(RateCounter(sub.upper(), RequestKind.READS, WINDOW, "alice"), 100)
    dynamodb_backend.rate_limits.take(RateCounter(sub, RequestKind.READS, WINDOW), 100)
    table = moto_dynamodb.list_tables()["TableNames"]
    items = []
    for name in table:
        items += moto_dynamodb.scan(TableName=name)["Items"]
    mine = sorted((i for i in items if i["PK"]["S"] == f"SUB#{sub}#RATE"), key=lambda i: i["SK"]["S"])
    assert [i["SK"]["S"] for i in mine] == [
        "reads#2024-05-01T00:10",
        "reads#2024-05-01T00:10#CALLER#2bd806c97f0e00af1a1fc3328fa763a9269723c8db8fac4f93af71db186d6e90",
    ]
    assert {int(i["ttl"]["N"]) for i in mine} == {WINDOW + WINDOW_SECONDS + 300}
    assert {i["entityType"]["S"] for i in mine} == {"RateCounter"}
