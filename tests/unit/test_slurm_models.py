"""The Slurm client's pure parts: host lists, wait statuses, job states, gres strings, the job spec's rules."""

from __future__ import annotations

import hostlist  # python-hostlist: a second opinion on Slurm's host-list syntax
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from itl_accelerator.slurm import HostlistError, SlurmJobSpec, expand_hostlist
from itl_accelerator.slurm.models import decode_wait_status, normalise_job_state, parse_gres


@pytest.mark.parametrize(
    ("expression", "hosts"),
    [
        ("n[1-2]", ["n1", "n2"]),
        ("n1", ["n1"]),
        ("n1,n2", ["n1", "n2"]),
        ("n[01-03]", ["n01", "n02", "n03"]),
        ("n[8-11]", ["n8", "n9", "n10", "n11"]),
        ("n[1-2,5,7-8]", ["n1", "n2", "n5", "n7", "n8"]),
        ("gpu-[1-2],cpu-3", ["gpu-1", "gpu-2", "cpu-3"]),
        ("a[1-2]b[3-4]", ["a1b3", "a1b4", "a2b3", "a2b4"]),
        ("rack[1-2]-node[01-02]", ["rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"]),
        ("", []),
        (None, []),
        ("(null)", []),
        ("None assigned", []),
    ],
)
def test_host_lists_expand_as_slurm_writes_them(expression: str | None, hosts: list[str]) -> None:
    assert expand_hostlist(expression) == hosts


@pytest.mark.parametrize("bad", ["n[1-2", "n1-2]", "n[2-1]", "n[a-b]", "n[[1]]", "n[]", "n[1-100000]"])
def test_malformed_host_lists_are_refused(bad: str) -> None:
    with pytest.raises(HostlistError):
        expand_hostlist(bad)


_prefix = st.from_regex(r"[a-z][a-z-]{0,5}", fullmatch=True)
_range = st.tuples(st.integers(0, 120), st.integers(0, 30), st.integers(1, 3)).map(
    lambda t: f"{t[0]:0{t[2]}d}-{t[0] + t[1]:0{t[2]}d}" if t[1] else f"{t[0]:0{t[2]}d}"
)
_item = st.tuples(_prefix, st.lists(_range, min_size=1, max_size=3), st.sampled_from(["", "x", "-a"])).map(
    lambda t: f"{t[0]}[{','.join(t[1])}]{t[2]}"
)


@given(st.lists(_item, min_size=1, max_size=3))
def test_the_expander_agrees_with_python_hostlist(items: list[str]) -> None:
    expression = ",".join(items)
    assert expand_hostlist(expression) == hostlist.expand_hostlist(expression, allow_duplicates=True, sort=False)


@pytest.mark.parametrize(
    ("raw", "decoded"),
    [
        (0, (0, None)),
        (768, (3, None)),  # exit 3
        (36608, (143, None)),  # a shell whose child SIGTERM killed: exit 143
        (15, (None, 15)),  # killed by SIGTERM: a TIMEOUT or a cancel
        (9, (None, 9)),
        (0x80 | 11, (None, 11)),  # SIGSEGV with a core dump
        (255 << 8, (255, None)),
        (None, (None, None)),
    ],
)
def test_wait_statuses_decode_to_an_exit_status_or_a_signal(
    raw: int | None, decoded: tuple[int | None, int | None]
) -> None:
    assert decode_wait_status(raw) == decoded


@pytest.mark.parametrize(
    ("raw", "state", "flags"),
    [
        ("PENDING", "PENDING", []),
        ("CANCELLED", "CANCELLED", []),
        ("CANCELLED by 0", "CANCELLED", []),
        ("COMPLETING", "COMPLETING", []),
        ("CONFIGURING", "RUNNING", ["CONFIGURING"]),
        ("REQUEUED", "PENDING", ["REQUEUED"]),
        ("OOM", "OUT_OF_MEMORY", ["OOM"]),
        (["RUNNING"], "RUNNING", []),
        (["FAILED", "COMPLETING"], "COMPLETING", ["FAILED"]),
        (["PENDING", "REQUEUED"], "PENDING", ["REQUEUED"]),
        (["RUNNING", "SIGNALING"], "RUNNING", ["SIGNALING"]),
        (["TIMEOUT"], "TIMEOUT", []),
        (["NODE_FAIL"], "NODE_FAIL", []),
        (["OUT_OF_MEMORY"], "OUT_OF_MEMORY", []),
        (["PREEMPTED"], "PREEMPTED", []),
        (["BOOT_FAIL"], "BOOT_FAIL", []),
        (["DEADLINE"], "DEADLINE", []),
        (["SUSPENDED"], "SUSPENDED", []),
    ],
)
def test_job_states_normalise_to_slurms_base_words(raw: str | list[str], state: str, flags: list[str]) -> None:
    assert normalise_job_state(raw) == (state, flags)


@pytest.mark.parametrize("raw", [None, [], "", "SLEEPING"])
def test_an_unknown_or_missing_job_state_is_an_error(raw: str | list[str] | None) -> None:
    with pytest.raises(ValueError, match="state"):
        normalise_job_state(raw)


@pytest.mark.parametrize(
    ("text", "gres"),
    [
        ("gpu:h100:8", {"gpu:h100": 8}),
        ("gpu:h100:8(S:0-1)", {"gpu:h100": 8}),
        ("gpu:h100:2(IDX:0-1)", {"gpu:h100": 2}),
        ("gpu:h100:3(IDX:0-1,4)", {"gpu:h100": 3}),
        ("gpu:h100:0(IDX:N/A)", {"gpu:h100": 0}),
        ("gpu:8", {"gpu": 8}),
        ("gpu", {"gpu": 1}),
        ("gpu:a100:4,gpu:h100:4", {"gpu:a100": 4, "gpu:h100": 4}),
        ("gres/gpu:h100=2", {"gpu:h100": 2}),
        ("gres:gpu:2", {"gpu": 2}),
        ("", {}),
        ("(null)", {}),
        ("N/A", {}),
        (None, {}),
    ],
)
def test_gres_strings_parse_to_counts_per_type(text: str | None, gres: dict[str, int]) -> None:
    assert parse_gres(text) == gres


def test_a_job_spec_refuses_what_slurm_would() -> None:
    good = {"name": "j", "script": "#!/bin/bash\ntrue\n"}
    SlurmJobSpec(**good, gres_per_node="gpu:h100:8", node_list=["n1"], warning_signal="SIGUSR1", warning_seconds=60)
    assert SlurmJobSpec(**good, warning_signal="sigterm").warning_signal == "TERM"
    for bad in (
        {"script": "true"},  # no #!
        {"gres_per_node": "8 gpus"},
        {"node_list": ["n1;rm"]},
        {"warning_signal": "BOGUS"},
        {"environment": {"1A": "x"}},
        {"nodes": 0},
        {"time_limit_minutes": 0},
        {"unknown": 1},
    ):
        with pytest.raises(ValidationError):
            SlurmJobSpec(**{**good, **bad})  # type: ignore[arg-type]
