"""Ollama model names: accepted and refused as Ollama itself accepts and refuses them.

The rules are Ollama's own: ``types/model/name.go`` (``ParseName``, ``ParseNameBare``, ``IsValid``, ``isValidPart``)
of github.com/ollama/ollama at commit fb30760996871fa9460115c753afd2c60d4ab0f7, whose table of valid and invalid
names is ``types/model/name_test.go`` (``testCases``, ``TestParseNameParts``) at the same commit.

- A ``:`` after the last ``/`` starts the tag: ``myreg:5000/team/llama3:8b`` has the host ``myreg:5000`` and the
  tag ``8b``; a ``:`` before the last ``/`` is never read as a tag.
- The rest is cut at ``/`` from the right: the model, then the namespace, and all that remains is the host,
  optionally written ``scheme://host``. So a name has at most three ``/``-separated parts.
- A part left out takes Ollama's default (host ``registry.ollama.ai``, namespace ``library``, tag ``latest``); a part
  promised by a separator but empty (``a//b``, ``/m``, ``m:``) makes the name invalid.
- Every part starts with a letter, a digit or ``_``; then the host may contain letters, digits, ``_ - . :``
  (1-350 characters), the namespace letters, digits, ``_ -`` (1-80; no dots), the model and the tag letters,
  digits, ``_ - .`` (1-80 each). Letters are ASCII letters of either case: ``hf.co/bartowski/Llama-3.2-3B-...``.
- ``@digest`` is not accepted: name.go no longer parses digests and ``@`` is in no part's alphabet.

One choice of ours, narrower than Ollama: Ollama takes any text before ``://`` as the registry's protocol scheme (an
empty one meaning ``https``), and a pull with a scheme other than ``http`` or ``https`` fails only when it starts (Go's
HTTP client speaks those two alone). Here a scheme, when written, must be ``http`` or ``https``, so that a name which
cannot be pulled is refused with the request, not minutes later by a failed provisioning. (Ollama pulls over ``http``
only when told to pull insecurely.)

Not names, so refused here too: Ollama's API (``internal/modelref``, before ``ParseName``) trims spaces around a name
and reads a trailing ``:cloud`` or ``:local`` as where to run it (``gpt-oss:20b:cloud``); an instance runs its model
on the node's GPUs, and the name is passed on as given.

The name is checked, never rewritten: what the client sent is what is stored, returned and sent to the DGX Platform.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

DEFAULT_HOST = "registry.ollama.ai"
DEFAULT_NAMESPACE = "library"
DEFAULT_TAG = "latest"
SCHEMES = ("http", "https")

#: The longest name the part limits allow: ``https://`` + host (350) + ``/`` + namespace (80) + ``/`` + model (80)
#: + ``:`` + tag (80). Checked first, so a huge value is refused without being parsed or echoed back.
MAX_LENGTH = len("https://") + 350 + 1 + 80 + 1 + 80 + 1 + 80

_FIRST = frozenset(string.ascii_letters + string.digits + "_")
#: Per part: (longest length, allowed characters after the first, those characters in words).
_RULES: dict[str, tuple[int, frozenset[str], str]] = {
    "host": (350, _FIRST | frozenset("-.:"), "letters, digits, '_', '-', '.' and ':'"),
    "namespace": (80, _FIRST | frozenset("-"), "letters, digits, '_' and '-'"),
    "model": (80, _FIRST | frozenset("-."), "letters, digits, '_', '-' and '.'"),
    "tag": (80, _FIRST | frozenset("-."), "letters, digits, '_', '-' and '.'"),
}
_PROMISED_BY = {"host": "'/'", "namespace": "'/'", "model": "'/' or ':'", "tag": "':'"}


class InvalidOllamaModelName(ValueError):
    """A model name Ollama would refuse; the message names the part and the rule it breaks."""


@dataclass(frozen=True)
class OllamaModelName:
    """A valid Ollama model name, ``text`` exactly as given, with its parts (None: left out, Ollama's default)."""

    text: str
    model: str
    tag: str | None = None
    namespace: str | None = None
    host: str | None = None
    scheme: str | None = None

    @property
    def qualified(self) -> str:
        """The name Ollama resolves it to, ``host/namespace/model:tag`` with the defaults (name.go ``String``)."""
        host, namespace = self.host or DEFAULT_HOST, self.namespace or DEFAULT_NAMESPACE
        return f"{host}/{namespace}/{self.model}:{self.tag or DEFAULT_TAG}"


def parse_ollama_model(value: str) -> OllamaModelName:
    """Parse ``value`` as Ollama's ``ParseName`` does and check it as ``IsValid`` does (module docstring).

    Raises :class:`InvalidOllamaModelName` saying which part breaks which rule."""
    if len(value) > MAX_LENGTH:
        raise InvalidOllamaModelName(
            f"The model name is {len(value)} characters long; at most {MAX_LENGTH} are accepted "
            "(the longest name Ollama's part limits allow)."
        )
    if not value:
        raise InvalidOllamaModelName("The model name is empty.")
    # ParseNameBare, cut by cut. An empty string where a separator promised a part stands for name.go's MissingPart.
    rest, tag = value, None
    colon = value.rfind(":")
    if colon > value.rfind("/"):
        rest, tag = value[:colon], value[colon + 1 :]
    namespace = host = scheme = None
    if "/" not in rest:
        model = rest
    else:
        rest, _, model = rest.rpartition("/")
        if "/" not in rest:
            namespace = rest
        else:
            rest, _, namespace = rest.rpartition("/")
            before, sep, after = rest.partition("://")
            if sep:
                scheme, host = before, after or None  # an empty host after the scheme takes the default (Merge)
            else:
                host = rest
    parts = {"host": host, "namespace": namespace, "model": model, "tag": tag}

    def invalid(reason: str) -> InvalidOllamaModelName:
        return InvalidOllamaModelName(f"The model name '{value}' is not valid: {reason}.")

    if scheme is not None and scheme not in SCHEMES:
        said = f"the scheme '{scheme}' is not" if scheme else "the scheme before '://' is empty, not"
        raise invalid(f"{said} 'http' or 'https', the only schemes a pull can use")
    for kind, part in parts.items():  # IsFullyQualified: host, namespace, model, tag, in this order
        if part is not None:
            problem = _part_problem(kind, part)
            if problem:
                raise invalid(problem)
    return OllamaModelName(text=value, model=model, tag=tag, namespace=namespace, host=host, scheme=scheme)


def _part_problem(kind: str, part: str) -> str | None:
    """Why ``part`` is not a valid ``kind`` (name.go ``isValidLen`` then ``isValidPart``), or None."""
    longest, allowed, in_words = _RULES[kind]
    if not part:
        return f"the {kind} is empty, but a {_PROMISED_BY[kind]} promises one"
    if len(part) > longest:
        return f"the {kind} is {len(part)} characters long; at most {longest} are allowed"
    if part[0] not in _FIRST:
        return f"the {kind} '{part}' must start with a letter, a digit or '_'{_hint(kind, part[0])}"
    bad = next((c for c in part[1:] if c not in allowed), None)
    if bad is not None:
        return f"the {kind} '{part}' may only contain {in_words} (not '{bad}'){_hint(kind, bad)}"
    return None


def _hint(kind: str, bad: str) -> str:
    """What the client most likely meant, for the mistakes that have a usual cause."""
    if bad == "@":
        return "; Ollama does not accept '@digest' references"
    if kind == "namespace" and bad in ":.":
        return "; a registry host is followed by a namespace: 'host[:port]/namespace/model[:tag]'"
    if kind == "host" and bad == "/":
        return "; a name has at most three '/'-separated parts: 'host/namespace/model[:tag]'"
    return ""
