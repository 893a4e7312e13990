"""The Step Functions client of the wiring retries a throttled StartExecution in botocore's adaptive mode, so a
sweep that starts many executions slows down instead of deferring them (settings ``stepfunctions_max_attempts``)."""

from __future__ import annotations

import json
import types

import botocore.endpoint
import botocore.retries.bucket
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from itl_accelerator.settings import Settings
from itl_accelerator.wiring import Wiring

ARN = "arn:aws:states:eu-west-1:123456789012:stateMachine:itl-provision"


class _Throttling:
    """Answers the first ``throttled`` sends with HTTP 400 ThrottlingException, the rest with a started execution."""

    def __init__(self, throttled: int):
        self.throttled = throttled
        self.sends = 0

    def __call__(self, request, **_):
        self.sends += 1
        if self.sends <= self.throttled:
            body = {"__type": "ThrottlingException", "message": "Rate exceeded"}
            return AWSResponse(request.url, 400, {"x-amzn-RequestId": "r"}, _Raw(json.dumps(body).encode()))
        body = {"executionArn": ARN.replace("stateMachine", "execution") + ":op", "startDate": 0}
        return AWSResponse(request.url, 200, {"x-amzn-RequestId": "r"}, _Raw(json.dumps(body).encode()))


class _Raw:
    def __init__(self, data: bytes):
        self._data = data

    def stream(self, **_):
        yield self._data


class _VirtualClock:
    """botocore's bucket Clock (``sleep``, ``current_time``) and a condition whose ``wait`` advances it."""

    def __init__(self):
        self.now = 1_000.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def current_time(self) -> float:
        return self.now

    def condition(self, _lock=None):
        clock = self

        class _Condition:
            def __enter__(self):
                return self

            def __exit__(self, *_):
                return False

            def wait(self, seconds: float) -> None:
                clock.sleep(seconds)

            def notify(self) -> None:
                pass

        return _Condition()


def _machines(monkeypatch, attempts: int, throttled: int):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_SFN", raising=False)
    monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)
    monkeypatch.delenv("AWS_RETRY_MODE", raising=False)
    # botocore waits its backoff (time.sleep) and its adaptive rate limiter's token bucket (a condition's wait, on
    # its Clock) in real time: both run on a virtual clock here, so the test takes no wall time.
    clock = _VirtualClock()
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=clock.sleep))
    monkeypatch.setattr(botocore.retries.bucket, "Clock", lambda: clock)
    monkeypatch.setattr(
        botocore.retries.bucket, "threading", types.SimpleNamespace(Lock=lambda: None, Condition=clock.condition)
    )
    machines = Wiring.build(Settings(stepfunctions_max_attempts=attempts)).state_machines
    sender = _Throttling(throttled)
    client = machines._sfn._make()  # the client the wiring makes, before any call
    client.meta.events.register("before-send.sfn.StartExecution", sender)
    machines._sfn._made = client
    return machines, sender, clock


def test_a_throttled_start_is_retried_until_it_succeeds(monkeypatch):
    machines, sender, clock = _machines(monkeypatch, attempts=6, throttled=5)
    machines.start(ARN, "op", {"operationId": "op"})
    assert sender.sends == 6
    assert clock.now > 1_000.0  # it backed off between the attempts
    assert machines._sfn.meta.config.retries["mode"] == "adaptive"


def test_throttling_past_the_attempts_reaches_the_caller(monkeypatch):
    machines, sender, _clock = _machines(monkeypatch, attempts=2, throttled=5)
    with pytest.raises(ClientError) as caught:
        machines.start(ARN, "op", {"operationId": "op"})
    assert caught.value.response["Error"]["Code"] == "ThrottlingException"
    assert sender.sends == 2
    assert machines.start_or_defer(ARN, "op2", {"operationId": "op2"}) is False
