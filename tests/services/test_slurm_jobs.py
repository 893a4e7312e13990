"""Jobs on a Slurm cluster as the job tracker sees them through slurmrestd (a stand-in of v0.0.38's shapes,
tests/services/fake_slurmrestd.py; the live cluster's own tier is tests/slurm/): an ended job leaves slurmctld
MinJobAge seconds after it ended (docs/SLURM.md, "Jobs that leave slurmctld"), so the tracker must read its end before
that — or, when it could not (the tracker or slurmrestd down longer than MinJobAge), end it as lost, never leave it
running and billed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from itl_accelerator.settings import SlurmClusterSettings
from itl_accelerator.slurm.platform import SlurmPlatform
from tests.services.conftest import Env, make_settings
from tests.services.fake_slurmrestd import FakeSlurmrestd, platform_on

MIN_JOB_AGE = 300
TRACKER_RATE = 60  # template.yaml: the job tracker's schedule, rate(1 minute)


class SlurmEnv(Env):
    """An :class:`Env` whose nodes run on Slurm cluster ``c1`` (its MinJobAge 300 s), served by ``fake``."""

    def __init__(self) -> None:
        cluster = SlurmClusterSettings(name="c1", url="http://slurm.test:6820", min_job_age_seconds=MIN_JOB_AGE)
        # the tracker's longest wait between two checks is longer than MinJobAge (the provider's default is 300)
        settings = make_settings(
            slurm_clusters=[cluster],
            default_node_backend={"type": "Slurm", "cluster": "c1"},
            job_poll_max_interval_seconds=600,
        )
        platforms: list[SlurmPlatform] = []
        super().__init__(settings, slurm=lambda name: platforms[0])
        self.fake = FakeSlurmrestd(self.clock, ["dgx-1"])
        platforms.append(platform_on(self.fake, cluster, self.clock, attempts=1))

    def tracker_every_minute(self, seconds: float) -> None:
        """The job tracker's schedule for ``seconds``: one run a minute."""
        for _ in range(int(seconds // TRACKER_RATE)):
            self.clock.advance(TRACKER_RATE)
            self.track()


@pytest.fixture
def slurm_env() -> SlurmEnv:
    env = SlurmEnv()
    env.add_node("dgx-1", gpus=8, gpu_memory_gb=80)
    return env


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_a_long_job_that_ended_is_finished_by_slurms_word_before_it_leaves_slurmctld(slurm_env: SlurmEnv):
    # Given a job that has run for two hours on Slurm (the tracker's checks backed off to their longest wait)
    slurm_env.submit("train", 1, 80)
    slurm_env.run()
    assert slurm_env.status("train") == "Running"
    slurm_env.tracker_every_minute(2 * 3600)
    # When it ends on the cluster, and slurmctld forgets it MinJobAge (+ a few) seconds later
    ended = slurm_env.clock()
    slurm_env.fake.end(1, "COMPLETED")
    slurm_env.tracker_every_minute(MIN_JOB_AGE)
    slurm_env.fake.purge(1)
    slurm_env.tracker_every_minute(15 * 60)
    # Then the job Succeeded, ended (and billed to) when Slurm says it ended — not lost
    job = slurm_env.job_props("train")
    assert job["status"] == "Succeeded", job.get("statusReason")
    assert job["endedAt"] == iso(ended)
    assert slurm_env.allocation("dgx-1").gpus == 0


def test_a_job_that_left_slurmctld_unseen_ends_failed_as_lost_and_gives_its_gpus_back(slurm_env: SlurmEnv):
    # Given a running job
    slurm_env.submit("train", 2, 160)
    slurm_env.run()
    slurm_env.tracker_every_minute(120)
    # When it ends and leaves slurmctld while no tracker run reads the cluster (the tracker down 10 minutes)
    slurm_env.fake.end(1, "COMPLETED")
    slurm_env.clock.advance(MIN_JOB_AGE + 5)
    slurm_env.fake.purge(1)
    slurm_env.clock.advance(600 - MIN_JOB_AGE - 5)
    slurm_env.track()
    # Then it is not left running: it failed, saying the cluster no longer knows it, and its GPUs are free again
    job = slurm_env.job_props("train")
    assert job["status"] == "Failed"
    assert "Slurm cluster 'c1' no longer knows the job" in str(job.get("statusReason") or job.get("error"))
    assert slurm_env.allocation("dgx-1").gpus == 0


def test_a_submit_whose_answer_was_lost_is_found_again_by_its_name_never_submitted_twice(slurm_env: SlurmEnv):
    # Given slurmctld accepts the job but its answer is lost, and slurmrestd then fails the next requests (the lookup
    # of the client's own retry among them): the Submit step fails, and Step Functions runs it again
    slurm_env.fake.lose_next_submit = True
    slurm_env.fake.unavailable_for = 1
    # When the job is submitted and its workflow goes on
    slurm_env.submit("train", 1, 80)
    slurm_env.run()
    # Then the cluster holds one job of its name, and the job runs as that one
    names = [job["name"] for job in slurm_env.fake.jobs.values()]
    assert len(names) == 1, names
    assert slurm_env.status("train") == "Running"
    assert slurm_env.job("train").dgx_id == "slurm:c1:1"
    assert slurm_env.fake.requests.get("GET /jobs", 0) >= 1  # it looked before submitting again
