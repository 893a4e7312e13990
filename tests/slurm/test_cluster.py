"""The local Slurm cluster itself (itl_local.slurm_cluster): it starts and stops again and again leaving nothing
running, two run side by side, its command line works, and a cluster whose owner died is stopped from its
directory."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from itl_local.slurm_cluster import MARKER, SlurmCluster, _environ, _pids
from tests.slurm.conftest import Jobs, _skip_reason, client_for, wait_for, wait_state


@pytest.fixture
def directory() -> Iterator[Path]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    path = Path(tempfile.mkdtemp(prefix="itl-slurm-cycle-"))
    path.chmod(0o755)
    yield path
    SlurmCluster(path).stop_leftovers()
    shutil.rmtree(path, ignore_errors=True)


def running_in(directory: Path) -> list[int]:
    return [pid for pid in _pids() if _environ(pid).get(MARKER) == str(directory)]


def test_a_cluster_starts_runs_a_job_and_stops_five_times_in_a_row(directory: Path) -> None:
    figures = []
    cluster = SlurmCluster(directory, cluster_name="cycles", kill_wait=2)
    for _ in range(5):
        began = time.monotonic()
        cluster.start()
        started = time.monotonic() - began
        with client_for(cluster) as client:
            job_id = Jobs(client, cluster).submit("true", gres_per_node="gpu:2")
            assert wait_state(client, job_id, "COMPLETED").exit_code == 0
        first_job = time.monotonic() - began - started
        began = time.monotonic()
        cluster.stop()
        stopped = time.monotonic() - began
        assert running_in(directory) == []
        figures.append((started, first_job, stopped))
    cluster.stop()  # again: nothing to do
    print(
        "\nstart / first 2-GPU job COMPLETED / stop, seconds: "
        + "; ".join(f"{a:.2f} / {b:.2f} / {c:.2f}" for a, b, c in figures)
    )


def test_two_clusters_run_side_by_side(slurm_cluster: SlurmCluster, short_lived_cluster: SlurmCluster) -> None:
    assert slurm_cluster.url != short_lived_cluster.url
    assert slurm_cluster.directory != short_lived_cluster.directory
    with client_for(slurm_cluster) as one, client_for(short_lived_cluster) as other:
        assert [n.name for n in one.nodes()] == ["n1", "n2"]
        assert [n.name for n in other.nodes()] == ["n1"]
        assert one.ping() and other.ping()


def test_the_command_line_starts_prints_and_stops_a_cluster(directory: Path) -> None:
    up = subprocess.Popen(
        [sys.executable, "-m", "itl_local.slurm_cluster", "up", "--dir", str(directory), "--nodes", "1", "--gpus", "2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert up.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 120
        while not lines or "Ctrl-C stops it." not in lines[-1]:
            assert time.monotonic() < deadline and up.poll() is None, "".join(lines)
            lines.append(up.stdout.readline())
        text = "".join(lines)
        url = next(line.split()[1] for line in lines if line.strip().startswith("url:"))
        assert "cluster:  itl" in text and "token --dir" in text
        token = subprocess.run(
            [sys.executable, "-m", "itl_local.slurm_cluster", "token", "--dir", str(directory), "--lifetime", "60"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        answer = httpx.get(
            f"{url}/slurm/v0.0.38/nodes",
            headers={"X-SLURM-USER-NAME": "root", "X-SLURM-USER-TOKEN": token},
            timeout=30,
        )
        assert answer.status_code == 200 and answer.json()["nodes"][0]["gres"] == "gpu:h100:2"
        up.send_signal(signal.SIGINT)  # Ctrl-C
        assert up.wait(timeout=120) == 0
        assert running_in(directory) == []
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()


def test_a_cluster_whose_owner_died_is_stopped_from_its_directory(directory: Path) -> None:
    up = subprocess.Popen(
        [sys.executable, "-m", "itl_local.slurm_cluster", "up", "--dir", str(directory), "--nodes", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert up.stdout is not None
    for line in up.stdout:
        if "Ctrl-C stops it." in line:
            break
    up.kill()  # the owner dies without stopping anything: its daemons run on
    up.wait()
    assert len(running_in(directory)) >= 4  # munged, slurmctld, slurmd, slurmrestd
    result = subprocess.run(
        [sys.executable, "-m", "itl_local.slurm_cluster", "stop", "--dir", str(directory)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "stopped" in result.stdout
    wait_for(lambda: running_in(directory), lambda pids: pids == [], what="nothing left running", deadline=30)
    # and the directory serves again
    with SlurmCluster(directory, nodes=1) as again:
        assert again.nodes()["n1"]["state"] == "idle"
    assert os.listdir(directory)
