"""JSON Schemas of the tools, made from the API's own models.

``api_schemas.json`` beside this module is ``components.schemas`` of docs/openapi.json, which FastAPI generates from
the API's pydantic models (layers/core/itl_accelerator/models). It is copied, not hand-written: ``./dev generate``
writes it with :func:`render` (tools/generate.py), and a test fails when it is stale. The package ships the copy
because neither the Lambda function nor the stdio server has the repository's docs.

A tool's schema refers to the API's models as ``{"$ref": "#/$defs/<Model>"}`` and carries, under ``$defs``, every
model it reaches; a tool argument that is one field of an API model gets that field's own schema.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_FILE = Path(__file__).with_name("api_schemas.json")
_OPENAPI_PREFIX = "#/components/schemas/"
_DEFS_PREFIX = "#/$defs/"


@cache
def components() -> dict[str, Any]:
    """The API's component schemas by name (``SparkJob``, ``SparkJobPropertiesWrite``, ...)."""
    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
    return loaded


def _rewrite(node: Any, found: set[str]) -> Any:
    """A deep copy of ``node`` with OpenAPI refs turned into ``$defs`` refs; the names it refers to go to ``found``."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith(_OPENAPI_PREFIX):
                name = value.removeprefix(_OPENAPI_PREFIX)
                found.add(name)
                out[key] = _DEFS_PREFIX + name
            elif key == "$ref" and isinstance(value, str) and value.startswith(_DEFS_PREFIX):
                found.add(value.removeprefix(_DEFS_PREFIX))
                out[key] = value
            else:
                out[key] = _rewrite(value, found)
        return out
    if isinstance(node, list):
        return [_rewrite(v, found) for v in node]
    return node


def model(name: str) -> dict[str, Any]:
    """``{"$ref": "#/$defs/<name>"}`` (``KeyError`` when the API has no such model)."""
    components()[name]
    return {"$ref": _DEFS_PREFIX + name}


def field(model_name: str, field_name: str, description: str | None = None) -> dict[str, Any]:
    """The schema of one field of an API model (refs rewritten), with ``description`` when given. ``KeyError`` when
    the model has no such field."""
    schema: dict[str, Any] = _rewrite(components()[model_name]["properties"][field_name], set())
    if description:
        schema["description"] = description
    return schema


def complete(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with ``$defs`` holding every API model it refers to, directly or through other models."""
    found: set[str] = set()
    out: dict[str, Any] = _rewrite(copy.deepcopy(schema), found)
    defs: dict[str, Any] = {}
    pending = sorted(found)
    while pending:
        name = pending.pop()
        if name in defs:
            continue
        more: set[str] = set()
        defs[name] = _rewrite(components()[name], more)
        pending.extend(sorted(more - set(defs)))
    if defs:
        out["$defs"] = dict(sorted(defs.items()))
    return out


def model_schema(name: str) -> dict[str, Any]:
    """One API model as a self-contained schema (its own fields, with ``$defs``): an MCP output schema must be an
    object schema, not a ``$ref``."""
    return complete(components()[name])


def obj(properties: dict[str, dict[str, Any]], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """An object schema with ``properties``, ``required`` and no other properties, completed with its ``$defs``."""
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False, **extra}
    if required:
        schema["required"] = required
    return complete(schema)


def extract(openapi: dict[str, Any]) -> dict[str, Any]:
    """``components.schemas`` of an OpenAPI document (what ``api_schemas.json`` holds)."""
    schemas: dict[str, Any] = openapi["components"]["schemas"]
    return schemas


def render(openapi: dict[str, Any]) -> str:
    """The text of ``api_schemas.json`` for an OpenAPI document."""
    return json.dumps(extract(openapi), indent=1, sort_keys=True) + "\n"
