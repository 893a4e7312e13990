"""A job's charges by the metering rules (billing/metering.py) at the terms it locked: at its end (what its
document and its bill say: :func:`job_charges`) and so far while it runs (:func:`so_far`: what a read of the job
answers, fresh); a job's attempts are added up by domain/runs.py ``RunCharges.total``. Loaded by the jobs API too: nothing here reads or
writes a store."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from itl_accelerator.billing.metering import allocation_charges
from itl_accelerator.domain.records import Job
from itl_accelerator.domain.runs import RunCharges


def _epoch(value: str) -> int:
    """Whole epoch seconds of a UTC ISO 8601 time."""
    return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())


def job_charges(job: Job, ended: float, *, running: bool = False) -> RunCharges:
    """The charges of the run ``job`` is at, from its start to ``ended`` (epoch s), under the terms it locked when
    it was placed — computed window by window exactly as its usage records are (billing/metering.py), so a job's
    cost is the sum of what the billing export bills for it; a gang's every part counted. ``running``: the run goes
    on, so no rounding rule of an end applies yet (the charges the usage sync records as of ``ended``). Nothing
    (no currency) when it never started."""
    if not job.started_at or job.billing_terms is None:
        return RunCharges()
    terms = job.billing_terms
    start = _epoch(job.started_at)
    end = max(start, int(ended))
    charges = allocation_charges(terms, gpus=job.devices, start=start, end=None if running else end, now=end)
    parts = 1 + len(job.gang_nodes)  # a gang's parts: as many meters, each the same devices, times and terms
    return RunCharges(
        parts * sum(c.gpu_seconds for c in charges),
        parts * sum(c.billable_gpu_seconds for c in charges),
        parts * sum((c.cost for c in charges), Decimal(0)),
        terms.currency,
    )


def so_far(job: Job, now: float) -> dict[str, Any]:
    """A running job's usage and cost so far, as properties (``gpuSeconds``, ``billableGpuSeconds``, ``cost``, and
    ``costAsOf``: when they are as of, UTC ISO 8601): its earlier attempts' and the run it is at up to ``now``, by
    the metering rules at the terms it locked — the figure its bill will hold for that time, fresh at every read (as
    GPU clouds show a running pod's). Empty for a job that is not running (a final job's are its own)."""
    if job.status.final or not job.started_at or job.billing_terms is None:
        return {}
    run = job_charges(job, now, running=True)
    totals = RunCharges.total([*(a.charges for a in job.run.ended), run])
    as_of = datetime.fromtimestamp(int(now), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {**totals.as_properties(), "costAsOf": as_of}
