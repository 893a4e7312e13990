"""The router of execution platforms (package docstring): the platform of a node (its ``properties.backend``,
domain/backends.py) and of a platform id.

A platform id names its platform: a Slurm job or instance is ``slurm:{cluster}:{job id}``
(itl_accelerator/slurm/platform.py); any other id is the DGX Platform's (every id stored before platforms were
named). So everything done with an id — read, batch read, cancel, delete, logs, usage — goes where the work is
without reading the node again, and a batch read of ids on several platforms makes one batch call per platform.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from itl_accelerator.dgx.errors import DgxPermanentError
from itl_accelerator.dgx.models import DgxInstance, DgxJob, DgxLogPage, DgxUsage
from itl_accelerator.domain.backends import NodeBackend
from itl_accelerator.domain.records import Node
from itl_accelerator.platforms.protocol import ExecutionPlatform

T = TypeVar("T")

#: The prefix of a Slurm platform id: ``slurm:{cluster}:{job id}``.
SLURM_ID_PREFIX = "slurm:"


def slurm_id(cluster: str, job_id: int) -> str:
    """The platform id of Slurm job ``job_id`` on ``cluster``."""
    return f"{SLURM_ID_PREFIX}{cluster}:{job_id}"


def platform_of(platform_id: str) -> str | None:
    """The Slurm cluster a platform id is on (None: the DGX Platform's)."""
    if not platform_id.startswith(SLURM_ID_PREFIX):
        return None
    cluster, _, _ = platform_id[len(SLURM_ID_PREFIX) :].partition(":")
    return cluster


def platform_name(platform_id: str | None) -> str:
    """Where a platform id's work runs, in words: ``the DGX Platform`` or ``Slurm cluster 'c1'``."""
    cluster = platform_of(platform_id or "")
    return f"Slurm cluster '{cluster}'" if cluster is not None else "the DGX Platform"


def platform_job_number(platform_id: str) -> str:
    """The job's own id on its platform (a Slurm job id; the DGX Platform's id as it is)."""
    return platform_id.rsplit(":", 1)[-1] if platform_of(platform_id) is not None else platform_id


class UnknownCluster(DgxPermanentError):
    """A node or platform id names a Slurm cluster the deployment has not configured (``SLURM_CLUSTERS``)."""


class Platforms:
    """Every execution platform of the deployment: ``dgx`` (the DGX Platform's client, made on its first call) and
    ``slurm(name)`` (the platform of a configured Slurm cluster, made on its first use; raises :class:`UnknownCluster`
    for another name). Methods that take a platform id go to its platform (module docstring)."""

    def __init__(self, dgx: ExecutionPlatform, slurm: Callable[[str], ExecutionPlatform] | None = None):
        self.dgx = dgx
        self._slurm = slurm
        self._clusters: dict[str, ExecutionPlatform] = {}

    def cluster(self, name: str) -> ExecutionPlatform:
        """The platform of Slurm cluster ``name``. Raises :class:`UnknownCluster`."""
        if name not in self._clusters:
            try:
                if self._slurm is None:
                    raise KeyError(name)
                self._clusters[name] = self._slurm(name)
            except KeyError as exc:
                raise UnknownCluster(f"No Slurm cluster '{name}' is configured (SLURM_CLUSTERS).", status=400) from exc
        return self._clusters[name]

    def of_backend(self, backend: NodeBackend) -> ExecutionPlatform:
        """The platform a node of ``backend`` runs on."""
        return self.cluster(backend.cluster) if backend.is_slurm else self.dgx

    def for_node(self, node: Node | None) -> ExecutionPlatform:
        """The platform ``node`` runs on (a node gone meanwhile: the DGX Platform, where every node ran before)."""
        return self.of_backend(node.backend) if node is not None else self.dgx

    def for_id(self, platform_id: str) -> ExecutionPlatform:
        """The platform a platform id is on."""
        cluster = platform_of(platform_id)
        return self.cluster(cluster) if cluster is not None else self.dgx

    # ----------------------------------------------------------------------------------------------- by id
    def get_job(self, job_id: str) -> DgxJob:
        return self.for_id(job_id).get_job(job_id)

    def get_jobs(self, job_ids: list[str]) -> dict[str, DgxJob]:
        """One batch read per platform of the ids (docs/SLURM.md: a Slurm cluster answers from one read of what
        changed on it)."""
        return self._batched(job_ids, lambda platform, ids: platform.get_jobs(ids))

    def cancel_job(self, job_id: str, *, grace_period_seconds: int = 0, reason: str | None = None) -> DgxJob | None:
        return self.for_id(job_id).cancel_job(job_id, grace_period_seconds=grace_period_seconds, reason=reason)

    def get_job_logs(self, job_id: str, **kwargs: Any) -> DgxLogPage:
        return self.for_id(job_id).get_job_logs(job_id, **kwargs)

    def get_instance(self, instance_id: str) -> DgxInstance:
        return self.for_id(instance_id).get_instance(instance_id)

    def get_instances(self, instance_ids: list[str]) -> dict[str, DgxInstance]:
        return self._batched(instance_ids, lambda platform, ids: platform.get_instances(ids))

    def delete_instance(self, instance_id: str) -> bool:
        return self.for_id(instance_id).delete_instance(instance_id)

    def get_usage(self, resource_id: str, start: str, end: str) -> DgxUsage:
        return self.for_id(resource_id).get_usage(resource_id, start, end)

    def _batched(
        self, ids: Iterable[str], read: Callable[[ExecutionPlatform, list[str]], dict[str, T]]
    ) -> dict[str, T]:
        by_platform: dict[str | None, list[str]] = {}
        for platform_id in ids:
            by_platform.setdefault(platform_of(platform_id), []).append(platform_id)
        found: dict[str, T] = {}
        for cluster, group in by_platform.items():
            found.update(read(self.cluster(cluster) if cluster is not None else self.dgx, group))
        return found
