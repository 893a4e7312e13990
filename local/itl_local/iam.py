"""IAM, which the local stack never enforces: whether the AWS calls a function made (recorded by
:mod:`itl_local.aws_calls`) are allowed by its policies in template.yaml.

moto answers every call whatever the caller's role, so a function whose role lacks a permission works locally and
fails when deployed (and a Step Functions Catch may turn that failure into a quiet compensation). Two parts:

- :func:`authorizations` turns a call into the IAM authorizations it needs: action, resource ARN and the condition
  keys the template uses (``dynamodb:LeadingKeys``). A transaction needs each item's own action.
- :class:`Policies` reads a function's ``Policies`` from template.yaml (managed policies of the template,
  inline documents, a few SAM policy templates), resolving ``Ref``/``GetAtt``/``Sub`` to the local resources, and
  :func:`allowed` evaluates them: deny by default, an explicit Deny wins, conditions ``StringEquals``/``StringLike``
  with the ``ForAllValues``/``ForAnyValue`` qualifiers. Anything else in a policy is refused with an error rather
  than guessed, so the check never passes by misunderstanding a policy.

Local resources are named as the local runtime names them: functions and state machines by logical id, the table
and the secret as the caller binds them (``bindings``: logical id → Ref value); account ``123456789012`` (moto's),
region us-east-1.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from itl_local.aws_calls import Call
from itl_local.template import Template

ACCOUNT = "123456789012"
REGION = "us-east-1"
LEADING_KEYS = "dynamodb:LeadingKeys"
#: Condition keys :func:`authorizations` derives; a policy conditioned on another key is refused by :func:`allowed`.
KNOWN_CONDITION_KEYS = frozenset({LEADING_KEYS})


# ------------------------------------------------------------------------------------------------ resources
#: ARN of a resource from its Ref value, by CloudFormation type (where Ref is not the ARN already).
_ARNS: dict[str, str] = {
    "AWS::DynamoDB::Table": "arn:aws:dynamodb:{region}:{account}:table/{ref}",
    "AWS::Serverless::Function": "arn:aws:lambda:{region}:{account}:function:{ref}",
    "AWS::Lambda::Function": "arn:aws:lambda:{region}:{account}:function:{ref}",
    "AWS::S3::Bucket": "arn:aws:s3:::{ref}",
    "AWS::Scheduler::ScheduleGroup": "arn:aws:scheduler:{region}:{account}:schedule-group/{ref}",
    "AWS::SQS::Queue": "arn:aws:sqs:{region}:{account}:{name}",
    "AWS::Events::EventBus": "arn:aws:events:{region}:{account}:event-bus/{ref}",
}
#: Ref of a resource named ``name`` locally, for types whose Ref is an ARN or a URL.
_REFS: dict[str, str] = {
    "AWS::Serverless::StateMachine": "arn:aws:states:{region}:{account}:stateMachine:{name}",
    "AWS::StepFunctions::StateMachine": "arn:aws:states:{region}:{account}:stateMachine:{name}",
    "AWS::SecretsManager::Secret": "arn:aws:secretsmanager:{region}:{account}:secret:{name}",
    "AWS::SNS::Topic": "arn:aws:sns:{region}:{account}:{name}",
    "AWS::SQS::Queue": "https://sqs.{region}.amazonaws.com/{account}/{name}",
    "AWS::IAM::ManagedPolicy": "arn:aws:iam::{account}:policy/{name}",
}
_PSEUDO = {
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::StackName": "local",
}


class Resources:
    """The template's resources as they exist locally: ``Ref`` and ``GetAtt`` values, and intrinsic functions
    resolved with them. ``bindings`` gives Ref values; an unbound resource is named by its logical id (as the
    local runtime names functions and state machines)."""

    def __init__(self, template: Template, bindings: dict[str, str] | None = None):
        self.template = template
        self.bindings = dict(bindings or {})

    def _type(self, logical_id: str) -> str:
        if logical_id not in self.template.resources:
            raise ValueError(f"{logical_id!r} is no resource of the template")
        return str(self.template.resources[logical_id]["Type"])

    def ref(self, name: str) -> str:
        if name in _PSEUDO:
            return _PSEUDO[name]
        if name.endswith(".Alias") and name.removesuffix(".Alias") in self.template.resources:
            # SAM's alias of a function with AutoPublishAlias: its Ref is the function's ARN with the alias
            return f"{self.get_att(name.removesuffix('.Alias'), 'Arn')}:live"
        parameters = self.template.doc.get("Parameters") or {}
        if name in parameters:
            return str(parameters[name].get("Default", ""))
        if name in self.bindings:
            return self.bindings[name]
        pattern = _REFS.get(self._type(name), "{name}")
        return pattern.format(region=REGION, account=ACCOUNT, name=name)

    def get_att(self, logical_id: str, attribute: str) -> str:
        rtype, ref = self._type(logical_id), self.ref(logical_id)
        if attribute == "Arn":
            if rtype in _ARNS:
                name = ref.rsplit("/", 1)[-1]
                return _ARNS[rtype].format(region=REGION, account=ACCOUNT, ref=ref, name=name)
            if ref.startswith("arn:"):
                return ref
        if attribute == "Name":
            return ref.rsplit(":", 1)[-1] if ref.startswith("arn:") else ref
        raise ValueError(f"cannot tell {logical_id}.{attribute} ({rtype}) locally")

    def arns(self) -> dict[str, str]:
        """ARN → logical id, for the resources whose ARN can be told (for reports)."""
        found = {}
        for logical_id in self.template.resources:
            try:
                found[self.get_att(logical_id, "Arn")] = logical_id
            except ValueError:
                continue
        return found

    def resolve(self, value: Any) -> Any:
        """``value`` with ``Ref``, ``Fn::GetAtt``, ``Fn::Sub`` and ``Fn::Join`` resolved (others are refused)."""
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, arg),) = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                logical_id, attribute = arg if isinstance(arg, list) else str(arg).split(".", 1)
                return self.get_att(logical_id, attribute)
            if key == "Fn::Sub":
                text, names = (arg, {}) if isinstance(arg, str) else arg
                given = {k: str(self.resolve(v)) for k, v in names.items()}
                return re.sub(r"\$\{([^}!]+)\}", lambda m: self._sub_variable(m.group(1), given), text).replace(
                    "${!", "${"
                )
            if key == "Fn::Join":
                separator, parts = arg
                return separator.join(str(p) for p in self.resolve(parts))
            if key.startswith("Fn::"):
                raise ValueError(f"{key} is not resolved locally: {value}")
        return {k: self.resolve(v) for k, v in value.items()}

    def _sub_variable(self, name: str, given: dict[str, str]) -> str:
        if name in given:
            return given[name]
        if "." in name and not name.startswith("AWS::"):
            logical_id, attribute = name.split(".", 1)
            return self.get_att(logical_id, attribute)
        return self.ref(name)

    def key_schema(self, table_arn: str) -> dict[str | None, str]:
        """Partition key attribute by index (None: the table) of the template table with this ARN; {} if none."""
        for logical_id, resource in self.template.resources.items():
            if resource["Type"] != "AWS::DynamoDB::Table" or self.get_att(logical_id, "Arn") != table_arn:
                continue
            props = resource["Properties"]
            schema: dict[str | None, str] = {None: _hash_key(props["KeySchema"])}
            for index in props.get("GlobalSecondaryIndexes") or []:
                schema[index["IndexName"]] = _hash_key(index["KeySchema"])
            for index in props.get("LocalSecondaryIndexes") or []:
                schema[index["IndexName"]] = schema[None]
            return schema
        return {}


def _hash_key(key_schema: list[dict[str, str]]) -> str:
    return next(k["AttributeName"] for k in key_schema if k["KeyType"] == "HASH")


# ------------------------------------------------------------------------------------------------ calls → IAM
@dataclass(frozen=True)
class Authorization:
    """What IAM authorizes for one action of a call: ``action`` (``dynamodb:PutItem``), ``resource`` ARN, and the
    request's condition keys (key → values)."""

    action: str
    resource: str
    context: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def conditions(self) -> dict[str, tuple[str, ...]]:
        return dict(self.context)


