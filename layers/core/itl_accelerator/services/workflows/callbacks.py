"""DGX Platform callbacks: the platform says an instance is ready (or failed) or a job ended, and the workflow that
waits for it goes on at once instead of at its next poll (``POST /dgx/callbacks``, functions/itl_functions/
dgx_callbacks.py; the contract: docs/dgx-platform.openapi.yaml ``callbacks``).

A callback is a hint, never the truth: after its signature is verified (itl_accelerator/dgx/callbacks.py), it
only wakes the waiting workflow, whose own step then asks the platform —

- an instance: its provisioning waits between polls on a task token (instance_steps.py ``await_ready``). The
  callback first leaves a ``ready_signal`` on the instance, then completes the token recorded there; the wait
  records its token before it reads the signal. So whichever comes first, one of the two ends the wait, and the
  poll that follows reads the platform.
- a job: the callback runs the job tracker's check of that one job now (the platform's GET), which resumes the
  job's execution with its end (services/schedules/job_tracker.py ``check_now``).

Idempotent: a callback twice, or after the poll already moved on, finds nothing waiting (Step Functions answers
``TaskTimedOut``/``InvalidToken``, which :meth:`StateMachines.complete_task` reports as False) and changes nothing
that matters. A callback naming a resource the provider does not have, or another DGX id, is ignored.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from itl_accelerator.arm import parse_resource_id
from itl_accelerator.dgx.callbacks import CallbackEvent, verify
from itl_accelerator.domain.records import ResourceKey
from itl_accelerator.domain.states import ProvisioningState
from itl_accelerator.observability import logger
from itl_accelerator.repositories.protocols import Expect, Repositories
from itl_accelerator.services.workflows.io import WOKEN
from itl_accelerator.state_machines import StateMachines

if TYPE_CHECKING:
    from itl_accelerator.services.schedules.job_tracker import JobTracker

#: What a callback did: ``resumed`` a waiting execution; ``signaled`` the instance's next wait to end at once (no
#: wait held a live token); ``checked`` the job on the platform, which has not ended it yet (its next check is
#: set); ``due`` the job ended, but its execution has no live token yet (the tracker's next run ends it);
#: ``ignored`` nothing of the provider waits on it.
Outcome = Literal["resumed", "signaled", "checked", "due", "ignored"]


class DgxCallbacks:
    """Receives the platform's callbacks (module docstring). ``secret`` gives the signing secret (read when a
    callback comes: Secrets Manager in AWS); ``tolerance_seconds`` bounds a callback's age; ``job_tracker`` gives
    the tracker (built — with the DGX client — only when a job's callback comes); ``clock`` returns epoch
    seconds."""

    def __init__(
        self,
        repositories: Repositories,
        state_machines: StateMachines,
        *,
        secret: Callable[[], str],
        tolerance_seconds: int,
        job_tracker: Callable[[], JobTracker],
        clock: Callable[[], float] = time.time,
    ):
        self._instances = repositories.instances
        self._state_machines = state_machines
        self._secret = secret
        self._tolerance = tolerance_seconds
        self._job_tracker = job_tracker
        self._clock = clock

    def receive(self, headers: Mapping[str, str], body: bytes) -> Outcome:
        """Verify the callback (``headers`` in lower case, ``body`` as received) and wake what waits on it. Raises
        ``CallbackRejected`` (401) or ``CallbackMalformed`` (400) from itl_accelerator/dgx/callbacks.py."""
        event = verify(self._secret(), headers, body, now=self._clock(), tolerance=self._tolerance)
        outcome = self.instance_event(event) if event.type == "instance" else self.job_event(event)
        logger.info(
            "DGX callback",
            extra={"event_id": event.event_id, "type": event.type, "dgx_id": event.id, "outcome": outcome},
        )
        return outcome

    def instance_event(self, event: CallbackEvent) -> Outcome:
        """An instance is ready or failed on the platform: end its provisioning's wait now."""
        key = _key(event.name, "sparkOllamaInstances")
        instance = self._instances.get(key) if key is not None else None
        if instance is None or instance.dgx_id != event.id or instance.state != ProvisioningState.PROVISIONING:
            return "ignored"
        assert key is not None
        # the signal before the token (InstanceSteps.await_ready records the token before it reads the signal)
        if not instance.ready_signal and not self._instances.note(
            instance, replace(instance, ready_signal=True), expect=Expect(dgx_id=event.id)
        ):
            return "ignored"  # gone or changed meanwhile: its workflow sees why at its poll
        current = self._instances.get(key)
        if current is not None and current.task_token and self._state_machines.complete_task(current.task_token, WOKEN):
            return "resumed"
        return "signaled"

    def job_event(self, event: CallbackEvent) -> Outcome:
        """A job ended on the platform: the tracker checks it now."""
        key = _key(event.name, "sparkJobs")
        if key is None:
            return "ignored"
        return self._job_tracker().check_now(key, event.id)


def _key(arm_id: str, type_segment: str) -> ResourceKey | None:
    """The key of the provider's resource of type ``type_segment`` whose ARM id is ``arm_id`` (None: not one)."""
    parsed = parse_resource_id(arm_id)
    if parsed is None:
        return None
    subscription_id, resource_group, segments = parsed
    if not segments or segments[-1][0].lower() != type_segment.lower():
        return None
    return ResourceKey(subscription_id, resource_group, type_segment, tuple(name for _, name in segments))
