"""Log context per invocation: handlers that run side by side (the local runtime runs many functions in one
process) each log their own function name and keys."""

from __future__ import annotations

import io
import json
import threading
from concurrent.futures import ThreadPoolExecutor

from itl_accelerator.observability import logger
from itl_local.lambda_runtime import LambdaContext


def test_two_functions_running_side_by_side_each_log_their_own_name():
    # Given two handlers that log after both have started (so their invocations overlap)
    both_started = threading.Barrier(2)

    @logger.inject_lambda_context(clear_state=True)
    def handler(event, context):
        logger.append_keys(operation_id=event["op"])
        both_started.wait(timeout=10)
        logger.warning("step ran")
        return event["op"]

    # When they run at the same time on two threads
    stream = io.StringIO()
    previous = logger.registered_handler.setStream(stream)
    try:
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(handler, {"op": "op-a"}, LambdaContext("InstanceRequestFunction"))
            second = pool.submit(handler, {"op": "op-b"}, LambdaContext("AuthorizerFunction"))
            assert {first.result(), second.result()} == {"op-a", "op-b"}
    finally:
        logger.registered_handler.setStream(previous)

    # Then each line names its own function and carries its own keys
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if '"step ran"' in line]
    seen = {(line["function_name"], line["operation_id"]) for line in lines}
    assert seen == {("InstanceRequestFunction", "op-a"), ("AuthorizerFunction", "op-b")}


def test_with_metrics_disabled_runs_print_nothing_and_keep_nothing(monkeypatch, capsys):
    from aws_lambda_powertools.metrics import MetricUnit

    from itl_accelerator.observability import log_metrics, metrics

    # Given metrics disabled (the local runtime, the tests) and a handler publishing a metric each run
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")

    @log_metrics
    def handler(event, context):
        metrics.add_metric(name="Runs", unit=MetricUnit.Count, value=1)
        return {}

    # When it runs more often than Powertools keeps values of one metric (100)
    for _ in range(150):
        handler({}, None)
    # Then no EMF line was printed, and nothing is left over in the process
    assert "_aws" not in capsys.readouterr().out
    assert not metrics.metric_set


def test_the_stacks_powertools_variables_name_the_service_and_the_metrics_namespace():
    """template.yaml's Globals set POWERTOOLS_SERVICE_NAME and POWERTOOLS_METRICS_NAMESPACE: what they say is what
    the log lines and the EMF metrics carry (a fresh interpreter: the objects are made at import)."""
    import os
    import subprocess
    import sys

    child = (
        "import json, io, contextlib\n"
        "from itl_accelerator.observability import logger, metrics\n"
        "from aws_lambda_powertools.metrics import MetricUnit\n"
        "metrics.add_metric(name='Runs', unit=MetricUnit.Count, value=1)\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    metrics.flush_metrics()\n"
        "emf = json.loads(out.getvalue().strip().splitlines()[-1])\n"
        "print(json.dumps([logger.service, emf['_aws']['CloudWatchMetrics'][0]['Namespace'], emf['service']]))\n"
    )
    env = {
        **os.environ,
        "POWERTOOLS_SERVICE_NAME": "accelerator-eu",
        "POWERTOOLS_METRICS_NAMESPACE": "ITL/AcceleratorEU",
        "POWERTOOLS_METRICS_DISABLED": "false",
    }
    done = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["accelerator-eu", "ITL/AcceleratorEU", "accelerator-eu"]
