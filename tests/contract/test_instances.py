"""InstanceRepository: an instance accepted with its operation, audit event and reservation in one transaction;
transitions under an :class:`Expect` carrying their :class:`Effects`; removal; bookkeeping notes; lists under a
node. A refused change writes nothing at all: not the workload, not an operation, not the node's counters, not
the audit event, not a meter."""

from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import pytest

from itl_accelerator.domain.records import Instance, Lease, Node, Release, Reservation, ResourceKey, node_key
from itl_accelerator.domain.states import (
    INSTANCE_IN_FLIGHT,
    JobStatus,
    OperationKind,
    OperationStatus,
    ProvisioningState,
)
from itl_accelerator.domain.usage import MeterEnd, MeterRef
from itl_accelerator.repositories.errors import (
    CapacityShortfall,
    InvalidSkipToken,
    NodeChanged,
    NodeMissing,
    NodeUnavailable,
    SubscriptionNotWritable,
    WorkloadChanged,
)
from itl_accelerator.repositories.protocols import Effects, Expect, Repositories
from tests.contract.builders import (
    all_pages,
    audit_events,
    counters,
    create_node,
    make_audit,
    make_instance,
    make_meter,
    make_node,
    make_operation,
    names_of,
    place_instance,
    suspend,
)

NOW = "2024-05-01T00:10:00.000000Z"


@dataclass
class Placed:
    """A node with one instance accepted on it (2 GPUs, 160 GiB), its provisioning operation ``op-1``."""

    node: Node
    instance: Instance


@pytest.fixture
def placed(repos: Repositories, sub: str) -> Placed:
    node = create_node(repos, make_node(sub))
    instance = place_instance(repos, node, operation_id="op-1")
    return Placed(repos.nodes.get(node.key) or node, instance)


def snapshot(repos: Repositories, placed: Placed) -> tuple[object, ...]:
    """Everything a transition of ``placed`` could change."""
    sub = placed.node.key.subscription_id
    return (
        repos.instances.get(placed.instance.key),
        repos.operations.get(sub, "op-1"),
        repos.operations.get(sub, "op-2"),
        counters(repos.nodes.get(placed.node.key)),
        repos.meters.get(MeterRef(sub, "alloc-1")),
        len(audit_events(repos, sub)),
    )


