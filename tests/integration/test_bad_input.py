"""Bad input is refused with a 4xx and an ARM error body ``{"error": {"code", "message"}}`` — never a 500, and
never a partial write. Sent through the API Gateway emulator (real authorizer, real handlers)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.conftest import ADMIN, SEED_NODE, node_body, nodes_path

AUDIENCE = "itl-accelerator"


def assert_refused(response: Any, status: int, code: str | set[str] | None = None) -> dict[str, Any]:
    """``status`` with an ARM error body (and ``code``: one, or any of a set), and ``x-ms-request-id``."""
    assert response.status_code == status, f"expected {status}, got {response.status_code}: {response.text}"
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error.get("code"), str) and error["code"], error
    assert isinstance(error.get("message"), str) and error["message"].strip(), error
    if isinstance(code, str):
        assert error["code"] == code, error
    elif code is not None:
        assert error["code"] in code, error
    assert response.headers.get("x-ms-request-id"), "error responses carry x-ms-request-id"
    return error


def with_props(**props: Any) -> dict[str, Any]:
    body = node_body()
    body["properties"] = {**body["properties"], **props}
    return body


def with_specs(**specs: Any) -> dict[str, Any]:
    body = node_body()
    body["properties"]["hardwareSpecs"] = {**body["properties"]["hardwareSpecs"], **specs}
    return body


def without(path: str) -> dict[str, Any]:
    """A valid PUT body with the dotted ``path`` removed."""
    body = node_body()
    *parents, leaf = path.split(".")
    node = body
    for part in parents:
        node = node[part]
    del node[leaf]
    return body


def only_gpu_count(value: Any) -> dict[str, Any]:
    """gpuCount set to ``value`` and sku.capacity left out, so only gpuCount's own range is tested."""
    body = with_specs(gpuCount=value)
    body["sku"] = {"name": body["sku"]["name"]}
    return body


def only_sku_capacity(value: Any) -> dict[str, Any]:
    """sku.capacity set to ``value`` and gpuCount left out, so only sku.capacity's own type/range is tested."""
    body = node_body(sku={"name": "DGX-H100-8GPU", "capacity": value})
    del body["properties"]["hardwareSpecs"]["gpuCount"]
    return body


# ------------------------------------------------------------------------------------------------ bodies
RAW_BODIES = {
    "malformed_json": b'{"location": "us-east-1", "sku": ',
    "trailing_garbage": json.dumps(node_body()).encode() + b" }",
    "not_utf8": b'{"location": "\xff\xfe"}',
    "array": b"[1, 2, 3]",
    "string": b'"a node"',
    "number": b"42",
    "null": b"null",
    "empty_object": b"{}",
    "nan_price": json.dumps(node_body()).replace('"pricePerGpuHour": 2.5', '"pricePerGpuHour": NaN').encode(),
    "infinite_price": json.dumps(node_body()).replace('"pricePerGpuHour": 2.5', '"pricePerGpuHour": Infinity').encode(),
    "deeply_nested": b'{"location": "x", "tags": ' + b'{"a": ' * 2000 + b"1" + b"}" * 2001,
}


def test_no_body_at_all_is_400_saying_a_body_is_required(admin, sub):
    for response in (
        admin.put(nodes_path(sub, name="dgx-1"), content=b"", headers={"Content-Type": "application/json"}),
        admin.post(nodes_path(sub), content=b""),
    ):
        assert_refused(response, 400, "InvalidRequestContent")
        assert "no body" in response.json()["error"]["message"], response.text  # not a bare "Field required"
    assert admin.get(nodes_path(sub)).json()["value"] == []


@pytest.mark.parametrize("raw", RAW_BODIES.values(), ids=RAW_BODIES.keys())
def test_unparseable_or_non_object_body_400(admin, sub, raw):
    # Given a PUT/POST body that is not valid JSON or not a node object
    headers = {"Content-Type": "application/json"}
    put = admin.put(nodes_path(sub, name="dgx-1"), content=raw, headers=headers)
    post = admin.post(nodes_path(sub), content=raw, headers=headers)
    # Then 400 InvalidRequestContent and nothing was created
    assert_refused(put, 400, "InvalidRequestContent")
    assert_refused(post, 400, "InvalidRequestContent")
    assert admin.get(nodes_path(sub)).json()["value"] == []


