"""The tools: what each one asks for, answers, promises (annotations), and which API calls it makes.

Every tool is one or a few calls of the provider's HTTP API with the caller's own token (:class:`~.api.ApiClient`):
what the API refuses, the tool refuses, with the API's ARM error code and message. Input and output schemas are
built from the API's own models (:mod:`.schemas`); results are the API's own bodies, so they carry the ARM ids a
user can follow up with in the CLI or the portal.

Tools that spend money (:data:`SPENDING`: provision an instance, submit a job, book a capacity reservation) answer a
quote first and act only
when called again with that quote's id (:mod:`.quotes`). In read-only mode the write tools are not listed and
refuse to run.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from itl_accelerator_mcp.api import ApiClient, ApiError, provider_path, seg
from itl_accelerator_mcp.caller import Caller
from itl_accelerator_mcp.quotes import QuoteClaims, QuoteLedger, QuoteRejected, QuoteSigner, process_ledger
from itl_accelerator_mcp.schemas import field as api_field
from itl_accelerator_mcp.schemas import model, model_schema, obj

#: Tools that spend money: answered with a quote first, acting only with the quote's id.
SPENDING = ("provision_instance", "submit_job", "book_reservation")


class ToolRefused(Exception):
    """A tool that will not run: ``code`` (an ARM-style error code) and ``message``."""

    def __init__(self, code: str, message: str, target: str | None = None):
        super().__init__(f"{code}: {message}")
        self.code, self.message, self.target = code, message, target

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.target:
            body["target"] = self.target
        return body


@dataclass
class Result:
    """What a tool answers: ``data`` (its structured result, matching its output schema) and an optional ``note``
    for the person reading along (put before the JSON in the text content)."""

    data: dict[str, Any]
    note: str | None = None


@dataclass
class ToolCall:
    """One call: the API as the caller, the caller, the arguments, the server's defaults, its quote signer and the
    ledger of spent quotes."""

    api: ApiClient
    caller: Caller
    args: dict[str, Any]
    signer: Callable[[], QuoteSigner]
    default_subscription: str | None = None
    default_resource_group: str | None = None
    ledger: Callable[[], QuoteLedger] = process_ledger

    def subscription(self) -> str:
        value = self.args.get("subscriptionId") or self.default_subscription
        if not value:
            raise ToolRefused(
                "InvalidParameter",
                "subscriptionId is required (the caller's token names several subscriptions or none; get_my_access "
                "lists them).",
                "subscriptionId",
            )
        return str(value)

    def resource_group(self, required: bool = True) -> str | None:
        value = self.args.get("resourceGroup") or self.default_resource_group
        if not value and required:
            raise ToolRefused("InvalidParameter", "resourceGroup is required.", "resourceGroup")
        return str(value) if value else None

    def node_path(self, name: str | None = None) -> str:
        base = provider_path(self.subscription(), self.resource_group()) + "/sparkNodes"
        return f"{base}/{seg(name)}" if name else base

    def job_path(self, name: str | None = None) -> str:
        base = provider_path(self.subscription(), self.resource_group()) + "/sparkJobs"
        return f"{base}/{seg(name)}" if name else base

    def reservation_path(self, name: str | None = None) -> str:
        base = provider_path(self.subscription(), self.resource_group()) + "/capacityReservations"
        return f"{base}/{seg(name)}" if name else base

    def instance_path(self, node: str, name: str | None = None) -> str:
        base = self.node_path(node) + "/sparkOllamaInstances"
        return f"{base}/{seg(name)}" if name else base


Handler = Callable[[ToolCall], Awaitable[Result]]


@dataclass(frozen=True)
class Annotations:
    """MCP tool annotations (hints for the client and the model; the API enforces what is allowed)."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool = False

    def to_dict(self) -> dict[str, bool]:
        return {
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }


READ = Annotations(read_only=True, destructive=False, idempotent=True)
CREATE = Annotations(read_only=False, destructive=False, idempotent=False)
CHANGE = Annotations(read_only=False, destructive=True, idempotent=True)


@dataclass(frozen=True)
class ToolSpec:
    """A tool: ``name``, ``title``, ``description`` (written for a model choosing among tools), JSON Schemas of
    its input and structured output, :class:`Annotations`, and its handler."""

    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    annotations: Annotations
    handler: Handler = field(repr=False)

    @property
    def writes(self) -> bool:
        return not self.annotations.read_only


# ----------------------------------------------------------------------------------------------------- arguments
SUBSCRIPTION = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "description": "Subscription id: the {sub} of /subscriptions/{sub}. Optional when the caller's token names "
    "exactly one subscription (get_my_access lists them).",
}
RESOURCE_GROUP = {"type": "string", "minLength": 1, "maxLength": 90, "description": "Resource group name."}
MAX_ITEMS = {
    "type": "integer",
    "minimum": 1,
    "maximum": 1000,
    "default": 100,
    "description": "At most this many items (the result's nextLink is set when more remain).",
}
QUOTE_ID = {
    "type": "string",
    "minLength": 1,
    "maxLength": 4096,
    "description": "The quoteId of the quote this tool returned for exactly these arguments, after the user "
    "accepted its cost. Leave it out to get the quote first; nothing is created without it.",
}


def _name(what: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": 128, "description": f"Name of the {what}."}


def _page(item: str) -> dict[str, Any]:
    return obj({"value": {"type": "array", "items": model(item)}, "nextLink": {"type": ["string", "null"]}}, ["value"])


# ----------------------------------------------------------------------------------------------------- money
def _money(amount: Decimal) -> str:
    return str(amount.quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP))


