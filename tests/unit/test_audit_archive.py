"""Audit retention (issue 27: audit items never expired and were two thirds of what a job stored): each audit event
carries a TTL ``AUDIT_RETENTION_DAYS`` after it happened, and the ones DynamoDB deletes for it — only those — are
archived to S3, one gzip JSON Lines object per subscription, day and batch, the same object however often a batch
comes again."""

from __future__ import annotations

import gzip
import json
import uuid
from datetime import datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from itl_accelerator.repositories.dynamodb import dynamodb_repositories
from itl_accelerator.repositories.dynamodb.codec import typed
from itl_accelerator.repositories.dynamodb.streams import TTL_DELETER, expired_audit_events
from itl_accelerator.repositories.dynamodb.table import audit_item
from itl_accelerator.services.streams.audit_archive import AuditArchive
from itl_local.streams import matches
from itl_local.template import Template
from tests.contract.builders import make_audit

TEMPLATE = Template()
#: The table stream's filter for expired audit events (StateEventsFunction's third: the stream's readers are two).
PATTERN = json.loads(
    TEMPLATE.functions()["StateEventsFunction"]["Events"]["StateChanges"]["Properties"]["FilterCriteria"]["Filters"][2][
        "Pattern"
    ]
)


def _record(event: str, item: dict[str, Any], *, by_ttl: bool) -> dict[str, Any]:
    record: dict[str, Any] = {"eventName": event, "dynamodb": {"Keys": typed({"PK": item["PK"], "SK": item["SK"]})}}
    record["dynamodb"]["OldImage" if event == "REMOVE" else "NewImage"] = typed(item)
    if by_ttl:
        record["userIdentity"] = dict(TTL_DELETER)
    return record


def _records() -> tuple[list[dict[str, Any]], list[str]]:
    """A stream batch: two audit events removed by TTL (wanted), one removed by hand, one written, and a rate
    counter removed by TTL; and the ids of the wanted events."""
    expired = [make_audit("sub-a"), make_audit("sub-b", timestamp="2024-05-02T23:59:59.000001+00:00")]
    kept = make_audit("sub-a")
    counter = {"PK": "SUB#sub-a#RATE", "SK": "reads#2024-05-01T00:00", "n": 3, "entityType": "RateCounter"}
    records = [
        _record("REMOVE", audit_item(expired[0], 86400), by_ttl=True),
        _record("REMOVE", audit_item(kept), by_ttl=False),
        _record("INSERT", audit_item(kept), by_ttl=False),
        _record("REMOVE", counter, by_ttl=True),
        _record("REMOVE", audit_item(expired[1], 86400), by_ttl=True),
    ]
    return records, [e.event_id for e in expired]


def test_only_audit_events_deleted_by_their_ttl_are_archived_by_the_filter_and_the_parser_alike():
    records, wanted = _records()
    assert [r for r in records if matches(PATTERN, r)] == [records[0], records[4]]
    filters = TEMPLATE.functions()["StateEventsFunction"]["Events"]["StateChanges"]["Properties"]["FilterCriteria"]
    others = [json.loads(f["Pattern"]) for f in filters["Filters"][:2]]
    assert not any(matches(p, r) for p in others for r in records[:1])  # no state change: no event for it
    events = expired_audit_events(records)
    assert [e["event_id"] for e in events] == wanted
    assert "PK" not in events[0] and events[0]["new_state"] == '{"name":"x","properties":{"gpuCount":2}}'


def test_an_audit_event_expires_its_retention_after_it_happened():
    audit = make_audit("sub-a", timestamp="2024-05-01T00:00:00.000001+00:00")
    happened = int(datetime.fromisoformat(audit.timestamp).timestamp())
    assert audit_item(audit, 400 * 86400)["ttl"] == happened + 400 * 86400
    assert "ttl" not in audit_item(audit, 0)  # 0: kept for ever


