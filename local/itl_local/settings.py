"""Settings of the local runtime only: the provider's :class:`~itl_accelerator.settings.Settings` (which the
functions read, in AWS as here) plus the knobs that exist only on one machine — the API's port (the original
description's ``SERVICE_PORT``), where dev keys and saved data live, and the loopback ports of the embedded AWS,
the dev issuer and the DGX simulator. Nothing shipped reads these."""

from __future__ import annotations

from itl_accelerator.settings import Settings


class LocalSettings(Settings):
    """:class:`Settings` and the local stack's own (environment variables of the same names, upper-cased)."""

    service_port: int = 8003
    local_home: str = ".local"
    local_aws_port: int = 5005
    local_idp_port: int = 8180
    local_dgx_port: int = 9504
