"""The table's stream (DynamoDB Streams, ``NEW_AND_OLD_IMAGES``) in the provider's words: which records are node
changes, and what each says (domain/records.py :class:`NodeChange`). Records of other items are left out."""

from __future__ import annotations

from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from itl_accelerator.domain.records import FleetShape, NodeChange, NodeState
from itl_accelerator.domain.states import Availability
from itl_accelerator.repositories.dynamodb import keys

_deserializer = TypeDeserializer()
#: Sort-key prefix of node items (keys.py).
_NODE_PREFIX = f"{keys.TYPE_CODES['sparkNodes']}{keys.SEP}"


def _image(record: dict[str, Any], which: str) -> NodeState | None:
    image = (record.get("dynamodb") or {}).get(which)
    if not image:
        return None
    item = {k: _deserializer.deserialize(v) for k, v in image.items()}
    return NodeState(
        etag=str(item.get("etag", "")),
        availability=Availability(item.get("availability") or Availability.AVAILABLE),
        shape=FleetShape(
            str(item.get("gpuModelKey", "")),
            str(item.get("location", "")),
            int(item.get("gpuTotal", 0)),
            int(item.get("memoryGbTotal", 0)),
        ),
    )


def node_changes(records: list[dict[str, Any]]) -> list[NodeChange]:
    """The node changes among a batch of stream records (Lambda's event ``Records``), in order."""
    changes = []
    for record in records:
        item_keys = (record.get("dynamodb") or {}).get("Keys") or {}
        if not str((item_keys.get("SK") or {}).get("S", "")).startswith(_NODE_PREFIX):
            continue
        subscription = str(item_keys["PK"]["S"]).split(keys.SEP, 1)[1]
        changes.append(
            NodeChange(
                event_id=str(record.get("eventID", "")),
                subscription_id=subscription,
                before=_image(record, "OldImage"),
                after=_image(record, "NewImage"),
            )
        )
    return changes
