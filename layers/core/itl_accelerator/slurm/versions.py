"""The REST versions behind one adapter: each builds the request bodies and paths of its version and decodes its
answers into models.py's shapes.

- **v0.0.38** (Slurm 22.05, Debian bookworm): the live cluster of tests/slurm/. Its shapes are taken from the live
  slurmrestd's ``/openapi`` document and its submit parser's key table (``job_params`` in
  src/plugins/openapi/v0.0.38/jobs.c): keys that the document omits but the parser takes (``nodelist``,
  ``exclude_nodes``, ``no_requeue``) are used where the documented ones fail (``requeue: false`` is ignored;
  ``required_nodes``/``excluded_nodes`` are disabled keys). Times and exit codes are plain integers; ``job_state``
  one word; node ``state`` lower case with ``state_flags``.
- **v0.0.41-v0.0.44** (Slurm 24.05-25.11, what AWS Parallel Computing Service runs): checked against the
  published schemas as the ``slurmrestapi`` package (25.11.4.0) carries them (tests/unit/test_slurm_contract.py).
  Times are ``{set, infinite, number}``; exit codes ``{status: [...], return_code: {...}, signal: {id: {...},
  name}}`` (already decoded: no wait status); ``job_state`` and node ``state`` are lists of upper-case words;
  ``environment`` is a list of ``KEY=VALUE``; gres per node is ``tres_per_node: gres/gpu:8``; nodes are
  ``required_nodes``/``excluded_nodes`` lists; the warning signal is ``kill_warning_*``. List paths end with
  ``/`` (``/jobs/``, ``/nodes/``) as the schemas write them. Node updates exist (``POST /node/{name}``).
"""

from __future__ import annotations

from typing import Any, get_args

from itl_accelerator.settings import SlurmApiVersion
from itl_accelerator.slurm.errors import SlurmUnsupported
from itl_accelerator.slurm.hostlist import expand_hostlist
from itl_accelerator.slurm.models import (
    FINAL_STATES,
    SlurmJob,
    SlurmJobSpec,
    SlurmNode,
    decode_wait_status,
    normalise_job_state,
    parse_gres,
)

SUPPORTED_VERSIONS: tuple[str, ...] = get_args(SlurmApiVersion)
#: ``PATH`` given to a job whose environment names none (slurmrestd refuses a job without any environment).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

_NODE_BASE_STATES = ("IDLE", "MIXED", "ALLOCATED", "DOWN", "ERROR", "FUTURE", "UNKNOWN")
#: Node words that stand for a base state and a flag together (older ``node_state_string`` names).
_NODE_COMPOUND = {
    "DRAINED": ("IDLE", "DRAIN"),
    "DRAINING": ("ALLOCATED", "DRAIN"),
    "DRAIN": ("IDLE", "DRAIN"),
    "FAIL": ("ALLOCATED", "FAIL"),
    "FAILING": ("ALLOCATED", "FAIL"),
    "MAINT": ("IDLE", "MAINTENANCE"),
    "RESERVED": ("IDLE", "RESERVED"),
    "PLANNED": ("IDLE", "PLANNED"),
}


def _time(value: Any) -> int | None:
    """An epoch time as either version gives it: an integer (0: not set) or ``{set, infinite, number}``."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def _number(value: Any) -> int | None:
    """A count or limit: an integer, or ``{set, infinite, number}`` (unset or infinite: None)."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _node_state(words: list[str]) -> tuple[str, list[str]]:
    upper = [w.upper() for w in words if w]
    base = next((w for w in upper if w in _NODE_BASE_STATES), None)
    flags = [w for w in upper if w != base]
    if base is None:
        for word in upper:
            if word in _NODE_COMPOUND:
                base, flag = _NODE_COMPOUND[word]
                flags = [flag if w == word else w for w in flags]
                break
    return base or "UNKNOWN", list(dict.fromkeys(flags))


def environment_of(spec: SlurmJobSpec) -> dict[str, str]:
    """The job's environment as sent: the spec's, with ``PATH`` when it has none."""
    return {"PATH": DEFAULT_PATH, **spec.environment}