def _billable_seconds(seconds: int, increment: int, minimum: int) -> int:
    """The node's rounding rule (the API's billing/metering.py): up to ``increment``, at least ``minimum``."""
    increment = max(1, increment)
    return max(minimum, -(-seconds // increment) * increment)


def _pricing(node: dict[str, Any]) -> dict[str, Any]:
    p = (node.get("properties") or {}).get("pricing") or {}
    price = float(p.get("pricePerAcceleratorHour", p.get("pricePerGpuHour")) or 0)
    return {
        "node": node.get("id"),
        # per device-hour of the node's kind (pricePerGpuHour: the seed's name, the same figure)
        "pricePerAcceleratorHour": price,
        "pricePerGpuHour": price,
        "currency": p.get("currency") or "USD",
        "billingIncrementSeconds": int(p.get("billingIncrementSeconds") or 1),
        "minimumBillableSeconds": int(p.get("minimumBillableSeconds") or 0),
    }


def _cost(price: dict[str, Any], gpus: int, seconds: int) -> Decimal:
    billable = _billable_seconds(seconds, price["billingIncrementSeconds"], price["minimumBillableSeconds"])
    return Decimal(str(price["pricePerGpuHour"])) * gpus * billable / 3600


_PRICE = {
    "type": "object",
    "properties": {
        "node": {"type": ["string", "null"], "description": "ARM id of the node whose price this is."},
        "pricePerAcceleratorHour": {"type": "number", "description": "Per device-hour of the node's kind."},
        "pricePerGpuHour": {"type": "number", "description": "The same figure (the API's GPU name of it)."},
        "currency": {"type": "string"},
        "billingIncrementSeconds": {"type": "integer"},
        "minimumBillableSeconds": {"type": "integer"},
    },
    "required": ["pricePerGpuHour", "currency", "billingIncrementSeconds", "minimumBillableSeconds"],
}
QUOTE = {
    "type": "object",
    "description": "What the call would cost. Show it to the user; call the tool again with the same arguments "
    "and quoteId only when the user accepts.",
    "properties": {
        "quoteId": {"type": "string"},
        "expiresAt": {"type": "string", "description": "UTC, ISO 8601: accept it before then."},
        "tool": {"type": "string"},
        "summary": {"type": "string"},
        "gpus": {"type": "integer"},
        "memoryGb": {"type": "integer"},
        "node": {"type": ["string", "null"], "description": "ARM id of the node (instances: known; jobs: null)."},
        "candidateNodes": {"type": "array", "items": {"type": "string"}},
        "prices": {"type": "array", "items": _PRICE},
        "maxDurationMinutes": {"type": ["integer", "null"]},
        "estimatedCost": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "amount": {"type": "string", "description": "Decimal string."},
                    "currency": {"type": "string"},
                    "basis": {"type": "string"},
                },
                "required": ["amount", "currency", "basis"],
            },
        },
        "upperBound": {"type": "boolean"},
        "maxPrice": {
            "type": "object",
            "description": "Jobs, one currency: the price ceiling the job is submitted with (the quoted bound).",
        },
        "notes": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["quoteId", "expiresAt", "tool", "summary", "gpus", "prices", "estimatedCost", "upperBound"],
}


