"""GPU quotas on the in-memory repositories: a job a full quota holds back says so and runs once the quota frees;
an instance past a quota is refused; the quota service's reads and writes."""

from __future__ import annotations

import pytest

from itl_accelerator.domain.states import JobStatus
from itl_accelerator.errors import QuotaExceeded
from itl_accelerator.models.quotas import QuotaWrite


def set_quota(env, name: str, value: int, location: str = "eastus") -> None:
    body = QuotaWrite.model_validate({"properties": {"limit": {"limitObjectType": "LimitValue", "value": value}}})
    env.w.quotas.put(env.admin(), env.sub, location, name, body)


def test_a_job_held_back_by_a_full_quota_says_so_and_runs_once_it_frees(env, node):
    set_quota(env, "gpus", 2, node["location"])
    env.provision("llama", gpus=2, memory_gb=160)
    env.run()
    env.submit("j", 2, 160)
    env.run()
    assert env.status("j") == "Pending"
    assert env.job_props("j")["statusReason"].startswith("Waiting for quota: the GPU quota 'gpus'"), env.job_props("j")
    env.delete_instance("llama")
    env.run()
    assert env.instance() is None
    assert env.job("j").status == JobStatus.RUNNING


def test_an_instance_past_a_quota_is_refused(env, node):
    set_quota(env, "gpus", 1, node["location"])
    with pytest.raises(QuotaExceeded):
        env.provision("llama", gpus=2, memory_gb=160)