class Dialect:
    """One REST version's paths, bodies and decoding. ``version`` like ``v0.0.44``."""

    version: str = ""
    #: Whether ``POST /node/{name}`` (drain, resume) exists.
    node_updates = False

    def __init__(self, version: str):
        self.version = version

    # ------------------------------------------------------------------------------------------- paths
    @property
    def prefix(self) -> str:
        return f"/slurm/{self.version}"

    def submit_path(self) -> str:
        return f"{self.prefix}/job/submit"

    def job_path(self, job_id: int) -> str:
        return f"{self.prefix}/job/{int(job_id)}"

    def jobs_path(self) -> str:
        return f"{self.prefix}/jobs/"

    def nodes_path(self) -> str:
        return f"{self.prefix}/nodes/"

    def node_path(self, name: str) -> str:
        return f"{self.prefix}/node/{name}"

    def ping_path(self) -> str:
        return f"{self.prefix}/ping/"

    # ------------------------------------------------------------------------------------------- bodies
    def submit_body(self, spec: SlurmJobSpec) -> dict[str, Any]:
        raise NotImplementedError

    def update_body(self, *, comment: str) -> dict[str, Any]:
        """``POST /job/{id}``'s body to set the job's comment (both versions: a job description of that one field)."""
        return {"comment": comment}

    def cancel_params(self, signal: str | None) -> dict[str, str]:
        """``DELETE /job/{id}``'s query: none (cancel) or ``signal=NAME`` (only signal)."""
        return {"signal": signal} if signal else {}

    def node_update_body(self, *, state: str, reason: str | None) -> dict[str, Any]:
        raise SlurmUnsupported(f"slurmrestd {self.version} cannot update nodes (no POST /node/{{name}})")

    # ------------------------------------------------------------------------------------------- answers
    def decode_job(self, raw: dict[str, Any]) -> SlurmJob:
        raise NotImplementedError

    def decode_node(self, raw: dict[str, Any]) -> SlurmNode:
        raise NotImplementedError

    def _job(self, raw: dict[str, Any], exit_code: int | None, exit_signal: int | None) -> SlurmJob:
        state, flags = normalise_job_state(raw.get("job_state"))
        done = state in FINAL_STATES or state == "COMPLETING"
        if not done:
            exit_code = exit_signal = None
        return SlurmJob(
            job_id=int(raw["job_id"]),
            name=raw.get("name") or "",
            comment=raw.get("comment") or "",
            state=state,
            state_flags=flags,
            state_reason=raw.get("state_reason") or None,
            exit_code=exit_code,
            exit_signal=exit_signal,
            submit_time=_time(raw.get("submit_time")),
            start_time=_time(raw.get("start_time")),
            # a running job's end_time is its expected end (start + limit): only an ended job's is a fact
            end_time=_time(raw.get("end_time")) if done else None,
            nodes=expand_hostlist(raw.get("nodes")),
            batch_host=raw.get("batch_host") or None,
            partition=raw.get("partition") or None,
            user_name=raw.get("user_name") or None,
            time_limit_minutes=_number(raw.get("time_limit")),
        )


class V0038(Dialect):
    """Slurm 22.05's v0.0.38."""

    def jobs_path(self) -> str:
        return f"{self.prefix}/jobs"

    def nodes_path(self) -> str:
        return f"{self.prefix}/nodes"

    def ping_path(self) -> str:
        return f"{self.prefix}/ping"

    def submit_body(self, spec: SlurmJobSpec) -> dict[str, Any]:
        job: dict[str, Any] = {
            "name": spec.name,
            "tasks": spec.tasks,
            "nodes": spec.nodes,
            "environment": environment_of(spec),
        }
        if spec.partition:
            job["partition"] = spec.partition
        if spec.gres_per_node:
            job["gres"] = spec.gres_per_node
        if spec.node_list:
            job["nodelist"] = ",".join(spec.node_list)  # not in the document; the parser's 'w' option
        if spec.exclude_nodes:
            job["exclude_nodes"] = ",".join(spec.exclude_nodes)  # 'x'; "excluded_nodes" is a disabled key
        if spec.cpus_per_task:
            job["cpus_per_task"] = spec.cpus_per_task
        if spec.memory_per_node_mb:
            job["memory_per_node"] = spec.memory_per_node_mb
        if spec.time_limit_minutes:
            job["time_limit"] = spec.time_limit_minutes
        if spec.working_directory:
            job["current_working_directory"] = spec.working_directory
        if spec.standard_output:
            job["standard_output"] = spec.standard_output
        if spec.standard_error:
            job["standard_error"] = spec.standard_error
        if spec.comment:
            job["comment"] = spec.comment
        if spec.warning_signal and spec.warning_seconds:
            job["signal"] = f"{spec.warning_signal}@{spec.warning_seconds}"  # "B:" is refused by this parser
        if spec.requeue:
            job["requeue"] = True
        else:
            job["no_requeue"] = True  # "requeue": false leaves the job requeueable (seen live)
        return {"script": spec.script, "job": job}

    def decode_job(self, raw: dict[str, Any]) -> SlurmJob:
        exit_code, exit_signal = decode_wait_status(_number(raw.get("exit_code")))
        return self._job(raw, exit_code, exit_signal)

    def decode_node(self, raw: dict[str, Any]) -> SlurmNode:
        state, flags = _node_state([str(raw.get("state") or ""), *(raw.get("state_flags") or [])])
        return _node(raw, state, flags)


