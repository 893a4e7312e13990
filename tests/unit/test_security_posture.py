"""The production posture template.yaml declares (docs/ARCHITECTURE.md, "Security posture"): each decision is in the
template, and each checkov check skipped says why next to it — on its resource, or once in .checkov.yaml for a check
that applies to no function, whose reason is held here — so a new resource that fails a check that applies fails
`./dev checkov` in CI."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from itl_local.template import Template
from tests.conftest import REPO_ROOT

TEMPLATE = Template()
RESOURCES: dict[str, Any] = TEMPLATE.resources


def of_type(kind: str) -> dict[str, dict[str, Any]]:
    return {name: r for name, r in RESOURCES.items() if r["Type"] == kind}


def skips(resource: dict[str, Any]) -> dict[str, str]:
    return {s["id"]: s["comment"] for s in ((resource.get("Metadata") or {}).get("checkov") or {}).get("skip") or []}


def test_every_skipped_check_says_why():
    skipped = [(name, check, why) for name, r in RESOURCES.items() for check, why in skips(r).items()]
    assert skipped, "the template skips no check at all"
    short = [(name, check) for name, check, why in skipped if len(why.split()) < 8]
    assert short == [], f"a skip without a reason of its own: {short}"


def config_skips() -> dict[str, str]:
    """The checks .checkov.yaml skips for every resource → the comment lines above each (its reason)."""
    skipped: dict[str, str] = {}
    comment: list[str] = []
    for line in (REPO_ROOT / ".checkov.yaml").read_text().splitlines():
        if line.strip().startswith("#"):
            comment.append(line.strip().lstrip("#").strip())
        elif check := re.fullmatch(r"\s*- (CKV\w+)", line):
            skipped[check.group(1)] = " ".join(comment)
            comment = []
        else:
            comment = []
    return skipped


def test_every_check_skipped_for_every_resource_says_why_once():
    skipped = config_skips()
    assert list(skipped) == yaml.safe_load((REPO_ROOT / ".checkov.yaml").read_text())["skip-check"]
    assert [check for check, why in skipped.items() if len(why.split()) < 8] == [], "a skip without its reason"
    again = [(name, check) for name, r in RESOURCES.items() for check in skips(r) if check in skipped]
    assert again == [], f"skipped on a resource and for all in .checkov.yaml: {again}"


def test_no_function_is_invoked_asynchronously_so_none_needs_a_dead_letter_queue():
    """.checkov.yaml's reason for skipping CKV_AWS_116 everywhere: each function is called by API Gateway (routes and
    the authorizer), Step Functions (the workflow steps), EventBridge Scheduler or a table stream, each of which
    handles a failure itself. A function invoked otherwise (S3, SNS, an EventBridge rule...) needs its own DLQ."""
    from tools.generate import WORKFLOWS

    steps = {f"{step.name}Function" for workflow in WORKFLOWS for step in workflow.steps}
    authorizers = {a["FunctionArn"]["Fn::GetAtt"][0] for a in TEMPLATE.api()["Auth"]["Authorizers"].values()}
    for name, function in of_type("AWS::Serverless::Function").items():
        events = {e["Type"] for e in (function["Properties"].get("Events") or {}).values()}
        if events:
            assert events <= {"Api", "ScheduleV2", "DynamoDB"}, f"{name} is invoked by {events}: give it a DLQ"
        else:
            assert name in steps | authorizers, f"{name}: no event, no workflow step, not the authorizer"


def test_no_function_environment_holds_a_secret():
    """.checkov.yaml's reason for skipping CKV_AWS_173 everywhere: a variable that names a secret holds where it is
    (its Secrets Manager id or ARN), never its value."""
    variables = dict(TEMPLATE.global_environment())
    for function in of_type("AWS::Serverless::Function").values():
        variables.update((function["Properties"].get("Environment") or {}).get("Variables") or {})
    secretive = [v for v in variables if re.search(r"SECRET|PASSWORD|TOKEN|(^|_)KEY(_|$)", v)]
    assert secretive, "no variable names a secret: is the pattern broken?"
    assert [v for v in secretive if not v.endswith(("_SECRET_ID", "_SECRET_ARN"))] == []


@pytest.mark.parametrize("name", sorted(of_type("AWS::Serverless::Function")))
def test_every_function_reserves_concurrency_or_says_why_it_does_not(name: str):
    function = RESOURCES[name]
    reserved = "ReservedConcurrentExecutions" in function["Properties"]
    assert reserved != ("CKV_AWS_115" in skips(function)), name
    events = {e.get("Type") for e in (function["Properties"].get("Events") or {}).values()}
    if events & {"ScheduleV2", "Schedule"}:
        # a periodic duty runs once at a time and always has a slot, whatever floods the API
        assert function["Properties"]["ReservedConcurrentExecutions"] == 1, name
    if "Api" in events:
        assert not reserved, f"{name}: API functions share the pool behind the stage throttle"


def test_a_throttled_workflow_step_is_retried_long_enough_to_queue_a_burst_not_fail_it():
    import json

    from tools.generate import STATEMACHINES_DIR

    def tasks(states: dict[str, Any]) -> list[dict[str, Any]]:
        found = []
        for state in states.values():
            if state.get("Type") == "Task" and "lambda" in str(state.get("Resource", "")):
                found.append(state)
            for branch in state.get("Branches", []) + ([state["Iterator"]] if "Iterator" in state else []):
                found += tasks(branch["States"])
        return found

    for path in sorted(STATEMACHINES_DIR.glob("*.asl.json")):
        for task in tasks(json.loads(path.read_text())["States"]):
            throttled = next(r for r in task["Retry"] if "Lambda.TooManyRequestsException" in r["ErrorEquals"])
            waited = sum(
                throttled["IntervalSeconds"] * throttled["BackoffRate"] ** i for i in range(throttled["MaxAttempts"])
            )
            assert throttled["MaxAttempts"] >= 8 and waited >= 120, path.name


def test_the_alarm_topic_is_encrypted_with_a_key_cloudwatch_may_use():
    topic = RESOURCES["OperationsAlarmTopic"]["Properties"]
    key_id = topic["KmsMasterKeyId"]["Ref"]
    key = RESOURCES[key_id]["Properties"]
    assert key["EnableKeyRotation"] is True
    principals = [s["Principal"] for s in key["KeyPolicy"]["Statement"]]
    assert {"Service": "cloudwatch.amazonaws.com"} in principals


def test_the_api_has_an_access_log_kept_encrypted_and_a_firewall_with_a_rate_rule_per_ip():
    setting = TEMPLATE.api()["AccessLogSetting"]
    group = RESOURCES[setting["DestinationArn"]["Fn::GetAtt"][0]]["Properties"]
    assert int(TEMPLATE.resolve(group["RetentionInDays"])) >= 365 and "KmsKeyId" in group
    acl = of_type("AWS::WAFv2::WebACL")["ApiWebAcl"]["Properties"]
    assert acl["Scope"] == "REGIONAL"
    rate = [r for r in acl["Rules"] if "RateBasedStatement" in r["Statement"]]
    assert [r["Statement"]["RateBasedStatement"]["AggregateKeyType"] for r in rate] == ["IP"]
    managed = {
        r["Statement"]["ManagedRuleGroupStatement"]["Name"]
        for r in acl["Rules"]
        if "ManagedRuleGroupStatement" in r["Statement"]
    }
    assert {"AWSManagedRulesAmazonIpReputationList", "AWSManagedRulesKnownBadInputsRuleSet"} <= managed
    # not the common rule set: it blocks job bodies over 8 KB and shell-like commands
    assert "AWSManagedRulesCommonRuleSet" not in managed
    blocked = TEMPLATE.gateway_responses()["WAF_FILTERED"]
    assert blocked["StatusCode"] == 403 and "RequestBlocked" in blocked["ResponseTemplates"]["application/json"]
    (association,) = of_type("AWS::WAFv2::WebACLAssociation").values()
    assert "/restapis/${Api}/stages/" in association["Properties"]["ResourceArn"]["Fn::Sub"]


@pytest.mark.parametrize("name", sorted(of_type("AWS::S3::Bucket")))
def test_every_bucket_is_versioned_private_encrypted_and_logged(name: str):
    props = RESOURCES[name]["Properties"]
    assert props["VersioningConfiguration"]["Status"] == "Enabled"
    assert all(props["PublicAccessBlockConfiguration"].values())
    assert "BucketEncryption" in props
    if name == "AccessLogsBucket":
        assert "CKV_AWS_18" in skips(RESOURCES[name])
    else:
        assert props["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": "AccessLogsBucket"}


def test_an_exported_billing_day_is_kept_under_object_lock():
    props = RESOURCES["BillingExportBucket"]["Properties"]
    assert props["ObjectLockEnabled"] is True
    retention = props["ObjectLockConfiguration"]["Rule"]["DefaultRetention"]
    assert retention["Mode"] == "GOVERNANCE" and int(TEMPLATE.resolve(retention["Days"])) >= 366
    assert RESOURCES["BillingExportBucket"]["DeletionPolicy"] == "Retain"


def test_the_portal_pins_tls_1_2_with_its_own_certificate_and_may_take_a_web_acl():
    config = RESOURCES["PortalDistribution"]["Properties"]["DistributionConfig"]
    with_certificate = config["ViewerCertificate"]["Fn::If"][1]
    assert with_certificate["MinimumProtocolVersion"] == "TLSv1.2_2021"
    assert config["WebACLId"]["Fn::If"][0] == "HasPortalWebAcl"
