"""Ollama model names through the API: names Ollama pulls (capitals, a registry with a port) are provisioned and kept
byte for byte; a name Ollama refuses is a 400 that says which part breaks which rule. The table of names and the
rules they follow is tests/unit/test_ollama_model_names.py."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.conftest import SEED_NODE, TABLE, nodes_path
from tests.integration.instance_helpers import instances_path, node_counters, simulator_instances, wait_state

HF_MODEL = "hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M"
PRIVATE_REGISTRY_MODEL = "myreg:5000/team/llama3:8b"


@pytest.fixture
def node(admin, sub):
    assert admin.post(nodes_path(sub), json=SEED_NODE).status_code == 201
    return nodes_path(sub, name="dgx-1")


def _stored_model(dynamodb, sub: str, name: str) -> str:
    item = dynamodb.get_item(
        TableName=TABLE,
        Key={"PK": {"S": f"SUB#{sub}"}, "SK": {"S": f"INSTANCE#rg1#dgx-1#{name}"}},
        ConsistentRead=True,
    )["Item"]
    return json.loads(item["doc"]["S"])["properties"]["model"]


def test_names_from_the_issue_are_provisioned_and_kept_exactly(admin, sub, node, aws, dgx):
    # Given the issue's Hugging Face name (capitals) in the seed's POST form
    posted = admin.post(instances_path(sub), json={"name": "m0", "model": HF_MODEL, "gpus": 1, "memory_gb": 80})
    # Then it is accepted as a long-running operation, the name as sent
    assert posted.status_code == 202, posted.text
    assert posted.json()["properties"]["model"] == HF_MODEL

    # Given the issue's private registry with a port, in the ARM PUT form
    put = admin.put(
        instances_path(sub, name="m1"),
        json={"properties": {"model": PRIVATE_REGISTRY_MODEL, "gpus": 1, "memoryGb": 80}},
    )
    # Then it is created, the name as sent
    assert put.status_code == 201, put.text
    assert put.json()["properties"]["model"] == PRIVATE_REGISTRY_MODEL

    # When both are provisioned
    for name, model in (("m0", HF_MODEL), ("m1", PRIVATE_REGISTRY_MODEL)):
        done = wait_state(admin, instances_path(sub, name=name), ("Succeeded", "Failed"))
        assert done["properties"]["provisioningState"] == "Succeeded", done
        # Then the returned and the stored model are byte-identical to what was sent
        assert done["properties"]["model"].encode() == model.encode()
        assert _stored_model(aws, sub, name).encode() == model.encode()
        # And the instance's Ollama endpoint serves the model under that name
        tags = httpx.get(f"{done['properties']['endpoint']}/api/tags").json()["models"]
        assert [t["name"] for t in tags] == [model]
    # And the DGX Platform was sent each name byte for byte
    sent = [i["model"] for i in simulator_instances(dgx) if f"/subscriptions/{sub}/" in i["nodeId"]]
    assert sorted(m.encode() for m in sent) == sorted([HF_MODEL.encode(), PRIVATE_REGISTRY_MODEL.encode()])
    assert node_counters(aws, sub) == {"gpuAllocated": 2, "memoryGbAllocated": 160, "childCount": 2}


@pytest.mark.parametrize(
    ("send", "target", "says"),
    [
        (
            lambda admin, sub: admin.post(
                instances_path(sub), json={"name": "m0", "model": "x/y/z/w/v", "gpus": 1, "memory_gb": 80}
            ),
            "model",
            "The model name 'x/y/z/w/v' is not valid: the host 'x/y/z' may only contain letters, digits, '_', '-', "
            "'.' and ':' (not '/')",
        ),
        (
            lambda admin, sub: admin.put(
                instances_path(sub, name="m0"),
                json={"properties": {"model": "hf.co/some.user/Model:Q4", "gpus": 1, "memoryGb": 80}},
            ),
            "properties.model",
            "The model name 'hf.co/some.user/Model:Q4' is not valid: the namespace 'some.user' may only contain "
            "letters, digits, '_' and '-' (not '.')",
        ),
    ],
    ids=["post-five-parts", "put-dot-in-namespace"],
)
def test_a_name_ollama_refuses_is_a_400_naming_the_part_and_rule(admin, sub, node, aws, dgx, send, target, says):
    # Given a name Ollama's rules refuse
    # When it is sent
    response = send(admin, sub)
    # Then it is a 400 InvalidRequestContent at the model, saying which part breaks which rule (no pattern)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "InvalidRequestContent"
    assert says in error["message"] and "pattern" not in error["message"]
    assert error["details"][0]["target"] == target
    # And nothing was reserved, stored or sent to the DGX Platform
    assert node_counters(aws, sub) == {"gpuAllocated": 0, "memoryGbAllocated": 0, "childCount": 0}
    assert admin.get(instances_path(sub, name="m0")).status_code == 404
    assert not [i for i in simulator_instances(dgx) if f"/subscriptions/{sub}/" in i["nodeId"]]
