"""What a Lambda execution environment builds once and keeps for its later invocations (SnapStart: nothing is built
at import time, only on the first invocation that needs it)."""

from __future__ import annotations

import threading

from itl_accelerator.wiring import Wiring

_wirings: dict[str, Wiring] = {}
_lock = threading.Lock()


def wiring(owner: str) -> Wiring:
    """The :class:`Wiring` of the handler module ``owner`` (its ``__name__``): settings from the environment, AWS
    clients made on first use. One per module, as each module is its own function in AWS: where several run in one
    process (the local runtime, on threads of their own), none shares its services' state with another."""
    with _lock:
        if owner not in _wirings:
            _wirings[owner] = Wiring.build()
        return _wirings[owner]
