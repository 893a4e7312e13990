"""The local dev issuer logs the portal in as Keycloak would a public client: authorization code + PKCE (S256),
a login page to pick user, roles and scopes, tokens of the shape the API's authorizer accepts, CORS for the
portal's origin only."""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from starlette.testclient import TestClient

from itl_local.devauth import PORTAL_CLIENT_ID, idp_app, load_or_create_key, pkce_challenge

PORTAL = "http://127.0.0.1:8003"
REDIRECT = f"{PORTAL}/portal/"
ISSUER = "http://testserver/realms/itl"


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory):
    return load_or_create_key(tmp_path_factory.mktemp("idp"))


@pytest.fixture
def idp(key) -> TestClient:
    return TestClient(idp_app(key, portal_origins=[PORTAL]), follow_redirects=False)


def authorize_params(verifier: str, **overrides: str) -> dict[str, str]:
    return {
        "client_id": PORTAL_CLIENT_ID,
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "scope": "openid profile",
        "state": "st-1",
        "nonce": "n-1",
        "code_challenge": pkce_challenge(verifier),
        "code_challenge_method": "S256",
        **overrides,
    }


def login(idp: TestClient, verifier: str, **form: str) -> str:
    """Post the login page as a person would; returns the code the redirect carries."""
    fields = {"subject": "carol", "role:itl-accelerator-supplier": "1", "scopes": "/subscriptions/sub-9\n"} | form
    response = idp.post("/realms/itl/protocol/openid-connect/auth", data=authorize_params(verifier) | fields)
    assert response.status_code == 302, response.text
    target = urlsplit(response.headers["location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == REDIRECT
    query = parse_qs(target.query)
    assert query["state"] == ["st-1"] and query["iss"] == [ISSUER]
    return query["code"][0]


def exchange(idp: TestClient, code: str, verifier: str, origin: str = PORTAL):
    return idp.post(
        "/realms/itl/protocol/openid-connect/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "client_id": PORTAL_CLIENT_ID,
            "code_verifier": verifier,
        },
        headers={"Origin": origin},
    )


def test_discovery_names_what_an_oidc_client_needs(idp: TestClient):
    doc = idp.get("/realms/itl/.well-known/openid-configuration", headers={"Origin": PORTAL})

    assert doc.headers["access-control-allow-origin"] == PORTAL
    body = doc.json()
    assert body["issuer"] == ISSUER
    for endpoint in ("authorization_endpoint", "token_endpoint", "end_session_endpoint", "jwks_uri"):
        assert body[endpoint].startswith(f"{ISSUER}/protocol/openid-connect/")
    assert body["code_challenge_methods_supported"] == ["S256"]


def test_the_login_page_labels_every_field(idp: TestClient):
    page = idp.get("/realms/itl/protocol/openid-connect/auth", params=authorize_params("v" * 43))

    assert page.status_code == 200
    for field_id in ("subject", "name", "scopes"):
        assert f'<label for="{field_id}">' in page.text and f'id="{field_id}"' in page.text
    for role in ("itl-accelerator-consumer", "itl-accelerator-admin", "itl-accelerator-supplier"):
        assert f"name='role:{role}'" in page.text


def test_code_with_the_right_verifier_gives_tokens_the_api_accepts(idp: TestClient, key):
    verifier = secrets.token_urlsafe(48)
    code = login(idp, verifier)

    response = exchange(idp, code, verifier)

    assert response.status_code == 200 and response.headers["access-control-allow-origin"] == PORTAL
    tokens = response.json()
    access = jwt.decode(tokens["access_token"], key.public_key(), algorithms=["RS256"], audience="itl-accelerator")
    assert access["iss"] == ISSUER and access["sub"] == "carol" and access["azp"] == PORTAL_CLIENT_ID
    assert access["realm_access"]["roles"] == ["itl-accelerator-supplier"]
    assert access["subscriptions"] == ["/subscriptions/sub-9"]
    identity = jwt.decode(tokens["id_token"], key.public_key(), algorithms=["RS256"], audience=PORTAL_CLIENT_ID)
    assert identity["nonce"] == "n-1" and identity["subscriptions"] == ["/subscriptions/sub-9"]


def test_a_wrong_verifier_or_a_second_use_of_a_code_is_refused(idp: TestClient):
    verifier = secrets.token_urlsafe(48)
    code = login(idp, verifier)

    wrong = exchange(idp, code, secrets.token_urlsafe(48))
    again = exchange(idp, code, verifier)  # the failed attempt used it up

    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"


def test_pkce_challenge_is_rfc_7636_s256():
    # RFC 7636, appendix B
    assert (
        pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk") == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
    )
    digest = hashlib.sha256(b"x" * 43).digest()
    assert pkce_challenge("x" * 43) == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def test_a_refresh_token_is_replaced_at_each_use(idp: TestClient):
    verifier = secrets.token_urlsafe(48)
    first = exchange(idp, login(idp, verifier), verifier).json()

    def refresh(token: str):
        form = {"grant_type": "refresh_token", "refresh_token": token, "client_id": PORTAL_CLIENT_ID}
        return idp.post("/realms/itl/protocol/openid-connect/token", data=form)

    renewed = refresh(first["refresh_token"])
    replayed = refresh(first["refresh_token"])

    assert renewed.status_code == 200 and renewed.json()["refresh_token"] != first["refresh_token"]
    assert replayed.status_code == 400


@pytest.mark.parametrize(
    ("override", "why"),
    [
        ({"redirect_uri": "https://evil.example.com/portal/"}, "Invalid redirect_uri"),
        ({"client_id": "someone-else"}, "Unknown client"),
    ],
)
def test_an_unknown_client_or_foreign_redirect_is_never_redirected_to(idp: TestClient, override, why):
    page = idp.get("/realms/itl/protocol/openid-connect/auth", params=authorize_params("v" * 43) | override)

    assert page.status_code == 400 and why in page.text and "location" not in page.headers


def test_a_login_without_pkce_goes_back_with_an_error(idp: TestClient):
    response = idp.get(
        "/realms/itl/protocol/openid-connect/auth", params=authorize_params("v" * 43, code_challenge_method="plain")
    )

    assert response.status_code == 302
    assert parse_qs(urlsplit(response.headers["location"]).query)["error"] == ["invalid_request"]


def test_a_bad_scope_is_shown_on_the_login_page(idp: TestClient):
    fields = {"subject": "carol", "scopes": "/subscription/typo"}
    page = idp.post("/realms/itl/protocol/openid-connect/auth", data=authorize_params("v" * 43) | fields)

    assert page.status_code == 400 and "role='alert'" in page.text and "/subscription/typo" in page.text


def test_other_origins_get_no_cors_header(idp: TestClient):
    verifier = secrets.token_urlsafe(48)
    response = exchange(idp, login(idp, verifier), verifier, origin="https://evil.example.com")

    assert "access-control-allow-origin" not in response.headers


def test_the_token_command_refuses_what_the_login_page_refuses(tmp_path, monkeypatch, capsys):
    """``./dev token`` with a role typo, a scope that is no ARM scope or a subject with a space once printed a token
    that the API then refused with 403; now it is a usage error naming each, as the login page's checks say."""
    from itl_local.cli import main

    monkeypatch.setenv("LOCAL_HOME", str(tmp_path))
    bad = ["token", "--sub", "al ice", "--role", "itl-accelerator-superuser", "--scope", "/bogus"]
    assert main(bad) == 2
    said = capsys.readouterr()
    assert said.out == ""
    assert "--sub 'al ice'" in said.err and "itl-accelerator-superuser" in said.err and "'/bogus'" in said.err

    good = [
        "token",
        "--sub",
        "alice",
        "--role",
        "itl-accelerator-admin",
        "--scope",
        "/subscriptions/sub-1/resourceGroups/rg1",
    ]
    assert main(good) == 0
    claims = jwt.decode(capsys.readouterr().out.strip(), options={"verify_signature": False})
    assert claims["sub"] == "alice"