@pytest.mark.parametrize(
    "raw", [b"{not json", b"[]", b'"x"', b"null", b"7"], ids=["malformed", "array", "string", "null", "number"]
)
def test_patch_body_not_an_object_400(admin, sub, raw):
    # Given a node, when PATCHed with a body that is not a JSON object
    created = admin.put(nodes_path(sub, name="dgx-1"), json=node_body()).json()
    response = admin.patch(nodes_path(sub, name="dgx-1"), content=raw, headers={"Content-Type": "application/json"})
    # Then 400 InvalidRequestContent and the node is unchanged
    assert_refused(response, 400, "InvalidRequestContent")
    assert admin.get(nodes_path(sub, name="dgx-1")).json() == created


INVALID_BODIES: dict[str, dict[str, Any]] = {
    "gpu_count_word": with_specs(gpuCount="eight"),
    "gpu_count_float": with_specs(gpuCount=8.5),
    "gpu_count_list": with_specs(gpuCount=[8]),
    "gpu_count_boolean": only_gpu_count(True),
    "sku_capacity_boolean": only_sku_capacity(True),
    "location_number": node_body(location=42),
    "location_empty": node_body(location=""),
    "location_too_long": node_body(location="x" * 65),
    "sku_string": node_body(sku="DGX-H100-8GPU"),
    "sku_name_empty": node_body(sku={"name": "", "capacity": 8}),
    "properties_list": node_body(properties=[]),
    "tags_list": node_body(tags=["a", "b"]),
    "tag_value_number": node_body(tags={"a": 1}),
    "tag_value_too_long": node_body(tags={"a": "v" * 257}),
    "tag_name_slash": node_body(tags={"a/b": "v"}),
    "too_many_tags": node_body(tags={f"t{i}": "v" for i in range(51)}),
    "missing_location": without("location"),
    "missing_sku": without("sku"),
    "missing_sku_name": without("sku.name"),
    "unknown_availability": with_props(availability="Broken"),
    "availability_wrong_case": with_props(availability="available"),
    "unknown_top_level": node_body(color="green"),
    "unknown_property": with_props(color="green"),
    "unknown_hardware_spec": with_specs(quantumBits=7),
    "unknown_sku_field": node_body(sku={"name": "DGX-H100-8GPU", "capacity": 8, "size": "L"}),
    "gpu_count_zero": only_gpu_count(0),
    "gpu_count_negative": only_gpu_count(-1),
    "gpu_count_absurd": only_gpu_count(10**9),
    "gpu_count_beyond_int64": only_gpu_count(10**30),
    "sku_capacity_zero": only_sku_capacity(0),
    "sku_capacity_absurd": only_sku_capacity(10**9),
    "price_negative": with_props(pricing={"currency": "USD", "pricePerGpuHour": -1}),
    "price_absurd": with_props(pricing={"currency": "USD", "pricePerGpuHour": 10**12}),
    "price_string_word": with_props(pricing={"currency": "USD", "pricePerGpuHour": "cheap"}),
    "currency_lowercase": with_props(pricing={"currency": "usd", "pricePerGpuHour": 1}),
    "memory_absurd": with_specs(memoryGb=10**12),
    "memory_negative": with_specs(memoryGb=-5),
    "gpu_memory_zero": with_specs(gpuMemoryGb=0),
    "cpu_cores_absurd": with_specs(cpuCores=10**6),
    "owner_empty": with_props(owner=""),
    "capacity_disagrees_with_gpu_count": node_body(sku={"name": "DGX-H100-8GPU", "capacity": 4}),
    "no_capacity_nor_gpu_count": {
        **node_body(sku={"name": "DGX-H100-8GPU"}),
        "properties": {
            **node_body()["properties"],
            "hardwareSpecs": {k: v for k, v in SEED_NODE["properties"]["hardwareSpecs"].items() if k != "gpuCount"},
        },
    },
    "unknown_sku_without_gpu_memory": {
        **node_body(sku={"name": "CUSTOM-BOX", "capacity": 8}),
        "properties": {
            **node_body()["properties"],
            "hardwareSpecs": {k: v for k, v in SEED_NODE["properties"]["hardwareSpecs"].items() if k != "gpuMemoryGb"},
        },
    },
}


@pytest.mark.parametrize("body", INVALID_BODIES.values(), ids=INVALID_BODIES.keys())
def test_invalid_node_body_400(admin, sub, body):
    # Given a JSON object that is not a valid node, when PUT and POSTed
    put = admin.put(nodes_path(sub, name="dgx-1"), json=body)
    post = admin.post(nodes_path(sub), json={**body, "name": "dgx-2"})
    # Then 400 InvalidRequestContent (with a target naming the field) and nothing was created
    error = assert_refused(put, 400, "InvalidRequestContent")
    assert error.get("details") or error.get("target"), "the error says which field is wrong"
    assert_refused(post, 400, "InvalidRequestContent")
    assert admin.get(nodes_path(sub)).json()["value"] == []


