"""What a Lambda execution environment builds once and keeps for its later invocations (SnapStart: nothing is built
at import time, only on the first invocation that needs it)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from itl_accelerator.wiring import Wiring

_wirings: dict[str, Wiring] = {}
_lock = threading.Lock()


def wiring(owner: str) -> Wiring:
    """The :class:`Wiring` of ``owner`` - a handler module's ``__name__`` where the module is one function, the
    invocation's ``context.function_name`` where one module serves several (the workflow steps): settings from the
    environment, AWS clients made on first use. One per function, as in AWS: where several run in one process (the
    local runtime, on threads of their own), none shares its services' state (or its DGX client) with another.
    ``itl_accelerator.wiring`` is imported on the first call, so a handler module's import stays light."""
    with _lock:
        if owner not in _wirings:
            from itl_accelerator.wiring import Wiring

            _wirings[owner] = Wiring.build()
        return _wirings[owner]


def forget() -> None:
    """Drop every wiring, so each function builds its own again from the environment at its next invocation (what a
    new execution environment does; tests and benchmarks that change the environment call it)."""
    with _lock:
        _wirings.clear()
