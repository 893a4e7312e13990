"""Fleet changes: what a node registered, changed or removed means for the jobs waiting for capacity, at once.

Triggered by the table's stream (DynamoDB Streams, ``NEW_AND_OLD_IMAGES``; template.yaml's event source mapping
passes node items only), so no API function does placement work and no change is missed: a stream record is
delivered at least once, after its transaction committed, and every step here is idempotent.

Rules (issue 14, item 4 — waiting jobs must not wait for the next periodic retry, nor for their pending timeout):

- A node that is ``Available`` after a write of the node itself (registered, uncordoned, enlarged, repriced) —
  the waiting jobs of its subscription are served now (services/placement.py ``dispatch``: best fit, priority
  order, backfill).
- A node removed, or changed in a way that may leave a waiting job with no node that could ever hold it (fewer
  GPUs or less memory, another GPU model or location) — every waiting job of its
  subscription is admitted again, and one that no node could ever hold now fails at once, saying why, instead of
  waiting days for its pending timeout. A job that only waits for capacity (the node is cordoned, busy) waits on.

Reservations and releases change a node's counters, never its ``etag``: those records are not fleet changes (the
workflow that releases GPUs serves the queue itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from boto3.dynamodb.types import TypeDeserializer

from itl_accelerator.observability import logger
from itl_accelerator.services.context import CallContext
from itl_accelerator.services.instance_workflow import workflow_context
from itl_accelerator.services.placement import DISPATCH_BATCH, Placement, end
from itl_accelerator.store.jobs import JobStore
from itl_accelerator.store.keys import SEP
from itl_accelerator.workflows import WorkflowStarter

_deserializer = TypeDeserializer()
#: Node attributes whose change may shrink what the fleet could ever hold.
_SHAPE_ATTRIBUTES = ("gpuTotal", "memoryGbTotal", "gpuModelKey", "location")


def _image(record: dict[str, Any], which: str) -> dict[str, Any] | None:
    image = (record.get("dynamodb") or {}).get(which)
    return {k: _deserializer.deserialize(v) for k, v in image.items()} if image else None


@dataclass
class FleetReport:
    """What one batch of stream records did: node changes seen, waiting jobs placed, jobs failed as no longer
    admissible."""

    changes: int = 0
    placed: int = 0
    failed: int = 0

    def as_metrics(self) -> dict[str, int]:
        return {"changes": self.changes, "placed": self.placed, "failed": self.failed}


class FleetChanges:
    """See the module docstring."""

    def __init__(self, placement: Placement, store: JobStore, workflows: WorkflowStarter):
        self._placement = placement
        self._store = store
        self._workflows = workflows

    def on_records(self, records: list[dict[str, Any]]) -> FleetReport:
        """Handle a batch of DynamoDB stream records (Lambda's event ``Records``); records of other items are
        ignored. Raises on a failure (the batch is delivered again; everything here is idempotent)."""
        report = FleetReport()
        grown: dict[str, str] = {}
        shrunk: dict[str, str] = {}
        for record in records:
            keys = (record.get("dynamodb") or {}).get("Keys") or {}
            if not str((keys.get("SK") or {}).get("S", "")).startswith(f"NODE{SEP}"):
                continue
            old, new = _image(record, "OldImage"), _image(record, "NewImage")
            if old is not None and new is not None and old.get("etag") == new.get("etag"):
                continue  # a reservation, a release or a drain: capacity bookkeeping, not a change of the fleet
            subscription = str(keys["PK"]["S"]).split(SEP, 1)[1]
            event_id = str(record.get("eventID", ""))
            report.changes += 1
            if new is not None and new.get("availability") == "Available":
                grown.setdefault(subscription, event_id)
            if old is not None and (new is None or _may_shrink(old, new)):
                shrunk.setdefault(subscription, event_id)
        for subscription, event_id in shrunk.items():
            report.failed += self.readmit(self._context(event_id), subscription)
        for subscription, event_id in {**shrunk, **grown}.items():
            report.placed += self._placement.dispatch(self._context(event_id), subscription)
        if report.changes:
            logger.info("Fleet changed", extra={"report": report.as_metrics(), "subscriptions": sorted(grown | shrunk)})
        return report

    def readmit(self, ctx: CallContext, subscription_id: str) -> int:
        """Admit every waiting job of the subscription again; end each that no node could ever hold now (Failed,
        inadmissible, saying why). Returns how many ended. One ``Query`` of the queue and one of the fleet's
        shapes, then one ``GetItem`` per waiting job."""
        shapes = self._store.fleet_shapes(subscription_id)
        failed = 0
        for key in self._store.pending_jobs(subscription_id, DISPATCH_BATCH):
            job = self._store.get_workload(key)
            token = job.extra.get("taskToken") if job else None
            if job is None or job.extra.get("status") != "Pending" or not token or job.cancel_requested:
                continue
            reason = self._placement.inadmissible(job, shapes)
            if reason is None:
                continue
            outcome = {"end": end("Failed", f"Inadmissible: {reason}"), "placed": False}
            if self._workflows.complete_task(str(token), outcome):
                failed += 1
                logger.info("A waiting job can no longer be held", extra={"job": job.document["id"], "why": reason})
        return failed

    @staticmethod
    def _context(event_id: str) -> CallContext:
        return workflow_context(f"fleet-{event_id}", f"fleet-{event_id}")


def _may_shrink(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether a node's change may leave a waiting job with no node that could ever hold it: its shape changed
    (a cordoned node still counts: it may take the job once it is uncordoned)."""
    return any(old.get(a) != new.get(a) for a in _SHAPE_ATTRIBUTES)
