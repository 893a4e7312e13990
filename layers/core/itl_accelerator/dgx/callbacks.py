"""DGX Platform callbacks (docs/dgx-platform.openapi.yaml, the ``callbacks`` of createInstance and submitJob): the
signed event the platform posts when an instance is ready or failed, or a job ended, and its verification.

The platform signs each attempt: ``X-DGX-Timestamp`` (epoch seconds) and ``X-DGX-Signature: sha256=<hex
HMAC-SHA256(secret, timestamp + "." + raw body)>``. :func:`verify` recomputes it over the body exactly as received,
compares in constant time, and refuses a timestamp further than the tolerance from now (a replayed callback), so
only the holder of the secret can make the provider look at a resource — and even then a callback only says *look
now*: what the provider records comes from the platform's own answers (services/workflows/callbacks.py).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from itl_accelerator.settings import Settings

TIMESTAMP_HEADER = "x-dgx-timestamp"
SIGNATURE_HEADER = "x-dgx-signature"
SECRET_MAX_AGE_SECONDS = 300
#: Statuses a callback may announce: an instance's, a job's.
INSTANCE_STATUSES = ("Running", "Failed")
JOB_STATUSES = ("Succeeded", "Failed", "Canceled")


class CallbackRejected(Exception):
    """The callback's signature is missing, wrong or stale (401): ``str(exc)`` says which, naming no secret."""


class CallbackMalformed(Exception):
    """A correctly signed callback whose body is not the contract's event (400)."""


@dataclass(frozen=True)
class CallbackEvent:
    """What a callback announces: ``type`` (instance or job), the platform's ``id``, the ``name`` the resource was
    created with (the provider's ARM id), its ``status`` and when it got there (``time``, ISO 8601)."""

    event_id: str
    type: Literal["instance", "job"]
    id: str
    name: str
    status: str
    time: str


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=`` and the hex HMAC-SHA256 under ``secret`` of ``timestamp``, ``.`` and ``body``."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify(secret: str, headers: Mapping[str, str], body: bytes, *, now: float, tolerance: int) -> CallbackEvent:
    """The event of a callback whose ``headers`` (names in lower case) sign ``body`` under ``secret`` within
    ``tolerance`` seconds of ``now`` (epoch seconds). Raises :class:`CallbackRejected` (no secret configured, a
    header missing, a stale timestamp, a wrong signature) or :class:`CallbackMalformed` (signed, but not an event)."""
    if not secret:
        raise CallbackRejected("no callback secret is configured")
    timestamp = headers.get(TIMESTAMP_HEADER, "")
    given = headers.get(SIGNATURE_HEADER, "")
    if not timestamp.isdigit() or len(timestamp) > 12:
        raise CallbackRejected(f"{TIMESTAMP_HEADER} is missing or not epoch seconds")
    if not given.startswith("sha256="):
        raise CallbackRejected(f"{SIGNATURE_HEADER} is missing or not sha256=<hex>")
    if abs(now - int(timestamp)) > tolerance:
        raise CallbackRejected(f"the callback's timestamp is more than {tolerance} seconds from now")
    if not hmac.compare_digest(signature(secret, timestamp, body).encode(), given.encode()):
        raise CallbackRejected("the signature does not match")
    return parse(body)


def parse(body: bytes) -> CallbackEvent:
    """The contract's ``CallbackEvent`` in ``body``. Raises :class:`CallbackMalformed`."""
    try:
        data = json.loads(body)
    except ValueError:
        raise CallbackMalformed("the body is not JSON") from None
    if not isinstance(data, dict):
        raise CallbackMalformed("the body is not an object")
    fields = ("eventId", "type", "id", "name", "status", "time")
    if not all(isinstance(data.get(f), str) and data[f] for f in fields):
        raise CallbackMalformed(f"the event needs {', '.join(fields)} (strings)")
    kind = data["type"]
    allowed = {"instance": INSTANCE_STATUSES, "job": JOB_STATUSES}.get(kind)
    if allowed is None or data["status"] not in allowed:
        raise CallbackMalformed(f"no {kind} callback announces {data['status']!r}")
    return CallbackEvent(
        event_id=data["eventId"], type=kind, id=data["id"], name=data["name"], status=data["status"], time=data["time"]
    )


def callback_secret(settings: Settings) -> str:
    """The secret callbacks are signed with: Secrets Manager's ``DGX_CALLBACK_SECRET_ID`` (Powertools parameters,
    cached 5 minutes) in AWS, else ``DGX_CALLBACK_SECRET`` ("" when neither: every callback is refused)."""
    if settings.dgx_callback_secret_id:
        from aws_lambda_powertools.utilities import parameters

        return str(parameters.get_secret(settings.dgx_callback_secret_id, max_age=SECRET_MAX_AGE_SECONDS))
    return settings.dgx_callback_secret.get_secret_value()
