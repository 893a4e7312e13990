"""Slurm host lists: ``n[1-2]`` -> ``["n1", "n2"]``.

The syntax is Slurm's (src/common/hostlist.c, as ``scontrol show hostnames`` expands it): comma-separated items;
an item may hold bracketed ranges, each a comma-separated list of numbers and ``lo-hi`` ranges, whose digits keep
the width written (``n[01-03]`` -> ``n01 n02 n03``); several brackets in one item multiply out, the first varying
slowest (``a[1-2]b[3-4]`` -> ``a1b3 a1b4 a2b3 a2b4``). Order and duplicates are kept as written. Slurm's empty
answers (``""``, ``"(null)"``, ``"None assigned"``) are no hosts.
"""

from __future__ import annotations

import itertools
import re

#: The most hosts one expression may expand to (a typo such as ``n[1-999999999]`` must not exhaust memory).
MAX_HOSTS = 65536

_EMPTY = {"", "(null)", "none assigned", "n/a"}
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


class HostlistError(ValueError):
    """Not a host list."""


def expand_hostlist(expression: str | None) -> list[str]:
    """Every host of ``expression`` in order. Raises :class:`HostlistError` when it is malformed (an unclosed
    bracket, a range that runs backwards, a bracket of no numbers) or names more than :data:`MAX_HOSTS` hosts."""
    text = (expression or "").strip()
    if text.lower() in _EMPTY:
        return []
    hosts: list[str] = []
    for item in _split_top_level(text):
        if not item:
            continue
        hosts += _expand_item(item)
        if len(hosts) > MAX_HOSTS:
            raise HostlistError(f"host list names more than {MAX_HOSTS} hosts")
    return hosts


def _split_top_level(text: str) -> list[str]:
    """Split on commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested brackets in host list {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in host list {text!r}")
        elif char == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    if depth:
        raise HostlistError(f"unclosed '[' in host list {text!r}")
    items.append(text[start:].strip())
    return items


def _expand_item(item: str) -> list[str]:
    # literal parts and bracket contents alternate: "a[1-2]b[3]" -> ["a", "1-2", "b", "3", ""]
    parts = re.split(r"\[([^\]]*)\]", item)
    choices: list[list[str]] = []
    for index, part in enumerate(parts):
        choices.append(_numbers(part, item) if index % 2 else [part])
    count = 1
    for choice in choices:
        count *= len(choice)
        if count > MAX_HOSTS:
            raise HostlistError(f"host list names more than {MAX_HOSTS} hosts")
    return ["".join(combination) for combination in itertools.product(*choices)]


def _numbers(ranges: str, item: str) -> list[str]:
    out: list[str] = []
    for piece in ranges.split(","):
        match = _RANGE.match(piece.strip())
        if not match:
            raise HostlistError(f"bad range {piece!r} in host list item {item!r}")
        low_text, high_text = match.group(1), match.group(2)
        if high_text is None:
            out.append(low_text)
            continue
        low, high = int(low_text), int(high_text)
        if high < low:
            raise HostlistError(f"range {piece!r} runs backwards in {item!r}")
        if high - low + 1 > MAX_HOSTS:
            raise HostlistError(f"host list names more than {MAX_HOSTS} hosts")
        width = len(low_text) if low_text.startswith("0") and len(low_text) > 1 else 0
        out += [str(n).zfill(width) for n in range(low, high + 1)]
    return out
