"""Edges found by trying to break the stack: each answer is a clear ARM error, never a surprise."""

from __future__ import annotations

from tests.conftest import SEED_NODE, nodes_path
from tests.integration.instance_helpers import SEED_INSTANCE, instances_path, node_counters


def test_instance_memory_cannot_exceed_what_its_gpus_hold(admin, sub, aws):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201  # 80 GiB per GPU
    refused = admin.post(instances_path(sub), json={**SEED_INSTANCE, "gpus": 1, "memory_gb": 81})
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "InvalidParameter"
    assert node_counters(aws, sub)["memoryGbAllocated"] == 0


def test_a_trailing_slash_is_another_path_not_a_redirect(admin, sub):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    response = admin.get(nodes_path(sub, name="dgx-1") + "/", follow_redirects=False)
    assert response.status_code == 404 and response.json()["error"]["code"] == "NotFound"


def test_correlation_ids_are_bounded(admin, sub):
    huge = "c" * 20_000
    response = admin.get(nodes_path(sub), headers={"x-ms-correlation-request-id": huge, "X-Correlation-Id": huge})
    assert response.status_code == 200
    assert len(response.headers["x-ms-correlation-request-id"]) == 128
    assert len(response.headers["X-Correlation-Id"]) == 128
