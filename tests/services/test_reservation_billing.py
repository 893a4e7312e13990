"""Capacity reservations through the billing pipeline (issue 44), on the fake clock, with the meters a reservation and
a job in it will have written straight into the in-memory store: the reservation billed every hour of its window at
its locked price, once — by the usage sync, the export, the cost query, the node's earnings and the budgets — and a
job in it billed nothing more; the FOCUS rows telling the used hour from the unused ones."""

from __future__ import annotations

from decimal import Decimal

import pytest

from itl_accelerator.billing.descriptor import BillingDescriptor
from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.usage import Meter
from itl_accelerator.repositories.memory.workloads import start_meter
from itl_accelerator.resources import JOBS
from itl_accelerator.services.schedules.budget_monitor import BudgetMonitor
from tests.services.conftest import RG, SUB, Env
from tests.services.fakes import iso
from tests.services.test_billing_files import billing_file
from tests.services.test_budgets import Events, put_budget, status
from tests.services.test_costs import one_day, query, rows_of
from tests.services.test_metering import DAY, export_rows, money, records, sync, t

NEXT_DAY = "2025-03-11"
RESERVATION_TYPE = "ITL.Accelerator/capacityReservations"
RESERVATION_ID = f"/subscriptions/{SUB}/resourceGroups/{RG}/providers/{RESERVATION_TYPE}/week-1"
RESERVATION_ALLOCATION = "op-reservation-week-1"
JOB_ALLOCATION = "op-job-in-week-1"


def billed_as(env: Env, *, name: str, resource_id: str, resource_type: str, service: str, gpus: int) -> dict:
    """The descriptor fields of an allocation of ``gpus`` devices on dgx-1 (the node's fields, as describe() reads
    them), in capacity reservation week-1."""
    node = env.node("dgx-1")
    return BillingDescriptor(
        subscription_id=SUB,
        resource_group=RG,
        resource_id=resource_id,
        resource_name=name,
        resource_type=resource_type,
        service=service,
        node_resource_group=RG,
        node_name=node.name,
        node_id=node.arm_id,
        supplier=node.owner or "unknown",
        region=node.location or "unknown",
        sku=node.sku_name,
        gpus=gpus,
        resource_created_at=f"{DAY}T09:00:00Z",
        node_created_at=node.created_at,
        submitted_by="ann",
        accelerator_kind=node.kind,
        accelerator_model=node.accelerator.model or "",
        capacity_reservation_id=RESERVATION_ID,
    ).billed_fields()


def reserve(env: Env, start: str = f"{DAY}T10:00:00", end: str = f"{DAY}T13:00:00") -> Meter:
    """Reservation week-1's meter on dgx-1: 8 devices over [start, end) at 2.50 USD per device-hour, its end known
    from its start (what the reservation resource writes when it is booked)."""
    meter = Meter(
        **billed_as(
            env,
            name="week-1",
            resource_id=RESERVATION_ID,
            resource_type=RESERVATION_TYPE,
            service="reservations",
            gpus=8,
        ),
        allocation_id=RESERVATION_ALLOCATION,
        terms=BillingTerms(Decimal("2.50"), "USD"),
        start=t(start),
        end=t(end),
    )
    start_meter(env.state, meter)
    return meter


def run_in_reservation(env: Env, start: str, end: str, devices: int = 4) -> Meter:
    """A job's meter in week-1 on dgx-1: ``devices`` devices over [start, end), priced 0 in the reservation's
    currency (the reservation bills its devices), carrying the reservation's id."""
    job_id = JOBS.id(SUB, RG, ("in-week-1",))
    meter = Meter(
        **billed_as(
            env, name="in-week-1", resource_id=job_id, resource_type=JOBS.type_name, service="jobs", gpus=devices
        ),
        allocation_id=JOB_ALLOCATION,
        terms=BillingTerms(Decimal(0), "USD"),
        start=t(start),
        end=t(end),
    )
    start_meter(env.state, meter)
    return meter


