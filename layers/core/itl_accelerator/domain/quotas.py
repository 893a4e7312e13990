"""Accelerator quotas: how many devices of a kind a subscription may hold at once in one location — of every model of
the kind (quota ``gpus``, ``tpus``, ``npus``...: :func:`~itl_accelerator.domain.accelerators.quota_plural`) and of
one model (``gpus-{model}``, ``tpus-{model}``: the model as placement compares it, ``gpus-h100sxm``, ``tpus-v5e``).
``gpus`` keeps the meaning it had before other kinds existed: every GPU. Modelled on Azure's Microsoft.Quota (a
``limit`` per named quota) and its usages (``currentValue`` against ``limit``); enforced like Kueue's ClusterQueue
nominal quota per resource flavor or Slurm's ``GrpTRES``: an allocation (an instance, a job placed) that would take
the subscription past a limit is refused, in the same transaction that reserves its devices on a node.

Every allocation is counted whether or not a limit is set, so usages are always known and a limit set later
applies to what runs already (a limit below the current use refuses new allocations until enough ends).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from itl_accelerator.arm import normalize_location
from itl_accelerator.domain.accelerators import (
    GPU,
    KNOWN_KINDS,
    accelerator_key,
    display_plural,
    kind_of_key,
    model_of_key,
    quota_plural,
)

#: The quota that counts every GPU of a location.
ALL_GPUS = "gpus"
#: Prefix of the quota of one GPU model.
MODEL_PREFIX = "gpus-"
#: A quota name: ``{kind}s`` or ``{kind}s-{model}`` in lower case.
QUOTA_NAME = re.compile(r"^([a-z][a-z0-9]{1,15})s(?:-([a-z0-9][a-z0-9._-]{0,63}))?$")


def model_quota(key: str) -> str:
    """The name of the quota of one model (its :func:`~itl_accelerator.domain.accelerators.accelerator_key`:
    ``h100sxm`` → ``gpus-h100sxm``, ``tpu:v5e`` → ``tpus-v5e``)."""
    return f"{quota_plural(kind_of_key(key))}-{model_of_key(key)}"


def quota_names(key: str) -> tuple[str, ...]:
    """The quotas an allocation of a device with accelerator key ``key`` counts in: its kind's (``gpus``, ``tpus``),
    and its model's when known."""
    kind_quota = quota_plural(kind_of_key(key))
    return (kind_quota, model_quota(key)) if model_of_key(key) else (kind_quota,)


def key_of_quota(name: str) -> str | None:
    """The accelerator key a quota name counts (``gpus`` → "", ``tpus-v5e`` → ``tpu:v5e``, ``tpus`` → ``tpu:``); None
    when ``name`` is not a quota name."""
    found = QUOTA_NAME.match(name)
    if found is None:
        return None
    return accelerator_key(found.group(1), found.group(2))


def kind_of_quota(name: str) -> str:
    """The kind a quota name counts (``tpus-v5e`` → ``TPU``; ``GPU`` for what is not a quota name)."""
    found = QUOTA_NAME.match(name)
    return KNOWN_KINDS.get(found.group(1), found.group(1)) if found else GPU


def localized_name(name: str) -> str:
    """The display name of a quota (``gpus`` → ``GPUs``, ``tpus-v5e`` → ``TPUs (v5e)``)."""
    found = QUOTA_NAME.match(name)
    if found is None:
        return name
    plural = display_plural(kind_of_quota(name))
    return f"{plural} ({found.group(2)})" if found.group(2) else plural


@dataclass(frozen=True)
class QuotaScope:
    """Where an allocation's devices count: its node's ``location`` (normalised) and accelerator ``model`` key
    (:func:`~itl_accelerator.domain.accelerators.accelerator_key`: a GPU's model key, "" when the node names none;
    ``tpu:v5e`` for another kind). Recorded on the workload when it reserves, so the release counts out of the same quotas even when
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
    """One quota of a subscription in a location: how many devices of its kind are held now (``current``), its ``limit`` (None: no
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
        """Devices that may still be allocated (None: no limit; negative when a limit was lowered below the use)."""
        return None if self.limit is None else self.limit - self.current
