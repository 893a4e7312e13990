"""Misconfiguration fails loudly and early: a state machine ARN that is not one fails the settings' first read (a
function's cold start), and a function asked to start a workflow whose ARN is unset refuses before writing anything
— no 202 for work that can never go on."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from itl_accelerator.settings import SettingMissing
from tests.services.conftest import Env, job_body, make_settings


def test_a_state_machine_arn_that_is_not_one_fails_the_cold_start():
    with pytest.raises(ValidationError, match="not a Step Functions state machine ARN"):
        make_settings(job_state_machine_arn="job-lifecycle")
    assert make_settings(job_state_machine_arn="").job_state_machine_arn == ""  # a function that starts none


@pytest.mark.parametrize(
    ("setting", "act"),
    [
        ("job_state_machine_arn", lambda env: env.w.jobs.submit(env.admin(), env.sub, "rg1", "j1", job_body())),
        ("provision_state_machine_arn", lambda env: env.provision()),
    ],
)
def test_starting_work_without_its_workflow_arn_refuses_before_writing(setting, act):
    env = Env(make_settings(**{setting: ""}))
    env.add_node()
    with pytest.raises(SettingMissing, match=setting.upper()):
        act(env)
    assert env.repos.jobs.get(env.job_key("j1")) is None
    assert env.instance() is None
    assert env.allocation().devices == 0
    assert env.sfn.started == []


def test_a_slurm_cluster_of_a_rest_version_the_client_does_not_speak_fails_the_cold_start():
    from itl_accelerator.settings import Settings

    with pytest.raises(ValueError, match="SLURM_CLUSTERS"):
        Settings.from_environ({"SLURM_CLUSTERS": '[{"name": "c1", "url": "http://s:6820", "apiVersion": "v0.0.39"}]'})
    read = Settings.from_environ(
        {"SLURM_CLUSTERS": '[{"name": "c1", "url": "http://s:6820", "apiVersion": "v0.0.44"}]'}
    )
    assert read.slurm_clusters[0].api_version == "v0.0.44"


def test_a_slurm_job_environment_name_slurm_cannot_pass_on_fails_the_cold_start_without_echoing_values():
    from itl_accelerator.settings import Settings

    clusters = '[{"name": "c1", "url": "http://s:6820", "jobEnvironment": {"OK": "1", "BAD-NAME": "s3cr3t-value"}}]'
    with pytest.raises(ValueError, match="BAD-NAME") as refused:
        Settings.from_environ({"SLURM_CLUSTERS": clusters})
    assert "s3cr3t-value" not in str(refused.value)


def test_a_refused_slurm_job_spec_never_echoes_its_environment():
    from itl_accelerator.slurm.models import SlurmJobSpec

    with pytest.raises(ValidationError) as refused:
        SlurmJobSpec(name="j", script="#!/bin/sh\ntrue\n", environment={"TOKEN": "s3cr3t-value", "no-name": "x"})
    assert "s3cr3t-value" not in str(refused.value)
