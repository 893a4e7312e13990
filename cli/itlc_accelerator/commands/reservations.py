"""``reservation create|list|show|cancel``: capacity reservations, devices booked for a future window (issue 44).

Requests (docs/API_REFERENCE.md, "Capacity reservations"):

- ``create NAME`` → ``PUT .../resourceGroups/{rg}/providers/ITL.Accelerator/capacityReservations/{name}`` with
  ``{"location", "tags"?, "properties": {"accelerator": {"kind", "count", "model"?, "vendor"?, "memoryGb"?,
  "nodes"?}, "startTime", "endTime", "maxPrice"?: {"pricePerAcceleratorHour", "currency"}}}``. Booking is
  synchronous: 201 with the nodes that hold it, 200 for the same body again; 409 ``InsufficientCapacity`` names the
  window and the nodes that block it (printed as ``ERROR: InsufficientCapacity: <message>``, exit 1).
- ``list`` → ``GET`` the resource group's collection, or the subscription's
  (``/subscriptions/{sub}/providers/ITL.Accelerator/capacityReservations``) with ``-g ""`` or none set.
- ``show NAME`` → ``GET .../capacityReservations/{name}``.
- ``cancel NAME`` → ``DELETE .../capacityReservations/{name}``: 200 cancelled (before its window nothing is billed;
  once begun, the window is billed whole), 204 there was none.

``--start``/``--end`` are ISO 8601 instants on whole UTC hours (``2026-12-08T09:00:00Z``); the API refuses any other
(400 ``InvalidParameter``), so the CLI sends them as given. The table: name, state, window, nodes, total cost.
"""

from __future__ import annotations

from typing import Any

import click

from itlc_accelerator import paths
from itlc_accelerator.output import emit
from itlc_accelerator.session import Session, pass_session, tag_option


@click.group("reservation")
def reservation() -> None:
    """Capacity reservations: devices booked for a future window on whole UTC hours, billed every hour of it."""


@reservation.command("create")
@click.argument("name")
@click.option("--kind", required=True, help="The accelerator kind: GPU, TPU, NPU...")
@click.option("--count", type=click.IntRange(1, 64), required=True, help="Devices on each node.")
@click.option("--model", help="Only devices of this model (e.g. H100).")
@click.option("--nodes", type=click.IntRange(1, 16), help="On this many nodes at once, --count on each (a gang's).")
@click.option("--memory-gb", type=click.IntRange(0, 65536), help="GiB of device memory on each node.")
@click.option("--vendor", help="Who makes the devices (AMD, NVIDIA...; Any: any vendor's).")
@click.option("--start", required=True, help="The window's start: a whole UTC hour, e.g. 2026-12-08T09:00:00Z.")
@click.option("--end", required=True, help="The window's end (exclusive): a whole UTC hour after --start.")
@click.option("--location", "-l", required=True, help="Where its nodes are (e.g. us-east-1).")
@click.option("--max-price", help="The most a device-hour may be locked at (a decimal number in --currency).")
@click.option("--currency", help="ISO 4217 code of --max-price (needed with it).")
@tag_option()
@pass_session()
def create(s: Session, name: str, **o: Any) -> None:
    """Book reservation NAME: --count devices of --kind (on --nodes nodes at once) from --start to --end.

    Prints the reservation with the nodes that hold it and its total cost (every hour of the window, used or not);
    the same booking again prints it as it is, and says so. When the window is taken: ERROR: InsufficientCapacity
    naming the nodes that block it, exit 1."""
    if (o["max_price"] is None) != (o["currency"] is None):
        raise click.UsageError("--max-price and --currency go together.")
    accelerator: dict[str, Any] = {"kind": o["kind"], "count": o["count"]}
    optional = {"model": o["model"], "vendor": o["vendor"], "memoryGb": o["memory_gb"], "nodes": o["nodes"]}
    accelerator.update({k: v for k, v in optional.items() if v is not None})
    properties: dict[str, Any] = {"accelerator": accelerator, "startTime": o["start"], "endTime": o["end"]}
    if o["max_price"] is not None:
        try:
            price = float(o["max_price"])
        except ValueError:
            raise click.BadParameter("a decimal number", param_hint="--max-price") from None
        properties["maxPrice"] = {"pricePerAcceleratorHour": price, "currency": o["currency"].upper()}
    body: dict[str, Any] = {"location": o["location"]}
    if o["tags"] is not None:
        body["tags"] = o["tags"]
    body["properties"] = properties
    path = paths.reservations(s.need_subscription(), s.need_resource_group(), name)
    response = s.client.send("PUT", path, json=body)
    if response.status_code == 200:  # the same booking again: nothing was booked twice, nothing changed
        click.echo(f"reservation {name} was booked already, as asked: nothing changed.", err=True)
    emit(s.output, "reservation", response.json())


@reservation.command("list")
@click.option("--max-items", type=click.IntRange(min=1), help="Stop after this many.")
@pass_session()
def list_(s: Session, max_items: int | None) -> None:
    """List the reservations of the resource group, or of the whole subscription without one (those you may see:
    consumers their own, suppliers those booked on their nodes, admins all)."""
    path = paths.reservations(s.need_subscription(), s.resource_group)
    emit(s.output, "reservation", s.client.list(path, None, max_items=max_items), many=True)


@reservation.command("show")
@click.argument("name")
@pass_session()
def show(s: Session, name: str) -> None:
    """Show reservation NAME: state, window, the nodes that hold it, the locked price and total cost."""
    emit(
        s.output, "reservation", s.client.get(paths.reservations(s.need_subscription(), s.need_resource_group(), name))
    )


@reservation.command("cancel")
@click.argument("name")
@pass_session()
def cancel(s: Session, name: str) -> None:
    """Cancel reservation NAME: before its window nothing is billed; once begun, the window is billed whole."""
    response = s.client.send("DELETE", paths.reservations(s.need_subscription(), s.need_resource_group(), name))
    if response.status_code == 204:
        click.echo(f"reservation {name} did not exist: nothing cancelled.", err=True)
    else:
        click.echo(f"reservation {name} cancelled.", err=True)
