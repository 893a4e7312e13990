"""Development identity provider: an RSA key pair made on first run, a Keycloak-shaped JWKS/discovery app, and
token minting for ``itl-local token``. Never used outside the local runtime and tests."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

KEY_FILE = "dev-signing-key.pem"
KID = "itl-local-dev"


def load_or_create_key(home: Path) -> rsa.RSAPrivateKey:
    """The dev signing key at ``home/dev-signing-key.pem``, created (RSA 2048, mode 0600) when absent."""
    path = home / KEY_FILE
    if path.exists():
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
        assert isinstance(key, rsa.RSAPrivateKey)
        return key
    home.mkdir(parents=True, exist_ok=True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    path.touch(mode=0o600)
    path.write_bytes(pem)
    return key


def jwks(key: rsa.RSAPrivateKey) -> dict[str, Any]:
    """The public JWKS document for ``key``."""
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    return {"keys": [{**public, "kid": KID, "use": "sig", "alg": "RS256"}]}


def mint_token(
    key: rsa.RSAPrivateKey,
    *,
    issuer: str,
    audience: str,
    subject: str,
    roles: list[str],
    scopes: list[str],
    name: str | None = None,
    lifetime_seconds: int = 3600,
    not_before_offset_seconds: int = 0,
    extra_claims: dict[str, Any] | None = None,
) -> str:
    """A Keycloak-shaped RS256 access token: realm roles in ``realm_access.roles``, ARM scopes in
    ``subscriptions``. Negative ``lifetime_seconds`` makes an expired token (for tests)."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": issuer,
        "aud": audience,
        "sub": subject,
        "iat": now,
        "nbf": now + not_before_offset_seconds,
        "exp": now + lifetime_seconds,
        "jti": str(uuid.uuid4()),
        "azp": "itl-controlplane",
        "typ": "Bearer",
        "name": name or subject,
        "preferred_username": subject,
        "realm_access": {"roles": roles},
        "subscriptions": scopes,
        **(extra_claims or {}),
    }
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": KID})


def idp_app(key: rsa.RSAPrivateKey, issuer_path: str = "/realms/itl") -> Starlette:
    """Serves ``{issuer}/.well-known/openid-configuration`` and ``{issuer}/protocol/openid-connect/certs``."""
    document = jwks(key)

    async def certs(_: Request) -> JSONResponse:
        return JSONResponse(document)

    async def discovery(request: Request) -> JSONResponse:
        issuer = f"{request.url.scheme}://{request.url.netloc}{issuer_path}"
        return JSONResponse(
            {
                "issuer": issuer,
                "jwks_uri": f"{issuer}/protocol/openid-connect/certs",
                "id_token_signing_alg_values_supported": ["RS256"],
            }
        )

    return Starlette(
        routes=[
            Route(f"{issuer_path}/protocol/openid-connect/certs", certs),
            Route(f"{issuer_path}/.well-known/openid-configuration", discovery),
        ]
    )
