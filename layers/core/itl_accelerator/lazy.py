"""An object made on its first use, so that a function that never calls it never pays for it at its cold start (a
Step Functions client, the DGX client, a repository and the module it lives in)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class OnFirstUse:
    """Stands for the object ``make()`` returns until one of its attributes is first read; then makes it (once,
    under a lock: the local runtime's threads share a process) and forwards every attribute to it. An attribute
    set on the stand-in itself (a test's patch) is read before the made object's."""

    def __init__(self, make: Callable[[], Any]):
        self._make = make
        self._made: Any = None
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        if self._made is None:
            with self._lock:
                if self._made is None:
                    self._made = self._make()
        return getattr(self._made, name)
