"""Requests per job tracker run to one Slurm cluster's slurmrestd, as the running jobs grow (issue 42's figure).

The real services (job steps, the job tracker, the node health sweep, placement) over the in-memory repositories and
a fake clock (tests/services/conftest.py ``Env``), with the Slurm platform (itl_accelerator/slurm/platform.py)
talking to a stand-in slurmrestd of v0.0.38 shapes (tests/services/fake_slurmrestd.py, which counts what it is
asked). For N running jobs of one GPU on N/8 nodes of 8, a tracker run with every job due is timed by its requests to slurmrestd: the goal
is a constant, not one per job (one ``GET .../jobs?update_time=``, one ``GET .../nodes``).

    python -m benchmarks.slurm_tracker
"""

from __future__ import annotations

import time
from typing import Any

from itl_accelerator.observability import logger
from itl_accelerator.settings import SlurmClusterSettings
from itl_accelerator.slurm.platform import SlurmPlatform
from tests.services.conftest import Env, make_settings
from tests.services.fake_slurmrestd import FakeSlurmrestd, platform_on

CLUSTER = "bench"


def measure(jobs: int) -> dict[str, Any]:
    """N running jobs, then one tracker run with all of them due: its requests to slurmrestd."""
    nodes = [f"s{i:04d}" for i in range(jobs // 8)]
    cluster = SlurmClusterSettings(name=CLUSTER, url="http://slurm.bench:6820")
    settings = make_settings(slurm_clusters=[cluster], default_node_backend={"type": "Slurm", "cluster": CLUSTER})
    platform: list[SlurmPlatform] = []
    env = Env(settings, slurm=lambda name: platform[0])
    fake = FakeSlurmrestd(env.clock, nodes)
    platform.append(platform_on(fake, cluster, env.clock))
    for name in nodes:
        env.add_node(name, devices=8, gpu_memory_gb=80)
    for i in range(jobs):
        env.submit(f"j{i:05d}", 1, 80)
    env.run()
    running = sum(1 for i in range(jobs) if env.status(f"j{i:05d}") == "Running")
    fake.requests.clear()
    env.clock.advance(3600)  # every job due for its check
    started = time.perf_counter()
    counts = env.w.job_tracker.run(limit=100)
    seconds = time.perf_counter() - started
    return {
        "running": running,
        "checked": counts["checked"],
        "pages": counts["pages"],
        "slurmrestd": sum(fake.requests.values()),
        "by kind": dict(sorted(fake.requests.items())),
        "seconds": round(seconds, 2),
    }


def main() -> None:
    logger.setLevel("CRITICAL")
    print("Requests to slurmrestd per job tracker run, every running job due (one cluster):")
    print(f"{'running jobs':>13} {'checked':>8} {'index pages':>12} {'slurmrestd requests':>20}  by kind")
    for jobs in (16, 104, 1000):
        found = measure(jobs)
        print(
            f"{found['running']:>13} {found['checked']:>8} {found['pages']:>12} {found['slurmrestd']:>20}  {found['by kind']}"
        )


if __name__ == "__main__":
    main()
