"""Capacity offers (services/api/offers.py): per kind and model in a location, what a job submitted now gets — the
largest request placed at once is exactly what a submission of it then gets — with prices, quotas and budgets, from a
bounded number of reads whatever the fleet's size."""

from __future__ import annotations

from typing import Any

import pytest

from itl_accelerator.domain.records import Booking, node_key
from itl_accelerator.errors import AuthorizationFailed, InvalidParameter, ResourceNotFound
from itl_accelerator.models.quotas import QuotaWrite
from itl_accelerator.repositories.memory.state import fold
from itl_accelerator.services.api.offers import WindowAsked
from tests.services.conftest import START, SUB, Env
from tests.services.fakes import iso
from tests.services.test_budgets import put_budget

WHERE = "eastus"


def offers(env: Env, ctx: Any = None, resource_group: str | None = None) -> dict[str, dict[str, Any]]:
    found = env.w.offers.in_location(ctx or env.consumer("ann"), env.sub, WHERE, resource_group)
    return {o["name"]: o["properties"] for o in found}


@pytest.fixture
def fleet(env: Env) -> Env:
    """Two H100 nodes (2.40 and 3.10 USD per GPU-hour) of 8, an 8-GPU A100 node, and an H100 elsewhere."""
    env.add_node("h-1", price=2.40)
    env.add_node("h-2", price=3.10)
    env.add_node("a-1", model="A100", price=1.20)
    env.add_node("h-far", price=0.10, location="westeurope")
    return env


def test_an_offer_per_model_with_its_nodes_prices_and_the_largest_request_placed_now(fleet: Env):
    env = fleet
    found = offers(env)
    h100 = found["gpu-h100"]
    assert (h100["nodes"], h100["availableNodes"], h100["devicesPerNode"]) == (2, 2, 8)
    assert h100["largestSingleNode"] == {"devices": 8, "memoryGb": 640}
    assert h100["pricePerAcceleratorHour"] == [{"currency": "USD", "min": "2.4", "max": "3.1"}]  # not westeurope's
    assert h100["largestMultiNode"] is None and h100["allowedNow"] == 8
    assert h100["quota"] is None and h100["budget"] == {"refusal": None, "currencies": None, "excludedCurrencies": []}


def test_the_largest_request_offered_is_exactly_what_a_submission_then_gets(fleet: Env):
    env = fleet
    env.submit("six", 6, 480, gpuModel="H100", location=WHERE)
    env.run()
    assert env.status("six") == "Running"
    # one node has 2 free now, the other 8
    assert offers(env)["gpu-h100"]["largestSingleNode"]["devices"] == 8
    env.submit("seven", 7, 560, gpuModel="H100", location=WHERE)
    env.run()
    assert env.status("seven") == "Running"
    offered = offers(env)["gpu-h100"]["largestSingleNode"]
    assert offered == {"devices": 2, "memoryGb": 160}
    # a job of what is offered is placed at once; one more device waits
    env.submit("fits", offered["devices"], offered["memoryGb"], gpuModel="H100", location=WHERE)
    env.submit("too-big", offered["devices"] + 1, 80, gpuModel="H100", location=WHERE)  # (westeurope has room)
    env.run()
    assert env.status("fits") == "Running" and env.status("too-big") == "Pending"
    assert offers(env)["gpu-h100"]["largestSingleNode"] == {"devices": 1, "memoryGb": 80}  # what seven left


def test_a_quota_bounds_what_is_allowed_now(fleet: Env):
    env = fleet
    limit = QuotaWrite.model_validate({"properties": {"limit": {"value": 3}}})
    env.w.quotas.put(env.admin(), env.sub, WHERE, "gpus-h100", limit)
    h100 = offers(env)["gpu-h100"]
    assert h100["quota"] == {"name": "gpus-h100", "limit": 3, "current": 0, "available": 3}
    assert h100["largestSingleNode"]["devices"] == 8 and h100["allowedNow"] == 3


