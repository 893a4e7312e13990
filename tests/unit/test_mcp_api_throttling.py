"""Given an API that answers 429 TooManyRequests, the MCP server's API client waits its Retry-After and retries —
a bounded number of times and within a waiting budget (the Lambda function must answer within API Gateway's 29 s)
— then hands the 429 to the tool's caller with ``retryAfter``."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from itl_accelerator_mcp.api import THROTTLE_ATTEMPTS, THROTTLE_BUDGETS, ApiClient, ApiError

PATH = "/subscriptions/sub-1/providers/ITL.Accelerator/sparkNodes"


def throttled(retry_after: str | None = "2") -> httpx.Response:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return httpx.Response(
        429, headers=headers, json={"error": {"code": "TooManyRequests", "message": "Too many read requests."}}
    )


def call(answers: list[httpx.Response], **client: Any) -> tuple[Any, list[float], int]:
    """GET :data:`PATH` through a client whose API answers ``answers`` in turn (the last again); returns the body
    or the :class:`ApiError`, the waits, and how many requests were sent."""
    sent: list[httpx.Request] = []
    waits: list[float] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        answer = answers[min(len(sent) - 1, len(answers) - 1)]
        return httpx.Response(answer.status_code, headers=answer.headers, content=answer.content)

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def run() -> Any:
        async with ApiClient(
            "https://api.test", "t", http_transport=httpx.MockTransport(handle), sleep=sleep, **client
        ) as api:
            try:
                return await api.get(PATH)
            except ApiError as error:
                return error

    return asyncio.run(run()), waits, len(sent)


def test_a_throttled_call_is_retried_after_retry_after() -> None:
    body, waits, sent = call([throttled("2"), throttled(None), httpx.Response(200, json={"value": []})])
    assert body == {"value": []} and waits == [2.0, 2.0] and sent == 3  # Retry-After, then the back-off's 2nd step


def test_still_throttled_after_the_last_attempt_the_429_is_the_tools_error_with_retry_after() -> None:
    error, waits, sent = call([throttled("1")])
    assert isinstance(error, ApiError) and sent == THROTTLE_ATTEMPTS and waits == [1.0] * (THROTTLE_ATTEMPTS - 1)
    assert error.to_dict() == {
        "status": 429,
        "code": "TooManyRequests",
        "message": "Too many read requests.",
        "retryAfter": 1.0,
    }


def test_in_lambda_a_wait_past_the_budget_is_not_waited_the_429_goes_back_at_once() -> None:
    error, waits, sent = call([throttled("45"), httpx.Response(200, json={})], transport_name="http")
    assert isinstance(error, ApiError) and error.retry_after == 45.0 and waits == [] and sent == 1
    assert THROTTLE_BUDGETS["http"] < 29  # API Gateway's integration timeout


def test_the_budget_is_the_clients_across_its_calls() -> None:
    # 3 s of budget: the first 429 (2 s) is waited out, the second (2 s) no longer fits
    error, waits, sent = call([throttled("2"), throttled("2"), httpx.Response(200, json={})], throttle_budget=3.0)
    assert isinstance(error, ApiError) and waits == [2.0] and sent == 2


def test_on_the_users_machine_a_minutes_window_is_waited_out() -> None:
    body, waits, _ = call([throttled("45"), httpx.Response(200, json={"value": []})], transport_name="stdio")
    assert body == {"value": []} and waits == [45.0]