# ---------------------------------------------------------------------------------------------- accept
def test_accept_writes_the_instance_its_operation_audit_and_reservation(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    instance = make_instance(node.key, "Llama", operation_id="Op-ABC", lease=Lease.owned(5000.0))
    operation = make_operation("Op-ABC", rg="RG1", resource_id=instance.arm_id)
    audit = make_audit(sub, instance.arm_id)
    repos.instances.accept(instance, operation, audit, Reservation.on(node, 2, 160, child=1))

    assert repos.instances.get(instance.key) == instance
    found = repos.instances.get(replace(instance.key, names=("DGX-1", "LLAMA")))
    assert found is not None and found.key.same(instance.key) and found.etag == "i1"
    stored_op = repos.operations.get(sub.upper(), "op-abc")
    assert stored_op is not None
    assert (stored_op.operation_id, stored_op.status, stored_op.kind) == ("Op-ABC", "Accepted", "provision")
    assert stored_op.resource_group == "rg1"  # as compared: lower case
    assert audit.event_id in [e.event_id for e in audit_events(repos, sub)]
    after = repos.nodes.get(node.key)
    assert counters(after) == (2, 160, 1)
    assert after is not None and (after.free_devices, after.free_memory_gb, after.etag) == (6, 480, "n1")


def test_accept_falls_short_with_the_free_figures_and_writes_nothing(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    place_instance(repos, node, "big", devices=6, memory_gb=480)
    events = len(audit_events(repos, sub))

    for devices, memory_gb in ((4, 80), (1, 200)):
        instance = make_instance(node.key, "more", devices=devices, memory_gb=memory_gb, operation_id="op-more")
        with pytest.raises(CapacityShortfall) as short:
            repos.instances.accept(
                instance,
                make_operation("op-more"),
                make_audit(sub),
                Reservation.on(node, devices, memory_gb, child=1),
            )
        assert (short.value.free_devices, short.value.free_memory_gb) == (2, 160)
    assert repos.instances.get(instance.key) is None
    assert repos.operations.get(sub, "op-more") is None
    assert counters(repos.nodes.get(node.key)) == (6, 480, 1)
    assert len(audit_events(repos, sub)) == events


@pytest.mark.parametrize("availability", ["Cordoned", "Maintenance", "Offline"])
def test_accept_on_a_node_not_available_is_refused(repos: Repositories, sub: str, availability: str) -> None:
    node = create_node(repos, make_node(sub, availability=availability))
    instance = make_instance(node.key)
    with pytest.raises(NodeUnavailable) as unavailable:
        repos.instances.accept(instance, make_operation("op-1"), make_audit(sub), Reservation.on(node, 2, 160, child=1))
    assert unavailable.value.availability == availability
    assert repos.instances.get(instance.key) is None
    assert counters(repos.nodes.get(node.key)) == (0, 0, 0)


def test_accept_on_a_node_changed_since_it_was_read_is_refused(repos: Repositories, sub: str) -> None:
    read = create_node(repos, make_node(sub))
    repos.nodes.replace(read, make_node(sub, etag="n2"), make_audit(sub))  # e.g. its pricing changed
    instance = make_instance(read.key)
    with pytest.raises(NodeChanged):
        repos.instances.accept(instance, make_operation("op-1"), make_audit(sub), Reservation.on(read, 2, 160, child=1))
    assert repos.instances.get(instance.key) is None
    assert repos.operations.get(sub, "op-1") is None
    assert counters(repos.nodes.get(read.key)) == (0, 0, 0)


def test_accept_on_a_node_gone_is_refused(repos: Repositories, sub: str) -> None:
    ghost = make_node(sub, "ghost")
    instance = make_instance(ghost.key)
    with pytest.raises(NodeMissing):
        repos.instances.accept(
            instance, make_operation("op-1"), make_audit(sub), Reservation.on(ghost, 2, 160, child=1)
        )
    assert repos.instances.get(instance.key) is None
    assert repos.operations.get(sub, "op-1") is None
    assert audit_events(repos, sub) == []


def test_accept_of_a_name_taken_is_a_workload_changed(repos: Repositories, sub: str, placed: Placed) -> None:
    events = len(audit_events(repos, sub))
    again = make_instance(placed.node.key, "LLAMA", etag="other", operation_id="op-2")
    with pytest.raises(WorkloadChanged):
        repos.instances.accept(
            again, make_operation("op-2"), make_audit(sub), Reservation.on(placed.node, 1, 80, child=1)
        )
    assert repos.instances.get(placed.instance.key) == placed.instance
    assert repos.operations.get(sub, "op-2") is None
    assert counters(repos.nodes.get(placed.node.key)) == (2, 160, 1)
    assert len(audit_events(repos, sub)) == events


def test_accept_of_an_operation_id_taken_is_a_workload_changed(repos: Repositories, sub: str, placed: Placed) -> None:
    other = make_instance(placed.node.key, "other", operation_id="OP-1")
    with pytest.raises(WorkloadChanged):
        repos.instances.accept(
            other, make_operation("OP-1"), make_audit(sub), Reservation.on(placed.node, 1, 80, child=1)
        )
    assert repos.instances.get(other.key) is None
    assert counters(repos.nodes.get(placed.node.key)) == (2, 160, 1)


def test_accept_in_a_subscription_not_registered_is_refused_first(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    suspend(repos, sub)
    for target in (node, make_node(sub, "ghost")):  # the subscription's state is judged before the node
        instance = make_instance(target.key)
        with pytest.raises(SubscriptionNotWritable) as refused:
            repos.instances.accept(
                instance, make_operation("op-1"), make_audit(sub), Reservation.on(target, 20, 160, child=1)
            )
        assert refused.value.state == "Suspended"
        assert repos.instances.get(instance.key) is None
    assert counters(repos.nodes.get(node.key)) == (0, 0, 0)


def test_a_failed_instance_is_provisioned_again_at_its_etag(repos: Repositories, sub: str, placed: Placed) -> None:
    failed = replace(placed.instance, state=ProvisioningState.FAILED, etag="i2", capacity_reserved=False)
    repos.instances.update(
        placed.instance,
        failed,
        make_audit(sub),
        expect=Expect(etag="i1"),
        effects=Effects(release=Release(placed.node.key, 2, 160, child=-1)),
    )
    node = repos.nodes.get(placed.node.key)
    assert node is not None and counters(node) == (0, 0, 0)

    again = replace(placed.instance, etag="i3", operation_id="op-2", devices=4, memory_gb=320)
    with pytest.raises(WorkloadChanged):  # replacing the instance as it was before it failed
        repos.instances.accept(
            again,
            make_operation("op-2"),
            make_audit(sub),
            Reservation.on(node, 4, 320, child=1),
            replacing=placed.instance,
        )
    assert repos.instances.get(placed.instance.key) == failed

    repos.instances.accept(
        again, make_operation("op-2"), make_audit(sub), Reservation.on(node, 4, 320, child=1), replacing=failed
    )
    assert repos.instances.get(placed.instance.key) == again
    assert counters(repos.nodes.get(node.key)) == (4, 320, 1)


def test_get_with_node(repos: Repositories, sub: str, placed: Placed) -> None:
    instance, node = repos.instances.get_with_node(placed.instance.key)
    assert instance == placed.instance
    assert node == placed.node
    missing = replace(placed.instance.key, names=("dgx-1", "nope"))
    assert repos.instances.get_with_node(missing) == (None, placed.node)
    assert repos.instances.get_with_node(replace(missing, names=("ghost", "nope"))) == (None, None)


def test_instances_are_listed_under_their_node(repos: Repositories, sub: str) -> None:
    a = create_node(repos, make_node(sub, "a"))
    b = create_node(repos, make_node(sub, "b"))
    for name in ("Zed", "alpha", "mid"):
        place_instance(repos, a, name, devices=1, memory_gb=80)
        a = repos.nodes.get(a.key) or a
    place_instance(repos, b, "other", devices=1, memory_gb=80)

    found, pages = all_pages(lambda limit, token: repos.instances.page(a.key, limit, token), 2)
    assert names_of(found) == ["alpha", "mid", "Zed"]
    assert pages == 2
    assert all(i.node is not None and i.node.same(a.key) for i in found)
    token = repos.instances.page(a.key, 1, None).token
    assert token is not None
    with pytest.raises(InvalidSkipToken):
        repos.instances.page(b.key, 10, token)
    assert names_of(repos.instances.page(node_key(sub, "rg1", "none"), 10, None).items) == []


def test_workload_records_are_copies_both_ways(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    instance = make_instance(node.key, operation_id="op-1")
    repos.instances.accept(instance, make_operation("op-1"), make_audit(sub), Reservation.on(node, 2, 160, child=1))
    expected = copy.deepcopy(instance)
    instance.document["properties"]["model"] = "changed"  # the caller's object, after the write
    instance.state = ProvisioningState.FAILED

    found = repos.instances.get(instance.key)
    assert found == expected and found is not None
    found.document["name"] = "x"
    found.devices = 99
    listed = repos.instances.page(node.key, 10, None).items[0]
    listed.document["properties"]["model"] = "listed"
    assert repos.instances.get(instance.key) == expected


def test_concurrent_reservations_never_over_commit_a_node(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub, devices=8, memory_gb=640))

    def attempt(n: int) -> str:
        try:
            place_instance(repos, node, f"i{n}", devices=3, memory_gb=80)
        except CapacityShortfall:
            return "short"
        return "placed"

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(attempt, range(8)))
    assert sorted(outcomes) == ["placed"] * 2 + ["short"] * 6
    assert counters(repos.nodes.get(node.key)) == (6, 160, 2)
    assert len(repos.instances.page(node.key, 10, None).items) == 2


# ---------------------------------------------------------------------------------------------- update
def test_a_transition_writes_the_record_and_its_effects(repos: Repositories, sub: str, placed: Placed) -> None:
    operation = repos.operations.get(sub, "op-1")
    assert operation is not None
    after = replace(
        placed.instance, state=ProvisioningState.SUCCEEDED, etag="i2", dgx_id="dgx-9", meter_id="alloc-1", lease=None
    )
    audit = make_audit(sub)
    repos.instances.update(
        placed.instance,
        after,
        audit,
        expect=Expect(
            etag="i1",
            state=INSTANCE_IN_FLIGHT,
            operation_id="op-1",
            capacity_reserved=True,
            cancel_requested=False,
        ),
        effects=Effects(
            operation=operation.moved(OperationStatus.SUCCEEDED, NOW),
            new_operation=make_operation("op-2", kind=OperationKind.DEPROVISION),
            meter_start=make_meter(sub, "alloc-1", start=1000),
        ),
    )
    assert repos.instances.get(placed.instance.key) == after
    moved = repos.operations.get(sub, "op-1")
    assert moved is not None and moved.status == "Succeeded" and moved.body["endTime"] == NOW
    started = repos.operations.get(sub, "op-2")
    assert started is not None and (started.status, started.kind) == ("Accepted", "deprovision")
    meter = repos.meters.get(MeterRef(sub, "alloc-1"))
    assert meter is not None and (meter.start, meter.active, meter.end) == (1000, True, None)
    assert audit.event_id in [e.event_id for e in audit_events(repos, sub)]


FAILING_EXPECTS = {
    "etag": Expect(etag="other"),
    "state": Expect(state=(ProvisioningState.SUCCEEDED, ProvisioningState.FAILED)),
    "operation_id": Expect(operation_id="op-other"),
    "delete_operation_id": Expect(delete_operation_id="op-delete"),
    "dgx_id": Expect(dgx_id="dgx-9"),
    "capacity_reserved": Expect(capacity_reserved=False),
    "cancel_requested": Expect(cancel_requested=True),
    "status": Expect(status=(JobStatus.PENDING,)),  # an instance has no job status
    "one_of_many": Expect(etag="i1", state=INSTANCE_IN_FLIGHT, capacity_reserved=False),
}


@pytest.mark.parametrize("expect", FAILING_EXPECTS.values(), ids=FAILING_EXPECTS.keys())
def test_a_transition_whose_expect_fails_writes_nothing(
    repos: Repositories, sub: str, placed: Placed, expect: Expect
) -> None:
    before = snapshot(repos, placed)
    operation = repos.operations.get(sub, "op-1")
    assert operation is not None
    after = replace(placed.instance, state=ProvisioningState.PROVISIONING, etag="i2", dgx_id="dgx-1")
    with pytest.raises(WorkloadChanged):
        repos.instances.update(
            placed.instance,
            after,
            make_audit(sub),
            expect=expect,
            effects=Effects(
                operation=operation.moved(OperationStatus.RUNNING, NOW),
                new_operation=make_operation("op-2"),
                release=Release(placed.node.key, 2, 160, child=-1),
                meter_start=make_meter(sub, "alloc-1"),
            ),
        )
    assert snapshot(repos, placed) == before


def test_moving_an_operation_that_has_ended_is_refused_and_writes_nothing(
    repos: Repositories, sub: str, placed: Placed
) -> None:
    operation = repos.operations.get(sub, "op-1")
    assert operation is not None
    assert repos.operations.finish(sub, operation.moved(OperationStatus.CANCELED, NOW))
    before = snapshot(repos, placed)

    after = replace(placed.instance, state=ProvisioningState.SUCCEEDED, etag="i2")
    for effects in (
        Effects(operation=operation.moved(OperationStatus.SUCCEEDED, NOW), meter_start=make_meter(sub, "alloc-1")),
        Effects(
            more_operations=(operation.moved(OperationStatus.FAILED, NOW),), release=Release(placed.node.key, 2, 160)
        ),
        Effects(operation=make_operation("op-never-started")),
    ):
        with pytest.raises(WorkloadChanged):
            repos.instances.update(placed.instance, after, make_audit(sub), expect=Expect(etag="i1"), effects=effects)
    assert snapshot(repos, placed) == before
    ended = repos.operations.get(sub, "op-1")
    assert ended is not None and ended.status == "Canceled"


def test_a_new_operation_whose_id_is_taken_is_a_workload_changed(repos: Repositories, sub: str, placed: Placed) -> None:
    before = snapshot(repos, placed)
    with pytest.raises(WorkloadChanged):
        repos.instances.update(
            placed.instance,
            replace(placed.instance, state=ProvisioningState.DELETING, etag="i2", delete_operation_id="op-1"),
            make_audit(sub),
            expect=Expect(etag="i1"),
            effects=Effects(new_operation=make_operation("OP-1", kind=OperationKind.DEPROVISION)),
        )
    assert snapshot(repos, placed) == before


def test_a_transition_with_a_reservation_falls_short_and_writes_nothing(
    repos: Repositories, sub: str, placed: Placed
) -> None:
    before = snapshot(repos, placed)
    bigger = replace(placed.instance, etag="i2", devices=8, memory_gb=160)
    with pytest.raises(CapacityShortfall) as short:
        repos.instances.update(
            placed.instance,
            bigger,
            make_audit(sub),
            expect=Expect(etag="i1"),
            effects=Effects(reservation=Reservation.on(placed.node, 7, 0), meter_start=make_meter(sub, "alloc-1")),
        )
    assert (short.value.free_devices, short.value.free_memory_gb) == (6, 480)
    assert snapshot(repos, placed) == before

    repos.instances.update(
        placed.instance,
        bigger,
        make_audit(sub),
        expect=Expect(etag="i1"),
        effects=Effects(reservation=Reservation.on(placed.node, 5, 0)),
    )
    assert counters(repos.nodes.get(placed.node.key)) == (7, 160, 1)


def test_workload_changed_is_judged_before_the_node(repos: Repositories, sub: str, placed: Placed) -> None:
    with pytest.raises(WorkloadChanged):
        repos.instances.update(
            placed.instance,
            replace(placed.instance, etag="i2"),
            make_audit(sub),
            expect=Expect(etag="stale"),
            effects=Effects(reservation=Reservation.on(make_node(sub, "ghost"), 1, 0)),
        )


def test_a_reservation_and_a_release_of_one_node_in_one_transition_are_refused(
    repos: Repositories, sub: str, placed: Placed
) -> None:
    """DynamoDB refuses a transaction naming one item twice (a ``ValidationException``, not a typed error; memory:
    ``ValueError``) — nothing is written."""
    from botocore.exceptions import ClientError

    before = snapshot(repos, placed)
    with pytest.raises((ValueError, ClientError)):
        repos.instances.update(
            placed.instance,
            replace(placed.instance, etag="i2", devices=3),
            make_audit(sub),
            expect=Expect(etag="i1"),
            effects=Effects(reservation=Reservation.on(placed.node, 3, 160), release=Release(placed.node.key, 2, 160)),
        )
    assert snapshot(repos, placed) == before


def test_a_release_gives_capacity_back(repos: Repositories, sub: str, placed: Placed) -> None:
    after = replace(placed.instance, state=ProvisioningState.FAILED, etag="i2", capacity_reserved=False)
    repos.instances.update(
        placed.instance,
        after,
        make_audit(sub),
        expect=Expect(etag="i1", capacity_reserved=True),
        effects=Effects(release=Release(placed.node.key, 2, 160)),
    )
    node = repos.nodes.get(placed.node.key)
    assert counters(node) == (0, 0, 1)
    assert node is not None and (node.free_devices, node.free_memory_gb) == (8, 640)
    with pytest.raises(WorkloadChanged):  # released once: the instance no longer holds it
        repos.instances.update(
            after,
            replace(after, etag="i3"),
            make_audit(sub),
            expect=Expect(capacity_reserved=True),
            effects=Effects(release=Release(placed.node.key, 2, 160)),
        )
    assert counters(repos.nodes.get(placed.node.key)) == (0, 0, 1)


def test_a_transition_writes_only_what_changed(repos: Repositories, sub: str, placed: Placed) -> None:
    """Bookkeeping written meanwhile by another step (a lease) stays: the transition from the record as read before
    it does not carry it back."""
    read = placed.instance
    assert repos.instances.note(read, replace(read, lease=Lease.owned(5000.0)), expect=Expect(etag="i1"))

    after = replace(read, state=ProvisioningState.PROVISIONING, etag="i2", dgx_id="dgx-7")
    repos.instances.update(read, after, make_audit(sub), expect=Expect(etag="i1"))
    found = repos.instances.get(read.key)
    assert found == replace(after, lease=Lease.owned(5000.0))


def test_a_transition_that_changes_nothing_still_checks_its_expect(
    repos: Repositories, sub: str, placed: Placed
) -> None:
    events = len(audit_events(repos, sub))
    with pytest.raises(WorkloadChanged):
        repos.instances.update(placed.instance, placed.instance, make_audit(sub), expect=Expect(etag="stale"))
    repos.instances.update(placed.instance, placed.instance, make_audit(sub), expect=Expect(etag="i1"))
    assert len(audit_events(repos, sub)) == events + 1
    assert repos.instances.get(placed.instance.key) == placed.instance


# ---------------------------------------------------------------------------------------------- meters
def test_a_meter_started_twice_keeps_its_first_start_and_its_first_end_stands(
    repos: Repositories, sub: str, placed: Placed
) -> None:
    instance = placed.instance
    steps = [
        Effects(meter_start=make_meter(sub, "alloc-1", start=1000, gpus=2)),
        Effects(meter_start=make_meter(sub, "alloc-1", start=2000, gpus=4)),  # a retried step: idempotent
        Effects(meter_end=MeterEnd(sub, "alloc-1", end=3000, due=3600)),
        Effects(meter_end=MeterEnd(sub, "alloc-1", end=4000, due=4100)),  # the first end stands
    ]
    for n, effects in enumerate(steps):
        after = replace(instance, etag=f"i{n + 2}")
        repos.instances.update(instance, after, make_audit(sub), expect=Expect(etag=instance.etag), effects=effects)
        instance = after
        if n == 1:
            meter = repos.meters.get(MeterRef(sub, "alloc-1"))
            assert meter is not None
            assert (meter.start, meter.gpus, meter.metered_until, meter.end) == (1000, 2, 1000, None)
    meter = repos.meters.get(MeterRef(sub, "alloc-1"))
    assert meter is not None and (meter.start, meter.end, meter.active) == (1000, 3000, True)
    assert repos.meters.get(MeterRef(sub, "ALLOC-1")) is None  # allocation ids are exact
    assert repos.meters.due(4000, 10) == []
    assert repos.meters.due(4100, 10) == [MeterRef(sub.lower(), "alloc-1")]


def test_ending_a_meter_that_never_started_is_refused(repos: Repositories, sub: str, placed: Placed) -> None:
    before = snapshot(repos, placed)
    with pytest.raises(WorkloadChanged):
        repos.instances.update(
            placed.instance,
            replace(placed.instance, etag="i2", state=ProvisioningState.DELETING),
            make_audit(sub),
            expect=Expect(etag="i1"),
            effects=Effects(meter_end=MeterEnd(sub, "alloc-1", end=3000, due=3600)),
        )
    assert snapshot(repos, placed) == before


# ---------------------------------------------------------------------------------------------- remove
def test_remove_deletes_the_instance_with_its_effects(repos: Repositories, sub: str, placed: Placed) -> None:
    operation = make_operation("op-2", kind=OperationKind.DEPROVISION)
    deleting = replace(placed.instance, state=ProvisioningState.DELETING, etag="i2", delete_operation_id="op-2")
    repos.instances.update(
        placed.instance, deleting, make_audit(sub), expect=Expect(etag="i1"), effects=Effects(new_operation=operation)
    )
    before = snapshot(repos, placed)
    for expect in (Expect(etag="i1"), Expect(delete_operation_id="op-9"), Expect(state=(ProvisioningState.SUCCEEDED,))):
        with pytest.raises(WorkloadChanged):
            repos.instances.remove(
                deleting, make_audit(sub), expect=expect, effects=Effects(release=Release(placed.node.key, 2, 160, -1))
            )
    assert snapshot(repos, placed) == before

    audit = make_audit(sub)
    repos.instances.remove(
        deleting,
        audit,
        expect=Expect(etag="i2", delete_operation_id="op-2", state=(ProvisioningState.DELETING,)),
        effects=Effects(
            operation=operation.moved(OperationStatus.SUCCEEDED, NOW), release=Release(placed.node.key, 2, 160, -1)
        ),
    )
    assert repos.instances.get(placed.instance.key) is None
    assert counters(repos.nodes.get(placed.node.key)) == (0, 0, 0)
    done = repos.operations.get(sub, "op-2")
    assert done is not None and done.status == "Succeeded"
    assert audit.event_id in [e.event_id for e in audit_events(repos, sub)]
    with pytest.raises(WorkloadChanged):  # gone
        repos.instances.remove(deleting, make_audit(sub), expect=Expect())


# ---------------------------------------------------------------------------------------------- note
def test_note_writes_bookkeeping_without_an_audit_event(repos: Repositories, sub: str, placed: Placed) -> None:
    events = len(audit_events(repos, sub))
    leased = replace(placed.instance, lease=Lease.owned(5000.0))
    assert repos.instances.note(placed.instance, leased, expect=Expect(etag="i1", state=INSTANCE_IN_FLIGHT)) is True
    assert repos.instances.get(placed.instance.key) == leased

    assert (
        repos.instances.note(leased, replace(leased, lease=Lease.owned(9000.0)), expect=Expect(etag="stale")) is False
    )
    assert repos.instances.get(placed.instance.key) == leased
    assert len(audit_events(repos, sub)) == events

    repos.instances.remove(leased, make_audit(sub), expect=Expect(etag="i1"))
    assert repos.instances.note(leased, replace(leased, lease=None), expect=Expect()) is False
    assert repos.instances.get(placed.instance.key) is None


def test_a_note_with_nothing_to_change_still_says_whether_its_expectation_holds(repos: Repositories, sub: str) -> None:
    place_instance(repos, create_node(repos, make_node(sub)))
    same = repos.instances.get(ResourceKey(sub, "rg1", "sparkOllamaInstances", ("dgx-1", "llama")))
    assert same is not None
    assert repos.instances.note(same, same, expect=Expect(etag=same.etag)) is True
    assert repos.instances.note(same, same, expect=Expect(etag='"not-it"')) is False


def test_the_readiness_wait_and_a_callbacks_signal_are_bookkeeping_that_never_overwrite_each_other(
    repos: Repositories, sub: str, placed: Placed
) -> None:
    # Given the provisioning's wait recording its task token, and a DGX callback, working from the same read
    read = placed.instance
    events = len(audit_events(repos, sub))
    assert repos.instances.note(read, replace(read, task_token="token-1"), expect=Expect(etag="i1")) is True
    assert repos.instances.note(read, replace(read, ready_signal=True), expect=Expect(etag="i1")) is True
    # Then both are kept (each wrote only what it changed), with neither a new etag nor an audit event
    stored = repos.instances.get(read.key)
    assert stored is not None and (stored.task_token, stored.ready_signal, stored.etag) == ("token-1", True, "i1")
    assert len(audit_events(repos, sub)) == events
    # And the wait takes the signal only while its token is the one recorded
    assert repos.instances.note(stored, replace(stored, ready_signal=False), expect=Expect(task_token="other")) is False
    assert repos.instances.note(stored, replace(stored, ready_signal=False), expect=Expect(task_token="token-1"))
    taken = repos.instances.get(read.key)
    assert taken is not None and (taken.task_token, taken.ready_signal) == ("token-1", False)


def test_a_bookkeeping_write_is_marked_so_the_state_events_filter_skips_it(dynamodb_backend: Repositories, sub: str):
    """DynamoDB only (the stream is DynamoDB's): a lease renewal (``note``) marks the item ``bookkeeping``, which
    template.yaml's StateEventsFunction filter leaves out; the next state change removes the mark, so it passes
    (tests/unit/test_state_events.py applies the filter to these images)."""
    from itl_accelerator.repositories.dynamodb import keys

    repos = dynamodb_backend
    node = create_node(repos, make_node(sub))
    read = place_instance(repos, node, operation_id="op-1")
    table = repos.instances._t  # type: ignore[attr-defined]

    def stored() -> dict:
        item = table.get_item(keys.resource_pk(read.key), keys.resource_sk(read.key))
        assert item is not None
        return item

    assert "bookkeeping" not in stored()
    assert repos.instances.note(read, replace(read, lease=Lease.owned(5000.0)), expect=Expect(etag="i1"))
    assert stored()["bookkeeping"] is True
    after = replace(read, state=ProvisioningState.PROVISIONING, etag="i2", dgx_id="dgx-7")
    repos.instances.update(read, after, make_audit(sub), expect=Expect(etag="i1"))
    assert "bookkeeping" not in stored() and stored()["provisioningState"] == "Provisioning"
