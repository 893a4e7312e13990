"""Who may see and change a job, and what of it they see — one module, used by the jobs API, the operation status
routes and the stats, so no route shows a job (or its operation) by another rule.

Rules (docs/RBAC.md): admins see and change every job; a consumer sees and changes the jobs it submitted; a supplier
sees, read only, the jobs placed on its nodes. Anyone else gets the answer a missing job gets (404). The workload's
``env`` values are shown to the submitter and admins only, its ``secretEnv`` values to nobody (models/jobs.py
``masked_workload``); ``preemptedBy`` (the job that preempted it, perhaps another user's) to admins only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from itl_accelerator.auth import rbac
from itl_accelerator.auth.principal import Principal
from itl_accelerator.billing.job_charges import so_far
from itl_accelerator.billing.metering import iso
from itl_accelerator.domain.accelerators import GPU, shown_vendor
from itl_accelerator.domain.records import Job, StartEstimate
from itl_accelerator.domain.states import JobStatus
from itl_accelerator.models.jobs import masked_job_document
from itl_accelerator.services.common.kernel import with_etag


def visible_to(principal: Principal, job: Job) -> bool:
    """Admins see every job; a consumer the jobs it submitted; a supplier the jobs placed on its nodes."""
    if rbac.ROLE_ADMIN in principal.roles:
        return True
    if rbac.ROLE_CONSUMER in principal.roles and job.submitted_by == principal.subject:
        return True
    return rbac.ROLE_SUPPLIER in principal.roles and job.node_owner == principal.subject


def may_change(principal: Principal, job: Job) -> bool:
    """Admins change (cancel, delete, resubmit) every job; anyone else only the jobs it submitted."""
    return rbac.ROLE_ADMIN in principal.roles or job.submitted_by == principal.subject


def reveals_env(principal: Principal, owner: str | None) -> bool:
    """Whether ``principal`` sees the ``env`` values of a job submitted by ``owner``: its submitter and admins."""
    return rbac.ROLE_ADMIN in principal.roles or (owner is not None and owner == principal.subject)


def start_estimate_properties(estimate: StartEstimate) -> dict[str, Any]:
    """A waiting job's estimate as properties (domain/calendar.py): ``estimatedStartTime`` (UTC ISO 8601; null when
    it cannot be known, ``estimatedStartReason`` saying why), ``queuePosition`` (1: served first among its
    subscription's waiting jobs) and ``estimatedAt`` (when it was estimated: the figure's age)."""
    return {
        "estimatedStartTime": iso(estimate.at) if estimate.at is not None else None,
        **({"estimatedStartReason": estimate.why} if estimate.at is None and estimate.why else {}),
        "queuePosition": estimate.position,
        "estimatedAt": iso(estimate.estimated_at),
    }


def render_job(job: Job, principal: Principal, now: datetime | None = None) -> dict[str, Any]:
    """The job as ``principal`` sees it at ``now`` (default: the current time): the stored envelope plus ``etag``, its
    workload masked for that viewer; while it runs, its usage and cost so far with ``costAsOf``
    (services/common/metering.py ``so_far``); while it waits, when it is expected to start (:func:`start_estimate_properties`). A job stored before accelerator kinds existed shows what it always
    asked for: its ``accelerator`` (GPUs: its requestedGpus, gpuModel and requestedMemoryGb; NVIDIA's when it named
    no model)."""
    document = masked_job_document(job.document, reveal_env=reveals_env(principal, job.submitted_by))
    assert document is not None
    running = so_far(job, (now or datetime.now(UTC)).timestamp())
    if running:
        document["properties"] = {**document["properties"], **running}
    if job.status == JobStatus.PENDING and job.start_estimate is not None:
        document["properties"] = {**document["properties"], **start_estimate_properties(job.start_estimate)}
    props = document["properties"]
    if "accelerator" not in props:
        asked = {
            "kind": GPU,
            "vendor": shown_vendor(GPU, props.get("gpuModel"), None),
            "count": props.get("requestedGpus"),
            "model": props.get("gpuModel"),
            "memoryGb": props.get("requestedMemoryGb"),
        }
        document["properties"] = {"accelerator": {k: v for k, v in asked.items() if v is not None}, **props}
    if "preemptedBy" in props and rbac.ROLE_ADMIN not in principal.roles:
        # the job that preempted it may be another user's, which a consumer or supplier may not learn of: its
        # statusReason says its priority; admins see which job it was
        document["properties"] = {k: v for k, v in document["properties"].items() if k != "preemptedBy"}
    return with_etag(document, job.etag)
