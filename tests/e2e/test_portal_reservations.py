"""Capacity reservations in the portal (issue 44 item 6), in a real browser against the local stack, set up as
tests/e2e/test_portal.py does (its fixtures: the stack, chromium, a signed-in page whose every API request is checked
against docs/openapi.json): a consumer goes from what is offered now to booking the same devices for tomorrow, sees
the booking listed with its node, window and total cost and on the time line, is told which node blocks a window
that is taken, and cancels before the window (nothing billed); the node's supplier sees on the node's page what it
sold. Every view passes axe (WCAG 2.2 AA). Waits are on conditions, never on sleeps."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.e2e import test_portal as base
from tests.e2e.test_local_stack import Stack
from tests.e2e.test_portal import ADMIN, CONSUMER, LONG, SUPPLIER, Api, axe_violations, expect, go, shot

# test_portal.py's fixtures, exactly: one stack and one chromium for the module, a fresh signed-in context per page
stack, browser, sub, portal = base.stack, base.browser, base.sub, base.portal

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def test_a_consumer_books_from_the_offers_sees_it_listed_is_told_what_blocks_a_taken_window_and_cancels(
    stack: Stack, portal: Any, sub: str
) -> None:
    admin = Api(stack, "ada", ADMIN, sub)
    admin.put_node("dgx-r", owner="sam", price=2.5)  # 8 H100s at 2.5 USD per GPU-hour
    page = portal("cora", (CONSUMER,), sub)

    # What is offered now, in the job form, leads to the booking form for a later window, filled in with it
    go(page, "Jobs")
    page.get_by_role("button", name="Submit a job").click()
    page.get_by_role("form", name="Submit a job").get_by_label("Location (optional)").fill("us-east-1")
    page.get_by_role("form", name="Submit a job").get_by_label("Location (optional)").press("Tab")
    page.get_by_role("link", name="Book GPU H100 for a later window").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Reservations")
    form = page.get_by_role("form", name="Book capacity")
    # the offer's model as the offers say it (its key, in lower case: models compare without case)
    expect(form.get_by_label("Model (optional)")).to_have_value(re.compile("^h100$", re.IGNORECASE))
    expect(form.get_by_label("Location")).to_have_value("us-east-1")

    # Book all 8 GPUs of the node tomorrow 09:00-17:00 UTC (the form's default day and hour, 8 hours)
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d")
    form.get_by_label("Name", exact=True).fill("tuesday")
    form.get_by_label("Devices per node").fill("8")
    expect(form.get_by_label("Start date (UTC)")).to_have_value(tomorrow)
    form.get_by_role("button", name="Book").click()
    booked = page.get_by_role("status").filter(has_text="Reservation tuesday booked")
    expect(booked).to_contain_text("on dgx-r: 8 hours at 2.5 USD per device-hour")
    stored = admin.get("capacityReservations/tuesday").json()["properties"]
    assert (stored["startTime"], stored["endTime"]) == (f"{tomorrow}T09:00:00Z", f"{tomorrow}T17:00:00Z")
    assert stored["bookedBy"] == "cora" and stored["totalCost"]["currency"] == "USD"
    expect(booked).to_contain_text(f"{stored['totalCost']['amount']} USD in all")
    assert float(stored["totalCost"]["amount"]) == 160  # 8 GPUs x 8 h x 2.5

    # Listed with its state, node, window and total cost; on the time line in the node's row
    row = page.get_by_role("table", name="Reservations").get_by_role("row").filter(has_text="tuesday")
    expect(row).to_contain_text("Scheduled")
    expect(row).to_contain_text("dgx-r (8)")
    expect(row).to_contain_text(f"{stored['totalCost']['amount']} USD")
    expect(row).to_contain_text("(8 h)")
    timeline = page.get_by_role("figure", name="Reservations by node")
    expect(timeline.get_by_role("list", name="Reservations on dgx-r").get_by_role("listitem")).to_have_accessible_name(
        f"tuesday: 8 devices, {tomorrow} 09:00 UTC to {tomorrow} 17:00 UTC, Scheduled"
    )
    shot(page, "reservations")

    # A window that is taken: the API's 409, naming the node that blocks it, and nothing booked
    page.get_by_role("button", name="Book capacity").click()
    form = page.get_by_role("form", name="Book capacity")
    form.get_by_label("Name", exact=True).fill("overlap")
    form.get_by_label("Model (optional)").fill("H100")
    form.get_by_label("Start hour (UTC)").select_option("12")
    form.get_by_label("Hours").fill("2")
    form.get_by_role("button", name="Book").click()
    refused = form.get_by_role("alert")
    expect(refused.locator(".error-code")).to_have_text("InsufficientCapacity")
    expect(refused.locator(".error-message")).to_contain_text("dgx-r")
    assert admin.get("capacityReservations/overlap").status_code == 404
    assert axe_violations(page) == []
    shot(page, "reservations-taken")

    # The node's supplier sees on the node's page what it sold, on a time line
    supplier = portal("sam", (SUPPLIER,), sub, start="#/nodes/rg1/dgx-r")
    sold = supplier.get_by_role("region", name="Reservations on this node")
    expect(sold.get_by_role("heading")).to_have_text("Reservations on this node (what you sold)")
    listed = sold.locator(".node-reservations [data-reservation=tuesday]")
    expect(listed).to_contain_text("Scheduled 8 GPUs")
    expect(listed).to_contain_text("(8 h), booked by cora")
    expect(sold.get_by_role("figure", name="Reservations on dgx-r in time")).to_be_visible()
    expect(supplier.locator(".loading")).to_have_count(0, timeout=LONG)
    assert axe_violations(supplier) == []
    shot(supplier, "node-reservations")

    # Cancelled before its window: nothing is billed, and it is gone
    row.get_by_role("button", name="Cancel…").click()
    page.get_by_role("group", name="Confirm cancelling tuesday").get_by_role(
        "button", name="Cancel reservation"
    ).click()
    expect(page.get_by_role("status").filter(has_text="Reservation tuesday cancelled")).to_contain_text(
        "cancelled before its window: nothing is billed"
    )
    expect(page.get_by_text("No reservations.")).to_be_visible()
    assert admin.get("capacityReservations/tuesday").status_code == 404
