"""The roll-ups' ``BatchWriteItem``s (repositories/dynamodb/usage.py ``put_rollups``): what DynamoDB leaves
unprocessed is sent again at once, alone, in batches of 25; a batch still unprocessed after its attempts is
``StoreBusy`` (the schedule's run ends and the next one rolls the hour up again)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from itl_accelerator.billing.rollup import Rollup, Totals
from itl_accelerator.repositories.dynamodb.usage import ROLLUP_WRITE_ATTEMPTS, DynamoUsageRepository
from itl_accelerator.repositories.errors import StoreBusy


class Throttling:
    """``batch_write_item`` leaving the first item of each request unprocessed ``times`` times."""

    def __init__(self, times: int):
        self.times = times
        self.calls: list[int] = []

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        (requests,) = RequestItems.values()
        self.calls.append(len(requests))
        if len(self.calls) <= self.times:
            return {"UnprocessedItems": {"t": requests[:1]}}
        return {"UnprocessedItems": {}}


def rollups(count: int) -> list[Rollup]:
    return [Rollup("sub-1", f"scope-{i}", "2025-03-10T10", Totals(gpu_seconds=i), 0) for i in range(count)]


def test_what_dynamodb_leaves_unprocessed_is_sent_again_alone():
    client = Throttling(times=2)
    DynamoUsageRepository(SimpleNamespace(client=client, name="t")).put_rollups(rollups(30))  # type: ignore[arg-type]
    assert client.calls == [25, 1, 1, 5]


def test_a_batch_left_unprocessed_past_its_attempts_is_store_busy():
    client = Throttling(times=99)
    with pytest.raises(StoreBusy, match="stayed unprocessed"):
        DynamoUsageRepository(SimpleNamespace(client=client, name="t")).put_rollups(rollups(3))  # type: ignore[arg-type]
    assert client.calls == [3] + [1] * (ROLLUP_WRITE_ATTEMPTS - 1)
