"""Lambda's DynamoDB event source mappings, locally: the table's stream (moto keeps it) read on a thread and
delivered in batches to the functions template.yaml subscribes to it, as Lambda does.

What Lambda does and this does too: records in stream order; a mapping's ``FilterCriteria`` applied before a batch
is formed (EventBridge patterns: literal values, ``prefix``, ``exists``; anything else is refused when the poller
starts, so a pattern this cannot judge never silently passes); batches of at most ``BatchSize`` records gathered
for at most ``MaximumBatchingWindowInSeconds``; ``StartingPosition: LATEST`` (records written after the poller
started); a batch whose function raises is delivered again, up to ``MaximumRetryAttempts``, then dropped with a log
line (AWS would send it to an on-failure destination). Batches of one mapping are delivered one at a time.

moto keeps every stream record for ever: :func:`itl_local.aws.trim_stream` drops those every mapping has read, so
memory stays bounded however long the stack runs. Local runtime only: nothing here is shipped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore.config import Config

from itl_local.console import Console
from itl_local.lambda_runtime import invoke
from itl_local.template import StreamMapping, Template, load_handler

log = logging.getLogger("itl_local.streams")
#: Records read per GetRecords call.
READ_LIMIT = 1000
#: Seconds between two reads of the stream when it had nothing new.
POLL_SECONDS = 0.1
#: Seconds before a failed batch is delivered again.
RETRY_SECONDS = 1.0
_OPERATORS = frozenset({"prefix", "exists"})


def matches(pattern: Any, value: Any, present: bool = True) -> bool:
    """Whether a record (or part of it) ``value`` matches an EventBridge-style ``pattern``: a dict of nested
    patterns, or at a leaf a list of allowed literals and ``{"prefix": s}`` / ``{"exists": bool}`` conditions."""
    if isinstance(pattern, dict):
        if not present:  # an absent object: only conditions an absent field meets ({"exists": false}) hold
            value = {}
        if not isinstance(value, dict):
            return False
        return all(matches(sub, value.get(name), name in value) for name, sub in pattern.items())
    if isinstance(pattern, list):
        for option in pattern:
            if isinstance(option, dict):
                (operator, operand), *_ = option.items()
                if operator == "prefix" and isinstance(value, str) and value.startswith(operand):
                    return True
                if operator == "exists" and present == bool(operand):
                    return True
            elif present and value == option:
                return True
        return False
    raise ValueError(f"a filter pattern's leaves are lists, not {pattern!r}")


def check_pattern(pattern: Any) -> None:
    """Refuse a pattern :func:`matches` cannot judge (an operator other than ``prefix``/``exists``)."""
    if isinstance(pattern, dict):
        for sub in pattern.values():
            check_pattern(sub)
        return
    if not isinstance(pattern, list):
        raise ValueError(f"a filter pattern's leaves are lists, not {pattern!r}")
    for option in pattern:
        if isinstance(option, dict) and (len(option) != 1 or next(iter(option)) not in _OPERATORS):
            raise ValueError(f"filter operator {option!r} is not supported locally (only {sorted(_OPERATORS)})")


@dataclass
class _Delivery:
    """One mapping's state: records waiting for a batch, when the first of them arrived, failed attempts."""

    mapping: StreamMapping
    handler: Any
    pending: list[dict[str, Any]] = field(default_factory=list)
    since: float | None = None
    attempts: int = 0
    retry_at: float = 0.0


