"""Bearer token validation against the issuer's JWKS (Keycloak / any OIDC provider).

Rules: RS256 only (``alg`` pinned, so ``none`` and HS256-signed-with-the-public-key are refused), signature by a
key of the issuer's JWKS (fetched over HTTPS with the standard library's ``urllib`` — the authorizer loads no HTTP
client library, which keeps its cold start below a bare boto3 client's —, cached for ``JWKS_CACHE_SECONDS``,
refetched at most once a minute
when an unknown ``kid`` appears), ``exp`` and ``iss`` and ``aud`` required, a non-empty ``sub`` (at most 255
characters, no control characters) required, ``nbf`` honoured, ``OIDC_LEEWAY_SECONDS`` of clock skew.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import jwt

from itl_accelerator.errors import AuthenticationFailed
from itl_accelerator.observability import logger
from itl_accelerator.settings import Settings

ALGORITHM = "RS256"
#: A subject names a user or client (Keycloak: a UUID); it is stamped on resources and audit items.
MAX_SUBJECT_LENGTH = 255
_UNKNOWN_KID_REFETCH_SECONDS = 60.0


class IssuerUnavailable(Exception):
    """The issuer's JWKS cannot be fetched and no keys are cached: the token cannot be judged. The authorizer lets
    this escape, so API Gateway answers AUTHORIZER_FAILURE (503 with Retry-After) rather than a 401 that would
    make clients throw away a valid token."""


#: After a failed refresh while keys are cached, try again after this many seconds (not on every request).
_RETRY_FAILED_REFRESH_SECONDS = 30.0


def fetch_json(url: str, timeout_seconds: float) -> Any:
    """GET ``url`` (http or https only, no redirects) and parse its JSON body. Raises ``OSError``
    (``urllib.error.URLError``, ``HTTPError`` for a non-2xx status or a redirect, a timeout),
    ``http.client.HTTPException`` (a truncated response) or ``ValueError`` (not JSON, another scheme)."""
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"the JWKS URL must be http(s): {url!r}")
    request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310 - scheme checked
    with _NO_REDIRECTS.open(request, timeout=timeout_seconds) as response:
        return json.load(response)


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """The JWKS is read from the configured URL only: a redirect (to another host, or to ``file:``) is an error."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_NO_REDIRECTS = urllib.request.build_opener(_RefuseRedirects())


class JwksCache:
    """Fetches and caches the issuer's JSON Web Key Set. Thread-safe; one instance per process.

    ``fetch(url)`` → the JWKS document is injectable (tests pass a function); by default :func:`fetch_json`.
    """

    def __init__(
        self,
        url: str,
        *,
        ttl_seconds: float,
        timeout_seconds: float,
        fetch: Callable[[str], Any] | None = None,
    ):
        self._url = url
        self._ttl = ttl_seconds
        self._fetch = fetch or (lambda target: fetch_json(target, timeout_seconds))
        self._lock = threading.Lock()
        self._keys: dict[str, Any] = {}
        self._fetched_at = 0.0

    def _refresh(self) -> None:
        keys: dict[str, Any] = {}
        for jwk in jwt.PyJWKSet.from_dict(self._fetch(self._url)).keys:
            if jwk.key_type == "RSA" and (jwk.public_key_use in (None, "sig")):
                keys[jwk.key_id or ""] = jwk.key
        self._keys = keys
        self._fetched_at = time.monotonic()

    def key_for(self, kid: str | None) -> Any:
        """The RSA public key for ``kid`` (or the only key, when the token names none).

        Raises :class:`AuthenticationFailed` when the JWKS holds no such key, :class:`IssuerUnavailable` when it
        cannot be fetched and nothing is cached.
        """
        with self._lock:
            age = time.monotonic() - self._fetched_at
            stale = not self._keys or age > self._ttl
            unknown = kid is not None and kid not in self._keys and age > _UNKNOWN_KID_REFETCH_SECONDS
            if stale or unknown:
                try:
                    self._refresh()
                except (OSError, ValueError, http.client.HTTPException, jwt.PyJWTError) as exc:
                    logger.warning("JWKS fetch failed", extra={"jwks_url": self._url, "error": type(exc).__name__})
                    if not self._keys:
                        raise IssuerUnavailable("The token issuer's signing keys are unavailable.") from exc
                    # keep serving the cached keys; back off instead of refetching on every request
                    self._fetched_at = time.monotonic() - max(self._ttl - _RETRY_FAILED_REFRESH_SECONDS, 0.0)
            if kid is None and len(self._keys) == 1:
                return next(iter(self._keys.values()))
            if kid is None or kid not in self._keys:
                raise AuthenticationFailed("The token is signed with an unknown key.")
            return self._keys[kid]


class TokenValidator:
    """Validates bearer tokens for one issuer and audience (see module docstring for the rules)."""

    def __init__(self, settings: Settings, jwks: JwksCache | None = None):
        self._settings = settings
        self._jwks = jwks or JwksCache(
            settings.jwks_url,
            ttl_seconds=settings.jwks_cache_seconds,
            timeout_seconds=settings.jwks_fetch_timeout_seconds,
        )

    def validate(self, authorization: str | None) -> dict[str, Any]:
        """Validate an ``Authorization`` header value; return the token's claims.

        Raises :class:`AuthenticationFailed` (401) for a missing/malformed header or any failed check; the message
        names the failed check, never the token.
        """
        if not authorization:
            raise AuthenticationFailed("Authentication failed. The 'Authorization' header is missing.")
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationFailed("Authentication failed. The 'Authorization' header must be 'Bearer <token>'.")
        token = token.strip()
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise AuthenticationFailed("Authentication failed. The access token is malformed.") from exc
        if header.get("alg") != ALGORITHM:
            raise AuthenticationFailed(f"Authentication failed. Only {ALGORITHM} tokens are accepted.")
        key = self._jwks.key_for(header.get("kid"))
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[ALGORITHM],
                audience=self._settings.oidc_audience,
                issuer=self._settings.issuer,
                leeway=self._settings.oidc_leeway_seconds,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise AuthenticationFailed("Authentication failed. The access token has expired.") from exc
        except jwt.ImmatureSignatureError as exc:
            raise AuthenticationFailed("Authentication failed. The access token is not yet valid.") from exc
        except jwt.InvalidIssuerError as exc:
            raise AuthenticationFailed("Authentication failed. The access token has the wrong issuer.") from exc
        except jwt.InvalidAudienceError as exc:
            raise AuthenticationFailed("Authentication failed. The access token has the wrong audience.") from exc
        except jwt.MissingRequiredClaimError as exc:
            raise AuthenticationFailed(
                f"Authentication failed. The access token lacks the '{exc.claim}' claim."
            ) from exc
        except jwt.PyJWTError as exc:
            raise AuthenticationFailed("Authentication failed. The access token signature is invalid.") from exc
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject.strip() or len(subject) > MAX_SUBJECT_LENGTH:
            raise AuthenticationFailed("Authentication failed. The access token's 'sub' claim is empty or invalid.")
        if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in subject):
            raise AuthenticationFailed("Authentication failed. The access token's 'sub' claim is empty or invalid.")
        return claims
