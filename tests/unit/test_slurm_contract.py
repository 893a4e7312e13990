"""The Slurm client's requests and decoding against the published slurmrestd schemas of v0.0.41-v0.0.44.

The schemas come from the ``slurmrestapi`` package (25.11.4.0, pinned in pyproject's dev extras): OpenAPI
Generator's models of Slurm 25.11.4's OpenAPI document, which serves v0.0.41, v0.0.42, v0.0.43 and v0.0.44 (no
package on PyPI ships the document itself). Each model gives its JSON Schema (pydantic), closed here
(``additionalProperties: false``) so a misspelt key fails, and its ``from_dict`` runs the enum checks the
generator wrote as validators (job flags, states, exit statuses). Paths, methods and query parameters are what the
package's own generated API builds for the same call. v0.0.38 (Slurm 22.05) is checked against the live
slurmrestd's ``/openapi`` (tests/slurm/) and against answers recorded from it
(tests/unit/data/slurm_v0.0.38_recorded.json, written by ``python -m tests.slurm.record_v0038``).
"""

from __future__ import annotations

import copy
import importlib
import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from slurmrestapi.api.slurm_api import SlurmApi
from slurmrestapi.api_client import ApiClient
from slurmrestapi.configuration import Configuration

from itl_accelerator.slurm import JwtTokenSource, SlurmJobNotFound, SlurmJobSpec, SlurmRestClient
from itl_accelerator.slurm.versions import dialect

NEWER = ("v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44")
RECORDED = Path(__file__).parent / "data" / "slurm_v0.0.38_recorded.json"


def model(version: str, name: str) -> Any:
    """The generated model ``name`` (e.g. ``job_submit_req``) of ``version``."""
    tag = "v00" + version.rsplit(".", 1)[1]
    module = importlib.import_module(f"slurmrestapi.models.{tag}_{name}")
    return getattr(module, "".join(part.capitalize() for part in f"{tag}_{name}".split("_")))


def _close(schema: Any) -> None:
    if isinstance(schema, dict):
        if "properties" in schema and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
        for value in schema.values():
            _close(value)
    elif isinstance(schema, list):
        for value in schema:
            _close(value)


def check(version: str, name: str, instance: dict[str, Any]) -> None:
    """``instance`` is valid for the published model ``name`` of ``version``: its (closed) JSON Schema, then the
    model's own validation (enums)."""
    cls = model(version, name)
    schema = copy.deepcopy(cls.model_json_schema(by_alias=True))
    _close(schema)
    jsonschema.validate(instance, schema)
    cls.from_dict(instance)


RICH = SlurmJobSpec(
    name="itl-op-1",
    script="#!/bin/bash\nsrun python train.py\n",
    partition="gpu",
    nodes=2,
    node_list=["n1", "n2"],
    exclude_nodes=["n3"],
    gres_per_node="gpu:h100:8",
    tasks=2,
    cpus_per_task=4,
    memory_per_node_mb=64000,
    time_limit_minutes=120,
    environment={"ITL_JOB": "1"},
    working_directory="/home/itl",
    standard_output="/home/itl/%j.out",
    standard_error="/home/itl/%j.err",
    comment="op-1",
    warning_signal="USR1",
    warning_seconds=120,
    requeue=False,
)


@pytest.mark.parametrize("version", NEWER)
def test_submit_bodies_are_valid_for_the_published_schema(version: str) -> None:
    body = dialect(version).submit_body(RICH)
    check(version, "job_submit_req", body)
    job = body["job"]
    assert job["tres_per_node"] == "gres/gpu:h100:8"
    assert job["time_limit"] == {"set": True, "infinite": False, "number": 120}
    assert job["environment"][0].startswith("PATH=") and "ITL_JOB=1" in job["environment"]
    assert (job["required_nodes"], job["excluded_nodes"]) == (["n1", "n2"], ["n3"])
    assert (job["kill_warning_signal"], job["kill_warning_flags"]) == ("USR1", ["BATCH_JOB"])
    minimal = dialect(version).submit_body(SlurmJobSpec(name="j", script="#!/bin/sh\ntrue\n"))
    check(version, "job_submit_req", minimal)


