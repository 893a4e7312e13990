"""Jobs on a Slurm cluster as the job tracker sees them through slurmrestd (a stand-in of v0.0.38's shapes,
tests/services/fake_slurmrestd.py; the live cluster's own tier is tests/slurm/): an ended job leaves slurmctld
MinJobAge seconds after it ended (docs/SLURM.md, "Jobs that leave slurmctld"), so the tracker must read its end before
that — or, when it could not (the tracker or slurmrestd down longer than MinJobAge), end it as lost, never leave it
running and billed."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from itl_accelerator.dgx.errors import DgxError, DgxTransientError
from itl_accelerator.errors import LogsNotAvailable, SlurmNodeTaken
from itl_accelerator.platforms.router import UnknownCluster
from itl_accelerator.settings import SlurmClusterSettings
from itl_accelerator.slurm.platform import SlurmPlatform
from tests.services.conftest import RG, Env, make_settings
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
    env.add_node("dgx-1", devices=8, gpu_memory_gb=80)
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
    assert slurm_env.allocation("dgx-1").devices == 0


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
    assert slurm_env.allocation("dgx-1").devices == 0


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


def test_a_job_record_the_adapter_cannot_read_stops_no_other_check_and_is_not_taken_for_lost(slurm_env: SlurmEnv):
    # Given two running jobs on the cluster
    slurm_env.submit("odd", 1, 80)
    slurm_env.submit("plain", 1, 80)
    slurm_env.run()
    slurm_env.tracker_every_minute(120)
    # When slurmctld reports one in a state word this adapter does not know, and the other ends
    slurm_env.fake.jobs[1]["job_state"] = "SOMETHING_NEW"
    slurm_env.fake.end(2, "COMPLETED")
    slurm_env.tracker_every_minute(5 * 60)
    # Then the other one's end is read (the tracker did not stop at the odd record), and the odd one is not lost
    assert slurm_env.status("plain") == "Succeeded"
    assert slurm_env.status("odd") == "Running"
    # And once its record reads again, its end is read too
    slurm_env.fake.end(1, "COMPLETED")
    slurm_env.tracker_every_minute(5 * 60)
    assert slurm_env.status("odd") == "Succeeded"
    assert slurm_env.allocation("dgx-1").devices == 0


def test_a_node_record_the_adapter_cannot_read_keeps_that_node_only_out_of_placement(slurm_env: SlurmEnv):
    # Given a second node of the cluster whose GRES holds a word the adapter does not parse
    slurm_env.fake.nodes.append("dgx-2")
    slurm_env.fake.gres["dgx-2"] = "gpu:h100:8,bandwidth:lustre:no_consume:4G"
    slurm_env.add_node("dgx-2", devices=8, gpu_memory_gb=80)
    # When the tracker runs (its node sweep first)
    slurm_env.track()
    # Then the readable node is swept and placeable, the unreadable one is not placed on, and jobs still run
    assert slurm_env.node("dgx-1").backend_status["placeable"] is True
    assert slurm_env.node("dgx-2").backend_status["placeable"] is False
    slurm_env.submit("train", 8, 640)
    slurm_env.submit("second", 8, 640)
    slurm_env.run()
    assert slurm_env.job("train").node.name == "dgx-1"
    assert slurm_env.status("second") == "Pending"


def test_a_drain_the_cluster_refuses_for_one_node_still_drains_the_others(
    slurm_env: SlurmEnv, monkeypatch: pytest.MonkeyPatch
):
    # Given two nodes the provider cordons, on a cluster that refuses the first one's drain
    slurm_env.fake.nodes.append("dgx-2")
    slurm_env.add_node("dgx-2", devices=8, gpu_memory_gb=80)
    platform = slurm_env.w.platforms.cluster("c1")
    drained: list[str] = []

    def drain(name: str, reason: str) -> bool:
        if name == "dgx-1":
            raise DgxTransientError("Slurm cluster 'c1': access denied")
        drained.append(name)
        return True

    monkeypatch.setattr(platform, "drain", drain)
    for name in ("dgx-1", "dgx-2"):
        slurm_env.patch_node(name, {"properties": {"availability": "Cordoned"}})
    # When the tracker's sweep runs
    counts = slurm_env.track()
    # Then the refusal is counted and the other node is drained all the same
    assert drained == ["dgx-2"]
    assert counts["nodes_errors"] == 1 and counts["nodes_drained"] == 1


def test_a_gang_is_never_placed_across_platforms(slurm_env: SlurmEnv):
    # Given one node on Slurm cluster c1 and one like it on the DGX Platform
    slurm_env.add_node("dgx-2", devices=8, gpu_memory_gb=80)
    slurm_env.patch_node(
        "dgx-2", {"properties": {"backend": {"type": "DgxPlatform", "cluster": None, "nodeName": None}}}
    )
    # When a job of 2 nodes x 8 GPUs is submitted
    slurm_env.submit("big", 16, 1280, accelerator={"kind": "GPU", "count": 8, "nodes": 2, "memoryGb": 640})
    slurm_env.run()
    # Then it waits (one job runs on one platform), holding nothing
    assert slurm_env.status("big") == "Pending"
    assert slurm_env.allocation("dgx-1").devices == slurm_env.allocation("dgx-2").devices == 0


def test_a_nodes_own_partition_is_the_one_its_jobs_are_submitted_to(slurm_env: SlurmEnv):
    # Given a node registered in partition "gpu-long" of the cluster
    slurm_env.patch_node(
        "dgx-1", {"properties": {"backend": {"type": "Slurm", "cluster": "c1", "partition": "gpu-long"}}}
    )
    # When a job is placed there
    slurm_env.submit("train", 1, 80)
    slurm_env.run()
    # Then Slurm was asked to run it in that partition
    assert slurm_env.fake.submitted[-1].get("partition") == "gpu-long"
    # and its audit trail says where it went: the Slurm cluster, not the DGX Platform
    summaries = [e.change_summary for e in slurm_env.audit(slurm_env.job("train").arm_id)]
    assert "Placed on dgx-1; submitting to Slurm cluster 'c1'." in summaries


def test_a_grace_stop_sends_sigterm_before_it_marks_the_job(slurm_env: SlurmEnv):
    # Given a running job
    slurm_env.submit("train", 1, 80)
    slurm_env.run()
    platform = slurm_env.w.platforms.cluster("c1")
    # When it is stopped with a grace period while setting its comment fails
    slurm_env.fake.fail_comment = True
    with pytest.raises(DgxError):
        platform.cancel_job("slurm:c1:1", grace_period_seconds=30)
    # Then SIGTERM was sent all the same (a later stop sends it again rather than never)
    assert slurm_env.fake.signals == [(1, "TERM")]


def test_logs_of_a_job_whose_cluster_is_no_longer_configured_are_a_409_not_a_503(
    slurm_env: SlurmEnv, monkeypatch: pytest.MonkeyPatch
):
    # Given a job that ran on cluster c1, which the deployment then no longer configures
    slurm_env.submit("train", 1, 80)
    slurm_env.run()

    def gone(job_id: str, **kwargs: object) -> None:
        raise UnknownCluster("No Slurm cluster 'c1' is configured (SLURM_CLUSTERS).", status=400)

    monkeypatch.setattr(slurm_env.w.platforms, "get_job_logs", gone)
    # When its logs are read, Then the answer is a 409 naming the cluster (nothing to retry), not a 503
    with pytest.raises(LogsNotAvailable, match="Slurm cluster 'c1', which this deployment no longer configures"):
        slurm_env.w.job_logs.page(
            slurm_env.admin(), slurm_env.sub, RG, "train", after=0, since=None, tail=None, top=100
        )


def test_a_supplier_cannot_register_a_slurm_node_another_node_names(slurm_env: SlurmEnv):
    # Given node dgx-1, Slurm node dgx-1 of cluster c1, registered by its supplier
    # When another supplier registers a node naming the same Slurm node (any case)
    with pytest.raises(SlurmNodeTaken) as refused:
        slurm_env.add_node(
            "mine",
            devices=8,
            gpu_memory_gb=80,
            owner="mallory",
            backend={"type": "Slurm", "cluster": "c1", "nodeName": "DGX-1"},
        )
    # Then it is refused with a stable code that names the Slurm node and not the other provider node
    assert refused.value.code == "SlurmNodeTaken" and "'DGX-1' of cluster 'c1'" in str(refused.value)
    assert "sparkNodes/dgx-1" not in str(refused.value)
    # And a node may be written again as itself, and name another Slurm node
    slurm_env.patch_node("dgx-1", {"properties": {"availability": "Available"}})
    slurm_env.add_node("dgx-2", devices=8, gpu_memory_gb=80, owner="mallory")


def test_two_nodes_that_raced_onto_one_slurm_node_place_and_drain_only_by_the_first(
    slurm_env: SlurmEnv, monkeypatch: pytest.MonkeyPatch
):
    # Given a second node registered for Slurm node dgx-1 in a race past the registration check
    with monkeypatch.context() as race:
        race.setattr(slurm_env.w.nodes._nodes, "on_cluster", lambda cluster, node_name=None: [])
        slurm_env.clock.advance(1)
        slurm_env.add_node(
            "twin",
            devices=8,
            gpu_memory_gb=80,
            owner="mallory",
            backend={"type": "Slurm", "cluster": "c1", "nodeName": "dgx-1"},
        )
    drained: list[str] = []
    monkeypatch.setattr(slurm_env.w.platforms.cluster("c1"), "drain", lambda name, reason: drained.append(name) or True)
    # When its supplier cordons it, and the tracker's sweep runs
    slurm_env.patch_node("twin", {"properties": {"availability": "Cordoned"}}, ctx=slurm_env.admin())
    slurm_env.track()
    # Then the first registered is placed on; the twin says why it is not, and drained nothing
    assert slurm_env.node("dgx-1").backend_status["placeable"] is True
    twin = slurm_env.node("twin").backend_status
    assert twin["placeable"] is False and twin["state"] == "TAKEN"
    assert drained == []
    slurm_env.submit("train", 8, 640)
    slurm_env.run()
    assert slurm_env.job("train").node.name == "dgx-1"


def test_a_submit_whose_answer_was_lost_for_all_its_retries_leaves_no_job_running_on_the_cluster(slurm_env: SlurmEnv):
    # Given slurmctld accepts the job, its answer is lost, and slurmrestd then fails every look for it until the
    # Submit step's retries (10) run out
    slurm_env.fake.lose_next_submit = True
    slurm_env.fake.then_unavailable_for = 10
    # When the job is submitted and its workflow goes on (to Finish, the cluster answering again)
    slurm_env.submit("train", 1, 80)
    slurm_env.run()
    # Then the job failed on our side, and the job Slurm made of it was found by its name and canceled
    assert slurm_env.status("train") == "Failed"
    assert [job["job_state"] for job in slurm_env.fake.jobs.values()] == ["CANCELLED"]
    assert slurm_env.allocation("dgx-1").devices == 0
