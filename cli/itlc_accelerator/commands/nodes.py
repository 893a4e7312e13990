"""``node create|show|list|update|delete|cordon|uncordon``: GPU nodes (sparkNodes) and their suppliers' prices.

Requests: create ``POST .../sparkNodes`` with the name in the body (409 ``Conflict`` when it exists); show ``GET
.../sparkNodes/{name}``; list ``GET`` the resource group's collection, or the subscription's without a resource group;
update, cordon, uncordon ``PATCH .../sparkNodes/{name}`` (a JSON merge patch: only what is given changes; ``--tag``
replaces the node's whole tag set); delete ``DELETE`` (200; 204 when there was none; 409 while it holds work).
"""

from __future__ import annotations

import math
from typing import Any

import click

from itlc_accelerator import paths
from itlc_accelerator.output import emit
from itlc_accelerator.session import Session, parse_accelerator, pass_session, tag_option

AVAILABILITY = ("Available", "Cordoned", "Maintenance", "Offline")


@click.group("node")
def node() -> None:
    """Accelerator nodes (GPUs, TPUs, NPUs...): register, price, cordon and remove them."""


def _pricing(price: float | None, currency: str | None, increment: int | None, minimum: int | None) -> dict[str, Any]:
    pricing: dict[str, Any] = {}
    if price is not None:
        pricing["pricePerAcceleratorHour"] = price  # any kind's name (a GPU node's pricePerGpuHour too)
    if currency is not None:
        pricing["currency"] = currency.upper()
    if increment is not None:
        pricing["billingIncrementSeconds"] = increment
    if minimum is not None:
        pricing["minimumBillableSeconds"] = minimum
    return pricing


class Price(click.ParamType[float]):
    """A price per device-hour (per GPU-hour on a GPU node): a finite decimal number >= 0 (``nan``, ``inf`` and
    negatives are usage errors, exit 2)."""

    name = "PRICE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number.", param, ctx)
        if not math.isfinite(number) or number < 0:
            self.fail(f"{value!r} is not a price: give a finite number >= 0.", param, ctx)
        return number


def pricing_options(command: Any) -> Any:
    for option in reversed(
        [
            click.option(
                "--price", type=Price(), help="Price per device-hour of the node's kind (new allocations lock it)."
            ),
            click.option("--currency", help="ISO 4217 currency of the price (USD when never set)."),
            click.option("--billing-increment-seconds", type=click.IntRange(1, 3600), help="Billing increment."),
            click.option("--minimum-billable-seconds", type=click.IntRange(0, 3600), help="Minimum billed."),
        ]
    ):
        command = option(command)
    return command


@node.command("create")
@click.argument("name")
@click.option("--location", "-l", required=True, help="Where the node is, e.g. us-east-1.")
@click.option("--sku", required=True, help="SKU name, e.g. DGX-H100-8GPU.")
@click.option(
    "--accelerator",
    callback=parse_accelerator,
    metavar="KIND[:MODEL]=COUNT",
    help="What it holds, e.g. tpu:v5e=8, npu:910B=8, gpu:mi300x=8 (or --gpus for NVIDIA GPUs).",
)
@click.option("--vendor", help="Who makes them (NVIDIA, AMD, Google, AWS, Intel, Huawei...); with --accelerator.")
@click.option(
    "--memory-gb-per-device", type=click.IntRange(1, 1024), help="GiB per device (known SKUs have a default)."
)
@click.option("--topology", help="A TPU slice's topology, e.g. 2x4.")
@click.option("--gpus", type=click.IntRange(1, 64), help="Number of NVIDIA GPUs (the SKU's capacity).")
@click.option("--gpu-model", help="GPU model, e.g. H100.")
@click.option("--gpu-memory-gb", type=click.IntRange(1, 1024), help="GiB per GPU (known SKUs have a default).")
@click.option("--cpu-cores", type=click.IntRange(1, 4096))
@click.option("--memory-gb", type=click.IntRange(1, 65536), help="System memory in GiB.")
@click.option("--interconnect", help="e.g. NVLink.")
@click.option("--owner", help="The supplier (a token subject); the caller when left out.")
@pricing_options
@click.option("--availability", type=click.Choice(AVAILABILITY), help="Available when left out.")
@tag_option()
@pass_session()
def create(s: Session, name: str, **o: Any) -> None:
    """Register node NAME (a node that exists already: 409 Conflict, exit 1): its devices with --accelerator, or
    NVIDIA GPUs with --gpus."""
    if (o["accelerator"] is None) == (o["gpus"] is None):
        raise click.UsageError("Say what the node holds: --accelerator KIND[:MODEL]=COUNT, or --gpus N.")
    if o["accelerator"] is not None and (o["gpu_model"] or o["gpu_memory_gb"]):
        raise click.UsageError("--gpu-model and --gpu-memory-gb go with --gpus; with --accelerator use its MODEL and "
                               "--memory-gb-per-device.")  # fmt: skip
    count = o["gpus"] if o["gpus"] is not None else o["accelerator"]["count"]
    specs = {
        "gpuModel": o["gpu_model"],
        "gpuCount": o["gpus"],
        "gpuMemoryGb": o["gpu_memory_gb"],
        "cpuCores": o["cpu_cores"],
        "memoryGb": o["memory_gb"],
        "interconnect": o["interconnect"],
    }
    properties: dict[str, Any] = {"hardwareSpecs": {k: v for k, v in specs.items() if v is not None}}
    if o["accelerator"] is not None:
        held = {
            **o["accelerator"],
            "vendor": o["vendor"],
            "memoryGbPerDevice": o["memory_gb_per_device"],
            "topology": o["topology"],
        }
        properties["accelerator"] = {k: v for k, v in held.items() if v is not None}
    pricing = _pricing(o["price"], o["currency"], o["billing_increment_seconds"], o["minimum_billable_seconds"])
    if pricing:
        properties["pricing"] = pricing
    if o["owner"]:
        properties["owner"] = o["owner"]
    if o["availability"]:
        properties["availability"] = o["availability"]
    body: dict[str, Any] = {"name": name, "location": o["location"], "sku": {"name": o["sku"], "capacity": count}}
    if o["tags"] is not None:
        body["tags"] = o["tags"]
    body["properties"] = properties
    created = s.client.send("POST", paths.nodes(s.need_subscription(), s.need_resource_group()), json=body)
    emit(s.output, "node", created.json())


