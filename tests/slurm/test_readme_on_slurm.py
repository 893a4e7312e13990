"""Given the local stack started as the README says but on a real Slurm cluster (``./dev up --backend slurm``: nodes
named as the README's, 8 fake H100s each), when the README's worked examples run verbatim, then they pass as they
do on the DGX simulator: the seed's job, the Ollama instance, and the usage and billing walkthrough (its node's
earnings equal what the day's FOCUS export bills for it, to the cent, the block checks itself)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_local_stack import Stack, run_readme_block
from tests.slurm.test_backend import _skip_reason

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    if (reason := _skip_reason()) is not None:
        pytest.skip(reason)
    running = Stack(tmp_path_factory.mktemp("stack"), options=("--backend", "slurm", "--quiet"))
    assert "Slurm cluster 'local'" in running.text
    yield running
    if running.proc.poll() is None:
        assert running.stop() == 0


def test_the_seeds_job_example_runs_on_slurm(stack: Stack):
    done = run_readme_block(stack, "<!-- worked-example-jobs -->")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "job: Succeeded" in lines and "delete: 200" in lines
    cost = next(line for line in lines if "'currency': 'USD'" in line)
    assert "'amount': '0.000000'" not in cost, cost


def test_the_instance_example_runs_on_slurm(stack: Stack):
    done = run_readme_block(stack, "<!-- worked-example -->")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "operation: Succeeded" in done.stdout
    assert "Hello from the Slurm cluster." in done.stdout
    assert "delete: 202" in done.stdout and "'allocatedGpus': 0" in done.stdout


def test_the_usage_and_billing_example_runs_on_slurm(stack: Stack, tmp_path: Path):
    out = tmp_path / "exports"
    done = run_readme_block(
        stack, "<!-- worked-example-usage -->", {"--out exports": f"--out {out}", " exports/": f" {out}/"}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = next(line for line in done.stdout.splitlines() if line.startswith("node dgx-meter: earned"))
    earned, billed = re.findall(r"(\d+\.\d+) USD", summary)
    assert earned == billed and float(earned) > 0, summary
