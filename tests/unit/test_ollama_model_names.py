"""Ollama model names: the names Ollama pulls and runs pass, the names it refuses fail, with a 400 message that
names the part and the rule.

Every row cites the rule of Ollama's own code it follows, github.com/ollama/ollama at commit
fb30760996871fa9460115c753afd2c60d4ab0f7:

- name.go: ``types/model/name.go`` — ``ParseNameBare`` (the tag is cut only when the last ``:`` comes after the last
  ``/``; then model, namespace, host from the right; ``scheme://`` cut off the host), ``cutPromised`` (a separator
  with nothing beside it leaves ``MissingPart``, never valid), ``Merge``/``DefaultName`` (left-out host, namespace,
  tag: ``registry.ollama.ai``, ``library``, ``latest``), ``isValidLen``/``isValidPart`` (the part alphabets and
  lengths, ``isAlphanumericOrUnderscore``: A-Z, a-z, 0-9, ``_``).
- name_test.go: ``types/model/name_test.go`` — ``testCases`` and ``TestParseNameParts``. ``testCases`` checks
  ``ParseNameBare`` (no defaults), so it calls ``model`` or ``h/n/m`` invalid ("unqualified"); the server checks
  ``ParseName`` (defaults merged: ``server/model_resolver.go``, ``parseAndValidateModelRef``), where they are valid.
- ours: the one place we are narrower than Ollama — a ``scheme://`` must be ``http`` or ``https`` (module docstring of
  ``itl_accelerator.models.ollama_names``).
"""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from starlette.testclient import TestClient

from itl_accelerator.errors import invalid_content
from itl_accelerator.models.instances import (
    InstancePropertiesWrite,
    InstanceSpec,
    SparkOllamaInstanceCreate,
    SparkOllamaInstanceWrite,
)
from itl_accelerator.models.ollama_names import MAX_LENGTH, InvalidOllamaModelName, parse_ollama_model
from itl_local.dgx_simulator import DgxSimulator, SimulatorConfig

PART80 = "8" * 80  # name_test.go part80
PART350 = "3" * 350  # name_test.go part350

#: (name, the rule that makes it valid)
VALID = [
    ("mistral:7b", "name.go ParseName '{ model } \":\" { tag }'; host, namespace from DefaultName"),
    (
        "hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M",
        "the issue's name; isAlphanumericOrUnderscore takes A-Z; model alphabet has '-' and '.'",
    ),
    ("myreg:5000/team/llama3:8b", "the issue's name; host alphabet has ':'; tag cut after the last '/' only"),
    ("myreg:5000/team/llama3", "name_test.go TestParseNameParts 'host:port/namespace/model': no tag, ':' in host"),
    ("host:port/namespace/model:tag", "name_test.go TestParseNameParts"),
    ("host/namespace/model", "name_test.go TestParseNameParts; tag from DefaultName (ParseName)"),
    ("namespace/model", "name_test.go TestParseNameParts; host and tag from DefaultName (ParseName)"),
    ("model", "name_test.go TestParseNameParts / TestNameparseNameDefault ('xx'): everything else defaults"),
    (
        "registry.ollama.ai/library/dolphin-mistral:7b-v2.6-dpo-laser-q6_K",
        "name_test.go TestParseNameParts: '.' and capitals in the tag",
    ),
    ("_why/_the/_lucky:_stiff", "name_test.go testCases: every part may start with '_'"),
    ("h/n/m:t", "name_test.go testCases 'minimal': parts of length 1"),
    ("host:https/namespace/model:tag", "name_test.go testCases 'hosts': ':' in the host is not a tag"),
    ("MISTRAL:7B", "isAlphanumericOrUnderscore: capitals in model and tag"),
    ("Team_A/Llama3:Latest", "isAlphanumericOrUnderscore: mixed case in namespace, model and tag"),
    ("library/llama3.1:8b-instruct-q4_0", "isValidPart: '.' is allowed in the model and the tag"),
    ("gpt-oss:20b-cloud", "isValidPart: '-' in the tag (the legacy cloud tag is an ordinary tag)"),
    ("https://registry.ollama.ai/library/mistral:7b", "name.go ParseNameBare: 'scheme://' cut off the host"),
    ("http://localhost:11434/library/llama3", "name.go ParseNameBare: scheme http, host with port, no tag"),
    ("https:///library/mistral:7b", "name.go ParseNameBare strings.Cut gives host '', Merge fills the default"),
    (f"{PART80}/{PART80}/{PART80}:{PART80}", "name_test.go testCases 'long (but valid)': 80 per part"),
    (f"{PART350}/{PART80}/{PART80}:{PART80}", "name_test.go testCases 'long (but valid)': host of 350"),
    (f"https://{PART350}/{PART80}/{PART80}:{PART80}", "isValidLen at every bound plus a scheme: MAX_LENGTH"),
]