#: A transaction item's IAM action (Put → PutItem, ...; TransactGetItems' Get → GetItem).
_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


def authorizations(call: Call, resources: Resources) -> list[Authorization]:
    """The authorizations ``call`` needs. DynamoDB item operations carry ``dynamodb:LeadingKeys`` (the partition key
    values the request touches; for a Query on an index, the index's partition key value)."""
    p, region = call.params, call.region
    if call.service == "dynamodb":
        return _dynamodb(call, resources)
    if call.service == "stepfunctions":
        arn = p.get("stateMachineArn") or p.get("executionArn") or "*"
        return [Authorization(f"states:{call.operation}", arn)]
    if call.service == "secretsmanager":
        return [Authorization(f"secretsmanager:{call.operation}", _secret_arn(str(p["SecretId"]), region, resources))]
    if call.service == "s3":
        bucket = f"arn:aws:s3:::{p.get('Bucket', '*')}"
        if call.operation in ("ListObjects", "ListObjectsV2"):
            return [Authorization("s3:ListBucket", bucket)]
        action = {
            "HeadObject": "GetObject",
            # a multipart upload is authorised as the PutObject it makes
            "CreateMultipartUpload": "PutObject",
            "UploadPart": "PutObject",
            "CompleteMultipartUpload": "PutObject",
        }.get(call.operation, call.operation)
        return [Authorization(f"s3:{action}", f"{bucket}/{p['Key']}" if "Key" in p else bucket)]
    if call.service == "lambda":
        name = str(p["FunctionName"])
        arn = name if name.startswith("arn:") else f"arn:aws:lambda:{region}:{ACCOUNT}:function:{name}"
        qualifier = f":{p['Qualifier']}" if p.get("Qualifier") else ""
        return [Authorization(f"lambda:{_LAMBDA_ACTIONS.get(call.operation, call.operation)}", arn + qualifier)]
    if call.service == "events" and call.operation == "PutEvents":
        # one authorization per bus the entries name (a name or an ARN; none: the account's default bus)
        buses = {str(e.get("EventBusName") or "default") for e in p.get("Entries", [])}
        return [
            Authorization(
                "events:PutEvents", b if b.startswith("arn:") else f"arn:aws:events:{region}:{ACCOUNT}:event-bus/{b}"
            )
            for b in sorted(buses)
        ]
    if call.service == "cloudwatch":
        # the IAM prefix of CloudWatch is "cloudwatch" (its signing name is "monitoring"); metric reads take no resource
        return [Authorization(f"cloudwatch:{call.operation}", "*")]
    if call.service == "scheduler" and "Name" in p:
        arn = f"arn:aws:scheduler:{region}:{ACCOUNT}:schedule/{p.get('GroupName') or 'default'}/{p['Name']}"
        needed = [Authorization(f"scheduler:{call.operation}", arn)]
        role = (p.get("Target") or {}).get("RoleArn")
        return needed + ([Authorization("iam:PassRole", role)] if role else [])
    return [Authorization(f"{call.prefix}:{call.operation}", "*")]


