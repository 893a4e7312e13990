"""``POST /dgx/callbacks``: the DGX Platform announces that an instance is ready or failed, or that a job ended
(docs/dgx-platform.openapi.yaml ``callbacks``), and the workflow waiting for it goes on at once
(services/workflows/callbacks.py).

No authorizer (template.yaml): the platform holds no user's token. Each callback is signed instead (HMAC-SHA256
with a timestamp, itl_accelerator/dgx/callbacks.py); a missing, wrong or stale signature is 401
``AuthenticationFailed``, a signed body that is no event 400 — ARM error bodies. A verified callback is 200
``{"outcome"}`` whatever it found (a callback for nothing waiting is no error: the platform must not send it again).
Anything else that goes wrong (the table or Step Functions unavailable) is 503 with ``Retry-After``, never a 500:
the platform sends the callback again, and polling stays the fallback. A plain handler: no web framework; its
wiring is built at the first invocation (SnapStart: nothing is made at import).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from itl_accelerator.dgx.callbacks import CallbackMalformed, CallbackRejected
from itl_accelerator.errors import ArmError, AuthenticationFailed, BadRequest, ServiceUnavailable
from itl_accelerator.observability import logger
from itl_functions.process import wiring


def _callbacks() -> Any:
    return wiring(__name__).dgx_callbacks


def _answer(
    event: dict[str, Any], status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> dict[str, Any]:
    request_id = str((event.get("requestContext") or {}).get("requestId") or "")
    return {
        "statusCode": status,
        "headers": {"Content-Type": "application/json", "x-ms-request-id": request_id, **(headers or {})},
        "body": json.dumps(body),
    }


def _error(event: dict[str, Any], error: ArmError) -> dict[str, Any]:
    return _answer(event, error.status, error.body(), error.headers)


@logger.inject_lambda_context(clear_state=True)
def receive(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``POST /dgx/callbacks`` (module docstring)."""
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    raw = event.get("body") or ""
    body = base64.b64decode(raw) if event.get("isBase64Encoded") else str(raw).encode()
    try:
        outcome = _callbacks().receive(headers, body)
    except CallbackRejected as exc:
        logger.warning("DGX callback refused", extra={"reason": str(exc)})
        return _error(event, AuthenticationFailed(f"The callback is not signed by the DGX Platform: {exc}."))
    except CallbackMalformed as exc:
        return _error(event, BadRequest(f"The callback is not a DGX Platform event: {exc}."))
    except Exception:  # noqa: BLE001 - the platform sends it again; polling stays the fallback
        logger.exception("A DGX callback could not be handled now")
        return _error(
            event,
            ServiceUnavailable("The callback could not be handled now; send it again.", headers={"Retry-After": "1"}),
        )
    return _answer(event, 200, {"outcome": outcome})
