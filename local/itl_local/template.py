"""Reads template.yaml (CloudFormation tags included, via cfn-lint's decoder) into what the local runtime needs:
the API routes and their handlers, the authorizer, gateway responses, and the DynamoDB table definition.

Only what the template declares is served locally: a route missing from the template is missing here too.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from cfnlint.decode import decode_str

#: template.yaml at the repository root (the local runtime runs from a checkout, never from a package).
DEFAULT_TEMPLATE = Path(__file__).resolve().parents[2] / "template.yaml"


@dataclass(frozen=True)
class Route:
    """One API event of a function: ``method`` (upper case), ``path`` template, the function's logical id and
    handler string, and whether the API's default authorizer applies."""

    method: str
    path: str
    function_id: str
    handler: str
    authorized: bool = True
    pattern: re.Pattern[str] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        regex = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.path)) + "$"
        object.__setattr__(self, "pattern", re.compile(regex))

    def match(self, path: str) -> dict[str, str] | None:
        """Path parameters when ``path`` matches this route's template (case-sensitive, as API Gateway)."""
        found = self.pattern.match(path)
        return found.groupdict() if found else None


def load_handler(handler: str) -> Any:
    """``itl_functions.spark_nodes.get`` → the callable, imported as Lambda would."""
    module, _, attr = handler.rpartition(".")
    return getattr(importlib.import_module(module), attr)