#: (name, what the message must say, the rule that makes it invalid)
INVALID = [
    ("", "is empty", "name_test.go testCases '': the model part has length 0 (isValidLen)"),
    ("Mistral 7B", "the model 'Mistral 7B' may only contain", "isValidPart: ' ' is in no alphabet"),
    ("x/y/z/w/v", "the host 'x/y/z' may only contain", "ParseNameBare: all before the namespace is the host; no '/'"),
    ("a/b/c/d:e", "the host 'a/b' may only contain", "ParseNameBare: four '/'-separated parts, '/' in the host"),
    ("a//b", "the namespace is empty", "cutPromised: '/' promises a namespace, MissingPart is invalid"),
    ("/nn/mm", "the host is empty", "name_test.go testCases '/nn/mm' (cutPromised)"),
    ("hh//", "the namespace is empty", "name_test.go testCases 'hh//' (cutPromised)"),
    ("//mm:@", "the host is empty", "name_test.go testCases '//mm:@' (cutPromised)"),
    ("mm:", "the tag is empty", "name_test.go testCases 'mm:': a trailing ':' promises a tag"),
    ("n/m:", "the tag is empty", "name_test.go testCases 'n/m:'"),
    ("-hh/nn/mm:tt", "the host '-hh' must start with", "name_test.go testCases 'not starting with alphanum'"),
    ("hh/-nn/mm:tt", "the namespace '-nn' must start with", "name_test.go testCases 'not starting with alphanum'"),
    ("hh/nn/-mm:tt", "the model '-mm' must start with", "name_test.go testCases 'not starting with alphanum'"),
    ("hh/nn/mm:-tt", "the tag '-tt' must start with", "name_test.go testCases 'not starting with alphanum'"),
    ("hf.co/some.user/model", "the namespace 'some.user' may only contain", "isValidPart: no '.' in a namespace"),
    ("myreg:5000/llama3", "the namespace 'myreg:5000' may only contain", "isValidPart: ':' only in the host"),
    ("host/name:space/model:tag", "the namespace 'name:space'", "name_test.go testCases 'colon in non-host part'"),
    ("llama3:8b/instruct", "the namespace 'llama3:8b'", "ParseNameBare: a ':' before the last '/' is no tag"),
    ("gpt-oss:20b:cloud", "the model 'gpt-oss:20b' may only contain", "isValidPart: ':' only in the host"),
    (
        "mistral@sha256:" + "a" * 64,
        "'@digest' references",
        "name.go IsValid: digests are no longer parsed; '@' is in no part's alphabet",
    ),
    ("m@d", "the model 'm@d' may only contain", "name_test.go testCases 'unqualified' 'm@d'"),
    ("@", "the model '@' must start with", "name_test.go testCases '@'"),
    ("^", "the model '^' must start with", "name_test.go testCases '^'"),
    ("mistràl:7b", "(not 'à')", "isAlphanumericOrUnderscore: ASCII letters only"),
    ("mistral:7b ", "the tag '7b ' may only contain", "isValidPart: ' ' is in no alphabet (no trimming)"),
    ("library/" + "m" * 81, "the model is 81 characters long", "isValidLen: model 1-80"),
    ("mistral:" + "t" * 81, "the tag is 81 characters long", "isValidLen: tag 1-80"),
    ("n" * 81 + "/mistral", "the namespace is 81 characters long", "isValidLen: namespace 1-80"),
    ("h" * 351 + "/n/m", "the host is 351 characters long", "isValidLen: host 1-350"),
    ("https://mistral:7b", "the namespace is empty", "ParseNameBare: 'https:/' + '' + 'mistral'; cutPromised"),
    ("ftp://h/n/m:t", "the scheme 'ftp' is not 'http' or 'https'", "ours: a pull speaks http and https only"),
    ("://h/n/m:t", "the scheme before '://' is empty", "ours: Ollama would default it to https; we ask for it"),
    ("m" * (MAX_LENGTH + 1), f"at most {MAX_LENGTH} are accepted", "longer than any name the part limits allow"),
]


@pytest.mark.parametrize(("name", "rule"), VALID, ids=[n[:60] for n, _ in VALID])
def test_names_ollama_accepts_pass(name, rule):
    assert parse_ollama_model(name).text == name


@pytest.mark.parametrize(("name", "says", "rule"), INVALID, ids=[n[:60] or "empty" for n, _, _ in INVALID])
def test_names_ollama_refuses_fail_saying_which_part_breaks_which_rule(name, says, rule):
    with pytest.raises(InvalidOllamaModelName) as refused:
        parse_ollama_model(name)
    assert says in str(refused.value)


def test_the_table_is_big_enough_and_holds_the_issues_names():
    assert len(VALID) >= 15 and len(INVALID) >= 15
    names = [name for name, _ in VALID]
    assert "hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M" in names and "myreg:5000/team/llama3:8b" in names


