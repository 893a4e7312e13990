"""Printing what the API returned, in the chosen ``-o`` format, on stdout.

- ``json``: the API's own body, unchanged (a list is ``{"value": [...], "nextLink": ...}`` with every page's items),
  indented: ``| jq '.value[].name'`` works.
- ``table``: the columns of :data:`COLUMNS` for the kind of thing (one row for one resource); usage statistics: a row
  per entry of ``value`` (one per hour), then ``totals``; or the body's fields when it has no points.
- ``id``: the ARM ``id`` of each item, one per line (audit events: ``event_id``; usage: ``resourceId``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

Getter = Callable[[dict[str, Any]], Any]
#: Longest cell of a table (longer values end in "…"; ``-o json`` has them whole).
MAX_CELL = 80


def field(path: str) -> Getter:
    """A getter of a dotted path (``properties.capacity.freeGpus``); None when a step is missing."""

    def get(item: dict[str, Any]) -> Any:
        value: Any = item
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value

    return get


def last_segment(path: str) -> Getter:
    """The name at the end of an ARM id found at ``path`` (``assignedNode`` → ``dgx-1``)."""
    get = field(path)
    return lambda item: (get(item) or "").rstrip("/").rsplit("/", 1)[-1] or None


def _type_and_name(item: dict[str, Any]) -> str | None:
    """The last type and name of an operation's resource: ``sparkOllamaInstances/llama-1``."""
    parts = str(item.get("resourceId") or "").rstrip("/").split("/")
    return "/".join(parts[-2:]) if len(parts) >= 2 else None


def _parent_name(item: dict[str, Any]) -> str | None:
    """The node of an instance, from its id ``.../sparkNodes/{node}/sparkOllamaInstances/{name}``."""
    parts = str(item.get("id") or "").split("/")
    return parts[parts.index("sparkNodes") + 1] if "sparkNodes" in parts[:-2] else None


def _price(item: dict[str, Any]) -> str | None:
    pricing = field("properties.pricing")(item) or {}
    price = pricing.get("pricePerAcceleratorHour", pricing.get("pricePerGpuHour"))
    if price is None:
        return None
    return f"{price} {pricing.get('currency', '')}".strip()


def _accelerator(count: bool) -> Getter:
    """``KIND:MODEL`` (and ``=COUNT`` when ``count``) of a node's or job's ``accelerator``; from the seed's GPU fields
    when it has none (a server from before accelerator kinds)."""

    def get(item: dict[str, Any]) -> str | None:
        props = item.get("properties") or {}
        specs = props.get("hardwareSpecs") or {}
        held = props.get("accelerator") or {
            "kind": "GPU",
            "model": props.get("gpuModel") or specs.get("gpuModel"),
            "count": props.get("requestedGpus"),
        }
        text = ":".join(str(part) for part in (held.get("kind"), held.get("model")) if part)
        number = held.get("count") if count else None
        return f"{text}={number}" if number is not None else text

    return get


def _either(*paths: str) -> Getter:
    """The first of ``paths`` an item has (a newer name, then the one a server before it answered)."""

    def get(item: dict[str, Any]) -> Any:
        return next((v for v in (field(p)(item) for p in paths) if v is not None), None)

    return get


def _gang(row: dict[str, Any]) -> str:
    """``2 x 8`` for the largest multi-node job placed now ("" when none)."""
    gang = (row.get("properties") or {}).get("largestMultiNode")
    return f"{gang['nodes']} x {gang['devicesPerNode']}" if gang else ""


def _price_ranges(item: dict[str, Any]) -> str | None:
    ranges = field("properties.pricePerAcceleratorHour")(item)
    if not isinstance(ranges, list):
        return None
    return ", ".join(
        f"{r.get('min')}-{r.get('max')} {r.get('currency')}"
        if r.get("min") != r.get("max")
        else f"{r.get('min')} {r.get('currency')}"
        for r in ranges
        if isinstance(r, dict)
    )


def _cost(item: dict[str, Any]) -> str | None:
    cost = field("properties.cost")(item)
    return f"{cost.get('amount')} {cost.get('currency', '')}".strip() if isinstance(cost, dict) else None


def _window(item: dict[str, Any]) -> str | None:
    """A reservation's window, ``start .. end`` (UTC, the end exclusive)."""
    props = item.get("properties") or {}
    start, end = props.get("startTime"), props.get("endTime")
    return f"{start} .. {end}" if start and end else None


def _reserved_nodes(item: dict[str, Any]) -> str | None:
    """The nodes a reservation holds, by name, each with its devices: ``dgx-1 (8), dgx-2 (8)``."""
    held = field("properties.reservedNodes")(item)
    if not isinstance(held, list):
        return None
    return ", ".join(
        f"{str(n.get('id') or '').rstrip('/').rsplit('/', 1)[-1]} ({n.get('devices')})"
        for n in held
        if isinstance(n, dict)
    )


def _total_cost(item: dict[str, Any]) -> str | None:
    cost = field("properties.totalCost")(item)
    return f"{cost.get('amount')} {cost.get('currency', '')}".strip() if isinstance(cost, dict) else None


