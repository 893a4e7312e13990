"""OperationRepository (read, finished alone unless ended), AuditRepository (append-only, listed by time and by
resource) and SubscriptionRepository (registration records)."""

from __future__ import annotations

import pytest

from itl_accelerator.domain.states import OperationKind, OperationStatus
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.errors import InvalidSkipToken, ItemExists
from itl_accelerator.repositories.protocols import Page, Repositories
from tests.contract.builders import (
    all_pages,
    audit_events,
    create_node,
    make_audit,
    make_job,
    make_node,
    make_operation,
    place_instance,
)

NOW = "2024-05-01T00:10:00.000000Z"


# ---------------------------------------------------------------------------------------------- operations
def test_an_operation_is_read_in_any_casing_and_finished_once(repos: Repositories, sub: str) -> None:
    node = create_node(repos, make_node(sub, rg="RG1"))
    place_instance(repos, node, operation_id="Op-ABC")

    found = repos.operations.get(sub.upper(), "op-abc")
    assert found is not None
    assert (found.operation_id, found.kind, found.resource_group, found.status) == (
        "Op-ABC",
        OperationKind.PROVISION,
        "rg1",
        OperationStatus.ACCEPTED,
    )
    assert repos.operations.get(sub, "op-other") is None
    assert repos.operations.get(f"{sub}-other", "Op-ABC") is None

    assert repos.operations.finish(sub, found.moved(OperationStatus.RUNNING, NOW)) is True
    assert repos.operations.finish(sub, found.moved(OperationStatus.SUCCEEDED, NOW)) is True
    error = {"code": "Late", "message": "too late"}
    assert repos.operations.finish(sub, found.moved(OperationStatus.FAILED, NOW, error)) is False
    done = repos.operations.get(sub, "Op-ABC")
    assert done is not None
    assert (done.status, done.body["endTime"], done.body["percentComplete"]) == ("Succeeded", NOW, 100.0)
    assert "error" not in done.body
    assert repos.operations.finish(sub, make_operation("op-never")) is False
    assert repos.operations.get(sub, "op-never") is None


def test_a_job_operation_keeps_its_owner(repos: Repositories, sub: str) -> None:
    job = make_job(sub)
    operation = make_operation("op-train", kind=OperationKind.JOB, owner="alice")
    repos.jobs.submit(job, operation, make_audit(sub))
    assert repos.operations.finish(sub, operation.moved(OperationStatus.RUNNING, NOW))
    found = repos.operations.get(sub, "op-train")
    assert found is not None and (found.owner, found.kind, found.status) == ("alice", "job", "Running")


# ---------------------------------------------------------------------------------------------- audit
T = [f"2024-05-01T00:00:0{n}.000000Z" for n in range(6)]


def _trail(repos: Repositories, sub: str) -> list[str]:
    """Events at T[1]..T[4] (resources A, B, A, a — resource ids match case-insensitively), one in another
    subscription; their ids in time order."""
    ids = []
    for timestamp, resource in ((T[3], "/r/A"), (T[1], "/r/A"), (T[2], "/r/B"), (T[4], "/r/a")):
        event = make_audit(sub, resource, timestamp=timestamp)
        repos.audit.append(event)
        ids.append((timestamp, event.event_id))
    repos.audit.append(make_audit(f"{sub}-other", "/r/A", timestamp=T[2]))
    return [event_id for _, event_id in sorted(ids)]


def test_audit_events_by_time_range_oldest_first(repos: Repositories, sub: str) -> None:
    ids = _trail(repos, sub)

    def listed(start: str, end: str, resource: str | None = None, limit: int = 10) -> list[str]:
        found, _ = all_pages(lambda limit, token: repos.audit.page(sub, start, end, resource, limit, token), limit)
        return [e.event_id for e in found]

    assert listed(T[0], T[5]) == ids
    assert listed(T[2], T[3]) == ids[1:3]  # both ends included
    assert listed(T[2], "2024-05-01T00:00:03") == ids[1:3]  # an end is a prefix of the timestamps it includes
    assert listed(T[5], "2024-12-31") == []
    for limit in (1, 2, 3):
        assert listed(T[0], T[5], limit=limit) == ids
        assert listed(T[0], T[5], "/R/a", limit=limit) == [ids[0], ids[2], ids[3]]
    assert listed(T[0], T[5], "/r/b") == [ids[1]]
    event = repos.audit.page(sub.upper(), T[0], T[5], None, 1, None).items[0]
    assert (event.event_id, event.timestamp, event.new_state) == (
        ids[0],
        T[1],
        {"name": "x", "properties": {"gpuCount": 2}},
    )


