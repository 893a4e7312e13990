"""The local stack's view of its state-change events: a rule on the embedded AWS's event bus (template.yaml's
``EventBus``) sending every event of source ``itl.accelerator`` to an SQS queue of its own, read on a thread, each
event handed to ``deliver`` — ``itl-local up`` prints a console line for each. What it shows is what a user's rule
on the bus would receive: the events went through EventBridge, not around it.

Local runtime only: nothing here is shipped.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("itl_local.event_tap")
RULE = "itl-local-console"
#: Seconds one receive waits for a message (the thread checks for stop in between).
WAIT_SECONDS = 1


class EventTap:
    """``events``/``sqs``: boto3 clients of the embedded AWS; ``bus``: the bus's name; ``deliver(event)``: called
    with each event (EventBridge's envelope: ``source``, ``detail-type``, ``time``, ``detail``)."""

    def __init__(self, events: Any, sqs: Any, bus: str, deliver: Callable[[dict[str, Any]], None]):
        self._events, self._sqs, self._bus, self._deliver = events, sqs, bus, deliver
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._queue = ""

    def start(self) -> None:
        """Create the queue and the rule (idempotent), then read on a daemon thread."""
        self._queue = self._sqs.create_queue(QueueName=RULE)["QueueUrl"]
        arn = self._sqs.get_queue_attributes(QueueUrl=self._queue, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        pattern = {"source": ["itl.accelerator"]}
        self._events.put_rule(Name=RULE, EventBusName=self._bus, EventPattern=json.dumps(pattern))
        self._events.put_targets(Rule=RULE, EventBusName=self._bus, Targets=[{"Id": "console", "Arn": arn}])
        self._thread = threading.Thread(target=self._run, name="event-tap", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop reading. The thread (a daemon) is not waited for beyond a moment: a read under way ends with the
        embedded AWS, and what it reads then is not printed (the stack is stopping)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=0.2)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                messages = self._sqs.receive_message(
                    QueueUrl=self._queue, MaxNumberOfMessages=10, WaitTimeSeconds=WAIT_SECONDS
                ).get("Messages", [])
                for message in messages:
                    if self._stop.is_set():
                        return
                    self._deliver(json.loads(message["Body"]))
                    self._sqs.delete_message(QueueUrl=self._queue, ReceiptHandle=message["ReceiptHandle"])
            except Exception:  # the console's tap must not die on one bad read
                if not self._stop.is_set():
                    log.exception("Event tap read failed; reading on")
                    self._stop.wait(WAIT_SECONDS)
