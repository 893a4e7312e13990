"""The fakes keep the contracts of what they stand for: the DGX client's method signatures, the answers of Step
Functions that :class:`~itl_accelerator.state_machines.StateMachines` relies on, S3's ``NoSuchKey`` — and the state
machine runner refuses a step whose output lacks what its definition selects."""

from __future__ import annotations

import inspect

import pytest
from botocore.exceptions import ClientError

from itl_accelerator.dgx.client import DgxPlatformClient
from itl_accelerator.dgx.errors import DgxNotFound
from itl_accelerator.state_machines import StateMachines
from tests.services.conftest import JOB_ARN
from tests.services.fakes import FakeClock, FakeDgx, FakeS3, FakeStepFunctions
from tests.services.workflows import AslError, Workflows


def test_the_fake_dgx_platform_has_every_client_method_with_its_signature():
    methods = [n for n, f in inspect.getmembers(DgxPlatformClient, inspect.isfunction) if not n.startswith("_")]
    assert methods  # create_instance, get_instance, ..., get_usage
    for name in methods:
        real = list(inspect.signature(getattr(DgxPlatformClient, name)).parameters.values())
        fake = list(inspect.signature(getattr(FakeDgx, name)).parameters.values())
        assert [(p.name, p.kind) for p in fake] == [(p.name, p.kind) for p in real], name


def test_the_fake_dgx_platform_keeps_idempotency_keys_and_answers_404_as_the_client_does():
    dgx = FakeDgx(FakeClock(0))
    made = dgx.create_instance(idempotency_key="op-1", name="i", node_id="n", model="m", devices=1, memory_gb=10)
    again = dgx.create_instance(idempotency_key="op-1", name="i", node_id="n", model="m", devices=1, memory_gb=10)
    assert again.id == made.id and dgx.find_instance("op-1") == made
    assert dgx.delete_instance(made.id) is True and dgx.delete_instance(made.id) is False
    with pytest.raises(DgxNotFound):
        dgx.get_instance(made.id)
    assert dgx.cancel_job("unknown") is None and dgx.find_job("op-2") is None


def test_state_machines_over_the_fake_step_functions():
    sfn = FakeStepFunctions()
    machines = StateMachines(sfn)
    machines.start(JOB_ARN, "op-1", {"a": 1})
    machines.start(JOB_ARN, "op-1", {"a": 1})  # the same start again: the same execution
    machines.start(JOB_ARN, "op-1", {"a": 2})  # ExecutionAlreadyExists: counted as started
    assert [e.input for e in sfn.started] == [{"a": 1}]
    assert machines.status(JOB_ARN, "op-1") == "RUNNING" and machines.status(JOB_ARN, "op-2") == "NOT_FOUND"
    token = sfn.issue_token(sfn.execution("op-1").arn)
    assert machines.complete_task(token, {"end": None}) is True
    assert machines.complete_task(token, {"end": None}) is False  # completed already
    assert machines.complete_task("forged", {}) is False
    sfn.fail_next_start()
    with pytest.raises(ClientError):
        machines.start(JOB_ARN, "op-3", {})
    assert machines.start_or_defer(JOB_ARN, "op-3", {}) is True


def test_the_fake_s3_answers_a_missing_key_with_its_modeled_error():
    s3 = FakeS3("bucket")
    with pytest.raises(s3.exceptions.NoSuchKey) as raised:
        s3.get_object(Bucket="bucket", Key="missing")
    assert isinstance(raised.value, ClientError)
    with pytest.raises(ClientError, match="NoSuchBucket"):
        s3.put_object(Bucket="other", Key="k", Body=b"x")


def test_the_runner_refuses_a_step_whose_output_lacks_a_selected_path():
    sfn, clock = FakeStepFunctions(), FakeClock(0)
    asl = {
        "StartAt": "Step",
        "States": {
            "Step": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke",
                "Parameters": {"FunctionName": "${StepFunctionArn}", "Payload.$": "$"},
                "ResultSelector": {"end.$": "$.Payload.end"},
                "ResultPath": "$.step",
                "End": True,
            }
        },
    }
    sfn.start_execution(stateMachineArn=JOB_ARN, name="op-1", input="{}")
    workflows = Workflows(sfn, clock, {JOB_ARN: (asl, {"StepFunctionArn": lambda payload: {"other": 1}})})
    with pytest.raises(AslError, match=r"\$\.Payload\.end"):
        workflows.run()