def test_audit_events_newest_first_and_by_actor_in_full_pages(repos: Repositories, sub: str) -> None:
    # bob's events are rare among alice's: a page of bob's is full however many of alice's lie between
    made = []
    for n in range(12):
        actor = "bob" if n in (1, 7, 10) else "alice"
        event = make_audit(sub, "/r/A" if n % 2 else "/r/B", timestamp=f"2024-05-01T00:00:{n:02d}.000000Z", actor=actor)
        repos.audit.append(event)
        made.append((event.event_id, actor, event.resource_id))
    repos.audit.append(make_audit(f"{sub}-other", "/r/A", timestamp=T[2], actor="bob"))
    ids = [i for i, _, _ in made]

    def listed(limit: int, actor: str | None = None, resource: str | None = None, newest: bool = False) -> list[str]:
        def fetch(limit: int, token: str | None) -> Page[AuditEvent]:
            return repos.audit.page(sub, None, None, resource, limit, token, actor_id=actor, newest_first=newest)

        return [e.event_id for e in all_pages(fetch, limit)[0]]

    bobs = [i for i, actor, _ in made if actor == "bob"]
    for limit in (1, 2, 5):
        assert listed(limit, newest=True) == ids[::-1]
        assert listed(limit, "bob") == bobs
        assert listed(limit, "bob", newest=True) == bobs[::-1]
        assert listed(limit, "bob", "/r/a") == [i for i, a, r in made if a == "bob" and r == "/r/A"]
    first = repos.audit.page(sub, None, None, None, 2, None, actor_id="bob")
    assert len(first.items) == 2 and first.token  # full, and says more follow
    assert listed(10, "nobody") == []
    assert [e.event_id for e in repos.audit.page(sub, None, None, None, 1, None, newest_first=True).items] == [ids[-1]]
    with pytest.raises(InvalidSkipToken):  # a token of bob's list is not one of the whole trail's
        repos.audit.page(sub, None, None, None, 10, first.token)


def test_an_audit_token_is_refused_by_another_list(repos: Repositories, sub: str) -> None:
    _trail(repos, sub)
    everything = repos.audit.page(sub, T[0], T[5], None, 1, None).token
    of_a = repos.audit.page(sub, T[0], T[5], "/r/A", 1, None).token
    assert everything and of_a
    with pytest.raises(InvalidSkipToken):
        repos.audit.page(f"{sub}-other", T[0], T[5], None, 10, everything)
    with pytest.raises(InvalidSkipToken):
        repos.audit.page(sub, T[0], T[5], "/r/A", 10, everything)
    with pytest.raises(InvalidSkipToken):
        repos.audit.page(sub, T[0], T[5], "/r/B", 10, of_a)
    with pytest.raises(InvalidSkipToken):
        repos.audit.page(sub, T[0], T[5], None, 10, "garbage!")


def test_a_resource_audit_token_is_refused_by_the_subscription_list(repos: Repositories, sub: str) -> None:
    _trail(repos, sub)
    of_a = repos.audit.page(sub, T[0], T[5], "/r/A", 1, None).token
    assert of_a
    with pytest.raises(InvalidSkipToken):
        repos.audit.page(sub, T[0], T[5], None, 10, of_a)


def test_an_audit_event_is_appended_once(repos: Repositories, sub: str) -> None:
    event = make_audit(sub, "/r/A")
    repos.audit.append(event)
    with pytest.raises(ItemExists):
        repos.audit.append(event)
    assert [e.event_id for e in audit_events(repos, sub)] == [event.event_id]


# ---------------------------------------------------------------------------------------------- subscriptions
def test_a_registration_record_is_set_with_its_audit_event(repos: Repositories, sub: str) -> None:
    assert repos.subscriptions.get(sub) is None
    record = {"state": "Registered", "registrationDate": "2024-01-01T00:00:00Z", "properties": {"tenantId": "t"}}
    audit = make_audit(sub, f"/subscriptions/{sub}")
    repos.subscriptions.put(sub.upper(), record, audit)
    assert repos.subscriptions.get(sub) == record
    assert [e.event_id for e in audit_events(repos, sub)] == [audit.event_id]

    record["state"] = "Suspended"  # the caller's dict, after the write
    assert repos.subscriptions.get(sub) == {**record, "state": "Registered"}
    found = repos.subscriptions.get(sub)
    assert found is not None
    found["state"] = "Deleted"
    assert (repos.subscriptions.get(sub) or {}).get("state") == "Registered"

    repos.subscriptions.put(sub, {**record, "state": "Warned"}, make_audit(sub))
    assert (repos.subscriptions.get(sub) or {}).get("state") == "Warned"
