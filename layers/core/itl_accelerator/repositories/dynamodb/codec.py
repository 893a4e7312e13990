"""How items travel: DynamoDB's typed JSON, the stored JSON of documents, item sizes, and continuation tokens."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from itl_accelerator.repositories.errors import InvalidSkipToken

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

#: DynamoDB's limit on one item (names and values, UTF-8), less a margin for attributes an update leaves in place.
MAX_ITEM_BYTES = 400 * 1024 - 8 * 1024


def plain(item: Mapping[str, Any]) -> dict[str, Any]:
    """DynamoDB typed JSON (``{"S": "x"}``) → Python values (numbers as ``Decimal``)."""
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def typed(values: dict[str, Any]) -> dict[str, Any]:
    """Python values → DynamoDB typed JSON."""
    return {k: _serializer.serialize(v) for k, v in values.items()}


def to_json(value: Any) -> str:
    """The stored JSON form of a document: compact, UTF-8 as is (``ensure_ascii`` would store a 4-byte character as a
    12-byte escape, tripling an item past DynamoDB's limit for what the API took in within its body limit)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def item_size(attributes: dict[str, Any]) -> int:
    """DynamoDB's size of an item or of a set of attribute values in wire form (``{"S": ...}``): names and string
    and binary values by their UTF-8 bytes, numbers by their digits, nested values recursively (bytes)."""
    return sum(len(name.encode()) + _value_size(value) for name, value in attributes.items())


def _value_size(value: dict[str, Any]) -> int:
    (kind, inner), *_ = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        return len(inner.lstrip("-").replace(".", "")) // 2 + 2
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "NS", "BS"):
        return sum(_value_size({kind[0]: v}) for v in inner)
    if kind == "L":
        return 3 + sum(1 + _value_size(v) for v in inner)
    return 3 + item_size(inner)  # M


def encode_token(last_key: dict[str, Any]) -> str:
    """A ``$skipToken`` from a ``LastEvaluatedKey`` of string attributes (URL-safe base64 of compact JSON)."""
    flat = {k: v["S"] for k, v in last_key.items()}
    return base64.urlsafe_b64encode(json.dumps(flat, separators=(",", ":")).encode()).decode().rstrip("=")


def read_token(token: str) -> dict[str, Any]:
    """The JSON object inside a ``$skipToken``. Raises :class:`InvalidSkipToken`."""
    try:
        value = json.loads(base64.urlsafe_b64decode((token + "=" * (-len(token) % 4)).encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise InvalidSkipToken(token) from exc
    if not isinstance(value, dict):
        raise InvalidSkipToken(token)
    return value


def decode_token(token: str, *, pk_attr: str, pk: str, sk_attr: str, sk_prefix: str) -> dict[str, Any]:
    """The ``ExclusiveStartKey`` of a token this store issued for the partition ``pk`` and sort keys under
    ``sk_prefix``; anything else (forged, of another list or tenant) raises :class:`InvalidSkipToken`."""
    flat = read_token(token)
    if (
        not all(isinstance(k, str) and isinstance(v, str) for k, v in flat.items())
        or flat.get(pk_attr) != pk
        or not str(flat.get(sk_attr, "")).startswith(sk_prefix)
        or not {"PK", "SK"} <= flat.keys()
        or not flat.keys()
        <= {"PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK", "GSI3PK", "GSI3SK", "GSI4PK", "GSI4SK"}
    ):
        raise InvalidSkipToken(token)
    return {k: {"S": v} for k, v in flat.items()}
