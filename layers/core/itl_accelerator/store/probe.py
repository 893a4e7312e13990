"""Whether the table answers: the readiness check of ``GET /ready`` (functions/itl_functions/health.py).

One ``GetItem`` of a key no item has (``PK = SYS#READY``): it costs half a read unit, needs only the read grant every
reading function has, and succeeds exactly when the table exists and this function may read it.
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from itl_accelerator.store.codec import typed

PROBE_KEY = {"PK": "SYS#READY", "SK": "READY"}


class TableProbe:
    """``client``: a boto3 DynamoDB client; ``table_name``: the table of template.yaml."""

    def __init__(self, client: Any, table_name: str):
        self._db = client
        self._table = table_name

    def reachable(self) -> tuple[bool, str]:
        """``(True, "")`` when a read of the table succeeds, else ``(False, the error's code)`` — never raises for
        the table's sake."""
        try:
            self._db.get_item(TableName=self._table, Key=typed(PROBE_KEY), ProjectionExpression="PK")
        except ClientError as exc:
            return False, str(exc.response.get("Error", {}).get("Code") or "ClientError")
        except BotoCoreError as exc:
            return False, type(exc).__name__
        return True, ""
