"""GPU quotas: how many GPUs a subscription may hold at once in one location — of every model (quota ``gpus``) and of
one GPU model (quota ``gpus-{model}``, the model as placement compares it: ``gpus-h100sxm``). Modelled on Azure's
Microsoft.Quota (a ``limit`` per named quota) and its usages (``currentValue`` against ``limit``); enforced like
Kueue's ClusterQueue nominal quota or Slurm's ``GrpTRES``: an allocation (an instance, a job placed) that would take
the subscription past a limit is refused, in the same transaction that reserves its GPUs on a node.

Every allocation is counted whether or not a limit is set, so usages are always known and a limit set later
applies to what runs already (a limit below the current use refuses new allocations until enough ends).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from itl_accelerator.arm import normalize_location

#: The quota that counts every GPU of a location.
ALL_GPUS = "gpus"
#: Prefix of the quota of one GPU model.
MODEL_PREFIX = "gpus-"


def model_quota(gpu_model: str) -> str:
    """The name of the quota of one GPU model (its key as placement compares it: ``h100sxm`` → ``gpus-h100sxm``)."""
    return f"{MODEL_PREFIX}{gpu_model}"


def quota_names(gpu_model: str) -> tuple[str, ...]:
    """The quotas an allocation of a GPU of ``gpu_model`` counts in (``gpus``, and its model's when known)."""
    return (ALL_GPUS, model_quota(gpu_model)) if gpu_model else (ALL_GPUS,)


def localized_name(name: str) -> str:
    """The display name of a quota (``gpus-h100sxm`` → ``GPUs (h100sxm)``)."""
    return "GPUs" if name == ALL_GPUS else f"GPUs ({name.removeprefix(MODEL_PREFIX)})"


@dataclass(frozen=True)
class QuotaScope:
    """Where an allocation's GPUs count: its node's ``location`` (normalised) and GPU ``model`` key ("" when the node
    names none). Recorded on the workload when it reserves, so the release counts out of the same quotas even when
    the node changed since."""

    location: str
    model: str

    @classmethod
    def of(cls, location: str, gpu_model: str) -> QuotaScope:
        return cls(normalize_location(location), gpu_model)

    @property
    def names(self) -> tuple[str, ...]:
        """The quotas it counts in."""
        return quota_names(self.model)

    def encode(self) -> str:
        """The stored form (``{location}#{model}``)."""
        return f"{self.location}#{self.model}"

    @classmethod
    def decode(cls, text: str) -> QuotaScope:
        location, _, model = text.partition("#")
        return cls(location, model)


@dataclass
class QuotaUsage:
    """One quota of a subscription in a location: how many GPUs are held now (``current``), its ``limit`` (None: no
    limit set) and, once a limit was set, its ARM envelope ``document`` and ``etag``."""

    subscription_id: str
    location: str
    name: str
    current: int = 0
    limit: int | None = None
    document: dict[str, Any] | None = None
    etag: str | None = None

    @property
    def headroom(self) -> int | None:
        """GPUs that may still be allocated (None: no limit; negative when a limit was lowered below the use)."""
        return None if self.limit is None else self.limit - self.current
