"""A caller holding only some resource groups lists a whole subscription: it sees only its groups' nodes, and no
nextLink reveals anything about the others (continuation tokens are opaque, but base64 is not encryption)."""

from __future__ import annotations

import base64

from tests.conftest import ADMIN, SEED_NODE, nodes_path
from tests.integration.instance_helpers import relative


def _decoded(link: str) -> str:
    token = link.split("%24skipToken=")[1].split("&")[0]
    return base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()


def test_nextlinks_of_a_resource_group_scoped_caller_never_name_hidden_items(admin, caller, sub):
    # Given nodes in three groups, most of them in groups the caller cannot see
    for rg, names in (
        ("rg1", ["secret-a", "secret-b", "secret-c"]),
        ("rg2", ["mine-1", "mine-2"]),
        ("rg3", ["secret-d"]),
    ):
        for name in names:
            assert admin.post(nodes_path(sub, rg), json={**SEED_NODE, "name": name}).status_code == 201
    scoped = caller([ADMIN], [f"/subscriptions/{sub}/resourceGroups/rg2"])
    # When it pages through the subscription one item at a time
    seen, tokens, raw_tokens = [], [], []
    path = f"/subscriptions/{sub}/providers/ITL.Accelerator/sparkNodes?$top=1"
    for _ in range(10):
        page = scoped.get(path).json()
        seen += [n["name"] for n in page["value"]]
        if not page["nextLink"]:
            break
        tokens.append(_decoded(page["nextLink"]))
        raw_tokens.append(page["nextLink"].split("%24skipToken=")[1].split("&")[0])
        path = relative(page["nextLink"])
    # Then it sees exactly its group's nodes, and no token mentions another group or its items
    assert seen == ["mine-1", "mine-2"]
    for token in tokens:
        assert "rg1" not in token and "rg3" not in token and "secret" not in token, token
    # And a whole-subscription caller replaying a group token gets a clear 400, not a server error
    assert raw_tokens
    full = admin.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/sparkNodes", params={"$skipToken": raw_tokens[0]})
    assert full.status_code == 400 and full.json()["error"]["code"] == "InvalidParameter"
