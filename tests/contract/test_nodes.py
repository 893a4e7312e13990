"""NodeRepository: registration with its audit event and shape count, replacement and deletion at an etag, the
capacity they must leave covered, the subscription's state, lists and the placement index."""

from __future__ import annotations

from dataclasses import astuple, replace
from decimal import Decimal

import pytest

from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.records import Demand, FleetShape, Node, Release, ResourceKey, node_key
from itl_accelerator.repositories.dynamodb import keys
from itl_accelerator.repositories.errors import (
    CapacityInUse,
    EtagMismatch,
    InvalidSkipToken,
    ItemExists,
    ItemMissing,
    ItemTooLarge,
    SubscriptionNotWritable,
)
from itl_accelerator.repositories.protocols import Effects, Expect, Repositories, Scope
from tests.contract.builders import (
    all_pages,
    audit_events,
    counters,
    create_node,
    make_audit,
    make_node,
    names_of,
    place_instance,
    suspend,
)


# ---------------------------------------------------------------------------------------------- create / get
def test_create_then_get_in_any_casing(repos: Repositories, sub: str) -> None:
    node = make_node(sub, "DGX-1", "RG1")
    node.devices_allocated, node.child_count = 3, 2  # not the caller's to set: a node starts with nothing allocated
    audit = make_audit(sub, node.arm_id)
    repos.nodes.create(node, audit)

    found = repos.nodes.get(node_key(sub.upper(), "rg1", "dgx-1"))
    assert found is not None
    assert found.key.same(node.key)
    assert found.name == "DGX-1"  # the casing supplied
    assert found.document == node.document
    assert found.etag == "n1"
    assert (found.device_total, found.memory_gb_total) == (8, 640)
    assert counters(found) == (0, 0, 0)
    assert (found.free_devices, found.free_memory_gb) == (8, 640)
    assert [e.event_id for e in audit_events(repos, sub)] == [audit.event_id]
    assert repos.nodes.get(node_key(sub, "rg1", "dgx-2")) is None
    assert repos.nodes.get(node_key(f"{sub}-other", "rg1", "dgx-1")) is None


def test_records_are_copies_both_ways(repos: Repositories, sub: str) -> None:
    node = make_node(sub)
    repos.nodes.create(node, make_audit(sub))
    node.document["properties"]["owner"] = "mallory"  # the caller's object, after the write

    found = repos.nodes.get(node.key)
    assert found is not None
    found.document["location"] = "westus"
    found.devices_allocated = 7

    again = repos.nodes.get(node.key)
    assert again is not None
    assert (again.owner, again.location, again.devices_allocated) == ("supplier-1", "eastus", 0)


def test_create_refuses_a_taken_name_in_any_casing_and_writes_nothing(repos: Repositories, sub: str) -> None:
    create_node(repos, make_node(sub, "dgx-1"))
    with pytest.raises(ItemExists):
        repos.nodes.create(make_node(sub, "DGX-1", etag="n2", devices=4, memory_gb=320), make_audit(sub))

    found = repos.nodes.get(node_key(sub, "rg1", "dgx-1"))
    assert found is not None and found.etag == "n1"
    assert len(audit_events(repos, sub)) == 1
    assert hardware(repos, sub) == {FleetShape("h100", "eastus", 8, 640): 1}


def test_an_item_too_large_is_refused_before_anything_is_written(repos: Repositories, sub: str) -> None:
    node = make_node(sub)
    node.document["properties"]["notes"] = "x" * 500_000
    with pytest.raises(ItemTooLarge):
        repos.nodes.create(node, make_audit(sub))
    assert repos.nodes.get(node.key) is None
    assert audit_events(repos, sub) == []
    assert repos.nodes.fleet_shapes(sub) == []


# ---------------------------------------------------------------------------------------------- subscription
def test_a_subscription_never_registered_or_registered_takes_writes(repos: Repositories, sub: str) -> None:
    create_node(repos, make_node(sub, "dgx-1"))
    suspend(repos, sub, "Registered")
    create_node(repos, make_node(sub, "dgx-2"))
    assert repos.subscriptions.get(sub.upper()) == {
        "state": "Registered",
        "registrationDate": "2024-01-01T00:00:00Z",
        "properties": {},
    }


