"""Placement of jobs onto nodes: admission, best fit, and serving the jobs that wait for capacity.

Rules (issue: sparkJobs, Placement):

- **Admission.** A job that no node of its subscription could ever hold — more GPUs or GPU memory than the largest
  node matching its ``gpuModel``/``location`` has, more memory than its GPUs carry, or a model or location no node
  offers — is inadmissible and fails at once, saying why. Read from the subscription's fleet shapes (one ``Query``).
- **Best fit.** A job goes to an ``Available`` node of its subscription that meets its constraints and has room,
  choosing the one left with the fewest free GPUs after placing it. Candidates come from the placement index
  (GSI5, by free GPUs; a constant number of requests whatever the fleet size); the index is never trusted alone:
  the reservation is the same conditional update as an instance's, so concurrent placements never over-commit,
  and a candidate that turned out full (a stale index) is simply passed over for the next.
- **Waiting jobs** are served in priority order (9 first), then submission order, whenever capacity frees (a job or
  instance releases GPUs) and periodically. A job that does not fit now does not hold back the jobs behind it that
  do (backfill). **No starvation:** once the first job in that order has waited ``JOB_STARVATION_SECONDS`` without
  fitting, one node that could hold it — the one nearest to fitting — is drained for it: no other job is placed
  there until it is, so it starts at the latest when that node's current work ends (jobs end by their
  ``maxDurationMinutes``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from itl_accelerator.arm import normalize_location
from itl_accelerator.billing.metering import BillingTerms, terms_properties
from itl_accelerator.models.jobs import FINAL_JOB_STATUSES
from itl_accelerator.observability import logger
from itl_accelerator.resources import JOBS
from itl_accelerator.services import arm_rules
from itl_accelerator.services.capacity import Capacity
from itl_accelerator.services.context import CallContext
from itl_accelerator.services.kernel import ResourceKernel
from itl_accelerator.services.nodes import gpu_model_key
from itl_accelerator.settings import Settings
from itl_accelerator.store.codec import to_json
from itl_accelerator.store.errors import (
    CapacityShortfall,
    NodeChanged,
    NodeMissing,
    NodeUnavailable,
    StoreBusy,
    WorkloadChanged,
)
from itl_accelerator.store.jobs import JobStore, placed_index_values
from itl_accelerator.store.keys import ResourceKey
from itl_accelerator.store.resources import StoredResource
from itl_accelerator.store.workloads import Reservation, WorkloadRecord
from itl_accelerator.workflows import WorkflowStarter

#: Candidates tried per placement before the job waits (each a conditional transaction).
MAX_ATTEMPTS = 5
#: Waiting jobs served per dispatch.
DISPATCH_BATCH = 25


@dataclass(frozen=True)
class Placed:
    """Where a job went: the node's key and ARM id, its owner (the supplier the job's earnings go to), and the
    billing terms the job locked there."""

    node: ResourceKey
    node_id: str
    owner: str
    terms: BillingTerms


def best_fit_key(capacity: Capacity, gpus: int, memory_gb: int) -> tuple[int, int]:
    """Sort key of best fit: the node left with the fewest free GPUs after placing ``gpus``, then the least free
    GPU memory (GiB) after ``memory_gb``."""
    return capacity.free_gpus - gpus, capacity.free_memory_gb - memory_gb


def per_gpu_memory_fits(node_gpus: int, node_memory_gb: int, gpus: int, memory_gb: int) -> bool:
    """Whether ``memory_gb`` of GPU memory fits on ``gpus`` GPUs of a node with ``node_gpus`` GPUs holding
    ``node_memory_gb`` GiB in all (GPU memory is per GPU)."""
    return node_gpus > 0 and memory_gb * node_gpus <= gpus * node_memory_gb


class Placement:
    """See the module docstring. ``clock`` returns epoch seconds."""

    def __init__(
        self,
        kernel: ResourceKernel,
        workflows: WorkflowStarter,
        settings: Settings,
        clock: Callable[[], float] = time.time,
    ):
        self._kernel = kernel
        self._store: JobStore = kernel.store  # type: ignore[assignment]
        self._workflows = workflows
        self._settings = settings
        self._clock = clock

    # ----------------------------------------------------------------------------------------------- admission
    def inadmissible(self, job: WorkloadRecord, shapes: list[dict[str, Any]] | None = None) -> str | None:
        """Why no node of the subscription could ever hold ``job`` (None when one could), judged on the
        subscription's fleet ``shapes`` (read when not given: one ``Query``)."""
        model, location = job.extra.get("gpuModelKey") or "", job.location
        if shapes is None:
            shapes = self._store.fleet_shapes(job.key.subscription_id)
        if not shapes:
            return "The subscription has no nodes."
        matching = [
            s
            for s in shapes
            if (not model or s["gpuModelKey"] == model) and (not location or s["location"] == location)
        ]
        wanted = " and ".join(
            part
            for part in (f"GPU model '{model}'" if model else "", f"location '{location}'" if location else "")
            if part
        )
        if not matching:
            return f"No node of the subscription has {wanted}."
        fits = [
            s
            for s in matching
            if int(s["gpuTotal"]) >= job.gpus
            and int(s["memoryGbTotal"]) >= job.memory_gb
            and per_gpu_memory_fits(int(s["gpuTotal"]), int(s["memoryGbTotal"]), job.gpus, job.memory_gb)
        ]
        if fits:
            return None
        largest = max(matching, key=lambda s: (int(s["gpuTotal"]), int(s["memoryGbTotal"])))
        return (
            f"The job asks for {job.gpus} GPUs and {job.memory_gb} GiB of GPU memory; the largest node"
            f"{' with ' + wanted if wanted else ''} has {int(largest['gpuTotal'])} GPUs and "
            f"{int(largest['memoryGbTotal'])} GiB."
        )

    # ----------------------------------------------------------------------------------------------- best fit
    def candidates(self, job: WorkloadRecord) -> list[StoredResource]:
        """Nodes that can take ``job`` now, best fit first (fewest free GPUs left, then least free memory)."""
        nodes, _ = self._store.free_nodes(
            job.key.subscription_id,
            gpus=job.gpus,
            memory_gb=job.memory_gb,
            gpu_model=job.extra.get("gpuModelKey") or "",
            location=job.location,
            job=job.key.sk,
        )
        fitting = [
            n
            for n in nodes
            if per_gpu_memory_fits(
                int(n.counters.get("gpuTotal", 0)), int(n.counters.get("memoryGbTotal", 0)), job.gpus, job.memory_gb
            )
        ]
        return sorted(fitting, key=lambda n: best_fit_key(Capacity.of(n.counters), job.gpus, job.memory_gb))

    @staticmethod
    def _matches(job: WorkloadRecord, node: StoredResource) -> bool:
        """Whether ``node`` (as read now) still meets the job's constraints: GPU model, location, GPU memory per
        GPU (its free capacity is judged by the reservation itself)."""
        model = job.extra.get("gpuModelKey") or ""
        specs = node.document["properties"].get("hardwareSpecs") or {}
        gpu_total = int(node.counters.get("gpuTotal", 0))
        return (
            (not model or gpu_model_key(specs.get("gpuModel")) == model)
            and (not job.location or normalize_location(node.document["location"]) == job.location)
            and per_gpu_memory_fits(gpu_total, int(node.counters.get("memoryGbTotal", 0)), job.gpus, job.memory_gb)
        )

    def place(self, ctx: CallContext, job: WorkloadRecord) -> Placed | None:
        """Reserve ``job``'s GPUs on the best-fitting node and move it Pending → Scheduled, one transaction (the
        node's conditional update judges). None when no candidate could take it now, or the job changed (e.g. a
        cancel came)."""
        for node in self.candidates(job)[:MAX_ATTEMPTS]:
            for _ in range(3):  # again on a busy store, or on the node as it is now
                try:
                    return self._reserve(ctx, job, node)
                except StoreBusy:
                    continue
                except NodeChanged:
                    refreshed = self._store.get_resource(node.key)
                    if refreshed is None or not self._matches(job, refreshed):
                        break
                    node = refreshed  # its pricing or shape changed since it was read: lock what is in force now
                except (CapacityShortfall, NodeUnavailable, NodeMissing):
                    break  # the index was behind: the next candidate
                except WorkloadChanged:
                    return None
        return None

    def _reserve(self, ctx: CallContext, job: WorkloadRecord, node: StoredResource) -> Placed:
        """Reserve on ``node`` as read: the reservation is conditioned on the node's etag, so the billing terms the
        job locks are the ones in force at the moment of the reservation (billing/metering.py). Raises the store's
        typed errors (:class:`NodeChanged` when the node was written since it was read)."""
        props = node.document["properties"]
        placed = Placed(
            node=node.key,
            node_id=node.document["id"],
            owner=str(props.get("owner", "")),
            terms=BillingTerms.from_pricing(props.get("pricing") or {}),
        )
        reason = f"Placed on {node.document['name']}; submitting to the DGX Platform."
        document = {
            **job.document,
            "systemData": arm_rules.stamp_system_data(ctx, job.document["systemData"]),
            "properties": {
                **job.document["properties"],
                "status": "Scheduled",
                "statusReason": reason,
                "assignedNode": placed.node_id,
                "billingTerms": terms_properties(placed.terms, ctx.now_iso()),
            },
        }
        self._store.transition(
            job.key,
            expect={"status": "Pending", "cancelRequested": False, "operationId": job.operation_id},
            set_values={
                "document": document,
                "etag": arm_rules.new_etag(),
                "status": "Scheduled",
                "capacityReserved": True,
                "nodeResourceGroup": node.key.resource_group,
                "nodeName": node.key.names[-1],
                "nodeOwner": placed.owner,
                "billingTerms": to_json(placed.terms.as_stored()),
                **placed_index_values(job.key, node_owner=placed.owner),
            },
            remove=("taskToken", "drainNode"),
            reservation=Reservation(
                node.key,
                job.gpus,
                job.memory_gb,
                Capacity.of(node.counters).totals,
                job=job.key.sk,
                etag=node.etag,
            ),
            audit=self._kernel.audit(ctx, JOBS, job.key, JOBS.write, reason, job.document, document),
            lease_until=self._clock() + self._settings.workflow_lease_grace_seconds,
        )
        drained = job.extra.get("drainNode")
        if drained:
            self._store.set_draining(self._drained_key(job, drained), None)
        return placed

    @staticmethod
    def _drained_key(job: WorkloadRecord, drained: str) -> ResourceKey:
        group, _, name = drained.partition("/")
        return ResourceKey(job.key.subscription_id, group, "sparkNodes", (name,))

    # ----------------------------------------------------------------------------------------------- waiting jobs
    def dispatch(self, ctx: CallContext, subscription_id: str) -> int:
        """Serve the subscription's waiting jobs (module docstring): place each that fits now, in order, and resume
        its execution; drain a node for the first one if it starves. Returns how many were placed."""
        placed = 0
        first_waiting: WorkloadRecord | None = None
        for key in self._store.pending_jobs(subscription_id, DISPATCH_BATCH):
            job = self._store.get_workload(key)
            token = job.extra.get("taskToken") if job else None
            if job is None or job.extra.get("status") != "Pending" or not token or job.cancel_requested:
                continue
            if self.place(ctx, job) is not None:
                placed += 1
                if not self._workflows.complete_task(token, {"end": None, "placed": True}):
                    logger.warning(
                        "A placed job's execution no longer waits; the reconciler ends it",
                        extra={"job": job.document["id"]},
                    )
                continue
            if first_waiting is None:
                first_waiting = job
        if first_waiting is not None:
            self._drain_for_if_starving(first_waiting)
        return placed

    def _drain_for_if_starving(self, job: WorkloadRecord) -> None:
        if job.extra.get("drainNode") or job.extra.get("status") in FINAL_JOB_STATUSES:
            return
        submitted = datetime.fromisoformat(str(job.extra.get("submittedAt", "")).replace("Z", "+00:00")).timestamp()
        if self._clock() - submitted < self._settings.job_starvation_seconds:
            return
        nodes, _ = self._store.free_nodes(
            job.key.subscription_id,
            gpus=0,
            memory_gb=0,
            gpu_model=job.extra.get("gpuModelKey") or "",
            location=job.location,
            job=job.key.sk,
        )
        able = [
            n
            for n in nodes
            if int(n.counters.get("gpuTotal", 0)) >= job.gpus
            and per_gpu_memory_fits(
                int(n.counters.get("gpuTotal", 0)), int(n.counters.get("memoryGbTotal", 0)), job.gpus, job.memory_gb
            )
        ]
        if not able:
            return
        nearest = max(able, key=lambda n: Capacity.of(n.counters).free_gpus)
        self._store.set_draining(nearest.key, job.key.sk)
        self._store.renew_lease(  # records the drain on the job (cleared when it is placed or ends)
            job.key,
            float(job.lease_until or self._clock()),
            expect={"status": "Pending"},
            also_set={"drainNode": f"{nearest.key.resource_group}/{nearest.key.names[-1]}"},
        )
        logger.info(
            "Draining a node for a starving job", extra={"job": job.document["id"], "node": nearest.document["id"]}
        )


def end(status: str, reason: str, **extra: Any) -> dict[str, Any]:
    """The ``end`` a workflow step reports when the job must end: ``status`` (Succeeded/Failed/Canceled) and
    ``reason``, plus ``stop`` (whether it may still run on the DGX Platform), ``endedAt`` (epoch seconds),
    ``exitCode``."""
    return {"status": status, "reason": reason, "stop": False, **extra}