def test_invalid_body_names_the_field(admin, sub):
    # Given gpuCount "eight", then the error targets properties.hardwareSpecs.gpuCount
    error = assert_refused(admin.put(nodes_path(sub, name="dgx-1"), json=with_specs(gpuCount="eight")), 400)
    targets = [error.get("target")] + [d.get("target") for d in error.get("details", [])]
    assert any(t and t.endswith("hardwareSpecs.gpuCount") for t in targets), error


INVALID_PATCHES: dict[str, dict[str, Any]] = {
    "gpu_count_word": {"properties": {"hardwareSpecs": {"gpuCount": "eight"}}},
    "capacity_disagrees": {"sku": {"capacity": 4}},
    "unknown_top_level": {"colour": "green"},
    "unknown_property": {"properties": {"colour": "green"}},
    "unknown_availability": {"properties": {"availability": "Broken"}},
    "price_negative": {"properties": {"pricing": {"pricePerGpuHour": -1}}},
    "remove_required_sku_name": {"sku": {"name": None}},
    "properties_not_object": {"properties": "x"},
    "tags_not_object": {"tags": "x"},
    "tag_value_number": {"tags": {"a": 1}},
    "location_change": {"location": "eu-west-1"},
}


@pytest.mark.parametrize("patch", INVALID_PATCHES.values(), ids=INVALID_PATCHES.keys())
def test_invalid_patch_400(admin, sub, patch):
    # Given a node, when PATCHed with something that does not make a valid node
    created = admin.put(nodes_path(sub, name="dgx-1"), json=node_body()).json()
    response = admin.patch(nodes_path(sub, name="dgx-1"), json=patch)
    # Then 400 and the node is unchanged
    assert_refused(response, 400, {"InvalidRequestContent", "InvalidParameter"})
    assert admin.get(nodes_path(sub, name="dgx-1")).json() == created


def test_oversize_body_413(admin, sub):
    # Given a body above 64 KiB (even if otherwise a node)
    body = node_body(tags={f"t{i}": "v" * 250 for i in range(50)})
    body["properties"]["owner"] = "o" * 256
    raw = json.dumps(body).encode()
    padded = raw[:-1] + b', "padding": "' + b"x" * (65 * 1024) + b'"}'
    assert len(padded) > 64 * 1024
    # When PUT, POSTed and PATCHed
    responses = [
        admin.put(nodes_path(sub, name="dgx-1"), content=padded, headers={"Content-Type": "application/json"}),
        admin.post(nodes_path(sub), content=padded, headers={"Content-Type": "application/json"}),
        admin.patch(nodes_path(sub, name="dgx-1"), content=padded, headers={"Content-Type": "application/json"}),
    ]
    # Then 413 RequestEntityTooLarge, before anything is parsed
    for response in responses:
        assert_refused(response, 413, "RequestEntityTooLarge")
    assert admin.get(nodes_path(sub)).json()["value"] == []


def test_body_just_under_limit_is_parsed(admin, sub):
    # Given a body just under 64 KiB that is invalid only for its size-padding field
    raw = json.dumps({**node_body(), "padding": "x" * (60 * 1024)}).encode()
    assert len(raw) < 64 * 1024
    response = admin.put(nodes_path(sub, name="dgx-1"), content=raw, headers={"Content-Type": "application/json"})
    # Then it is read and refused for its content (400), not its size
    assert_refused(response, 400, "InvalidRequestContent")


# ------------------------------------------------------------------------------------------------ names and paths
INVALID_NAMES = {
    "too_long": "n" * 64,
    "leading_dash": "-dgx",
    "leading_dot": ".dgx",
    "trailing_dot": "dgx.",
    "hash": "dgx%231",
    "space": "dgx%201",
    "unicode": "n%C3%B6de",
    "emoji": "%F0%9F%9A%80",
    "percent": "dgx%25",
    "quote": "dgx%27",
    "angle": "%3Cscript%3E",
}


