"""The interface every execution platform serves (the DGX Platform's contract, docs/dgx-platform.openapi.yaml, which
the Slurm platform implements too: itl_accelerator/slurm/platform.py).

Shapes are the contract's (itl_accelerator/dgx/models.py): :class:`DgxJob`, :class:`DgxInstance`, :class:`DgxUsage`,
:class:`DgxLogPage`; failures its typed errors (itl_accelerator/dgx/errors.py): ``DgxTransientError`` (worth retrying:
the state machines' ``Retry`` names it), ``DgxPermanentError`` and ``DgxNotFound`` — whichever platform raised them, so
the workflows retry and catch one set of names. A platform id (what ``submit_job`` and ``create_instance`` return as
``id``) names its platform (:func:`itl_accelerator.platforms.router.platform_of`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from itl_accelerator.dgx.errors import DgxPermanentError
from itl_accelerator.dgx.models import DgxInstance, DgxJob, DgxLogPage, DgxUsage


class LogsNotServed(DgxPermanentError):
    """The platform serves no job logs (a Slurm cluster: slurmrestd serves no output files; docs/SLURM.md "Logs").
    Its message says where the output is."""


@dataclass(frozen=True)
class NodeHealth:
    """A node as its platform reports it: ``name`` (its host name there: a Slurm NodeName), ``state`` (the platform's
    words: Slurm's base state and flags, ``IDLE``, ``MIXED+DRAIN``, ``DOWN+NOT_RESPONDING``...), ``reason`` (why it is
    down or drained), ``placeable`` (it takes new work), ``devices`` (its devices per ``kind:type`` as the platform
    counts them: ``{"gpu:h100": 8}``) and ``drained_by_provider`` (drained with the provider's reason)."""

    name: str
    state: str
    reason: str
    placeable: bool
    devices: dict[str, int]
    drained_by_provider: bool = False


class ExecutionPlatform(Protocol):
    """Where a node's work runs: jobs (submitted idempotently, read in batches, cancelled with a grace period, their
    logs), Ollama instances (created idempotently, read, deleted) and usage metrics. ``targets``: the hosts a node's
    platform names (a Slurm node's name, one per node part of a multi-node job, in the order of ``node_ids``); the DGX
    Platform places by node id and ignores them; ``partition``: the Slurm partition of the node(s) (None: the cluster's
    default; the DGX Platform ignores it). ``recover``: this submit's key may have been sent before and its
    answer lost (a step run again): a platform that cannot de-duplicate by the key itself looks for that job first
    (the DGX Platform de-duplicates by ``Idempotency-Key`` and ignores it)."""

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
    ) -> DgxJob: ...

    def get_job(self, job_id: str) -> DgxJob: ...

    def get_jobs(self, job_ids: list[str]) -> dict[str, DgxJob]: ...

    def cancel_job(self, job_id: str, *, grace_period_seconds: int = 0, reason: str | None = None) -> DgxJob | None: ...

    def find_job(self, idempotency_key: str) -> DgxJob | None: ...

    def get_job_logs(
        self, job_id: str, *, after: int = 0, since: str | None = None, tail: int | None = None, limit: int = 1000
    ) -> DgxLogPage: ...

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
    ) -> DgxInstance: ...

    def get_instance(self, instance_id: str) -> DgxInstance: ...

    def get_instances(self, instance_ids: list[str]) -> dict[str, DgxInstance]: ...

    def delete_instance(self, instance_id: str) -> bool: ...

    def find_instance(self, idempotency_key: str) -> DgxInstance | None: ...

    def get_usage(self, resource_id: str, start: str, end: str) -> DgxUsage: ...
