"""The API's rule for query parameters, in one place (ArmRoute, api/routing.py, and the MCP endpoint follow it): a
parameter the operation does not declare is refused — a misspelt filter (``?submitedBy=``) must not answer as if it
were absent — and so is one given twice (``?hours=1&hours=2``: which one would count?). Pure: no web framework."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from itl_accelerator.errors import InvalidParameter


def query_refusal(given: Iterable[tuple[str, str]], known: Iterable[str]) -> InvalidParameter | None:
    """The 400 ``InvalidParameter`` naming the first parameter of ``given`` (name, value pairs, as sent) that
    ``known`` does not hold, or else the first given more than once; None when every one is known and given once."""
    names = [name for name, _ in given]
    allowed = set(known)
    unknown = sorted(set(names) - allowed)
    if unknown:
        listed = ", ".join(sorted(allowed)) or "none"
        return InvalidParameter(
            f"The query parameter '{unknown[0][:64]}' is not known here (known: {listed}).", target=unknown[0][:64]
        )
    repeated = sorted(name for name, n in Counter(names).items() if n > 1)
    if repeated:
        return InvalidParameter(
            f"The query parameter '{repeated[0]}' is given more than once; give it once.", target=repeated[0]
        )
    return None