@pytest.mark.parametrize("version", NEWER)
def test_a_misspelt_key_would_fail_the_check(version: str) -> None:
    body = dialect(version).submit_body(RICH)
    body["job"]["gres"] = "gpu:8"  # v0.0.38's key, gone from these versions
    with pytest.raises(jsonschema.ValidationError):
        check(version, "job_submit_req", body)
    body = dialect(version).submit_body(RICH)
    body["job"]["kill_warning_flags"] = ["BATCH"]
    with pytest.raises(ValueError):
        check(version, "job_submit_req", body)


@pytest.mark.parametrize("version", NEWER)
def test_update_bodies_are_valid_for_the_published_schema(version: str) -> None:
    d = dialect(version)
    check(version, "job_desc_msg", d.update_body(comment="endpoint=http://n1:8000"))
    check(version, "update_node_msg", d.node_update_body(state="DRAIN", reason="maintenance"))
    check(version, "update_node_msg", d.node_update_body(state="RESUME", reason=None))


def _serialize(version: str, operation: str, **params: Any) -> tuple[str, str]:
    api = SlurmApi(ApiClient(Configuration(host="http://h")))
    tag = "v00" + version.rsplit(".", 1)[1]
    method, url = getattr(api, f"_slurm_{tag}_{operation}_serialize")(
        **params, _request_auth=None, _content_type=None, _headers=None, _host_index=0
    )[:2]
    return method, url.removeprefix("http://h")


@pytest.mark.parametrize("version", NEWER)
def test_paths_methods_and_query_parameters_are_the_published_ones(version: str) -> None:
    tag = "v00" + version.rsplit(".", 1)[1]
    d = dialect(version)
    body = {f"{tag}_job_submit_req": None}
    assert _serialize(version, "post_job_submit", **body) == ("POST", d.submit_path())
    assert _serialize(version, "get_job", job_id="7", update_time=None, flags=None) == ("GET", d.job_path(7))
    assert _serialize(version, "post_job", job_id="7", **{f"{tag}_job_desc_msg": None}) == ("POST", d.job_path(7))
    assert _serialize(version, "get_jobs", update_time="100", flags=None) == (
        "GET",
        f"{d.jobs_path()}?update_time=100",
    )
    params = d.cancel_params("TERM")
    assert _serialize(version, "delete_job", job_id="7", signal=params["signal"], flags=params["flags"]) == (
        "DELETE",
        f"{d.job_path(7)}?{httpx.QueryParams(params)}",
    )
    assert _serialize(version, "delete_job", job_id="7", signal=None, flags=None) == ("DELETE", d.job_path(7))
    assert _serialize(version, "get_nodes", update_time=None, flags=None) == ("GET", d.nodes_path())
    assert _serialize(version, "get_node", node_name="n1", update_time=None, flags=None) == ("GET", d.node_path("n1"))
    assert _serialize(version, "post_node", node_name="n1", **{f"{tag}_update_node_msg": None}) == (
        "POST",
        d.node_path("n1"),
    )
    assert _serialize(version, "get_ping") == ("GET", d.ping_path())


# ------------------------------------------------------------------------------------------------ answers
def t(number: int | None) -> dict[str, Any]:
    """A v0.0.40+ time or number: ``{set, infinite, number}``."""
    return {"set": number is not None, "infinite": False, "number": number or 0}


def exit_struct(status: str, code: int | None = None, signal: int | None = None, name: str = "") -> dict[str, Any]:
    return {"status": [status], "return_code": t(code), "signal": {"id": t(signal), "name": name}}


def job(job_id: int, state: list[str], **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "job_id": job_id,
        "name": f"itl-op-{job_id}",
        "comment": "",
        "job_state": state,
        "state_reason": "None",
        "nodes": "n[1-2]",
        "batch_host": "n1",
        "partition": "gpu",
        "user_name": "root",
        "submit_time": t(1000),
        "start_time": t(1001),
        "end_time": t(1061),
        "time_limit": t(60),
        "exit_code": exit_struct("SUCCESS", 0),
        "tres_per_node": "gres/gpu:8",
    }
    return {**base, **fields}


