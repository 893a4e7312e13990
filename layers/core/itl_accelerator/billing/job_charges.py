"""A job's charges by the metering rules (billing/metering.py) at the terms it locked: at its end (what its
document and its bill say: :func:`job_charges`), as the sum of its attempts (:func:`attempt_sums`), and so far while
it runs (:func:`so_far`: what a read of the job answers, fresh). Loaded by the jobs API too: nothing here reads or
writes a store."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from itl_accelerator.billing.metering import allocation_charges
from itl_accelerator.domain.records import Job


def _epoch(value: str) -> int:
    """Whole epoch seconds of a UTC ISO 8601 time."""
    return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())


def job_charges(job: Job, ended: float, *, running: bool = False) -> tuple[int, int, Decimal, str]:
    """``(GPU-seconds, billable GPU-seconds, cost, currency)`` of the run ``job`` is at, from its start to ``ended``
    (epoch s), under the terms it locked when it was placed — computed window by window exactly as its usage records
    are (billing/metering.py), so a job's cost is the sum of what the billing export bills for it; a gang's every
    part counted. ``running``: the run goes on, so no rounding rule of an end applies yet (the charges the usage sync
    records as of ``ended``). Nothing when it never started."""
    if not job.started_at or job.billing_terms is None:
        return 0, 0, Decimal(0), ""
    terms = job.billing_terms
    start = _epoch(job.started_at)
    end = max(start, int(ended))
    charges = allocation_charges(terms, gpus=job.gpus, start=start, end=None if running else end, now=end)
    parts = 1 + len(job.gang_nodes)  # a gang's parts: as many meters, each the same devices, times and terms
    return (
        parts * sum(c.gpu_seconds for c in charges),
        parts * sum(c.billable_gpu_seconds for c in charges),
        parts * sum((c.cost for c in charges), Decimal(0)),
        terms.currency,
    )


def attempt_sums(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """A job's ``gpuSeconds``, ``billableGpuSeconds`` and ``cost`` as the sums of its ``attempts`` (all in one
    currency: services/workflows/job_steps.py ``_retry_once``)."""
    priced = [a["cost"] for a in attempts if a.get("cost")]
    return {
        "gpuSeconds": sum(int(a.get("gpuSeconds", 0)) for a in attempts),
        "billableGpuSeconds": sum(int(a.get("billableGpuSeconds", 0)) for a in attempts),
        "cost": {
            "amount": format(sum((Decimal(c["amount"]) for c in priced), Decimal(0)), "f"),
            "currency": priced[-1]["currency"] if priced else "",
        },
    }


def so_far(job: Job, now: float) -> dict[str, Any]:
    """A running job's usage and cost so far, as properties (``gpuSeconds``, ``billableGpuSeconds``, ``cost``, and
    ``costAsOf``: when they are as of, UTC ISO 8601): its earlier attempts' and the run it is at up to ``now``, by
    the metering rules at the terms it locked — the figure its bill will hold for that time, fresh at every read (as
    GPU clouds show a running pod's). Empty for a job that is not running (a final job's are its own)."""
    if job.status.final or not job.started_at or job.billing_terms is None:
        return {}
    gpu_seconds, billable, cost, currency = job_charges(job, now, running=True)
    run = {
        "gpuSeconds": gpu_seconds,
        "billableGpuSeconds": billable,
        "cost": {"amount": format(cost, "f"), "currency": currency},
    }
    earlier = list(job.properties.get("attempts") or [])
    totals = attempt_sums([*earlier, run]) if earlier else run
    as_of = datetime.fromtimestamp(int(now), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {**totals, "costAsOf": as_of}
