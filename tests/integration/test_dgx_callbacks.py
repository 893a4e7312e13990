"""DGX callbacks end to end: the simulator's callbacks as the contract has them (signed, retried, the event's
schema), and the provider's ``POST /dgx/callbacks`` over HTTP through the API Gateway emulator of template.yaml —
with callbacks the provisioning is resumed by them, without (off, or lost) it still ends by polling, and a
callback not signed now by the platform is refused with 401 and an ARM error body."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest
import yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from itl_accelerator.dgx.callbacks import signature, verify
from itl_local.dgx_simulator import DgxSimulator, SimulatorConfig, sign_callback
from tests.conftest import REPO_ROOT, SEED_NODE, nodes_path, serve
from tests.integration.instance_helpers import SEED_INSTANCE, instances_path, wait_for, wait_state

SECRET = "integration-callback-secret"
CONTRACT = yaml.safe_load((REPO_ROOT / "docs" / "dgx-platform.openapi.yaml").read_text())


class Receiver:
    """A callback receiver on loopback: records each request; answers ``refuse_first`` of them 500, then 200."""

    def __init__(self, refuse_first: int = 0):
        self.received: list[tuple[dict[str, str], bytes]] = []
        self.refuse_first = refuse_first
        self.lock = threading.Lock()
        self.app = Starlette(routes=[Route("/cb", self.callback, methods=["POST"])])

    async def callback(self, request: Request) -> JSONResponse:
        body = await request.body()
        with self.lock:
            self.received.append(({k.lower(): v for k, v in request.headers.items()}, body))
            refuse = len(self.received) <= self.refuse_first
        return JSONResponse({"ok": not refuse}, status_code=500 if refuse else 200)


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, str]]:
    made = Receiver(refuse_first=2)
    server, port = serve(made.app)
    yield made, f"http://127.0.0.1:{port}/cb"
    server.should_exit = True


def create(simulator_url: str, kind: str, callback_url: str) -> dict[str, Any]:
    if kind == "instance":
        body = {"name": "/x/i", "nodeId": "n", "model": "mistral:7b", "gpus": 1, "memoryGb": 10}
        path = "/v1/instances"
    else:
        body = {"name": "/x/j", "nodeId": "n", "gpus": 1, "memoryGb": 10, "image": "img", "env": {}}
        path = "/v1/jobs"
    answer = httpx.post(
        f"{simulator_url}{path}", json={**body, "callbackUrl": callback_url}, headers={"Idempotency-Key": kind}
    )
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


@pytest.mark.parametrize("kind", ["instance", "job"])
def test_the_simulator_calls_back_signed_and_retries_until_answered(receiver, kind):
    # Given a simulator calling back with a secret, and a receiver that refuses the first two attempts
    got, url = receiver
    simulator = DgxSimulator(
        SimulatorConfig(
            provisioning_seconds=0.2, job_seconds=0.2, callback_secret=SECRET, callback_backoff_seconds=0.05
        )
    )
    server, port = serve(simulator.app)
    try:
        made = create(f"http://127.0.0.1:{port}", kind, url)
        # When the instance is ready (the job ended)
        # (the simulator records an attempt's answer once it has it back: after the receiver counted the attempt)
        wait_for(
            lambda: len(got.received) >= 3 and len(simulator.callbacks_sent) >= 3,
            timeout=20,
            what="three attempts of the callback, and their answers",
        )
    finally:
        server.should_exit = True
    # Then it was sent three times, the same event each time, each attempt signed anew as the contract says
    events = [json.loads(body) for _, body in got.received[:3]]
    assert len({e["eventId"] for e in events}) == 1
    event = events[0]
    schema = {**CONTRACT["components"]["schemas"]["CallbackEvent"], "components": CONTRACT["components"]}
    jsonschema.validate(event, schema)
    assert (event["type"], event["id"], event["status"]) == (
        kind,
        made["id"],
        "Running" if kind == "instance" else "Succeeded",
    )
    for headers, body in got.received[:3]:
        assert headers["x-dgx-signature"] == sign_callback(SECRET, headers["x-dgx-timestamp"], body)
        assert verify(SECRET, headers, body, now=time.time(), tolerance=300).id == made["id"]  # the provider agrees
    assert [a["answer"] for a in simulator.callbacks_sent] == [500, 500, 200]


def test_with_callbacks_off_the_simulator_sends_none(receiver):
    got, url = receiver
    simulator = DgxSimulator(SimulatorConfig(provisioning_seconds=0.1, callbacks=False, callback_secret=SECRET))
    server, port = serve(simulator.app)
    try:
        create(f"http://127.0.0.1:{port}", "instance", url)
        wait_for(lambda: simulator.callbacks_sent, timeout=10, what="the callback to be due")
    finally:
        server.should_exit = True
    assert [a["answer"] for a in simulator.callbacks_sent] == ["lost"] and got.received == []


# ------------------------------------------------------------------------------------------------ the provider
@pytest.fixture
def callbacks_on(aws: Any, gateway_url: str, dgx: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The session's functions asking the simulator to call back to the API emulator served over HTTP, and the
    simulator signing with the functions' secret; each workflow function's wiring is rebuilt to read it (and
    again afterwards, without it)."""
    from itl_accelerator.settings import get_settings
    from itl_functions import process

    def rebuild() -> None:
        get_settings.cache_clear()
        process.forget()

    monkeypatch.setenv("DGX_CALLBACK_URL", f"{gateway_url}/dgx/callbacks")
    monkeypatch.setenv("DGX_CALLBACK_SECRET", SECRET)
    rebuild()
    dgx.config.callback_secret = SECRET
    dgx.config.callbacks = True
    yield dgx
    monkeypatch.undo()
    rebuild()