_LAMBDA_ACTIONS = {"Invoke": "InvokeFunction"}


def _secret_arn(secret_id: str, region: str, resources: Resources) -> str:
    """A secret named by name is authorized against its full ARN (which ends in a random suffix)."""
    if secret_id.startswith("arn:"):
        return secret_id
    for arn in resources.bindings.values():
        if arn.startswith(f"arn:aws:secretsmanager:{region}:") and re.fullmatch(
            rf".*:secret:{re.escape(secret_id)}(-[A-Za-z0-9]{{6}})?", arn
        ):
            return arn
    return f"arn:aws:secretsmanager:{region}:{ACCOUNT}:secret:{secret_id}"


def _table_arn(table: str, region: str) -> str:
    return table if table.startswith("arn:") else f"arn:aws:dynamodb:{region}:{ACCOUNT}:table/{table}"


def _scalar(value: dict[str, Any]) -> str:
    """A DynamoDB key attribute value (``{"S": "SUB#x"}``) as IAM sees it."""
    ((_, v),) = value.items()
    return str(v)


def _dynamodb(call: Call, resources: Resources) -> list[Authorization]:
    p, op, region = call.params, call.operation, call.region

    def item_action(action: str, table: str, keys: Iterable[dict[str, Any]]) -> Authorization:
        arn = _table_arn(table, region)
        hash_key = resources.key_schema(arn).get(None)
        if hash_key is None:  # not a table of the template: no policy names it, so no condition is reached
            return Authorization(f"dynamodb:{action}", arn)
        leading = tuple(sorted({_scalar(k[hash_key]) for k in keys}))
        return Authorization(f"dynamodb:{action}", arn, ((LEADING_KEYS, leading),))

    if op in ("GetItem", "UpdateItem", "DeleteItem"):
        return [item_action(op, p["TableName"], [p["Key"]])]
    if op == "PutItem":
        return [item_action(op, p["TableName"], [p["Item"]])]
    if op in ("TransactWriteItems", "TransactGetItems"):
        found = []
        for entry in p["TransactItems"]:
            ((kind, item),) = entry.items()
            found.append(item_action(_TRANSACT_ACTIONS[kind], item["TableName"], [item.get("Key") or item["Item"]]))
        return found
    if op == "BatchGetItem":
        return [item_action(op, table, spec["Keys"]) for table, spec in p["RequestItems"].items()]
    if op == "BatchWriteItem":
        return [
            item_action(
                op, table, [(r.get("PutRequest") or {}).get("Item") or r["DeleteRequest"]["Key"] for r in requests]
            )
            for table, requests in p["RequestItems"].items()
        ]
    if op in ("Query", "Scan"):
        arn = _table_arn(p["TableName"], region)
        index = p.get("IndexName")
        resource = f"{arn}/index/{index}" if index else arn
        hash_key = resources.key_schema(arn).get(index)
        if op == "Scan" or hash_key is None:
            return [Authorization(f"dynamodb:{op}", resource)]
        value = _key_condition_value(p, hash_key)
        return [Authorization(f"dynamodb:{op}", resource, ((LEADING_KEYS, (value,)),))]
    return [Authorization(f"dynamodb:{op}", _table_arn(str(p.get("TableName", "*")), region))]


