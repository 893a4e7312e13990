"""Claims → principal: roles from configurable claim paths, ARM scopes from the subscriptions claim."""

from __future__ import annotations

from itl_accelerator.auth import rbac
from itl_accelerator.auth.principal import ArmScope, Principal, principal_from_claims

PATHS = ["realm_access.roles", "resource_access.itl-accelerator.roles"]


def test_roles_from_realm_and_client_roles_and_scopes_parsed():
    claims = {
        "sub": "u1",
        "name": "Ada",
        "realm_access": {"roles": ["itl-accelerator-consumer", "offline_access"]},
        "resource_access": {"itl-accelerator": {"roles": ["itl-accelerator-supplier"]}},
        "subscriptions": ["/subscriptions/S1", "/subscriptions/s2/resourceGroups/RG1", "not-a-scope", 42],
    }
    p = principal_from_claims(claims, roles_claim_paths=PATHS, subscriptions_claim="subscriptions")
    assert p.subject == "u1" and p.display_name == "Ada" and p.actor_type == "User"
    assert p.roles == ["itl-accelerator-consumer", "offline_access", "itl-accelerator-supplier"]
    assert p.scopes == [ArmScope(subscription_id="S1"), ArmScope(subscription_id="s2", resource_group="RG1")]


def test_scope_checks_are_case_insensitive_and_rg_bounded():
    p = Principal(
        subject="u", scopes=[ArmScope(subscription_id="S1"), ArmScope(subscription_id="s2", resource_group="RG1")]
    )
    assert p.can_see("s1", "anything")
    assert p.can_see("S2", "rg1") and not p.can_see("s2", "rg2")
    assert p.can_see("s2", None)  # some part of s2 is visible
    assert p.holds_subscription("s1") and not p.holds_subscription("s2")
    assert p.resource_groups_in("s2") == ["RG1"] and p.resource_groups_in("s1") is None
    assert not p.can_see("s3", None)


def test_service_accounts_are_applications_and_scopes_may_be_a_string():
    claims = {
        "sub": "svc",
        "preferred_username": "service-account-billing",
        "subscriptions": "/subscriptions/a /subscriptions/b",
    }
    p = principal_from_claims(claims, roles_claim_paths=PATHS, subscriptions_claim="subscriptions")
    assert p.actor_type == "Application"
    assert [s.subscription_id for s in p.scopes] == ["a", "b"]


def test_principal_round_trips_through_authorizer_context():
    p = Principal(subject="u", roles=["r"], scopes=[ArmScope(subscription_id="s")])
    assert Principal.from_context(p.to_context()) == p


def test_role_table():
    def perms(*roles):
        return rbac.permissions_of(Principal(subject="u", roles=list(roles)))

    assert perms(rbac.ROLE_CONSUMER) == {
        rbac.NODES_READ.name,
        rbac.INSTANCES_READ.name,
        rbac.JOBS_READ.name,
        rbac.JOBS_WRITE.name,
        rbac.JOBS_DELETE.name,
        rbac.JOBS_CANCEL.name,
        rbac.OPERATIONS_READ.name,
        rbac.SUBSCRIPTION_READ.name,
        rbac.QUOTAS_READ.name,
        rbac.COSTS_READ.name,
        rbac.BUDGETS_READ.name,
        rbac.RESERVATIONS_READ.name,
        rbac.RESERVATIONS_WRITE.name,
        rbac.RESERVATIONS_DELETE.name,
    }
    assert {rbac.RESERVATIONS_WRITE.name, rbac.RESERVATIONS_DELETE.name} & perms(rbac.ROLE_SUPPLIER) == set()
    assert {rbac.QUOTAS_WRITE.name, rbac.BUDGETS_WRITE.name} & perms(rbac.ROLE_CONSUMER, rbac.ROLE_SUPPLIER) == set()
    assert {rbac.JOBS_WRITE.name, rbac.JOBS_CANCEL.name} & perms(rbac.ROLE_SUPPLIER) == set()
    assert rbac.JOBS_READ.name in perms(rbac.ROLE_SUPPLIER)
    assert rbac.INSTANCES_WRITE.name not in perms(rbac.ROLE_CONSUMER, rbac.ROLE_SUPPLIER)
    assert rbac.NODES_PRICING_WRITE.name in perms(rbac.ROLE_SUPPLIER)
    assert rbac.NODES_WRITE.name not in perms(rbac.ROLE_SUPPLIER)
    assert perms(rbac.ROLE_ADMIN) == {op.name for op in rbac.PERMISSIONS}
    assert perms("unknown-role") == frozenset()


def test_jwks_outage_with_nothing_cached_is_not_an_authentication_failure():
    import urllib.error

    import pytest

    from itl_accelerator.auth.tokens import IssuerUnavailable, JwksCache

    def down(url: str):
        raise urllib.error.HTTPError(url, 503, "Service Unavailable", {}, None)  # type: ignore[arg-type]

    with pytest.raises(IssuerUnavailable):
        JwksCache("http://idp/certs", ttl_seconds=300, timeout_seconds=1, fetch=down).key_for("kid")


def test_jwks_is_fetched_over_http_only_and_a_refusal_is_an_outage():
    import pytest

    from itl_accelerator.auth.tokens import IssuerUnavailable, JwksCache, fetch_json

    with pytest.raises(ValueError):
        fetch_json("file:///etc/passwd", 1)
    with pytest.raises(IssuerUnavailable):  # nothing listens on port 9 (discard) of loopback: connection refused
        JwksCache("http://127.0.0.1:9/certs", ttl_seconds=300, timeout_seconds=1).key_for("kid")