@pytest.mark.parametrize("name", INVALID_NAMES.values(), ids=INVALID_NAMES.keys())
def test_invalid_node_name_400(admin, sub, name):
    # Given an invalid node name in the URL
    path = nodes_path(sub, name=name)
    # When written, read, patched or deleted
    responses = [
        admin.put(path, json=node_body()),
        admin.get(path),
        admin.patch(path, json={"tags": {}}),
        admin.delete(path),
    ]
    # Then 400 InvalidResourceName each time, and nothing was created
    for response in responses:
        assert_refused(response, 400, "InvalidResourceName")
    assert admin.get(nodes_path(sub)).json()["value"] == []


@pytest.mark.parametrize(
    "name",
    ["n" * 64, "-dgx", "dgx#1", "nöde", "", "a/b", 7, None],
    ids=["too_long", "leading_dash", "hash", "unicode", "empty", "slash", "number", "null"],
)
def test_invalid_name_in_post_body_400(admin, sub, name):
    # Given the ITL POST form with an invalid name in the body
    response = admin.post(nodes_path(sub), json={**SEED_NODE, "name": name})
    # Then 400 (InvalidResourceName for a bad string; InvalidRequestContent for a non-string)
    assert_refused(response, 400, {"InvalidResourceName", "InvalidRequestContent"})
    assert admin.get(nodes_path(sub)).json()["value"] == []


def test_post_without_name_400(admin, sub):
    # Given the ITL POST form without a name
    response = admin.post(nodes_path(sub), json=node_body())
    # Then 400 InvalidRequestContent
    assert_refused(response, 400, "InvalidRequestContent")


@pytest.mark.parametrize(
    "rg",
    ["rg.", "rg%21", "r" * 91, "rg%23x", "%C3%A9t%C3%A9"],
    ids=["trailing_dot", "bang", "too_long", "hash", "unicode"],
)
def test_invalid_resource_group_400(admin, sub, rg):
    # Given an invalid resource group name in the URL
    responses = [
        admin.put(nodes_path(sub, rg, "dgx-1"), json=node_body()),
        admin.get(nodes_path(sub, rg, "dgx-1")),
        admin.get(nodes_path(sub, rg)),
        admin.post(nodes_path(sub, rg), json=SEED_NODE),
    ]
    # Then 400 InvalidParameter
    for response in responses:
        assert_refused(response, 400, "InvalidParameter")


@pytest.mark.parametrize(
    "bad_sub",
    ["-sub", "sub_x", "s" * 65, "sub%21", "s%C3%BCb"],
    ids=["leading_dash", "underscore", "too_long", "bang", "unicode"],
)
def test_invalid_subscription_in_path_400(caller, bad_sub):
    # Given an admin whose token even names the invalid subscription
    admin = caller([ADMIN], [f"/subscriptions/{bad_sub}"], subject="admin-x")
    responses = [
        admin.put(nodes_path(bad_sub, "rg1", "dgx-1"), json=node_body()),
        admin.get(nodes_path(bad_sub, "rg1", "dgx-1")),
        admin.get(nodes_path(bad_sub)),
        admin.get(f"/subscriptions/{bad_sub}/providers/ITL.Accelerator/sparkNodes"),
        admin.put(f"/subscriptions/{bad_sub}", json={"state": "Registered"}),
    ]
    # Then 400 InvalidParameter, never 5xx
    for response in responses:
        assert_refused(response, 400, "InvalidParameter")


# ------------------------------------------------------------------------------------------------ query parameters
@pytest.mark.parametrize(
    "top", ["0", "1001", "abc", "-1", "1.5", ""], ids=["zero", "1001", "abc", "negative", "fraction", "empty"]
)
def test_bad_top_400(admin, sub, top):
    # Given a list with an invalid $top (by resource group and by subscription)
    for path in (nodes_path(sub), f"/subscriptions/{sub}/providers/ITL.Accelerator/sparkNodes"):
        response = admin.get(f"{path}?$top={top}")
        # Then 400 InvalidParameter naming $top
        error = assert_refused(response, 400, "InvalidParameter")
        assert "$top" in (error.get("target") or "") + error["message"], error


@pytest.mark.parametrize(
    "token",
    ["garbage", "%21%21%21", "e30", base64.urlsafe_b64encode(b'{"PK":"x","SK":"y"}').decode().rstrip("="), "x" * 3000],
    ids=["garbage", "not_base64", "empty_object", "foreign_key", "too_long"],
)
def test_bad_skip_token_400(admin, sub, token):
    # Given a list with a $skipToken this provider did not issue
    response = admin.get(nodes_path(sub), params={"$skipToken": token})
    # Then 400 InvalidParameter
    assert_refused(response, 400, "InvalidParameter")