class V0041Plus(Dialect):
    """Slurm 24.05-25.11's v0.0.41-v0.0.44 (the same shapes for everything the provider uses)."""

    node_updates = True

    def submit_body(self, spec: SlurmJobSpec) -> dict[str, Any]:
        job: dict[str, Any] = {
            "name": spec.name,
            "tasks": spec.tasks,
            "minimum_nodes": spec.nodes,
            "maximum_nodes": spec.nodes,
            "environment": [f"{k}={v}" for k, v in environment_of(spec).items()],
            "requeue": spec.requeue,
        }
        if spec.partition:
            job["partition"] = spec.partition
        if spec.gres_per_node:
            job["tres_per_node"] = f"gres/{spec.gres_per_node}"
        if spec.node_list:
            job["required_nodes"] = list(spec.node_list)
        if spec.exclude_nodes:
            job["excluded_nodes"] = list(spec.exclude_nodes)
        if spec.cpus_per_task:
            job["cpus_per_task"] = spec.cpus_per_task
        if spec.memory_per_node_mb:
            job["memory_per_node"] = _set(spec.memory_per_node_mb)
        if spec.time_limit_minutes:
            job["time_limit"] = _set(spec.time_limit_minutes)
        if spec.working_directory:
            job["current_working_directory"] = spec.working_directory
        if spec.standard_output:
            job["standard_output"] = spec.standard_output
        if spec.standard_error:
            job["standard_error"] = spec.standard_error
        if spec.comment:
            job["comment"] = spec.comment
        if spec.warning_signal and spec.warning_seconds:
            job["kill_warning_signal"] = spec.warning_signal
            job["kill_warning_delay"] = _set(spec.warning_seconds)
            job["kill_warning_flags"] = ["BATCH_JOB"]  # the batch script too, as sbatch --signal=B:...
        return {"script": spec.script, "job": job}

    def cancel_params(self, signal: str | None) -> dict[str, str]:
        # FULL_JOB: the batch script as well as the steps, as v0.0.38's DELETE ?signal= does (seen live)
        return {"signal": signal, "flags": "FULL_JOB"} if signal else {}

    def node_update_body(self, *, state: str, reason: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"state": [state]}
        if reason:
            body["reason"] = reason
        return body

    def decode_job(self, raw: dict[str, Any]) -> SlurmJob:
        exit_code, exit_signal = _exit_struct(raw.get("exit_code"))
        return self._job(raw, exit_code, exit_signal)

    def decode_node(self, raw: dict[str, Any]) -> SlurmNode:
        state, flags = _node_state([str(s) for s in raw.get("state") or []])
        return _node(raw, state, flags)


def _set(number: int) -> dict[str, Any]:
    return {"set": True, "infinite": False, "number": number}


def _exit_struct(value: Any) -> tuple[int | None, int | None]:
    """v0.0.41+'s ``{status: [...], return_code: {...}, signal: {id: {...}, name}}`` -> (exit status, signal).
    ``SIGNALED``/``CORE_DUMPED``: the signal; ``SUCCESS``/``ERROR``: the return code; ``PENDING``/``INVALID``:
    neither. A bare integer (an older shape) is a wait status."""
    if isinstance(value, int) and not isinstance(value, bool):
        return decode_wait_status(value)
    if not isinstance(value, dict):
        return None, None
    status = {str(s).upper() for s in value.get("status") or []}
    signal = _number((value.get("signal") or {}).get("id"))
    code = _number(value.get("return_code"))
    if status & {"SIGNALED", "CORE_DUMPED"}:
        return None, signal
    if status & {"SUCCESS", "ERROR"} or (not status and code is not None):
        return code, None
    return None, None


def _node(raw: dict[str, Any], state: str, flags: list[str]) -> SlurmNode:
    return SlurmNode(
        name=str(raw["name"]),
        state=state,
        flags=flags,
        reason=raw.get("reason") or "",
        gres=parse_gres(raw.get("gres")),
        gres_used=parse_gres(raw.get("gres_used")),
        cpus=_number(raw.get("cpus")),
        alloc_cpus=_number(raw.get("alloc_cpus")),
        partitions=list(raw.get("partitions") or []),
    )


def dialect(version: str) -> Dialect:
    """The adapter of ``version`` (one of :data:`SUPPORTED_VERSIONS`); ValueError otherwise."""
    if version == "v0.0.38":
        return V0038(version)
    if version in SUPPORTED_VERSIONS:
        return V0041Plus(version)
    raise ValueError(f"unsupported slurmrestd version {version!r}; supported: {', '.join(SUPPORTED_VERSIONS)}")
