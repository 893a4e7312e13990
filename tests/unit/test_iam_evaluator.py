"""The IAM evaluator of itl_local.iam (which the integration session runs on every recorded AWS call): given a call
a function makes and that function's policies in template.yaml, it says whether IAM would allow it — action,
resource (table, index, secret, state machine) and ``dynamodb:LeadingKeys`` — and refuses what it cannot judge."""

from __future__ import annotations

from typing import Any

import pytest

from itl_local.aws_calls import Call
from itl_local.iam import Authorization, Resources, allowed, authorizations, uncovered
from itl_local.template import Template

TABLE = "itl-accelerator-unit"
SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:dgx-key-AbCdEf"
BINDINGS = {"Table": TABLE, "DgxApiKeySecret": SECRET}
TEMPLATE = Template()


def call(function: str, service: str, operation: str, **params: Any) -> Call:
    prefix = {"stepfunctions": "states"}.get(service, service)
    return Call(function, service, prefix, "us-east-1", operation, params)


def put(pk: str, sk: str) -> dict[str, Any]:
    return {"Put": {"TableName": TABLE, "Item": {"PK": {"S": pk}, "SK": {"S": sk}, "doc": {"S": "{}"}}}}


def check(*calls: Call) -> list[str]:
    return [str(u) for u in uncovered(TEMPLATE, calls, BINDINGS)]


# ------------------------------------------------------------------------------------------------ covered
def test_a_create_transaction_with_its_audit_item_and_subscription_check_is_covered():
    # Given the node create's transaction: resource Put, audit Put, subscription ConditionCheck
    transaction = call(
        "SparkNodesCreateFunction",
        "dynamodb",
        "TransactWriteItems",
        TransactItems=[
            put("SUB#s1", "NODE#rg1#dgx-1"),
            put("SUB#s1#AUDIT", "2026-01-01T00:00:00Z#e1"),
            {
                "ConditionCheck": {
                    "TableName": TABLE,
                    "Key": {"PK": {"S": "SUB#s1#SUBSCRIPTION"}, "SK": {"S": "SUBSCRIPTION"}},
                }
            },
        ],
    )
    # Then TableCreatePolicy and AuditAppendPolicy (its LeadingKeys matched per item) allow all three
    assert check(transaction) == []


def test_an_audit_query_on_the_index_and_a_workflow_start_are_covered():
    query = call(
        "AuditEventsListFunction",
        "dynamodb",
        "Query",
        TableName=TABLE,
        IndexName="GSI1",
        KeyConditionExpression="GSI1PK = :pk AND GSI1SK BETWEEN :a AND :b",
        ExpressionAttributeValues={":pk": {"S": "SUB#s1#RES#x"}, ":a": {"S": "a"}, ":b": {"S": "b"}},
    )
    start = call(
        "SparkOllamaInstancesCreateFunction",
        "stepfunctions",
        "StartExecution",
        stateMachineArn="arn:aws:states:us-east-1:123456789012:stateMachine:ProvisionInstanceStateMachine",
    )
    secret = call("InstanceRequestFunction", "secretsmanager", "GetSecretValue", SecretId=SECRET)
    assert check(query, start, secret) == []


# ------------------------------------------------------------------------------------------------ uncovered
def test_a_read_function_writing_a_resource_partition_is_refused_while_its_audit_item_is_allowed():
    # Given a read function (AuditAppendPolicy: PutItem where every leading key is like SUB#*#AUDIT)
    audit = call(
        "SparkNodesGetFunction", "dynamodb", "PutItem", TableName=TABLE, Item=put("SUB#s1#AUDIT", "t")["Put"]["Item"]
    )
    resource = call(
        "SparkNodesGetFunction", "dynamodb", "TransactWriteItems", TransactItems=[put("SUB#s1", "NODE#rg1#dgx-1")]
    )
    # Then the audit item is allowed and the resource item is not: action, resource and LeadingKeys are listed
    assert check(audit) == []
    assert check(resource) == [
        "SparkNodesGetFunction: dynamodb:PutItem on Table, dynamodb:LeadingKeys ['SUB#s1'] (1 calls)"
    ]


def test_the_subscription_put_may_write_the_registration_item_and_no_resource_item():
    # Given the subscription PUT's transaction: the registration item and its audit item
    registration = call(
        "SubscriptionsCreateOrUpdateFunction",
        "dynamodb",
        "TransactWriteItems",
        TransactItems=[put("SUB#s1#SUBSCRIPTION", "SUBSCRIPTION"), put("SUB#s1#AUDIT", "t#e")],
    )
    # And the same function putting an item into the subscription's resource partition
    node = call(
        "SubscriptionsCreateOrUpdateFunction", "dynamodb", "TransactWriteItems", TransactItems=[put("SUB#s1", "NODE#x")]
    )
    # Then TableSubscriptionWritePolicy allows the first and refuses the second
    assert check(registration) == []
    assert check(node) == [
        "SubscriptionsCreateOrUpdateFunction: dynamodb:PutItem on Table, dynamodb:LeadingKeys ['SUB#s1'] (1 calls)"
    ]


