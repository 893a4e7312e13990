"""Capacity reservations through the API and the functions of template.yaml (on the DynamoDB table): a booking that
fits is 201 naming its node, one that overlaps is 409 InsufficientCapacity naming the window and the node, concurrent
bookings for the last devices — exactly one wins — a node under a reservation is refused a delete unless forced, and
cancelling before the window is 200 then 204."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.conftest import CONSUMER, SUPPLIER, node_body, nodes_path
from tests.integration.test_bad_input import assert_refused

HOUR = 3600


def reservations_path(sub: str, name: str | None = None, rg: str = "rg1") -> str:
    base = f"/subscriptions/{sub}/resourceGroups/{rg}/providers/ITL.Accelerator/capacityReservations"
    return f"{base}/{name}" if name else base


def window(hours_ahead: int, hours: int = 2) -> tuple[str, str]:
    start = (int(time.time()) // HOUR + hours_ahead) * HOUR
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return time.strftime(fmt, time.gmtime(start)), time.strftime(fmt, time.gmtime(start + hours * HOUR))


def reservation_body(devices: int, hours_ahead: int = 24, hours: int = 2) -> dict[str, Any]:
    start, end = window(hours_ahead, hours)
    return {
        "location": "us-east-1",
        "properties": {
            "accelerator": {"kind": "GPU", "count": devices, "model": "H100"},
            "startTime": start,
            "endTime": end,
        },
    }


def test_book_overlap_race_and_cancel_through_the_api(admin, caller, sub):
    assert admin.put(nodes_path(sub, name="dgx-1"), json=node_body()).status_code == 201
    ann = caller([CONSUMER], [f"/subscriptions/{sub}"], subject="ann")
    booked = ann.put(reservations_path(sub, "morning"), json=reservation_body(6))
    assert booked.status_code == 201, booked.text
    props = booked.json()["properties"]
    assert props["state"] == "Scheduled" and props["reservedNodes"][0]["id"].endswith("/sparkNodes/dgx-1")
    assert props["totalCost"] == {"amount": "30.000000", "currency": "USD"}  # 6 GPUs x 2 h x 2.50
    overlap = ann.put(reservations_path(sub, "overlap"), json=reservation_body(4, hours_ahead=25))
    assert_refused(overlap, 409, "InsufficientCapacity")
    error = overlap.json()["error"]
    assert "dgx-1" in error["message"] and window(25)[0][:13] in error["message"]
    assert error["details"][0]["target"].endswith("/sparkNodes/dgx-1")

    # the last 2 devices of that window, asked for by 8 callers at once: exactly one wins
    def attempt(i: int) -> int:
        return int(ann.put(reservations_path(sub, f"race-{i}"), json=reservation_body(2, hours_ahead=25)).status_code)

    with ThreadPoolExecutor(8) as pool:
        codes = sorted(pool.map(attempt, range(8)))
    assert codes == [201] + [409] * 7, codes

    # a supplier sees what was sold on its node; a node under a reservation is deleted only when forced
    owner = caller([SUPPLIER], [f"/subscriptions/{sub}"], subject="owner-123")
    sold = owner.get(f"/subscriptions/{sub}/providers/ITL.Accelerator/capacityReservations")
    assert sold.status_code == 200 and len(sold.json()["value"]) == 2
    assert_refused(admin.delete(nodes_path(sub, name="dgx-1")), 409, "NodeReserved")
    assert ann.delete(reservations_path(sub, "morning")).status_code == 200
    assert ann.delete(reservations_path(sub, "morning")).status_code == 204
    forced = admin.delete(nodes_path(sub, name="dgx-1"), params={"force": "true"})
    assert forced.status_code == 200, forced.text
    assert ann.get(reservations_path(sub)).json()["value"] == []
