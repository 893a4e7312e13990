"""How far the usage sync lags: the age of the most overdue meter in the meter index (GSI2 ``METER#{0-3}``, sort key
``{dueAt:012d}#...``, store/meters.py). The sync leaves every meter it synced due again half a period later, so the
oldest due time is about now while it keeps up and falls behind as soon as meters wait (a run cut short, a meter
whose sync fails). One ``Query`` of one item per index partition.
"""

from __future__ import annotations

from typing import Any

from itl_accelerator.store.codec import plain, typed
from itl_accelerator.store.meters import METER_SHARDS


class MeterLag:
    """``client``: a boto3 DynamoDB client; ``table_name``: the table of template.yaml."""

    def __init__(self, client: Any, table_name: str):
        self._db = client
        self._table = table_name

    def oldest_due(self) -> int | None:
        """The earliest ``dueAt`` (epoch seconds) of any meter in the index; None when there is none."""
        found: list[int] = []
        for shard in range(METER_SHARDS):
            response = self._db.query(
                TableName=self._table,
                IndexName="GSI2",
                KeyConditionExpression="GSI2PK = :p",
                ExpressionAttributeValues=typed({":p": f"METER#{shard}"}),
                Limit=1,
            )
            found += [int(str(plain(item)["GSI2SK"])[:12]) for item in response.get("Items", [])]
        return min(found) if found else None

    def lag_seconds(self, now: float) -> int:
        """Seconds the most overdue meter has waited past its due time at ``now`` (0 when none is overdue)."""
        oldest = self.oldest_due()
        return max(0, int(now) - oldest) if oldest is not None else 0
