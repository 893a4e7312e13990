"""SnapStart where a caller waits, nowhere else (issue 27: SnapStart on all 74 functions was 144 of an idle
deployment's 182 USD a month). An API operation's function (and the MCP server's) is answered while its caller
waits, and its cold start (about 1.3-1.9 s of import and app build, ``./dev bench`` (b)) is over the latency SLO's
1,000 ms; a workflow step, schedule or stream consumer is waited on by no one, and the plain handlers (probes, the
catch-all path, DGX callbacks) start faster than a bare boto3 client."""

from __future__ import annotations

from benchmarks.requests_and_cold_start import PLAIN_API_FUNCTIONS
from itl_local.template import Template

TEMPLATE = Template()
API = {r.function_id for r in TEMPLATE.routes}


def test_snapstart_is_on_the_functions_callers_wait_on_and_no_others():
    waited_on, not_waited_on = [], []
    for name, props in TEMPLATE.functions().items():
        (waited_on if name in API and name not in PLAIN_API_FUNCTIONS else not_waited_on).append((name, props))
    assert len(waited_on) >= 40 and len(not_waited_on) >= 30
    for name, props in waited_on:
        assert props.get("SnapStart") == {
            "Fn::If": ["HasApiSnapStart", {"ApplyOn": "PublishedVersions"}, {"Ref": "AWS::NoValue"}]
        }, name
    for name, props in not_waited_on:
        assert "SnapStart" not in props, name
    assert "SnapStart" not in TEMPLATE.doc["Globals"]["Function"]  # else every function would have it
