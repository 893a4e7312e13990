"""Waiting for the ITL gateway (gateway_registration.py ``wait_for_gateway``): ``/health`` asked again, ``interval``
seconds apart, until it answers 200 — the requests it took; 0 when it never did within the attempts, or when too
little time is left for a pause and the requests after it; no pause after the last request."""

from __future__ import annotations

import httpx

from itl_accelerator.gateway_registration import HEALTH_TIMEOUT_SECONDS, REGISTER_TIMEOUT_SECONDS, GatewayRegistration


def gateway(answers: list[int | None]) -> tuple[GatewayRegistration, list[float], list[str]]:
    """A registration against a gateway answering ``answers`` in turn (None: the connection fails), the pauses it
    made and the paths it asked."""
    asked: list[str] = []
    slept: list[float] = []

    def handle(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        status = answers[min(len(asked), len(answers)) - 1]
        if status is None:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(status)

    http = httpx.Client(transport=httpx.MockTransport(handle))
    return GatewayRegistration("https://gw.example/", http=http, sleep=slept.append), slept, asked


def test_the_gateway_is_asked_again_until_it_answers_200():
    registration, slept, asked = gateway([None, 503, 200])
    assert registration.wait_for_gateway(5, 2.0) == 3
    assert asked == ["/health"] * 3 and slept == [2.0, 2.0]


def test_a_gateway_that_never_answers_200_is_0_after_the_attempts_with_no_pause_after_the_last():
    registration, slept, asked = gateway([503])
    assert registration.wait_for_gateway(4, 1.5) == 0
    assert len(asked) == 4 and slept == [1.5, 1.5, 1.5]


def test_it_stops_when_too_little_time_is_left_for_a_pause_and_the_requests_after_it():
    registration, slept, asked = gateway([None])
    needed = 2.0 + REGISTER_TIMEOUT_SECONDS + HEALTH_TIMEOUT_SECONDS
    left = iter([needed + 1, needed - 0.1])
    assert registration.wait_for_gateway(30, 2.0, time_left=lambda: next(left)) == 0
    assert len(asked) == 2 and slept == [2.0]
