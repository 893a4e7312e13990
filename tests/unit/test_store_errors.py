"""How the store reports a cancelled transaction: by position for failed conditions, as StoreBusy for conflicts
and throttling (nothing written, safe to retry) — never by matching message text."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from itl_accelerator.store.dynamodb import DynamoStore, StoreBusy, TransactionFailed


class _Refusing:
    def __init__(self, code: str, reasons: list[dict] | None = None):
        self.error = ClientError(
            {"Error": {"Code": code, "Message": "irrelevant"}, "CancellationReasons": reasons or []},
            "TransactWriteItems",
        )

    def transact_write_items(self, **_: object) -> None:
        raise self.error


def test_failed_conditions_are_reported_by_position_with_the_old_item():
    store = DynamoStore(
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
        DynamoStore(_Refusing(code, reasons), "t").transact([{}, {}])


def test_other_errors_pass_through():
    with pytest.raises(ClientError):
        DynamoStore(_Refusing("ValidationException"), "t").transact([{}])
