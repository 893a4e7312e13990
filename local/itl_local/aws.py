"""The embedded AWS: moto's server on loopback, with the table created from template.yaml's own definition.

Clients reach it through ``AWS_ENDPOINT_URL`` (read by boto3 itself), so handlers run unchanged.
"""

from __future__ import annotations

import json
import logging
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
_MUTATORS = ("put_item", "update_item", "delete_item", "transact_write_items", "batch_write_item")


def serialize_dynamodb_writes() -> None:
    """Make moto's DynamoDB writes atomic under concurrency, as DynamoDB's are.

    moto evaluates a condition and applies the write in separate steps without a lock, so two threads can both
    pass ``allocated <= total - requested`` and over-commit a node — something real DynamoDB never allows (each
    conditional write and each transaction is atomic and serializable). One process-wide lock around moto's
    mutating backend methods (``DynamoDBBackend``, an internal class: moto is pinned and
    tests/integration/test_local_runtime_fidelity.py guards this) restores that guarantee locally. Idempotent.
    """
    from moto.dynamodb.models import DynamoDBBackend

    for name in _MUTATORS:
        original = getattr(DynamoDBBackend, name)
        if getattr(original, "_itl_serialized", False):
            continue

        def locked(self: Any, *args: Any, __original: Any = original, **kwargs: Any) -> Any:
            with _WRITE_LOCK:
                return __original(self, *args, **kwargs)

        locked._itl_serialized = True  # type: ignore[attr-defined]
        setattr(DynamoDBBackend, name, locked)


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
