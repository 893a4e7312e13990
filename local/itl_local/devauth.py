"""Development identity provider: an RSA key pair made on first run, a Keycloak-shaped issuer app, and token
minting for ``itl-local token``. Never used outside the local runtime and tests.

The issuer app serves what a Keycloak public client needs for the authorization code flow with PKCE (the portal
logs in this way, as the ITL CLI does against Keycloak): discovery, JWKS, an authorize endpoint whose login page
lets a developer pick a user, roles and subscription scopes (no password: it is a dev issuer), a token endpoint
(``authorization_code`` with an S256 ``code_verifier``, and ``refresh_token``), an end-session endpoint, and CORS
for the portal's origins. Its access tokens have exactly the shape :func:`mint_token` makes.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import secrets
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
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
    authorized_party: str = "itl-controlplane",
) -> str:
    """A Keycloak-shaped RS256 access token: realm roles in ``realm_access.roles``, ARM scopes in
    ``subscriptions``, ``azp`` the client it was issued to. Negative ``lifetime_seconds`` makes an expired token
    (for tests)."""
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": issuer,
        "aud": audience,
        "sub": subject,
        "iat": now,
        "nbf": now + not_before_offset_seconds,
        "exp": now + lifetime_seconds,
        "jti": str(uuid.uuid4()),
        "azp": authorized_party,
        "typ": "Bearer",
        "name": name or subject,
        "preferred_username": subject,
        "realm_access": {"roles": roles},
        "subscriptions": scopes,
        **(extra_claims or {}),
    }
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": KID})


#: The portal's client id (a Keycloak public client: no secret, PKCE required).
PORTAL_CLIENT_ID = "itl-accelerator-portal"
#: The roles the dev login page offers.
DEV_ROLES = ("itl-accelerator-consumer", "itl-accelerator-admin", "itl-accelerator-supplier")
#: An ARM scope as the ``subscriptions`` claim holds it.
#: A dev user's id, on the login page and in ``itl-local token``.
SUBJECT_PATTERN = re.compile(r"[A-Za-z0-9._@+-]{1,128}")
SCOPE_PATTERN = re.compile(r"^/subscriptions/[A-Za-z0-9._-]{1,90}(/resourceGroups/[A-Za-z0-9._()-]{1,90})?$")
#: How long an authorization code may wait for its exchange (seconds); Keycloak's default is 60.
CODE_LIFETIME_SECONDS = 60
_PKCE_VERIFIER = re.compile(r"^[A-Za-z0-9._~-]{43,128}$")


@dataclass
class _Grant:
    """What a login granted: the identity and the client it was granted to (codes and refresh tokens point here)."""

    client_id: str
    subject: str
    name: str
    roles: list[str]
    scopes: list[str]
    redirect_uri: str = ""
    code_challenge: str = ""
    nonce: str | None = None
    expires_at: float = 0.0
    auth_time: int = field(default_factory=lambda: int(time.time()))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


async def _form(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body as a dict (the last value of a repeated field)."""
    return dict(parse_qsl((await request.body()).decode("utf-8", errors="replace"), keep_blank_values=True))