@pytest.fixture
def booked(env: Env) -> Env:
    """The node (2.50 USD per GPU-hour, supplier sup-a), week-1's 8 GPUs from 10:00 to 13:00, and a 4-GPU job in it
    from 11:00 to 12:00."""
    env.add_node("dgx-1", price=2.50, owner="sup-a")
    reserve(env)
    run_in_reservation(env, f"{DAY}T11:00:00", f"{DAY}T12:00:00")
    return env


def billed_through_the_day(env: Env) -> None:
    """The schedules of a day and the night after: the usage sync every 5 minutes from 09:55 to 16:00 (past the
    2-hour late period), the roll-ups, then the export at 01:30."""
    at = t(f"{DAY}T09:55:00")
    while at <= t(f"{DAY}T16:00:00"):
        env.clock.set(at)
        env.w.usage_sync.run()
        at += 300
    env.w.usage_rollups.run()
    env.w.billing_export.run(now=t(f"{NEXT_DAY}T01:30:00"))


# ------------------------------------------------------------------------------------------------ usage sync
def test_a_reservation_is_billed_each_hour_as_it_passes_never_ahead_nor_past_its_end(booked: Env):
    env = booked
    # Given the window has just begun: its first half hour is billed, not the hours to come
    sync(env, f"{DAY}T10:30:00")
    found = records(env, RESERVATION_ALLOCATION, f"{DAY}T09:00:00", f"{DAY}T15:00:00")
    assert [(r.hour, r.gpu_seconds, str(r.cost), r.final) for r in found] == [
        (f"{DAY}T10", 14400, "10.000000", False),
    ]
    # When the sync runs every 5 minutes until long after the end (a duplicate delivery now and then)
    at = t(f"{DAY}T10:35:00")
    while at <= t(f"{DAY}T18:00:00"):
        sync(env, iso(at))
        env.w.usage_sync.run()
        at += 300
    # Then each hour of the window is billed once, whole, and nothing after 13:00
    found = records(env, RESERVATION_ALLOCATION, f"{DAY}T09:00:00", f"{DAY}T18:00:00")
    assert [(r.hour, r.gpu_seconds, str(r.cost), r.final) for r in found] == [
        (f"{DAY}T10", 28800, "20.000000", True),
        (f"{DAY}T11", 28800, "20.000000", True),
        (f"{DAY}T12", 28800, "20.000000", True),
    ]
    assert sum((r.cost for r in found), Decimal(0)) == Decimal("60.000000")  # 8 x 3 x 2.50
    # and its meter closed once its late period was over: nothing more is read
    assert env.meter(RESERVATION_ALLOCATION).active is False
    # and the job in it was recorded, billed nothing
    (job_hour,) = records(env, JOB_ALLOCATION, f"{DAY}T09:00:00", f"{DAY}T18:00:00")
    assert (job_hour.hour, job_hour.gpu_seconds, job_hour.cost) == (f"{DAY}T11", 14400, Decimal(0))


def test_a_reservation_booked_ahead_bills_nothing_before_its_window(env: Env):
    env.add_node("dgx-1", price=2.50, owner="sup-a")
    reserve(env, start=f"{DAY}T20:00:00", end=f"{NEXT_DAY}T02:00:00")
    assert sync(env, f"{DAY}T12:00:00").meters == 0  # not due before its start
    assert records(env, RESERVATION_ALLOCATION, f"{DAY}T00:00:00", f"{NEXT_DAY}T03:00:00") == []