def jobs_answer(*jobs: dict[str, Any]) -> dict[str, Any]:
    return {"jobs": list(jobs), "last_backfill": t(1000), "last_update": t(1062), "errors": [], "warnings": []}


ANSWER = jobs_answer(
    job(1, ["COMPLETED"]),
    job(2, ["FAILED"], exit_code=exit_struct("ERROR", 3), state_reason="NonZeroExitCode"),
    job(3, ["TIMEOUT"], exit_code=exit_struct("SIGNALED", None, 15, "SIGTERM"), state_reason="TimeLimit"),
    job(4, ["CANCELLED"], exit_code=exit_struct("SIGNALED", None, 9, "SIGKILL"), nodes="n1"),
    job(5, ["RUNNING"], end_time=t(99999), exit_code=exit_struct("PENDING"), nodes="n2", batch_host="n2"),
    job(6, ["PENDING"], start_time=t(None), end_time=t(None), nodes="", batch_host="", state_reason="Resources",
        exit_code=exit_struct("PENDING")),
    job(7, ["FAILED", "COMPLETING"], exit_code=exit_struct("CORE_DUMPED", None, 11, "SIGSEGV")),
    job(8, ["PENDING", "REQUEUED"], start_time=t(None), end_time=t(None), time_limit={"set": False,
        "infinite": True, "number": 0}, exit_code=exit_struct("PENDING")),
)  # fmt: skip


def mock_client(version: str, answer: Any, status: int = 200) -> SlurmRestClient:
    http = httpx.Client(
        base_url="http://slurm.test",
        transport=httpx.MockTransport(lambda request: httpx.Response(status, json=answer)),
    )
    return SlurmRestClient("http://slurm.test", version, "root", JwtTokenSource(b"k" * 32, user="root"), http=http)


@pytest.mark.parametrize("version", NEWER)
def test_job_answers_valid_for_the_schema_decode_times_exit_codes_and_states(version: str) -> None:
    check(version, "openapi_job_info_resp", ANSWER)
    decoded = {j.job_id: j for j in mock_client(version, ANSWER).jobs()}
    summary = {
        i: (j.state, j.state_flags, j.exit_code, j.exit_signal, j.start_time, j.end_time, j.nodes)
        for i, j in decoded.items()
    }
    assert summary == {
        1: ("COMPLETED", [], 0, None, 1001, 1061, ["n1", "n2"]),
        2: ("FAILED", [], 3, None, 1001, 1061, ["n1", "n2"]),
        3: ("TIMEOUT", [], None, 15, 1001, 1061, ["n1", "n2"]),
        4: ("CANCELLED", [], None, 9, 1001, 1061, ["n1"]),
        5: ("RUNNING", [], None, None, 1001, None, ["n2"]),  # the expected end is no end
        6: ("PENDING", [], None, None, None, None, []),
        7: ("COMPLETING", ["FAILED"], None, 11, 1001, 1061, ["n1", "n2"]),
        8: ("PENDING", ["REQUEUED"], None, None, None, None, ["n1", "n2"]),
    }
    assert (decoded[1].submit_time, decoded[1].time_limit_minutes, decoded[8].time_limit_minutes) == (1000, 60, None)
    assert (decoded[6].state_reason, decoded[6].batch_host) == ("Resources", None)


