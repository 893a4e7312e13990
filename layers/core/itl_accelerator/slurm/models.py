"""What the provider needs of Slurm's jobs and nodes, the same whatever REST version a cluster serves
(versions.py decodes each version into these).

Sources: Slurm's job states (slurm/slurm.h ``enum job_states`` and its flags, as ``job_state_string`` names them),
wait statuses (POSIX ``waitpid``: the exit status in bits 8-15, the terminating signal in bits 0-6, 0x80 a core
dump), gres strings as slurmctld prints them (``gpu:h100:8``, ``gpu:h100:2(IDX:0-1)``). Checked live against
Debian's Slurm 22.05 (tests/slurm/) and against the published schemas of v0.0.41-v0.0.44
(tests/unit/test_slurm_contract.py).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from itl_accelerator.settings import ENV_NAME

#: Slurm's base job states. ``COMPLETING`` is a flag in Slurm (a job whose processes are still being ended on its
#: nodes, which it still holds); it is reported as a state, as squeue and v0.0.38 report it.
JobState = Literal[
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "COMPLETING",
    "COMPLETED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "CANCELLED",
    "BOOT_FAIL",
    "DEADLINE",
]
BASE_STATES: frozenset[str] = frozenset(JobState.__args__)  # type: ignore[attr-defined]
#: The states a job never leaves (unless it is requeued, which makes it PENDING again under the same id).
FINAL_STATES: frozenset[str] = frozenset(
    {"COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "CANCELLED", "BOOT_FAIL", "DEADLINE"}
)

#: Slurm's state flags, and the base state each stands for when a version names the flag *instead of* the base
#: (v0.0.38's ``job_state`` is one word, and ``job_state_string`` prefers a flag's name: ``CONFIGURING`` for a job
#: whose nodes boot, ``REQUEUED`` for one going back to the queue...). From v0.0.40 ``job_state`` is a list with the
#: base state first, so the flags there only add to it.
_FLAG_BASE = {
    "COMPLETING": "COMPLETING",
    "STAGE_OUT": "COMPLETING",
    "CONFIGURING": "RUNNING",
    "POWER_UP_NODE": "RUNNING",
    "RESIZING": "RUNNING",
    "STOPPED": "RUNNING",
    "SIGNALING": "RUNNING",
    "REQUEUED": "PENDING",
    "REQUEUE_HOLD": "PENDING",
    "REQUEUE_FED": "PENDING",
    "SPECIAL_EXIT": "PENDING",
    "RESV_DEL_HOLD": "PENDING",
    "EXPEDITING": "PENDING",
    "REVOKED": "CANCELLED",
    "LAUNCH_FAILED": "FAILED",
    "RECONFIG_FAIL": "FAILED",
    "COMPLETE": "COMPLETED",
    "OOM": "OUT_OF_MEMORY",
}


def normalise_job_state(raw: str | list[str] | None) -> tuple[JobState, list[str]]:
    """Slurm's job state as one base word, and the other words given (flags, upper case). ``raw`` is v0.0.38's
    string (``"CANCELLED"``, ``"COMPLETING"``; squeue's ``"CANCELLED by 0"`` too) or v0.0.40+'s list
    (``["RUNNING", "COMPLETING"]``: base first, then flags). A job still completing is ``COMPLETING`` whatever its
    base (it holds its nodes until then). Raises ValueError for a state Slurm does not have."""
    words = [raw] if isinstance(raw, str) else list(raw or [])
    words = [w.split(" ", 1)[0].strip().upper() for w in words if w and w.strip()]
    if not words:
        raise ValueError("a job without a state")
    if "COMPLETING" in words:
        return "COMPLETING", [w for w in words if w != "COMPLETING"]
    for word in words:
        if word in BASE_STATES:
            return word, [w for w in words if w != word]  # type: ignore[return-value]
    for word in words:
        if word in _FLAG_BASE:
            return _FLAG_BASE[word], words  # type: ignore[return-value]
    raise ValueError(f"unknown Slurm job state {raw!r}")


def decode_wait_status(raw: int | None) -> tuple[int | None, int | None]:
    """A raw wait status as Slurm v0.0.38 reports ``exit_code`` -> (exit status, terminating signal): exactly one
    is set. ``768`` -> (3, None): exited 3; ``36608`` -> (143, None): exited 143 (a shell whose child SIGTERM
    killed); ``15`` -> (None, 15): killed by SIGTERM (a TIMEOUT or a cancel); ``0`` -> (0, None); None -> (None,
    None). A core-dump bit (0x80) is dropped."""
    if raw is None:
        return None, None
    if raw < 0:
        return raw, None  # not a wait status (Slurm's NO_VAL sentinels come as None; keep what else came)
    signal = raw & 0x7F
    if signal:
        return None, signal
    return (raw >> 8) & 0xFF, None


_GRES_ITEM = re.compile(r"^(?P<name>[^:()]+)(?::(?P<type>[^:()]+))?(?::(?P<count>\d+))?(?:\((?P<detail>[^)]*)\))?$")


def parse_gres(text: str | None) -> dict[str, int]:
    """A gres string -> count per ``name:type`` (``name`` when untyped): ``"gpu:h100:8"`` -> ``{"gpu:h100": 8}``;
    ``"gpu:h100:2(IDX:0-1)"`` -> ``{"gpu:h100": 2}``; ``"gpu:8,gpu:a100:2(S:0)"`` -> ``{"gpu": 8, "gpu:a100":
    2}``; ``"gpu"`` -> ``{"gpu": 1}``; ``""``/``"(null)"``/``"N/A"`` -> ``{}``. Slurm's ``gres/`` prefix (TRES form:
    ``gres/gpu:h100=8`` or ``gres:gpu:8``) is accepted too."""
    gres: dict[str, int] = {}
    value = (text or "").strip()
    if value.lower() in {"", "(null)", "n/a", "none"}:
        return gres
    for item in _split_outside_parens(value):
        item = item.strip()
        if not item:
            continue
        item = re.sub(r"^gres[/:]", "", item).replace("=", ":")
        match = _GRES_ITEM.match(item)
        if not match:
            # a typed gres whose type is all digits is ambiguous with a count; Slurm forbids such types
            raise ValueError(f"not a gres: {item!r}")
        name, kind, count = match.group("name"), match.group("type"), match.group("count")
        if kind is not None and count is None and kind.isdigit():
            kind, count = None, kind
        key = f"{name}:{kind}" if kind else name
        gres[key] = gres.get(key, 0) + (int(count) if count is not None else 1)
    return gres


def _split_outside_parens(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


class SlurmJob(BaseModel):
    """A Slurm job as slurmctld reports it.

    ``state``: the base state (:data:`JobState`), ``state_flags`` the other words Slurm gave (``REQUEUED``,
    ``SIGNALING``...); ``state_reason``: why it waits or ended (``None``, ``Priority``, ``Resources``,
    ``NonZeroExitCode``, ``TimeLimit``...). ``exit_code``: the batch script's exit status once it ended by
    exiting (0-255; None while it runs, or when a signal killed it); ``exit_signal``: the signal that killed it
    (15 for a TIMEOUT's or a cancel's SIGTERM, 9 for SIGKILL). Times are epoch seconds (UTC), None when not
    (yet) set: ``end_time`` is None until the job ended (v0.0.38 gives a running job's expected end: dropped).
    ``nodes``: the hosts it holds or held, expanded (``n[1-2]`` -> ``["n1", "n2"]``); ``batch_host`` where its
    script runs. ``update_time``: when slurmctld last changed the job, None when the REST version gives no such
    time (none of v0.0.38-v0.0.44 does: see :attr:`last_event_time`)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    job_id: int
    name: str = ""
    comment: str = ""
    state: JobState
    state_flags: list[str] = Field(default_factory=list)
    state_reason: str | None = None
    exit_code: int | None = None
    exit_signal: int | None = None
    submit_time: int | None = None
    start_time: int | None = None
    end_time: int | None = None
    nodes: list[str] = Field(default_factory=list)
    batch_host: str | None = None
    partition: str | None = None
    user_name: str | None = None
    time_limit_minutes: int | None = None
    update_time: int | None = None

    @property
    def ended(self) -> bool:
        """Whether it reached a final state (its nodes may still be completing: see ``COMPLETING``)."""
        return self.state in FINAL_STATES

    @property
    def last_event_time(self) -> int | None:
        """The latest of its submit, start and end times: when it last changed state, as far as the job record
        tells (a change of comment or of a waiting job's reason leaves no time)."""
        times = [t for t in (self.submit_time, self.start_time, self.end_time) if t]
        return max(times) if times else None


class SlurmNode(BaseModel):
    """A node as slurmctld reports it. ``state``: its base state, upper case (``IDLE``, ``MIXED``, ``ALLOCATED``,
    ``DOWN``, ``ERROR``, ``FUTURE``, ``UNKNOWN``); ``flags``: the others (``DRAIN``, ``NOT_RESPONDING``,
    ``COMPLETING``, ``RESERVED``, ``MAINTENANCE``...); ``reason``: why it is down or drained (empty otherwise).
    ``gres``: its generic resources per ``name:type`` and count (``{"gpu:h100": 8}``), ``gres_used`` those in use
    now, the same way."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str
    state: str
    flags: list[str] = Field(default_factory=list)
    reason: str = ""
    gres: dict[str, int] = Field(default_factory=dict)
    gres_used: dict[str, int] = Field(default_factory=dict)
    cpus: int | None = None
    alloc_cpus: int | None = None
    partitions: list[str] = Field(default_factory=list)

    @property
    def drained(self) -> bool:
        """Drained or draining: it takes no new job (``DRAIN`` flag)."""
        return "DRAIN" in self.flags

    @property
    def available(self) -> bool:
        """Whether it may take a job now: up (idle, mixed or allocated), neither drained nor unresponsive."""
        return self.state in {"IDLE", "MIXED", "ALLOCATED"} and not {
            "DRAIN",
            "NOT_RESPONDING",
            "FAIL",
            "MAINTENANCE",
        } & set(self.flags)

    def gpus(self, *, used: bool = False) -> int:
        """Its GPUs (all types), or those in use."""
        return sum(n for key, n in (self.gres_used if used else self.gres).items() if key.split(":")[0] == "gpu")


_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_GRES_SPEC = re.compile(r"^[a-z][a-z0-9_]*(?::[A-Za-z0-9_.-]+)?:\d+$")


class SlurmJobSpec(BaseModel):
    """A batch job to submit (``POST .../job/submit``), built by the provider, never by a consumer.

    - ``name``: the job's name (``squeue``'s NAME) and its marker: the provider names each job after its operation
      id (``itl-<operationId>``), so ``SlurmRestClient.submit`` finds a job whose submit answer was lost by it
      (docs/SLURM.md "Findings"); ``comment``: free text, which the job or the provider may change later
      (``set_comment``: e.g. the job's endpoint), hence no marker.
    - ``script``: the batch script, starting with ``#!``; ``environment``: its variables (slurmrestd requires at
      least one; the client adds ``PATH`` when it is missing); ``working_directory``: where it runs (must exist on
      the node); ``standard_output``/``standard_error``: file paths on the node (``%j`` is the job id); None:
      Slurm's default ``slurm-%j.out`` in the working directory.
    - ``partition``; ``nodes``: how many nodes (each gets ``gres_per_node``); ``node_list``: exactly these nodes
      (``nodelist``/``required_nodes``; with ``nodes`` equal to their count); ``exclude_nodes``: never these (the
      provider's own cordon, where the REST version cannot drain a node).
    - ``gres_per_node``: ``gpu:8`` or typed ``gpu:h100:8`` (v0.0.38 ``gres``, v0.0.41+ ``tres_per_node``
      ``gres/gpu:8``); ``tasks``, ``cpus_per_task``, ``memory_per_node_mb``: what else each node gives it.
    - ``time_limit_minutes``: Slurm ends it as TIMEOUT past this (up to ~30-60 s late); None: the partition's.
    - ``warning_signal``/``warning_seconds``: ``--signal=SIG@N``: SIG that many seconds before the time limit,
      to the batch script too on v0.0.41+ (``kill_warning_flags: BATCH_JOB``); v0.0.38's REST parser refuses
      ``B:`` (live), so there only job steps (``srun``) get it. Slurm's resolution makes it up to 60 s early.
      Not a grace period after a cancel: see ``SlurmRestClient.cancel``.
    - ``requeue``: whether Slurm may put it back in the queue itself (node failure, preemption); False by default:
      the provider retries with a job of its own (v0.0.38: sent as ``no_requeue``: ``requeue: false`` is ignored
      there, seen live).
    """

    # its environment holds secret values: a refusal names the field, never echoes what was given
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    name: str = Field(min_length=1, max_length=200)
    script: str = Field(min_length=3)
    partition: str | None = None
    nodes: int = Field(default=1, ge=1, le=10_000)
    node_list: list[str] = Field(default_factory=list)
    exclude_nodes: list[str] = Field(default_factory=list)
    gres_per_node: str | None = None
    tasks: int = Field(default=1, ge=1)
    cpus_per_task: int | None = Field(default=None, ge=1)
    memory_per_node_mb: int | None = Field(default=None, ge=1)
    time_limit_minutes: int | None = Field(default=None, ge=1)
    environment: dict[str, str] = Field(default_factory=dict)
    working_directory: str | None = None
    standard_output: str | None = None
    standard_error: str | None = None
    comment: str = Field(default="", max_length=1000)
    warning_signal: str | None = None
    warning_seconds: int | None = Field(default=None, ge=1, le=65535)
    requeue: bool = False

    @field_validator("script")
    @classmethod
    def _shebang(cls, value: str) -> str:
        if not value.startswith("#!"):
            raise ValueError("a batch script starts with #! (Slurm refuses it otherwise)")
        return value

    @field_validator("node_list", "exclude_nodes")
    @classmethod
    def _node_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _NAME.match(name):
                raise ValueError(f"not a node name: {name!r}")
        return value

    @field_validator("gres_per_node")
    @classmethod
    def _gres(cls, value: str | None) -> str | None:
        if value is not None and not _GRES_SPEC.match(value):
            raise ValueError("gres_per_node is name[:type]:count, e.g. gpu:8 or gpu:h100:8")
        return value

    @field_validator("warning_signal")
    @classmethod
    def _signal(cls, value: str | None) -> str | None:
        if value is not None:
            value = value.upper().removeprefix("SIG")
            if value not in SIGNALS:
                raise ValueError(f"warning_signal is one of {sorted(SIGNALS)}")
        return value

    @field_validator("environment")
    @classmethod
    def _environment(cls, value: dict[str, str]) -> dict[str, str]:
        for key in value:
            if not ENV_NAME.match(key):
                raise ValueError(f"not an environment variable name: {key!r}")
        return value


#: The signals slurmrestd v0.0.38 takes by name (its ``v0.0.38_signal`` enum), the set the client sends.
SIGNALS = frozenset(
    {
        "HUP",
        "INT",
        "QUIT",
        "ABRT",
        "KILL",
        "ALRM",
        "TERM",
        "USR1",
        "USR2",
        "URG",
        "CONT",
        "STOP",
        "TSTP",
        "TTIN",
        "TTOU",
    }
)
