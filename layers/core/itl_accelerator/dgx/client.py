"""Typed httpx client of the DGX Platform (contract: docs/dgx-platform.openapi.yaml).

Rules: explicit connect/read timeouts; retries with exponential backoff and jitter (tenacity) on connection errors,
timeouts, 429 (honouring ``Retry-After``, capped) and 5xx, never on other 4xx; an ``Idempotency-Key`` on every
create so a retried create never makes two; the API key is sent as a bearer token and never logged or put in an
error message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import httpx
from tenacity import (
    RetryCallState,
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from itl_accelerator.dgx.errors import DgxNotFound, DgxPermanentError, DgxTransientError
from itl_accelerator.dgx.models import DgxInstance, DgxJob, DgxLogLine, DgxLogPage, DgxUsage
from itl_accelerator.observability import logger

MAX_RETRY_AFTER_SECONDS = 10.0
#: The most ids one batch read names (the contract's ``maxItems``).
BATCH_IDS = 100

T = TypeVar("T")


def retry_wait(state: RetryCallState) -> float:
    """tenacity's wait between two tries of a platform call (this client's, and the Slurm client's): the
    ``Retry-After`` the platform gave with a transient error (its ``retry_after``, capped at
    :data:`MAX_RETRY_AFTER_SECONDS`), else exponential backoff with full jitter (0.2 s doubling, at most 2 s)."""
    exc = state.outcome.exception() if state.outcome else None
    retry_after = getattr(exc, "retry_after", None)
    if retry_after is not None:
        return min(float(retry_after), MAX_RETRY_AFTER_SECONDS)
    return float(wait_random_exponential(multiplier=0.2, max=2.0)(state))


class DgxPlatformClient:
    """Client of one DGX Platform. ``http`` is injectable (tests pass a client with a mock transport).

    Units: seconds for timeouts and ``budget_seconds`` (no retry starts after it: bounds a call with its retries);
    ``attempts`` counts the first try.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        connect_timeout: float = 2.0,
        read_timeout: float = 10.0,
        attempts: int = 3,
        budget_seconds: float = 20.0,
        http: httpx.Client | None = None,
    ):
        self._http = http or httpx.Client(
            base_url=base_url.rstrip("/"),
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            headers={"Authorization": f"Bearer {api_key}", "User-Agent": "itl-accelerator-provider"},
        )
        self._call = retry(
            retry=retry_if_exception_type(DgxTransientError),
            stop=stop_after_attempt(attempts) | stop_after_delay(budget_seconds),
            wait=retry_wait,
            reraise=True,
        )(self._once)

    def _once(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise DgxTransientError(f"DGX Platform timed out on {method} {path}") from exc
        except httpx.TransportError as exc:
            raise DgxTransientError(f"DGX Platform unreachable on {method} {path}: {type(exc).__name__}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            retry_after = response.headers.get("Retry-After")
            logger.info("DGX transient failure", extra={"status": response.status_code, "path": path})
            raise DgxTransientError(
                f"DGX Platform answered {response.status_code} on {method} {path}",
                status=response.status_code,
                retry_after=float(retry_after) if retry_after and retry_after.replace(".", "", 1).isdigit() else None,
            )
        if response.status_code == 404:
            raise DgxNotFound(f"DGX Platform has no such resource: {method} {path}", status=404)
        if response.status_code >= 400:
            detail = _error_text(response)
            logger.info("DGX refused", extra={"status": response.status_code, "method": method, "path": path})
            # the message may reach a tenant (operation error): the platform's own code and text, no internals
            raise DgxPermanentError(f"The DGX Platform refused the request: {detail}", status=response.status_code)
        return response

    # ----------------------------------------------------------------------------------------------- instances
    def create_instance(
        self,
        *,
        idempotency_key: str,
        name: str,
        node_id: str,
        model: str,
        devices: int,
        memory_gb: int,
        callback_url: str | None = None,
        accelerator: dict[str, str] | None = None,
        targets: list[str] | None = None,
        partition: str | None = None,
    ) -> DgxInstance:
        """``POST /v1/instances`` with ``Idempotency-Key``: the same key returns the instance already made.
        ``callback_url``: where the platform announces that the instance is ready or failed (the contract's
        ``callbacks``); None: no callback. ``accelerator``: the node's devices (``{"kind", "vendor", "model"}``;
        None: NVIDIA GPUs, as the contract reads its absence). ``targets`` and ``partition`` (a platform's host names and
        partition: the platforms' interface, itl_accelerator/platforms/protocol.py) are not sent: the DGX Platform
        places by node id."""
        body: dict[str, Any] = {"name": name, "nodeId": node_id, "model": model, "gpus": devices, "memoryGb": memory_gb}
        if accelerator:
            body["accelerator"] = accelerator
        if callback_url:
            body["callbackUrl"] = callback_url
        response = self._call("POST", "/v1/instances", json=body, headers={"Idempotency-Key": idempotency_key})
        return _instance(response.json())

    def get_instance(self, instance_id: str) -> DgxInstance:
        """``GET /v1/instances/{id}``. Raises :class:`DgxNotFound` when it does not exist."""
        return _instance(self._call("GET", f"/v1/instances/{instance_id}").json())

    def get_instances(self, instance_ids: list[str]) -> dict[str, DgxInstance]:
        """``POST /v1/instances:batchGet``, 100 ids a call: the instances the platform knows, by id (an id it does
        not know is absent)."""
        return {i.id: i for i in self._batch("/v1/instances:batchGet", instance_ids, _instance)}

    def delete_instance(self, instance_id: str) -> bool:
        """``DELETE /v1/instances/{id}``. Returns False when it was already gone (404), True when deletion began."""
        try:
            self._call("DELETE", f"/v1/instances/{instance_id}")
        except DgxNotFound:
            return False
        return True

    def find_instance(self, idempotency_key: str) -> DgxInstance | None:
        """``GET /v1/instances?idempotencyKey=``: the instance a create with this key made, if any (to clean up
        after a create whose answer was lost)."""
        items = self._call("GET", "/v1/instances", params={"idempotencyKey": idempotency_key}).json().get("value", [])
        return _instance(items[0]) if items else None

    # ----------------------------------------------------------------------------------------------- jobs
    def submit_job(
        self,
        *,
        idempotency_key: str,
        name: str,
        node_id: str,
        devices: int,
        memory_gb: int,
        workload: dict[str, Any],
        max_duration_seconds: int,
        callback_url: str | None = None,
        accelerator: dict[str, str] | None = None,
        node_ids: list[str] | None = None,
        targets: list[str] | None = None,
        partition: str | None = None,
        recover: bool = False,
    ) -> DgxJob:
        """``POST /v1/jobs`` with ``Idempotency-Key``: the same key returns the job already submitted.
        ``workload``: ``{"image", "command", "env"}``; ``callback_url``: where the platform announces that the job
        ended (None: no callback); ``accelerator``: the node's devices, as for :meth:`create_instance`;
        ``node_ids``: a multi-node job's nodes (the first is ``node_id``), ``devices`` and ``memory_gb`` on each — one
        platform job with one outcome, its containers started on all of them at once (docs/DGX_INTEGRATION.md);
        ``targets`` and ``partition`` are not sent (as for :meth:`create_instance`); ``recover`` is not needed (the platform
        de-duplicates by the key)."""
        body: dict[str, Any] = {
            "name": name,
            "nodeId": node_id,
            "gpus": devices,
            "memoryGb": memory_gb,
            "image": workload["image"],
            "command": workload.get("command", []),
            "env": workload.get("env", {}),
            "maxDurationSeconds": max_duration_seconds,
        }
        if callback_url:
            body["callbackUrl"] = callback_url
        if accelerator:
            body["accelerator"] = accelerator
        if node_ids and len(node_ids) > 1:
            body["nodeIds"] = node_ids
        response = self._call("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": idempotency_key})
        return _job(response.json())

    def get_job(self, job_id: str) -> DgxJob:
        """``GET /v1/jobs/{id}``. Raises :class:`DgxNotFound` when it does not exist."""
        return _job(self._call("GET", f"/v1/jobs/{job_id}").json())

    def get_jobs(self, job_ids: list[str]) -> dict[str, DgxJob]:
        """``POST /v1/jobs:batchGet``, 100 ids a call: the jobs the platform knows, by id (an id it does not know is
        absent)."""
        return {j.id: j for j in self._batch("/v1/jobs:batchGet", job_ids, _job)}

    def _batch(self, path: str, ids: list[str], decode: Callable[[dict[str, Any]], T]) -> list[T]:
        found: list[T] = []
        wanted = list(dict.fromkeys(ids))
        for i in range(0, len(wanted), BATCH_IDS):
            response = self._call("POST", path, json={"ids": wanted[i : i + BATCH_IDS]})
            found += [decode(item) for item in response.json().get("value", [])]
        return found

    def cancel_job(self, job_id: str, *, grace_period_seconds: int = 0, reason: str | None = None) -> DgxJob | None:
        """``POST /v1/jobs/{id}/cancel`` (idempotent; a job that already ended stays as it ended). None when the
        platform does not know the job. ``grace_period_seconds``: the container is sent SIGTERM and killed that long
        after unless it ended first (a preemption's grace period; 0: at once) — a repeated cancel keeps the first
        deadline; ``reason``: what the container's log says (docs/DGX_INTEGRATION.md)."""
        body: dict[str, object] = {}
        if grace_period_seconds:
            body["gracePeriodSeconds"] = grace_period_seconds
        if reason:
            body["reason"] = reason[:300]
        try:
            return _job(self._call("POST", f"/v1/jobs/{job_id}/cancel", json=body or None).json())
        except DgxNotFound:
            return None

    def find_job(self, idempotency_key: str) -> DgxJob | None:
        """``GET /v1/jobs?idempotencyKey=``: the job a submit with this key made, if any."""
        items = self._call("GET", "/v1/jobs", params={"idempotencyKey": idempotency_key}).json().get("value", [])
        return _job(items[0]) if items else None

    def get_job_logs(
        self,
        job_id: str,
        *,
        after: int = 0,
        since: str | None = None,
        tail: int | None = None,
        limit: int = 1000,
    ) -> DgxLogPage:
        """``GET /v1/jobs/{id}/logs`` as JSON (``Accept: application/json``): the lines numbered above ``after``,
        written at or after ``since`` (ISO 8601), the last ``tail`` of them, ``limit`` a page. Raises
        :class:`DgxNotFound` when the platform does not know the job."""
        params: dict[str, str | int] = {"after": after, "limit": limit}
        if since is not None:
            params["since"] = since
        if tail is not None:
            params["tail"] = tail
        data = self._call(
            "GET", f"/v1/jobs/{job_id}/logs", params=params, headers={"Accept": "application/json"}
        ).json()
        return DgxLogPage(
            job_id=data["jobId"],
            status=data["status"],
            lines=[DgxLogLine(number=int(x["number"]), time=x["time"], text=x["text"]) for x in data["lines"]],
            next_after=int(data["nextAfter"]),
            more=bool(data["more"]),
            ended=bool(data["ended"]),
        )

    # ----------------------------------------------------------------------------------------------- usage
    def get_usage(self, resource_id: str, start: str, end: str) -> DgxUsage:
        """``GET /v1/usage?resourceId=&start=&end=`` (ISO 8601 UTC, end exclusive): the metrics of an instance or
        job over that range. Raises :class:`DgxNotFound` when the platform does not know the resource."""
        params = {"resourceId": resource_id, "start": start, "end": end}
        data = self._call("GET", "/v1/usage", params=params).json()
        return DgxUsage(
            gpu_utilization_percent=data.get("gpuUtilizationPercent"),
            gpu_memory_gb=data.get("gpuMemoryGb"),
            energy_wh=data.get("energyWh"),
            requests=data.get("requests"),
            tokens_in=data.get("tokensIn"),
            tokens_out=data.get("tokensOut"),
        )


def _job(data: dict[str, Any]) -> DgxJob:
    return DgxJob(
        id=data["id"],
        name=data["name"],
        node_id=data["nodeId"],
        gpus=data["gpus"],
        status=data["status"],
        exit_code=data.get("exitCode"),
        logs_url=data.get("logsUrl"),
        error_code=(data.get("error") or {}).get("code"),
        error_message=(data.get("error") or {}).get("message"),
        started_at=data.get("startedAt"),
        ended_at=data.get("endedAt"),
    )


def _instance(data: dict[str, Any]) -> DgxInstance:
    return DgxInstance(
        id=data["id"],
        name=data["name"],
        node_id=data["nodeId"],
        model=data["model"],
        gpus=data["gpus"],
        memory_gb=data["memoryGb"],
        status=data["status"],
        endpoint=data.get("endpoint"),
        error_code=(data.get("error") or {}).get("code"),
        error_message=(data.get("error") or {}).get("message"),
    )


def _error_text(response: httpx.Response) -> str:
    try:
        error = response.json().get("error") or {}
        return f"{error.get('code', 'Error')}: {error.get('message', '')}"[:300]
    except ValueError:
        return response.text[:300]
