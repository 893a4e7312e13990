"""The local runtime leans on two moto internals (pinned moto): the Docker-less Lambda backend's ``invoke``
(replaced so Step Functions tasks run the real handlers) and DynamoDBBackend's write methods (serialised so
conditional writes are atomic under concurrency, as in DynamoDB; transactions backed up by item, not by table). These tests fail loudly when a moto upgrade
moves either, instead of letting workflows silently echo their input or capacity checks race."""

from __future__ import annotations

import inspect
import json
from importlib.metadata import version

import boto3
import pytest

from itl_local import aws as local_aws
from itl_local import workflows
from tests.conftest import TABLE


def test_moto_is_the_pinned_version():
    pyproject = (__import__("tests.conftest").conftest.REPO_ROOT / "pyproject.toml").read_text()
    assert f"moto[server,dynamodb,stepfunctions,s3,secretsmanager]=={version('moto')}" in pyproject


def test_a_task_token_is_never_offered_to_an_execution_whose_worker_has_not_started(aws):
    # moto marks an execution RUNNING a moment before its worker sets its environment; SendTaskSuccess then read
    # the missing environment of every such execution and raised AttributeError inside moto (a CI run lost five
    # tests to it). The local runtime leaves those out of what the callback calls look at.
    from types import SimpleNamespace

    from moto.stepfunctions.parser.models import StepFunctionsParserBackend

    assert StepFunctionsParserBackend._get_executions is workflows._started_executions
    started = SimpleNamespace(status="RUNNING", exec_worker=SimpleNamespace(env=object()))
    starting = SimpleNamespace(status="RUNNING", exec_worker=SimpleNamespace(env=None))
    unborn = SimpleNamespace(status="RUNNING", exec_worker=None)
    backend = SimpleNamespace(state_machines=[SimpleNamespace(executions=[starting, started, unborn])])
    assert workflows._started_executions(backend) == [started]
    # and moto's own method is the one filtered (its signature as the callback calls use it)
    original = workflows._ORIGINAL_GET_EXECUTIONS[0]
    assert list(inspect.signature(original).parameters) == ["self", "execution_status"]
    assert original(backend) == [starting, started, unborn]
    # an unknown token is still refused as moto refuses it
    with pytest.raises(Exception, match=r"InvalidToken|Invalid Token"):
        boto3.client("stepfunctions").send_task_success(taskToken="no-such-token", output="{}")


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


def test_a_transaction_never_copies_the_table_and_still_rolls_back_whole(aws, sub):
    """moto's own rollback deep-copies the whole table per transaction item (O(table) under the write lock, the
    cause of requests queueing for tens of seconds in a long test session); the local runtime backs up only the
    touched items. A cancelled transaction must still leave every item as it was."""
    from moto.dynamodb import models

    # Given the table cannot be deep-copied (moto's whole-table backup would raise)
    assert models.copy is local_aws._TableCopyShim
    pk = {"S": f"SUB#{sub}"}
    aws.put_item(TableName=TABLE, Item={"PK": pk, "SK": {"S": "A"}, "n": {"N": "1"}})
    original_deepcopy = models.Table.__deepcopy__ if hasattr(models.Table, "__deepcopy__") else None
    models.Table.__deepcopy__ = lambda self, memo: (_ for _ in ()).throw(AssertionError("table copied"))
    try:
        # When a transaction updates A, puts B, deletes nothing and then fails its last condition
        with pytest.raises(aws.exceptions.TransactionCanceledException):
            aws.transact_write_items(
                TransactItems=[
                    {
                        "Update": {
                            "TableName": TABLE,
                            "Key": {"PK": pk, "SK": {"S": "A"}},
                            "UpdateExpression": "SET n = :two",
                            "ExpressionAttributeValues": {":two": {"N": "2"}},
                        }
                    },
                    {"Put": {"TableName": TABLE, "Item": {"PK": pk, "SK": {"S": "B"}}}},
                    {
                        "ConditionCheck": {
                            "TableName": TABLE,
                            "Key": {"PK": pk, "SK": {"S": "C"}},
                            "ConditionExpression": "attribute_exists(PK)",
                        }
                    },
                ]
            )
        # And a transaction that succeeds applies all of its items
        aws.transact_write_items(TransactItems=[{"Put": {"TableName": TABLE, "Item": {"PK": pk, "SK": {"S": "D"}}}}])
    finally:
        if original_deepcopy is None:
            del models.Table.__deepcopy__
        else:
            models.Table.__deepcopy__ = original_deepcopy
    # Then A keeps its value, B was never written, D was

    def get(sk: str) -> dict | None:
        return aws.get_item(TableName=TABLE, Key={"PK": pk, "SK": {"S": sk}}, ConsistentRead=True).get("Item")

    assert get("A")["n"] == {"N": "1"}
    assert get("B") is None
    assert get("D") is not None


