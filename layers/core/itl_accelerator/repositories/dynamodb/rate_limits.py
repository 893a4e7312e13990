"""Request counters in the table (item type ``RateCounter``: ``SUB#{sub}#RATE`` / ``{kind}#{minute}[#CALLER#{hash}]``,
keys.py; domain/rate_limits.py): ``n`` requests so far in the window, and ``ttl`` (epoch seconds) a few minutes after
the window's end, so DynamoDB deletes spent counters on its own (within days; nothing reads an old window).

One request is one ``UpdateItem`` — ``SET n = if_not_exists(n, 0) + 1`` on the condition ``n < limit``, returning
the new ``n`` — which DynamoDB applies atomically: concurrent requests each get their own count, none is lost (no
read-modify-write), and a request the limit refuses changes nothing (its condition failed). Handing a count back
(the other limit refused the request) is one ``UpdateItem`` ``SET n = n - 1``.
"""

from __future__ import annotations

from itl_accelerator.domain.rate_limits import WINDOW_SECONDS, RateCounter
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.dynamodb.codec import typed
from itl_accelerator.repositories.dynamodb.table import Table

#: How long a counter outlives its window (seconds) before its TTL lets DynamoDB delete it.
TTL_AFTER_WINDOW_SECONDS = 5 * 60


class DynamoRateLimitRepository:
    """:class:`~itl_accelerator.repositories.protocols.RateLimitRepository` over the table."""

    def __init__(self, table: Table):
        self._t = table

    def take(self, counter: RateCounter, limit: int) -> int | None:
        expires = counter.window_start + WINDOW_SECONDS + TTL_AFTER_WINDOW_SECONDS
        try:
            updated = self._t.update_item(
                keys.rate_counter_pk(counter.subscription_id),
                keys.rate_counter_sk(counter.kind, counter.window_start, counter.caller),
                UpdateExpression="SET n = if_not_exists(n, :zero) + :one, #ttl = :ttl, entityType = :type",
                ConditionExpression="attribute_not_exists(n) OR n < :limit",
                ExpressionAttributeNames={"#ttl": "ttl"},
                ExpressionAttributeValues=typed(
                    {":zero": 0, ":one": 1, ":ttl": expires, ":type": "RateCounter", ":limit": limit}
                ),
                ReturnValues="UPDATED_NEW",
            )
        except self._t.client.exceptions.ConditionalCheckFailedException:
            return None
        return int(updated["n"])

    def give_back(self, counter: RateCounter) -> None:
        try:
            self._t.update_item(
                keys.rate_counter_pk(counter.subscription_id),
                keys.rate_counter_sk(counter.kind, counter.window_start, counter.caller),
                UpdateExpression="SET n = n - :one",
                ConditionExpression="n > :zero",
                ExpressionAttributeValues=typed({":zero": 0, ":one": 1}),
            )
        except self._t.client.exceptions.ConditionalCheckFailedException:
            return  # nothing counted there (a window that ended meanwhile): nothing to give back