def test_skip_token_of_another_list_400(caller, sub):
    # Given an admin of two subscriptions with nodes in each, and a continuation token of the first one's list
    other = sub + "-b"
    admin = caller([ADMIN], [f"/subscriptions/{sub}", f"/subscriptions/{other}"], subject="admin-2")
    for s in (sub, other):
        for i in range(3):
            assert admin.put(nodes_path(s, name=f"n{i}"), json=node_body()).status_code == 201
    link = admin.get(nodes_path(sub), params={"$top": 1}).json()["nextLink"]
    token = link.split("%24skipToken=")[-1].split("$skipToken=")[-1].split("&")[0]
    # When that token is used on another resource group or another subscription
    responses = [
        admin.get(nodes_path(sub, "rg2"), params={"$skipToken": token}),
        admin.get(nodes_path(other), params={"$skipToken": token}),
    ]
    # Then 400 InvalidParameter: a token never pages another list
    for response in responses:
        assert_refused(response, 400, "InvalidParameter")


# ------------------------------------------------------------------------------------------------ tokens
def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def claims_for(issuer: str, sub: str, **overrides: Any) -> dict[str, Any]:
    now = int(time.time())
    return {
        "iss": issuer,
        "aud": AUDIENCE,
        "sub": "attacker",
        "iat": now,
        "nbf": now,
        "exp": now + 3600,
        "realm_access": {"roles": [ADMIN]},
        "subscriptions": [f"/subscriptions/{sub}"],
        **overrides,
    }


def unsigned_token(header: dict[str, Any], claims: dict[str, Any], signature: bytes = b"") -> str:
    head = b64url(json.dumps(header, separators=(",", ":")).encode())
    body = b64url(json.dumps(claims, separators=(",", ":")).encode())
    return f"{head}.{body}.{b64url(signature)}"