def pkce_challenge(verifier: str) -> str:
    """The S256 code challenge of ``verifier``: BASE64URL(SHA-256(ASCII(verifier))) without padding (RFC 7636)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def idp_app(
    key: rsa.RSAPrivateKey,
    issuer_path: str = "/realms/itl",
    *,
    audience: str = "itl-accelerator",
    portal_origins: Sequence[str] = (),
    token_lifetime_seconds: int = 3600,
) -> Starlette:
    """A Keycloak-shaped issuer at ``{scheme://host}{issuer_path}``.

    - ``.well-known/openid-configuration`` and ``protocol/openid-connect/certs`` (JWKS): always.
    - ``protocol/openid-connect/auth`` (GET: the dev login page; POST: the login, answered with a redirect to the
      client's ``redirect_uri`` carrying ``code``, ``state`` and ``iss``), ``.../token`` and ``.../logout``, for
      the client :data:`PORTAL_CLIENT_ID`, whose redirect URIs must lie on one of ``portal_origins`` (scheme,
      host and port, e.g. ``http://127.0.0.1:8003``).
    - CORS: requests from ``portal_origins`` get ``Access-Control-Allow-Origin`` (Keycloak's "Web origins").

    Access tokens are :func:`mint_token`'s (``aud`` = ``audience``, ``azp`` = the client, lifetime
    ``token_lifetime_seconds``); the ID token has ``aud`` = the client and the login's ``nonce``. Codes are single
    use and live :data:`CODE_LIFETIME_SECONDS`; a refresh token is replaced at each use. Token errors are RFC 6749
    bodies (``{"error": "invalid_grant", "error_description": ...}``, status 400)."""
    document = jwks(key)
    origins = {o.rstrip("/").lower() for o in portal_origins}
    codes: dict[str, _Grant] = {}
    refresh_tokens: dict[str, _Grant] = {}
    lock = threading.Lock()

    def issuer_of(request: Request) -> str:
        return f"{request.url.scheme}://{request.url.netloc}{issuer_path}"

    def cors(request: Request, response: Response) -> Response:
        origin = request.headers.get("origin")
        if origin and origin.rstrip("/").lower() in origins:
            response.headers["Access-Control-Allow-Origin"] = origin
            response.headers["Vary"] = "Origin"
        return response

    async def preflight(request: Request) -> Response:
        response = Response(status_code=204)
        if request.headers.get("origin", "").rstrip("/").lower() in origins:
            response.headers["Access-Control-Allow-Methods"] = "GET, POST, OPTIONS"
            response.headers["Access-Control-Allow-Headers"] = "Authorization, Content-Type"
            response.headers["Access-Control-Max-Age"] = "600"
        return cors(request, response)

    async def certs(request: Request) -> Response:
        if request.method == "OPTIONS":
            return await preflight(request)
        return cors(request, JSONResponse(document))

    async def discovery(request: Request) -> Response:
        if request.method == "OPTIONS":
            return await preflight(request)
        issuer = issuer_of(request)
        oidc = f"{issuer}/protocol/openid-connect"
        return cors(
            request,
            JSONResponse(
                {
                    "issuer": issuer,
                    "authorization_endpoint": f"{oidc}/auth",
                    "token_endpoint": f"{oidc}/token",
                    "end_session_endpoint": f"{oidc}/logout",
                    "jwks_uri": f"{oidc}/certs",
                    "response_types_supported": ["code"],
                    "response_modes_supported": ["query"],
                    "grant_types_supported": ["authorization_code", "refresh_token"],
                    "code_challenge_methods_supported": ["S256"],
                    "subject_types_supported": ["public"],
                    "id_token_signing_alg_values_supported": ["RS256"],
                    "token_endpoint_auth_methods_supported": ["none"],
                    "scopes_supported": ["openid", "profile"],
                    "claims_supported": ["sub", "name", "preferred_username", "realm_access", "subscriptions"],
                }
            ),
        )

    def client_error(message: str) -> HTMLResponse:
        """An error the login page shows itself: never a redirect to an unchecked redirect_uri."""
        return HTMLResponse(_page("Sign-in refused", f"<p role='alert'>{html.escape(message)}</p>"), status_code=400)

    def redirect_error(redirect_uri: str, state: str | None, error: str, description: str) -> RedirectResponse:
        query = {"error": error, "error_description": description} | ({"state": state} if state else {})
        return RedirectResponse(f"{redirect_uri}{'&' if '?' in redirect_uri else '?'}{urlencode(query)}", 302)

    async def authorize(request: Request) -> Response:
        params = dict(request.query_params)
        if request.method == "POST":
            params |= await _form(request)
        client_id, redirect_uri, state = (
            params.get("client_id", ""),
            params.get("redirect_uri", ""),
            params.get("state"),
        )
        if client_id != PORTAL_CLIENT_ID:
            return client_error(f"Unknown client '{client_id[:64]}'.")
        if not redirect_uri or _origin(redirect_uri) not in origins or urlsplit(redirect_uri).fragment:
            return client_error(f"Invalid redirect_uri '{redirect_uri[:200]}' for client {client_id}.")
        if params.get("response_type") != "code":
            return redirect_error(redirect_uri, state, "unsupported_response_type", "Only response_type=code.")
        if params.get("code_challenge_method") != "S256" or not params.get("code_challenge"):
            return redirect_error(
                redirect_uri, state, "invalid_request", "PKCE with code_challenge_method S256 is required."
            )
        if request.method == "GET":
            return HTMLResponse(_login_page(params))
        subject = params.get("subject", "").strip()
        roles = [r for r in DEV_ROLES if params.get(f"role:{r}")]
        scopes = [line.strip() for line in params.get("scopes", "").splitlines() if line.strip()]
        problems = []
        if not SUBJECT_PATTERN.fullmatch(subject):
            problems.append("The user must be 1 to 128 letters, digits or . _ @ + -.")
        problems += [
            f"'{s[:120]}' is not /subscriptions/{{sub}} or /subscriptions/{{sub}}/resourceGroups/{{rg}}."
            for s in scopes
            if not SCOPE_PATTERN.match(s)
        ]
        if problems:
            return HTMLResponse(_login_page(params, problems), status_code=400)
        code = secrets.token_urlsafe(32)
        with lock:
            now = time.time()
            for stale in [c for c, g in codes.items() if g.expires_at < now]:
                del codes[stale]
            codes[code] = _Grant(
                client_id=client_id,
                subject=subject,
                name=params.get("name", "").strip()[:128] or subject,
                roles=roles,
                scopes=scopes,
                redirect_uri=redirect_uri,
                code_challenge=params["code_challenge"],
                nonce=params.get("nonce"),
                expires_at=now + CODE_LIFETIME_SECONDS,
            )
        query = {"code": code, "iss": issuer_of(request)} | ({"state": state} if state else {})
        return RedirectResponse(f"{redirect_uri}{'&' if '?' in redirect_uri else '?'}{urlencode(query)}", 302)

    def token_error(request: Request, error: str, description: str) -> Response:
        body = {"error": error, "error_description": description}
        return cors(request, JSONResponse(body, status_code=400, headers={"Cache-Control": "no-store"}))

    def tokens(request: Request, grant: _Grant) -> Response:
        issuer = issuer_of(request)
        access = mint_token(
            key,
            issuer=issuer,
            audience=audience,
            subject=grant.subject,
            roles=grant.roles,
            scopes=grant.scopes,
            name=grant.name,
            lifetime_seconds=token_lifetime_seconds,
            authorized_party=grant.client_id,
        )
        now = int(time.time())
        id_claims: dict[str, Any] = {
            "iss": issuer,
            "aud": grant.client_id,
            "azp": grant.client_id,
            "sub": grant.subject,
            "iat": now,
            "exp": now + token_lifetime_seconds,
            "auth_time": grant.auth_time,
            "typ": "ID",
            "name": grant.name,
            "preferred_username": grant.subject,
            "realm_access": {"roles": grant.roles},
            "subscriptions": grant.scopes,
        }
        if grant.nonce:
            id_claims["nonce"] = grant.nonce
        refresh = secrets.token_urlsafe(32)
        with lock:
            refresh_tokens[refresh] = grant
        body = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": token_lifetime_seconds,
            "refresh_token": refresh,
            "refresh_expires_in": 8 * 3600,
            "id_token": jwt.encode(id_claims, key, algorithm="RS256", headers={"kid": KID}),
            "scope": "openid profile",
        }
        return cors(request, JSONResponse(body, headers={"Cache-Control": "no-store", "Pragma": "no-cache"}))

    async def token(request: Request) -> Response:
        if request.method == "OPTIONS":
            return await preflight(request)
        form = await _form(request)
        client_id = form.get("client_id", "")
        if client_id != PORTAL_CLIENT_ID:
            return token_error(request, "invalid_client", "Unknown client.")
        grant_type = form.get("grant_type")
        if grant_type == "authorization_code":
            with lock:
                grant = codes.pop(form.get("code", ""), None)  # single use, whatever follows
            if grant is None or grant.expires_at < time.time() or grant.client_id != client_id:
                return token_error(request, "invalid_grant", "Code not valid.")
            if form.get("redirect_uri") != grant.redirect_uri:
                return token_error(request, "invalid_grant", "Incorrect redirect_uri.")
            verifier = form.get("code_verifier", "")
            if not _PKCE_VERIFIER.match(verifier) or pkce_challenge(verifier) != grant.code_challenge:
                return token_error(request, "invalid_grant", "PKCE verification failed: code_verifier does not match.")
            return tokens(request, grant)
        if grant_type == "refresh_token":
            with lock:
                grant = refresh_tokens.pop(form.get("refresh_token", ""), None)
            if grant is None or grant.client_id != client_id:
                return token_error(request, "invalid_grant", "Invalid refresh token.")
            return tokens(request, grant)
        return token_error(request, "unsupported_grant_type", f"Unsupported grant_type '{str(grant_type)[:40]}'.")

    async def logout(request: Request) -> Response:
        target = request.query_params.get("post_logout_redirect_uri", "")
        if target and _origin(target) in origins:
            state = request.query_params.get("state")
            return RedirectResponse(
                target + (f"{'&' if '?' in target else '?'}{urlencode({'state': state})}" if state else ""), 302
            )
        return HTMLResponse(_page("Signed out", "<p>You are signed out of the dev issuer.</p>"))

    oidc = f"{issuer_path}/protocol/openid-connect"
    return Starlette(
        routes=[
            Route(f"{oidc}/certs", certs, methods=["GET", "OPTIONS"]),
            Route(f"{issuer_path}/.well-known/openid-configuration", discovery, methods=["GET", "OPTIONS"]),
            Route(f"{oidc}/auth", authorize, methods=["GET", "POST"]),
            Route(f"{oidc}/token", token, methods=["POST", "OPTIONS"]),
            Route(f"{oidc}/logout", logout, methods=["GET"]),
        ]
    )


_STYLE = """
body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f4f6f8;color:#1b1f24}
main{max-width:30rem;margin:2rem auto;background:#fff;padding:1.5rem;border-radius:8px;box-shadow:0 1px 4px #0002}
h1{font-size:1.3rem;margin-top:0} label{display:block;font-weight:600;margin-top:1rem}
input[type=text],textarea{width:100%;box-sizing:border-box;font:inherit;padding:.4rem;border:1px solid #889;border-radius:4px}
fieldset{margin-top:1rem;border:1px solid #ccd;border-radius:4px} fieldset label{font-weight:400;margin:0}
button{margin-top:1.2rem;font:inherit;padding:.5rem 1.2rem;background:#0b5cad;color:#fff;border:0;border-radius:4px}
button:focus-visible,input:focus-visible,textarea:focus-visible{outline:3px solid #f5a623;outline-offset:2px}
.note{color:#556;font-size:.9rem} [role=alert]{color:#a00000;font-weight:600}
"""


def _page(title: str, body: str) -> str:
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'><style>{_STYLE}</style></head>"
        f"<body><main><h1>{html.escape(title)}</h1>{body}</main></body></html>"
    )


def _login_page(params: dict[str, str], problems: Sequence[str] = ()) -> str:
    """The dev login form: user, display name, roles and scopes; the OAuth parameters ride along hidden."""
    hidden = "".join(
        f"<input type='hidden' name='{k}' value='{html.escape(params[k], quote=True)}'>"
        for k in (
            "client_id",
            "redirect_uri",
            "response_type",
            "scope",
            "state",
            "nonce",
            "code_challenge",
            "code_challenge_method",
        )
        if params.get(k) is not None
    )
    chosen = {r for r in DEV_ROLES if params.get(f"role:{r}")} or {"itl-accelerator-consumer"}
    roles = "".join(
        f"<label><input type='checkbox' name='role:{r}' value='1'{' checked' if r in chosen else ''}> {r}</label>"
        for r in DEV_ROLES
    )
    errors = "".join(f"<p role='alert'>{html.escape(p)}</p>" for p in problems)
    scopes = html.escape(params.get("scopes", "/subscriptions/sub-123"))
    body = f"""
<p class="note">Local development issuer: pick who you are. No password; tokens are signed with the stack's dev
key and carry exactly these roles and subscription scopes.</p>{errors}
<form method="post">{hidden}
<label for="subject">User (subject)</label>
<input type="text" id="subject" name="subject" required value="{html.escape(params.get("subject", "alice"), quote=True)}" autocomplete="username">
<label for="name">Display name (optional)</label>
<input type="text" id="name" name="name" value="{html.escape(params.get("name", ""), quote=True)}">
<fieldset><legend>Roles</legend>{roles}</fieldset>
<label for="scopes">Subscription scopes, one per line</label>
<textarea id="scopes" name="scopes" rows="3" aria-describedby="scopes-help">{scopes}</textarea>
<p id="scopes-help" class="note">/subscriptions/sub-123 or /subscriptions/sub-123/resourceGroups/rg1</p>
<button type="submit">Sign in</button>
</form>"""
    return _page("Sign in to ITL (dev issuer)", body)
