"""The node health sweep of the Slurm clusters (part of each job tracker run, services/schedules/job_tracker.py): how
each cluster reports its nodes, recorded on the provider's nodes of that cluster, so placement never puts work on a
node the cluster takes none on and the node says why (docs/SLURM.md, "Nodes").

Per cluster and run: one request to slurmrestd (``GET .../nodes``) and one ``Query`` of the cluster's nodes (GSI1, of
every subscription: a read of the cluster's nodes, never the fleet's), then a write only where what a node shows
changed — so a run's work grows with the changes, not with the fleet or the cluster.

- A node DOWN, drained (``DRAIN``, by the cluster's admins or the provider), not responding or absent from the
  cluster is **not placeable**: out of the placement index, its ``properties.backendStatus`` saying the cluster's
  state and reason. Back in once the cluster takes work on it again (and the waiting jobs of its subscription are
  served). What runs there already goes on, or ends by the cluster's word (a node that failed: ``NODE_FAIL``, the
  job's retry policy deciding).
- **Capacity checked against GRES**: the cluster's count of the node's device kind (``gpu``) below what the node was
  registered with makes it not placeable (the cluster would refuse its work); another count, or a GRES type that is
  not its model, is a warning it shows (``backendStatus.warnings``).
- **One Slurm node, one provider node**: a registration naming a Slurm node another provider node names is refused
  (409 ``SlurmNodeTaken``); should two race past that check, only the first registered is placed on and mirrors its
  cordon — the other shows ``TAKEN`` — so a supplier can neither sell nor drain another's node.
- **Cordon and drain**: a node the provider does not offer (``Cordoned``, ``Maintenance``, ``Offline``) is drained on
  the cluster with the provider's reason (``ITL: ...``), and resumed once offered again — on clusters whose REST
  version serves node updates (v0.0.41+); v0.0.38 serves none, and there the provider's own cordon keeps its work off
  the node (its jobs are pinned to the nodes placed).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from itl_accelerator.dgx.errors import DgxError
from itl_accelerator.domain.accelerators import display_plural, model_key
from itl_accelerator.domain.records import Node
from itl_accelerator.domain.states import Availability
from itl_accelerator.observability import logger
from itl_accelerator.platforms.protocol import NodeHealth
from itl_accelerator.platforms.router import Platforms
from itl_accelerator.repositories.protocols import NodeRepository
from itl_accelerator.settings import Settings


class ClusterNodes(Protocol):
    """What the sweep asks of a cluster's platform (itl_accelerator/slurm/platform.py)."""

    def node_health(self) -> list[NodeHealth]: ...

    def drain(self, name: str, reason: str) -> bool: ...

    def resume(self, name: str) -> bool: ...


