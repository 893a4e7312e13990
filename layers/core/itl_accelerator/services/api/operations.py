"""Long-running operations as the API reads them: status resources (Azure-AsyncOperation) and results (Location).

Rules: ARM_CONTRACT.md 11-18 — status always 200 with ``status`` ending in ``Succeeded``, ``Failed`` or
``Canceled`` (``error`` on Failed), kept at least 24 h; the Location URL answers 202 while running and, when done,
what the synchronous call would have returned; an operation of another subscription, or unknown, is 404.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from itl_accelerator import PROVIDER_NAMESPACE
from itl_accelerator.arm import normalize_location, parse_resource_id, validate_subscription_id
from itl_accelerator.auth import rbac
from itl_accelerator.domain.records import Job, Operation, ResourceKey
from itl_accelerator.domain.states import OperationKind
from itl_accelerator.errors import ResourceNotFound
from itl_accelerator.repositories.protocols import Repositories
from itl_accelerator.resources import RESOURCE_TYPES
from itl_accelerator.services.common.access import Access, Target
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.services.common.job_access import render_job, visible_to
from itl_accelerator.services.common.kernel import with_etag
from itl_accelerator.services.common.lro import poll_after
from itl_accelerator.settings import Settings

_OPERATION_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")


class OperationService:
    """Reads operation status items, with the permission of the resource each belongs to (ARM: an operation is
    read by whoever may read its resource): an instance's operations by whoever may read the instance; a job's by
    whoever may see the job (services/common/job_access.py) — and, once the job is gone, by its submitter and admins. For
    anyone else an operation is exactly as missing as an unknown id: 404, the refusal audited."""

    def __init__(
        self,
        repositories: Repositories,
        access: Access,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ):
        self._repos = repositories
        self._access = access
        self._settings = settings
        self._clock = clock

    def retry_after(self, body: dict[str, Any], kind: str) -> int:
        """The ``Retry-After`` (seconds) of a running operation's status or result: the same rule as the response
        that accepted it (services/common/lro.py :func:`poll_after`), by how long it has run."""
        try:
            started = datetime.fromisoformat(str(body["startTime"]).replace("Z", "+00:00")).timestamp()
        except (KeyError, ValueError):
            started = self._clock()
        return poll_after(OperationKind(kind), self._clock() - started, self._settings)

    def get(
        self, ctx: CallContext, subscription_id: str, location: str, operation_id: str
    ) -> tuple[dict[str, Any], str]:
        """``(operation status body, kind)``. 404 when unknown, of another location, or not the caller's to read
        (outside its scopes, or on a resource it may not see): neither existence nor resource group is revealed."""
        validate_subscription_id(subscription_id)
        missing = ResourceNotFound(f"The operation '{operation_id}' was not found.")
        if not _OPERATION_ID.match(operation_id) or not ctx.principal.can_see(subscription_id, None):
            raise missing
        found = self._repos.operations.get(subscription_id, operation_id)
        if found is None or f"/locations/{normalize_location(location)}/" not in found.body["id"]:
            raise missing
        target = Target(
            subscription_id,
            found.resource_group,
            found.body["id"],
            f"{PROVIDER_NAMESPACE}/locations/operationStatuses",
            operation_id,
            missing,
        )
        read = rbac.JOBS_READ if found.kind.of_job else rbac.INSTANCES_READ
        for action in (rbac.OPERATIONS_READ, read):
            self._access.require_hidden(ctx, action, target)
        if found.kind.of_job and not self._job_visible(ctx, subscription_id, operation_id, found):
            self._access.refuse_hidden(ctx, rbac.JOBS_READ, target)
        return found.body, str(found.kind)

    def _job_visible(self, ctx: CallContext, subscription_id: str, operation_id: str, found: Operation) -> bool:
        """Whether the caller may see the job this operation belongs to: the job as it is now when the operation is
        still its own (a supplier sees the jobs on its nodes), else — the job deleted, its name reused — only its
        submitter and admins."""
        principal = ctx.principal
        if rbac.ROLE_ADMIN in principal.roles or (found.owner is not None and found.owner == principal.subject):
            return True
        key = self._resource_key(subscription_id, found.body)
        job = self._repos.jobs.get(key) if key is not None and key.type_segment == "sparkJobs" else None
        ours = job is not None and operation_id.lower() in {
            str(job.operation_id).lower(),
            str(job.cancel_operation_id or "").lower(),
        }
        return job is not None and ours and visible_to(principal, job)

    @staticmethod
    def _resource_key(subscription_id: str, operation: dict[str, Any]) -> ResourceKey | None:
        parsed = parse_resource_id(operation.get("resourceId") or "")
        if parsed is None or parsed[0].lower() != subscription_id.lower():
            return None
        _, resource_group, segments = parsed
        rtype = RESOURCE_TYPES.get(segments[-1][0])
        if rtype is None or [t.segment for t in rtype.lineage] != [t for t, _ in segments]:
            return None
        return ResourceKey(subscription_id, resource_group, rtype.segment, tuple(n for _, n in segments))

    def resource_of(self, ctx: CallContext, subscription_id: str, operation: dict[str, Any]) -> dict[str, Any] | None:
        """The current representation of the operation's resource (an instance, or a job as the caller may see it:
        its workload masked for that viewer), or None when it is gone."""
        key = self._resource_key(subscription_id, operation)
        if key is None:
            return None
        if key.type_segment == "sparkJobs":
            job: Job | None = self._repos.jobs.get(key)
            return (
                render_job(job, ctx.principal, ctx.clock())
                if job is not None and visible_to(ctx.principal, job)
                else None
            )
        instance = self._repos.instances.get(key)
        return with_etag(instance.document, instance.etag) if instance is not None else None
