"""Time-to-ready overhead of instance provisioning: from the moment the DGX Platform has an instance ready to the
moment the provider shows it ``Succeeded`` — with the DGX callbacks off (the workflow learns of readiness at its
next poll) and on (the platform's callback resumes the waiting workflow at once).

Run from the repository root: ``python -m benchmarks.time_to_ready [--instances N]`` (``./dev bench`` runs it).
It starts a local stack of its own, as ``./dev up`` does: moto executing the real state machines with the real
step handlers, the API Gateway emulator of template.yaml served over HTTP (the callbacks reach it there), a dev
OIDC issuer and the DGX simulator. The poll interval is the deployed one (template.yaml's
``InstancePollIntervalSeconds`` default, as the Globals give it to the functions). Each instance's own ready time is
drawn uniformly from 1 s to two poll intervals, so readiness falls anywhere between polls.

Per instance: overhead = the instance's ``systemData.lastModifiedAt`` (written by the transition to ``Succeeded``)
minus the simulator's ready moment (when its ``provisioning_seconds`` ran out). Prints p50, p99 and max, seconds.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

TABLE = "itl-accelerator-bench-ready"
SECRET = "bench-callback-secret"
ADMIN = "itl-accelerator-admin"
GPUS_PER_NODE = 8


@dataclass
class Row:
    mode: str
    instances: int
    p50: float
    p99: float
    worst: float
    failed: int


def percentile(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _serve(app: Any) -> tuple[Any, int]:
    import socket

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("a local server did not start")
        time.sleep(0.01)
    return server, port


@contextmanager
def local_stack() -> Iterator[tuple[str, Any, Callable[[str], str], int]]:
    """Yields ``(api_url, simulator, token_for(subscription), poll_interval)``: the whole local stack of the module docstring."""
    import boto3
    from moto import mock_aws

    from itl_local.devauth import idp_app, load_or_create_key, mint_token
    from itl_local.dgx_simulator import DgxSimulator, SimulatorConfig
    from itl_local.template import Template

    home = tempfile.TemporaryDirectory(prefix="itl-bench-ready-")
    key = load_or_create_key(Path(home.name))
    idp, idp_port = _serve(idp_app(key))
    simulator = DgxSimulator(SimulatorConfig(api_key="bench-dgx-key", callback_secret=SECRET, deletion_seconds=0.1))
    dgx, dgx_port = _serve(simulator.app)
    template = Template()
    interval = int(template.global_environment()["INSTANCE_POLL_INTERVAL_SECONDS"])
    values = {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "TABLE_NAME": TABLE,
        "CONTROL_PLANE_AUTH_URL": f"http://127.0.0.1:{idp_port}",
        "OIDC_REALM": "itl",
        "DGX_PLATFORM_API_URL": f"http://127.0.0.1:{dgx_port}",
        "DGX_PLATFORM_API_KEY": "bench-dgx-key",
        "DGX_CALLBACK_SECRET": SECRET,
        "INSTANCE_POLL_INTERVAL_SECONDS": str(interval),
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "CRITICAL",
        "RATE_LIMIT_SUBSCRIPTION_WRITES_PER_MINUTE": "0",
        "RATE_LIMIT_CALLER_WRITES_PER_MINUTE": "0",
        "RATE_LIMIT_SUBSCRIPTION_READS_PER_MINUTE": "0",
        "RATE_LIMIT_CALLER_READS_PER_MINUTE": "0",
    }
    saved = {k: os.environ.get(k) for k in [*values, "AWS_ENDPOINT_URL", "DGX_CALLBACK_URL"]}
    os.environ.pop("AWS_ENDPOINT_URL", None)
    os.environ.update(values)
    from itl_accelerator.settings import get_settings
    from itl_local.aws import create_table, make_dynamodb_faithful
    from itl_local.gateway import ApiGatewayEmulator
    from itl_local.workflows import (
        MOTO_CONFIG,
        deploy_workflows,
        route_lambda_invocations_in_process,
        workflow_environment,
    )

    get_settings.cache_clear()
    route_lambda_invocations_in_process()
    make_dynamodb_faithful()
    api = None
    try:
        with mock_aws(config=MOTO_CONFIG):
            create_table(boto3.client("dynamodb"), template, TABLE)
            machines = deploy_workflows(
                template,
                iam=boto3.client("iam"),
                lambda_client=boto3.client("lambda"),
                sfn=boto3.client("stepfunctions"),
            )
            os.environ.update(workflow_environment(machines))
            get_settings.cache_clear()
            api, api_port = _serve(ApiGatewayEmulator(template, throttle=False))

            def token_for(subscription_id: str) -> str:
                return mint_token(
                    key,
                    issuer=f"http://127.0.0.1:{idp_port}/realms/itl",
                    audience="itl-accelerator",
                    subject="bench-admin",
                    roles=[ADMIN],
                    scopes=[f"/subscriptions/{subscription_id}"],
                )

            yield f"http://127.0.0.1:{api_port}", simulator, token_for, interval
    finally:
        for server in (api, dgx, idp):
            if server is not None:
                server.should_exit = True
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        get_settings.cache_clear()
        home.cleanup()


def callbacks(api_url: str, on: bool, simulator: Any) -> None:
    """Ask the platform for callbacks (to ``api_url``) or not: the provisioning steps' wiring is built anew."""
    from itl_accelerator.settings import get_settings
    from itl_functions import process

    os.environ["DGX_CALLBACK_URL"] = f"{api_url}/dgx/callbacks" if on else ""
    get_settings.cache_clear()
    process.forget()
    simulator.config.callbacks = on