def _key_condition_value(params: dict[str, Any], hash_key: str) -> str:
    """The partition key value a Query's ``KeyConditionExpression`` names (``PK = :pk``)."""
    names = params.get("ExpressionAttributeNames") or {}
    values = params.get("ExpressionAttributeValues") or {}
    expression = str(params.get("KeyConditionExpression", ""))
    for left, right in re.findall(r"([#:]?[\w.]+)\s*=\s*([#:]?[\w.]+)", expression):
        for attribute, placeholder in ((left, right), (right, left)):
            if names.get(attribute, attribute) == hash_key and placeholder in values:
                return _scalar(values[placeholder])
    raise ValueError(f"no partition key equality on {hash_key!r} in {expression!r}")


# ------------------------------------------------------------------------------------------------ policies
#: The SAM policy templates understood here (SAM's own definitions, reduced to action lists and resource patterns;
#: ``{param}`` is the template parameter's resolved value). Add one when template.yaml starts using it.
SAM_POLICY_TEMPLATES: dict[str, tuple[str, list[str], list[str]]] = {
    "LambdaInvokePolicy": (
        "FunctionName",
        ["lambda:InvokeFunction"],
        ["arn:aws:lambda:{region}:{account}:function:{param}*"],
    ),
    "DynamoDBReadPolicy": (
        "TableName",
        ["dynamodb:GetItem", "dynamodb:Scan", "dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:DescribeTable"],
        [
            "arn:aws:dynamodb:{region}:{account}:table/{param}",
            "arn:aws:dynamodb:{region}:{account}:table/{param}/index/*",
        ],
    ),
    "StepFunctionsExecutionPolicy": (
        "StateMachineName",
        ["states:StartExecution"],
        ["arn:aws:states:{region}:{account}:stateMachine:{param}"],
    ),
    "AWSSecretsManagerGetSecretValuePolicy": ("SecretArn", ["secretsmanager:GetSecretValue"], ["{param}"]),
}


