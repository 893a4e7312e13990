"""``GET /health`` and ``GET /ready``: the probes of the ITL Control Plane's gateway (the health endpoint the provider
registers with, itl_accelerator/gateway_registration.py), of load balancers and of the canary. Unauthenticated (no
authorizer in template.yaml), answered as the ITL SDK's provider server answers them
(``itl_controlplane_sdk.fastapi.routes.health``):

- ``/health`` → 200 ``{"status": "healthy", "timestamp"}``: the API and its functions run;
- ``/ready`` → 200 ``{"ready": true, "timestamp"}`` when the table can be read, else 503 ``{"ready": false,
  "timestamp", "reason"}`` (``reason`` names the store, never its error).

Both are plain handlers: no web framework; ``/ready`` builds its wiring's store probe (a DynamoDB client) at its first
invocation (SnapStart: nothing is made at import). Every answer carries ``x-ms-request-id`` (API Gateway's request
id) and ``Cache-Control: no-store``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from itl_accelerator.observability import logger

_probes: list[Any] = []


def _timestamp() -> str:
    """ISO 8601 UTC with milliseconds and ``Z``, as the SDK's ``datetime.utcnow().isoformat() + "Z"`` reads."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def _answer(event: dict[str, Any], status: int, body: dict[str, Any]) -> dict[str, Any]:
    request_id = str((event.get("requestContext") or {}).get("requestId") or "")
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", "Cache-Control": "no-store", "x-ms-request-id": request_id},
        "body": json.dumps(body),
    }


def health(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``GET /health``: 200 ``{"status": "healthy", "timestamp"}``."""
    return _answer(event, 200, {"status": "healthy", "timestamp": _timestamp()})


def _probe() -> Any:
    if not _probes:
        from itl_accelerator.wiring import Wiring

        _probes.append(Wiring.build().repositories.probe)
    return _probes[0]


def ready(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``GET /ready``: 200 ``{"ready": true, "timestamp"}`` when the table answers a read, else 503 with
    ``"ready": false`` and a reason."""
    reachable, error = _probe().reachable()
    if reachable:
        return _answer(event, 200, {"ready": True, "timestamp": _timestamp()})
    logger.warning("Not ready: the table cannot be read", extra={"error": error})
    return _answer(event, 503, {"ready": False, "timestamp": _timestamp(), "reason": "the store cannot be read now"})
