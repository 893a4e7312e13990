"""ARM long-running operations in responses: the headers of an accepted request (ARM_CONTRACT.md 11-13), shared
by every route that starts one."""

from __future__ import annotations

from fastapi import Request

from itl_accelerator.api.deps import public_base_url
from itl_accelerator.services.common.lro import Accepted, operation_result_path, operation_status_path
from itl_accelerator.wiring import Wiring

ASYNC_HEADERS = {
    "Azure-AsyncOperation": {
        "description": "Operation status URL (poll until Succeeded/Failed/Canceled).",
        "schema": {"type": "string"},
    },
    "Location": {"description": "Operation result URL.", "schema": {"type": "string"}},
    "Retry-After": {"description": "Seconds to wait before polling.", "schema": {"type": "integer"}},
}


def async_headers(request: Request, c: Wiring, subscription_id: str, accepted: Accepted) -> dict[str, str]:
    """ARM long-running operation headers (ARM_CONTRACT.md 11-13): absolute URLs and whole seconds."""
    base = public_base_url(request, c.settings.public_base_url)
    return {
        "Azure-AsyncOperation": base + operation_status_path(subscription_id, accepted.location, accepted.operation_id),
        "Location": base + operation_result_path(subscription_id, accepted.location, accepted.operation_id),
        "Retry-After": str(accepted.retry_after),
    }