def test_a_secret_or_state_machine_the_function_is_not_granted_is_refused():
    secret = call("SparkNodesGetFunction", "secretsmanager", "GetSecretValue", SecretId=SECRET)
    other_machine = call(
        "SparkOllamaInstancesCreateFunction",
        "stepfunctions",
        "StartExecution",
        stateMachineArn="arn:aws:states:us-east-1:123456789012:stateMachine:DeprovisionInstanceStateMachine",
    )
    assert check(secret, other_machine) == [
        "SparkNodesGetFunction: secretsmanager:GetSecretValue on DgxApiKeySecret (1 calls)",
        "SparkOllamaInstancesCreateFunction: states:StartExecution on DeprovisionInstanceStateMachine (1 calls)",
    ]


def test_a_function_without_policies_may_call_nothing():
    get = call(
        "OperationsListFunction", "dynamodb", "GetItem", TableName=TABLE, Key={"PK": {"S": "SUB#s"}, "SK": {"S": "x"}}
    )
    assert check(get) == ["OperationsListFunction: dynamodb:GetItem on Table, dynamodb:LeadingKeys ['SUB#s'] (1 calls)"]


# ------------------------------------------------------------------------------------------------ derivation
def test_a_transaction_needs_each_items_own_action_and_leading_key():
    resources = Resources(TEMPLATE, BINDINGS)
    needed = authorizations(
        call(
            "F",
            "dynamodb",
            "TransactWriteItems",
            TransactItems=[
                {"Update": {"TableName": TABLE, "Key": {"PK": {"S": "SUB#a"}, "SK": {"S": "NODE#x"}}}},
                {"Delete": {"TableName": TABLE, "Key": {"PK": {"S": "SUB#a"}, "SK": {"S": "OP#y"}}}},
            ],
        ),
        resources,
    )
    table = f"arn:aws:dynamodb:us-east-1:123456789012:table/{TABLE}"
    assert [(a.action, a.resource, a.conditions) for a in needed] == [
        ("dynamodb:UpdateItem", table, {"dynamodb:LeadingKeys": ("SUB#a",)}),
        ("dynamodb:DeleteItem", table, {"dynamodb:LeadingKeys": ("SUB#a",)}),
    ]


def test_a_secret_named_by_name_is_authorized_against_its_full_arn():
    resources = Resources(TEMPLATE, BINDINGS)
    (needed,) = authorizations(call("F", "secretsmanager", "GetSecretValue", SecretId="dgx-key"), resources)
    assert needed.resource == SECRET


# ------------------------------------------------------------------------------------------------ semantics
LEADING = "dynamodb:LeadingKeys"


def statement(effect: str = "Allow", **condition: Any) -> dict[str, Any]:
    return {
        "Effect": effect,
        "Action": "dynamodb:PutItem",
        "Resource": "arn:aws:dynamodb:*:*:table/t",
        "Condition": condition,
    }


def put_item(*leading: str) -> Authorization:
    return Authorization("dynamodb:PutItem", "arn:aws:dynamodb:us-east-1:1:table/t", ((LEADING, leading),))


def test_for_all_values_needs_every_leading_key_to_match_and_holds_vacuously():
    only_audit = statement(**{"ForAllValues:StringLike": {LEADING: ["SUB#*#AUDIT"]}})
    assert allowed([only_audit], put_item("SUB#a#AUDIT"))
    assert not allowed([only_audit], put_item("SUB#a#AUDIT", "SUB#a"))
    assert not allowed([only_audit], put_item("SUB#a"))
    # As in IAM, ForAllValues holds for a request without the key
    assert allowed([only_audit], Authorization("dynamodb:PutItem", "arn:aws:dynamodb:us-east-1:1:table/t"))


def test_an_explicit_deny_wins_and_nothing_is_allowed_by_default():
    allow = {"Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"}
    deny = statement("Deny", **{"ForAnyValue:StringEquals": {LEADING: ["SUB#a"]}})
    assert allowed([allow, deny], put_item("SUB#b"))
    assert not allowed([allow, deny], put_item("SUB#a"))
    assert not allowed([], put_item("SUB#a"))


@pytest.mark.parametrize(
    "condition",
    [{"StringEqualsIfExists": {LEADING: ["x"]}}, {"ForAllValues:StringLike": {"dynamodb:Attributes": ["x"]}}],
)
def test_what_the_evaluator_cannot_judge_is_an_error_not_a_guess(condition):
    with pytest.raises(ValueError):
        allowed([statement(**condition)], put_item("x"))