@pytest.mark.parametrize("version", NEWER)
def test_node_answers_valid_for_the_schema_decode_states_and_gres(version: str) -> None:
    answer = {
        "nodes": [
            {"name": "n1", "state": ["MIXED"], "gres": "gpu:h100:8(S:0-1)", "gres_used": "gpu:h100:2(IDX:0-1)",
             "reason": "", "cpus": 224, "alloc_cpus": 2, "partitions": ["gpu"]},
            {"name": "n2", "state": ["IDLE", "DRAIN"], "gres": "gpu:h100:8", "gres_used": "gpu:h100:0(IDX:N/A)",
             "reason": "maintenance", "cpus": 224, "alloc_cpus": 0, "partitions": ["gpu"]},
            {"name": "n3", "state": ["DOWN", "NOT_RESPONDING"], "gres": "", "gres_used": "", "reason": "lost"},
        ],
        "last_update": t(1000),
        "errors": [],
        "warnings": [],
    }  # fmt: skip
    check(version, "openapi_nodes_resp", answer)
    n1, n2, n3 = mock_client(version, answer).nodes()
    assert (n1.state, n1.gres, n1.gres_used, n1.available, n1.gpus(), n1.gpus(used=True)) == (
        "MIXED", {"gpu:h100": 8}, {"gpu:h100": 2}, True, 8, 2,
    )  # fmt: skip
    assert (n2.state, n2.flags, n2.drained, n2.available, n2.reason) == ("IDLE", ["DRAIN"], True, False, "maintenance")
    assert (n3.state, n3.flags, n3.available, n3.gres) == ("DOWN", ["NOT_RESPONDING"], False, {})


@pytest.mark.parametrize("version", NEWER)
def test_submit_answers_and_errors_valid_for_the_schema_decode(version: str) -> None:
    answer = {"job_id": 42, "step_id": "batch", "job_submit_user_msg": "", "errors": [], "warnings": []}
    check(version, "openapi_job_submit_response", answer)
    assert mock_client(version, answer).submit(RICH) == 42
    refused = {
        "errors": [
            {"description": "Unable to find JobId=7", "error_number": 2017, "error": "Invalid job id specified",
             "source": "_handle_job_get"}
        ],
        "warnings": [],
    }  # fmt: skip
    check(version, "openapi_resp", refused)
    with pytest.raises(SlurmJobNotFound, match="Unable to find JobId=7"):
        mock_client(version, refused, status=500).get_job(7)


# ------------------------------------------------------------------------------------------------ v0.0.38
def recorded() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORDED.read_text())
    return data


def test_recorded_v0_0_38_answers_decode() -> None:
    """Answers of Debian's 22.05 slurmrestd (recorded live): the same decoding as the schemas' versions."""
    data = recorded()
    d = dialect("v0.0.38")

    def the(name: str) -> Any:
        return d.decode_job(data[name]["body"]["jobs"][0])

    completed = the("completed")
    assert (completed.state, completed.exit_code, completed.nodes, completed.comment) == (
        "COMPLETED", 0, ["n1", "n2"], "op-1",
    )  # fmt: skip
    assert completed.start_time and completed.end_time and completed.end_time >= completed.start_time
    failed = the("failed_exit_3")
    assert (failed.state, failed.exit_code, failed.exit_signal, failed.state_reason) == (
        "FAILED", 3, None, "NonZeroExitCode",
    )  # fmt: skip
    assert data["failed_exit_3"]["body"]["jobs"][0]["exit_code"] == 768  # the raw wait status
    timed_out = the("timeout")
    assert (timed_out.state, timed_out.exit_code, timed_out.exit_signal) == ("TIMEOUT", None, 15)
    cancelled = the("cancelled")
    assert cancelled.state == "CANCELLED" and cancelled.exit_signal in (9, 15)
    running = the("running")
    assert (running.state, running.end_time, running.exit_code, running.nodes) == ("RUNNING", None, None, ["n1"])
    pending = the("pending")
    assert (pending.state, pending.state_reason, pending.start_time, pending.nodes) == (
        "PENDING", "Resources", None, [],
    )  # fmt: skip
    nodes = {n.name: n for n in map(d.decode_node, data["nodes"]["body"]["nodes"])}
    assert nodes["n1"].gres_used == {"gpu:h100": 8} and nodes["n1"].gres == {"gpu:h100": 8}
    assert nodes["n2"].drained and nodes["n2"].reason == "recorded drain" and not nodes["n2"].available
    assert data["submit"]["status"] == 200 and isinstance(data["submit"]["body"]["job_id"], int)
    assert data["not_modified_status"] == 304
    assert data["not_found"]["status"] == 500
    assert data["not_found"]["body"]["errors"][0]["error_number"] == 2017
    assert data["refused_submit"]["body"]["errors"][0]["error_code"] == 2014
