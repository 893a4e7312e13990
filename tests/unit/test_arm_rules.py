"""Pure ARM rules: merge patch, preconditions, names, locations, api-version."""

from __future__ import annotations

from typing import Any

import pytest

from itl_accelerator import arm
from itl_accelerator.errors import (
    BadRequest,
    InvalidParameter,
    InvalidResourceName,
    MissingApiVersion,
    PreconditionFailed,
    UnsupportedApiVersion,
)
from itl_accelerator.services.common import arm_rules


def test_merge_patch_follows_rfc7396_examples():
    # RFC 7396 appendix A, a selection
    assert arm_rules.merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert arm_rules.merge_patch({"a": "b"}, {"b": "c"}) == {"a": "b", "b": "c"}
    assert arm_rules.merge_patch({"a": "b"}, {"a": None}) == {}
    assert arm_rules.merge_patch({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}) == {"a": {"b": "d"}}
    assert arm_rules.merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert arm_rules.merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    assert arm_rules.merge_patch([1, 2], {"a": "b", "c": None}) == {"a": "b"}


def test_merge_patch_does_not_mutate_its_input():
    target = {"a": {"b": 1}}
    arm_rules.merge_patch(target, {"a": {"b": 2}})
    assert target == {"a": {"b": 1}}


@pytest.mark.parametrize(
    ("current", "if_match", "if_none_match", "fails"),
    [
        (None, "*", None, True),  # If-Match * on a missing resource
        ('"abc"', '"abc"', None, False),
        ('"abc"', "abc", None, False),  # unquoted tolerated
        ('"abc"', 'W/"abc"', None, False),  # weak form tolerated
        ('"abc"', '"old"', None, True),  # stale
        ('"abc"', '"old", "abc"', None, False),  # a list with the current one
        ('"abc"', None, "*", True),  # If-None-Match * on an existing resource
        (None, None, "*", False),
        ('"abc"', None, None, False),
    ],
)
def test_preconditions(current, if_match, if_none_match, fails):
    if fails:
        with pytest.raises(PreconditionFailed):
            arm_rules.check_preconditions(current, if_match=if_match, if_none_match=if_none_match)
    else:
        arm_rules.check_preconditions(current, if_match=if_match, if_none_match=if_none_match)


def test_body_name_must_match_url_ignoring_case():
    arm_rules.check_body_name(None, "dgx-1")
    arm_rules.check_body_name("DGX-1", "dgx-1")
    with pytest.raises(BadRequest):
        arm_rules.check_body_name("dgx-2", "dgx-1")


def test_provisioning_state_is_read_only():
    arm_rules.check_provisioning_state(None, "Succeeded")
    arm_rules.check_provisioning_state("Succeeded", "Succeeded")
    arm_rules.check_provisioning_state("Succeeded", None)
    with pytest.raises(BadRequest):
        arm_rules.check_provisioning_state("Failed", "Succeeded")


def test_location_compared_ignoring_case_and_spaces():
    arm_rules.check_location_unchanged("East US", "eastus")
    with pytest.raises(InvalidParameter):
        arm_rules.check_location_unchanged("westus", "eastus")


def test_changed_paths_lists_leaves():
    before = {"properties": {"pricing": {"price": 1}, "owner": "a"}, "tags": {"x": "1"}}
    after = {"properties": {"pricing": {"price": 2}, "owner": "a"}, "tags": {}}
    assert arm_rules.changed_paths(before, after) == {"properties.pricing.price", "tags.x"}


@pytest.mark.parametrize("name", ["dgx-1", "a", "A_b.c-9", "x" * 63])
def test_valid_resource_names(name):
    assert arm.validate_resource_name(name) == name


@pytest.mark.parametrize("name", ["", "-a", "a.", "a#b", "a/b", "x" * 64, "ünï", "a b"])
def test_invalid_resource_names(name):
    with pytest.raises(InvalidResourceName):
        arm.validate_resource_name(name)


def test_resource_group_names_follow_arm_rules():
    assert arm.validate_resource_group("My_RG-(1).prod")
    for bad in ("", "rg.", "r" * 91, "rg/1", "rg#1"):
        with pytest.raises(InvalidParameter):
            arm.validate_resource_group(bad)


def test_api_version_optional_and_unknown_refused():
    assert arm.validate_api_version(None) == arm.DEFAULT_API_VERSION
    assert arm.validate_api_version("2026-11-01") == "2026-11-01"
    with pytest.raises(UnsupportedApiVersion):
        arm.validate_api_version("2020-01-01")
    with pytest.raises(MissingApiVersion):
        arm.validate_api_version("")


def test_resource_id_has_no_host_or_version():
    assert (
        arm.resource_id("sub", "rg", ("sparkNodes", "dgx-1"))
        == "/subscriptions/sub/resourceGroups/rg/providers/ITL.Accelerator/sparkNodes/dgx-1"
    )


