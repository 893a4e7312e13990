"""sparkOllamaInstances: an Ollama LLM server provisioned on a node, on the DGX Platform.

Units: ``gpus`` GPUs; ``memory_gb`` GiB of GPU memory reserved on the node. ``model`` is an Ollama model name,
``[[http://|https://]host[:port]/][namespace/]model[:tag]``, accepted and refused as Ollama itself does
(:mod:`itl_accelerator.models.ollama_names`, after Ollama's ``types/model/name.go``): ``mistral:7b``,
``library/llama3.1:8b-instruct-q4_0``, ``hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M``,
``myreg:5000/team/llama3:8b``. Letters of either case; at most three ``/``-separated parts; a tag only after the last
``/``; no ``@digest``; a scheme only ``http`` or ``https``; at most 601 characters. A refused name is a 400
``InvalidRequestContent`` saying which part breaks which rule. The name is kept exactly as given: stored, returned
and sent to the DGX Platform unchanged.
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Any

from pydantic import AfterValidator, Field, WithJsonSchema, model_validator

from itl_accelerator.models.common import (
    ApiModel,
    BillingTermsLocked,
    ProvisioningState,
    SystemData,
    lift_flat_fields,
)
from itl_accelerator.models.ollama_names import MAX_LENGTH, parse_ollama_model


def _valid_ollama_model(value: str) -> str:
    """``value`` unchanged when Ollama would accept it; otherwise the ValueError that names the part and rule."""
    parse_ollama_model(value)
    return value


#: A model name as Ollama accepts it, kept exactly as given. The schema documents the rules in words: the 400 says
#: which part breaks which rule, never a regular expression.
OllamaModel = Annotated[
    str,
    AfterValidator(_valid_ollama_model),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_LENGTH,
            "description": (
                "An Ollama model name, accepted as Ollama accepts it (types/model/name.go): "
                "[[http://|https://]host[:port]/][namespace/]model[:tag]. Each part starts with a letter, a digit or "
                "'_'; the host may contain letters, digits, '_', '-', '.', ':' (up to 350 characters), the "
                "namespace letters, digits, '_', '-' (up to 80), the model and the tag letters, digits, '_', '-', "
                "'.' (up to 80 each). Kept exactly as given."
            ),
            "examples": [
                "mistral:7b",
                "hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M",
                "myreg:5000/team/llama3:8b",
            ],
        }
    ),
]


#: The seed's flat spellings of an instance's properties → their property names (models/common.lift_flat_fields).
_FLAT_FIELDS = {"model": "model", "gpus": "gpus", "memory_gb": "memoryGb", "memoryGb": "memoryGb"}


class InstanceSpec(ApiModel):
    """What to run: model, GPUs (1-64), GPU memory in GiB (1-65536)."""

    model: OllamaModel
    gpus: int = Field(strict=True, ge=1, le=64)
    memory_gb: int = Field(strict=True, ge=1, le=65536)

    def fingerprint(self) -> str:
        """Stable hash of the spec: an identical retry of a create has the same fingerprint."""
        canonical = json.dumps(self.model_dump(mode="json", by_alias=True), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


class InstancePropertiesWrite(ApiModel):
    """ARM ``properties`` of a PUT: the spec, plus read-only fields a client may echo back."""

    model: OllamaModel
    gpus: int = Field(strict=True, ge=1, le=64)
    memory_gb: int = Field(strict=True, ge=1, le=65536)
    provisioning_state: str | None = None
    endpoint: str | None = None
    node_id: str | None = None
    operation_id: str | None = None
    error: dict[str, Any] | None = None
    billing_terms: dict[str, Any] | None = None


class SparkOllamaInstanceWrite(ApiModel):
    """PUT body: ``{"properties": {"model", "gpus", "memoryGb"}}``. The seed's flat form
    (``{"model", "gpus", "memory_gb"}``) is accepted too; mixing both with different values → 400."""

    name: str | None = None
    id: str | None = None
    type: str | None = None
    etag: str | None = None
    system_data: dict[str, Any] | None = None
    model: OllamaModel | None = None
    gpus: int | None = Field(strict=True, default=None, ge=1, le=64)
    memory_gb: int | None = Field(strict=True, default=None, ge=1, le=65536)
    properties: InstancePropertiesWrite | None = None

    @model_validator(mode="before")
    @classmethod
    def _flat_to_properties(cls, data: Any) -> Any:
        return lift_flat_fields(data, _FLAT_FIELDS, keep_flat=True)

    @model_validator(mode="after")
    def _require_spec(self) -> SparkOllamaInstanceWrite:
        if self.properties is None:
            raise ValueError("properties.model, properties.gpus and properties.memoryGb are required.")
        return self

    def spec(self) -> InstanceSpec:
        """The requested spec."""
        assert self.properties is not None
        p = self.properties
        return InstanceSpec(model=p.model, gpus=p.gpus, memory_gb=p.memory_gb)


class SparkOllamaInstanceCreate(SparkOllamaInstanceWrite):
    """The seed's POST body: ``{"name": "instance-1", "model": "mistral:7b", "gpus": 2, "memory_gb": 160}``."""

    name: str


class OperationError(ApiModel):
    """Why an operation or a provisioning failed. ``code``: one of ProvisioningFailed, DgxPlatformRefused,
    DgxPlatformUnavailable, ProvisioningTimedOut, ProvisioningInterrupted, InstanceLost, DeprovisioningFailed,
    DeprovisioningTimedOut, JobFailed, JobCanceled, JobAlreadyFinished (errors.OPERATION_ERROR_CODES), or a code the
    DGX Platform reported."""

    code: str
    message: str


class SparkOllamaInstanceProperties(ApiModel):
    """Instance properties as returned; ``endpoint`` is the Ollama base URL once ``Succeeded``; ``billingTerms``
    the node's pricing locked when the provisioning reserved the GPUs (what the instance is billed by)."""

    model: str
    gpus: int
    memory_gb: int
    billing_terms: BillingTermsLocked | None = None
    provisioning_state: ProvisioningState
    endpoint: str | None = None
    operation_id: str | None = None
    error: OperationError | None = None


class SparkOllamaInstance(ApiModel):
    """An instance as returned (ARM proxy/child resource envelope)."""

    id: str
    name: str
    type: str
    etag: str
    system_data: SystemData
    properties: SparkOllamaInstanceProperties


class AcceptedInstance(SparkOllamaInstance):
    """The seed's 202 body: the instance plus ``status_url`` (the Azure-AsyncOperation URL)."""

    status_url: str = Field(alias="status_url")


class OperationStatus(ApiModel):
    """ARM operation status (Azure-AsyncOperation): ``status`` ends in ``Succeeded``, ``Failed`` or ``Canceled``."""

    id: str
    name: str
    status: str
    start_time: str
    end_time: str | None = None
    percent_complete: float | None = None
    resource_id: str | None = None
    error: OperationError | None = None
