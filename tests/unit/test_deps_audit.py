"""./dev deps-audit's verdict on pip-audit's report: a vulnerability fails, an audit that could not run never reads
as clean (fails, or with --offline-ok is said and passes)."""

from __future__ import annotations

from itl_local.deps_audit import judge

CLEAN = {"name": "httpx", "version": "0.28.1", "vulns": []}
NOT_LOOKED_UP = {"name": "pydantic", "version": "2.13.0", "skip_reason": "Dependency not found on PyPI"}
VULNERABLE = {"name": "jinja2", "version": "3.1.2", "vulns": [{"id": "GHSA-h5c8-rqwp-cp95", "fix_versions": ["3.1.3"]}]}


def test_a_known_vulnerability_fails_and_names_its_fix():
    code, lines = judge({"dependencies": [CLEAN, VULNERABLE]}, offline_ok=True)
    assert code == 1
    assert lines[0] == "VULNERABLE jinja2 3.1.2: GHSA-h5c8-rqwp-cp95 (fixed in 3.1.3)"


def test_an_audit_that_could_not_look_a_distribution_up_is_not_clean():
    code, lines = judge({"dependencies": [CLEAN, NOT_LOOKED_UP]}, offline_ok=False)
    assert code == 1 and "1 of 2 distributions audited" in lines[0] and "could not look up 1" in lines[1]
    assert judge({"dependencies": [CLEAN, NOT_LOOKED_UP]}, offline_ok=True)[0] == 0


def test_our_own_editable_packages_are_neither_audited_nor_counted_as_unreachable():
    ours = {"name": "itlc-accelerator", "skip_reason": "distribution marked as editable"}
    assert judge({"dependencies": [CLEAN, ours]}, offline_ok=False)[0] == 0


def test_every_distribution_audited_and_none_vulnerable_passes():
    assert judge({"dependencies": [CLEAN]}, offline_ok=False) == (
        0,
        ["pip-audit: 1 of 1 distributions audited, 0 known vulnerabilities"],
    )
