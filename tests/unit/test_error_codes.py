"""Every error code lives in errors.py and reaches the API's documentation: a code cannot be answered without being
documented, nor spelled anywhere else."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import itl_accelerator
from itl_accelerator import errors
from itl_local.template import Template

PACKAGE = Path(itl_accelerator.__file__).parent
OPENAPI = (PACKAGE.parents[2] / "docs" / "openapi.json").read_text()


def test_every_http_error_code_is_documented_in_the_openapi_document():
    documented = set(re.findall(r"`error\.code` one of: ([^.]+)\.", OPENAPI))
    codes = {c.strip() for line in documented for c in line.split(",")}
    missing = {e.code for e in errors.all_error_types()} - codes
    assert not missing, f"codes no route documents: {sorted(missing)}"


def test_error_classes_and_codes_are_defined_in_errors_py_only():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                getattr(b, "id", getattr(b, "attr", "")) in {e.__name__ for e in errors.all_error_types()}
                for b in node.bases
            ):
                offenders.append(f"{path.name}: class {node.name}")
            if isinstance(node, ast.keyword) and node.arg == "code":
                offenders.append(f"{path.name}:{node.lineno}: code=")
            if isinstance(node, ast.Dict) and any(
                isinstance(k, ast.Constant)
                and k.value == "error"
                and isinstance(v, ast.Dict)
                and any(isinstance(kk, ast.Constant) and kk.value == "code" for kk in v.keys)
                for k, v in zip(node.keys, node.values, strict=True)
            ):
                offenders.append(f"{path.name}:{node.lineno}: a hand-built error body")
    assert not offenders, offenders


def test_operation_error_codes_the_workflows_write_are_the_documented_ones():
    written = set()
    for path in (PACKAGE / "services").glob("*.py"):
        written |= set(re.findall(r'"code": "([A-Za-z]+)"', path.read_text()))
    assert written <= set(errors.OPERATION_ERROR_CODES), written - set(errors.OPERATION_ERROR_CODES)
    schema = json.loads(OPENAPI)["components"]["schemas"]["OperationError"]["description"]
    assert all(code in schema for code in errors.OPERATION_ERROR_CODES)


def test_api_gateways_own_answers_use_codes_of_errors_py():
    responses = Template().gateway_responses()
    codes = {json.loads(r["ResponseTemplates"]["application/json"])["error"]["code"] for r in responses.values()}
    assert codes <= {e.code for e in errors.all_error_types()}, codes
