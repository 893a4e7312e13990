"""Reads template.yaml (CloudFormation tags included, via cfn-lint's decoder) into what the local runtime needs:
the API routes and their handlers, the authorizer, gateway responses, the stage's throttling, the DynamoDB table
definition (its stream included) and the functions that consume the table's stream.

Only what the template declares is served locally: a route missing from the template is missing here too.
"""

from __future__ import annotations

import importlib
import json
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
        regex = re.escape(self.path)
        regex = re.sub(r"\\\{(\w+)\\\+\\\}", r"(?P<\1>.+)", regex)  # {proxy+}: greedy, one or more segments
        regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", regex)
        object.__setattr__(self, "pattern", re.compile("^" + regex + "$"))

    @property
    def greedy(self) -> bool:
        """Whether it is a catch-all (``{name+}``): API Gateway tries it after every other route."""
        return "+}" in self.path

    def match(self, path: str) -> dict[str, str] | None:
        """Path parameters when ``path`` matches this route's template (case-sensitive, as API Gateway)."""
        found = self.pattern.match(path)
        return found.groupdict() if found else None


@dataclass(frozen=True)
class StreamMapping:
    """A function's event source mapping on the table's stream: batches of at most ``batch_size`` records,
    gathered for up to ``batching_window_seconds``, only records matching one of ``filters`` (EventBridge-style
    patterns; none: every record), a failing batch retried up to ``maximum_retry_attempts`` times (-1: until the
    records expire)."""

    function_id: str
    handler: str
    batch_size: int
    batching_window_seconds: float
    maximum_retry_attempts: int
    filters: tuple[dict[str, Any], ...]
    timeout_seconds: int


def load_handler(handler: str) -> Any:
    """``itl_functions.spark_nodes.get`` → the callable, imported as Lambda would."""
    module, _, attr = handler.rpartition(".")
    return getattr(importlib.import_module(module), attr)


class Unresolvable(ValueError):
    """A template value that depends on something only a deployment knows (a resource's id or attribute)."""