# ------------------------------------------------------------------------------------------------ the export
def test_the_export_bills_the_reservation_once_and_tells_the_used_hour_from_the_unused(booked: Env):
    env = booked
    billed_through_the_day(env)
    rows = export_rows(env, DAY)
    reserved = [r for r in rows if r["ResourceType"] == RESERVATION_TYPE]
    # every hour of the window, once: 8 x 3 x 2.50
    assert money(reserved) == money(rows) == Decimal("60.000000")
    assert [(r["ChargePeriodStart"], r["CapacityReservationStatus"], r["BilledCost"], r["x_ConsumedGpuSeconds"])
            for r in reserved] == [
        (f"{DAY}T10:00:00Z", "Unused", "20.000000", "28800"),
        (f"{DAY}T11:00:00Z", "Used", "10.000000", "14400"),  # the 4 GPUs the job used...
        (f"{DAY}T11:00:00Z", "Unused", "10.000000", "14400"),  # ...and the 4 it left unused
        (f"{DAY}T12:00:00Z", "Unused", "20.000000", "28800"),
    ]  # fmt: skip
    assert {r["CapacityReservationId"] for r in reserved} == {RESERVATION_ID}
    assert {r["ServiceName"] for r in reserved} == {"ITL Accelerator Capacity Reservations"}
    assert reserved[1]["ChargeDescription"] == (
        "GPU time (H100) reserved by capacity reservation week-1 on node dgx-1 (DGX-H100-8GPU), 8 GPUs booked: "
        "used by jobs in it"
    )
    # the job's row: in the reservation, used, billed nothing
    (job,) = [r for r in rows if r["ResourceType"] == JOBS.type_name]
    assert (job["CapacityReservationId"], job["CapacityReservationStatus"], job["BilledCost"]) == (
        RESERVATION_ID,
        "Used",
        "0.000000",
    )
    assert job["ChargePeriodStart"] == f"{DAY}T11:00:00Z"
    # and the subscription's own file is the same rows, cell for cell
    assert sorted(billing_file(env, env.admin()), key=str) == sorted(rows, key=str)


def test_a_reservation_no_job_used_is_unused_every_hour(env: Env):
    env.add_node("dgx-1", price=2.50, owner="sup-a")
    reserve(env)
    billed_through_the_day(env)
    rows = export_rows(env, DAY)
    assert [r["CapacityReservationStatus"] for r in rows] == ["Unused"] * 3
    assert money(rows) == Decimal("60.000000")


# ------------------------------------------------------------------------------------------------ the figures
def test_the_cost_query_the_suppliers_earnings_and_the_budget_count_the_reservation_once(booked: Env):
    env = booked
    put_budget(env, amount="100")
    billed_through_the_day(env)
    # the cost query: the subscription's day is the reservation's 60.00, the job in it adding nothing
    (total,) = rows_of(query(env, env.admin(), **one_day()))
    assert (Decimal(str(total["totalCost"])), total["Currency"]) == (Decimal("60"), "USD")
    by_type = {
        r["ResourceType"]: Decimal(str(r["totalCost"]))
        for r in rows_of(query(env, env.admin(), **one_day(grouping=[{"type": "Dimension", "name": "ResourceType"}])))
    }
    assert by_type == {RESERVATION_TYPE: Decimal("60"), JOBS.type_name: Decimal("0")}
    # the node's supplier earned 60.00 on it, as the admins see it
    env.clock.set(f"{NEXT_DAY}T02:00:00")
    earned = env.w.usage_stats.node(env.supplier("sup-a"), env.sub, RG, "dgx-1", 24)["totals"]["cost"]
    assert earned == [{"amount": "60.000000", "currency": "USD"}]
    assert env.w.usage_stats.node(env.admin(), env.sub, RG, "dgx-1", 24)["totals"]["cost"] == earned
    # the budget's spend: 60.00 once (the meters closed and settled; nothing counted open as well)
    BudgetMonitor(env.repos, env.w.jobs, env.w.instances, publish=Events(), clock=env.clock).run()
    assert status(env)["currentSpend"] == {"amount": "60.000000", "unit": "USD"}


def test_the_budget_counts_a_running_reservation_up_to_now(booked: Env):
    env = booked
    put_budget(env, amount="100")
    env.clock.set(f"{DAY}T11:30:00")  # an hour and a half into the window: 8 x 1.5 x 2.50, not the whole 60.00
    BudgetMonitor(env.repos, env.w.jobs, env.w.instances, publish=Events(), clock=env.clock).run()
    assert status(env)["currentSpend"] == {"amount": "30.000000", "unit": "USD"}
