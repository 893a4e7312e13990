"""A real Slurm cluster (Debian's 22.05, itl_local.slurm_cluster) for the Slurm client's live tests.

Skipped, with the reason, when Slurm's packages are missing (``./dev slurm-install`` installs them; CI installs
them, so there these tests run) or when not root. The session's cluster has 2 nodes of 8 fake H100s each and
Slurm's default MinJobAge (300 s), so a finished job stays readable; a second, one-node cluster beside it
(``short_lived_cluster``) has MinJobAge=2 for the purge test and the fault tests. Every test submits through
``jobs``, which cancels what is left of its jobs afterwards and waits until they ended, so one failing test leaves no
job behind to hold the GPUs of the next. Waits poll a condition until a deadline; nothing sleeps a fixed time.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from itl_accelerator.slurm import JwtTokenSource, SlurmJob, SlurmJobNotFound, SlurmJobSpec, SlurmRestClient
from itl_local.slurm_cluster import SlurmCluster, missing_binaries

#: How long a job may take to reach a state on a busy 2-core machine (submit -> RUNNING is ~1 s idle).
STATE_DEADLINE = 120.0


def _skip_reason() -> str | None:
    missing = missing_binaries()
    if missing:
        return f"Slurm is not installed (missing: {', '.join(missing)}); ./dev slurm-install installs it"
    if os.geteuid() != 0:
        return "a local Slurm cluster needs root (slurmd starts jobs as their users; mknod)"
    return None


def _cluster(prefix: str, **kwargs: Any) -> Iterator[SlurmCluster]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    # under /tmp and world-searchable: munge and slurmrestd (nobody) need every parent of it o+x, which pytest's
    # own temporary directories (0700) are not
    directory = tempfile.mkdtemp(prefix=prefix)
    os.chmod(directory, 0o755)
    cluster = SlurmCluster(directory, **kwargs)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def _own_cluster(prefix: str, **kwargs: Any) -> Iterator[SlurmCluster]:
    """A cluster of a test's own (for faults that could leave a shared one changed)."""
    yield from _cluster(prefix, **kwargs)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    """2 nodes (n1, n2) of gpu:h100:8, MinJobAge 300 s, KillWait 2 s."""
    yield from _cluster("itl-slurm-test-", cluster_name="itltest", kill_wait=2)


@pytest.fixture(scope="session")
def short_lived_cluster() -> Iterator[SlurmCluster]:
    """1 node of gpu:h100:8 beside the first (its own directory and ports), MinJobAge 2 s: finished jobs are
    purged within seconds."""
    yield from _cluster("itl-slurm-short-", cluster_name="itlshort", nodes=1, min_job_age=2, kill_wait=2)


def client_for(cluster: SlurmCluster, user: str = "root", **kwargs: Any) -> SlurmRestClient:
    """A v0.0.38 client of ``cluster`` acting as ``user``, with root's tokens (root may act as any user)."""
    tokens = JwtTokenSource(cluster.jwt_key, user="root", lifetime_seconds=120, refresh_margin_seconds=30)
    return SlurmRestClient(cluster.url, "v0.0.38", user, tokens, **kwargs)


@pytest.fixture(scope="session")
def slurm(slurm_cluster: SlurmCluster) -> Iterator[SlurmRestClient]:
    with client_for(slurm_cluster) as client:
        yield client


def wait_for(
    read: Callable[[], Any], done: Callable[[Any], bool], *, what: str, deadline: float = STATE_DEADLINE
) -> Any:
    """Poll ``read()`` until ``done(value)`` (returned) or ``deadline`` seconds pass (assertion error with the last
    value). The interval grows from 0.1 s to 1 s."""
    end = time.monotonic() + deadline
    interval = 0.1
    value = read()
    while not done(value):
        assert time.monotonic() < end, f"timed out after {deadline:.0f} s waiting for {what}; last: {value!r}"
        time.sleep(interval)
        interval = min(interval * 1.5, 1.0)
        value = read()
    return value


def wait_state(client: SlurmRestClient, job_id: int, *states: str, deadline: float = STATE_DEADLINE) -> SlurmJob:
    """The job once it is in one of ``states``."""
    job: SlurmJob = wait_for(
        lambda: client.get_job(job_id), lambda j: j.state in states, what=f"job {job_id} {states}", deadline=deadline
    )
    return job


class Jobs:
    """Submits through a client and remembers each job, to clean up after the test."""

    def __init__(self, client: SlurmRestClient, cluster: SlurmCluster):
        self.client = client
        self.cluster = cluster
        self.ids: list[int] = []

    def spec(self, script: str, **fields: Any) -> SlurmJobSpec:
        """A spec running ``script`` (bash) in the cluster's shared work directory, its output in ``<id>.out``."""
        fields.setdefault("name", f"itl-test-{time.monotonic_ns()}")
        fields.setdefault("working_directory", str(self.cluster.workdir))
        fields.setdefault("standard_output", f"{self.cluster.workdir}/%j.out")
        return SlurmJobSpec(script="#!/bin/bash\n" + script + "\n", **fields)

    def submit(self, script: str, *, client: SlurmRestClient | None = None, **fields: Any) -> int:
        job_id = (client or self.client).submit(self.spec(script, **fields))
        self.ids.append(job_id)
        return job_id

    def output(self, job_id: int) -> str:
        return (self.cluster.workdir / f"{job_id}.out").read_text()

    def cleanup(self) -> None:
        for job_id in self.ids:
            try:
                if not self.client.get_job(job_id).ended:
                    self.client.cancel(job_id)
                wait_for(
                    lambda job_id=job_id: _ended_or_gone(self.client, job_id),
                    bool,
                    what=f"job {job_id} to end after the test",
                )
            except SlurmJobNotFound:
                pass


def _ended_or_gone(client: SlurmRestClient, job_id: int) -> bool:
    try:
        return client.get_job(job_id).ended
    except SlurmJobNotFound:
        return True


@pytest.fixture
def jobs(slurm: SlurmRestClient, slurm_cluster: SlurmCluster) -> Iterator[Jobs]:
    tracker = Jobs(slurm, slurm_cluster)
    yield tracker
    tracker.cleanup()