def hs256_with_public_pem(dev_key: Any, claims: dict[str, Any]) -> str:
    """The classic algorithm-confusion token: HS256 with the issuer's public key PEM as the HMAC secret."""
    pem = dev_key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    try:
        return jwt.encode(claims, pem, algorithm="HS256", headers={"kid": "itl-local-dev"})
    except jwt.InvalidKeyError:  # PyJWT refuses PEM keys as HMAC secrets: sign by hand
        header = {"alg": "HS256", "typ": "JWT", "kid": "itl-local-dev"}
        head = b64url(json.dumps(header, separators=(",", ":")).encode())
        body = b64url(json.dumps(claims, separators=(",", ":")).encode())
        signature = hmac.new(pem, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{b64url(signature)}"


def tampered(token: str, **changes: Any) -> str:
    """``token`` with claims changed and the original signature kept."""
    head, body, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims.update(changes)
    return f"{head}.{b64url(json.dumps(claims).encode())}.{signature}"


@pytest.fixture(scope="module")
def other_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def bad_authorizations(
    make_token: Callable[..., str], dev_key: Any, other_key: Any, idp: str, sub: str
) -> dict[str, dict[str, str]]:
    """Request headers for every kind of bad credential, by name."""
    from itl_local.devauth import mint_token

    scopes = [f"/subscriptions/{sub}"]
    good = make_token("admin-1", [ADMIN], scopes)
    kw: dict[str, Any] = {"issuer": idp, "audience": AUDIENCE, "subject": "admin-1", "roles": [ADMIN], "scopes": scopes}
    no_exp = claims_for(idp, sub)
    del no_exp["exp"]
    bearer = {
        "expired": make_token("admin-1", [ADMIN], scopes, lifetime_seconds=-120),
        "not_yet_valid": make_token("admin-1", [ADMIN], scopes, not_before_offset_seconds=600),
        "wrong_issuer": make_token("admin-1", [ADMIN], scopes, extra_claims={"iss": "https://evil.example/realms/itl"}),
        "wrong_audience": make_token("admin-1", [ADMIN], scopes, extra_claims={"aud": "some-other-api"}),
        "alg_none": unsigned_token({"alg": "none", "typ": "JWT", "kid": "itl-local-dev"}, claims_for(idp, sub)),
        "alg_none_with_signature": unsigned_token({"alg": "none", "typ": "JWT"}, claims_for(idp, sub), b"sig"),
        "hs256_public_key": hs256_with_public_pem(dev_key, claims_for(idp, sub)),
        "tampered_subscription": tampered(good, subscriptions=["/subscriptions/someone-else"]),
        "tampered_roles": tampered(make_token("carol", [], scopes), realm_access={"roles": [ADMIN]}),
        "tampered_expiry": tampered(
            make_token("admin-1", [ADMIN], scopes, lifetime_seconds=-120), exp=int(time.time()) + 3600
        ),
        "other_key_same_kid": mint_token(other_key, **kw),
        "other_key_unknown_kid": jwt.encode(
            claims_for(idp, sub), other_key, algorithm="RS256", headers={"kid": "rogue"}
        ),
        "no_exp": jwt.encode(no_exp, dev_key, algorithm="RS256", headers={"kid": "itl-local-dev"}),
        "signature_stripped": good.rsplit(".", 1)[0] + ".",
        "not_a_jwt": "not-a-jwt",
        "two_segments": ".".join(good.split(".")[:2]),
    }
    headers = {name: {"Authorization": f"Bearer {token}"} for name, token in bearer.items()}
    headers["missing"] = {}
    headers["basic_scheme"] = {"Authorization": "Basic " + base64.b64encode(b"admin:admin").decode()}
    headers["token_without_scheme"] = {"Authorization": good}
    headers["empty_bearer"] = {"Authorization": "Bearer "}
    headers["empty_header"] = {"Authorization": ""}
    return headers


BAD_TOKEN_KINDS = [
    "missing",
    "basic_scheme",
    "token_without_scheme",
    "empty_bearer",
    "empty_header",
    "expired",
    "not_yet_valid",
    "wrong_issuer",
    "wrong_audience",
    "alg_none",
    "alg_none_with_signature",
    "hs256_public_key",
    "tampered_subscription",
    "tampered_roles",
    "tampered_expiry",
    "other_key_same_kid",
    "other_key_unknown_kid",
    "no_exp",
    "signature_stripped",
    "not_a_jwt",
    "two_segments",
]


@pytest.mark.parametrize("kind", BAD_TOKEN_KINDS)
def test_bad_token_401_authentication_failed(gateway, make_token, dev_key, other_key, idp, sub, kind):
    # Given a node (created with a good token) and a request carrying a bad credential
    good = {"Authorization": "Bearer " + make_token("admin-1", [ADMIN], [f"/subscriptions/{sub}"])}
    assert gateway.put(nodes_path(sub, name="dgx-1"), json=node_body(), headers=good).status_code == 201
    headers = bad_authorizations(make_token, dev_key, other_key, idp, sub)[kind]
    # When it reads, writes or deletes
    responses = [
        gateway.get(nodes_path(sub, name="dgx-1"), headers=headers),
        gateway.put(nodes_path(sub, name="dgx-1"), json=node_body(tags={"owned": "yes"}), headers=headers),
        gateway.delete(nodes_path(sub, name="dgx-1"), headers=headers),
        gateway.get("/providers/ITL.Accelerator/operations", headers=headers),
    ]
    # Then 401 AuthenticationFailed with a request id, and the node is untouched
    for response in responses:
        assert_refused(response, 401, "AuthenticationFailed")
    node = gateway.get(nodes_path(sub, name="dgx-1"), headers=good)
    assert node.status_code == 200 and node.json()["tags"] == {}


def test_good_token_control_is_accepted(gateway, make_token, sub):
    # Given the same requests with a valid token (the control for the bad-token cases), then they succeed
    good = {"Authorization": "Bearer " + make_token("admin-1", [ADMIN], [f"/subscriptions/{sub}"])}
    assert gateway.put(nodes_path(sub, name="dgx-1"), json=node_body(), headers=good).status_code == 201
    assert gateway.get(nodes_path(sub, name="dgx-1"), headers=good).status_code == 200
    lower = {"Authorization": "bearer " + good["Authorization"].split(" ", 1)[1]}
    assert gateway.get(nodes_path(sub, name="dgx-1"), headers=lower).status_code == 200


def test_refusals_do_not_leak_internals(admin, gateway, sub):
    # Given assorted bad requests
    responses = [
        admin.put(nodes_path(sub, name="dgx-1"), content=b"{", headers={"Content-Type": "application/json"}),
        admin.get(nodes_path(sub), params={"$skipToken": "garbage"}),
        gateway.get(nodes_path(sub), headers={"Authorization": "Bearer not-a-jwt"}),
    ]
    # Then no message carries a stack trace, table name or library exception name
    for response in responses:
        text = response.text
        assert response.status_code < 500
        for leak in ("Traceback", "botocore", "ClientError", "itl-accelerator-test", "pydantic", 'File "'):
            assert leak not in text, text