def test_a_revised_document_merges_properties_drops_nones_and_stamps_the_change() -> None:
    from itl_accelerator.services.common.context import system_context

    created = {"createdBy": "alice", "createdByType": "User", "createdAt": "2026-01-01T00:00:00Z"}
    document = {
        "id": "/subscriptions/s/x",
        "tags": {"team": "nlp"},
        "systemData": {**created, "lastModifiedBy": "alice", "lastModifiedByType": "User", "lastModifiedAt": "x"},
        "properties": {"status": "Running", "cost": {"amount": "1"}, "gpus": 2},
    }
    ctx = system_context("op-1", "corr-1", clock=lambda: 1767225600.0)  # 2026-01-01T00:00:00Z
    after = arm_rules.revised(ctx, document, {"status": "Succeeded", "cost": None})
    assert after["properties"] == {"status": "Succeeded", "gpus": 2}  # merged; None removed it
    assert after["tags"] == {"team": "nlp"} and after["id"] == document["id"]
    assert {k: after["systemData"][k] for k in created} == created  # who made it is kept
    assert after["systemData"]["lastModifiedByType"] == "Application"  # ARM's createdByType for the workflows
    assert after["systemData"]["lastModifiedAt"].startswith("2026-01-01T00:00:00")
    assert document["properties"]["status"] == "Running"  # the stored one is not changed in place


# --------------------------------------------------------------------------- a record's typed values own their properties
def _job() -> Any:
    from itl_accelerator.domain.records import Job, ResourceKey
    from itl_accelerator.domain.states import JobStatus, ProvisioningState
    from itl_accelerator.resources import JOBS

    key = ResourceKey("sub-1", "rg1", "sparkJobs", ("train",))
    document = JOBS.envelope(
        "sub-1",
        "rg1",
        ("train",),
        tags={},
        system_data={"createdBy": "alice", "createdByType": "User", "createdAt": "2026-12-01T00:00:00Z"},
        properties={"jobType": "training", "statusReason": "Submitted.", "gpuModel": "H100 SXM"},
    )
    return Job(
        key=key,
        document=document,
        etag='"1"',
        state=ProvisioningState.ACCEPTED,
        operation_id="op-1",
        devices=2,
        memory_gb=0,
        status=JobStatus.PENDING,
        priority=0,
        submitted_by="alice",
        submitted_at="2026-12-01T00:00:00Z",
        max_duration_seconds=3600,
    )


def test_a_change_of_a_typed_value_is_its_documents_property_too():
    from itl_accelerator.domain.states import JobStatus, ProvisioningState
    from itl_accelerator.services.common.context import system_context

    job = _job()
    ctx = system_context("op-1", "c-1", clock=lambda: 1_764_979_200.0)
    running = arm_rules.changed(
        ctx,
        job,
        {"statusReason": "Running.", "logsUrl": "https://dgx/logs/1"},
        status=JobStatus.RUNNING,
        state=ProvisioningState.RUNNING,
        started_at="2026-12-06T00:00:00Z",
    )
    properties = running.document["properties"]
    assert running.status == JobStatus.RUNNING and running.etag != job.etag
    assert properties["status"] == "Running" and properties["provisioningState"] == "Running"
    assert properties["startedAt"] == "2026-12-06T00:00:00Z" and properties["logsUrl"] == "https://dgx/logs/1"
    # what only the document holds stays; zero is a value (priority 0, no GPU memory asked), not an absence
    assert properties["jobType"] == "training" and properties["gpuModel"] == "H100 SXM"
    assert properties["priority"] == 0 and properties["requestedMemoryGb"] == 0 and properties["requestedGpus"] == 2
    assert properties["maxDurationMinutes"] == 60 and properties["submittedBy"] == "alice"
    assert "endedAt" not in properties  # not set yet: not shown
    assert running.document["systemData"]["lastModifiedBy"] == "ITL.Accelerator/workflows"
    assert running.document["systemData"]["createdBy"] == "alice"
    # the record it came from is untouched
    assert "startedAt" not in job.document["properties"] and job.status == JobStatus.PENDING


def test_a_property_only_the_document_holds_is_removed_by_none():
    from itl_accelerator.services.common.context import system_context

    job = _job()
    told = arm_rules.changed(system_context("op-1", "c-1"), job, {"statusReason": None})
    assert "statusReason" not in told.document["properties"]
    assert told.document["properties"]["status"] == "Pending"


def test_the_envelope_names_a_new_documents_members_once():
    from itl_accelerator.resources import INSTANCES

    document = INSTANCES.envelope(
        "sub-1", "rg1", ("dgx-1", "llama"), system_data={"createdBy": "a"}, properties={"model": "llama3"}
    )
    assert document == {
        "id": "/subscriptions/sub-1/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1"
        "/sparkOllamaInstances/llama",
        "name": "llama",
        "type": "ITL.Accelerator/sparkNodes/sparkOllamaInstances",
        "systemData": {"createdBy": "a"},
        "properties": {"model": "llama3"},
    }
