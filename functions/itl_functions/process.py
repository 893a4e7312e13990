"""What a Lambda execution environment builds once and keeps for its later invocations (SnapStart: nothing is built
at import time, only on the first invocation that needs it)."""

from __future__ import annotations

from functools import cache

from itl_accelerator.wiring import Wiring


@cache
def wiring() -> Wiring:
    """The environment's :class:`Wiring` (settings from its environment variables, AWS clients made on first use)."""
    return Wiring.build()