class Policies:
    """The policy statements of each function of the template, resolved to local resources."""

    def __init__(self, template: Template, resources: Resources):
        self.template = template
        self.resources = resources

    def statements(self, function_id: str) -> list[dict[str, Any]]:
        """Every statement of the function's ``Policies``: ``!Ref`` to an AWS::IAM::ManagedPolicy of the template,
        an inline policy document, or a SAM policy template of :data:`SAM_POLICY_TEMPLATES`."""
        props = self.template.functions()[function_id]
        if "Role" in props:
            raise ValueError(f"{function_id}: a function with its own Role is not read here")
        policies = props.get("Policies") or []
        found: list[dict[str, Any]] = []
        for policy in policies if isinstance(policies, list) else [policies]:
            found += self._policy(function_id, policy)
        return [self.resources.resolve(s) for s in found]

    def _policy(self, function_id: str, policy: Any) -> list[dict[str, Any]]:
        if isinstance(policy, dict) and set(policy) == {"Ref"}:
            resource = self.template.resources.get(policy["Ref"]) or {}
            if resource.get("Type") != "AWS::IAM::ManagedPolicy":
                raise ValueError(f"{function_id}: {policy['Ref']} is no AWS::IAM::ManagedPolicy of the template")
            return _statements(resource["Properties"]["PolicyDocument"])
        if isinstance(policy, dict) and "Statement" in policy:
            return _statements(policy)
        if isinstance(policy, dict) and len(policy) == 1 and next(iter(policy)) in SAM_POLICY_TEMPLATES:
            ((name, parameters),) = policy.items()
            parameter, actions, patterns = SAM_POLICY_TEMPLATES[name]
            value = self.resources.resolve(parameters[parameter])
            resources = [p.format(region=REGION, account=ACCOUNT, param=value) for p in patterns]
            return [{"Effect": "Allow", "Action": actions, "Resource": resources}]
        raise ValueError(f"{function_id}: policy {policy!r} is not understood here (AWS managed policy?)")


def _statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    statements = document["Statement"]
    return list(statements) if isinstance(statements, list) else [statements]


