"""The repositories' contract: every scenario of this package runs against both implementations of
itl_accelerator/repositories — ``memory`` and ``dynamodb`` (the table created from template.yaml, on moto).

The DynamoDB backend is self-contained: it needs none of the session's fixtures (tests/conftest.py ``aws`` starts
servers and workflows). moto is started here for the module (``mock_aws`` nests: inside a session mock already
running it neither resets nor stops anything) and every test gets a table of its own, created from template.yaml
exactly as the session's is and deleted afterwards, in a region no other test uses — so nothing here can see, or
be seen by, the session's table, its stream consumers or its workflows.

A scenario the DynamoDB implementation does not pass yet (a bug found there, not fixed here) carries
``@pytest.mark.dynamodb_diverges(reason)``: the ``dynamodb`` run is then a strict xfail.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from itl_accelerator.repositories.dynamodb import dynamodb_repositories
from itl_accelerator.repositories.memory import memory_repositories
from itl_accelerator.repositories.protocols import Repositories

#: A region of the contract tests' own (the session's moto lives in us-east-1).
REGION = "eu-west-3"
BACKENDS = ("memory", "dynamodb")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "dynamodb_diverges(reason): the DynamoDB implementation fails this scenario (strict xfail there)"
    )


@pytest.fixture(scope="session")
def contract_template() -> Any:
    from itl_local.template import Template

    return Template()


@pytest.fixture(scope="module")
def moto_dynamodb() -> Iterator[Any]:
    """A DynamoDB client on moto, for the module; made as faithful as the session's (atomic writes, rollback by
    item: itl_local.aws.make_dynamodb_faithful, idempotent). The endpoint is named explicitly so that an
    ``AWS_ENDPOINT_URL`` in the environment can never send these calls to a real or local stack."""
    from itl_local.aws import make_dynamodb_faithful

    make_dynamodb_faithful()
    with mock_aws():
        yield boto3.client(
            "dynamodb",
            region_name=REGION,
            endpoint_url=f"https://dynamodb.{REGION}.amazonaws.com",
            aws_access_key_id="contract",
            aws_secret_access_key="contract",
        )


@pytest.fixture
def dynamodb_backend(moto_dynamodb: Any, contract_template: Any) -> Iterator[Repositories]:
    """The DynamoDB repositories over a fresh table of template.yaml's definition (deleted after the test)."""
    from itl_local.aws import create_table

    name = f"contract-{uuid.uuid4().hex[:12]}"
    create_table(moto_dynamodb, contract_template, name)
    yield dynamodb_repositories(moto_dynamodb, name)
    moto_dynamodb.delete_table(TableName=name)


@pytest.fixture(params=BACKENDS)
def repos(request: pytest.FixtureRequest) -> Repositories:
    """Every repository, over an empty store of one implementation or the other."""
    if request.param == "memory":
        return memory_repositories()
    marker = request.node.get_closest_marker("dynamodb_diverges")
    if marker is not None:
        reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
        request.applymarker(pytest.mark.xfail(strict=True, reason=f"DynamoDB implementation: {reason}"))
    backend: Repositories = request.getfixturevalue("dynamodb_backend")
    return backend


@pytest.fixture
def sub() -> str:
    """A subscription id of the test's own."""
    return f"sub-{uuid.uuid4().hex[:12]}"
