"""The rate limits as template.yaml deploys them and the local stack serves them: the parameters are the settings'
defaults and reach every function (Globals), every function that counts requests may write the counters and nothing
else, the stage throttles at the edge with the template's rate and burst, and the emulator's bucket behaves as API
Gateway's."""

from __future__ import annotations

import pytest

from itl_accelerator.api.protocol import CORS_EXPOSED_HEADERS
from itl_accelerator.api.rate_limits import HEADER_NAMES
from itl_accelerator.settings import Settings
from itl_local.gateway import TokenBucket
from itl_local.iam import Authorization, Policies, Resources, allowed
from itl_local.template import Template

TEMPLATE = Template()
LIMITS = {
    "RateLimitSubscriptionReadsPerMinute": "rate_limit_subscription_reads_per_minute",
    "RateLimitSubscriptionWritesPerMinute": "rate_limit_subscription_writes_per_minute",
    "RateLimitCallerReadsPerMinute": "rate_limit_caller_reads_per_minute",
    "RateLimitCallerWritesPerMinute": "rate_limit_caller_writes_per_minute",
}


@pytest.mark.parametrize(("parameter", "field"), LIMITS.items())
def test_each_limit_is_a_parameter_whose_default_is_the_settings_and_reaches_every_function(parameter, field):
    assert int(TEMPLATE.parameters[parameter]) == Settings.model_fields[field].default
    assert TEMPLATE.global_environment()[field.upper()] == TEMPLATE.parameters[parameter]


def test_every_function_that_counts_requests_holds_the_counter_policy_and_no_other_does():
    counting = {r.function_id for r in TEMPLATE.routes if "{subscriptionId}" in r.path}
    holding = {f for f, p in TEMPLATE.functions().items() if {"Ref": "RateCounterPolicy"} in (p.get("Policies") or [])}
    assert counting == holding


@pytest.mark.parametrize(
    ("partition", "allowed_"),
    [
        ("SUB#sub-1#RATE", True),
        ("SUB#sub-1", False),  # resources
        ("SUB#sub-1#AUDIT", False),
        ("SUB#sub-1#SUBSCRIPTION", False),
        ("SUB#sub-1#ROLLUP#subscription", False),
        ("SYS#EXPORT", False),
    ],
)
def test_the_counter_policy_lets_a_function_update_the_counters_and_nothing_else(partition, allowed_):
    resources = Resources(TEMPLATE, {"Table": "itl-accelerator"})
    statements = [
        s
        for s in Policies(TEMPLATE, resources).statements("SparkNodesGetFunction")
        if s.get("Action") == "dynamodb:UpdateItem"
    ]
    table = resources.get_att("Table", "Arn")
    needed = Authorization("dynamodb:UpdateItem", table, (("dynamodb:LeadingKeys", (partition,)),))
    assert allowed(statements, needed) is allowed_


def test_the_stage_throttle_comes_from_the_parameters():
    assert TEMPLATE.api_throttling() == (100.0, 200)
    low = Template(parameters={"ApiThrottlingRateLimit": "2.5", "ApiThrottlingBurstLimit": "4"})
    assert low.api_throttling() == (2.5, 4)
    throttled = TEMPLATE.gateway_responses()["THROTTLED"]
    assert throttled["StatusCode"] == 429 and "Retry-After" in throttled["ResponseParameters"]["Headers"]


def test_the_portal_may_read_the_rate_limit_headers():
    exposed = {h.strip().lower() for h in CORS_EXPOSED_HEADERS.split(",")}
    assert set(HEADER_NAMES) <= exposed


def test_the_bucket_lets_a_burst_through_then_refills_at_its_rate_up_to_its_size():
    now = [0.0]
    bucket = TokenBucket(rate=2.0, burst=3, clock=lambda: now[0])
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
    now[0] += 0.25  # half a token
    assert bucket.take() is False
    now[0] += 0.25  # a whole one
    assert [bucket.take(), bucket.take()] == [True, False]
    now[0] += 60  # never more than the burst
    assert [bucket.take() for _ in range(4)] == [True, True, True, False]