COLUMNS: dict[str, list[tuple[str, Getter]]] = {
    "node": [
        ("Name", field("name")),
        ("Location", field("location")),
        ("SKU", field("sku.name")),
        ("Accelerator", _accelerator(False)),
        ("Devices", _either("properties.capacity.totalAccelerators", "properties.capacity.totalGpus")),
        ("Free", _either("properties.capacity.freeAccelerators", "properties.capacity.freeGpus")),
        ("Free GB", field("properties.capacity.freeMemoryGb")),
        ("Price/device-h", _price),
        ("Availability", field("properties.availability")),
        ("State", field("properties.provisioningState")),
    ],
    "instance": [
        ("Name", field("name")),
        ("Node", _parent_name),
        ("Model", field("properties.model")),
        ("GPUs", field("properties.gpus")),
        ("Memory GB", field("properties.memoryGb")),
        ("State", field("properties.provisioningState")),
        ("Endpoint", field("properties.endpoint")),
    ],
    "job": [
        ("Name", field("name")),
        ("Status", field("properties.status")),
        ("Type", field("properties.jobType")),
        ("Accelerators", _accelerator(True)),
        ("Memory GB", field("properties.requestedMemoryGb")),
        ("Node", last_segment("properties.assignedNode")),
        ("Submitted by", field("properties.submittedBy")),
        ("Submitted at", field("properties.submittedAt")),
        ("Cost", _cost),
        # while it waits: when it is expected to start (Slurm's squeue --start START_TIME)
        ("Expected start", field("properties.estimatedStartTime")),
        ("Reason", field("properties.statusReason")),
    ],
    "reservation": [
        ("Name", field("name")),
        ("State", field("properties.state")),
        ("Accelerators", _accelerator(True)),
        ("Window (UTC)", _window),
        ("Nodes", _reserved_nodes),
        ("Total cost", _total_cost),
    ],
    "operation": [
        ("Name", field("name")),
        ("Status", field("status")),
        ("Resource", _type_and_name),
        ("Started", field("startTime")),
        ("Ended", field("endTime")),
        ("Error", field("error.code")),
    ],
    "slo": [
        ("Objective", field("name")),
        ("Goal %", field("goalPercent")),
        ("Requests", field("requests")),
        ("Bad", field("badRequests")),
        ("Attainment %", field("attainmentPercent")),
        ("Met", field("met")),
        ("Burn rate", field("burnRate")),
        ("Budget left", field("errorBudget.remainingFraction")),
        ("Budget left (min)", field("errorBudget.remainingMinutes")),
    ],
    "quota": [
        ("Name", field("name")),
        ("Limit", field("properties.limit.value")),
        ("In use", field("properties.currentValue")),
        ("Unit", field("properties.unit")),
    ],
    "offer": [
        ("Offer", field("name")),
        ("Nodes", field("properties.nodes")),
        ("Available", field("properties.availableNodes")),
        ("Largest now", field("properties.largestSingleNode.devices")),
        ("Memory GB", field("properties.largestSingleNode.memoryGb")),
        ("Multi-node now", lambda r: _gang(r)),
        ("Allowed now", field("properties.allowedNow")),
        ("Price/device-h", _price_ranges),
        ("Quota", field("properties.quota.name")),
        ("Budget refuses", field("properties.budget.refusal")),
    ],
    "quotaUsage": [
        ("Name", field("name.value")),
        ("In use", field("currentValue")),
        ("Limit", field("limit")),
        ("Unit", field("unit")),
    ],
    "budget": [
        ("Name", field("name")),
        ("Amount", field("properties.amount")),
        ("Currency", field("properties.currency")),
        ("Spent", field("properties.currentSpend.amount")),
        ("Period", field("properties.status.period")),
        ("Exceeded", field("properties.status.exceeded")),
        ("At limit", field("properties.actionAtLimit")),
    ],
    "audit": [
        ("Time", field("timestamp")),
        ("Action", field("action")),
        ("Outcome", field("outcome")),
        ("Actor", field("actor_id")),
        ("Resource", field("resource_name")),
        ("Summary", field("change_summary")),
    ],
}
ID_FIELDS = {"audit": "event_id", "usage": "resourceId", "slo": "name", "quotaUsage": "name"}


def emit(output: str, kind: str, body: Any, *, many: bool = False) -> None:
    """Print ``body`` (one resource, or a list body when ``many``) as ``output`` says. Nothing for no body."""
    if body is None:
        return
    if output == "json":
        click.echo(json.dumps(body, indent=2))
        return
    items = list(body.get("value") or []) if many else [body]
    if output == "id":
        key = ID_FIELDS.get(kind, "id")
        for item in items:
            if isinstance(item, dict) and item.get(key):
                click.echo(item[key])
        return
    if kind == "usage":
        _usage_table(body)
    else:
        click.echo(table([name for name, _ in COLUMNS[kind]], [[get(i) for _, get in COLUMNS[kind]] for i in items]))
    if many and body.get("nextLink"):
        click.echo(f"(more items: --max-items stopped the listing; nextLink {body['nextLink']})", err=True)


def _usage_table(body: dict[str, Any]) -> None:
    """A row per hour of ``value`` (columns: every key the points have, in order of appearance), then the totals;
    or the body's fields when it has no points."""
    points = body.get("value")
    if isinstance(points, list) and points and all(isinstance(p, dict) for p in points):
        headers = list(dict.fromkeys(key for point in points for key in point))
        click.echo(table(headers, [[point.get(h) for h in headers] for point in points]))
        totals = body.get("totals")
        if isinstance(totals, dict) and totals:
            click.echo()
            click.echo(table(list(totals), [list(totals.values())]))
        return
    rows = [[key, value] for key, value in body.items() if key != "value"]
    click.echo(table(["Field", "Value"], rows))


def cell(value: Any) -> str:
    """One table cell: empty for None, ``true``/``false``, JSON for lists and objects, at most :data:`MAX_CELL`."""
    if value is None:
        text = ""
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, dict | list):
        text = json.dumps(value, separators=(",", ":"))
    else:
        text = str(value)
    text = " ".join(text.split())
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """Left-aligned columns under a header and a dashed rule (as ``az -o table``)."""
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = [headers, ["-" * w for w in widths], *cells]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines)
