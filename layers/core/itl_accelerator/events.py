"""Publishing the provider's events on EventBridge (docs/EVENTS.md): state changes read from the table's stream
(functions/itl_functions/state_events.py) and budget notifications (services/schedules/budget_monitor.py).

Delivery: the stream delivers every committed change at least once, in order per item; a batch whose events
EventBridge does not all accept is retried whole by the event source mapping (template.yaml). So an event is never
lost, and may come twice: ``detail.eventId`` (the stream record's own id, the same on every delivery) is what a
consumer dedupes by, and ``detail.sequenceNumber`` (increasing per item) orders one resource's events, which
EventBridge does not promise to deliver in order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, wait_incrementing

from itl_accelerator.domain.events import SOURCE, StateChange
from itl_accelerator.observability import logger


class EventsNotPublished(RuntimeError):
    """EventBridge did not accept every event of a batch after the retries: the batch is to be delivered again."""


@dataclass
class PublishReport:
    """A batch: records read, events published, records without a state change, entries EventBridge refused once
    and that were sent again."""

    records: int = 0
    published: int = 0
    ignored: int = 0
    retried: int = 0

    def as_metrics(self) -> dict[str, int]:
        """Counts as metrics (``publish_counts`` prefixes them ``StateEvents``)."""
        return {"published": self.published, "ignored": self.ignored, "retried": self.retried}


#: PutEvents takes at most 10 entries a call.
MAX_ENTRIES_PER_CALL = 10


class StateEventPublisher:
    """Puts state changes (and other provider events: :meth:`put`) on the bus ``bus_name`` with ``events`` (a boto3
    EventBridge client).
    Entries EventBridge refuses are sent again (``attempts`` in all, ``backoff`` seconds times the attempt between);
    when some still are refused, :class:`EventsNotPublished` makes the stream deliver the batch again."""

    def __init__(
        self,
        events: Any,
        bus_name: str,
        *,
        attempts: int = 3,
        backoff: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
    ):
        if not bus_name:
            raise ValueError("EVENT_BUS_NAME is not set: the state-change events have no bus to go to")
        self._events = events
        self._bus = bus_name
        self._attempts = attempts
        self._backoff = backoff
        self._sleep = sleep

    def publish(self, changes: list[StateChange], records: int) -> PublishReport:
        """Publish a batch's state changes (``changes`` of its ``records`` stream records) in stream order; returns
        what was done (raises :class:`EventsNotPublished` as described)."""
        report = PublishReport(records=records, ignored=records - len(changes))
        entries = [c.entry(self._bus) for c in changes]
        for start in range(0, len(entries), MAX_ENTRIES_PER_CALL):
            report.retried += self._put(entries[start : start + MAX_ENTRIES_PER_CALL])
        report.published = len(entries)
        return report

    def _put(self, entries: list[dict[str, Any]]) -> int:
        """Put ``entries``, sending again those refused (class docstring; tenacity's retry); returns how many were
        sent again."""
        pending, retried, calls = entries, 0, 0

        def put_pending() -> None:
            nonlocal pending, retried, calls
            retried += len(pending) if calls else 0
            calls += 1
            response = self._events.put_events(Entries=pending)
            if not response.get("FailedEntryCount"):
                return
            pending = [e for e, r in zip(pending, response["Entries"], strict=True) if r.get("ErrorCode")]
            codes = sorted({str(r.get("ErrorCode")) for r in response["Entries"] if r.get("ErrorCode")})
            logger.warning("EventBridge refused state-change events", extra={"refused": len(pending), "codes": codes})
            raise EventsNotPublished(f"{len(pending)} state-change events refused by EventBridge: {codes}")

        Retrying(
            retry=retry_if_exception_type(EventsNotPublished),
            stop=stop_after_attempt(self._attempts),
            wait=wait_incrementing(start=self._backoff, increment=self._backoff),  # backoff x the attempt
            sleep=self._sleep,
            reraise=True,  # the last refusal
        )(put_pending)
        return retried

    def put(self, detail_type: str, detail: dict[str, Any]) -> None:
        """Publish one event of the provider (``source`` ``itl.accelerator``) now, e.g. a budget's (raises
        :class:`EventsNotPublished` when EventBridge keeps refusing it)."""
        entry = {
            "Source": SOURCE,
            "DetailType": detail_type,
            "Detail": json.dumps(detail, separators=(",", ":")),
            "EventBusName": self._bus,
        }
        self._put([entry])
