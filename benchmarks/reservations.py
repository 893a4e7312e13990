"""Capacity reservations (issue 44 item 5): DynamoDB requests and time of one booking as the fleet grows, with 1,000
reservations already booked. Prints one table (``python -m benchmarks.reservations``; benchmarks/placement.py prints
it too, and ``./dev bench`` runs both).

On moto, with the table of template.yaml and the real repositories and service (services/api/reservations.py): a
subscription of 10, 100 and 1,000 nodes of 8 H100s in one location, and 1,000 reservations of a whole node for an
hour already booked on them (node ``r mod fleet``, the ``r div fleet``-th even hour from tomorrow: so a small fleet's
node calendars hold up to 100 bookings each). Then, through the service, bookings of 8 devices for one hour:
``fits`` — an hour free on every node (it books); ``taken`` — an hour every node read has booked (409, naming them).
The requests must not grow with the fleet or the reservations: one ``GetItem`` (the name), at most
``BOOKING_PAGES`` ``Query`` pages of the placement index, the budgets' ``Query``, the quotas' ``GetItem`` and one
``TransactWriteItems``.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from benchmarks.requests_and_cold_start import _table, dynamodb_calls

FLEETS = (10, 100, 1_000)
PRELOADED = 1_000
BOOKINGS = 10
TABLE = "itl-accelerator-bench-reservations"
HOUR = 3600


@dataclass
class BookingRow:
    nodes: int
    reservations: int
    outcome: str
    bookings: int
    calls: Counter[str]
    ms: list[float]


def measure_bookings() -> list[BookingRow]:
    """One row per fleet size and outcome (module docstring)."""
    import boto3
    from moto import mock_aws

    from itl_accelerator.auth.principal import ArmScope, Principal
    from itl_accelerator.domain.records import Node, ResourceKey
    from itl_accelerator.errors import InsufficientCapacity
    from itl_accelerator.models.reservations import CapacityReservationWrite
    from itl_accelerator.repositories.dynamodb import dynamodb_repositories
    from itl_accelerator.resources import NODES
    from itl_accelerator.services.api.reservations import CapacityReservationService
    from itl_accelerator.services.common.access import Access
    from itl_accelerator.services.common.audit_events import build_event
    from itl_accelerator.services.common.context import CallContext
    from itl_accelerator.services.common.kernel import ResourceKernel
    from itl_local.aws import create_table, make_dynamodb_faithful
    from itl_local.template import Template

    os.environ.update({"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"})
    os.environ.pop("AWS_ENDPOINT_URL", None)
    make_dynamodb_faithful()
    scopes = [ArmScope.parse(f"/subscriptions/sub-bench-{fleet}") for fleet in FLEETS]
    admin = Principal(subject="bench", roles=["itl-accelerator-admin"], scopes=[s for s in scopes if s is not None])
    ctx = CallContext(admin, "bench", "bench")
    tomorrow = (int(time.time()) // HOUR + 24) * HOUR

    def audit(sub: str, resource_id: str) -> Any:
        return build_event(ctx, subscription_id=sub, action="bench", resource_id=resource_id, resource_type="bench",
                           resource_name="bench", change_summary="bench")  # fmt: skip

    def body(start: int) -> CapacityReservationWrite:
        return CapacityReservationWrite.model_validate(
            {
                "location": "eastus",
                "properties": {
                    "accelerator": {"kind": "GPU", "count": 8, "model": "H100"},
                    "startTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start)),
                    "endTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + HOUR)),
                },
            }
        )

    rows = []
    with mock_aws():
        client = boto3.client("dynamodb")
        create_table(client, Template(), TABLE)
        repos = dynamodb_repositories(client, TABLE)
        kernel = ResourceKernel(repos, Access(repos.audit))
        service = CapacityReservationService(kernel)
        for fleet in FLEETS:
            sub = f"sub-bench-{fleet}"
            for i in range(fleet):
                key = ResourceKey(sub, "rg", NODES.segment, (f"n{i:04d}",))
                node = Node(
                    key=key,
                    document={
                        "id": NODES.id(sub, "rg", key.names),
                        "name": key.names[0],
                        "type": NODES.type_name,
                        "location": "eastus",
                        "sku": {"name": "DGX-H100-8GPU", "capacity": 8},
                        "properties": {
                            "owner": "o",
                            "hardwareSpecs": {"gpuModel": "H100", "gpuCount": 8, "gpuMemoryGb": 80},
                            "pricing": {"pricePerGpuHour": 2.5, "currency": "USD"},
                            "availability": "Available",
                        },
                        "systemData": {},
                    },
                    etag='"e"',
                    device_total=8,
                    memory_gb_total=640,
                )
                repos.nodes.create(node, audit(sub, node.arm_id))
            for r in range(PRELOADED):  # preloaded through the service's own decision: where it would book
                service.book(ctx, sub, "rg", f"pre-{r:04d}", body(tomorrow + 2 * HOUR * (r // fleet)))
            for outcome, start in (("fits", tomorrow + HOUR), ("taken", tomorrow)):
                row = BookingRow(fleet, PRELOADED, outcome, 0, Counter(), [])
                for b in range(BOOKINGS if outcome == "fits" else 3):
                    with dynamodb_calls() as counted:
                        began = time.perf_counter()
                        try:
                            later = 2 * HOUR * b if outcome == "fits" else 0  # "taken": the one hour every node booked
                            service.book(ctx, sub, "rg", f"{outcome}-{b}", body(start + later))
                            row.bookings += 1
                        except InsufficientCapacity:
                            pass
                        row.ms.append((time.perf_counter() - began) * 1000)
                    row.calls.update(counted)
                rows.append(row)
    return rows


def table(rows: list[BookingRow]) -> str:
    names = sorted({n for r in rows for n in r.calls})
    return _table(
        ["nodes", "reservations", "booking", "booked", *(f"{n} / booking" for n in names), "ms (median)"],
        [
            [
                str(r.nodes),
                f"{r.reservations:,}",
                r.outcome,
                f"{r.bookings}/{len(r.ms)}",
                *(f"{r.calls[n] / len(r.ms):.2f}" for n in names),
                f"{sorted(r.ms)[len(r.ms) // 2]:.0f}",
            ]
            for r in rows
        ],
        right=set(range(0, 5 + len(names))) - {2},
    )


def main() -> int:
    print(
        "Capacity reservations on moto: DynamoDB requests and wall time of one booking (8 H100s for an hour) as the "
        f"fleet grows, with {PRELOADED:,} reservations already booked"
    )
    print(table(measure_bookings()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
