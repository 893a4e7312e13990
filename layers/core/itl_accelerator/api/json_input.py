"""Strict JSON for request bodies: RFC 8259 with the I-JSON profile (RFC 7493), and the store's limits.

What ``json.loads`` lets through and this refuses (400 ``InvalidRequestContent`` naming the rule), so nothing the
API accepts can fail later when it is stored, rendered, listed or audited:

- ``NaN``, ``Infinity``, ``-Infinity`` and numbers that overflow to them (``1e309``): not JSON (RFC 8259 §6);
- integers outside ±(2**53 - 1): I-JSON §2.2 (beyond them clients silently lose precision);
- duplicate member names in one object: I-JSON §2.3;
- strings with unpaired surrogates (``"\\ud800"``): I-JSON §2.1 (they cannot be encoded as UTF-8);
- nesting deeper than :data:`MAX_DEPTH` objects/arrays: DynamoDB's own limit for nested attributes is 32, and
  every recursive step (merge patch, diffs, rendering) stays bounded;
- bytes that are not UTF-8 (RFC 8259 §8.1).
"""

from __future__ import annotations

import json
import math
from typing import Any

from itl_accelerator.errors import BadRequest

#: Deepest nesting of objects and arrays a body may have.
MAX_DEPTH = 32
#: I-JSON's interoperable integer range.
MAX_SAFE_INTEGER = 2**53 - 1


class _Refused:
    """Stands where the parser met something this module refuses; :func:`_check_tree` reports it with its path."""

    def __init__(self, rule: str):
        self.rule = rule


class _DuplicateMembers(dict):  # type: ignore[type-arg]
    """An object whose member names repeat (``duplicate`` is the first repeated name)."""

    duplicate: str = ""


def _refuse(rule: str, path: list[str | int]) -> BadRequest:
    target = ".".join(str(p) for p in path) or None
    message = f"The request content is not valid JSON{f' at {target!r}' if target else ''}: {rule}."
    return BadRequest(
        message, target=target, details=[{"code": "InvalidRequestContent", "target": target, "message": rule}]
    )


def _constant(name: str) -> _Refused:
    return _Refused(f"'{name}' is not a JSON number (RFC 8259 §6)")


def _float(text: str) -> float | _Refused:
    value = float(text)
    if not math.isfinite(value):
        return _Refused(f"the number {text[:40]} is out of range (RFC 8259 §6)")
    return value


def _int(text: str) -> int | _Refused:
    digits = text.lstrip("-")
    if len(digits) > 16 or abs(int(text)) > MAX_SAFE_INTEGER:
        shown = text if len(digits) <= 40 else text[:40] + "…"
        return _Refused(f"the integer {shown} is outside ±(2^53-1) (I-JSON, RFC 7493 §2.2)")
    return int(text)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result and not isinstance(result, _DuplicateMembers):
            result = _DuplicateMembers(result)
            result.duplicate = key
        result[key] = value
    return result


def _check_tree(value: Any) -> None:
    """Refusals, depth and unpaired surrogates, iteratively (no recursion limit to hit); the first problem found
    is raised with its JSON path as ``target``."""
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Refused):
            raise _refuse(node.rule, path)
        if isinstance(node, str):
            _check_string(node, path)
            continue
        if not isinstance(node, dict | list):
            continue
        if len(path) >= MAX_DEPTH:
            raise _refuse(f"objects and arrays are nested deeper than {MAX_DEPTH} levels", path)
        if isinstance(node, _DuplicateMembers):
            raise _refuse(
                f"the member name '{node.duplicate[:64]}' appears twice in one object (I-JSON, RFC 7493 §2.3)", path
            )
        if isinstance(node, dict):
            for key, item in node.items():
                _check_string(key, [*path, key])
                stack.append((item, [*path, key]))
        else:
            stack.extend((item, [*path, index]) for index, item in enumerate(node))


def _check_string(value: str, path: list[str | int]) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _refuse("a string holds an unpaired surrogate (I-JSON, RFC 7493 §2.1)", path) from None


def parse_json_body(raw: bytes) -> Any:
    """Parse a request body under the rules of this module. Raises :class:`BadRequest` (400
    ``InvalidRequestContent``) with a message naming the rule that failed and, where it has one, the JSON path
    of the offending value as ``target``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _refuse("the body is not UTF-8 (RFC 8259 §8.1)", []) from None
    try:
        value = json.loads(
            text, parse_constant=_constant, parse_float=_float, parse_int=_int, object_pairs_hook=_object
        )
    except json.JSONDecodeError as exc:
        raise _refuse(f"{exc.msg} at line {exc.lineno} column {exc.colno}", []) from None
    except RecursionError:
        raise _refuse(f"objects and arrays are nested deeper than {MAX_DEPTH} levels", []) from None
    _check_tree(value)
    return value
