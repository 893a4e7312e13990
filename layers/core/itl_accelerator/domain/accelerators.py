"""Accelerators: what a node holds and what a job asks for — GPUs, TPUs, NPUs and the others (issue 29).

An accelerator has a **kind** (GPU, TPU, NPU, HPU, Neuron, ... an open set: any word of 2 to 16 letters and digits
is taken, the known ones in their usual spelling), a **vendor** (NVIDIA, AMD, Google, AWS, Intel, Huawei, ...), a
**model** (H100, MI300X, v5e, Gaudi3, Ascend910B, ...) and memory per device (GiB). The field names them so:
Kubernetes exposes each as an extended resource named by its vendor (``nvidia.com/gpu``, ``amd.com/gpu``,
``google.com/tpu``, ``aws.amazon.com/neuron``, ``habana.ai/gaudi``); Kueue's ResourceFlavors hold quotas per kind and
flavor; Slurm's GRES asks ``gpu:a100:2``.

**A node holds a count of one kind and model.** Placement's best fit, a node's capacity counters and its price per
accelerator-hour are all about one kind of device: a box with GPUs and NPUs is registered as two nodes (as Kueue
gives each kind a flavor of its own, and a cloud prices each device type apart). A TPU slice's ``topology``
(``2x4``) is described on the node, for the platform.

**Keys.** Placement, quotas and fleet shapes compare an accelerator by its *key*: for GPUs the model key alone
(:func:`model_key`: ``"H100 SXM"`` → ``h100sxm``), exactly as before there were other kinds, so every item stored by
earlier code (a node's ``gpuModelKey``, a shape, a quota scope) still names the same GPUs; for any other kind
``{kind}:{model}`` in lower case (``tpu:v5e``; ``tpu:`` when no model is named). A GPU node or job stored before kinds
existed has no kind attribute: it is a GPU (:data:`GPU`), an NVIDIA one when the vendor is not said.

**One spelling, decided where a value enters** (:func:`canonical_kind`, :func:`canonical_vendor`, :func:`model_key`):
a known kind or vendor in its usual spelling, any other kind in capitals (``fpga``, ``Fpga`` → ``FPGA``: kinds are
acronyms), any other vendor as first sent but compared without case (:func:`vendor_key`). Every comparison — admission,
a price ceiling, quota names, placement, offers — goes through them, so two spellings of one kind never differ.

**Vendor of a request** (:func:`job_vendor`). A job that names no vendor and no model asks for its kind's usual
vendor (:data:`DEFAULT_VENDORS`): the seed's GPU forms (``requestedGpus``, ``accelerator: {kind: GPU}``) mean NVIDIA
GPUs — a CUDA image fails on an AMD (ROCm) box, so that is what such a user meant. A job that names a model asks for
that model, whoever makes it (``MI300X`` is AMD's); ``vendor: Any`` asks for any vendor's devices of the kind.

**Ollama** runs on NVIDIA GPUs (CUDA) and AMD GPUs (ROCm) — Ollama's own documentation, "GPU support"; an instance on
a node of any other kind or vendor is refused (:func:`runs_ollama`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: The kind every item stored before kinds existed holds, and the seed's forms mean.
GPU = "GPU"
#: The known kinds, by their lower-case name: their usual spelling.
KNOWN_KINDS: dict[str, str] = {
    "gpu": "GPU",
    "tpu": "TPU",
    "npu": "NPU",
    "hpu": "HPU",  # Intel Gaudi (Habana's name for its devices)
    "neuron": "Neuron",  # AWS Trainium and Inferentia (the Neuron SDK's devices)
    "lpu": "LPU",
    "ipu": "IPU",
}
#: An accelerator kind as a request may spell one (an open set).
KIND_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9]{1,15}$")

#: The vendor a GPU is when none is said (the seed's DGX boxes).
DEFAULT_GPU_VENDOR = "NVIDIA"
#: The vendor of a kind one vendor makes (or the seed meant), when a node or a job says none.
DEFAULT_VENDORS: dict[str, str] = {GPU: DEFAULT_GPU_VENDOR, "TPU": "Google", "Neuron": "AWS", "HPU": "Intel"}
#: What a job says for "devices of its kind from any vendor".
ANY_VENDOR = "Any"
#: The known vendors, by their lower-case name: their usual spelling.
KNOWN_VENDORS: dict[str, str] = {
    "nvidia": "NVIDIA",
    "amd": "AMD",
    "google": "Google",
    "aws": "AWS",
    "amazon": "AWS",
    "intel": "Intel",
    "habana": "Intel",
    "huawei": "Huawei",
    "qualcomm": "Qualcomm",
    "groq": "Groq",
    "graphcore": "Graphcore",
}
#: Kubernetes' extended resource of each known (vendor, kind): what a device plugin advertises.
RESOURCE_NAMES: dict[tuple[str, str], str] = {
    ("NVIDIA", "GPU"): "nvidia.com/gpu",
    ("AMD", "GPU"): "amd.com/gpu",
    ("Intel", "GPU"): "gpu.intel.com/i915",
    ("Google", "TPU"): "google.com/tpu",
    ("AWS", "Neuron"): "aws.amazon.com/neuron",
    ("Intel", "HPU"): "habana.ai/gaudi",
    ("Huawei", "NPU"): "huawei.com/Ascend910",
}
#: Where Ollama runs (Ollama's documentation, "GPU support": NVIDIA through CUDA, AMD through ROCm).
OLLAMA_ACCELERATORS: frozenset[tuple[str, str]] = frozenset({("GPU", "NVIDIA"), ("GPU", "AMD")})


def canonical_kind(kind: str) -> str:
    """A kind in its usual spelling (``tpu`` → ``TPU``, ``neuron`` → ``Neuron``); an unknown one in capitals
    (``fpga`` → ``FPGA``), so every spelling of it is one kind (module docstring). ``ValueError`` for one that is not 2
    to 16 letters and digits, starting with a letter."""
    if not KIND_PATTERN.match(kind):
        raise ValueError(f"'{kind[:40]}' is not an accelerator kind: 2 to 16 letters and digits (GPU, TPU, NPU...).")
    return KNOWN_KINDS.get(kind.lower(), kind.upper())


def stored_kind(kind: str | None) -> str:
    """A kind as an item stored it, in the spelling :func:`canonical_kind` gives now (None or "": a GPU, stored before
    kinds existed; a stored value that is no kind at all is kept as it is)."""
    if not kind:
        return GPU
    try:
        return canonical_kind(kind)
    except ValueError:
        return kind


def canonical_vendor(vendor: str) -> str:
    """A vendor in its usual spelling (``nvidia`` → ``NVIDIA``, ``any`` → :data:`ANY_VENDOR`); an unknown one as
    sent (compare vendors with :func:`vendor_key`)."""
    if vendor.lower() == ANY_VENDOR.lower():
        return ANY_VENDOR
    return KNOWN_VENDORS.get(vendor.lower(), vendor)


def vendor_key(vendor: str | None) -> str:
    """A vendor as placement, shapes and offers compare it: lower case, its usual name's for a known one ("" for
    none)."""
    return canonical_vendor(vendor).lower() if vendor else ""


def job_vendor(kind: str, model: str | None, said: str | None) -> str | None:
    """The vendor a job's devices must come from (module docstring, "Vendor of a request"): the vendor it said; none
    (any) when it said :data:`ANY_VENDOR` or named a model; else its kind's usual vendor (NVIDIA for GPUs), or none
    for a kind several vendors make."""
    if said:
        named = canonical_vendor(said)
        return None if named == ANY_VENDOR else named
    if model_key(model):
        return None
    return DEFAULT_VENDORS.get(canonical_kind(kind))


def shown_vendor(kind: str, model: str | None, said: str | None) -> str | None:
    """``accelerator.vendor`` as a job shows it: what it said (:data:`ANY_VENDOR` too), else the vendor it gets by
    default (:func:`job_vendor`; None when any)."""
    return canonical_vendor(said) if said else job_vendor(kind, model, None)


def model_key(model: str | None) -> str:
    """A model as placement compares it: lower case, without spaces (``"H100 SXM"`` → ``"h100sxm"``)."""
    return "".join((model or "").lower().split())


def accelerator_key(kind: str, model: str | None) -> str:
    """What placement, quotas and shapes compare (module docstring, "Keys"): a GPU's model key (``h100``, "" for any
    or unknown model), any other kind's ``{kind}:{model}`` in lower case (``tpu:v5e``, ``tpu:``)."""
    if kind.lower() == GPU.lower():
        return model_key(model)
    return f"{kind.lower()}:{model_key(model)}"