def test_a_budget_in_another_currency_offers_none_of_these_nodes(fleet: Env):
    env = fleet
    put_budget(env, currency="EUR")
    h100 = offers(env, resource_group="rg1")["gpu-h100"]
    assert h100["budget"]["currencies"] == ["EUR"] and h100["budget"]["excludedCurrencies"] == ["USD"]
    assert h100["pricePerAcceleratorHour"] == [] and h100["largestSingleNode"]["devices"] == 0
    assert h100["allowedNow"] == 0


def test_a_caller_holding_another_resource_group_is_offered_nothing_of_rg1(fleet: Env):
    env = fleet
    elsewhere = env.consumer("ann", scopes=[f"/subscriptions/{SUB}/resourceGroups/other"])
    assert offers(env, elsewhere) == {}


def test_who_may_ask_and_what_a_location_is(fleet: Env):
    env = fleet
    with pytest.raises(AuthorizationFailed):
        offers(env, env.supplier("sup-a"))  # suppliers do not submit jobs
    with pytest.raises(InvalidParameter):
        env.w.offers.in_location(env.consumer("ann"), env.sub, "east us/../x")


@pytest.mark.parametrize("nodes", [4, 40])
def test_the_reads_per_offer_do_not_grow_with_the_fleet(env: Env, nodes: int, monkeypatch: pytest.MonkeyPatch):
    for i in range(nodes):
        env.add_node(f"h-{i}", price=2.40)
    reads = []
    read = env.repos.nodes.candidates
    monkeypatch.setattr(env.repos.nodes, "candidates", lambda *a, **kw: reads.append(a) or read(*a, **kw))
    found = offers(env)
    assert found["gpu-h100"]["largestSingleNode"]["devices"] == 8
    # a binary search over 1..8 devices: at most log2(8) + 1 candidate reads, and one for the largest gang, however
    # many nodes
    assert 0 < len(reads) <= 5
    assert found["gpu-h100"]["largestMultiNode"] == {
        "nodes": min(nodes, 16), "devicesPerNode": 8, "memoryGbPerNode": 640, "devices": 8 * min(nodes, 16)}  # fmt: skip


def test_a_node_priced_above_what_the_caller_sees_is_not_offered_to_it(env: Env):
    # Given a 4-GPU node at 2.40 in rg1 and an 8-GPU node at 9.90 in rg2
    env.add_node("small", devices=4, price=2.40)
    env.add_node("dear", rg="rg2", price=9.90)
    # Then a consumer holding rg1 only is offered 4: a job of theirs is capped at the prices they see (its price
    # ceiling), so placement would never use the dearer node
    ann = env.consumer("ann", scopes=[f"/subscriptions/{SUB}/resourceGroups/rg1"])
    assert offers(env, ann)["gpu-h100"]["largestSingleNode"]["devices"] == 4
    assert offers(env, ann)["gpu-h100"]["pricePerAcceleratorHour"] == [{"currency": "USD", "min": "2.4", "max": "2.4"}]
    # and one who sees both, 8
    assert offers(env)["gpu-h100"]["largestSingleNode"]["devices"] == 8
    # as a submission then gets: ann's job of 4 is placed; one of 8 can never run (no node she sees holds 8, so its
    # price ceiling admits none) and says so at once rather than waiting for ever
    env.submit("eight", 8, 640, ctx=ann, location=WHERE)
    env.submit("four", 4, 320, ctx=ann, location=WHERE)
    env.run()
    assert (env.status("eight"), env.status("four")) == ("Failed", "Running")
    assert "its price ceiling admits no price" in env.job_props("eight")["statusReason"]


