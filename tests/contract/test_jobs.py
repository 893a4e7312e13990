"""JobRepository: submission with its operation and audit event, lists by submitter and by the owner of the node
a job runs on, the queue of jobs waiting for capacity, placement (a reservation, a drain), removal; and the lease
index (LeaseIndex) over instances and jobs alike."""

from __future__ import annotations

from dataclasses import replace

import pytest

from itl_accelerator.domain.records import (
    Hold,
    Job,
    Lease,
    Release,
    Reservation,
    ResourceKey,
    StartEstimate,
    gang_releases,
    holder_id,
)
from itl_accelerator.domain.states import JobStatus, LeaseKind, OperationKind, OperationStatus, ProvisioningState
from itl_accelerator.repositories.errors import (
    CapacityShortfall,
    InvalidSkipToken,
    NodeChanged,
    NodeMissing,
    SubscriptionNotWritable,
    WorkloadChanged,
)
from itl_accelerator.repositories.protocols import Effects, Expect, Repositories, Scope
from tests.contract.builders import (
    DEFAULT_QUOTA,
    TERMS,
    all_pages,
    audit_events,
    counters,
    create_node,
    make_audit,
    make_job,
    make_node,
    make_operation,
    names_of,
    place_instance,
    suspend,
)


def submit(repos: Repositories, job: Job) -> Job:
    operation = make_operation(job.operation_id or "", kind=OperationKind.JOB, owner=job.submitted_by)
    repos.jobs.submit(job, operation, make_audit(job.key.subscription_id, job.arm_id))
    return job


def keyset(keys: list[ResourceKey]) -> set[tuple[str, ...]]:
    """Keys as compared (ARM names match case-insensitively)."""
    return {
        (k.subscription_id.lower(), k.resource_group.lower(), k.type_segment, *(n.lower() for n in k.names))
        for k in keys
    }


# ---------------------------------------------------------------------------------------------- submit
def test_submit_writes_the_job_its_operation_and_audit(repos: Repositories, sub: str) -> None:
    job = make_job(
        sub,
        "Train",
        secret_env={"TOKEN": "s3cret"},
        gpu_model="h100",
        location="eastus",
        queued=True,
        task_token="token-1",
        lease=Lease.owned(5000.0),
        track_checks=2,
    )
    audit = make_audit(sub, job.arm_id)
    repos.jobs.submit(job, make_operation("op-Train", kind=OperationKind.JOB, owner="alice"), audit)

    assert repos.jobs.get(job.key) == job
    assert repos.jobs.get(replace(job.key, names=("TRAIN",))) is not None
    operation = repos.operations.get(sub, "OP-TRAIN")
    assert operation is not None and (operation.kind, operation.owner) == ("job", "alice")
    assert [e.event_id for e in audit_events(repos, sub)] == [audit.event_id]


