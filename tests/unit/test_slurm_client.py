"""The Slurm REST client against mock transports: error mapping (slurmrestd's 500s with errors[]), retries on
transient failures only, token minting and refresh, the idempotent submit, and that no token or key leaks."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import httpx
import jwt
import pytest

from itl_accelerator.slurm import (
    JwtTokenSource,
    SlurmAuthError,
    SlurmJobNotFound,
    SlurmJobSpec,
    SlurmNodeNotFound,
    SlurmPermanentError,
    SlurmRestClient,
    SlurmTransientError,
    SlurmUnsupported,
    StaticToken,
)

KEY = b"k" * 32
V38 = "/slurm/v0.0.38"


def job38(job_id: int = 7, **fields: Any) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "name": "j",
        "job_state": "RUNNING",
        "exit_code": 0,
        "nodes": "n1",
        "batch_host": "n1",
        "submit_time": 100,
        "start_time": 101,
        "end_time": 100_000,
        "user_name": "root",
        **fields,
    }


def errors(*entries: tuple[int, str], description: str = "") -> dict[str, Any]:
    return {"errors": [{"error_number": n, "error": e, "description": description} for n, e in entries]}


class Recorder:
    """A mock slurmrestd: ``answer(request)`` -> (status, body); keeps every request."""

    def __init__(self, answer: Callable[[httpx.Request], tuple[int, Any]]):
        self.answer = answer
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        status, body = self.answer(request)
        if isinstance(body, Exception):
            raise body
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return httpx.Response(status, content=content, headers={"Content-Type": "application/json"})


def client(
    answer: Callable[[httpx.Request], tuple[int, Any]],
    *,
    version: str = "v0.0.38",
    tokens: Any = None,
    user: str = "root",
    **kwargs: Any,
) -> tuple[SlurmRestClient, Recorder]:
    recorder = Recorder(answer)
    http = httpx.Client(base_url="http://slurm.test", transport=httpx.MockTransport(recorder))
    kwargs.setdefault("budget_seconds", 5)
    source = tokens or JwtTokenSource(KEY, user="root")
    return SlurmRestClient("http://slurm.test", version, user, source, http=http, **kwargs), recorder


SPEC = SlurmJobSpec(name="itl-op-1", script="#!/bin/bash\ntrue\n", gres_per_node="gpu:2", comment="op-1")


def test_calls_carry_the_user_and_a_fresh_token_signed_with_the_cluster_key() -> None:
    slurm, calls = client(lambda r: (200, {"jobs": [job38()]}), user="alice")
    slurm.get_job(7)
    request = calls.requests[0]
    assert request.method == "GET" and request.url.path == f"{V38}/job/7"
    assert request.headers["X-SLURM-USER-NAME"] == "alice"
    claims = jwt.decode(request.headers["X-SLURM-USER-TOKEN"], KEY, algorithms=["HS256"])
    assert claims["sun"] == "root" and claims["exp"] - claims["iat"] == 300


def test_a_token_is_reused_then_minted_again_before_it_expires() -> None:
    now = [1_000.0]
    source = JwtTokenSource(KEY, user="root", lifetime_seconds=120, refresh_margin_seconds=30, clock=lambda: now[0])
    first = source.token()
    now[0] += 89  # 31 s left: still good
    assert source.token() == first
    now[0] += 2  # 29 s left: inside the margin
    second = source.token()
    assert second != first
    assert jwt.decode(second, KEY, algorithms=["HS256"], options={"verify_exp": False})["iat"] == 1091
    source.invalidate()
    now[0] += 1
    assert source.token() != second
    with pytest.raises(ValueError):
        JwtTokenSource(KEY, user="root", lifetime_seconds=30, refresh_margin_seconds=30)


def test_the_key_may_come_later_or_as_base64_and_never_shows() -> None:
    reads = []

    def read() -> bytes:
        reads.append(1)
        return KEY

    lazy = JwtTokenSource(read, user="slurm")
    assert reads == []
    assert jwt.decode(lazy.token(), KEY, algorithms=["HS256"])["sun"] == "slurm"
    from_text = JwtTokenSource.from_base64(base64.b64encode(KEY).decode(), user="root")
    jwt.decode(from_text.token(), KEY, algorithms=["HS256"])
    assert "k" * 8 not in repr(lazy) and "hidden" in repr(from_text)
    assert "secret" not in repr(StaticToken("secret"))


@pytest.mark.parametrize(
    ("status", "body", "error"),
    [
        (500, errors((2017, "Invalid job id specified"), description="Unable to find JobId=7"), SlurmJobNotFound),
        (500, errors((2002, "Access/permission denied")), SlurmAuthError),
        (500, errors((2010, "Invalid user id")), SlurmAuthError),
        (500, errors((-1, "Unspecified error"), description="Unable to find JobId=7"), SlurmAuthError),
        (500, {"errors": [{"error": "Unspecified error", "errno": -1}], "nodes": []}, SlurmAuthError),
        (401, b"Authentication failure", SlurmAuthError),
        (500, errors((2018, "Invalid node name specified")), SlurmNodeNotFound),
        (500, {"errors": [{"error_code": 2014, "error": "Requested node configuration is not available"}]},
         SlurmPermanentError),
        (400, {"errors": [{"error": "Invalid SIGNAL specification", "error_code": -1},
                          {"error_number": -1, "error": "Unspecified error"},
                          {"error_code": 9001, "error": "Failure during parsing"}]}, SlurmPermanentError),
        (404, b"Unable find requested URL", SlurmUnsupported),
    ],
)  # fmt: skip
def test_slurmrestd_refusals_become_typed_errors_at_once(status: int, body: Any, error: type[Exception]) -> None:
    slurm, calls = client(lambda r: (status, body))
    with pytest.raises(error) as raised:
        slurm.get_job(7)
    assert type(raised.value) is error
    assert len(calls.requests) == 1  # not retried
    assert calls.requests[0].headers["X-SLURM-USER-TOKEN"] not in str(raised.value)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, b"{\n"),  # slurmctld down: slurmrestd's 500 after ~18 s, no errors[]
        (502, b""),
        (503, b""),
        (504, b""),
        (429, b""),
        (500, errors((1001, "Unable to contact slurm controller (connect failure)"))),
        (500, errors((5004, "Socket timed out on send/recv operation"))),
        (500, errors((5005, "Zero Bytes were transmitted or received"))),
    ],
)
def test_transient_failures_are_retried_then_raised(status: int, body: Any) -> None:
    slurm, calls = client(lambda r: (status, body), attempts=3)
    with pytest.raises(SlurmTransientError):
        slurm.nodes()
    assert len(calls.requests) == 3


def test_a_transient_failure_then_an_answer_succeeds_and_retry_after_is_honoured() -> None:
    answers = iter([(429, b""), (200, {"nodes": [{"name": "n1", "state": "idle", "gres": "gpu:h100:8"}]})])
    slurm, calls = client(lambda r: next(answers))
    assert [n.name for n in slurm.nodes()] == ["n1"]
    assert len(calls.requests) == 2


def test_connection_failures_are_transient_and_not_ambiguous() -> None:
    slurm, calls = client(lambda r: (0, httpx.ConnectError("refused")), attempts=2)
    with pytest.raises(SlurmTransientError, match="unreachable") as raised:
        slurm.get_job(1)
    assert raised.value.ambiguous is False and len(calls.requests) == 2
    slurm, _ = client(lambda r: (0, httpx.ReadTimeout("slow")), attempts=1)
    with pytest.raises(SlurmTransientError, match="timed out") as raised:
        slurm.get_job(1)
    assert raised.value.ambiguous is True


def test_a_submit_whose_answer_was_lost_finds_its_job_instead_of_submitting_twice() -> None:
    submitted: list[int] = []

    def answer(request: httpx.Request) -> tuple[int, Any]:
        if request.method == "POST":
            submitted.append(1)
            return 0, httpx.ReadTimeout("answer lost")  # slurmctld took it; the answer never came
        return 200, {
            "jobs": [job38(41, name="other"), job38(42, name="itl-op-1"), job38(43, name="itl-op-1", user_name="bob")]
        }

    slurm, calls = client(answer)
    assert slurm.submit(SPEC) == 42
    assert len(submitted) == 1
    assert [r.method for r in calls.requests] == ["POST", "GET"]


def test_a_submit_refused_by_a_connection_error_is_sent_again_without_a_lookup() -> None:
    answers = iter([(0, httpx.ConnectError("refused")), (200, {"job_id": 5, "errors": []})])
    slurm, calls = client(lambda r: next(answers))
    assert slurm.submit(SPEC) == 5
    assert [r.method for r in calls.requests] == ["POST", "POST"]


def test_a_submit_sends_the_version_body_and_reads_the_job_id() -> None:
    slurm, calls = client(lambda r: (200, {"job_id": 9, "step_id": "BATCH", "errors": []}))
    assert slurm.submit(SPEC) == 9
    body = json.loads(calls.requests[0].content)
    assert calls.requests[0].url.path == f"{V38}/job/submit"
    assert body["script"] == SPEC.script
    assert body["job"]["gres"] == "gpu:2" and body["job"]["no_requeue"] is True
    assert body["job"]["environment"]["PATH"]
    slurm, _ = client(lambda r: (200, {"errors": []}))
    with pytest.raises(SlurmPermanentError, match="no job id"):
        slurm.submit(SPEC)


def test_reading_jobs_decodes_v0_0_38() -> None:
    answer = {
        "jobs": [
            job38(1, job_state="FAILED", exit_code=768, end_time=200, state_reason="NonZeroExitCode"),
            job38(2, job_state="TIMEOUT", exit_code=15, end_time=300, nodes="n[1-2]"),
            job38(3, job_state="PENDING", start_time=0, end_time=0, nodes="", batch_host=""),
            job38(4),
        ]
    }
    slurm, calls = client(lambda r: (200, answer))
    failed, timed_out, pending, running = slurm.jobs()
    assert (failed.state, failed.exit_code, failed.exit_signal, failed.end_time) == ("FAILED", 3, None, 200)
    assert (timed_out.exit_code, timed_out.exit_signal, timed_out.nodes) == (None, 15, ["n1", "n2"])
    assert (pending.start_time, pending.end_time, pending.nodes, pending.batch_host) == (None, None, [], None)
    assert (running.exit_code, running.end_time) == (None, None)  # no exit yet; 100000 was the expected end
    assert calls.requests[0].url.path == f"{V38}/jobs"


def test_jobs_changed_since_asks_slurm_then_keeps_the_jobs_changed_since() -> None:
    answer = {
        "jobs": [
            job38(1, job_state="COMPLETED", submit_time=90, start_time=91, end_time=95),
            job38(2, job_state="COMPLETED", submit_time=90, start_time=91, end_time=100),
            job38(3, submit_time=80, start_time=85),  # running, unchanged since
            job38(4, job_state="PENDING", submit_time=120, start_time=0, end_time=0),
        ]
    }
    slurm, calls = client(lambda r: (200, answer))
    assert [j.job_id for j in slurm.jobs_changed_since(100)] == [2, 4]
    assert calls.requests[0].url.params["update_time"] == "100"
    slurm, _ = client(lambda r: (304, b""))  # nothing changed in the cluster since
    assert slurm.jobs_changed_since(100) == []


def test_cancel_and_signal() -> None:
    slurm, calls = client(lambda r: (200, {"errors": []}))
    assert slurm.cancel(7) is True
    assert slurm.cancel(7, "SIGTERM") is True
    assert [str(r.url.params) for r in calls.requests] == ["", "signal=TERM"]
    assert all(r.method == "DELETE" and r.url.path == f"{V38}/job/7" for r in calls.requests)
    with pytest.raises(ValueError):
        slurm.cancel(7, "BOGUS")
    slurm, _ = client(lambda r: (500, errors((2017, "Invalid job id specified"))))
    assert slurm.cancel(7) is False
    slurm, calls = client(lambda r: (200, {"errors": []}), version="v0.0.44")
    slurm.cancel(7, "USR1")
    assert calls.requests[0].url.params == httpx.QueryParams({"signal": "USR1", "flags": "FULL_JOB"})


def test_find_job_matches_name_comment_and_user() -> None:
    answer = {"jobs": [job38(1, name="a", comment="x"), job38(2, name="a", comment="y"), job38(3, name="b")]}
    slurm, _ = client(lambda r: (200, answer))
    assert slurm.find_job(name="a").job_id == 2  # type: ignore[union-attr]
    assert slurm.find_job(name="a", comment="x").job_id == 1  # type: ignore[union-attr]
    assert slurm.find_job(comment="z") is None
    with pytest.raises(ValueError):
        slurm.find_job()


def test_node_updates_are_v0_0_41_and_later() -> None:
    slurm, calls = client(lambda r: (200, {"errors": []}))
    with pytest.raises(SlurmUnsupported):
        slurm.drain_node("n1", "maintenance")
    assert calls.requests == []
    slurm, calls = client(lambda r: (200, {"errors": []}), version="v0.0.43")
    slurm.drain_node("n1", "maintenance")
    slurm.resume_node("n1")
    assert [(r.method, r.url.path, json.loads(r.content)) for r in calls.requests] == [
        ("POST", "/slurm/v0.0.43/node/n1", {"state": ["DRAIN"], "reason": "maintenance"}),
        ("POST", "/slurm/v0.0.43/node/n1", {"state": ["RESUME"]}),
    ]


def test_set_comment_posts_the_job_update() -> None:
    slurm, calls = client(lambda r: (200, {"errors": []}))
    slurm.set_comment(7, "endpoint=http://n1:8000")
    assert (calls.requests[0].method, json.loads(calls.requests[0].content)) == (
        "POST",
        {"comment": "endpoint=http://n1:8000"},
    )


def test_an_unsupported_version_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported"):
        SlurmRestClient("http://x", "v0.0.40", "root", StaticToken("t"))