@node.command("show")
@click.argument("name")
@pass_session()
def show(s: Session, name: str) -> None:
    """Show node NAME."""
    emit(s.output, "node", s.client.get(paths.nodes(s.need_subscription(), s.need_resource_group(), name)))


@node.command("list")
@click.option("--max-items", type=click.IntRange(min=1), help="Stop after this many.")
@pass_session()
def list_(s: Session, max_items: int | None) -> None:
    """List the nodes of the resource group, or of the whole subscription without one."""
    body = s.client.list(paths.nodes(s.need_subscription(), s.resource_group), max_items=max_items)
    emit(s.output, "node", body, many=True)


def _patch(s: Session, name: str, body: dict[str, Any]) -> None:
    path = paths.nodes(s.need_subscription(), s.need_resource_group(), name)
    emit(s.output, "node", s.client.send("PATCH", path, json=body).json())


@node.command("update")
@click.argument("name")
@pricing_options
@click.option("--availability", type=click.Choice(AVAILABILITY))
@tag_option("Tag KEY=VALUE (repeatable); the node's tags become exactly these.")
@pass_session()
def update(s: Session, name: str, **o: Any) -> None:
    """Change node NAME's pricing, availability or tags (what is not given stays)."""
    properties: dict[str, Any] = {}
    pricing = _pricing(o["price"], o["currency"], o["billing_increment_seconds"], o["minimum_billable_seconds"])
    if pricing:
        properties["pricing"] = pricing
    if o["availability"]:
        properties["availability"] = o["availability"]
    body: dict[str, Any] = {"properties": properties} if properties else {}
    if o["tags"] is not None:
        body["tags"] = o["tags"]
    if not body:
        raise click.UsageError("Nothing to update: give --price, --currency, --availability, --tag, ...")
    _patch(s, name, body)


@node.command("cordon")
@click.argument("name")
@pass_session()
def cordon(s: Session, name: str) -> None:
    """Take no new work on node NAME (what runs there goes on)."""
    _patch(s, name, {"properties": {"availability": "Cordoned"}})


@node.command("uncordon")
@click.argument("name")
@pass_session()
def uncordon(s: Session, name: str) -> None:
    """Make node NAME Available for new work again."""
    _patch(s, name, {"properties": {"availability": "Available"}})


@node.command("delete")
@click.argument("name")
@pass_session()
def delete(s: Session, name: str) -> None:
    """Remove node NAME (refused while instances or jobs hold its GPUs)."""
    response = s.client.send("DELETE", paths.nodes(s.need_subscription(), s.need_resource_group(), name))
    if response.status_code == 204:
        click.echo(f"node {name} did not exist: nothing deleted.", err=True)