def measure(
    api_url: str, simulator: Any, token_for: Callable[[str], str], interval: int, count: int, mode: str, seed: int
) -> Row:
    """Provision ``count`` instances in a subscription of their own; the overheads (module docstring)."""
    import httpx

    rng = random.Random(seed)
    sub = f"sub-bench-{uuid.uuid4().hex[:8]}"
    client = httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {token_for(sub)}"}, timeout=60)
    base = f"/subscriptions/{sub}/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes"
    nodes = [f"dgx-{n}" for n in range(math.ceil(count / GPUS_PER_NODE))]
    for node in nodes:
        body = {
            "location": "eastus",
            "sku": {"name": "DGX-H100-8GPU", "capacity": GPUS_PER_NODE},
            "properties": {
                "owner": "owner-1",
                "hardwareSpecs": {"gpuModel": "H100", "gpuCount": GPUS_PER_NODE, "gpuMemoryGb": 80},
                "pricing": {"currency": "USD", "pricePerGpuHour": 2.5},
            },
        }
        answer = client.put(f"{base}/{node}", json=body)
        assert answer.status_code in (200, 201), answer.text
    paths = []
    for i in range(count):
        # readiness anywhere between two polls: 1 s to two poll intervals after the platform accepted it
        simulator.config.provisioning_seconds = rng.uniform(1.0, 2.0 * interval)
        path = f"{base}/{nodes[i // GPUS_PER_NODE]}/sparkOllamaInstances/llm-{i}"
        answer = client.put(path, json={"properties": {"model": "mistral:7b", "gpus": 1, "memoryGb": 80}})
        assert answer.status_code in (200, 201), answer.text
        paths.append(path)
    done: dict[str, dict[str, Any]] = {}
    deadline = time.monotonic() + 6 * interval + 120
    while len(done) < count and time.monotonic() < deadline:
        for path in paths:
            if path not in done:
                found = client.get(path).json()
                if found["properties"]["provisioningState"] in ("Succeeded", "Failed"):
                    done[path] = found
        # how often this benchmark looks: seldom, so its own requests do not slow the workflows it measures (the
        # figures come from the stored times, not from when it looked)
        time.sleep(2.0)
    ready = {i["name"]: i.get("readyAtWall") for i in simulator.instances.values()}
    overheads, failed = [], count - len(done)
    for found in done.values():
        if found["properties"]["provisioningState"] != "Succeeded":
            failed += 1
            continue
        moment = ready.get(found["id"])
        if moment is None:
            failed += 1
            continue
        overheads.append(_epoch(found["systemData"]["lastModifiedAt"]) - moment)
    for path in paths:  # leave nothing provisioning behind
        client.delete(path)
    if not overheads:
        return Row(mode, count, math.nan, math.nan, math.nan, failed)
    return Row(
        mode,
        len(overheads),
        statistics.median(overheads),
        percentile(overheads, 99),
        max(overheads),
        failed,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=20, help="instances per mode (default 20)")
    args = parser.parse_args(argv)
    import logging

    logging.disable(logging.CRITICAL)  # the functions' logs; the table is the output
    rows = []
    with local_stack() as (api_url, simulator, token_for, interval):
        for mode, on in (("polling only (callbacks off)", False), ("DGX callbacks on", True)):
            callbacks(api_url, on, simulator)
            rows.append(measure(api_url, simulator, token_for, interval, args.instances, mode, seed=7))
    print(f"(c) Time-to-ready overhead beyond the platform's own ready time, seconds (poll interval {interval} s,")
    print(
        f"    the deployed InstancePollIntervalSeconds; {args.instances} instances per mode, ready 1-{2 * interval} s)"
    )
    print(f"    {'mode':<30} {'n':>4} {'p50':>8} {'p99':>8} {'max':>8} {'failed':>7}")
    for row in rows:
        print(
            f"    {row.mode:<30} {row.instances:>4} {row.p50:>8.3f} {row.p99:>8.3f} {row.worst:>8.3f} {row.failed:>7}"
        )
    goal = rows[-1].p50 < 0.5
    print(f"    goal p50 < 0.5 s with callbacks: {'met' if goal else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