def _checked_at(now: float) -> str:
    """When a status was read (``now``, epoch seconds) as it shows it: ISO 8601 UTC, whole seconds."""
    return datetime.fromtimestamp(int(now), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def backend_status(node: Node, health: NodeHealth | None, cluster: str, now: float) -> dict[str, Any]:
    """What ``node`` shows of how cluster ``cluster`` reports it (module docstring): ``{state, reason, placeable,
    gres, warnings, checkedAt}`` — ``state`` ``UP`` while it takes work, else the cluster's words."""
    checked = _checked_at(now)
    name = node.backend.node_name
    if health is None:
        return {
            "state": "UNKNOWN",
            "reason": f"Slurm cluster '{cluster}' has no node '{name}'.",
            "placeable": False,
            "gres": None,
            "warnings": [],
            "checkedAt": checked,
        }
    kind = node.kind.lower()
    mine = {k: n for k, n in health.devices.items() if k.split(":", 1)[0] == kind}
    count = sum(mine.values())
    types = sorted({k.split(":", 1)[1] for k in mine if ":" in k})
    warnings: list[str] = []
    placeable, reason = health.placeable, health.reason or None
    plural = display_plural(node.kind)
    if count < node.device_total:
        placeable = False
        reason = (
            f"The cluster's GRES for '{name}' count {count} {plural}; the node was registered with {node.device_total}: "
            "the cluster would refuse its work."
        )
    elif count > node.device_total:
        warnings.append(f"The cluster's GRES for '{name}' count {count} {plural}; the node offers {node.device_total}.")
    model = model_key(node.gpu_model)
    if model and types and model not in {model_key(t) for t in types}:
        warnings.append(f"The cluster's GRES type of '{name}' is {', '.join(types)}; the node says {node.gpu_model}.")
    return {
        "state": "UP" if placeable else health.state,
        "reason": None if placeable else reason,
        "placeable": placeable,
        "gres": ",".join(f"{k}:{n}" for k, n in sorted(health.devices.items())) or None,
        "warnings": warnings,
        "checkedAt": checked,
    }


def _holders(nodes: list[Node]) -> dict[str, Node]:
    """Each Slurm node name's provider node: the first registered (``systemData.createdAt``, then its id) of those
    naming it — the registration check refuses a second (services/api/nodes.py), a race of two is settled here."""
    holders: dict[str, Node] = {}
    for node in sorted(nodes, key=lambda n: (n.created_at or "~", n.arm_id.lower())):
        holders.setdefault(node.backend.node_name.lower(), node)
    return holders


def taken_status(node: Node, cluster: str, now: float) -> dict[str, Any]:
    """What a node shows whose Slurm node another provider node registered first: not placeable, saying so."""
    return {
        "state": "TAKEN",
        "reason": f"Slurm node '{node.backend.node_name}' of cluster '{cluster}' is registered as another node; "
        "only that one is placed on.",
        "placeable": False,
        "gres": None,
        "warnings": [],
        "checkedAt": _checked_at(now),
    }


def _shown(status: dict[str, Any] | None) -> tuple[Any, ...] | None:
    """What a status says that is worth a write (not when it was checked)."""
    if status is None:
        return None
    return tuple(
        status.get(k) if k != "warnings" else tuple(status.get(k) or ()) for k in sorted(status) if k != "checkedAt"
    )


class NodeHealthSweep:
    """See the module docstring. ``served`` is told a subscription whose node takes work again (placement serves its
    waiting jobs); ``clock``: epoch seconds."""

    def __init__(
        self,
        nodes: NodeRepository,
        platforms: Platforms,
        settings: Settings,
        served: Callable[[str], Any] | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self._nodes = nodes
        self._platforms = platforms
        self._settings = settings
        self._served = served
        self._clock = clock

    def run(self) -> dict[str, int]:
        """Sweep every configured cluster. Counts: ``nodes`` checked, ``changed`` (what a node shows), ``drained``
        and ``resumed`` (on a cluster for the provider's cordon), ``errors`` (a cluster that did not answer, or a
        node's drain or resume it refused: looked at again next run, as they were)."""
        counts = {"nodes": 0, "changed": 0, "drained": 0, "resumed": 0, "errors": 0}
        for cluster in self._settings.slurm_clusters:
            try:
                self._sweep(cluster.name, counts)
            except DgxError as exc:
                counts["errors"] += 1
                logger.warning(
                    "A Slurm cluster's nodes could not be read", extra={"cluster": cluster.name, "error": str(exc)}
                )
        return counts

    def _sweep(self, cluster: str, counts: dict[str, int]) -> None:
        platform = cast(ClusterNodes, self._platforms.cluster(cluster))
        health = {h.name.lower(): h for h in platform.node_health()}
        now = self._clock()
        served: set[str] = set()
        nodes = self._nodes.on_cluster(cluster)
        holders = _holders(nodes)
        for node in nodes:
            counts["nodes"] += 1
            found = health.get(node.backend.node_name.lower())
            if holders[node.backend.node_name.lower()] is node:
                self._mirror_cordon(platform, node, found, counts)
                status = backend_status(node, found, cluster, now)
            else:  # a second provider node of one Slurm node (module docstring): never placed on, never drains it
                status = taken_status(node, cluster, now)
            if _shown(status) == _shown(node.backend_status):
                continue
            if self._nodes.set_backend_status(node, status):
                counts["changed"] += 1
                logger.info(
                    "A Slurm node's state changed",
                    extra={"node": node.arm_id, "state": status["state"], "placeable": status["placeable"]},
                )
                if status["placeable"] and not node.backend_placeable:
                    served.add(node.key.subscription_id)
        for subscription in served:
            if self._served is not None:
                self._served(subscription)

    @staticmethod
    def _mirror_cordon(platform: ClusterNodes, node: Node, found: NodeHealth | None, counts: dict[str, int]) -> None:
        """The provider's cordon as a drain on the cluster, and back (module docstring)."""
        if found is None:
            return
        offered = node.availability == Availability.AVAILABLE
        drained = "DRAIN" in found.state.split("+")
        try:
            if not offered and not drained and platform.drain(found.name, f"{node.availability} in the provider"):
                counts["drained"] += 1
            elif offered and found.drained_by_provider and platform.resume(found.name):
                counts["resumed"] += 1
        except DgxError as exc:  # this node's drain is tried again next run; the cluster's other nodes go on
            counts["errors"] += 1
            logger.warning("A Slurm node's drain or resume failed", extra={"node": node.arm_id, "error": str(exc)})
