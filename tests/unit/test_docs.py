"""The docs stay true: the committed OpenAPI document is the one the code generates, and RBAC.md names every
permission with the roles the table grants."""

from __future__ import annotations

import json
import re

from itl_accelerator.api.app import build_app
from itl_accelerator.auth import rbac
from itl_accelerator.auth.principal import Principal
from tests.conftest import REPO_ROOT


def test_committed_openapi_matches_the_code():
    committed = json.loads((REPO_ROOT / "docs" / "openapi.json").read_text())
    assert committed == build_app(with_docs=True).openapi(), "run ./dev generate"


def test_rbac_doc_matches_role_table():
    text = (REPO_ROOT / "docs" / "RBAC.md").read_text()
    roles = [rbac.ROLE_CONSUMER, rbac.ROLE_SUPPLIER, rbac.ROLE_ADMIN]
    for op in rbac.PERMISSIONS:
        row = re.search(rf"^\| `{re.escape(op.name)}` \|(.*)$", text, re.MULTILINE)
        assert row, f"{op.name} missing from docs/RBAC.md"
        cells = [c.strip() for c in row.group(1).split("|")[:3]]
        for role, cell in zip(roles, cells, strict=True):
            granted = rbac.has_permission(Principal(subject="x", roles=[role]), op)
            assert (cell == "✓") == granted, f"{op.name} / {role}"
