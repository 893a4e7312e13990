"""EventBridge Scheduler, locally: the schedules template.yaml declares (``ScheduleV2`` events of its functions),
fired on a timer by ``itl-local up`` and on demand by ``itl-local schedule NAME`` (``./dev schedule NAME``).

Expressions are EventBridge's: ``rate(5 minutes)``, ``cron(15 2 * * ? *)`` (minutes hours day-of-month month
day-of-week year, UTC), ``at(2026-12-01T00:00:00)``. Cron expressions are evaluated by croniter after the
translation EventBridge's format needs (the year field dropped, ``?`` read as ``*``, day-of-week 1-7 = SUN-SAT
moved to croniter's 0-6). The input is the event's ``Input`` with Scheduler's context attributes
(``<aws.scheduler.scheduled-time>``, ``<aws.scheduler.execution-id>``, ``<aws.scheduler.schedule-arn>``,
``<aws.scheduler.attempt-number>``) filled in, as Scheduler does.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter

from itl_accelerator.observability import did_something
from itl_local.iam import may_invoke
from itl_local.lambda_runtime import invoke
from itl_local.template import Template, load_handler

_RATE = re.compile(r"^rate\((\d+)\s+(minute|minutes|hour|hours|day|days)\)$")
_CRON = re.compile(r"^cron\((.+)\)$")
_EVERY = re.compile(r"^every\(([0-9.]+)\)$")  # local only: a fixed period in seconds
_AT = re.compile(r"^at\((\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}


class ScheduleNotPermitted(PermissionError):
    """EventBridge Scheduler's role may not invoke the schedule's function (its ``AccessDeniedException``): the
    template's ``RoleArn`` must grant ``lambda:InvokeFunction`` on it."""


