"""What every stand-in workload does (the DGX simulator's rules, local/itl_local/dgx_simulator.py, for a real process):
it writes a line when it starts, one per second while it runs (``step N: loss=...``) and one when it ends, for
``ITL_SIM_SECONDS`` seconds (5), then exits ``ITL_SIM_EXIT_CODE`` (0); ``ITL_SIM_EXIT_CODES=3,0`` gives one code per
run of the job (``ITL_JOB``, counted in ``ITL_SIM_STATE_DIR``), the last repeating; ``ITL_SIM_FOREVER=1`` never ends on
its own. SIGTERM ends it after ``ITL_SIM_SIGTERM_SECONDS`` (0) with exit 143, as a container that honours it does."""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import time
from pathlib import Path


def _runs(job: str) -> int:
    """This run's number for ``job`` (1 the first), counted in a file of the state directory."""
    state = Path(os.environ.get("ITL_SIM_STATE_DIR") or "/tmp/itl-sim-runs")  # noqa: S108 - the cluster's own
    state.mkdir(parents=True, exist_ok=True)
    path = state / hashlib.sha256(job.encode()).hexdigest()[:32]
    runs = int(path.read_text() or 0) + 1 if path.exists() else 1
    path.write_text(str(runs))
    return runs


def _exit_code() -> int:
    codes = [c for c in (os.environ.get("ITL_SIM_EXIT_CODES") or "").split(",") if c.strip()]
    if codes:
        run = _runs(os.environ.get("ITL_JOB") or "job")
        return int(codes[min(run, len(codes)) - 1])
    return int(os.environ.get("ITL_SIM_EXIT_CODE") or 0)


def main(kind: str) -> None:
    seconds = float(os.environ.get("ITL_SIM_SECONDS") or 5)
    forever = os.environ.get("ITL_SIM_FOREVER") == "1"
    code = _exit_code()
    grace = float(os.environ.get("ITL_SIM_SIGTERM_SECONDS") or 0)

    def on_term(signum: int, frame: object) -> None:
        print(f"[itl] {kind}: SIGTERM, stopping in {grace:g} s", flush=True)
        time.sleep(grace)
        sys.exit(143)

    signal.signal(signal.SIGTERM, on_term)
    print(f"[itl] {kind} started ({' '.join(sys.argv[1:])})", flush=True)
    started = time.monotonic()
    step = 0
    while forever or time.monotonic() - started < seconds:
        step += 1
        print(f"step {step}: loss={1 / (step + 1):.4f}", flush=True)
        time.sleep(1.0)
    print(f"[itl] {kind} ended with exit code {code}", flush=True)
    sys.exit(code)