def _stream_records(table: str, after: str | None = None) -> list[dict]:
    from botocore.config import Config

    db, streams = (
        boto3.client("dynamodb"),
        boto3.client("dynamodbstreams", config=Config(account_id_endpoint_mode="disabled")),
    )
    arn = db.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    kind = (
        {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
        if after
        else {"ShardIteratorType": "TRIM_HORIZON"}
    )
    iterator = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, **kind)["ShardIterator"]
    return streams.get_records(ShardIterator=iterator)["Records"]


def test_the_table_stream_has_committed_changes_only_and_can_be_trimmed(aws, template):
    from itl_local.aws import create_table, trim_stream

    # Given a table of its own, with the template's stream
    table = "fidelity-stream"
    create_table(aws, template, table)
    put = {"Put": {"TableName": table, "Item": {"PK": {"S": "a"}, "SK": {"S": "1"}}}}
    refused = {"ConditionCheck": {"TableName": table, "Key": {"PK": {"S": "nope"}, "SK": {"S": "1"}},
                                  "ConditionExpression": "attribute_exists(PK)"}}  # fmt: skip
    # When a transaction is cancelled after moto applied its first item, and another commits
    with pytest.raises(aws.exceptions.TransactionCanceledException):
        aws.transact_write_items(TransactItems=[put, refused])
    aws.transact_write_items(TransactItems=[{"Put": {**put["Put"], "Item": {**put["Put"]["Item"], "v": {"N": "2"}}}}])
    # Then the stream holds the committed change only (DynamoDB streams committed changes, once)
    (record,) = _stream_records(table)
    assert record["eventName"] == "INSERT" and record["dynamodb"]["NewImage"]["v"] == {"N": "2"}
    # And once trimmed through it, the records after it are read as before (moto's positions stay valid)
    trim_stream(table, record["dynamodb"]["SequenceNumber"])
    aws.delete_item(TableName=table, Key={"PK": {"S": "a"}, "SK": {"S": "1"}})
    (later,) = _stream_records(table, after=record["dynamodb"]["SequenceNumber"])
    assert later["eventName"] == "REMOVE"
    aws.delete_table(TableName=table)