@dataclass(frozen=True)
class Schedule:
    """One schedule: its name (``{Function}.{Event}``), the function's logical id and handler, the expression and
    the input template (JSON text); ``permitted``: whether its role may invoke the function (template.yaml's
    ``RoleArn`` policies: itl_local/iam.py ``may_invoke``)."""

    name: str
    function_id: str
    handler: str
    expression: str
    input: str = "{}"
    timeout_seconds: int = 10
    permitted: bool = True

    def next_after(self, moment: datetime, started: datetime) -> datetime | None:
        """The first firing strictly after ``moment`` (rates count from ``started``, as a new schedule does); None
        when a one-time ``at()`` schedule has passed."""
        if rate := _RATE.match(self.expression):
            period = int(rate.group(1)) * _UNIT_SECONDS[rate.group(2).rstrip("s")]
            elapsed = (moment - started).total_seconds()
            return started + timedelta(seconds=period * (int(elapsed // period) + 1))
        if cron := _CRON.match(self.expression):
            following: datetime = croniter(unix_cron(cron.group(1)), moment).get_next(datetime)
            return following
        if every := _EVERY.match(self.expression):
            seconds = float(every.group(1))
            elapsed = (moment - started).total_seconds()
            return started + timedelta(seconds=seconds * (int(elapsed // seconds) + 1))
        if at := _AT.match(self.expression):
            when = datetime.fromisoformat(at.group(1)).replace(tzinfo=UTC)
            return when if when > moment else None
        raise ValueError(f"unsupported schedule expression {self.expression!r} in {self.name}")

    def event(self, scheduled: datetime, attempt: int = 1) -> dict[str, Any]:
        """The payload Scheduler sends: the input with its context attributes filled in."""
        text = self.input
        for attribute, value in {
            "<aws.scheduler.scheduled-time>": scheduled.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "<aws.scheduler.execution-id>": str(uuid.uuid4()),
            "<aws.scheduler.schedule-arn>": f"arn:aws:scheduler:us-east-1:123456789012:schedule/local/{self.name}",
            "<aws.scheduler.attempt-number>": str(attempt),
        }.items():
            text = text.replace(attribute, value)
        payload: dict[str, Any] = json.loads(text)
        return payload


def unix_cron(aws_fields: str) -> str:
    """An EventBridge cron body (6 fields) as a 5-field cron croniter reads."""
    fields = aws_fields.split()
    if len(fields) != 6:
        raise ValueError(f"an EventBridge cron expression has 6 fields, not {len(fields)}: {aws_fields!r}")
    minute, hour, day, month, weekday, _year = (f.replace("?", "*") for f in fields)
    weekday = re.sub(r"\d", lambda m: str((int(m.group(0)) - 1) % 7), weekday)
    return " ".join((minute, hour, day, month, weekday))


def schedules(template: Template) -> list[Schedule]:
    """Every ``ScheduleV2`` (and classic ``Schedule``) event of the template's functions."""
    found = []
    for function_id, props in template.functions().items():
        for event_name, event in (props.get("Events") or {}).items():
            if event.get("Type") not in ("ScheduleV2", "Schedule"):
                continue
            p = event["Properties"]
            found.append(
                Schedule(
                    name=f"{function_id}.{event_name}",
                    function_id=function_id,
                    handler=props["Handler"],
                    expression=p["ScheduleExpression"] if "ScheduleExpression" in p else p["Schedule"],
                    input=p.get("Input") or "{}",
                    timeout_seconds=template.function_timeout(function_id),
                    permitted="RoleArn" not in p or may_invoke(template, p["RoleArn"], function_id),
                )
            )
    return sorted(found, key=lambda s: s.name)


def find(template: Template, name: str) -> Schedule:
    """A schedule by its name, by its function's logical id when that function has one schedule, or by the
    ``schedule`` its input names (``usage-sync``). Raises ``KeyError`` listing the names."""
    every = schedules(template)
    matches = (
        [s for s in every if s.name == name]
        or [s for s in every if s.function_id == name]
        or [s for s in every if json.loads(s.input or "{}").get("schedule") == name]
    )
    if len(matches) != 1:
        names = [f"{json.loads(s.input or '{}').get('schedule', '')} ({s.name})" for s in every]
        raise KeyError(f"no single schedule named {name!r}; one of: {', '.join(names)}")
    return matches[0]


def fire(schedule: Schedule, scheduled: datetime | None = None, extra: dict[str, Any] | None = None) -> Any:
    """Invoke the schedule's function once, now, as Scheduler would (with ``extra`` added to its input); returns
    what it returned. Raises :class:`ScheduleNotPermitted` when the schedule's role may not invoke it (Scheduler
    would fail the invocation, and the function would never run)."""
    if not schedule.permitted:
        raise ScheduleNotPermitted(
            f"{schedule.name}: its RoleArn may not invoke {schedule.function_id} (lambda:InvokeFunction is not granted)"
        )
    event = {**schedule.event(scheduled or datetime.now(UTC)), **(extra or {})}
    return invoke(load_handler(schedule.handler), event, schedule.function_id, schedule.timeout_seconds)


class ScheduleRunner:
    """Fires ``schedules`` on a daemon thread until :meth:`stop`. ``report(schedule, outcome, ms)`` is told of
    each firing that did something or failed (``outcome``: ``ok`` or the exception's type name) — an idle run
    (``itl_accelerator.observability.did_something``) is not reported, so an idle stack prints nothing; an invocation that fails does not
    stop the others, and a firing that comes due while the previous one of the same schedule still runs is
    skipped."""

    def __init__(
        self,
        schedules: list[Schedule],
        report: Callable[[Schedule, str, float], None] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        *,
        every: float | None = None,
    ):
        """``every`` (seconds) fires every schedule at that period instead of its own expression (tests, and a
        local stack that should not wait minutes for its schedules)."""
        if every is not None:
            schedules = [
                Schedule(s.name, s.function_id, s.handler, f"every({every})", s.input, s.timeout_seconds, s.permitted)
                for s in schedules
            ]
        self._schedules = schedules
        self._report = report or (lambda *_: None)
        self._clock = clock
        self._stop = threading.Event()
        self._busy: set[str] = set()
        self._one_at_a_time = threading.Lock()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Starts firing; the schedules count from now (read here, on the caller's thread, not when the runner's
        thread first runs)."""
        self._thread = threading.Thread(target=self._run, args=(self._clock(),), name="schedules", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self, started: datetime) -> None:
        due = {s.name: s.next_after(started, started) for s in self._schedules}
        while not self._stop.is_set():
            now = self._clock()
            for schedule in self._schedules:
                when = due[schedule.name]
                if when is None or when > now:
                    continue
                due[schedule.name] = schedule.next_after(now, started)
                if schedule.name not in self._busy:
                    self._busy.add(schedule.name)
                    threading.Thread(target=self._fire, args=(schedule, when), daemon=True).start()
            upcoming = [w for w in due.values() if w is not None]
            wait = min(((w - now).total_seconds() for w in upcoming), default=60.0)
            self._stop.wait(max(0.05, min(wait, 1.0)))  # wake each second: the clock may be adjusted

    def _fire(self, schedule: Schedule, when: datetime) -> None:
        started = time.perf_counter()
        worked = True
        try:
            with self._one_at_a_time:  # Powertools' Metrics is per process: concurrent handlers would mix theirs
                worked = did_something(fire(schedule, when))
            outcome = "ok"
        except Exception as exc:  # noqa: BLE001 - one failed run must not stop the schedules
            outcome = type(exc).__name__
        finally:
            self._busy.discard(schedule.name)
        if worked:
            self._report(schedule, outcome, (time.perf_counter() - started) * 1000)
