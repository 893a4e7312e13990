"""Spending quotes: a tool that spends money acts only when called again with the id of the quote it gave.

A quote id is stateless, so it holds across Lambda invocations and execution environments: ``q1.<payload>.<mac>``,
the payload (base64url JSON) binding the caller's subject, the tool, a SHA-256 of the exact arguments (all but
``quoteId``), the price it quoted and an expiry; the mac an HMAC-SHA256 of the payload under the server's quote key
(settings: ``ITL_MCP_QUOTE_SECRET`` or the Secrets Manager secret ``ITL_MCP_QUOTE_SECRET_ID``; a random key per
process without either). A quote cannot be reused for other arguments, another tool or another user, nor after it
expires; reusing it for the same call is harmless, since the API refuses a second job or instance of the same name.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

_PREFIX = "q1"


def arguments_digest(tool: str, arguments: dict[str, Any]) -> str:
    """SHA-256 (hex) of the tool name and its arguments other than ``quoteId``, in canonical JSON."""
    body = {k: v for k, v in arguments.items() if k != "quoteId" and v is not None}
    text = json.dumps({"tool": tool, "arguments": body}, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class QuoteRejected(Exception):
    """A quote id that does not hold for this call; the message says why (expired, other arguments, ...)."""


@dataclass(frozen=True)
class QuoteClaims:
    """What a quote id binds: ``subject``, ``tool``, ``digest`` (:func:`arguments_digest`), ``expires`` (epoch
    seconds) and ``terms`` (the price it quoted, compared again when it is accepted)."""

    subject: str
    tool: str
    digest: str
    expires: int
    terms: dict[str, Any]


class QuoteSigner:
    """Issues and checks quote ids with ``key`` (bytes); ``ttl_seconds`` is how long one may be accepted."""

    def __init__(self, key: bytes, ttl_seconds: int = 600, clock: Callable[[], float] = time.time):
        if len(key) < 32:
            raise ValueError("a quote key has at least 32 bytes")
        self._key, self.ttl_seconds, self._clock = key, ttl_seconds, clock

    @classmethod
    def ephemeral(cls, ttl_seconds: int = 600) -> QuoteSigner:
        """A signer with a random key (quotes hold within this process only)."""
        return cls(secrets.token_bytes(32), ttl_seconds)

    def issue(self, subject: str, tool: str, arguments: dict[str, Any], terms: dict[str, Any]) -> tuple[str, int]:
        """``(quote id, expiry in epoch seconds)`` for ``subject`` calling ``tool`` with ``arguments``."""
        expires = int(self._clock()) + self.ttl_seconds
        payload = {"s": subject, "t": tool, "d": arguments_digest(tool, arguments), "e": expires, "p": terms}
        body = _b64(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode())
        return f"{_PREFIX}.{body}.{self._mac(body)}", expires

    def check(self, quote_id: str, subject: str, tool: str, arguments: dict[str, Any]) -> QuoteClaims:
        """The claims of a quote id that holds for this call; :class:`QuoteRejected` saying why otherwise."""
        parts = quote_id.split(".") if isinstance(quote_id, str) else []
        if len(parts) != 3 or parts[0] != _PREFIX or not hmac.compare_digest(self._mac(parts[1]), parts[2]):
            raise QuoteRejected("The quote id is not one this server issued (or it was altered). Ask for a new quote.")
        try:
            payload = json.loads(_unb64(parts[1]))
            claims = QuoteClaims(payload["s"], payload["t"], payload["d"], int(payload["e"]), dict(payload["p"]))
        except (ValueError, KeyError, TypeError):
            raise QuoteRejected("The quote id is malformed. Ask for a new quote.") from None
        if claims.subject != subject:
            raise QuoteRejected("The quote was issued to another user. Ask for a new quote.")
        if claims.tool != tool:
            raise QuoteRejected(f"The quote was issued for {claims.tool}, not {tool}. Ask for a new quote.")
        if claims.digest != arguments_digest(tool, arguments):
            raise QuoteRejected(
                "The arguments differ from the ones quoted: a quote holds for exactly the arguments it was given. "
                "Call again without quoteId for a quote of these arguments."
            )
        if self._clock() > claims.expires:
            raise QuoteRejected("The quote has expired. Call again without quoteId for a new quote.")
        return claims

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode(), hashlib.sha256).digest())


class QuoteLedger(Protocol):
    """Where spent quotes are recorded: each quote id is spent at most once."""

    def spend(self, quote_id: str, expires: int) -> bool:
        """Record ``quote_id`` (valid until ``expires``, epoch seconds) as spent: True the first time, False when it
        was spent already. Atomic: of racing spends of one quote exactly one is True."""
        ...


def quote_key(quote_id: str) -> str:
    """What a ledger keeps of a quote: the SHA-256 (hex) of its id (the id itself is a bearer of money)."""
    return hashlib.sha256(quote_id.encode()).hexdigest()


class MemoryQuoteLedger:
    """:class:`QuoteLedger` in this process's memory; expired quotes are forgotten (``clock`` epoch seconds)."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self._spent: dict[str, int] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def spend(self, quote_id: str, expires: int) -> bool:
        key, now = quote_key(quote_id), self._clock()
        with self._lock:
            for old in [k for k, until in self._spent.items() if until < now]:
                del self._spent[old]
            if key in self._spent:
                return False
            self._spent[key] = expires
            return True


class DynamoQuoteLedger:
    """:class:`QuoteLedger` in the provider's table: item ``SYS#MCPQUOTE#{h[0]}`` / ``{h}`` (``h`` =
    :func:`quote_key`), put only if absent, removed by the table's TTL after the quote expired. Sixteen partitions
    by the key's first hex digit (template.yaml's ``McpQuoteLedgerPolicy`` grants ``PutItem`` on them alone).
    ``client``: a boto3 DynamoDB client (made on first use when not given)."""

    PARTITION = "SYS#MCPQUOTE#"

    def __init__(self, table_name: str, client: Any = None):
        self._table, self._client = table_name, client

    def spend(self, quote_id: str, expires: int) -> bool:
        if self._client is None:
            import boto3

            self._client = boto3.client("dynamodb")
        key = quote_key(quote_id)
        try:
            self._client.put_item(
                TableName=self._table,
                Item={
                    "PK": {"S": f"{self.PARTITION}{key[0]}"},
                    "SK": {"S": key},
                    "entityType": {"S": "McpQuoteSpent"},
                    "ttl": {"N": str(int(expires) + 3600)},
                },
                ConditionExpression="attribute_not_exists(PK)",
            )
        except self._client.exceptions.ConditionalCheckFailedException:
            return False
        return True


#: The ledger of this process (the stdio server; a server built without one): quotes spent here are spent for it.
PROCESS_LEDGER = MemoryQuoteLedger()


def process_ledger() -> QuoteLedger:
    """:data:`PROCESS_LEDGER`."""
    return PROCESS_LEDGER
