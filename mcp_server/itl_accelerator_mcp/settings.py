"""The MCP server's settings: the one place that reads the environment.

Variables (all optional):

- ``ITL_MCP_READ_ONLY``: ``true``/``1``/``yes`` serves the read tools only and refuses every write.
- ``ITL_MCP_QUOTE_SECRET``: the key that signs spending quotes (any text, at least 32 characters). Without it and
  without ``ITL_MCP_QUOTE_SECRET_ID`` a random key is made once per process (quotes then hold within that process:
  the stdio server, the local stack).
- ``ITL_MCP_QUOTE_SECRET_ID``: a Secrets Manager secret id whose ``SecretString`` is that key (AWS; read once per
  execution environment, on its first quote).
- ``ITL_MCP_QUOTE_TTL_SECONDS``: how long a quote may be accepted (default 600, 30-86400).
- ``TABLE_NAME``: the provider's table, where the function records the quotes it has accepted (each is spent once);
  without it (the stdio server) spent quotes are remembered by the process.
- ``MAX_BODY_BYTES``: the largest request body ``/mcp`` takes (default 65536, the API's own limit).
- ``CONTROL_PLANE_AUTH_URL`` and ``OIDC_REALM`` (the provider's own names): the issuer the protected-resource
  metadata names as authorization server, ``{url}/realms/{realm}``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

_TRUE = {"1", "true", "yes", "on"}


def env_flag(value: str | None) -> bool:
    """``"true"``, ``"1"``, ``"yes"``, ``"on"`` (any case) → True; anything else, or None → False."""
    return (value or "").strip().lower() in _TRUE


@dataclass(frozen=True)
class McpSettings:
    """What the server reads from its environment (see the module docstring)."""

    read_only: bool = False
    quote_secret: str = ""
    quote_secret_id: str = ""
    quote_ttl_seconds: int = 600
    auth_url: str = "https://auth.itlusions.com"
    realm: str = "itl"
    table_name: str = ""
    max_body_bytes: int = 64 * 1024

    @property
    def issuer(self) -> str:
        """The OIDC issuer (``{CONTROL_PLANE_AUTH_URL}/realms/{OIDC_REALM}``) the API's tokens come from."""
        return f"{self.auth_url.rstrip('/')}/realms/{self.realm}"

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> McpSettings:
        """Read the variables; ``ValueError`` when ``ITL_MCP_QUOTE_TTL_SECONDS`` is not a whole number of seconds
        from 30 to 86400, ``MAX_BODY_BYTES`` not a positive whole number, or ``ITL_MCP_QUOTE_SECRET`` is set but
        shorter than 32 characters."""
        env = os.environ if environ is None else environ
        ttl_text = env.get("ITL_MCP_QUOTE_TTL_SECONDS", "600").strip()
        if not ttl_text.isdigit() or not 30 <= int(ttl_text) <= 86400:
            raise ValueError("ITL_MCP_QUOTE_TTL_SECONDS must be a whole number of seconds from 30 to 86400")
        body_text = env.get("MAX_BODY_BYTES", str(cls.max_body_bytes)).strip()
        if not body_text.isdigit() or int(body_text) < 1:
            raise ValueError("MAX_BODY_BYTES must be a positive whole number of bytes")
        secret = env.get("ITL_MCP_QUOTE_SECRET", "")
        if secret and len(secret) < 32:
            raise ValueError("ITL_MCP_QUOTE_SECRET must be at least 32 characters")
        return cls(
            read_only=env_flag(env.get("ITL_MCP_READ_ONLY")),
            quote_secret=secret,
            quote_secret_id=env.get("ITL_MCP_QUOTE_SECRET_ID", ""),
            quote_ttl_seconds=int(ttl_text),
            auth_url=env.get("CONTROL_PLANE_AUTH_URL") or cls.auth_url,
            realm=env.get("OIDC_REALM") or cls.realm,
            table_name=env.get("TABLE_NAME", ""),
            max_body_bytes=int(body_text),
        )
