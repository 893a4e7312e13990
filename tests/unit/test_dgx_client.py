"""The DGX client against a scripted transport: what is retried, what is not, and what never leaks."""

from __future__ import annotations

import httpx
import pytest

from itl_accelerator.dgx.client import DgxPlatformClient
from itl_accelerator.dgx.errors import DgxNotFound, DgxPermanentError, DgxTransientError

INSTANCE = {
    "id": "dgxi-1",
    "name": "n",
    "nodeId": "node",
    "model": "mistral:7b",
    "gpus": 2,
    "memoryGb": 160,
    "status": "Provisioning",
}
SECRET = "sk-very-secret"


def client_with(responses: list, seen: list) -> DgxPlatformClient:
    """A client whose transport answers from ``responses`` in order (an Exception is raised instead)."""

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = responses.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    http = httpx.Client(
        base_url="http://dgx", transport=httpx.MockTransport(handler), headers={"Authorization": f"Bearer {SECRET}"}
    )
    return DgxPlatformClient("http://dgx", SECRET, attempts=4, http=http)


def test_create_carries_the_idempotency_key_and_retries_transient_failures():
    seen: list = []
    client = client_with(
        [
            httpx.ConnectError("refused"),
            httpx.Response(503, headers={"Retry-After": "0"}),
            httpx.Response(429, headers={"Retry-After": "0"}),
            httpx.Response(201, json=INSTANCE),
        ],
        seen,
    )
    created = client.create_instance(
        idempotency_key="op-1", name="n", node_id="node", model="mistral:7b", devices=2, memory_gb=160
    )
    assert created.id == "dgxi-1" and created.status == "Provisioning"
    assert len(seen) == 4
    assert {r.headers["Idempotency-Key"] for r in seen} == {"op-1"}  # the same key on every retry


def test_gives_up_after_the_attempts_with_a_transient_error():
    seen: list = []
    client = client_with([httpx.Response(500)] * 4, seen)
    with pytest.raises(DgxTransientError):
        client.get_instance("dgxi-1")
    assert len(seen) == 4


def test_timeouts_are_transient():
    client = client_with([httpx.ReadTimeout("slow")] * 4, [])
    with pytest.raises(DgxTransientError):
        client.get_instance("dgxi-1")


@pytest.mark.parametrize("status", [400, 401, 403, 409, 422])
def test_other_4xx_are_permanent_and_not_retried(status):
    seen: list = []
    client = client_with([httpx.Response(status, json={"error": {"code": "X", "message": "no"}})], seen)
    with pytest.raises(DgxPermanentError) as caught:
        client.create_instance(idempotency_key="k", name="n", node_id="node", model="m", devices=1, memory_gb=1)
    assert len(seen) == 1
    assert caught.value.status == status


def test_not_found_is_its_own_type_and_delete_of_missing_is_not_an_error():
    client = client_with([httpx.Response(404), httpx.Response(404)], [])
    with pytest.raises(DgxNotFound):
        client.get_instance("gone")
    assert client.delete_instance("gone") is False


def test_retry_after_is_honoured_but_capped(monkeypatch):
    from itl_accelerator.dgx import client as module

    waits: list[float] = []
    monkeypatch.setattr("time.sleep", lambda s: waits.append(s))
    c = client_with(
        [
            httpx.Response(429, headers={"Retry-After": "3"}),
            httpx.Response(429, headers={"Retry-After": "99"}),
            httpx.Response(200, json=INSTANCE),
        ],
        [],
    )
    c.get_instance("dgxi-1")
    assert waits == [3.0, module.MAX_RETRY_AFTER_SECONDS]


def test_the_api_key_never_appears_in_errors():
    client = client_with([httpx.Response(400, json={"error": {"code": "Bad", "message": "bad"}})], [])
    with pytest.raises(DgxPermanentError) as caught:
        client.get_instance("x")
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value.args)
