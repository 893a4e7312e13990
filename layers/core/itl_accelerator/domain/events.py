"""State-change events (docs/EVENTS.md): what a change of state of an Ollama instance, a job, a node or a capacity
reservation says, as the provider publishes it on EventBridge. Which table writes are state changes is the stream decoder's
(repositories/dynamodb/streams.py); putting them on the bus is events.py's."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: ``source`` of every event.
SOURCE = "itl.accelerator"
#: The ``state`` of an item that was removed.
DELETED = "Deleted"
#: ``detail-type`` of each kind of state change.
INSTANCE_STATE_CHANGED = "Instance State Changed"
JOB_STATE_CHANGED = "Job State Changed"
NODE_STATE_CHANGED = "Node State Changed"
RESERVATION_STATE_CHANGED = "Capacity Reservation State Changed"
DETAIL_TYPES: tuple[str, ...] = (
    INSTANCE_STATE_CHANGED,
    JOB_STATE_CHANGED,
    NODE_STATE_CHANGED,
    RESERVATION_STATE_CHANGED,
)


@dataclass(frozen=True)
class StateChange:
    """One event's content (docs/EVENTS.md): see :meth:`detail`."""

    detail_type: str
    resource_type: str
    resource_id: str
    subscription_id: str
    resource_group: str
    name: str
    previous_state: str | None
    state: str
    time: str
    event_id: str
    sequence_number: str
    extra: dict[str, Any] = field(default_factory=dict)

    def detail(self) -> dict[str, Any]:
        """The event's ``detail``: ``eventId`` (dedupe by it), ``sequenceNumber`` (order per resource),
        ``resourceId`` (the ARM id), ``resourceType``, ``subscriptionId``, ``resourceGroup``, ``name``,
        ``previousState`` (null when created), ``state`` (``Deleted`` when removed), ``time`` (ISO 8601 UTC, when
        the change was committed), for jobs ``submittedBy`` and ``statusReason``, and for capacity reservations
        ``bookedBy``, ``startTime``, ``endTime`` and ``reservedNodes`` (the ARM ids of the nodes that hold it)."""
        return {
            "eventId": self.event_id,
            "sequenceNumber": self.sequence_number,
            "resourceId": self.resource_id,
            "resourceType": self.resource_type,
            "subscriptionId": self.subscription_id,
            "resourceGroup": self.resource_group,
            "name": self.name,
            "previousState": self.previous_state,
            "state": self.state,
            "time": self.time,
            **self.extra,
        }

    def entry(self, bus_name: str) -> dict[str, Any]:
        """The ``PutEvents`` entry of this change on ``bus_name``."""
        return {
            "Source": SOURCE,
            "DetailType": self.detail_type,
            "Detail": json.dumps(self.detail(), separators=(",", ":")),
            "EventBusName": bus_name,
            "Time": datetime.fromisoformat(self.time.replace("Z", "+00:00")),
        }