def _iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _quote(call: ToolCall, tool: str, terms: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
    quote_id, expires = call.signer().issue(call.caller.subject, tool, call.args, terms)
    return {"quoteId": quote_id, "expiresAt": _iso(expires), "tool": tool, **body}


def _accepted_quote(call: ToolCall, tool: str) -> QuoteClaims | None:
    """The claims of the quote the call carries (None without one); :class:`ToolRefused` when it does not hold."""
    quote_id = call.args.get("quoteId")
    if not quote_id:
        return None
    try:
        return call.signer().check(quote_id, call.caller.subject, tool, call.args)
    except QuoteRejected as exc:
        raise ToolRefused("QuoteNotValid", str(exc), "quoteId") from None


def _spend(call: ToolCall, claims: QuoteClaims) -> None:
    """Spend the accepted quote before acting on it: a quote pays for one call (:mod:`.quotes`). Raises
    :class:`ToolRefused` ``QuoteNotValid`` when it was spent already."""
    if not call.ledger().spend(str(call.args["quoteId"]), claims.expires):
        raise ToolRefused(
            "QuoteNotValid",
            "The quote was accepted already: a quote pays for one call. Call again without quoteId for a new quote.",
            "quoteId",
        )


# ----------------------------------------------------------------------------------------------------- reads
async def get_my_access(call: ToolCall) -> Result:
    return Result(
        {
            **call.caller.to_dict(),
            "subscriptions": call.caller.subscriptions(),
            "defaultSubscription": call.default_subscription,
            "defaultResourceGroup": call.default_resource_group,
        }
    )


async def list_nodes(call: ToolCall) -> Result:
    path = provider_path(call.subscription(), call.resource_group(required=False)) + "/sparkNodes"
    return Result(await call.api.list(path, max_items=call.args.get("maxItems", 100)))


async def get_node(call: ToolCall) -> Result:
    return Result(await call.api.get(call.node_path(call.args["node"])))


async def list_instances(call: ToolCall) -> Result:
    return Result(await call.api.list(call.instance_path(call.args["node"]), max_items=call.args.get("maxItems", 100)))


async def get_instance(call: ToolCall) -> Result:
    return Result(await call.api.get(call.instance_path(call.args["node"], call.args["name"])))


async def list_jobs(call: ToolCall) -> Result:
    path = provider_path(call.subscription(), call.resource_group(required=False)) + "/sparkJobs"
    submitted_by = call.caller.subject if call.args.get("mine") else call.args.get("submittedBy")
    page = await call.api.list(
        path, {"submitted_by": submitted_by} if submitted_by else None, max_items=call.args.get("maxItems", 100)
    )
    statuses = call.args.get("status")
    if statuses:
        page["value"] = [j for j in page["value"] if (j.get("properties") or {}).get("status") in statuses]
    return Result(page)


async def get_job(call: ToolCall) -> Result:
    return Result(await call.api.get(call.job_path(call.args["name"])))


async def list_offers(call: ToolCall) -> Result:
    path = provider_path(call.subscription()) + f"/locations/{seg(call.args['location'])}/offers"
    group = call.resource_group(required=False)
    answer = await call.api.get(path, **({"resourceGroup": group} if group else {}))
    return Result(
        answer,
        "Quote from these before submitting: a job of at most largestSingleNode.devices (and "
        "allowedNow) is placed at once, at a price in pricePerAcceleratorHour; a multi-node job of at most "
        "largestMultiNode (accelerator.nodes x devicesPerNode) too.",
    )


async def get_usage(call: ToolCall) -> Result:
    args = call.args
    if args.get("job"):
        path = call.job_path(args["job"])
    elif args.get("node") and args.get("instance"):
        path = call.instance_path(args["node"], args["instance"])
    elif args.get("node"):
        path = call.node_path(args["node"])
    else:
        raise ToolRefused("InvalidParameter", "Name a job, a node, or a node and one of its instances.", "node")
    return Result(await call.api.get(path + "/stats", hours=args.get("hours", 24)))


async def list_audit_events(call: ToolCall) -> Result:
    params = {k: call.args.get(k) for k in ("startTime", "endTime", "resourceId")}
    path = provider_path(call.subscription()) + "/auditEvents"
    return Result(await call.api.list(path, params, max_items=call.args.get("maxItems", 100)))


async def get_operation(call: ToolCall) -> Result:
    return Result(await call.api.get(call.args["operation"]))


# ----------------------------------------------------------------------------------------------------- node writes
async def create_node(call: ToolCall) -> Result:
    body = {k: call.args[k] for k in ("name", "location", "sku", "tags", "properties") if call.args.get(k) is not None}
    response = await call.api.request("POST", call.node_path(), json=body)
    return Result(response.json())


async def set_node_pricing(call: ToolCall) -> Result:
    body = {"properties": {"pricing": call.args["pricing"]}}
    return Result((await call.api.request("PATCH", call.node_path(call.args["node"]), json=body)).json())


async def set_node_availability(call: ToolCall) -> Result:
    body = {"properties": {"availability": call.args["availability"]}}
    return Result((await call.api.request("PATCH", call.node_path(call.args["node"]), json=body)).json())


# ----------------------------------------------------------------------------------------------------- instances
async def _instance_quote_body(call: ToolCall) -> tuple[dict[str, Any], dict[str, Any]]:
    node = await call.api.get(call.node_path(call.args["node"]))
    price = _pricing(node)
    gpus = int(call.args["gpus"])
    hour, day = _cost(price, gpus, 3600), _cost(price, gpus, 86400)
    capacity = (node.get("properties") or {}).get("capacity") or {}
    availability = (node.get("properties") or {}).get("availability")
    notes = [
        "An instance is billed from the moment it is ready until its deletion is accepted, rounded up to the node's "
        "billingIncrementSeconds and at least minimumBillableSeconds; it has no end of its own.",
        "The price is the node's price in force now. The instance locks the node's terms (price, currency, rounding) "
        "when it is created (billingTerms, docs/BILLING.md): a later change of the node's price does not apply to it. "
        "If the price changes before the quote is accepted, the tool quotes again instead of provisioning.",
    ]
    if availability != "Available":
        notes.append(f"The node is {availability}: the API will refuse the instance (NodeNotAvailable).")
    if capacity and capacity.get("freeGpus", gpus) < gpus:
        notes.append(f"The node has {capacity.get('freeGpus')} free GPUs: the API will refuse (InsufficientCapacity).")
    summary = (
        f"Instance {call.args['name']} ({call.args['model']}) on node {call.args['node']}: {gpus} GPUs at "
        f"{price['pricePerGpuHour']} {price['currency']} per GPU-hour = {_money(hour)} {price['currency']} per hour "
        f"({_money(day)} per day) while it exists."
    )
    body = {
        "summary": summary,
        "gpus": gpus,
        "memoryGb": int(call.args["memoryGb"]),
        "node": node.get("id"),
        "candidateNodes": [node.get("id")],
        "prices": [price],
        "maxDurationMinutes": None,
        "estimatedCost": [
            {"amount": _money(hour), "currency": price["currency"], "basis": "per hour while it exists"},
            {"amount": _money(day), "currency": price["currency"], "basis": "per 24 hours while it exists"},
        ],
        "upperBound": False,
        "notes": notes,
    }
    terms = {k: price[k] for k in ("pricePerGpuHour", "currency", "billingIncrementSeconds", "minimumBillableSeconds")}
    return body, terms


async def provision_instance(call: ToolCall) -> Result:
    accepted = _accepted_quote(call, "provision_instance")
    body, terms = await _instance_quote_body(call)
    if accepted is None or accepted.terms != terms:
        quote = _quote(call, "provision_instance", terms, body)
        note = body["summary"] + " Nothing was provisioned: show this quote to the user, and call again with quoteId"
        note += " once they accept." if accepted is None else " (the node's price changed since the last quote)."
        return Result({"status": "quote", "quote": quote}, note)
    _spend(call, accepted)
    payload = {
        "name": call.args["name"],
        "properties": {"model": call.args["model"], "gpus": call.args["gpus"], "memoryGb": call.args["memoryGb"]},
    }
    response = await call.api.request("POST", call.instance_path(call.args["node"]), json=payload)
    return Result(
        {"status": "accepted", "instance": response.json()},
        "Provisioning accepted: follow it with get_operation(status_url) or get_instance.",
    )


async def delete_instance(call: ToolCall) -> Result:
    response = await call.api.request("DELETE", call.instance_path(call.args["node"], call.args["name"]))
    if response.status_code == 204:
        return Result({"status": "notFound"}, "There is no such instance (nothing to delete).")
    return Result({"status": "accepted", "operation": response.headers.get("Azure-AsyncOperation")})


# ----------------------------------------------------------------------------------------------------- jobs
def _key(value: str | None) -> str:
    return "".join((value or "").lower().split())


#: The vendor of a kind one vendor makes (or the seed meant), when a job names neither model nor vendor — the API's
#: rule (itl_accelerator/domain/accelerators.py ``DEFAULT_VENDORS``, ``job_vendor``; tests/unit/test_mcp_server.py
#: holds the two equal).
DEFAULT_VENDORS = {"gpu": "NVIDIA", "tpu": "Google", "neuron": "AWS", "hpu": "Intel"}


def job_vendor(kind: str, model: str | None, said: str | None) -> str | None:
    """The vendor a job's devices must come from, lower case (None: any): the one it said (``Any``: any); any when
    it named a model; else its kind's usual vendor (NVIDIA GPUs for the seed's forms)."""
    if said:
        return None if said.lower() == "any" else said.lower()
    if _key(model):
        return None
    vendor = DEFAULT_VENDORS.get(kind.lower())
    return vendor.lower() if vendor else None


def _asked(args: dict[str, Any]) -> tuple[str, int, str, int]:
    """What a job asks for: ``(kind, count, model key, memory GiB)`` from its ``accelerator`` or the seed's GPU
    shorthand (``requestedGpus``, ``gpuModel``, ``requestedMemoryGb``). ``ToolRefused`` when it says neither."""
    wanted = args.get("accelerator") or {}
    if not wanted and args.get("requestedGpus") is None:
        raise ToolRefused(
            "InvalidRequestContent",
            "Say what the job asks for: accelerator ({'kind': 'TPU', 'count': 8, 'model': 'v5e'}) or requestedGpus "
            "with requestedMemoryGb.",
            "accelerator",
        )
    kind = str(wanted.get("kind") or "GPU")
    count = int(wanted.get("count") or args.get("requestedGpus") or 0)
    model = _key(wanted.get("model") or args.get("gpuModel"))
    memory = int(wanted.get("memoryGb") or args.get("requestedMemoryGb") or 0)
    return kind, count, model, memory


async def _job_quote_body(call: ToolCall) -> tuple[dict[str, Any], dict[str, Any]]:
    args = call.args
    kind, gpus, model_wanted, memory = _asked(args)
    minutes = int(args.get("maxDurationMinutes") or 10080)
    runs = _runs(args)
    parts = int((args.get("accelerator") or {}).get("nodes") or 1)  # a multi-node job: count on each node
    nodes = await call.api.list(provider_path(call.subscription()) + "/sparkNodes", max_items=1000)
    candidates = []
    for node in nodes["value"]:
        props = node.get("properties") or {}
        capacity = props.get("capacity") or {}
        held = props.get("accelerator") or {"kind": "GPU", "model": (props.get("hardwareSpecs") or {}).get("gpuModel")}
        if _key(held.get("kind")) != _key(kind):
            continue
        if model_wanted and _key(held.get("model")) != model_wanted:
            continue
        vendor = job_vendor(kind, model_wanted, (args.get("accelerator") or {}).get("vendor"))
        if vendor and _key(held.get("vendor") or "NVIDIA") != _key(vendor):
            continue
        if args.get("location") and _key(node.get("location")) != _key(args["location"]):
            continue
        total = capacity.get("totalAccelerators", capacity.get("totalGpus", 0))
        if total < gpus or capacity.get("totalMemoryGb", 0) < memory:
            continue
        candidates.append(node)
    bounds = _bounds([_pricing(node) for node in candidates])
    estimated = [
        {
            "amount": _money(_cost(bound, gpus, minutes * 60) * runs * parts),
            "currency": cur,
            "basis": f"at most, for the whole maxDurationMinutes ({minutes})"
            + (f", each of up to {runs} runs (retries or requeues)" if runs > 1 else ""),
        }
        for cur, bound in sorted(bounds.items())
    ]
    notes = [
        "The provider picks the node when it places the job (best fit), so the node is not known now: the estimate is "
        "an upper bound, the highest price among the nodes you can see that could hold the job, for the whole "
        "maxDurationMinutes. A job is billed only while it runs, up to its end or that limit.",
        "A job locks the terms of the node it is placed on when it is placed (billingTerms, docs/BILLING.md). With "
        "one currency among the candidate nodes the job is submitted with these terms as its maxPrice (the API's "
        "price ceiling), so no node priced above them — re-priced while the job waits, or outside your view — ever "
        "takes it, and this bound holds; with several currencies it gets the API's default ceiling, the prices of "
        "the subscription's nodes when it is submitted.",
    ]
    if not candidates:
        notes.append(
            "No node you can see could hold this job: unless a node outside your view can, the API will fail it as "
            "inadmissible, with the reason in statusReason."
        )
    if estimated:
        costs = ", ".join(f"{e['amount']} {e['currency']}" for e in estimated)
        each = f"{gpus} {kind}s" + (f" on each of {parts} nodes" if parts > 1 else "")
        summary = f"Job {args['name']}: {each} for at most {minutes} minutes costs at most {costs}."
    else:
        summary = f"Job {args['name']}: {gpus} {kind}s for at most {minutes} minutes; no price known (no node fits)."
    body = {
        "summary": summary,
        "gpus": gpus,
        "memoryGb": memory,
        "node": None,
        "candidateNodes": [n.get("id") for n in candidates],
        "prices": [bounds[cur] for cur in sorted(bounds)],
        "maxDurationMinutes": minutes,
        "estimatedCost": estimated,
        "upperBound": True,
        "notes": notes,
    }
    if len(bounds) == 1:
        (bound,) = bounds.values()
        ceiling = {k: bound[k] for k in _MAX_PRICE_MEMBERS}
        if _key(kind) != "gpu":  # the API's name of the price per device-hour of any kind
            ceiling["pricePerAcceleratorHour"] = ceiling.pop("pricePerGpuHour")
        body["maxPrice"] = ceiling
    return body, {e["currency"]: e["amount"] for e in estimated}


#: The members of a job's ``maxPrice`` (the API's price ceiling) a quote's bound sets.
_MAX_PRICE_MEMBERS = ("pricePerGpuHour", "currency", "billingIncrementSeconds", "minimumBillableSeconds")


def _bounds(prices: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per currency, the least terms that every candidate's pricing is within, by the API's rule (its pricing.py):
    the highest price and minimum, and an increment every candidate's divides (their least common multiple, at most
    an hour; an hour when it would be more: a candidate whose increment does not divide it is then left out of the
    bound, and the API will not place the job there)."""
    found: dict[str, dict[str, Any]] = {}
    for price in prices:
        bound = found.setdefault(
            price["currency"],
            {"node": None, "pricePerAcceleratorHour": 0.0, "pricePerGpuHour": 0.0, "currency": price["currency"],
             "billingIncrementSeconds": 1, "minimumBillableSeconds": 0},
        )  # fmt: skip
        bound["pricePerGpuHour"] = max(bound["pricePerGpuHour"], price["pricePerGpuHour"])
        bound["pricePerAcceleratorHour"] = bound["pricePerGpuHour"]
        bound["minimumBillableSeconds"] = max(bound["minimumBillableSeconds"], price["minimumBillableSeconds"])
        increment = math.lcm(bound["billingIncrementSeconds"], max(1, price["billingIncrementSeconds"]))
        bound["billingIncrementSeconds"] = increment if increment <= 3600 else 3600
    return found


def _within(quoted: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether the bound now is no higher than the quoted one, in every currency it has."""
    return all(cur in quoted and Decimal(amount) <= Decimal(quoted[cur]) for cur, amount in now.items())


_JOB_PROPERTIES = (
    "jobType",
    "workload",
    "accelerator",
    "requestedGpus",
    "requestedMemoryGb",
    "gpuModel",
    "priority",
    "retryStrategy",
    "preemptible",
    "preemptMode",
)

#: The most runs a job may have in all (failures retried, or preemptions requeued): domain/retries.py MAX_ATTEMPTS.
MAX_RUNS = 10


def _runs(args: dict[str, Any]) -> int:
    """How many times the job may run at most: its retryStrategy's attempts, or every run a job may have when it asks
    to be requeued after a preemption — the quote's bound multiplies by it."""
    if args.get("preemptible") and args.get("preemptMode") == "Requeue":
        return MAX_RUNS
    return int((args.get("retryStrategy") or {}).get("attempts") or 1)


def _quote_or_spend(
    call: ToolCall,
    tool: str,
    accepted: QuoteClaims | None,
    quoted: tuple[dict[str, Any], dict[str, Any]],
    did: str,
    what: str,
    change: str,
) -> Result | None:
    """The single-use quote flow of a paid tool (``submit_job``, ``book_reservation``), after the quote the caller
    sent was checked (``accepted``: :func:`_accepted_quote`, refusing another call's first) and the call quoted now
    (``quoted``: its body and terms): a quote to show (none accepted yet, or prices rose above the accepted one:
    nothing ``did``), 409 ``QuoteNotValid`` for an accepted quote that named no price (no node could hold ``what``:
    ``change`` it), else the accepted quote spent and None."""
    body, terms = quoted
    if accepted is None or not _within(accepted.terms, terms):
        quote = _quote(call, tool, terms, body)
        note = body["summary"] + f" Nothing was {did}: show this quote to the user, and call again with quoteId"
        note += " once they accept." if accepted is None else " (prices rose since the last quote)."
        return Result({"status": "quote", "quote": quote}, note)
    if not accepted.terms:
        raise ToolRefused(
            "QuoteNotValid",
            f"The quote named no price: no node you can see could hold this {what}, so there is nothing to accept. "
            f"Change {change} and ask for a new quote.",
            "quoteId",
        )
    _spend(call, accepted)
    return None


async def submit_job(call: ToolCall) -> Result:
    accepted = _accepted_quote(call, "submit_job")
    body, terms = await _job_quote_body(call)
    shown = _quote_or_spend(call, "submit_job", accepted, (body, terms), "submitted", "job",
                            "the job (GPUs, memory, gpuModel, location)")  # fmt: skip
    if shown is not None:
        return shown
    properties = {k: call.args[k] for k in _JOB_PROPERTIES if call.args.get(k) is not None}
    properties["maxDurationMinutes"] = body["maxDurationMinutes"]
    if body.get("maxPrice"):
        properties["maxPrice"] = body["maxPrice"]  # the quoted bound is the job's price ceiling
    payload: dict[str, Any] = {"name": call.args["name"], "properties": properties}
    for key in ("location", "tags"):
        if call.args.get(key) is not None:
            payload[key] = call.args[key]
    response = await call.api.request("POST", call.job_path(), json=payload)
    return Result(
        {"status": "accepted", "job": response.json()},
        "Job submitted: get_job shows its status (and, while it waits, statusReason and estimatedStartTime).",
    )


async def cancel_job(call: ToolCall) -> Result:
    await call.api.request("POST", call.job_path(call.args["name"]) + "/cancel")
    return Result({"status": "accepted", "job": await call.api.get(call.job_path(call.args["name"]))})


async def delete_job(call: ToolCall) -> Result:
    response = await call.api.request("DELETE", call.job_path(call.args["name"]))
    if response.status_code == 204:
        return Result({"status": "notFound"}, "There is no such job (nothing to delete).")
    return Result({"status": "deleted"})


# ----------------------------------------------------------------------------------------------------- reservations
async def list_reservations(call: ToolCall) -> Result:
    path = provider_path(call.subscription(), call.resource_group(required=False)) + "/capacityReservations"
    page = await call.api.list(path, max_items=call.args.get("maxItems", 100))
    states = call.args.get("state")
    if states:
        page["value"] = [r for r in page["value"] if (r.get("properties") or {}).get("state") in states]
    return Result(page)


async def get_reservation(call: ToolCall) -> Result:
    return Result(await call.api.get(call.reservation_path(call.args["name"])))


def _window_hours(args: dict[str, Any]) -> int:
    """Whole hours of the window ``[startTime, endTime)``; ``ToolRefused`` for a time that is not ISO 8601 with an
    offset (the API then checks whole hours, the future and the limits: models/reservations.py)."""
    try:
        start = datetime.fromisoformat(str(args["startTime"]).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(args["endTime"]).replace("Z", "+00:00"))
        seconds = (end - start).total_seconds()
    except (TypeError, ValueError):
        raise ToolRefused(
            "InvalidRequestContent", "startTime and endTime are ISO 8601 UTC, e.g. 2026-12-08T09:00:00Z.", "startTime"
        ) from None
    if seconds < 3600:
        raise ToolRefused("InvalidRequestContent", "endTime must be at least one hour after startTime.", "endTime")
    return math.ceil(seconds / 3600)


async def _reservation_quote_body(call: ToolCall) -> tuple[dict[str, Any], dict[str, Any]]:
    """The quote of a booking: the nodes the caller sees that could hold it (kind, model, vendor, location, devices
    and memory per node), per currency the highest price among them per device-hour, and the window's cost at it —
    hours x devices per node x nodes x price, billed whole used or not (services/api/reservations.py)."""
    args = call.args
    wanted = args["accelerator"]
    kind, count = str(wanted["kind"]), int(wanted["count"])
    model_wanted, memory = _key(wanted.get("model")), int(wanted.get("memoryGb") or 0)
    parts = int(wanted.get("nodes") or 1)
    hours = _window_hours(args)
    stated = args.get("maxPrice") or {}
    ceiling = stated.get("pricePerAcceleratorHour", stated.get("pricePerGpuHour"))
    nodes = await call.api.list(provider_path(call.subscription()) + "/sparkNodes", max_items=1000)
    candidates = []
    for node in nodes["value"]:
        props = node.get("properties") or {}
        capacity = props.get("capacity") or {}
        held = props.get("accelerator") or {"kind": "GPU", "model": (props.get("hardwareSpecs") or {}).get("gpuModel")}
        if _key(held.get("kind")) != _key(kind) or (model_wanted and _key(held.get("model")) != model_wanted):
            continue
        vendor = job_vendor(kind, model_wanted, wanted.get("vendor"))
        if vendor and _key(held.get("vendor") or "NVIDIA") != _key(vendor):
            continue
        if _key(node.get("location")) != _key(args["location"]):
            continue
        total = capacity.get("totalAccelerators", capacity.get("totalGpus", 0))
        if total < count or capacity.get("totalMemoryGb", 0) < memory:
            continue
        price = _pricing(node)
        if stated and (
            price["currency"] != str(stated.get("currency", "")).upper()
            or (ceiling is not None and price["pricePerGpuHour"] > float(ceiling))
        ):
            continue  # the API never books above the stated maxPrice
        candidates.append(node)
    bounds = _bounds([_pricing(node) for node in candidates])
    estimated = [
        {
            "amount": _money(Decimal(str(bound["pricePerGpuHour"])) * count * parts * hours),
            "currency": cur,
            "basis": f"the whole window ({hours} hours), billed used or not",
        }
        for cur, bound in sorted(bounds.items())
    ]
    prices = {float(p["pricePerGpuHour"]) for p in (_pricing(n) for n in candidates)}
    notes = [
        "A reservation is billed for every hour of its window, used or not, at the price per device-hour locked when "
        "it is booked (billingTerms). Cancelled before the window starts, nothing is billed; once it has started, "
        "the window is billed whole.",
        "The provider picks the nodes when it books (those free for the whole window): the estimate is at the "
        "highest price among the nodes you can see that could hold it. With one currency the booking is sent with "
        "that price as its maxPrice, so it is never locked above the quote.",
        "Whether the window is free is known only when booking: a window taken answers InsufficientCapacity naming "
        "the nodes that block it, and nothing is billed.",
    ]
    if not candidates:
        notes.append("No node you can see could hold this reservation: the API will refuse it (InsufficientCapacity).")
    each = f"{count} {kind}s" + (f" on each of {parts} nodes" if parts > 1 else "")
    window = f"{args['startTime']} to {args['endTime']}"
    if estimated:
        costs = ", ".join(f"{e['amount']} {e['currency']}" for e in estimated)
        summary = f"Reservation {args['name']}: {each} from {window} ({hours} hours) costs {costs}" + (
            " at most." if len(prices) > 1 else "."
        )
    else:
        summary = f"Reservation {args['name']}: {each} from {window}; no price known (no node fits)."
    body: dict[str, Any] = {
        "summary": summary,
        "gpus": count * parts,
        "memoryGb": memory * parts,
        "node": None,
        "candidateNodes": [n.get("id") for n in candidates],
        "prices": [bounds[cur] for cur in sorted(bounds)],
        "maxDurationMinutes": hours * 60,
        "estimatedCost": estimated,
        "upperBound": len(prices) > 1,
        "notes": notes,
    }
    if len(bounds) == 1:
        (bound,) = bounds.values()
        body["maxPrice"] = {"pricePerAcceleratorHour": bound["pricePerGpuHour"], "currency": bound["currency"]}
    return body, {e["currency"]: e["amount"] for e in estimated}


async def book_reservation(call: ToolCall) -> Result:
    accepted = _accepted_quote(call, "book_reservation")
    body, terms = await _reservation_quote_body(call)
    shown = _quote_or_spend(call, "book_reservation", accepted, (body, terms), "booked", "reservation",
                            "it (devices, model, location)")  # fmt: skip
    if shown is not None:
        return shown
    properties: dict[str, Any] = {k: call.args[k] for k in ("accelerator", "startTime", "endTime")}
    if body.get("maxPrice"):
        properties["maxPrice"] = body["maxPrice"]  # the quoted price is the booking's ceiling
    payload: dict[str, Any] = {"location": call.args["location"], "properties": properties}
    if call.args.get("tags") is not None:
        payload["tags"] = call.args["tags"]
    response = await call.api.request("PUT", call.reservation_path(call.args["name"]), json=payload)
    return Result(
        {"status": "booked", "reservation": response.json()},
        "Booked: reservedNodes are the nodes that hold it, totalCost what its window costs (billed used or not).",
    )


async def cancel_reservation(call: ToolCall) -> Result:
    response = await call.api.request("DELETE", call.reservation_path(call.args["name"]))
    if response.status_code == 204:
        return Result({"status": "notFound"}, "There is no such reservation (nothing to cancel).")
    return Result(
        {"status": "cancelled"},
        "Cancelled. Before its window nothing is billed; once the window has started it is billed whole.",
    )


# ----------------------------------------------------------------------------------------------------- the list
def _scoped(*properties: tuple[str, dict[str, Any]], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return obj(dict(properties), list(required))


_SUB = ("subscriptionId", SUBSCRIPTION)
_RG = ("resourceGroup", RESOURCE_GROUP)
_RG_OPTIONAL = (
    "resourceGroup",
    {**RESOURCE_GROUP, "description": "Resource group name; leave it out for the whole subscription."},
)
_MAX = ("maxItems", MAX_ITEMS)
_NODE = ("node", _name("node (sparkNode)"))
_JOB_STATUS = api_field("SparkJobProperties", "status")
_RESERVATION_STATE = api_field("CapacityReservationProperties", "state")


def _time_filter(name: str) -> dict[str, Any]:
    return {"type": "string", "maxLength": 64, "description": f"{name}: ISO 8601 UTC, inclusive."}


def _hour(description: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": 64, "description": description}


def _outcome(*branches: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return obj({"status": {"type": "string"}, **dict(branches)}, ["status"])


def build_tools() -> list[ToolSpec]:
    """Every tool, reads first. Schemas are built from the API's models on each call (cheap: dict copies)."""
    job_fields = {key: api_field("SparkJobPropertiesWrite", key) for key in _JOB_PROPERTIES}
    job_fields["maxDurationMinutes"] = api_field(
        "SparkJobPropertiesWrite",
        "maxDurationMinutes",
        "Longest run in minutes (default 10080 = 7 days); the job is stopped then. The quote bounds the cost by it.",
    )
    return [
        ToolSpec(
            "get_my_access",
            "Who am I here",
            "The caller as the provider sees the token: subject, roles (itl-accelerator-consumer, -supplier, -admin) "
            "and ARM scopes (subscriptions and resource groups it may act in). Use it to find the subscriptionId "
            "other tools need.",
            obj({}),
            obj(
                {
                    "subject": {"type": "string"},
                    "displayName": {"type": "string"},
                    "roles": {"type": "array", "items": {"type": "string"}},
                    "scopes": {"type": "array", "items": {"type": "string"}},
                    "subscriptions": {"type": "array", "items": {"type": "string"}},
                    "defaultSubscription": {"type": ["string", "null"]},
                    "defaultResourceGroup": {"type": ["string", "null"]},
                },
                ["subject", "roles", "scopes", "subscriptions"],
            ),
            READ,
            get_my_access,
        ),
        ToolSpec(
            "list_nodes",
            "List GPU nodes",
            "List GPU nodes (sparkNodes) of a resource group, or of the whole subscription: each with its ARM id, "
            "GPU model and count, free GPUs and GPU memory (properties.capacity), price per GPU-hour "
            "(properties.pricing), availability (Available, Cordoned, Maintenance, Offline) and owner.",
            _scoped(_SUB, _RG_OPTIONAL, _MAX),
            _page("SparkNode"),
            READ,
            list_nodes,
        ),
        ToolSpec(
            "get_node",
            "Show a GPU node",
            "One GPU node (sparkNode): hardware, capacity (free GPUs and GPU memory), pricing, availability, owner.",
            _scoped(_SUB, _RG, _NODE, required=("resourceGroup", "node")),
            model_schema("SparkNode"),
            READ,
            get_node,
        ),
        ToolSpec(
            "list_instances",
            "List Ollama instances of a node",
            "List the Ollama LLM-serving instances (sparkOllamaInstances) on a node: model, GPUs, provisioningState "
            "(Accepted, Provisioning, Succeeded, Failed, Deleting) and endpoint (the Ollama API URL once Succeeded).",
            _scoped(_SUB, _RG, _NODE, _MAX, required=("resourceGroup", "node")),
            _page("SparkOllamaInstance"),
            READ,
            list_instances,
        ),
        ToolSpec(
            "get_instance",
            "Show an Ollama instance",
            "One Ollama instance on a node: model, GPUs, GiB, provisioningState, endpoint, and error when it failed.",
            _scoped(_SUB, _RG, _NODE, ("name", _name("instance")), required=("resourceGroup", "node", "name")),
            model_schema("SparkOllamaInstance"),
            READ,
            get_instance,
        ),
        ToolSpec(
            "list_jobs",
            "List GPU jobs (and why they wait)",
            "List GPU jobs (sparkJobs) of a resource group or the whole subscription. Each job has properties.status "
            "(Pending, Scheduled, Running, Succeeded, Failed, Canceled, Preempted) and properties.statusReason, which says why "
            "a job waits (what capacity it needs) or why it failed; while it waits, estimatedStartTime (when it is "
            "expected to start; null with estimatedStartReason when not known) and queuePosition; assignedNode, "
            "cost. Consumers see only their "
            "own jobs. mine=true lists the caller's own; status filters the listed jobs, e.g. ['Pending'] for "
            "'which of my jobs are waiting and why'.",
            _scoped(
                _SUB,
                _RG_OPTIONAL,
                ("mine", {"type": "boolean", "default": False, "description": "Only the caller's own jobs."}),
                (
                    "submittedBy",
                    {"type": "string", "minLength": 1, "maxLength": 255, "description": "Only this user's jobs."},
                ),
                ("status", {"type": "array", "items": _JOB_STATUS, "description": "Keep only jobs in these states."}),
                _MAX,
            ),
            _page("SparkJob"),
            READ,
            list_jobs,
        ),
        ToolSpec(
            "get_job",
            "Show a GPU job",
            "One GPU job: status and statusReason (why it waits or failed), while it waits estimatedStartTime and "
            "queuePosition (when it is expected to start, its place in the queue), assignedNode, times, GPU-seconds, "
            "cost.",
            _scoped(_SUB, _RG, ("name", _name("job")), required=("resourceGroup", "name")),
            model_schema("SparkJob"),
            READ,
            get_job,
        ),
        ToolSpec(
            "get_usage",
            "Usage and earnings",
            "Usage statistics per UTC hour over the last `hours` (1-720, default 24) and totals: GPU-seconds, "
            "billable GPU-seconds, utilisation, energy, requests and tokens (instances), cost per currency. Name a "
            "job; or a node and an instance; or a node alone (a node's cost is its supplier's earnings; node stats "
            "are for the node's supplier and admins).",
            _scoped(
                _SUB,
                _RG,
                ("node", {**_name("node"), "description": "Node name (alone: the node's own stats)."}),
                ("instance", _name("instance on that node")),
                ("job", _name("job")),
                ("hours", {"type": "integer", "minimum": 1, "maximum": 720, "default": 24}),
                required=("resourceGroup",),
            ),
            model_schema("UsageStats"),
            READ,
            get_usage,
        ),
        ToolSpec(
            "list_offers",
            "What a job could get now",
            "Capacity offers in a location, per accelerator kind and model: the largest request placed at once now "
            "(largestSingleNode: devices on one node and the GiB of device memory beside them), nodes and how many "
            "take work, the price range per device-hour per currency, the tightest quota and what budgets covering "
            "work in resourceGroup allow (allowedNow). Call it before submit_job and ask for at most that.",
            _scoped(
                _SUB,
                ("location", {"type": "string", "minLength": 1, "maxLength": 64, "description": "e.g. us-east-1"}),
                _RG_OPTIONAL,
                required=("location",),
            ),
            _page("Offer"),
            READ,
            list_offers,
        ),
        ToolSpec(
            "list_reservations",
            "List capacity reservations",
            "List capacity reservations (devices booked for a future window) of a resource group or the whole "
            "subscription: each with its window (startTime..endTime, UTC, end exclusive), state (Scheduled before the "
            "window, Active in it, Expired after), reservedNodes (the nodes that hold it and their devices), the "
            "locked price (billingTerms) and totalCost. Consumers see their own; suppliers those booked on their "
            "nodes (what they sold); admins all. state filters the listed ones, e.g. ['Scheduled'].",
            _scoped(
                _SUB,
                _RG_OPTIONAL,
                ("state", {"type": "array", "items": _RESERVATION_STATE, "description": "Keep only these states."}),
                _MAX,
            ),
            _page("CapacityReservation"),
            READ,
            list_reservations,
        ),
        ToolSpec(
            "get_reservation",
            "Show a capacity reservation",
            "One capacity reservation: what it books, its window and state, the nodes that hold it, the price per "
            "device-hour locked at booking, hours and totalCost, who booked it and when.",
            _scoped(_SUB, _RG, ("name", _name("reservation")), required=("resourceGroup", "name")),
            model_schema("CapacityReservation"),
            READ,
            get_reservation,
        ),
        ToolSpec(
            "list_audit_events",
            "Audit trail",
            "The subscription's audit events (admins), oldest first: who changed what, when, the outcome (Succeeded "
            "or Denied), request ids and the client's user agent. Filter by resourceId (an ARM id) and time "
            "(ISO 8601 UTC, e.g. 2026-11-30T00:00:00Z).",
            _scoped(
                _SUB,
                ("startTime", _time_filter("startTime")),
                ("endTime", _time_filter("endTime")),
                ("resourceId", {"type": "string", "maxLength": 1024, "description": "ARM id of one resource."}),
                _MAX,
            ),
            _page("AuditEvent"),
            READ,
            list_audit_events,
        ),
        ToolSpec(
            "get_operation",
            "Long-running operation status",
            "The status of a long-running operation (provisioning or deleting an instance, a job's submission): "
            "Accepted, Running, then Succeeded, Failed or Canceled with its error. Give the status_url or "
            "operation URL a tool returned, or its path.",
            _scoped(("operation", {"type": "string", "minLength": 1, "maxLength": 2048}), required=("operation",)),
            model_schema("OperationStatus"),
            READ,
            get_operation,
        ),
        ToolSpec(
            "create_node",
            "Register a GPU node",
            "Register a GPU node (admins): name, location, sku ({name, capacity = GPU count}) and properties (owner = "
            "the supplier's subject, hardwareSpecs, pricing, availability). Fails with Conflict when the name exists.",
            _scoped(
                _SUB,
                _RG,
                ("name", api_field("SparkNodeCreate", "name")),
                ("location", api_field("SparkNodeCreate", "location")),
                ("sku", model("Sku")),
                ("tags", api_field("SparkNodeCreate", "tags")),
                ("properties", model("SparkNodePropertiesWrite")),
                required=("resourceGroup", "name", "location", "sku"),
            ),
            model_schema("SparkNode"),
            CREATE,
            create_node,
        ),
        ToolSpec(
            "set_node_pricing",
            "Set a node's price",
            "Set a node's pricing (its supplier or an admin): pricePerGpuHour in currency (ISO 4217), "
            "billingIncrementSeconds, minimumBillableSeconds. Applies to usage from now on.",
            _scoped(_SUB, _RG, _NODE, ("pricing", model("Pricing")), required=("resourceGroup", "node", "pricing")),
            model_schema("SparkNode"),
            CHANGE,
            set_node_pricing,
        ),
        ToolSpec(
            "set_node_availability",
            "Cordon or uncordon a node",
            "Cordon a node (availability Cordoned: it takes no new instances or jobs; what runs goes on), put it in "
            "Maintenance or Offline, or make it Available again (uncordon). Its supplier or an admin.",
            _scoped(
                _SUB,
                _RG,
                _NODE,
                ("availability", model("Availability")),
                required=("resourceGroup", "node", "availability"),
            ),
            model_schema("SparkNode"),
            CHANGE,
            set_node_availability,
        ),
        ToolSpec(
            "provision_instance",
            "Provision an Ollama instance (quote first)",
            "Provision an Ollama LLM-serving instance on a node (admins); it reserves GPUs and is billed while it "
            "exists. Without quoteId it only returns a quote (GPUs, node, price per GPU-hour, cost per hour): show it "
            "to the user and call again with the same arguments and quoteId when they accept.",
            _scoped(
                _SUB,
                _RG,
                _NODE,
                ("name", _name("instance")),
                ("model", api_field("InstancePropertiesWrite", "model")),
                ("gpus", api_field("InstancePropertiesWrite", "gpus", "GPUs to reserve on the node.")),
                ("memoryGb", api_field("InstancePropertiesWrite", "memoryGb", "GiB of GPU memory to reserve.")),
                ("quoteId", QUOTE_ID),
                required=("resourceGroup", "node", "name", "model", "gpus", "memoryGb"),
            ),
            _outcome(("quote", QUOTE), ("instance", model("AcceptedInstance"))),
            CREATE,
            provision_instance,
        ),
        ToolSpec(
            "delete_instance",
            "Delete an Ollama instance",
            "Delete (deprovision) an Ollama instance, releasing its GPUs; cancels a provisioning in progress. Admins.",
            _scoped(_SUB, _RG, _NODE, ("name", _name("instance")), required=("resourceGroup", "node", "name")),
            _outcome(("operation", {"type": ["string", "null"]})),
            CHANGE,
            delete_instance,
        ),
        ToolSpec(
            "submit_job",
            "Submit an accelerator job (quote first)",
            "Submit a job (training, fineTuning, batchInference) on accelerators: accelerator says what it asks for "
            "(kind GPU, TPU, NPU..., count, optionally model and memoryGb); requestedGpus with requestedMemoryGb and "
            "gpuModel is the short form for GPUs. The provider places it on a node of that kind with room "
            "(or it waits, status Pending with the reason) and runs it; billed while it runs. Without quoteId it only "
            "returns a quote (an upper bound of the cost over its maxDurationMinutes): show it to the user and call "
            "again with the same arguments and quoteId when they accept. Without workload the job type's default "
            "container runs.",
            _scoped(
                _SUB,
                _RG,
                ("name", _name("job")),
                ("location", api_field("SparkJobWrite", "location")),
                ("tags", api_field("SparkJobWrite", "tags")),
                *job_fields.items(),
                ("quoteId", QUOTE_ID),
                required=("resourceGroup", "name"),
            ),
            _outcome(("quote", QUOTE), ("job", model("AcceptedJob"))),
            CREATE,
            submit_job,
        ),
        ToolSpec(
            "cancel_job",
            "Cancel a GPU job",
            "Cancel a job before it ends (consumers: their own); its GPUs are released. A finished job: Conflict.",
            _scoped(_SUB, _RG, ("name", _name("job")), required=("resourceGroup", "name")),
            _outcome(("job", model("SparkJob"))),
            CHANGE,
            cancel_job,
        ),
        ToolSpec(
            "book_reservation",
            "Book a capacity reservation (quote first)",
            "Book devices for a future window (a capacity reservation): accelerator (kind, count per node, "
            "optionally model, vendor, memoryGb per node, nodes for several nodes at once) in location, from "
            "startTime to endTime on whole UTC hours (e.g. 2026-12-08T09:00:00Z; at most 56 days ahead, at most 28 "
            "days long). Billed for every hour of the window, used or not, at the price locked when booked. Without "
            "quoteId it only returns a quote (the window's cost at the highest price of the nodes that could hold "
            "it): show it to the user and call again with the same arguments and quoteId when they accept. A window "
            "that is taken: InsufficientCapacity naming the nodes that block it.",
            _scoped(
                _SUB,
                _RG,
                ("name", _name("reservation")),
                ("location", api_field("CapacityReservationWrite", "location")),
                ("tags", api_field("CapacityReservationWrite", "tags")),
                ("accelerator", model("JobAccelerator")),
                ("startTime", _hour("The window's start, a whole UTC hour: 2026-12-08T09:00:00Z.")),
                ("endTime", _hour("The window's end (exclusive), a whole UTC hour after startTime.")),
                ("maxPrice", model("MaxPrice")),
                ("quoteId", QUOTE_ID),
                required=("resourceGroup", "name", "location", "accelerator", "startTime", "endTime"),
            ),
            _outcome(("quote", QUOTE), ("reservation", model("CapacityReservation"))),
            CREATE,
            book_reservation,
        ),
        ToolSpec(
            "cancel_reservation",
            "Cancel a capacity reservation",
            "Cancel a capacity reservation (consumers: their own). Before its window starts nothing is billed; once "
            "it has started the window is billed whole and its devices are free for others.",
            _scoped(_SUB, _RG, ("name", _name("reservation")), required=("resourceGroup", "name")),
            _outcome(),
            CHANGE,
            cancel_reservation,
        ),
        ToolSpec(
            "delete_job",
            "Delete a finished GPU job",
            "Delete a finished job's record (consumers: their own); its name can then be used again. An active "
            "job: Conflict (cancel it first).",
            _scoped(_SUB, _RG, ("name", _name("job")), required=("resourceGroup", "name")),
            _outcome(),
            CHANGE,
            delete_job,
        ),
    ]


__all__ = ["SPENDING", "ApiError", "Result", "ToolCall", "ToolRefused", "ToolSpec", "build_tools"]