#: Pseudo parameters as the local runtime answers them.
PSEUDO_PARAMETERS = {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::URLSuffix": "amazonaws.com"}


class Template:
    """A parsed SAM template. ``parameters`` override the template's parameter defaults where values are resolved
    (:meth:`resolve`), as ``sam deploy --parameter-overrides`` would."""

    def __init__(self, path: Path = DEFAULT_TEMPLATE, parameters: dict[str, str] | None = None):
        self.path = path
        doc, matches = decode_str(path.read_text())
        if matches:
            raise ValueError(f"{path}: {matches[0]}")
        self.doc: dict[str, Any] = doc
        self.parameters = {
            **{k: str(v.get("Default", "")) for k, v in (doc.get("Parameters") or {}).items()},
            **(parameters or {}),
        }

    def resolve(self, value: Any, parameters: dict[str, str] | None = None) -> Any:
        """``value`` with the intrinsic functions a local run can answer evaluated: ``Ref`` of a parameter or pseudo
        parameter, ``Fn::Sub`` (string form), ``Fn::If`` with ``Fn::Equals``/``Fn::Not``/``Fn::And``/``Fn::Or``
        conditions. ``parameters`` override parameter values for this call (e.g. ``PublicApiUrl``: locally the
        emulator's own URL). Raises :class:`Unresolvable` for what only a deployment knows (resources, their
        attributes)."""
        if parameters:
            return Template._with(self, parameters).resolve(value)
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) != 1:
            return {k: self.resolve(v) for k, v in value.items()}
        ((fn, arg),) = value.items()
        if fn == "Ref":
            if arg in self.parameters:
                return self.parameters[arg]
            if arg in PSEUDO_PARAMETERS:
                return PSEUDO_PARAMETERS[arg]
            raise Unresolvable(f"Ref {arg}")
        if fn == "Fn::Sub" and isinstance(arg, str):
            return re.sub(r"\$\{([^}!]+)\}", lambda m: str(self.resolve({"Ref": m.group(1)})), arg)
        if fn == "Fn::If":
            name, when_true, when_false = arg
            return self.resolve(when_true if self.condition(name) else when_false)
        if fn.startswith("Fn::") or fn == "Condition":
            raise Unresolvable(fn)
        return {fn: self.resolve(arg)}

    @staticmethod
    def _with(template: Template, parameters: dict[str, str]) -> Template:
        """A view of ``template`` with ``parameters`` overriding its parameter values (the parsed document shared)."""
        view = object.__new__(Template)
        view.__dict__.update(template.__dict__)
        view.parameters = {**template.parameters, **parameters}
        return view

    def condition(self, name: str) -> bool:
        """The value of the template's condition ``name`` (parameters as given)."""
        return self._truth(self.doc["Conditions"][name])

    def _truth(self, expr: Any) -> bool:
        ((fn, arg),) = expr.items()
        if fn == "Fn::Equals":
            return str(self.resolve(arg[0])) == str(self.resolve(arg[1]))
        if fn == "Fn::Not":
            return not self._truth(arg[0])
        if fn == "Fn::And":
            return all(self._truth(a) for a in arg)
        if fn == "Fn::Or":
            return any(self._truth(a) for a in arg)
        if fn == "Condition":
            return self.condition(arg)
        raise Unresolvable(fn)

    def global_environment(self) -> dict[str, str]:
        """The ``Globals.Function`` environment variables a local run can resolve (others are left out)."""
        variables = ((self.doc.get("Globals") or {}).get("Function") or {}).get("Environment", {}).get("Variables", {})
        resolved = {}
        for name, value in variables.items():
            try:
                resolved[name] = str(self.resolve(value))
            except Unresolvable:
                continue
        return resolved

    def api_cors(self) -> dict[str, str] | None:
        """The API's ``Cors`` settings as API Gateway answers a preflight with them: ``AllowOrigin``,
        ``AllowMethods``, ``AllowHeaders``, ``MaxAge``, ``AllowCredentials`` (values without SAM's single quotes);
        None when the API declares no CORS."""
        cors = self.api().get("Cors")
        if cors is None:
            return None
        if isinstance(cors, str):
            cors = {"AllowOrigin": cors}
        out = {}
        for key, value in cors.items():
            text = self.resolve(value)
            out[key] = str(text).strip("'") if not isinstance(text, bool) else str(text).lower()
        return out

    @property
    def resources(self) -> dict[str, Any]:
        resources: dict[str, Any] = self.doc["Resources"]
        return resources

    def functions(self) -> dict[str, dict[str, Any]]:
        """Logical id → Properties of every AWS::Serverless::Function."""
        return {k: v["Properties"] for k, v in self.resources.items() if v["Type"] == "AWS::Serverless::Function"}

    def function_timeout(self, logical_id: str) -> int:
        """A function's ``Timeout`` (seconds), or the template's global one (Lambda's default, 3 s, without)."""
        own = self.functions()[logical_id].get("Timeout")
        return int(own or self.doc.get("Globals", {}).get("Function", {}).get("Timeout", 3))

    def event_buses(self) -> list[str]:
        """Logical ids of the template's EventBridge buses."""
        return sorted(k for k, v in self.resources.items() if v["Type"] == "AWS::Events::EventBus")

    def buckets(self) -> list[str]:
        """Logical ids of the template's S3 buckets."""
        return sorted(k for k, v in self.resources.items() if v["Type"] == "AWS::S3::Bucket")

    @cached_property
    def routes(self) -> list[Route]:
        """Every Api event of every function. Literal paths sort before templated ones and a catch-all
        (``{proxy+}``) after all, as API Gateway prefers."""
        routes = []
        for function_id, props in self.functions().items():
            for event in (props.get("Events") or {}).values():
                if event.get("Type") != "Api":
                    continue
                p = event["Properties"]
                auth = (p.get("Auth") or {}).get("Authorizer")
                routes.append(Route(p["Method"].upper(), p["Path"], function_id, props["Handler"], auth != "NONE"))
        return sorted(routes, key=lambda r: (r.greedy, r.path.count("{"), -len(r.path)))

    def stream_mappings(self) -> list[StreamMapping]:
        """Every ``DynamoDB`` (table stream) event of every function, as Lambda's event source mappings."""
        mappings = []
        for function_id, props in self.functions().items():
            for event in (props.get("Events") or {}).values():
                if event.get("Type") != "DynamoDB":
                    continue
                p = event["Properties"]
                patterns = [json.loads(f["Pattern"]) for f in (p.get("FilterCriteria") or {}).get("Filters", [])]
                mappings.append(
                    StreamMapping(
                        function_id=function_id,
                        handler=props["Handler"],
                        batch_size=int(p.get("BatchSize", 100)),
                        batching_window_seconds=float(p.get("MaximumBatchingWindowInSeconds", 0)),
                        maximum_retry_attempts=int(p.get("MaximumRetryAttempts", -1)),
                        filters=tuple(patterns),
                        timeout_seconds=self.function_timeout(function_id),
                    )
                )
        return mappings

    def api(self) -> dict[str, Any]:
        """Properties of the AWS::Serverless::Api."""
        return next(v["Properties"] for v in self.resources.values() if v["Type"] == "AWS::Serverless::Api")

    def authorizer_handler(self) -> str:
        """Handler string of the API's default authorizer function."""
        auth = self.api()["Auth"]
        arn = auth["Authorizers"][auth["DefaultAuthorizer"]]["FunctionArn"]
        logical_id = arn["Fn::GetAtt"][0] if isinstance(arn["Fn::GetAtt"], list) else arn["Fn::GetAtt"].split(".")[0]
        return str(self.functions()[logical_id]["Handler"])

    def authorizer_identity_headers(self) -> list[str]:
        """Identity source headers: API Gateway answers 401 without calling the authorizer when one is missing."""
        auth = self.api()["Auth"]
        return list(auth["Authorizers"][auth["DefaultAuthorizer"]].get("Identity", {}).get("Headers", []))

    def api_throttling(self) -> tuple[float, int] | None:
        """The API stage's throttling as ``(rate, burst)``: ``ThrottlingRateLimit`` (requests per second, the steady
        rate) and ``ThrottlingBurstLimit`` (requests at once: the bucket's size) of its ``MethodSettings`` entry for
        every resource and method (``ResourcePath`` ``/*``, ``HttpMethod`` ``*``), parameters resolved; None
        without one."""
        for setting in self.api().get("MethodSettings") or []:
            if setting.get("ResourcePath") == "/*" and setting.get("HttpMethod") == "*":
                rate, burst = setting.get("ThrottlingRateLimit"), setting.get("ThrottlingBurstLimit")
                if rate is None or burst is None:
                    return None
                return float(self.resolve(rate)), int(self.resolve(burst))
        return None

    def api_access_log_format(self) -> str | None:
        """The stage's access log format (``AccessLogSetting.Format``: a JSON object of ``$context`` variables), None
        without an access log."""
        setting = self.api().get("AccessLogSetting") or {}
        found = setting.get("Format")
        return None if found is None else str(self.resolve(found))

    def bucket_settings(self, logical_id: str) -> dict[str, Any]:
        """What a bucket declares that has a local meaning: ``versioning`` (bool), ``object_lock`` (``{"Mode",
        "Days"}`` of its default retention, parameters resolved) or None."""
        props = self.resources[logical_id].get("Properties") or {}
        versioning = (props.get("VersioningConfiguration") or {}).get("Status") == "Enabled"
        lock = None
        if props.get("ObjectLockEnabled"):
            retention = (((props.get("ObjectLockConfiguration") or {}).get("Rule") or {}).get("DefaultRetention")) or {}
            lock = {
                "Mode": str(retention.get("Mode", "GOVERNANCE")),
                "Days": int(self.resolve(retention.get("Days", 1))),
            }
        return {"versioning": versioning, "object_lock": lock}

    def api_minimum_compression_size(self) -> int | None:
        """The API's ``MinimumCompressionSize`` (bytes): API Gateway compresses a response body at least this large
        for a client whose ``Accept-Encoding`` allows it; None when the API does not compress."""
        size = self.api().get("MinimumCompressionSize")
        return None if size is None else int(self.resolve(size))

    def gateway_responses(self) -> dict[str, dict[str, Any]]:
        """GatewayResponses by type (UNAUTHORIZED, MISSING_AUTHENTICATION_TOKEN, ...)."""
        return dict(self.api().get("GatewayResponses") or {})

    def table_definition(self, table_name: str) -> dict[str, Any]:
        """``CreateTable`` arguments from the AWS::DynamoDB::Table (key schema, attributes, GSIs, billing)."""
        props = next(v["Properties"] for v in self.resources.values() if v["Type"] == "AWS::DynamoDB::Table")
        definition: dict[str, Any] = {
            "TableName": table_name,
            "KeySchema": [dict(k) for k in props["KeySchema"]],
            "AttributeDefinitions": [dict(a) for a in props["AttributeDefinitions"]],
            "BillingMode": props.get("BillingMode", "PAY_PER_REQUEST"),
        }
        if props.get("StreamSpecification"):
            definition["StreamSpecification"] = {"StreamEnabled": True, **dict(props["StreamSpecification"])}
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
