"""Whether the table answers: the readiness check of ``GET /ready`` (functions/itl_functions/health.py).

One ``GetItem`` of a key no item has (``PK = SYS#READY``): it costs half a read unit, needs only the read grant every
reading function has, and succeeds exactly when the table exists and this function may read it.
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from itl_accelerator.repositories.dynamodb.codec import typed
from itl_accelerator.repositories.dynamodb.table import Table

PROBE_KEY = {"PK": "SYS#READY", "SK": "READY"}


class DynamoTableProbe:
    """:class:`~itl_accelerator.repositories.protocols.StoreProbe` over the table."""

    def __init__(self, table: Table):
        self._t = table

    def reachable(self) -> tuple[bool, str]:
        try:
            self._t.client.get_item(TableName=self._t.name, Key=typed(PROBE_KEY), ProjectionExpression="PK")
        except ClientError as exc:
            return False, str(exc.response.get("Error", {}).get("Code") or "ClientError")
        except BotoCoreError as exc:
            return False, type(exc).__name__
        return True, ""
