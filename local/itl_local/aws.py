"""The embedded AWS: moto's server on loopback, with the table created from template.yaml's own definition.

Clients reach it through ``AWS_ENDPOINT_URL`` (read by boto3 itself), so handlers run unchanged.
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
import re
import threading
from pathlib import Path
from typing import Any

import boto3
from moto.server import ThreadedMotoServer

from itl_local.template import Template

REGION = "us-east-1"


#: Environment for boto3 against the embedded AWS (fake credentials: moto accepts any).
def aws_environment(port: int) -> dict[str, str]:
    """Variables that point boto3 at the embedded AWS on ``127.0.0.1:{port}``."""
    return {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        # moto's Step Functions interpreter calls Lambda at http://localhost:{MOTO_PORT} in server mode
        "MOTO_PORT": str(port),
    }


_WRITE_LOCK = threading.RLock()
_MUTATORS = (
    "put_item",
    "update_item",
    "delete_item",
    "transact_write_items",
    "batch_write_item",
    # PartiQL: moto reads ``Table.all_items`` and then writes item by item
    "execute_statement",
    "execute_transaction",
    "batch_execute_statement",
)
#: Reads iterate moto's item dicts, which a concurrent write mutates ("dictionary changed size during iteration"):
#: they take the same lock. (DynamoDB's reads never fail that way.)
_READERS = ("get_item", "query", "scan", "batch_get_item", "transact_get_items")
#: Methods that return one live item, which moto serializes after the call: they return a copy taken under the lock,
#: so an answer is the item as this call left it (DynamoDB's ``ReturnValues``, a consistent ``GetItem``).
_SNAPSHOT = ("update_item", "get_item")


def make_dynamodb_faithful() -> None:
    """Make moto's DynamoDB behave as DynamoDB does under concurrency and at size. Idempotent.

    1. Writes are atomic. moto evaluates a condition and applies the write in separate steps without a lock, so
       two threads can both pass ``allocated <= total - requested`` and over-commit a node — something DynamoDB
       never allows (each conditional write and each transaction is atomic and serializable). One process-wide
       lock around moto's backend methods restores that guarantee locally (reads take it too: moto iterates the
       item dicts a concurrent write changes), and an update's or a read's item is answered as a copy taken under
       it (moto serializes the live item after the call: two concurrent counter updates could both answer the
       second one's value).
    2. A transaction costs what it touches. moto backs up the *whole table* before every
       ``TransactWriteItems`` (one ``deepcopy`` of the table per item of the transaction) so it can roll back;
       under the write lock that makes every transaction wait O(table size) for every other one, and a busy
       local stack or test session queued requests for tens of seconds. Here the backup is of the items the
       transaction touches only, restored when moto cancels it — the same all-or-nothing outcome.

    3. A Query costs what it finds. moto answers every Query, on the table or on a GSI, by scanning every item of
       the table (``Table.all_items``), under the lock above: in a long test session or a busy stack every
       reconciler, tracker and placement read cost O(table) and queued the requests behind it (a 5,000-item table:
       84 ms a Query). Here a Query is handed only its partition's items — the table's own partition, or a GSI
       partition kept up to date on every write (:class:`_GsiPartitions`) — and moto does the rest (range
       conditions, sorting, paging, filters, projection) as before, so the answer is the same.

    All rely on ``DynamoDBBackend``, ``Table`` and ``moto.dynamodb.models.copy`` (internals: moto is pinned, and
    tests/integration/test_local_runtime_fidelity.py fails when they move).
    """
    from moto.dynamodb import models

    _index_queries(models.Table, models.DynamoDBBackend)

    for name in (*_MUTATORS, *_READERS):
        original = getattr(models.DynamoDBBackend, name)
        if getattr(original, "_itl_serialized", False):
            continue
        if name == "transact_write_items":
            original = _rolled_back_by_item(original)

        def locked(
            self: Any, *args: Any, __original: Any = original, __snapshot: bool = name in _SNAPSHOT, **kwargs: Any
        ) -> Any:
            with _WRITE_LOCK:
                result = __original(self, *args, **kwargs)
                # moto answers from the live item, serialized after the lock is released: a concurrent update
                # could change it in between (two counters answering the same UPDATED_NEW value)
                return copy.deepcopy(result) if __snapshot and result is not None else result

        locked._itl_serialized = True  # type: ignore[attr-defined]
        setattr(models.DynamoDBBackend, name, locked)
    models.copy = _TableCopyShim  # type: ignore[attr-defined]


class _TableCopyShim:
    """Stands in for the ``copy`` module inside ``moto.dynamodb.models``: a ``Table`` is "copied" as itself (its
    touched items are backed up by :func:`_rolled_back_by_item` instead); everything else is deep-copied."""

    @staticmethod
    def deepcopy(value: Any, memo: dict[int, Any] | None = None) -> Any:
        from moto.dynamodb.models import Table

        return value if isinstance(value, Table) else copy.deepcopy(value, memo)


def _rolled_back_by_item(transact: Any) -> Any:
    """Wrap moto's ``transact_write_items``: back up each item the transaction names and put them back when it
    raises (moto's own whole-table rollback is a no-op under :class:`_TableCopyShim`), and drop the stream records
    moto wrote for the items it had applied before it cancelled (DynamoDB streams only committed changes)."""

    def run(self: Any, transact_items: list[dict[str, Any]]) -> None:
        backups = []
        # moto appends a stream record per item as it applies it: a cancelled transaction must leave none
        streams = {id(t): (t.stream_shard, len(t.stream_shard.items)) for t in self.tables.values() if t.stream_shard}
        for entry in transact_items:
            _, op = next(iter(entry.items()))
            table = _table_named(self, op.get("TableName")) if isinstance(op, dict) else None
            if table is None:
                continue
            key = op.get("Key") or {
                a: v for a, v in (op.get("Item") or {}).items() if a in (table.hash_key_attr, table.range_key_attr)
            }
            if table.hash_key_attr not in key or (table.range_key_attr and table.range_key_attr not in key):
                continue  # a malformed item: moto itself refuses the transaction, with nothing written
            hash_key, range_key = self.get_keys_value(table, key)
            backups.append((table, hash_key, range_key, copy.deepcopy(table.get_item(hash_key, range_key))))
        try:
            transact(self, transact_items)
        except Exception:
            for shard, length in streams.values():
                del shard.items[length:]
            for table, hash_key, range_key, item in reversed(backups):
                if range_key is None:
                    if item is None:
                        table.items.pop(hash_key, None)
                    else:
                        table.items[hash_key] = item
                elif item is None:
                    table.items[hash_key].pop(range_key, None)
                else:
                    table.items[hash_key][range_key] = item
                _GsiPartitions.of(table).reindex(hash_key, range_key)
            raise

    return run


class _GsiPartitions:
    """The partitions of one moto ``Table``'s GSIs: for each GSI, its hash key value(s) → the keys ``(PK, SK)`` of
    the items in that partition, kept in step with every write (:func:`_index_queries`). Built from the table on
    first use, and again when moto replaces the table's items (a restore). Items without every hash attribute of
    a GSI are not in it (DynamoDB's sparse indexes)."""

    def __init__(self, table: Any):
        self.table = table
        self.items_id = id(table.items)
        #: GSI name → its hash attributes, for the GSIs whose hash is not the table's own (those read partitions)
        self.hash_attrs: dict[str, tuple[str, ...]] = {}
        for index in table.global_indexes:
            attrs = tuple(k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH")
            if attrs and attrs != (table.hash_key_attr,):
                self.hash_attrs[index.name] = attrs
        self.partitions: dict[str, dict[tuple[Any, ...], dict[tuple[Any, Any], None]]] = {
            name: {} for name in self.hash_attrs
        }
        #: item key → the partition value it is filed under, per GSI
        self.filed: dict[tuple[Any, Any], dict[str, tuple[Any, ...]]] = {}
        for item in table.all_items():
            self._file(item.hash_key, item.range_key, item)

    @classmethod
    def of(cls, table: Any) -> _GsiPartitions:
        """The table's partitions, built (or rebuilt after moto replaced ``table.items``) when needed."""
        index: _GsiPartitions | None = table.__dict__.get("_itl_gsi_partitions")
        if index is None or index.items_id != id(table.items):
            index = cls(table)
            table.__dict__["_itl_gsi_partitions"] = index
        return index

    def _file(self, hash_key: Any, range_key: Any, item: Any) -> None:
        filed = {}
        for name, attrs in self.hash_attrs.items():
            values = tuple(item.attrs.get(a) for a in attrs)
            # only scalars key an index (DynamoDB refuses a list, set or map there; moto stores it, unhashable)
            if all(v is not None and v.type in ("S", "N", "B") for v in values):
                self.partitions[name].setdefault(values, {})[(hash_key, range_key)] = None
                filed[name] = values
        if filed:
            self.filed[(hash_key, range_key)] = filed

    def reindex(self, hash_key: Any, range_key: Any) -> None:
        """File the item at ``(hash_key, range_key)`` as it is now (gone, new or changed)."""
        key = (hash_key, range_key)
        for name, values in self.filed.pop(key, {}).items():
            partition = self.partitions[name].get(values)
            if partition is not None:
                partition.pop(key, None)
                if not partition:
                    del self.partitions[name][values]
        item = _stored_item(self.table, hash_key, range_key)
        if item is not None:
            self._file(key[0], key[1], item)

    def candidates(self, index_name: str, conditions: dict[str, Any]) -> list[Any] | None:
        """The items of one GSI partition, or None when this index cannot answer (moto then scans)."""
        attrs = self.hash_attrs.get(index_name)
        if attrs is None or set(conditions) != set(attrs):
            return None
        keys = self.partitions[index_name].get(tuple(conditions[a] for a in attrs), {})
        return [item for k in keys if (item := _stored_item(self.table, *k)) is not None]


def _stored_item(table: Any, hash_key: Any, range_key: Any) -> Any:
    """The item stored at a key, or None (without moto's ``defaultdict`` adding an empty partition)."""
    stored = table.items.get(hash_key)
    if stored is None or not table.range_key_attr:
        return stored
    return stored.get(range_key)


#: The partition handed to the Query running on this thread: ``table`` and its ``candidates`` (see _index_queries)
_QUERY_SCOPE = threading.local()


def _table_named(backend: Any, name: Any) -> Any:
    """The backend's table called ``name`` (its name or its ARN, as moto's ``get_table`` takes), or None."""
    from moto.dynamodb.exceptions import ResourceNotFoundException

    try:
        return backend.get_table(name) if isinstance(name, str) else None
    except ResourceNotFoundException:
        return None


def _partition_items(table: Any, hash_key: Any) -> list[Any]:
    stored = table.items.get(hash_key)
    if stored is None:
        return []
    return list(stored.values()) if table.range_key_attr else [stored]


def _index_queries(table_class: Any, backend_class: Any) -> None:
    """Hand each ``Table.query`` only the items of the partition it names, and keep the GSI partitions in step
    with ``Table.put_item``, ``Table.delete_item`` and ``DynamoDBBackend.update_item`` (which changes an item in
    place) — every path by which moto changes an item, transactions and batches included. Idempotent."""
    if getattr(table_class.query, "_itl_indexed", False):
        return
    query, put_item, delete_item = table_class.query, table_class.put_item, table_class.delete_item
    all_items = table_class.all_items
    update_item = backend_class.update_item
    query_signature = inspect.signature(query)

    def indexed_query(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = query_signature.bind(self, *args, **kwargs).arguments
        index_name = bound.get("index_name")
        with _WRITE_LOCK:
            candidates: list[Any] | None = None
            if not index_name:
                if bound.get("hash_key") is not None:
                    candidates = _partition_items(self, bound["hash_key"])
            elif index_name in {i.name for i in self.all_indexes()}:
                index = self.get_index(index_name)
                attrs = [k["AttributeName"] for k in index.schema if k["KeyType"] == "HASH"]
                conditions = dict(bound.get("hash_key_conditions") or [])
                if attrs == [self.hash_key_attr] and set(conditions) == {self.hash_key_attr}:
                    candidates = _partition_items(self, conditions[self.hash_key_attr])
                elif conditions:
                    candidates = _GsiPartitions.of(self).candidates(index_name, conditions)
            if candidates is None:
                return query(self, *args, **kwargs)
            _QUERY_SCOPE.table, _QUERY_SCOPE.candidates = self, candidates
            try:
                return query(self, *args, **kwargs)
            finally:
                _QUERY_SCOPE.table = _QUERY_SCOPE.candidates = None

    def scoped_all_items(self: Any) -> Any:
        # this thread's Query on this table sees its partition; any other caller (a Scan, PartiQL) the whole table
        if getattr(_QUERY_SCOPE, "table", None) is self:
            return _QUERY_SCOPE.candidates
        return all_items(self)

    def indexed_put_item(self: Any, *args: Any, **kwargs: Any) -> Any:
        with _WRITE_LOCK:
            item = put_item(self, *args, **kwargs)
            _GsiPartitions.of(self).reindex(item.hash_key, item.range_key)
            return item

    def indexed_delete_item(self: Any, hash_key: Any, range_key: Any) -> Any:
        with _WRITE_LOCK:
            try:
                return delete_item(self, hash_key, range_key)
            finally:
                _GsiPartitions.of(self).reindex(hash_key, range_key)

    def indexed_update_item(self: Any, table_name: str, key: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        with _WRITE_LOCK:
            try:
                return update_item(self, table_name, key, *args, **kwargs)
            finally:
                table = _table_named(self, table_name)
                try:
                    hash_key, range_key = self.get_keys_value(table, key)
                except Exception:  # noqa: BLE001 - no such table or a malformed key: moto changed nothing
                    table = None
                if table is not None:
                    _GsiPartitions.of(table).reindex(hash_key, range_key)

    indexed_query._itl_indexed = True  # type: ignore[attr-defined]
    indexed_query.__wrapped__ = query  # type: ignore[attr-defined]
    table_class.query = indexed_query
    table_class.all_items = scoped_all_items
    table_class.put_item = indexed_put_item
    table_class.delete_item = indexed_delete_item
    backend_class.update_item = indexed_update_item


def trim_stream(table_name: str, through_sequence_number: str) -> None:
    """Forget the stream records of ``table_name`` up to and including ``through_sequence_number``, which every
    local stream consumer has taken (itl_local.streams). moto keeps every record for ever otherwise; its sequence
    numbers are positions in one list from ``starting_sequence_number``, kept valid here by moving that start.
    Relies on moto's ``StreamShard`` internals (pinned; tests/integration/test_local_runtime_fidelity.py)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    with _WRITE_LOCK:
        table = dynamodb_backends[DEFAULT_ACCOUNT_ID][REGION].tables.get(table_name)
        shard = table.stream_shard if table is not None else None
        if shard is None:
            return
        count = int(through_sequence_number) - shard.starting_sequence_number + 1
        if count > 0:
            del shard.items[:count]
            shard.starting_sequence_number += count


class EmbeddedAws:
    """moto's threaded server plus the project's resources. ``start()`` / ``stop()``."""

    def __init__(self, port: int):
        self.port = port
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)

    def start(self) -> None:
        self.server.start()

    def configure(self, config: dict[str, Any]) -> None:
        """Set moto's configuration through its documented ``/moto-api/config`` endpoint."""
        import httpx

        httpx.post(f"http://127.0.0.1:{self.port}/moto-api/config", json=config, timeout=10).raise_for_status()

    def stop(self) -> None:
        self.server.stop()

    def client(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=f"http://127.0.0.1:{self.port}",
            region_name=REGION,
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )


def create_table(dynamodb: Any, template: Template, table_name: str) -> None:
    """Create the table exactly as template.yaml declares it (keys, attributes, GSIs, TTL)."""
    dynamodb.create_table(**template.table_definition(table_name))
    dynamodb.get_waiter("table_exists").wait(TableName=table_name)
    ttl = template.ttl_attribute()
    if ttl:
        dynamodb.update_time_to_live(
            TableName=table_name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl}
        )


def local_bucket_name(logical_id: str) -> str:
    """The embedded AWS's name of a template bucket: ``BillingExportBucket`` → ``itl-billing-export``."""
    words = re.findall(r"[A-Z][a-z0-9]*", logical_id.removesuffix("Bucket"))
    return "itl-" + "-".join(w.lower() for w in words)


def create_buckets(s3: Any, template: Template) -> dict[str, str]:
    """Create every S3 bucket the template declares (idempotent), with what it declares that has a local meaning:
    versioning, and Object Lock with its default retention (the export bucket: an exported version cannot be
    deleted or shortened before its retention ends, locally too). Returns logical id → local bucket name."""
    names = {logical_id: local_bucket_name(logical_id) for logical_id in template.buckets()}
    for logical_id, name in names.items():
        settings = template.bucket_settings(logical_id)
        lock = settings["object_lock"]
        s3.create_bucket(Bucket=name, **({"ObjectLockEnabledForBucket": True} if lock else {}))
        if settings["versioning"]:
            s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
        if lock:
            s3.put_object_lock_configuration(
                Bucket=name,
                ObjectLockConfiguration={"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": lock}},
            )
    return names


def local_event_bus_name(logical_id: str) -> str:
    """The embedded AWS's name of a template event bus: ``EventBus`` → ``itl-accelerator-events``."""
    words = re.findall(r"[A-Z][a-z0-9]*", logical_id.removesuffix("Bus").removesuffix("Event"))
    return "-".join(["itl-accelerator", *(w.lower() for w in words), "events"])


def create_event_buses(events: Any, template: Template) -> dict[str, str]:
    """Create every EventBridge bus the template declares (idempotent); returns logical id → local bus name."""
    names = {logical_id: local_event_bus_name(logical_id) for logical_id in template.event_buses()}
    existing = {b["Name"] for b in events.list_event_buses().get("EventBuses", [])}
    for name in names.values():
        if name not in existing:
            events.create_event_bus(Name=name)
    return names


def save_items(dynamodb: Any, table_name: str, path: Path) -> int:
    """Write every item to ``path`` (JSON lines of DynamoDB JSON). Local tooling only: a full Scan. Returns count."""
    count = 0
    with path.open("w") as out:
        for page in dynamodb.get_paginator("scan").paginate(TableName=table_name):
            for item in page["Items"]:
                out.write(json.dumps(item) + "\n")
                count += 1
    return count


def load_items(dynamodb: Any, table_name: str, path: Path) -> int:
    """Load items saved by :func:`save_items`. Returns the count."""
    count = 0
    for line in path.read_text().splitlines():
        if line.strip():
            dynamodb.put_item(TableName=table_name, Item=json.loads(line))
            count += 1
    return count
