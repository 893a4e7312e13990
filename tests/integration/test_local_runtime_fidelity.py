"""The local runtime leans on two moto internals (pinned moto): the Docker-less Lambda backend's ``invoke``
(replaced so Step Functions tasks run the real handlers) and DynamoDBBackend's write methods (serialised so
conditional writes are atomic under concurrency, as in DynamoDB). These tests fail loudly when a moto upgrade
moves either, instead of letting workflows silently echo their input or capacity checks race."""

from __future__ import annotations

import inspect
import json
from importlib.metadata import version

import boto3

from itl_local import aws as local_aws
from itl_local import workflows


def test_moto_is_the_pinned_version():
    pyproject = (__import__("tests.conftest").conftest.REPO_ROOT / "pyproject.toml").read_text()
    assert f"moto[server,dynamodb,stepfunctions,s3,secretsmanager]=={version('moto')}" in pyproject


def test_lambda_backend_invoke_is_routed_to_the_real_handlers(aws):
    from moto.awslambda_simple.models import LambdaSimpleBackend

    assert LambdaSimpleBackend.invoke is workflows._dispatch
    # the signature moto calls it with
    params = list(inspect.signature(LambdaSimpleBackend.__mro__[1].invoke).parameters)
    assert params == ["self", "function_name", "qualifier", "body", "headers", "response_headers"]
    # and an invocation through the Lambda API reaches a real step handler (a missing instance → canceled)
    state = {
        "operationId": "00000000-0000-0000-0000-000000000001",
        "subscriptionId": "sub-fidelity",
        "resourceGroup": "rg",
        "nodeName": "n",
        "instanceName": "i",
    }
    response = boto3.client("lambda").invoke(FunctionName="InstanceRequestFunction", Payload=json.dumps(state))
    assert json.loads(response["Payload"].read())["canceled"] is True
    # and an exception is reported the way Step Functions reads it
    broken = boto3.client("lambda").invoke(FunctionName="InstanceRequestFunction", Payload=json.dumps({"x": 1}))
    assert broken["FunctionError"] == "Unhandled"
    assert json.loads(broken["Payload"].read())["errorType"] == "ValidationError"


def test_dynamodb_writes_are_serialised(aws):
    from moto.dynamodb.models import DynamoDBBackend

    for name in local_aws._MUTATORS:
        assert getattr(getattr(DynamoDBBackend, name), "_itl_serialized", False), name