def test_the_table_writes_audit_events_with_the_deployments_retention():
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        from itl_local.aws import create_table

        name = f"audit-{uuid.uuid4().hex[:8]}"
        create_table(client, TEMPLATE, name)
        repos = dynamodb_repositories(client, name, audit_retention_days=30)
        audit = make_audit("sub-a")
        repos.audit.append(audit)
        (item,) = client.scan(TableName=name)["Items"]
        assert int(item["ttl"]["N"]) == int(datetime.fromisoformat(audit.timestamp).timestamp()) + 30 * 86400


@pytest.fixture
def s3() -> Any:
    """An S3 client on moto whose bucket ``archive`` is empty (the bucket is the test's own: a mock of the session
    may outlive this one's, and with it what an earlier test wrote)."""
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        bucket = f"archive-{uuid.uuid4().hex[:12]}"
        client.create_bucket(Bucket=bucket)
        yield _Bucket(client, bucket)


class _Bucket:
    """An S3 client whose calls naming ``archive`` go to the test's own bucket."""

    def __init__(self, client: Any, bucket: str):
        self._client = client
        self._bucket = bucket
        self.exceptions = client.exceptions

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._client, name)

        def own(**kwargs: Any) -> Any:
            if kwargs.get("Bucket") == "archive":
                kwargs["Bucket"] = self._bucket
            return call(**kwargs)

        return own


def test_expired_events_go_to_one_object_per_subscription_and_day_the_same_however_often_they_come(s3: Any):
    records, wanted = _records()
    archive = AuditArchive(s3, "archive", "audit/")
    report = archive.archive(expired_audit_events(records))
    assert report.as_metrics() == {"events": 2, "objects": 2}
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="archive")["Contents"])
    assert [k.rsplit("/", 1)[0] for k in keys] == ["audit/sub-a/2024/05/01", "audit/sub-b/2024/05/02"]
    body = s3.get_object(Bucket="archive", Key=keys[0])["Body"].read()
    (line,) = gzip.decompress(body).decode().splitlines()
    assert json.loads(line)["event_id"] == wanted[0] and json.loads(line)["subscription_id"] == "sub-a"

    archive.archive(expired_audit_events(records))  # the stream delivers the batch again
    assert sorted(o["Key"] for o in s3.list_objects_v2(Bucket="archive")["Contents"]) == keys


def test_a_batch_s3_refuses_raises_so_the_stream_delivers_it_again(s3: Any):
    records, _ = _records()
    with pytest.raises(s3.exceptions.NoSuchBucket):
        AuditArchive(s3, "no-such-bucket", "audit/").archive(expired_audit_events(records))
    with pytest.raises(ValueError, match="AUDIT_ARCHIVE_BUCKET"):
        AuditArchive(s3, "", "audit/")


def test_the_table_stream_has_at_most_two_readers():
    """DynamoDB Streams advises at most two readers a shard (more are throttled): the archive reads through the
    state events' mapping instead of a third (review of issue 27)."""
    readers = [
        name
        for name, props in TEMPLATE.functions().items()
        for event in (props.get("Events") or {}).values()
        if event.get("Type") == "DynamoDB"
    ]
    assert sorted(readers) == ["FleetChangesFunction", "StateEventsFunction"]


def test_the_state_events_handler_archives_expired_audit_events_and_publishes_only_state_changes(s3: Any):
    from itl_accelerator.settings import Settings
    from itl_accelerator.wiring import Wiring
    from itl_functions import state_events
    from itl_local.lambda_runtime import LambdaContext

    records, wanted = _records()
    sent: list[Any] = []

    class Events:
        def put_events(self, Entries: list[Any]) -> dict[str, Any]:
            sent.extend(Entries)
            return {"FailedEntryCount": 0, "Entries": [{"EventId": "e"} for _ in Entries]}

    wiring = Wiring.build(
        Settings(table_name="t", event_bus_name="bus", audit_archive_bucket="archive"),
        s3_client=s3,
        events_client=Events(),
    )
    original = state_events._wiring
    state_events._wiring = lambda: wiring  # type: ignore[assignment]
    try:
        counts = state_events.publish({"Records": records}, LambdaContext("StateEventsFunction"))
    finally:
        state_events._wiring = original  # type: ignore[assignment]
    assert counts["archived"] == len(wanted) and sent == []
    assert len(s3.list_objects_v2(Bucket="archive")["Contents"]) == 2