# ------------------------------------------------------------------------------------------------ evaluation
@cache
def _wildcard(pattern: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    """IAM wildcards: ``*`` any run of characters, ``?`` one character."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(regex, re.IGNORECASE if ignore_case else 0)


def _listed(value: Any) -> list[str]:
    return [str(v) for v in (value if isinstance(value, list) else [value])]


_OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda value, wanted: value == wanted,
    "StringLike": lambda value, wanted: _wildcard(wanted).fullmatch(value) is not None,
}


def _condition_holds(condition: dict[str, Any], context: dict[str, tuple[str, ...]]) -> bool:
    """Every operator and key of ``condition`` holds (values of one key: any matches). ``ForAllValues``: each
    request value matches (true when the request has none, as in IAM); ``ForAnyValue``: one does; no qualifier: the
    request has exactly one value and it matches."""
    for operator, block in condition.items():
        qualifier, _, name = operator.rpartition(":")
        if name not in _OPERATORS or qualifier not in ("", "ForAllValues", "ForAnyValue"):
            raise ValueError(f"condition operator {operator!r} is not evaluated here")
        matches = _OPERATORS[name]
        for key, wanted in block.items():
            if key not in KNOWN_CONDITION_KEYS:
                raise ValueError(f"condition key {key!r} is not derived from recorded calls")
            values = context.get(key, ())
            hit = [any(matches(v, w) for w in _listed(wanted)) for v in values]
            if qualifier == "ForAllValues":
                ok = all(hit)
            elif qualifier == "ForAnyValue":
                ok = any(hit)
            else:
                ok = len(hit) == 1 and hit[0]
            if not ok:
                return False
    return True


def _applies(statement: dict[str, Any], authorization: Authorization) -> bool:
    if "NotAction" in statement or "NotResource" in statement or "NotPrincipal" in statement:
        raise ValueError(f"NotAction/NotResource/NotPrincipal are not evaluated here: {statement}")
    actions, targets = _listed(statement.get("Action", [])), _listed(statement.get("Resource", []))
    return (
        any(_wildcard(a, ignore_case=True).fullmatch(authorization.action) for a in actions)
        and any(_wildcard(r).fullmatch(authorization.resource) for r in targets)
        and _condition_holds(statement.get("Condition") or {}, authorization.conditions)
    )


def allowed(statements: list[dict[str, Any]], authorization: Authorization) -> bool:
    """Whether ``statements`` (resolved) allow ``authorization``: some Allow applies and no Deny does."""
    applying = [s for s in statements if _applies(s, authorization)]
    return any(s["Effect"] == "Allow" for s in applying) and not any(s["Effect"] == "Deny" for s in applying)


# ------------------------------------------------------------------------------------------------ the check
@dataclass(frozen=True)
class Uncovered:
    """An authorization a function needed that its policies do not give (``calls``: how many calls needed it)."""

    function: str
    action: str
    resource: str
    example: dict[str, tuple[str, ...]]
    calls: int

    def __str__(self) -> str:
        condition = "".join(f", {k} {list(v)}" for k, v in self.example.items())
        return f"{self.function}: {self.action} on {self.resource}{condition} ({self.calls} calls)"


def uncovered(template: Template, calls: Iterable[Call], bindings: dict[str, str]) -> list[Uncovered]:
    """Every authorization the recorded ``calls`` needed and the calling function's policies do not give,
    grouped by function, action and resource (the resource named by logical id where the template has it)."""
    resources = Resources(template, bindings)
    policies = Policies(template, resources)
    names = resources.arns()
    functions = template.functions()
    statements: dict[str, list[dict[str, Any]]] = {}
    missing: dict[tuple[str, str, str], list[Authorization]] = {}
    for call in calls:
        if call.function not in statements:
            statements[call.function] = policies.statements(call.function) if call.function in functions else []
        for needed in authorizations(call, resources):
            if not allowed(statements[call.function], needed):
                missing.setdefault((call.function, needed.action, needed.resource), []).append(needed)
    return [
        Uncovered(function, action, _logical(resource, names), found[0].conditions, len(found))
        for (function, action, resource), found in sorted(missing.items())
    ]


def _logical(arn: str, names: dict[str, str]) -> str:
    """``arn:...:table/itl-accelerator-test/index/GSI1`` → ``Table/index/GSI1`` (the ARN itself if unknown)."""
    for known in sorted(names, key=len, reverse=True):
        if arn == known or arn.startswith(known + "/"):
            return names[known] + arn[len(known) :]
    return arn


# ------------------------------------------------------------------------------------------------ invoking roles
def role_statements(template: Template, role_id: str, resources: Resources) -> list[dict[str, Any]]:
    """The resolved statements of an ``AWS::IAM::Role`` of the template: its inline ``Policies`` and the template's
    ``ManagedPolicyArns`` it names (AWS managed policies are not read: none grants invoking our functions)."""
    role = template.resources.get(role_id) or {}
    if role.get("Type") != "AWS::IAM::Role":
        raise ValueError(f"{role_id!r} is no AWS::IAM::Role of the template")
    props = role.get("Properties") or {}
    found: list[dict[str, Any]] = []
    for policy in props.get("Policies") or []:
        found += _statements(policy["PolicyDocument"])
    for arn in props.get("ManagedPolicyArns") or []:
        if isinstance(arn, dict) and set(arn) == {"Ref"}:
            found += _statements(template.resources[arn["Ref"]]["Properties"]["PolicyDocument"])
    return [resources.resolve(s) for s in found]


def may_invoke(template: Template, role: Any, function_id: str) -> bool:
    """Whether the role a schedule names (``RoleArn``, e.g. ``!GetAtt SchedulerRole.Arn``) may invoke the function
    ``function_id`` (``lambda:InvokeFunction`` on its ARN, or on its alias when it publishes one, as Scheduler invokes
    the target the template gives it). EventBridge Scheduler refuses to invoke otherwise: so does the local
    runtime."""
    resources = Resources(template)
    if isinstance(role, dict) and "Fn::GetAtt" in role:
        target = role["Fn::GetAtt"]
        role_id = target[0] if isinstance(target, list) else str(target).split(".", 1)[0]
    else:
        raise ValueError(f"a schedule's RoleArn {role!r} is not read here (a GetAtt of a template role is)")
    statements = role_statements(template, role_id, resources)
    function = resources.get_att(function_id, "Arn")
    targets = [function]
    if template.functions()[function_id].get("AutoPublishAlias") or (
        (template.doc.get("Globals") or {}).get("Function") or {}
    ).get("AutoPublishAlias"):
        targets.append(f"{function}:live")
    return any(allowed(statements, Authorization("lambda:InvokeFunction", arn)) for arn in targets)