def test_a_query_reads_its_partition_and_answers_as_moto_scanning_the_table(aws, template):
    """moto answers a Query by scanning the whole table (O(table) under the write lock: in a long session every
    read queued the requests behind it); the local runtime hands it only the partition, the table's own or a GSI's
    kept in step with every write. Its answers must be moto's, item for item, after every kind of write."""
    from moto.dynamodb import models

    from itl_local.aws import create_table

    # Given a table of its own with items in two GSI1 partitions and three table partitions
    table = "fidelity-index"
    create_table(aws, template, table)
    assert getattr(models.Table.query, "_itl_indexed", False)

    def item(pk: str, sk: str, **attrs: str) -> dict:
        return {"PK": {"S": pk}, "SK": {"S": sk}, **{k: {"S": v} for k, v in attrs.items()}}

    for n in range(12):
        aws.put_item(TableName=table, Item=item(f"P{n % 3}", f"{n:02}", GSI1PK=f"G{n % 2}", GSI1SK=f"{n:02}"))
    # When items move between GSI partitions in every way moto writes: update, put over, delete, remove the key
    # attribute, a batch, a committed transaction and a cancelled one (rolled back)
    key = {"PK": {"S": "P0"}, "SK": {"S": "00"}}
    aws.update_item(
        TableName=table, Key=key, UpdateExpression="SET GSI1PK = :g", ExpressionAttributeValues={":g": {"S": "G1"}}
    )
    aws.put_item(TableName=table, Item=item("P1", "01", GSI1PK="G0", GSI1SK="01"))
    arn = aws.describe_table(TableName=table)["Table"]["TableArn"]  # (a table may be named by its ARN)
    aws.update_item(
        TableName=arn,
        Key={"PK": {"S": "P1"}, "SK": {"S": "07"}},
        UpdateExpression="SET GSI1PK = :g",
        ExpressionAttributeValues={":g": {"S": "G2"}},
    )
    aws.delete_item(TableName=table, Key={"PK": {"S": "P2"}, "SK": {"S": "02"}})
    aws.update_item(TableName=table, Key={"PK": {"S": "P0"}, "SK": {"S": "03"}}, UpdateExpression="REMOVE GSI1PK")
    aws.batch_write_item(RequestItems={table: [
        {"PutRequest": {"Item": item("P1", "20", GSI1PK="G2", GSI1SK="20")}},
        {"DeleteRequest": {"Key": {"PK": {"S": "P1"}, "SK": {"S": "04"}}}},
    ]})  # fmt: skip
    aws.transact_write_items(TransactItems=[
        {"Put": {"TableName": table, "Item": item("P2", "21", GSI1PK="G2", GSI1SK="21")}},
        {"Update": {"TableName": table, "Key": {"PK": {"S": "P2"}, "SK": {"S": "05"}},
                    "UpdateExpression": "SET GSI1PK = :g", "ExpressionAttributeValues": {":g": {"S": "G2"}}}},
    ])  # fmt: skip
    with pytest.raises(aws.exceptions.TransactionCanceledException):
        aws.transact_write_items(TransactItems=[
            {"Update": {"TableName": table, "Key": {"PK": {"S": "P0"}, "SK": {"S": "06"}},
                        "UpdateExpression": "SET GSI1PK = :g", "ExpressionAttributeValues": {":g": {"S": "G9"}}}},
            {"Put": {"TableName": table, "Item": item("P9", "22", GSI1PK="G9", GSI1SK="22")}},
            {"ConditionCheck": {"TableName": table, "Key": {"PK": {"S": "nope"}, "SK": {"S": "1"}},
                                "ConditionExpression": "attribute_exists(PK)"}},
        ])  # fmt: skip

    def pages(**query: object) -> list[dict]:
        answers, start = [], {}
        while True:
            page = aws.query(TableName=table, Limit=2, **query, **start)
            answers.append({k: page.get(k) for k in ("Items", "Count", "ScannedCount", "LastEvaluatedKey")})
            if "LastEvaluatedKey" not in page:
                return answers
            start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}

    queries = [
        *({"KeyConditionExpression": "PK = :v", "ExpressionAttributeValues": {":v": {"S": p}}}
          for p in ("P0", "P1", "P2", "P9", "none")),
        *({"IndexName": "GSI1", "KeyConditionExpression": "GSI1PK = :v", "ExpressionAttributeValues": {":v": {"S": g}},
           "ScanIndexForward": False} for g in ("G0", "G1", "G2", "G9", "none")),
        {"IndexName": "GSI1", "KeyConditionExpression": "GSI1PK = :v AND GSI1SK > :s",
         "ExpressionAttributeValues": {":v": {"S": "G1"}, ":s": {"S": "05"}}},
    ]  # fmt: skip
    indexed = [pages(**q) for q in queries]
    # Then each answer, page by page, is the one moto gives by scanning the table
    scanning, models.Table.query = models.Table.query, models.Table.query.__wrapped__
    try:
        scanned = [pages(**q) for q in queries]
    finally:
        models.Table.query = scanning
    assert indexed == scanned
    # And the partitions hold what the writes left (not an empty answer that would also match)
    assert [i["SK"]["S"] for p in indexed[6] for i in p["Items"]] == ["11", "09", "00"]
    assert [i["SK"]["S"] for p in indexed[7] for i in p["Items"]] == ["21", "20", "07", "05"]
    assert indexed[8] == [{"Items": [], "Count": 0, "ScannedCount": 0, "LastEvaluatedKey": None}]
    aws.delete_table(TableName=table)


def test_buckets_are_made_as_the_template_declares_them_and_an_exported_day_cannot_be_deleted(aws, template):
    from itl_local.aws import create_buckets

    s3 = boto3.client("s3")
    names = create_buckets(s3, template)
    for logical_id in ("PortalBucket", "CanaryArtifactsBucket", "AccessLogsBucket", "BillingExportBucket"):
        assert s3.get_bucket_versioning(Bucket=names[logical_id])["Status"] == "Enabled", logical_id
    export = names["BillingExportBucket"]
    lock = s3.get_object_lock_configuration(Bucket=export)["ObjectLockConfiguration"]
    retention = lock["Rule"]["DefaultRetention"]
    assert (retention["Mode"], retention["Days"]) == ("GOVERNANCE", 400)  # BillingExportRetentionDays
    # Given an exported day's object (written with a checksum, as S3 requires under Object Lock)
    key = "focus/2026-12/2026-12-01/itl-accelerator-focus-2026-12-01.csv.gz"
    first = s3.put_object(Bucket=export, Key=key, Body=b"day", ChecksumAlgorithm="SHA256")["VersionId"]
    # When someone deletes that version, it stays: only a principal allowed to bypass governance could
    with pytest.raises(s3.exceptions.ClientError, match="AccessDenied"):
        s3.delete_object(Bucket=export, Key=key, VersionId=first)
    # and writing the key again (a rerun) adds a version, the first one kept
    s3.put_object(Bucket=export, Key=key, Body=b"again", ChecksumAlgorithm="SHA256")
    versions = s3.list_object_versions(Bucket=export, Prefix=key)["Versions"]
    assert first in {v["VersionId"] for v in versions} and len(versions) == 2
