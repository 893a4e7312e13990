"""Records for the contract scenarios: nodes, instances, jobs, operations, audit events, meters, usage records —
plausible values, every one overridable — and small helpers that read a store back."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from itl_accelerator.billing.metering import BillingTerms
from itl_accelerator.domain.quotas import QuotaScope
from itl_accelerator.domain.records import (
    Instance,
    Job,
    Node,
    Operation,
    Reservation,
    ResourceKey,
    node_key,
)
from itl_accelerator.domain.states import JobStatus, OperationKind, OperationStatus, ProvisioningState
from itl_accelerator.domain.usage import Meter, UsageRecord
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.repositories.protocols import Page, Repositories

PROVIDER = "ITL.Accelerator"
TERMS = BillingTerms(Decimal("2.5"), "USD")
#: 2024-05-01T00:00:00Z, the start of the hours the usage scenarios write.
DAY1_START = int(datetime(2024, 5, 1, tzinfo=UTC).timestamp())
HOUR = 3600
_clock = itertools.count(1)
#: The quotas a reservation on a default node (:func:`make_node`: H100 in eastus) counts in.
DEFAULT_QUOTA = QuotaScope("eastus", "h100")


def arm_id(key: ResourceKey) -> str:
    base = f"/subscriptions/{key.subscription_id}/resourceGroups/{key.resource_group}/providers/{PROVIDER}"
    if key.type_segment == "sparkOllamaInstances":
        return f"{base}/sparkNodes/{key.names[0]}/sparkOllamaInstances/{key.names[1]}"
    return f"{base}/{key.type_segment}/{key.names[0]}"


def make_node(
    sub: str,
    name: str = "dgx-1",
    rg: str = "rg1",
    *,
    devices: int = 8,
    memory_gb: int = 640,
    model: str = "H100",
    location: str = "eastus",
    availability: str = "Available",
    owner: str = "supplier-1",
    etag: str = "n1",
    pricing: dict[str, object] | None = None,
) -> Node:
    key = node_key(sub, rg, name)
    document = {
        "id": arm_id(key),
        "name": name,
        "type": f"{PROVIDER}/sparkNodes",
        "location": location,
        "sku": {"name": f"DGX-{model}-{devices}GPU", "capacity": devices},
        "properties": {
            "owner": owner,
            "availability": availability,
            "hardwareSpecs": {"gpuModel": model, "gpuCount": devices, "gpuMemoryGb": memory_gb // devices},
            "pricing": pricing or {"currency": "USD", "pricePerGpuHour": 2.5},
            "provisioningState": "Succeeded",
        },
        "systemData": {"createdAt": "2024-04-01T00:00:00.000000Z"},
    }
    return Node(key, document, etag, device_total=devices, memory_gb_total=memory_gb)


def make_instance(
    node: ResourceKey,
    name: str = "llama",
    *,
    etag: str = "i1",
    state: ProvisioningState = ProvisioningState.ACCEPTED,
    devices: int = 2,
    memory_gb: int = 160,
    operation_id: str = "op-1",
    **fields: Any,
) -> Instance:
    key = ResourceKey(node.subscription_id, node.resource_group, "sparkOllamaInstances", (*node.names, name))
    document = {
        "id": arm_id(key),
        "name": name,
        "type": f"{PROVIDER}/sparkNodes/sparkOllamaInstances",
        "properties": {"model": "llama3:8b", "gpuCount": devices, "provisioningState": str(state)},
        "systemData": {"createdAt": "2024-05-01T00:00:00.000000Z"},
    }
    return Instance(
        key=key,
        document=document,
        etag=etag,
        state=state,
        operation_id=operation_id,
        spec_hash="spec-1",
        devices=devices,
        memory_gb=memory_gb,
        capacity_reserved=True,
        location="eastus",
        node=node,
        node_owner="supplier-1",
        billing_terms=TERMS,
        **{"quota": DEFAULT_QUOTA, **fields},
    )


def make_job(
    sub: str,
    name: str = "train",
    rg: str = "rg1",
    *,
    etag: str = "j1",
    submitted_by: str = "alice",
    priority: int = 5,
    submitted_at: str = "2024-05-01T00:00:00.000000Z",
    status: JobStatus = JobStatus.PENDING,
    devices: int = 2,
    memory_gb: int = 160,
    max_duration_seconds: int = 3600,
    **fields: Any,
) -> Job:
    key = ResourceKey(sub, rg, "sparkJobs", (name,))
    document = {
        "id": arm_id(key),
        "name": name,
        "type": f"{PROVIDER}/sparkJobs",
        "properties": {"image": "nvcr.io/train:1", "gpuCount": devices, "status": str(status)},
        "systemData": {"createdAt": submitted_at},
    }
    return Job(
        key=key,
        document=document,
        etag=etag,
        state=ProvisioningState.ACCEPTED,
        operation_id=f"op-{name}",
        spec_hash="spec-1",
        devices=devices,
        memory_gb=memory_gb,
        status=status,
        priority=priority,
        submitted_by=submitted_by,
        submitted_at=submitted_at,
        max_duration_seconds=max_duration_seconds,
        **fields,
    )


def make_operation(
    operation_id: str,
    *,
    kind: OperationKind = OperationKind.PROVISION,
    rg: str = "rg1",
    resource_id: str = "/subscriptions/x/resourceGroups/rg1/providers/ITL.Accelerator/sparkNodes/dgx-1",
    owner: str | None = None,
) -> Operation:
    body = {
        "id": f"/providers/{PROVIDER}/locations/eastus/operationStatuses/{operation_id}",
        "name": operation_id,
        "status": str(OperationStatus.ACCEPTED),
        "startTime": "2024-05-01T00:00:00.000000Z",
        "percentComplete": 0.0,
        "resourceId": resource_id,
    }
    return Operation(body, kind, rg, owner)


def make_audit(
    sub: str, resource_id: str = "/resource", *, timestamp: str | None = None, actor: str = "alice"
) -> AuditEvent:
    """An audit event; its timestamps increase from one call to the next unless given."""
    if timestamp is None:
        timestamp = (datetime(2024, 5, 1, tzinfo=UTC) + timedelta(microseconds=next(_clock))).isoformat()
    return AuditEvent(
        event_id=uuid.uuid4().hex,
        timestamp=timestamp,
        subscription_id=sub,
        actor_id=actor,
        actor_type="User",
        actor_display_name=actor.title(),
        action="ITL.Accelerator/write",
        resource_id=resource_id,
        resource_type="ITL.Accelerator/sparkNodes",
        resource_name=resource_id.rsplit("/", 1)[-1],
        previous_state=None,
        new_state={"name": "x", "properties": {"gpuCount": 2}},
        change_summary="changed",
        request_id="req-1",
        correlation_id="corr-1",
    )


def make_meter(sub: str, allocation_id: str, *, start: int = 1000, gpus: int = 2, node: str = "dgx-1") -> Meter:
    return Meter(
        allocation_id=allocation_id,
        subscription_id=sub,
        resource_group="rg1",
        resource_id=f"/subscriptions/{sub}/resourceGroups/rg1/providers/{PROVIDER}/sparkNodes/{node}/sparkOllamaInstances/llama",
        resource_name="llama",
        resource_type=f"{PROVIDER}/sparkNodes/sparkOllamaInstances",
        service="instances",
        node_resource_group="rg1",
        node_name=node,
        node_id=f"/subscriptions/{sub}/resourceGroups/rg1/providers/{PROVIDER}/sparkNodes/{node}",
        supplier="supplier-1",
        region="eastus",
        sku="DGX-H100-8GPU",
        gpus=gpus,
        terms=TERMS,
        start=start,
        dgx_id="dgx-abc",
        tags={"team": "ml"},
        resource_created_at="2024-05-01T00:00:00.000000Z",
        node_created_at="2024-04-01T00:00:00.000000Z",
    )


def make_usage(
    allocation_id: str,
    window_start: int = DAY1_START,
    *,
    seconds: int = 3600,
    cost: str = "5.000000",
    metrics: dict[str, Any] | None = None,
    final: bool = False,
    sub: str = "sub-usage",
) -> UsageRecord:
    segment = {
        "start": window_start,
        "end": window_start + seconds,
        "gpuSeconds": seconds * 2,
        "billableGpuSeconds": seconds * 2,
        "pricePerGpuHour": "2.5",
        "cost": cost,
        "currency": "USD",
    }
    descriptor = {"subscriptionId": sub, "resourceId": f"/subscriptions/{sub}/x/{allocation_id}", "gpus": 2}
    return UsageRecord(allocation_id, window_start, descriptor, [segment], metrics, final)


# --------------------------------------------------------------------------------------------- store helpers
def audit_events(repos: Repositories, sub: str) -> list[AuditEvent]:
    """Every audit event of ``sub``."""
    return repos.audit.page(sub, "0000", "9999", None, 1000, None).items


def all_pages(fetch: Any, limit: int) -> tuple[list[Any], int]:
    """Every item of a paged list, ``fetch(limit, token)`` page after page; and how many pages it took."""
    items: list[Any] = []
    token: str | None = None
    for pages in itertools.count(1):
        page: Page[Any] = fetch(limit, token)
        assert len(page.items) <= limit
        items += page.items
        token = page.token
        if token is None:
            return items, pages
    raise AssertionError("unreachable")  # pragma: no cover


def names_of(items: list[Any]) -> list[str]:
    return [item.key.name for item in items]


def create_node(repos: Repositories, node: Node) -> Node:
    """``node`` registered; as stored."""
    repos.nodes.create(node, make_audit(node.key.subscription_id, node.arm_id))
    found = repos.nodes.get(node.key)
    assert found is not None
    return found


def place_instance(repos: Repositories, node: Node, name: str = "llama", **fields: Any) -> Instance:
    """An instance accepted on ``node`` with its reservation (``devices``/``memory_gb`` of the instance, one child)."""
    instance = make_instance(node.key, name, operation_id=fields.pop("operation_id", f"op-{name}"), **fields)
    operation = make_operation(instance.operation_id or "", rg=node.key.resource_group, resource_id=instance.arm_id)
    reservation = Reservation.on(node, instance.devices, instance.memory_gb, child=1)
    repos.instances.accept(instance, operation, make_audit(node.key.subscription_id, instance.arm_id), reservation)
    return instance


def suspend(repos: Repositories, sub: str, state: str = "Suspended") -> None:
    """Register ``sub`` in ``state``."""
    record = {"state": state, "registrationDate": "2024-01-01T00:00:00Z", "properties": {}}
    repos.subscriptions.put(sub, record, make_audit(sub, f"/subscriptions/{sub}"))


def counters(node: Node | None) -> tuple[int, int, int]:
    """A node's allocations: GPUs, GiB, instances."""
    assert node is not None
    return node.devices_allocated, node.memory_gb_allocated, node.child_count