@pytest.mark.parametrize(
    ("name", "parts", "qualified"),
    [
        (
            "hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M",
            ("hf.co", "bartowski", "Llama-3.2-3B-Instruct-GGUF", "Q4_K_M", None),
            "hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M",
        ),
        ("myreg:5000/team/llama3:8b", ("myreg:5000", "team", "llama3", "8b", None), "myreg:5000/team/llama3:8b"),
        (  # name_test.go TestParseNameParts "scheme://host:port/namespace/model:tag", with a scheme we take
            "https://host:port/namespace/model:tag",
            ("host:port", "namespace", "model", "tag", "https"),
            "host:port/namespace/model:tag",
        ),
        ("xx", (None, None, "xx", None, None), "registry.ollama.ai/library/xx:latest"),  # TestNameparseNameDefault
        ("mistral:7b", (None, None, "mistral", "7b", None), "registry.ollama.ai/library/mistral:7b"),
    ],
)
def test_parts_and_defaults_are_ollamas(name, parts, qualified):
    parsed = parse_ollama_model(name)
    assert (parsed.host, parsed.namespace, parsed.model, parsed.tag, parsed.scheme) == parts
    assert parsed.qualified == qualified


def test_the_length_cap_is_the_longest_name_ollama_allows():
    longest = f"https://{PART350}/{PART80}/{PART80}:{PART80}"
    assert len(longest) == MAX_LENGTH == 601
    assert parse_ollama_model(longest).text == longest


@pytest.mark.parametrize("name", [name for name, _ in VALID])
def test_every_model_field_keeps_the_name_exactly_as_given(name):
    assert InstanceSpec(model=name, gpus=1, memory_gb=1).model == name
    assert InstancePropertiesWrite(model=name, gpus=1, memory_gb=1).model == name
    flat = SparkOllamaInstanceCreate.model_validate({"name": "i", "model": name, "gpus": 1, "memory_gb": 1})
    assert flat.spec().model == name
    arm = SparkOllamaInstanceWrite.model_validate({"properties": {"model": name, "gpus": 1, "memoryGb": 1}})
    assert arm.spec().model == name and arm.model_dump(by_alias=True)["properties"]["model"] == name


@pytest.mark.parametrize(
    "model",
    [
        lambda name: InstanceSpec(model=name, gpus=1, memory_gb=1),
        lambda name: InstancePropertiesWrite(model=name, gpus=1, memory_gb=1),
        lambda name: SparkOllamaInstanceWrite.model_validate({"model": name, "gpus": 1, "memory_gb": 1}),
        lambda name: SparkOllamaInstanceWrite.model_validate({"properties": {"model": name, "gpus": 1, "memoryGb": 1}}),
    ],
    ids=["InstanceSpec", "InstancePropertiesWrite", "SparkOllamaInstanceWrite-flat", "SparkOllamaInstanceWrite-arm"],
)
def test_every_model_field_refuses_with_a_readable_400(model):
    with pytest.raises(ValidationError) as refused:
        model("x/y/z/w/v")
    error = invalid_content(refused.value.errors()).body()["error"]
    assert error["code"] == "InvalidRequestContent"
    assert error["message"].endswith(
        "The model name 'x/y/z/w/v' is not valid: the host 'x/y/z' may only contain letters, digits, '_', '-', "
        "'.' and ':' (not '/'); a name has at most three '/'-separated parts: 'host/namespace/model[:tag]'."
    )
    assert "pattern" not in error["message"] and "^" not in error["message"]


@pytest.mark.parametrize(
    ("name", "status", "family"),
    [
        ("myreg:5000/team/llama3:8b", 201, "llama3"),
        ("hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M", 201, "Llama-3.2-3B-Instruct-GGUF"),
        ("unknown:5000/team/llama3:8b", 201, "llama3"),  # a registry named 'unknown' is not an unknown model
        ("myreg:5000/team/unknown-model:1b", 400, None),
        ("unknown-model:1b", 400, None),
    ],
)
def test_the_dgx_simulator_reads_the_model_part_of_registry_names(name, status, family):
    # Given the DGX simulator, whose models starting with 'unknown' are refused
    simulator = DgxSimulator(SimulatorConfig(provisioning_seconds=0))
    client = TestClient(simulator.app)
    # When it is asked for an instance of a name with a registry and a port
    body = {"name": "i", "nodeId": "n1", "model": name, "gpus": 1, "memoryGb": 80}
    created = client.post("/v1/instances", json=body, headers={"Idempotency-Key": "k"})
    # Then it looks at the model part (after the last '/', before the tag), never the host or the port
    assert created.status_code == status, created.text
    if family is not None:
        tags = client.get(f"/ollama/{created.json()['id']}/api/tags").json()["models"]
        assert [(t["name"], t["details"]["family"]) for t in tags] == [(name, family)]
