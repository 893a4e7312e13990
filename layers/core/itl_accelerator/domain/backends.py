"""Which execution platform runs a node's work (issue 42): the DGX Platform (every node registered before platforms
were named) or a Slurm cluster of the deployment's (settings ``SLURM_CLUSTERS``), where the node is one Slurm node.

A node's document says it in ``properties.backend``: ``{"type": "DgxPlatform"}`` (the default, shown on every node)
or ``{"type": "Slurm", "cluster": "<a configured cluster's name>", "nodeName": "<its Slurm NodeName>", "partition":
"<optional: the cluster's partition to submit to>"}``. Placement stays the provider's (best fit, kinds, quotas,
budgets, gangs, preemption); the platform runs what was placed, pinned to the node(s) placed
(itl_accelerator/platforms). Like its devices, a node's backend may change only while nothing holds its devices.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

DGX_PLATFORM = "DgxPlatform"
SLURM = "Slurm"
#: The platform types a node may name (their wire names).
BACKEND_TYPES = (DGX_PLATFORM, SLURM)
#: A Slurm cluster's name as the deployment's settings and a node name it (letters, digits, '-', '_'; 1-40).
CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,39}$")
#: A Slurm NodeName or partition name (slurm.conf: letters, digits, '-', '_', '.'; 1-64).
SLURM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class NodeBackend:
    """Where a node's work runs: ``type`` (:data:`DGX_PLATFORM` or :data:`SLURM`); for a Slurm node its ``cluster``
    (a name of ``SLURM_CLUSTERS``), its Slurm ``node_name`` and the ``partition`` to submit to ("" : the cluster's
    default)."""

    type: str = DGX_PLATFORM
    cluster: str = ""
    node_name: str = ""
    partition: str = ""

    @property
    def target(self) -> str:
        """The host name the platform places work on by (a Slurm node's name; "" on the DGX Platform, which places by
        the node's id)."""
        return self.node_name

    @property
    def is_slurm(self) -> bool:
        return self.type == SLURM

    def as_properties(self) -> dict[str, Any]:
        """``properties.backend`` (wire names; unset members left out)."""
        shown: dict[str, Any] = {"type": self.type}
        if self.is_slurm:
            shown.update(cluster=self.cluster, nodeName=self.node_name)
            if self.partition:
                shown["partition"] = self.partition
        return shown

    @classmethod
    def of_properties(cls, properties: dict[str, Any]) -> NodeBackend:
        """A node's backend from its document's ``properties`` (none said, or a node stored before platforms were
        named: the DGX Platform)."""
        given = properties.get("backend")
        if not isinstance(given, dict) or given.get("type") != SLURM:
            return cls()
        return cls(
            type=SLURM,
            cluster=str(given.get("cluster") or ""),
            node_name=str(given.get("nodeName") or ""),
            partition=str(given.get("partition") or ""),
        )
