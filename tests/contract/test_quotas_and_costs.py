"""GPU quotas and cost days. Quotas: every reservation counts its GPUs in the quotas of its node's location and model, a limit refuses an
allocation past it in the reservation's own transaction (nothing else written), releases count them out, and a limit
can be set below what is held (new allocations wait until enough ends)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from itl_accelerator.billing.rollup import CostDimensions, CostHour, Totals, group_dimensions
from itl_accelerator.domain.quotas import QuotaUsage
from itl_accelerator.domain.records import Release, Reservation
from itl_accelerator.repositories.errors import CapacityShortfall, EtagMismatch, QuotaExceeded
from itl_accelerator.repositories.protocols import Effects, Expect, Repositories
from tests.contract.builders import (
    counters,
    create_node,
    make_audit,
    make_instance,
    make_node,
    make_operation,
    place_instance,
)


def limit(repos: Repositories, sub: str, value: int | None, name: str = "gpus", location: str = "eastus") -> None:
    usage = QuotaUsage(sub, location, name, limit=value, document={"name": name} if value is not None else None,
                       etag=f"q{value}" if value is not None else None)  # fmt: skip
    held = repos.quotas.get(sub, location, name)
    repos.quotas.set_limit(usage, make_audit(sub, f"/quotas/{name}"), expected_etag=held.etag if held else None)


def used(repos: Repositories, sub: str, name: str = "gpus", location: str = "eastus") -> int:
    found = repos.quotas.get(sub, location, name)
    return found.current if found else 0


def test_every_allocation_counts_in_its_locations_quotas_limit_or_not(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub, model="H100 SXM", location="East US"))
    place_instance(repos, node, devices=2, memory_gb=160)
    assert used(repos, sub) == 2 and used(repos, sub, "gpus-h100sxm") == 2
    assert {(u.name, u.current, u.limit) for u in repos.quotas.in_location(sub, "eastus")} == {
        ("gpus", 2, None),
        ("gpus-h100sxm", 2, None),
    }


def test_an_allocation_past_a_limit_is_refused_and_writes_nothing(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub, devices=8))
    limit(repos, sub, 3)
    place_instance(repos, node, "a", devices=2, memory_gb=160)
    node = repos.nodes.get(node.key)
    assert node is not None
    with pytest.raises(QuotaExceeded) as refused:
        place_instance(repos, node, "b", devices=2, memory_gb=160)
    assert (refused.value.name, refused.value.location, refused.value.limit, refused.value.current) == (
        "gpus",
        "eastus",
        3,
        2,
    )
    assert counters(repos.nodes.get(node.key)) == (2, 160, 1)
    assert used(repos, sub) == 2
    assert repos.instances.get(replace(node.key, type_segment="sparkOllamaInstances", names=("dgx-1", "b"))) is None


def test_a_model_quota_binds_only_its_model(repos: Repositories, sub: str) -> None:
    h100 = create_node(repos, make_node(sub, "h", model="H100"))
    a100 = create_node(repos, make_node(sub, "a", model="A100"))
    limit(repos, sub, 1, "gpus-h100")
    with pytest.raises(QuotaExceeded):
        place_instance(repos, h100, "x", devices=2, memory_gb=160)
    place_instance(repos, a100, "y", devices=2, memory_gb=160)
    assert used(repos, sub, "gpus-a100") == 2 and used(repos, sub, "gpus-h100") == 0 and used(repos, sub) == 2


def test_a_release_counts_out_what_its_reservation_counted_in(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    limit(repos, sub, 4)
    instance = place_instance(repos, node, devices=4, memory_gb=320)
    stored = repos.instances.get(instance.key)
    assert stored is not None and stored.quota is not None
    released = replace(stored, capacity_reserved=False, quota=None, etag="i2")
    repos.instances.update(
        stored,
        released,
        make_audit(sub, instance.arm_id),
        expect=Expect(etag=stored.etag),
        effects=Effects(release=Release.of(stored)),
    )
    assert used(repos, sub) == 0 and used(repos, sub, "gpus-h100") == 0
    node = repos.nodes.get(node.key)
    assert node is not None
    place_instance(repos, node, "again", devices=4, memory_gb=320)  # the quota is free again


def test_a_limit_below_the_use_refuses_until_enough_is_given_back(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    place_instance(repos, node, "a", devices=4, memory_gb=320)
    limit(repos, sub, 2)
    assert repos.quotas.get(sub, "eastus", "gpus") == QuotaUsage(sub, "eastus", "gpus", 4, 2, {"name": "gpus"}, "q2")
    node = repos.nodes.get(node.key)
    assert node is not None
    with pytest.raises(QuotaExceeded):
        place_instance(repos, node, "b", devices=1, memory_gb=80)
    limit(repos, sub, None)  # no limit any more
    place_instance(repos, node, "b", devices=1, memory_gb=80)
    assert used(repos, sub) == 5


def test_setting_a_limit_honours_the_etag_it_expects(repos: Repositories, sub: str) -> None:
    limit(repos, sub, 8)
    usage = QuotaUsage(sub, "eastus", "gpus", limit=16, document={}, etag="q16")
    with pytest.raises(EtagMismatch):
        repos.quotas.set_limit(usage, make_audit(sub, "/quotas/gpus"), expected_etag="not-it")
    repos.quotas.set_limit(usage, make_audit(sub, "/quotas/gpus"), expected_etag="q8")
    found = repos.quotas.get(sub, "eastus", "gpus")
    assert found is not None and found.limit == 16


def test_a_create_is_refused_once_a_limit_is_set(repos: Repositories, sub: str) -> None:
    """``expected_etag=None`` means "no limit set yet": of racing creates, one creates and the others are told."""
    limit(repos, sub, 8)
    again = QuotaUsage(sub, "eastus", "gpus", limit=4, document={}, etag="q4")
    with pytest.raises(EtagMismatch):
        repos.quotas.set_limit(again, make_audit(sub, "/quotas/gpus"), expected_etag=None)
    found = repos.quotas.get(sub, "eastus", "gpus")
    assert found is not None and found.limit == 8


def test_a_reservation_refused_by_its_node_is_not_counted(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub, devices=2, memory_gb=160))
    with pytest.raises(CapacityShortfall):
        repos.instances.accept(
            make_instance(node.key, "big", operation_id="op-big", devices=4, memory_gb=320),
            make_operation("op-big", rg="rg1", resource_id="/big"),
            make_audit(sub, "/big"),
            Reservation.on(node, 4, 320, child=1),
        )
    assert used(repos, sub) == 0


# ---------------------------------------------------------------------------------------------- cost days
def _cost_hour(sub: str, hour: str, resource: str, cost: str, *, submitted_by: str = "ann") -> CostHour:
    dims = CostDimensions(
        resource_scope=f"RES#/r/{resource}#2024",
        resource_id=f"/r/{resource}",
        resource_name=resource,
        resource_type="ITL.Accelerator/sparkJobs",
        resource_group="rg1",
        submitted_by=submitted_by,
        node_id="/n/1",
        supplier="sup",
        tags=(("team", "nlp"),),
    )
    totals = Totals(gpu_seconds=3600, billable_gpu_seconds=3600, costs={"USD": Decimal(cost)})
    return CostHour(sub, hour, dims, totals, 10**10)


def test_cost_hours_are_kept_by_resource_and_day_each_hour_replacing_only_itself(repos: Repositories, sub: str) -> None:
    repos.usage.put_cost_hours(
        [_cost_hour(sub, "2024-05-31T23", "a", "1.5"), _cost_hour(sub, "2024-06-01T00", "a", "2")]
    )
    repos.usage.put_cost_hours(
        [_cost_hour(sub, "2024-05-31T23", "a", "1.25"), _cost_hour(sub, "2024-05-31T22", "b", "3")]
    )
    days = list(repos.usage.cost_days(sub, "2024-05-31", "2024-06-01"))
    assert [(d.day, d.dimensions.resource_name, sorted(d.hours)) for d in days] == [
        ("2024-05-31", "a", ["2024-05-31T23"]),
        ("2024-05-31", "b", ["2024-05-31T22"]),
        ("2024-06-01", "a", ["2024-06-01T00"]),
    ]
    assert days[0].hours["2024-05-31T23"].costs == {"USD": Decimal("1.25")}
    assert days[0].dimensions.tags == (("team", "nlp"),) and days[0].dimensions.submitted_by == "ann"
    assert [d.day for d in repos.usage.cost_days(sub, "2024-06-01", "2024-06-30")] == ["2024-06-01"]
    assert list(repos.usage.cost_days(f"{sub}-other", "2024-05-01", "2024-06-30")) == []


def _group_hour(sub: str, hour: str, cost: str, *, submitted_by: str = "ann") -> CostHour:
    resource = _cost_hour(sub, hour, "any", cost, submitted_by=submitted_by)
    return replace(resource, dimensions=group_dimensions(resource.dimensions))


def test_cost_groups_keep_hours_by_day_and_each_days_total_in_its_month(repos: Repositories, sub: str) -> None:
    repos.usage.put_cost_group_hours(
        [_group_hour(sub, "2024-05-31T22", "1.5"), _group_hour(sub, "2024-05-31T23", "2"),
         _group_hour(sub, "2024-06-01T00", "4"), _group_hour(sub, "2024-05-31T23", "7", submitted_by="bob")]
    )  # fmt: skip
    repos.usage.put_cost_group_hours([_group_hour(sub, "2024-05-31T23", "2.25")])  # that hour rolled up again
    days = list(repos.usage.cost_group_days(sub, "2024-05-31", "2024-06-01"))
    assert [
        (d.day, d.dimensions.submitted_by, sorted(d.hours)) for d in days if d.dimensions.submitted_by == "ann"
    ] == [
        ("2024-05-31", "ann", ["2024-05-31T22", "2024-05-31T23"]),
        ("2024-06-01", "ann", ["2024-06-01T00"]),
    ]
    assert {d.dimensions.resource_id for d in days} == {""}  # a group is no one resource
    (may,) = [m for m in repos.usage.cost_group_months(sub, "2024-05") if m.dimensions.submitted_by == "ann"]
    assert may.days == {"2024-05-31": Totals(7200, 7200, {"USD": Decimal("3.75")})}
    assert may.dimensions.tags == (("team", "nlp"),) and may.dimensions.supplier == "sup"
    assert len(list(repos.usage.cost_group_months(sub, "2024-05"))) == 2
    assert [m.days for m in repos.usage.cost_group_months(sub, "2024-06")] == [
        {"2024-06-01": Totals(3600, 3600, {"USD": Decimal("4")})}
    ]
    assert list(repos.usage.cost_group_months(f"{sub}-other", "2024-05")) == []
    assert list(repos.usage.cost_group_days(sub, "2024-06-02", "2024-06-30")) == []


def test_the_first_hour_with_cost_groups_is_recorded_once(repos: Repositories) -> None:
    assert repos.usage.cost_groups_since() is None
    assert repos.usage.mark_cost_groups_since("2024-05-01T10") == "2024-05-01T10"
    assert repos.usage.mark_cost_groups_since("2024-06-01T00") == "2024-05-01T10"
    assert repos.usage.cost_groups_since() == "2024-05-01T10"