@pytest.fixture
def node(admin: Any, sub: str) -> str:
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    return nodes_path(sub, name="dgx-1")


def provisioned(admin: Any, sub: str) -> dict[str, Any]:
    accepted = admin.post(instances_path(sub), json=SEED_INSTANCE)
    assert accepted.status_code == 202, accepted.text
    return wait_state(admin, instances_path(sub, name="instance-1"), ("Succeeded", "Failed"))


def callbacks_of(simulator: Any, sub: str) -> list[dict[str, Any]]:
    with simulator.lock:
        return [c for c in simulator.callbacks_sent if f"/subscriptions/{sub}/" in c["event"]["name"]]


def test_the_platforms_callback_reaches_the_provisioning_and_it_succeeds(callbacks_on, admin, sub, node):
    done = provisioned(admin, sub)
    assert done["properties"]["provisioningState"] == "Succeeded"
    sent = wait_for(lambda: callbacks_of(callbacks_on, sub), timeout=10, what="the ready callback")
    # the callback was verified and answered 200: it resumed the wait, or left the signal, or came after the poll
    assert [c["answer"] for c in sent] == [200]
    assert json.loads(sent[0]["reply"])["outcome"] in ("resumed", "signaled", "ignored")


@pytest.mark.parametrize("lost", ["callbacks off", "every callback lost"])
def test_without_a_callback_the_provisioning_still_succeeds_by_polling(callbacks_on, admin, sub, node, lost):
    if lost == "callbacks off":
        callbacks_on.config.callbacks = False
    else:
        callbacks_on.config.callback_drop_rate = 1.0
    done = provisioned(admin, sub)
    assert done["properties"]["provisioningState"] == "Succeeded"
    assert all(c["answer"] == "lost" for c in callbacks_of(callbacks_on, sub))


def signed_post(url: str, body: bytes, *, secret: str = SECRET, at: float | None = None, drop: str = "") -> Any:
    timestamp = str(int(time.time() if at is None else at))
    headers = {"X-DGX-Timestamp": timestamp, "X-DGX-Signature": signature(secret, timestamp, body)}
    headers.pop(drop, None)
    return httpx.post(url, content=body, headers={"Content-Type": "application/json", **headers})


EVENT = json.dumps(
    {"eventId": "e-1", "type": "instance", "id": "dgxi-x", "name": "/x", "status": "Running", "time": "t"}
).encode()


@pytest.mark.parametrize(
    ("fault", "kwargs"),
    [
        ("wrong secret", {"secret": "guessed"}),
        ("stale", {"at": time.time() - 3600}),
        ("no signature", {"drop": "X-DGX-Signature"}),
        ("no timestamp", {"drop": "X-DGX-Timestamp"}),
    ],
)
def test_a_callback_not_signed_now_by_the_platform_is_401_with_an_arm_error(callbacks_on, gateway_url, fault, kwargs):
    answer = signed_post(f"{gateway_url}/dgx/callbacks", EVENT, **kwargs)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error"]["code"] == "AuthenticationFailed"
    assert answer.headers["x-ms-request-id"]


def test_a_signed_callback_for_nothing_of_ours_is_200_and_a_signed_non_event_400(callbacks_on, gateway_url):
    answer = signed_post(f"{gateway_url}/dgx/callbacks", EVENT)
    assert answer.status_code == 200 and answer.json() == {"outcome": "ignored"}
    malformed = signed_post(f"{gateway_url}/dgx/callbacks", b'{"type": "instance"}')
    assert malformed.status_code == 400 and malformed.json()["error"]["code"] == "InvalidRequestContent"
