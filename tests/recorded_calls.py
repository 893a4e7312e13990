"""What the session's AWS calls came to, for tests/integration/test_iam_policies.py: the calls the functions' policies
in template.yaml refuse, the functions invoked, those that made a recorded call, the test modules collected and how
many tests were deselected.

A session in one process checks its own recorder. ``./dev test`` runs the suite on several pytest-xdist workers
(each with its own embedded AWS and recorder), so the policy tests run afterwards, in a second pytest run: every
worker writes its :class:`RecordedCalls` into the directory ``ITL_TEST_CALLS_OUT`` names when its session ends (and
leaves the ``last`` tests out of its collection), and the second run reads them all back from ``ITL_TEST_CALLS_IN``
and checks the whole suite's calls at once.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The directory a worker writes its summary into (the first run of ``./dev test``).
CALLS_OUT = "ITL_TEST_CALLS_OUT"
#: The directory the policy tests read every worker's summary from (the second run).
CALLS_IN = "ITL_TEST_CALLS_IN"


@dataclass
class RecordedCalls:
    """``denied``: each authorization a call needed that its function's policies do not give (one line each);
    ``invocations``: function logical id → invocations; ``with_calls``: functions that made a recorded AWS call;
    ``modules``: the test modules (file names) collected; ``deselected``: tests deselected in the session."""

    denied: list[str] = field(default_factory=list)
    invocations: Counter[str] = field(default_factory=Counter)
    with_calls: set[str] = field(default_factory=set)
    modules: set[str] = field(default_factory=set)
    deselected: int = 0

    @classmethod
    def of(cls, recorder: Any, template: Any, items: list[Any], deselected: int) -> RecordedCalls:
        """The summary of a session: ``recorder`` (an :class:`itl_local.aws_calls.CallRecorder`), its collected
        ``items`` and deselected count; the calls are evaluated against ``template``'s policies here."""
        from itl_local.iam import uncovered

        calls = list(recorder.calls)
        return cls(
            denied=[str(d) for d in uncovered(template, calls, recorder.bindings)],
            invocations=Counter(recorder.invocations),
            with_calls={call.function for call in calls},
            modules={Path(str(item.path)).name for item in items},
            deselected=deselected,
        )

    def merged(self, other: RecordedCalls) -> RecordedCalls:
        """Both sessions together (each worker collects the whole selection, so deselections are not added up)."""
        return RecordedCalls(
            denied=sorted({*self.denied, *other.denied}),
            invocations=self.invocations + other.invocations,
            with_calls=self.with_calls | other.with_calls,
            modules=self.modules | other.modules,
            deselected=max(self.deselected, other.deselected),
        )

    def write(self, directory: Path, worker: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        document = {
            "denied": self.denied,
            "invocations": dict(self.invocations),
            "withCalls": sorted(self.with_calls),
            "modules": sorted(self.modules),
            "deselected": self.deselected,
        }
        (directory / f"{worker}.json").write_text(json.dumps(document, indent=1))

    @classmethod
    def read(cls, directory: Path) -> RecordedCalls | None:
        """Every worker's summary in ``directory`` merged; None when there is none."""
        merged: RecordedCalls | None = None
        for path in sorted(directory.glob("*.json")):
            document = json.loads(path.read_text())
            one = cls(
                denied=list(document["denied"]),
                invocations=Counter(document["invocations"]),
                with_calls=set(document["withCalls"]),
                modules=set(document["modules"]),
                deselected=int(document["deselected"]),
            )
            merged = one if merged is None else merged.merged(one)
        return merged


def writing_to() -> Path | None:
    """The directory this session writes its summary into (``ITL_TEST_CALLS_OUT``), if any."""
    value = os.environ.get(CALLS_OUT)
    return Path(value) if value else None


def reading_from() -> Path | None:
    """The directory the policy tests read the suite's summaries from (``ITL_TEST_CALLS_IN``), if any."""
    value = os.environ.get(CALLS_IN)
    return Path(value) if value else None