@pytest.mark.parametrize("state", ["Suspended", "Warned", "Deleted", "Unregistered"])
def test_a_subscription_not_registered_refuses_creates_and_replaces_but_not_deletes(
    repos: Repositories, sub: str, state: str
) -> None:
    node = create_node(repos, make_node(sub, "dgx-1"))
    suspend(repos, sub.upper(), state)  # subscription ids match case-insensitively
    events = len(audit_events(repos, sub))

    with pytest.raises(SubscriptionNotWritable) as refused:
        repos.nodes.create(make_node(sub, "dgx-2"), make_audit(sub))
    assert refused.value.state == state
    with pytest.raises(SubscriptionNotWritable):
        repos.nodes.replace(node, replace(node, etag="n2", device_total=4, memory_gb_total=320), make_audit(sub))
    assert repos.nodes.get(node_key(sub, "rg1", "dgx-2")) is None
    assert repos.nodes.get(node.key) == node
    assert len(audit_events(repos, sub)) == events

    repos.nodes.delete(node, make_audit(sub))
    assert repos.nodes.get(node.key) is None
    assert repos.nodes.fleet_shapes(sub) == []


# ---------------------------------------------------------------------------------------------- replace
def test_replace_keeps_allocations_and_free_capacity_follows_the_totals(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    place_instance(repos, node, devices=2, memory_gb=160)
    node = repos.nodes.get(node.key) or node

    bigger = make_node(sub, "DGX-1", "RG1", devices=4, memory_gb=320, owner="supplier-2", etag="n2")
    bigger.former_owners = ("supplier-1",)
    repos.nodes.replace(node, bigger, make_audit(sub))

    found = repos.nodes.get(node.key)
    assert found is not None
    assert (found.etag, found.owner, found.former_owners, found.name) == ("n2", "supplier-2", ("supplier-1",), "DGX-1")
    assert (found.device_total, found.memory_gb_total) == (4, 320)
    assert counters(found) == (2, 160, 1)
    assert (found.free_devices, found.free_memory_gb) == (2, 160)
    page = repos.nodes.page(Scope(sub), 10, None)
    assert [(n.key.resource_group, n.name) for n in page.items] == [("RG1", "DGX-1")]  # the casing last supplied


def test_replace_is_refused_at_a_stale_etag_missing_or_below_its_allocations(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    place_instance(repos, node, devices=2, memory_gb=160)
    events = len(audit_events(repos, sub))

    with pytest.raises(EtagMismatch):
        repos.nodes.replace(replace(node, etag="stale"), make_node(sub, etag="n2"), make_audit(sub))
    with pytest.raises(CapacityInUse) as in_use:
        repos.nodes.replace(node, make_node(sub, devices=1, memory_gb=640, etag="n2"), make_audit(sub))
    assert (in_use.value.devices, in_use.value.memory_gb, in_use.value.instances) == (2, 160, 1)
    with pytest.raises(CapacityInUse):
        repos.nodes.replace(node, make_node(sub, devices=8, memory_gb=100, etag="n2"), make_audit(sub))
    missing = make_node(sub, "dgx-9")
    with pytest.raises(ItemMissing):
        repos.nodes.replace(missing, replace(missing, etag="n2"), make_audit(sub))

    found = repos.nodes.get(node.key)
    assert found is not None and (found.etag, found.device_total) == ("n1", 8)
    assert len(audit_events(repos, sub)) == events
    assert hardware(repos, sub) == {FleetShape("h100", "eastus", 8, 640): 1}


# ---------------------------------------------------------------------------------------------- delete
def test_delete_requires_its_etag_and_an_idle_node(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    instance = place_instance(repos, node, devices=2, memory_gb=160)

    with pytest.raises(ItemMissing):
        repos.nodes.delete(make_node(sub, "dgx-9"), make_audit(sub))
    with pytest.raises(EtagMismatch):
        repos.nodes.delete(replace(node, etag="stale"), make_audit(sub))
    with pytest.raises(CapacityInUse) as in_use:
        repos.nodes.delete(node, make_audit(sub))
    assert (in_use.value.devices, in_use.value.memory_gb, in_use.value.instances) == (2, 160, 1)
    assert repos.nodes.get(node.key) is not None

    repos.instances.remove(
        instance,
        make_audit(sub),
        expect=Expect(etag=instance.etag),
        effects=Effects(release=Release(node.key, 2, 160, child=-1)),
    )
    repos.nodes.delete(node, make_audit(sub))
    assert repos.nodes.get(node.key) is None
    assert repos.nodes.fleet_shapes(sub) == []


# ---------------------------------------------------------------------------------------------- fleet shapes
def hardware(repos: Repositories, sub: str) -> dict[FleetShape, int]:
    """The subscription's shape items added up by hardware and place (they are also kept per resource group and
    pricing): shape → nodes."""
    found: dict[FleetShape, int] = {}
    for shape in repos.nodes.fleet_shapes(sub):
        plain = FleetShape(shape.gpu_model, shape.location, shape.device_total, shape.memory_gb_total)
        found[plain] = found.get(plain, 0) + shape.nodes
    return found


def test_fleet_shapes_count_the_nodes_of_each_shape(repos: Repositories, sub: str) -> None:
    create_node(repos, make_node(sub, "dgx-1"))
    create_node(repos, make_node(sub, "dgx-2", "rg2", location="East US"))
    a100 = create_node(repos, make_node(sub, "dgx-3", model="A100", location="westus", devices=4, memory_gb=320))
    create_node(repos, make_node(f"{sub}-other", "dgx-1"))

    assert hardware(repos, sub) == {
        FleetShape("h100", "eastus", 8, 640): 2,
        FleetShape("a100", "westus", 4, 320): 1,
    }
    assert {s.resource_group for s in repos.nodes.fleet_shapes(sub)} == {"rg1", "rg2"}

    repos.nodes.replace(a100, make_node(sub, "dgx-3", etag="n2"), make_audit(sub))
    assert hardware(repos, sub) == {FleetShape("h100", "eastus", 8, 640): 3}

    repos.nodes.delete(make_node(sub, "dgx-1"), make_audit(sub))
    assert hardware(repos, sub.upper()) == {FleetShape("h100", "eastus", 8, 640): 2}


def test_fleet_shapes_tell_the_terms_their_nodes_bill_by(repos: Repositories, sub: str) -> None:
    """Shapes are counted per pricing too (a job's price ceiling is read from them: domain/pricing.py), and a node
    re-priced moves from one to the other."""
    cheap = {"currency": "USD", "pricePerGpuHour": 2.5, "billingIncrementSeconds": 60, "minimumBillableSeconds": 60}
    dear = {"currency": "EUR", "pricePerGpuHour": 1_000_000, "billingIncrementSeconds": 3600,
            "minimumBillableSeconds": 3600}  # fmt: skip
    a = create_node(repos, make_node(sub, "a", pricing=cheap))
    create_node(repos, make_node(sub, "b", pricing=cheap))

    def shapes() -> list[tuple[int, tuple[object, ...]]]:
        found = repos.nodes.fleet_shapes(sub)
        return sorted((s.nodes, astuple(s.terms) if s.terms else ()) for s in found)

    assert shapes() == [(2, (Decimal("2.5"), "USD", 60, 60))]
    repos.nodes.replace(a, make_node(sub, "a", pricing=dear, etag="n2"), make_audit(sub))
    assert shapes() == [(1, (Decimal("2.5"), "USD", 60, 60)), (1, (Decimal("1000000"), "EUR", 3600, 3600))]
    # the hardware (and who makes it) as before
    assert repos.nodes.fleet_shapes(sub)[0] == FleetShape("h100", "eastus", 8, 640, 1, vendor="NVIDIA")


# ---------------------------------------------------------------------------------------------- lists
def _fleet(repos: Repositories, sub: str) -> None:
    for rg, name in [("rg-b", "n1"), ("RG-a", "Zeta"), ("rg-a", "alpha"), ("rg-a", "Beta"), ("rg-c", "gamma")]:
        create_node(repos, make_node(sub, name, rg))


def test_page_orders_by_group_then_name_case_insensitively(repos: Repositories, sub: str) -> None:
    _fleet(repos, sub)
    create_node(repos, make_node(f"{sub}-other", "aaa", "rg-a"))

    everything, pages = all_pages(lambda limit, token: repos.nodes.page(Scope(sub), limit, token), 2)
    assert names_of(everything) == ["alpha", "Beta", "Zeta", "n1", "gamma"]
    assert pages == 3
    assert [n.key.resource_group for n in everything] == ["rg-a", "rg-a", "RG-a", "rg-b", "rg-c"]
    assert all(n.key.subscription_id == sub for n in everything)

    group, _ = all_pages(lambda limit, token: repos.nodes.page(Scope(sub, "RG-A"), limit, token), 1)
    assert names_of(group) == ["alpha", "Beta", "Zeta"]
    empty = repos.nodes.page(Scope(sub, "rg-none"), 10, None)
    assert (empty.items, empty.token) == ([], None)


def test_page_of_visible_groups_only(repos: Repositories, sub: str) -> None:
    _fleet(repos, sub)
    scope = Scope(sub, visible_groups=("rg-c", "RG-A"))
    for limit in (1, 2, 3, 10):
        found, _ = all_pages(lambda limit, token: repos.nodes.page(scope, limit, token), limit)
        assert names_of(found) == ["alpha", "Beta", "Zeta", "gamma"], limit
    assert repos.nodes.page(Scope(sub, visible_groups=()), 10, None).items == []


def test_a_token_is_refused_by_any_other_list(repos: Repositories, sub: str) -> None:
    _fleet(repos, sub)
    node = repos.nodes.get(node_key(sub, "rg-a", "alpha"))
    assert node is not None
    place_instance(repos, node, "i1")
    place_instance(repos, node, "i2")

    token = repos.nodes.page(Scope(sub), 1, None).token
    group_token = repos.nodes.page(Scope(sub, "rg-a"), 1, None).token
    assert token and group_token
    assert repos.nodes.page(Scope(sub), 10, token).items  # its own list continues
    for scope in (Scope(f"{sub}-other"), Scope(sub, "rg-c")):
        with pytest.raises(InvalidSkipToken):
            repos.nodes.page(scope, 10, token)
    with pytest.raises(InvalidSkipToken):
        repos.nodes.page(Scope(sub, "rg-b"), 10, group_token)
    with pytest.raises(InvalidSkipToken):
        repos.jobs.page(Scope(sub), 10, token)
    with pytest.raises(InvalidSkipToken):
        repos.instances.page(node.key, 10, token)
    for forged in ("not-a-token", "e30", "W10", "eyJQSyI6MX0"):
        with pytest.raises(InvalidSkipToken):
            repos.nodes.page(Scope(sub), 10, forged)


# ---------------------------------------------------------------------------------------------- placement index
def test_candidates_fewest_free_gpus_first_filtered_by_demand(repos: Repositories, sub: str) -> None:
    create_node(repos, make_node(sub, "a", devices=8, memory_gb=640))
    create_node(repos, make_node(sub, "b", devices=4, memory_gb=320))
    c = create_node(repos, make_node(sub, "c", devices=2, memory_gb=160))
    create_node(repos, make_node(sub, "d", devices=6, memory_gb=480, model="A100", location="westus"))
    create_node(repos, make_node(sub, "e", devices=5, memory_gb=400, availability="Cordoned"))
    create_node(repos, make_node(sub, "f", devices=7, memory_gb=70))
    create_node(repos, make_node(f"{sub}-other", "g", devices=3, memory_gb=240))

    def names(demand: Demand) -> list[str]:
        return [n.name for n in repos.nodes.candidates(sub, demand)]

    assert names(Demand(2, 100)) == ["c", "b", "d", "a"]
    assert names(Demand(3, 0)) == ["b", "d", "f", "a"]
    assert names(Demand(2, 100, gpu_model="h100")) == ["c", "b", "a"]
    assert names(Demand(2, 100, location="westus")) == ["d"]
    assert names(Demand(9, 0)) == []
    assert names(Demand(1, 700)) == []

    place_instance(repos, c, devices=1, memory_gb=80)  # the index follows the counters
    assert names(Demand(1, 80)) == ["c", "b", "d", "a"]
    assert names(Demand(2, 0)) == ["b", "d", "f", "a"]
    found = repos.nodes.candidates(sub, Demand(1, 80))[0]
    assert (found.free_devices, found.free_memory_gb, found.key.resource_group) == (1, 80, "rg1")


def test_candidates_within_terms_leave_out_the_nodes_billing_above_them(repos: Repositories, sub: str) -> None:
    def priced(currency: str, price: float, increment: int = 60, minimum: int = 60) -> dict[str, object]:
        return {"currency": currency, "pricePerGpuHour": price, "billingIncrementSeconds": increment,
                "minimumBillableSeconds": minimum}  # fmt: skip

    create_node(repos, make_node(sub, "usd-2", devices=2, memory_gb=160, pricing=priced("USD", 2.0)))
    create_node(repos, make_node(sub, "usd-3", devices=3, memory_gb=240, pricing=priced("USD", 3.0)))
    create_node(repos, make_node(sub, "usd-hourly", devices=4, memory_gb=320, pricing=priced("USD", 1.0, 3600, 3600)))
    create_node(repos, make_node(sub, "eur-1", devices=5, memory_gb=400, pricing=priced("EUR", 1.0)))

    def names(*within: BillingTerms) -> list[str]:
        return [n.name for n in repos.nodes.candidates(sub, Demand(1, 0, within=within))]

    usd = BillingTerms(Decimal("2.5"), "USD", 60, 60)
    assert names(usd) == ["usd-2"]
    assert names(usd, BillingTerms(Decimal("1"), "EUR", 60, 60)) == ["usd-2", "eur-1"]
    assert names(BillingTerms(Decimal("5"), "USD", 3600, 3600)) == ["usd-2", "usd-3", "usd-hourly"]
    assert names() == []  # an empty ceiling admits nothing
    assert [n.name for n in repos.nodes.candidates(sub, Demand(1, 0))] == ["usd-2", "usd-3", "usd-hourly", "eur-1"]


def test_a_node_stops_being_a_candidate_when_it_is_cordoned(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub, "a"))
    repos.nodes.replace(node, make_node(sub, "a", availability="Maintenance", etag="n2"), make_audit(sub))
    assert repos.nodes.candidates(sub, Demand(1, 0)) == []
    node = repos.nodes.get(node.key) or node
    repos.nodes.replace(node, make_node(sub, "a", etag="n3"), make_audit(sub))
    assert [n.name for n in repos.nodes.candidates(sub, Demand(1, 0))] == ["a"]


def test_a_drained_node_is_a_candidate_only_for_its_job(repos: Repositories, sub: str) -> None:
    drained = create_node(repos, make_node(sub, "a", devices=2, memory_gb=160))
    create_node(repos, make_node(sub, "b", devices=4, memory_gb=320))
    big = ResourceKey(sub, "rg1", "sparkJobs", ("big",))
    other = ResourceKey(sub, "rg1", "sparkJobs", ("other",))

    repos.nodes.set_draining(drained.key, big)
    assert [n.name for n in repos.nodes.candidates(sub, Demand(1, 0))] == ["b"]
    assert [n.name for n in repos.nodes.candidates(sub, Demand(1, 0), for_job=other)] == ["b"]
    big_upper = ResourceKey(sub.upper(), "RG1", "sparkJobs", ("BIG",))
    assert [n.name for n in repos.nodes.candidates(sub, Demand(1, 0), for_job=big_upper)] == ["a", "b"]

    repos.nodes.set_draining(drained.key, None)
    assert [n.name for n in repos.nodes.candidates(sub, Demand(1, 0))] == ["a", "b"]
    repos.nodes.set_draining(node_key(sub, "rg1", "gone"), big)  # a node gone is no error
    assert repos.nodes.get(node_key(sub, "rg1", "gone")) is None


def test_draining_is_bookkeeping_not_a_change_of_the_node(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub, "a"))
    events = len(audit_events(repos, sub))
    repos.nodes.set_draining(node.key, ResourceKey(sub, "rg1", "sparkJobs", ("big",)))
    assert repos.nodes.get(node.key) == node
    assert len(audit_events(repos, sub)) == events


def _amd(node: Node) -> Node:
    """``node`` holding AMD MI300X GPUs (its document says so)."""
    node.document["properties"]["accelerator"] = {"kind": "GPU", "vendor": "AMD", "model": "MI300X", "count": 8}
    node.document["properties"]["hardwareSpecs"]["gpuModel"] = "MI300X"
    return node


def test_candidates_are_of_the_vendor_asked_for(repos: Repositories, sub: str) -> None:
    create_node(repos, make_node(sub, "nv"))
    create_node(repos, _amd(make_node(sub, "amd")))
    names = lambda vendor: sorted(n.name for n in repos.nodes.candidates(sub, Demand(1, 0, vendor=vendor)))  # noqa: E731
    assert names(None) == ["amd", "nv"]
    assert names("NVIDIA") == ["nv"] and names("amd") == ["amd"]


def test_a_node_counted_before_vendors_were_is_counted_out_of_that_shape_when_it_changes(
    repos: Repositories, sub: str
) -> None:
    """A node item written before shapes were counted per vendor is counted in its shape's key without a vendor: the
    store reads it so (:attr:`Node.counted_shape`), and a change or a delete counts it out of that one — never out
    of a key it was not counted in (the count would drift)."""
    amd = _amd(make_node(sub, "amd"))
    legacy = amd.shape.legacy_sort_key
    create_node(repos, amd)
    _store_as_before_vendors(repos, sub, amd, legacy)
    stored = repos.nodes.get(amd.key)
    assert stored is not None and stored.counted_shape_key == legacy
    assert [(s.vendor, s.nodes) for s in repos.nodes.fleet_shapes(sub)] == [("", 1)]  # any vendor, until written
    # When it is re-priced, it moves to its shape of its vendor
    repriced = _amd(make_node(sub, "amd", etag="n2", pricing={"currency": "USD", "pricePerGpuHour": 3}))
    repos.nodes.replace(stored, repriced, make_audit(sub))
    assert [(s.vendor, s.nodes) for s in repos.nodes.fleet_shapes(sub)] == [("AMD", 1)]
    # And a delete counts it out of that one
    repos.nodes.delete(repos.nodes.get(amd.key) or repriced, make_audit(sub))
    assert repos.nodes.fleet_shapes(sub) == []


def _store_as_before_vendors(repos: Repositories, sub: str, node: Node, legacy_sk: str) -> None:
    """Make ``node``'s stored items what the code before vendors wrote: no vendor or counted shape on the node item,
    its shape item under ``legacy_sk`` with no vendor."""
    state = getattr(repos.nodes, "_s", None)
    if state is not None:  # the in-memory twin: its node record and shape entry
        stored = state.nodes[next(k for k in state.nodes if k[0] == sub.lower())]
        stored.node.counted_shape = legacy_sk
        entry = state.shapes.pop((sub.lower(), node.shape.sort_key))
        entry.shape = replace(entry.shape, vendor="")
        state.shapes[(sub.lower(), legacy_sk)] = entry
        return
    table = repos.nodes._t  # type: ignore[attr-defined]
    client, pk = table.client, {"S": keys.subscription_pk(sub)}
    item = {"PK": pk, "SK": {"S": keys.resource_sk(node.key)}}
    client.update_item(TableName=table.name, Key=item, UpdateExpression="REMOVE shapeSk, acceleratorVendor")
    shape = {"PK": pk, "SK": {"S": node.shape.sort_key}}
    old = client.get_item(TableName=table.name, Key=shape)["Item"]
    client.delete_item(TableName=table.name, Key=shape)
    client.put_item(TableName=table.name, Item={**old, "SK": {"S": legacy_sk}, "vendor": {"S": ""}})


# ---------------------------------------------------------------------------------------------- Slurm nodes
def _on_slurm(node: Node, cluster: str, node_name: str) -> Node:
    node.document["properties"]["backend"] = {"type": "Slurm", "cluster": cluster, "nodeName": node_name}
    return node


def test_the_nodes_naming_one_slurm_node_are_read_by_that_name_in_any_case(repos: Repositories, sub: str) -> None:
    for name, cluster, slurm_name in [("a", "c1", "gpu-1"), ("b", "c1", "gpu-10"), ("c", "c2", "gpu-1")]:
        node = _on_slurm(make_node(sub, name), cluster, slurm_name)
        repos.nodes.create(node, make_audit(sub, node.arm_id))
    assert [n.name for n in repos.nodes.on_cluster("c1", "GPU-1")] == ["a"]  # not gpu-10, not another cluster's
    assert sorted(n.name for n in repos.nodes.on_cluster("c1")) == ["a", "b"]
    assert repos.nodes.on_cluster("c1", "gpu-2") == []
