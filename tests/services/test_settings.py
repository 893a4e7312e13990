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
    assert env.allocation().gpus == 0
    assert env.sfn.started == []
