"""How the DynamoDB table reports a cancelled transaction: by position for failed conditions, as StoreBusy for conflicts
and throttling (nothing written, safe to retry) — never by matching message text."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from itl_accelerator.repositories.dynamodb.codec import MAX_ITEM_BYTES, item_size
from itl_accelerator.repositories.dynamodb.table import Table, TransactionFailed
from itl_accelerator.repositories.errors import ItemTooLarge, StoreBusy


class _Refusing:
    def __init__(self, code: str, reasons: list[dict] | None = None):
        self.error = ClientError(
            {"Error": {"Code": code, "Message": "irrelevant"}, "CancellationReasons": reasons or []},
            "TransactWriteItems",
        )

    def transact_write_items(self, **_: object) -> None:
        raise self.error


def test_failed_conditions_are_reported_by_position_with_the_old_item():
    store = Table(
        _Refusing(
            "TransactionCanceledException",
            [{"Code": "None"}, {"Code": "ConditionalCheckFailed", "Item": {"etag": {"S": '"x"'}}}],
        ),
        "t",
    )
    with pytest.raises(TransactionFailed) as caught:
        store.transact([{}, {}])
    assert caught.value.failed == {1: {"etag": '"x"'}}


@pytest.mark.parametrize(
    ("code", "reasons"),
    [
        ("TransactionCanceledException", [{"Code": "None"}, {"Code": "TransactionConflict"}]),
        ("TransactionCanceledException", [{"Code": "ThrottlingError"}]),
        ("ProvisionedThroughputExceededException", None),
        ("TransactionInProgressException", None),
    ],
)
def test_conflicts_and_throttling_are_store_busy(code, reasons):
    with pytest.raises(StoreBusy):
        Table(_Refusing(code, reasons), "t").transact([{}, {}])


def test_other_errors_pass_through():
    with pytest.raises(ClientError):
        Table(_Refusing("ValidationException"), "t").transact([{}])


def test_an_item_beyond_dynamodbs_size_is_refused_before_anything_is_sent():
    class _Untouchable:
        def transact_write_items(self, **_: object) -> None:
            raise AssertionError("nothing may be sent")

    big = {"PK": {"S": "SUB#s"}, "SK": {"S": "X"}, "doc": {"S": "é" * (MAX_ITEM_BYTES // 2)}}
    assert item_size(big) > MAX_ITEM_BYTES  # 2 UTF-8 bytes a character
    with pytest.raises(ItemTooLarge) as caught:
        Table(_Untouchable(), "t").transact([{"Put": {"TableName": "t", "Item": big}}])
    assert caught.value.size == item_size(big)


def test_item_size_counts_as_dynamodb_does():
    # names and string values by UTF-8 bytes; numbers by digits; nested maps and lists with their overhead
    assert item_size({"ab": {"S": "€"}}) == 2 + 3
    assert item_size({"n": {"N": "12345"}}) == 1 + 4
    assert item_size({"m": {"M": {"k": {"S": "v"}}}}) == 1 + 3 + 2
    assert item_size({"l": {"L": [{"BOOL": True}, {"NULL": True}]}}) == 1 + 3 + 2 + 2