class StreamPoller:
    """Reads ``table_name``'s stream and delivers it to the template's stream mappings (module docstring).

    ``trim(sequence_number)`` (optional) is called with the last sequence number every mapping has taken in, so
    the embedded AWS can forget those records; ``console`` shows one line per delivered batch."""

    def __init__(
        self,
        template: Template,
        table_name: str,
        *,
        console: Console | None = None,
        trim: Callable[[str], None] | None = None,
        client: Any | None = None,
    ):
        self.table_name = table_name
        self.console = console
        self.trim = trim
        self.mappings = template.stream_mappings()
        for mapping in self.mappings:
            for pattern in mapping.filters:
                check_pattern(pattern)
        # botocore addresses DynamoDB Streams by account (https://{account}.streams-ddb...), which moto does not
        # serve: the service's regional endpoint instead
        self._client = client or boto3.client("dynamodbstreams", config=Config(account_id_endpoint_mode="disabled"))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._deliveries = [_Delivery(m, load_handler(m.handler)) for m in self.mappings]
        self._iterators: dict[str, str] = {}

    # ----------------------------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Take the stream's position now (LATEST) and start delivering on a daemon thread."""
        if not self.mappings:
            return
        stream_arn = self._stream_arn()
        description = self._client.describe_stream(StreamArn=stream_arn)["StreamDescription"]
        for shard in description.get("Shards", []):
            self._iterators[shard["ShardId"]] = self._client.get_shard_iterator(
                StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="LATEST"
            )["ShardIterator"]
        self._thread = threading.Thread(target=self._run, name="stream-poller", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Whether every record read so far was delivered within ``timeout`` seconds (for tests)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(not d.pending for d in self._deliveries):
                return True
            time.sleep(0.05)
        return False

    def _stream_arn(self) -> str:
        dynamodb = boto3.client("dynamodb")
        return str(dynamodb.describe_table(TableName=self.table_name)["Table"]["LatestStreamArn"])

    # ----------------------------------------------------------------------------------------------- loop
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                read = self._read()
                delivered = self._deliver()
            except Exception:
                log.exception("Stream poller failed; retrying")
                read, delivered = 0, False
            if not read and not delivered:
                self._stop.wait(POLL_SECONDS)

    def _read(self) -> int:
        count = 0
        for shard, iterator in list(self._iterators.items()):
            response = self._client.get_records(ShardIterator=iterator, Limit=READ_LIMIT)
            records = response.get("Records", [])
            self._iterators[shard] = response.get("NextShardIterator") or iterator
            for record in records:
                for delivery in self._deliveries:
                    patterns = delivery.mapping.filters
                    if not patterns or any(matches(p, record) for p in patterns):
                        delivery.since = delivery.since or time.monotonic()
                        delivery.pending.append(record)
            count += len(records)
            if records and self.trim is not None:
                self.trim(str(records[-1]["dynamodb"]["SequenceNumber"]))
        return count

    def _deliver(self) -> bool:
        delivered = False
        now = time.monotonic()
        for delivery in self._deliveries:
            mapping = delivery.mapping
            if not delivery.pending or now < delivery.retry_at:
                continue
            full = len(delivery.pending) >= mapping.batch_size
            if not full and now - (delivery.since or now) < mapping.batching_window_seconds:
                continue
            batch = delivery.pending[: mapping.batch_size]
            started = time.perf_counter()
            outcome = "ok"
            try:
                invoke(delivery.handler, {"Records": batch}, mapping.function_id, mapping.timeout_seconds)
            except Exception as exc:
                outcome = type(exc).__name__
                delivery.attempts += 1
                log.exception("Stream batch failed", extra={"function": mapping.function_id})
                if 0 <= mapping.maximum_retry_attempts < delivery.attempts:
                    log.error("Stream batch dropped after its retries", extra={"function": mapping.function_id})
                    outcome += " (dropped)"
                else:
                    delivery.retry_at = time.monotonic() + RETRY_SECONDS
                    self._show(mapping, len(batch), outcome, started)
                    continue
            del delivery.pending[: len(batch)]
            delivery.attempts = 0
            delivery.since = time.monotonic() if delivery.pending else None
            delivered = True
            self._show(mapping, len(batch), outcome, started)
        return delivered

    def _show(self, mapping: StreamMapping, records: int, outcome: str, started: float) -> None:
        if self.console is not None:
            self.console.stream(mapping.function_id, records, outcome, (time.perf_counter() - started) * 1000)