def kind_of_key(key: str) -> str:
    """The kind an :func:`accelerator_key` names (``h100`` → ``GPU``, ``tpu:v5e`` → ``TPU``)."""
    if ":" not in key:
        return GPU
    kind = key.partition(":")[0]
    return KNOWN_KINDS.get(kind, kind)


def model_of_key(key: str) -> str:
    """The model key an :func:`accelerator_key` names ("" for any or unknown)."""
    return key.partition(":")[2] if ":" in key else key


def kind_token(kind: str) -> str:
    """A kind as a key part: lower case (``TPU`` → ``tpu``)."""
    return kind.lower()


def runs_ollama(kind: str, vendor: str) -> bool:
    """Whether an Ollama instance may run on a device of ``kind`` from ``vendor`` (:data:`OLLAMA_ACCELERATORS`)."""
    return (canonical_kind(kind), canonical_vendor(vendor)) in OLLAMA_ACCELERATORS


def ollama_kinds_text() -> str:
    """The accelerators Ollama runs on, as an error message says them."""
    return "NVIDIA GPUs (CUDA) and AMD GPUs (ROCm)"


@dataclass(frozen=True)
class Accelerator:
    """A node's devices: ``count`` of one ``kind``, ``vendor`` and ``model``, each with ``memory_gb`` GiB of device
    memory (0 when unknown); ``topology`` of a TPU slice (``2x4``) when said."""

    kind: str
    vendor: str
    model: str
    count: int
    memory_gb: int = 0
    topology: str | None = None

    @property
    def key(self) -> str:
        """:func:`accelerator_key` of its kind and model."""
        return accelerator_key(self.kind, self.model)

    @property
    def resource_name(self) -> str | None:
        """Kubernetes' extended resource for it (``nvidia.com/gpu``), when the vendor and kind are known."""
        return RESOURCE_NAMES.get((self.vendor, self.kind))

    def for_platform(self) -> dict[str, str]:
        """What the DGX Platform is told it runs on (docs/dgx-platform.openapi.yaml ``Accelerator``): kind, vendor,
        model, and a TPU slice's topology (the platform lays the job out on it)."""
        told = {"kind": self.kind, "vendor": self.vendor, "model": self.model, "topology": self.topology or ""}
        return {name: value for name, value in told.items() if value}

    def as_properties(self) -> dict[str, object]:
        """``properties.accelerator`` of a node (wire names)."""
        shown: dict[str, object] = {
            "kind": self.kind,
            "vendor": self.vendor,
            "model": self.model,
            "count": self.count,
        }
        if self.memory_gb:
            shown["memoryGbPerDevice"] = self.memory_gb
        if self.topology:
            shown["topology"] = self.topology
        if self.resource_name:
            shown["resourceName"] = self.resource_name
        return shown

    @classmethod
    def of_properties(cls, properties: dict[str, object]) -> Accelerator:
        """A node's accelerator from its document's ``properties``: ``accelerator`` when it has one, else — a node
        stored before kinds existed — its ``hardwareSpecs`` GPUs (an NVIDIA GPU when no vendor is said)."""
        given = properties.get("accelerator")
        if isinstance(given, dict):
            kind = stored_kind(str(given.get("kind") or GPU))
            return cls(
                kind=kind,
                vendor=canonical_vendor(str(given.get("vendor") or DEFAULT_VENDORS.get(kind, ""))),
                model=str(given.get("model") or ""),
                count=int(given.get("count") or 0),
                memory_gb=int(given.get("memoryGbPerDevice") or 0),
                topology=str(given["topology"]) if given.get("topology") else None,
            )
        specs = properties.get("hardwareSpecs")
        specs = specs if isinstance(specs, dict) else {}
        return cls(
            kind=GPU,
            vendor=DEFAULT_GPU_VENDOR,
            model=str(specs.get("gpuModel") or ""),
            count=int(specs.get("gpuCount") or 0),
            memory_gb=int(specs.get("gpuMemoryGb") or 0),
        )


def quota_plural(kind: str) -> str:
    """The quota name of every device of ``kind`` in a location: ``gpus``, ``tpus``, ``neurons``."""
    return f"{kind.lower()}s"


def display_plural(kind: str) -> str:
    """A kind in a sentence, plural (``GPUs``, ``TPUs``, ``Neurons``)."""
    return f"{kind}s"