def test_a_job_placed_reads_back_as_placed(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    job = make_job(
        sub,
        status=JobStatus.RUNNING,
        queued=True,  # a job with a node owner is never waiting
        node=node.key,
        node_owner="supplier-1",
        capacity_reserved=True,
        billing_terms=TERMS,
        dgx_id="dgx-7",
        started_at="2024-05-01T00:05:00Z",
        drain_node=node.key,
        gpu_seconds=7200,
        billable_gpu_seconds=7200,
        cost="5.000000",
    )
    submit(repos, job)
    found = repos.jobs.get(job.key)
    assert found == replace(job, queued=False)
    assert repos.jobs.waiting(sub, 10) == []


def test_submit_of_a_name_taken_is_a_workload_changed(repos: Repositories, sub: str) -> None:
    first = submit(repos, make_job(sub, "train"))
    with pytest.raises(WorkloadChanged):
        submit(repos, make_job(sub, "TRAIN", etag="j2", submitted_by="bob"))
    assert repos.jobs.get(first.key) == first
    assert len(audit_events(repos, sub)) == 1


def test_submit_in_a_subscription_not_registered_is_refused(repos: Repositories, sub: str) -> None:
    suspend(repos, sub, "Warned")
    job = make_job(sub)
    with pytest.raises(SubscriptionNotWritable) as refused:
        submit(repos, job)
    assert refused.value.state == "Warned"
    assert repos.jobs.get(job.key) is None
    assert repos.operations.get(sub, "op-train") is None


def test_updates_and_removes_are_not_held_back_by_the_subscription_state(repos: Repositories, sub: str) -> None:
    job = submit(repos, make_job(sub))
    suspend(repos, sub)
    canceled = replace(job, status=JobStatus.CANCELED, state=ProvisioningState.CANCELED, etag="j2")
    repos.jobs.update(job, canceled, make_audit(sub), expect=Expect(etag="j1"))
    assert repos.jobs.get(job.key) == canceled
    repos.jobs.remove(canceled, make_audit(sub), expect=Expect(status=(JobStatus.CANCELED,)))
    assert repos.jobs.get(job.key) is None


# ---------------------------------------------------------------------------------------------- lists
def _jobs(repos: Repositories, sub: str) -> None:
    submit(repos, make_job(sub, "a1", "rg1", submitted_by="alice"))
    submit(repos, make_job(sub, "A2", "rg2", submitted_by="alice"))
    submit(repos, make_job(sub, "b1", "rg1", submitted_by="bob", node_owner="supplier-1"))
    submit(repos, make_job(sub, "a3", "RG1", submitted_by="alice", node_owner="supplier-1"))
    submit(repos, make_job(sub, "b2", "rg2", submitted_by="bob", node_owner="supplier-2"))
    submit(repos, make_job(f"{sub}-other", "a0", "rg1", submitted_by="alice", node_owner="supplier-1"))


def test_jobs_by_submitter_and_by_node_owner_in_full_pages(repos: Repositories, sub: str) -> None:
    _jobs(repos, sub)

    def listed(scope: Scope, limit: int, **by: str) -> list[str]:
        found, _ = all_pages(lambda limit, token: repos.jobs.page(scope, limit, token, **by), limit)
        return names_of(found)

    for limit in (1, 2, 10):
        assert listed(Scope(sub), limit) == ["a1", "a3", "b1", "A2", "b2"]
        assert listed(Scope(sub), limit, submitted_by="alice") == ["a1", "a3", "A2"]
        assert listed(Scope(sub), limit, node_owner="supplier-1") == ["a3", "b1"]
    assert listed(Scope(sub, "RG2"), 1, submitted_by="alice") == ["A2"]
    assert listed(Scope(sub, visible_groups=("rg2",)), 1, submitted_by="bob") == ["b2"]
    assert listed(Scope(sub, visible_groups=("RG1", "rg2")), 1, node_owner="supplier-2") == ["b2"]
    assert listed(Scope(sub), 10, submitted_by="Alice") == []  # a user id is exact
    assert listed(Scope(sub), 10, node_owner="nobody") == []


def test_a_job_list_token_is_refused_by_the_plain_list(repos: Repositories, sub: str) -> None:
    _jobs(repos, sub)
    token = repos.jobs.page(Scope(sub), 1, None, submitted_by="alice").token
    assert token is not None
    with pytest.raises(InvalidSkipToken):
        repos.jobs.page(Scope(sub), 10, token)


def test_a_job_list_token_is_refused_by_the_other_lists(repos: Repositories, sub: str) -> None:
    _jobs(repos, sub)
    by_alice = repos.jobs.page(Scope(sub), 1, None, submitted_by="alice").token
    by_owner = repos.jobs.page(Scope(sub), 1, None, node_owner="supplier-1").token
    plain = repos.jobs.page(Scope(sub), 1, None).token
    assert by_alice and by_owner and plain
    with pytest.raises(InvalidSkipToken):
        repos.jobs.page(Scope(sub), 10, by_alice, submitted_by="bob")
    with pytest.raises(InvalidSkipToken):
        repos.jobs.page(Scope(sub), 10, by_alice, node_owner="supplier-1")
    with pytest.raises(InvalidSkipToken):
        repos.jobs.page(Scope(sub), 10, by_owner, submitted_by="alice")
    with pytest.raises(InvalidSkipToken):
        repos.jobs.page(Scope(sub), 10, plain, submitted_by="alice")
    with pytest.raises(InvalidSkipToken):
        repos.jobs.page(Scope(f"{sub}-other"), 10, by_alice, submitted_by="alice")


# ---------------------------------------------------------------------------------------------- the queue
def test_waiting_jobs_in_priority_then_submission_order(repos: Repositories, sub: str) -> None:
    submit(repos, make_job(sub, "c", priority=5, submitted_at="2024-05-01T00:00:01Z", queued=True))
    submit(repos, make_job(sub, "b", "rg2", priority=9, submitted_at="2024-05-01T00:00:03Z", queued=True))
    submit(repos, make_job(sub, "a", priority=9, submitted_at="2024-05-01T00:00:02Z", queued=True))
    submit(repos, make_job(sub, "d", priority=5, submitted_at="2024-05-01T00:00:00Z", queued=True))
    submit(repos, make_job(sub, "z", priority=0, submitted_at="2024-04-01T00:00:00Z", queued=True))
    submit(repos, make_job(sub, "placed", priority=9, queued=True, node_owner="supplier-1"))
    submit(repos, make_job(sub, "admitted", priority=9))
    submit(repos, make_job(f"{sub}-other", "x", priority=9, queued=True))

    waiting = repos.jobs.waiting(sub, 10)
    assert [k.name for k in waiting] == ["a", "b", "d", "c", "z"]
    assert waiting[1].resource_group == "rg2" and waiting[1].type_segment == "sparkJobs"
    assert [k.name for k in repos.jobs.waiting(sub.upper(), 2)] == ["a", "b"]

    a = repos.jobs.get(waiting[0])
    assert a is not None
    repos.jobs.note(a, replace(a, queued=False, task_token="t"), expect=Expect(etag="j1"))
    assert [k.name for k in repos.jobs.waiting(sub, 10)] == ["b", "d", "c", "z"]


def test_preemption_candidates_lowest_priority_then_newest_only_while_they_hold_capacity(
    repos: Repositories, sub: str
) -> None:
    def running(name: str, priority: int, at: str, *, preemptible: bool = True, kind: str = "GPU", **fields) -> Job:
        job = make_job(sub, name, priority=priority, submitted_at=at, status=JobStatus.RUNNING, kind=kind, **fields)
        job = replace(job, capacity_reserved=True, node_owner="supplier-1")
        if preemptible:
            job.document["properties"]["preemptible"] = True
            job = replace(job, run=replace(job.run, preemptible=True))  # as the job's record says it
        return submit(repos, job)

    running("old-low", 1, "2024-05-01T00:00:00.000000Z")
    running("new-low", 1, "2024-05-01T00:00:09.000000Z")
    running("mid", 4, "2024-05-01T00:00:05.000000Z")
    running("high", 8, "2024-05-01T00:00:05.000000Z")
    running("agreed-not", 0, "2024-05-01T00:00:05.000000Z", preemptible=False)
    running("tpu", 0, "2024-05-01T00:00:05.000000Z", kind="TPU")
    stopping = running("stopping", 0, "2024-05-01T00:00:05.000000Z", cancel_requested=True)
    assert stopping.cancel_requested
    # Then a priority-5 job may preempt the priority 1 and 4 ones, lowest first, the newest of a priority first
    assert [j.key.name for j in repos.jobs.preemptible(sub, "GPU", 5, 10)] == ["new-low", "old-low", "mid"]
    assert [j.key.name for j in repos.jobs.preemptible(sub.upper(), "gpu", 5, 1)] == ["new-low"]
    # each as stored (the index holds the whole item)
    assert repos.jobs.preemptible(sub, "GPU", 5, 1)[0] == repos.jobs.get(
        ResourceKey(sub, "rg1", "sparkJobs", ("new-low",))
    )
    assert [j.key.name for j in repos.jobs.preemptible(sub, "TPU", 5, 10)] == ["tpu"]
    assert repos.jobs.preemptible(f"{sub}-other", "GPU", 9, 10) == []
    # And one that lets its capacity go is no candidate any more
    mid = repos.jobs.get(ResourceKey(sub, "rg1", "sparkJobs", ("mid",)))
    assert mid is not None
    repos.jobs.note(mid, replace(mid, capacity_reserved=False), expect=Expect(etag="j1"))
    assert [j.key.name for j in repos.jobs.preemptible(sub, "GPU", 9, 10)] == ["new-low", "old-low", "high"]


# ---------------------------------------------------------------------------------------------- placement
def test_placing_a_job_reserves_capacity_and_lists_it_under_the_node_owner(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    job = submit(repos, make_job(sub, queued=True, devices=4, memory_gb=320))
    placed = replace(
        job,
        status=JobStatus.SCHEDULED,
        etag="j2",
        queued=False,
        node=node.key,
        node_owner=node.owner,
        capacity_reserved=True,
        billing_terms=node.terms,
    )
    repos.jobs.update(
        job,
        placed,
        make_audit(sub),
        expect=Expect(etag="j1", status=(JobStatus.PENDING,), capacity_reserved=False),
        effects=Effects(reservation=Reservation.on(node, 4, 320, for_job=job.key)),
    )
    placed = replace(placed, quota=DEFAULT_QUOTA)  # the reservation records the quotas it counts in
    assert repos.jobs.get(job.key) == placed
    assert counters(repos.nodes.get(node.key)) == (4, 320, 0)
    assert repos.jobs.waiting(sub, 10) == []
    assert names_of(repos.jobs.page(Scope(sub), 10, None, node_owner="supplier-1").items) == ["train"]

    ended = replace(
        placed, status=JobStatus.SUCCEEDED, state=ProvisioningState.SUCCEEDED, etag="j3", capacity_reserved=False
    )
    repos.jobs.update(
        placed,
        ended,
        make_audit(sub),
        expect=Expect(etag="j2", capacity_reserved=True),
        effects=Effects(release=Release(node.key, 4, 320)),
    )
    assert counters(repos.nodes.get(node.key)) == (0, 0, 0)


def test_a_gang_is_reserved_on_all_its_nodes_or_none_its_quota_counted_once(repos: Repositories, sub: str) -> None:
    one = create_node(repos, make_node(sub, "n1"))
    two = create_node(repos, make_node(sub, "n2"))
    job = submit(repos, make_job(sub, queued=True, devices=8, memory_gb=640))
    placed = replace(job, status=JobStatus.SCHEDULED, etag="j2", queued=False, node=one.key, gang_nodes=(two.key,),
                     capacity_reserved=True)  # fmt: skip
    first = replace(Reservation.on(one, 8, 640, for_job=job.key), quota_devices=16)
    # a second part that does not fit (its node is at another etag: read before a change): nothing is written
    stale = replace(Reservation.on(two, 8, 640, for_job=job.key), quota=None, etag="other")
    with pytest.raises(NodeChanged):
        repos.jobs.update(job, placed, make_audit(sub), expect=Expect(etag="j1"),
                          effects=Effects(reservation=first, more_reservations=(stale,)))  # fmt: skip
    assert counters(repos.nodes.get(one.key)) == counters(repos.nodes.get(two.key)) == (0, 0, 0)
    assert repos.jobs.get(job.key) == job
    # both parts at once: both nodes full, the job reads back with its other node, the quota counted 16 once
    second = replace(Reservation.on(two, 8, 640, for_job=job.key), quota=None)
    repos.jobs.update(job, placed, make_audit(sub), expect=Expect(etag="j1"),
                      effects=Effects(reservation=first, more_reservations=(second,)))  # fmt: skip
    assert counters(repos.nodes.get(one.key)) == counters(repos.nodes.get(two.key)) == (8, 640, 0)
    stored = repos.jobs.get(job.key)
    assert stored is not None and stored.gang_nodes == (two.key,)
    assert {q.name: q.current for q in repos.quotas.in_location(sub, "eastus")}.get("gpus") == 16
    # and given back together: the quota too
    ended = replace(stored, status=JobStatus.SUCCEEDED, etag="j3", capacity_reserved=False)
    back = Release(one.key, 8, 640, quota=DEFAULT_QUOTA, quota_devices=16)
    repos.jobs.update(stored, ended, make_audit(sub), expect=Expect(etag="j2"),
                      effects=Effects(release=back, more_releases=(Release(two.key, 8, 640),)))  # fmt: skip
    assert counters(repos.nodes.get(one.key)) == counters(repos.nodes.get(two.key)) == (0, 0, 0)
    assert {q.name: q.current for q in repos.quotas.in_location(sub, "eastus")}.get("gpus") == 0


def test_a_placement_that_falls_short_writes_nothing(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    place_instance(repos, node, devices=6, memory_gb=160)
    job = submit(repos, make_job(sub, queued=True, devices=4, memory_gb=80))
    events = len(audit_events(repos, sub))
    placed = replace(job, status=JobStatus.SCHEDULED, etag="j2", queued=False, node=node.key, node_owner="supplier-1")
    with pytest.raises(CapacityShortfall) as short:
        repos.jobs.update(
            job,
            placed,
            make_audit(sub),
            expect=Expect(etag="j1"),
            effects=Effects(reservation=Reservation.on(node, 4, 80, for_job=job.key)),
        )
    assert (short.value.free_devices, short.value.free_memory_gb) == (2, 480)
    with pytest.raises(NodeMissing):
        repos.jobs.update(
            job,
            placed,
            make_audit(sub),
            expect=Expect(etag="j1"),
            effects=Effects(reservation=Reservation.on(make_node(sub, "ghost"), 1, 80, for_job=job.key)),
        )
    assert repos.jobs.get(job.key) == job
    assert counters(repos.nodes.get(node.key)) == (6, 160, 1)
    assert len(audit_events(repos, sub)) == events
    assert [k.name for k in repos.jobs.waiting(sub, 10)] == ["train"]


def test_a_node_drained_for_a_job_takes_only_that_job(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    big = submit(repos, make_job(sub, "big", devices=8, memory_gb=640, queued=True))
    small = submit(repos, make_job(sub, "small", devices=1, memory_gb=80, queued=True))
    repos.nodes.set_draining(node.key, big.key)

    with pytest.raises(CapacityShortfall) as short:  # the drain refuses another job as a shortfall
        repos.jobs.update(
            small,
            replace(small, etag="j2", queued=False, node=node.key, node_owner="supplier-1"),
            make_audit(sub),
            expect=Expect(etag="j1"),
            effects=Effects(reservation=Reservation.on(node, 1, 80, for_job=small.key)),
        )
    assert (short.value.free_devices, short.value.free_memory_gb) == (8, 640)

    repos.jobs.update(
        big,
        replace(big, etag="j2", queued=False, node=node.key, node_owner="supplier-1", drain_node=None),
        make_audit(sub),
        expect=Expect(etag="j1"),
        effects=Effects(reservation=Reservation.on(node, 8, 640, for_job=replace(big.key, names=("BIG",)))),
    )
    assert counters(repos.nodes.get(node.key)) == (8, 640, 0)


def test_an_instance_is_not_held_back_by_a_drain(repos: Repositories, sub: str) -> None:
    """A drain keeps other *jobs* off the node (placement.py: "no other job is placed there"): a reservation
    without ``for_job`` — an instance's — is not checked against it, as the DynamoDB implementation has it."""
    node = create_node(repos, make_node(sub))
    repos.nodes.set_draining(node.key, ResourceKey(sub, "rg1", "sparkJobs", ("big",)))
    place_instance(repos, node, devices=1, memory_gb=80)
    assert counters(repos.nodes.get(node.key)) == (1, 80, 1)


def test_remove_a_job_when_its_expect_holds(repos: Repositories, sub: str) -> None:
    job = submit(repos, make_job(sub))
    with pytest.raises(WorkloadChanged):
        repos.jobs.remove(job, make_audit(sub), expect=Expect(status=(JobStatus.SUCCEEDED, JobStatus.FAILED)))
    with pytest.raises(WorkloadChanged):
        repos.jobs.remove(job, make_audit(sub), expect=Expect(delete_operation_id="op-x"))  # no such field on a job
    assert repos.jobs.get(job.key) == job
    repos.jobs.remove(job, make_audit(sub), expect=Expect(etag="j1", status=(JobStatus.PENDING,)))
    assert repos.jobs.get(job.key) is None
    assert len(audit_events(repos, sub)) == 2


def test_a_job_update_moves_its_operation_and_a_cancel(repos: Repositories, sub: str) -> None:
    job = submit(repos, make_job(sub))
    operation = repos.operations.get(sub, "op-train")
    assert operation is not None
    cancel = make_operation("op-cancel", kind=OperationKind.CANCEL, owner="bob")
    canceling = replace(job, etag="j2", cancel_requested=True, canceled_by="bob", cancel_operation_id="op-cancel")
    repos.jobs.update(
        job, canceling, make_audit(sub), expect=Expect(cancel_requested=False), effects=Effects(new_operation=cancel)
    )
    canceled = replace(canceling, etag="j3", status=JobStatus.CANCELED, state=ProvisioningState.CANCELED)
    now = "2024-05-01T01:00:00Z"
    repos.jobs.update(
        canceling,
        canceled,
        make_audit(sub),
        expect=Expect(cancel_requested=True, status=(JobStatus.PENDING,)),
        effects=Effects(
            operation=operation.moved(OperationStatus.CANCELED, now),
            more_operations=(cancel.moved(OperationStatus.SUCCEEDED, now),),
        ),
    )
    assert repos.jobs.get(job.key) == canceled
    ops = [repos.operations.get(sub, i) for i in ("op-train", "op-cancel")]
    assert [o.status if o else None for o in ops] == ["Canceled", "Succeeded"]
    assert ops[1] is not None and ops[1].owner == "bob"


# ---------------------------------------------------------------------------------------------- lease index
def test_expired_leases_by_kind(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    held = place_instance(repos, node, "held", devices=1, memory_gb=80, lease=Lease.owned(100.0))
    place_instance(repos, node, "free", devices=1, memory_gb=80)
    place_instance(repos, node, "later", devices=1, memory_gb=80, lease=Lease.owned(10_000.0))
    owned = submit(repos, make_job(sub, "owned", "RG2", lease=Lease.owned(200.0)))
    submit(repos, make_job(sub, "tracked", lease=Lease.tracked(150.0)))
    submit(repos, make_job(f"{sub}-other", "elsewhere", lease=Lease.owned(50.0)))

    elsewhere = ResourceKey(f"{sub}-other", "rg1", "sparkJobs", ("elsewhere",))
    tracked = ResourceKey(sub, "rg1", "sparkJobs", ("tracked",))
    assert keyset(expired(repos, 201, 10)) == keyset([held.key, owned.key, elsewhere])
    assert keyset(expired(repos, 200, 10)) == keyset([held.key, elsewhere])  # strictly before now
    assert keyset(expired(repos, 151, 10, LeaseKind.TRACK)) == keyset([tracked])
    assert expired(repos, 150, 10, LeaseKind.TRACK) == []
    assert len(repos.leases.expired(1_000_000, 2).items) <= 2

    found = [k for k in expired(repos, 201, 10) if k.name == "owned"]
    assert [(k.resource_group, k.type_segment) for k in found] == [("RG2", "sparkJobs")]

    # a lease given up leaves the index; one renewed moves in it
    assert repos.jobs.note(owned, replace(owned, lease=None), expect=Expect(etag="j1"))
    assert repos.instances.note(held, replace(held, lease=Lease.owned(20_000.0)), expect=Expect(etag="i1"))
    assert keyset(expired(repos, 201, 10)) == keyset([elsewhere])


def expired(repos: Repositories, now: float, page: int, kind: LeaseKind = LeaseKind.LEASE) -> list[ResourceKey]:
    """Every key the lease index gives, page after page."""
    found: list[ResourceKey] = []
    token: str | None = None
    while True:
        got = repos.leases.expired(now, page, kind, token)
        found += got.items
        token = got.token
        if token is None:
            return found


def names_in_shard(sub: str, shard: int, count: int) -> list[str]:
    """``count`` job names whose lease-index partition is ``shard``."""
    from itl_accelerator.repositories.dynamodb import keys as table_keys

    found = []
    for n in range(10_000):
        key = ResourceKey(sub, "rg1", "sparkJobs", (f"j{n}",))
        if table_keys.lease_shard(table_keys.resource_pk(key), table_keys.resource_sk(key)) == shard:
            found.append(f"j{n}")
            if len(found) == count:
                return found
    raise AssertionError("no such names")


def test_a_lease_in_the_last_partition_is_reached_while_the_first_has_more_than_a_page_due(
    repos: Repositories, sub: str
) -> None:
    """Issue 27: the index was read partition by partition, so 25 leases due in partition 0 kept a page of 10 from
    ever reaching partition 3. Each page now takes a share of every partition; the twins agree on the order."""
    crowded = names_in_shard(sub, 0, 25)
    (last,) = names_in_shard(sub, 3, 1)
    for n, name in enumerate(crowded):
        submit(repos, make_job(sub, name, lease=Lease.owned(100.0 + n)))
    submit(repos, make_job(sub, last, lease=Lease.owned(500.0)))  # the latest of all: sorted last overall
    first = repos.leases.expired(1_000, 10)
    assert last in [k.name for k in first.items] and len(first.items) <= 10 and first.token is not None
    # partition 0's own share is its most overdue, in order
    assert [k.name for k in first.items if k.name != last] == crowded[: len(first.items) - 1]
    # and page after page gives every due lease exactly once
    every = expired(repos, 1_000, 10)
    assert sorted(k.name for k in every) == sorted([*crowded, last]) and len(every) == 26


# ------------------------------------------------------------------------------------------------ the node's calendar
def test_a_reservation_writes_its_hold_on_the_node_and_its_release_removes_it(repos: Repositories, sub: str) -> None:
    """domain/calendar.py reads each workload's hold (devices, GiB, until): written with the reservation, kept by a
    change of the node, removed with the release — on every node of a gang."""
    one = create_node(repos, make_node(sub, "n1"))
    two = create_node(repos, make_node(sub, "n2"))
    job = submit(repos, make_job(sub, queued=True, devices=4, memory_gb=320))
    placed = replace(job, status=JobStatus.SCHEDULED, etag="j2", queued=False, node=one.key, gang_nodes=(two.key,),
                     capacity_reserved=True)  # fmt: skip
    first = Reservation.on(one, 4, 320, for_job=job.key, until=1_800_000_000)
    second = replace(Reservation.on(two, 4, 320, for_job=job.key, until=1_800_000_000), quota=None)
    repos.jobs.update(job, placed, make_audit(sub), expect=Expect(etag="j1"),
                      effects=Effects(reservation=first, more_reservations=(second,)))  # fmt: skip
    hold = Hold(holder_id(job.key), 4, 320, 1_800_000_000)
    stored_one, stored_two = repos.nodes.get(one.key), repos.nodes.get(two.key)
    assert stored_one is not None and stored_one.holds == (hold,) and stored_one.unaccounted is None
    assert stored_two is not None and stored_two.holds == (hold,)
    # an admin's change of the node keeps its calendar
    relabelled = replace(stored_one, document={**stored_one.document, "tags": {"team": "a"}}, etag="n2")
    repos.nodes.replace(stored_one, relabelled, make_audit(sub))
    assert (repos.nodes.get(one.key) or stored_one).holds == (hold,)
    ended = replace(repos.jobs.get(job.key) or placed, status=JobStatus.SUCCEEDED, etag="j3", capacity_reserved=False)
    repos.jobs.update(repos.jobs.get(job.key) or placed, ended, make_audit(sub), expect=Expect(etag="j2"),
                      effects=Effects(release=Release.of(placed), more_releases=gang_releases(placed)))  # fmt: skip
    assert (repos.nodes.get(one.key) or stored_one).holds == () == (repos.nodes.get(two.key) or stored_two).holds


def test_work_placed_before_holds_were_written_reads_as_unaccounted(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub))
    job = submit(repos, make_job(sub, queued=True, devices=2, memory_gb=160))
    placed = replace(job, status=JobStatus.SCHEDULED, etag="j2", queued=False, node=node.key, capacity_reserved=True)
    legacy = replace(Reservation.on(node, 2, 160, for_job=job.key), hold=None)  # as placement wrote it before
    repos.jobs.update(job, placed, make_audit(sub), expect=Expect(etag="j1"), effects=Effects(reservation=legacy))
    stored = repos.nodes.get(node.key)
    assert stored is not None and stored.holds == () and stored.unaccounted == Hold("", 2, 160)


def test_a_waiting_jobs_start_estimate_is_kept_apart_from_its_document_and_dropped_once_placed(
    repos: Repositories, sub: str
) -> None:
    node = create_node(repos, make_node(sub))
    job = submit(repos, make_job(sub, queued=True, devices=2, memory_gb=160))
    estimate = StartEstimate(1_800_000_000, 2, 1_799_990_000)
    assert repos.jobs.note(job, replace(job, start_estimate=estimate), expect=Expect(status=(JobStatus.PENDING,)))
    stored = repos.jobs.get(job.key)
    assert stored is not None and stored.start_estimate == estimate
    assert stored.etag == job.etag and stored.document == job.document  # not part of what the caller sees changed
    unknown = StartEstimate(None, 1, 1_799_990_100, "why")
    assert repos.jobs.note(stored, replace(stored, start_estimate=unknown), expect=Expect(status=(JobStatus.PENDING,)))
    assert (repos.jobs.get(job.key) or stored).start_estimate == unknown
    placed = replace(stored, start_estimate=unknown, status=JobStatus.SCHEDULED, etag="j2", queued=False,
                     node=node.key, capacity_reserved=True)  # fmt: skip
    repos.jobs.update(replace(stored, start_estimate=unknown), placed, make_audit(sub), expect=Expect(etag="j1"),
                      effects=Effects(reservation=Reservation.on(node, 2, 160, for_job=job.key)))  # fmt: skip
    assert (repos.jobs.get(job.key) or placed).start_estimate is None