def test_the_memory_offered_is_what_the_offered_devices_may_ask(env: Env):
    # Given an 8-GPU node (80 GiB each) where a job holds 5 GPUs but only 100 GiB: 3 GPUs and 540 GiB free
    env.add_node("h-1", price=2.40)
    env.submit("lean", 5, 100, location=WHERE)
    env.run()
    # Then 3 GPUs are offered with the 240 GiB they carry (memory is per GPU), and a job of exactly that runs
    offered = offers(env)["gpu-h100"]["largestSingleNode"]
    assert offered == {"devices": 3, "memoryGb": 240}
    env.submit("offered", offered["devices"], offered["memoryGb"], location=WHERE)
    env.run()
    assert env.status("offered") == "Running"


def test_a_caller_holding_one_resource_group_is_offered_what_its_budgets_allow_there(fleet: Env):
    env = fleet
    put_budget(
        env, currency="EUR", filter={"dimensions": {"name": "ResourceGroupName", "operator": "In", "values": ["rg1"]}}
    )
    ann = env.consumer("ann", scopes=[f"/subscriptions/{SUB}/resourceGroups/rg1"])
    # without naming the group: it is the one she can submit into
    assert offers(env, ann)["gpu-h100"]["budget"]["currencies"] == ["EUR"]
    assert offers(env, ann)["gpu-h100"]["allowedNow"] == 0
    # one holding the whole subscription names the group, or is offered what covers every group (no budget here)
    assert offers(env)["gpu-h100"]["budget"]["currencies"] is None
    assert offers(env, resource_group="rg1")["gpu-h100"]["budget"]["currencies"] == ["EUR"]
    with pytest.raises(InvalidParameter):
        offers(env, env.consumer("ann"), resource_group="bad/rg")


def test_asking_for_the_offers_of_a_resource_group_one_does_not_hold_names_that_group(fleet: Env):
    ann = fleet.consumer("ann", scopes=[f"/subscriptions/{SUB}/resourceGroups/rg1"])
    with pytest.raises(ResourceNotFound, match="The resource group 'rg2' was not found in the subscription"):
        fleet.w.offers.in_location(ann, fleet.sub, WHERE, "rg2")


# ----------------------------------------------------------------------------------------------- the earliest window
def earliest(env: Env, devices: int, minutes: int, nodes: int | None = None) -> dict[str, Any]:
    window = WindowAsked.of(devices, minutes, nodes)
    found = env.w.offers.in_location(env.consumer("ann"), env.sub, WHERE, None, window)
    return {o["name"]: o["properties"] for o in found}["gpu-h100"]["earliestStart"]


def test_an_offer_says_the_earliest_window_for_a_shape_and_a_duration_reservations_blocking_theirs(env: Env):
    env.add_node("h-1")
    env.submit("running", 6, 480, maxDurationMinutes=60)
    env.run()
    assert earliest(env, 2, 120)["startTime"] == iso(START)  # the 2 free now
    ends = iso(START + 3600)
    assert earliest(env, 8, 30) == {"devices": 8, "nodes": 1, "durationMinutes": 30, "startTime": ends, "reason": None}
    # a capacity reservation's window from 09:30 to 11:00 on all 8: a 30-minute job of 8 fits from 09:00 to 09:30,
    # a longer one only after the window
    stored = env.state.nodes[fold(node_key(SUB, "rg1", "h-1"))].node
    stored.bookings = (Booking("capacityReservations/rg9/r", 8, 640, int(START) + 5400, int(START) + 3 * 3600),)
    assert earliest(env, 8, 30)["startTime"] == ends
    assert earliest(env, 8, 60)["startTime"] == iso(START + 3 * 3600)
    assert earliest(env, 8, 60, nodes=2)["startTime"] is None  # one node: never two at once


def test_the_earliest_window_is_asked_with_devices_and_a_duration_together():
    with pytest.raises(InvalidParameter):
        WindowAsked.of(4, None, None)
    with pytest.raises(InvalidParameter):
        WindowAsked.of(None, None, 2)
    assert WindowAsked.of(None, None, None) is None