class Template:
    """A parsed SAM template."""

    def __init__(self, path: Path = DEFAULT_TEMPLATE):
        self.path = path
        doc, matches = decode_str(path.read_text())
        if matches:
            raise ValueError(f"{path}: {matches[0]}")
        self.doc: dict[str, Any] = doc

    @property
    def resources(self) -> dict[str, Any]:
        return self.doc["Resources"]

    def functions(self) -> dict[str, dict[str, Any]]:
        """Logical id → Properties of every AWS::Serverless::Function."""
        return {k: v["Properties"] for k, v in self.resources.items() if v["Type"] == "AWS::Serverless::Function"}

    def function_timeout(self, logical_id: str) -> int:
        """A function's ``Timeout`` (seconds), or the template's global one (Lambda's default, 3 s, without)."""
        own = self.functions()[logical_id].get("Timeout")
        return int(own or self.doc.get("Globals", {}).get("Function", {}).get("Timeout", 3))

    def buckets(self) -> list[str]:
        """Logical ids of the template's S3 buckets."""
        return sorted(k for k, v in self.resources.items() if v["Type"] == "AWS::S3::Bucket")

    @cached_property
    def routes(self) -> list[Route]:
        """Every Api event of every function. Literal paths sort before templated ones, as API Gateway prefers."""
        routes = []
        for function_id, props in self.functions().items():
            for event in (props.get("Events") or {}).values():
                if event.get("Type") != "Api":
                    continue
                p = event["Properties"]
                auth = (p.get("Auth") or {}).get("Authorizer")
                routes.append(Route(p["Method"].upper(), p["Path"], function_id, props["Handler"], auth != "NONE"))
        return sorted(routes, key=lambda r: (r.path.count("{"), -len(r.path)))

    def api(self) -> dict[str, Any]:
        """Properties of the AWS::Serverless::Api."""
        return next(v["Properties"] for v in self.resources.values() if v["Type"] == "AWS::Serverless::Api")

    def authorizer_handler(self) -> str:
        """Handler string of the API's default authorizer function."""
        auth = self.api()["Auth"]
        arn = auth["Authorizers"][auth["DefaultAuthorizer"]]["FunctionArn"]
        logical_id = arn["Fn::GetAtt"][0] if isinstance(arn["Fn::GetAtt"], list) else arn["Fn::GetAtt"].split(".")[0]
        return self.functions()[logical_id]["Handler"]

    def authorizer_identity_headers(self) -> list[str]:
        """Identity source headers: API Gateway answers 401 without calling the authorizer when one is missing."""
        auth = self.api()["Auth"]
        return list(auth["Authorizers"][auth["DefaultAuthorizer"]].get("Identity", {}).get("Headers", []))

    def gateway_responses(self) -> dict[str, dict[str, Any]]:
        """GatewayResponses by type (UNAUTHORIZED, MISSING_AUTHENTICATION_TOKEN, ...)."""
        return dict(self.api().get("GatewayResponses") or {})

    def resolve(self, value: Any, parameters: dict[str, str] | None = None) -> Any:
        """``value`` with the intrinsic functions a local runtime can evaluate resolved: ``Ref`` of a parameter,
        ``Fn::Sub`` (string form, ``${Parameter}``), ``Fn::If`` with the template's conditions, ``Fn::Equals`` and
        ``Fn::Not``. Parameters are ``parameters``, else the template's defaults. ``ValueError`` for anything else."""
        values = {k: str(v.get("Default", "")) for k, v in (self.doc.get("Parameters") or {}).items()}
        values.update(parameters or {})

        def walk(node: Any) -> Any:
            if not isinstance(node, dict) or len(node) != 1:
                return node
            ((fn, arg),) = node.items()
            if fn == "Ref" and arg in values:
                return values[arg]
            if fn == "Fn::Sub" and isinstance(arg, str):
                return re.sub(r"\$\{([\w:]+)\}", lambda m: values[m[1]], arg)
            if fn == "Fn::If":
                condition = walk((self.doc.get("Conditions") or {})[arg[0]])
                return walk(arg[1] if condition else arg[2])
            if fn == "Fn::Equals":
                return walk(arg[0]) == walk(arg[1])
            if fn == "Fn::Not":
                return not walk(arg[0])
            if fn == "Condition":
                return walk((self.doc.get("Conditions") or {})[arg])
            raise ValueError(f"cannot resolve {fn} locally")

        return walk(value)

    def table_definition(self, table_name: str) -> dict[str, Any]:
        """``CreateTable`` arguments from the AWS::DynamoDB::Table (key schema, attributes, GSIs, billing)."""
        props = next(v["Properties"] for v in self.resources.values() if v["Type"] == "AWS::DynamoDB::Table")
        definition: dict[str, Any] = {
            "TableName": table_name,
            "KeySchema": [dict(k) for k in props["KeySchema"]],
            "AttributeDefinitions": [dict(a) for a in props["AttributeDefinitions"]],
            "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
        }
        if props.get("GlobalSecondaryIndexes"):
            definition["GlobalSecondaryIndexes"] = [
                {
                    "IndexName": g["IndexName"],
                    "KeySchema": [dict(k) for k in g["KeySchema"]],
                    "Projection": dict(g["Projection"]),
                }
                for g in props["GlobalSecondaryIndexes"]
            ]
        return definition

    def state_machines(self) -> dict[str, dict[str, Any]]:
        """Logical id → ``{"definition": Path, "substitutions": {name: function logical id}}`` of every
        AWS::Serverless::StateMachine (substitutions of the form ``!Ref Function.Alias`` or ``!GetAtt Function.Arn``)."""
        machines = {}
        for logical_id, resource in self.resources.items():
            if resource["Type"] != "AWS::Serverless::StateMachine":
                continue
            props = resource["Properties"]
            substitutions = {}
            for name, value in (props.get("DefinitionSubstitutions") or {}).items():
                if "Ref" in value:  # !Ref Function.Alias (SAM: the AutoPublishAlias alias, so SnapStart applies)
                    substitutions[name] = str(value["Ref"]).split(".")[0]
                else:  # !GetAtt Function.Arn
                    target = value["Fn::GetAtt"]
                    substitutions[name] = target[0] if isinstance(target, list) else str(target).split(".")[0]
            machines[logical_id] = {
                "definition": self.path.parent / props["DefinitionUri"],
                "substitutions": substitutions,
            }
        return machines

    def function_environment(self, logical_id: str) -> dict[str, Any]:
        """The function's own ``Environment.Variables`` (Globals excluded)."""
        return dict(((self.functions()[logical_id].get("Environment") or {}).get("Variables")) or {})

    def ttl_attribute(self) -> str | None:
        """The table's TTL attribute name, if any."""
        props = next(v["Properties"] for v in self.resources.values() if v["Type"] == "AWS::DynamoDB::Table")
        spec = props.get("TimeToLiveSpecification") or {}
        return spec.get("AttributeName") if spec.get("Enabled") else None
