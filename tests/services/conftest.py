"""The fast seam: the services over the in-memory repositories, with the fakes of fakes.py and the real state machine
definitions run by workflows.py. Each test gets a fresh store, clock, DGX Platform, Step Functions and S3 (the
``env`` fixture); nothing here starts a server, a thread or moto, and nothing sleeps.

``env`` offers what a test needs to say *given / when / then* in the provider's words: callers (admin, consumer,
supplier), nodes registered through the node service, jobs and instances submitted through the API services,
``env.run()`` to let the workflows go as far as they can (the clock moving through their Wait states), the
schedules (``env.w.job_tracker``, ``env.w.reconciler``...), and reads of the truth (records, allocations,
operations, audit events).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import pytest

from itl_accelerator.auth.principal import ArmScope, Principal
from itl_accelerator.auth.rbac import ROLE_ADMIN, ROLE_CONSUMER, ROLE_SUPPLIER
from itl_accelerator.domain.records import Instance, Job, Node, NodeState, Operation, ResourceKey, node_key
from itl_accelerator.domain.usage import Meter, MeterRef
from itl_accelerator.models.audit import AuditEvent
from itl_accelerator.models.instances import SparkOllamaInstanceWrite
from itl_accelerator.models.jobs import SparkJobWrite
from itl_accelerator.models.nodes import SparkNodeWrite
from itl_accelerator.repositories.memory import MemoryState, memory_repositories
from itl_accelerator.repositories.protocols import Repositories
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.services.common.lro import Accepted
from itl_accelerator.settings import Settings
from itl_accelerator.wiring import Wiring
from tests.services.fakes import FakeClock, FakeDgx, FakeS3, FakeStepFunctions, Hooked, epoch_of
from tests.services.workflows import Workflows, definition, instance_tasks, job_tasks

SUB = "sub-0001"
RG = "rg1"
BUCKET = "itl-billing-test"
#: 2025-03-10T08:00:00Z: where every test's clock starts (a Monday; far from midnight unless a test moves it).
START = epoch_of("2025-03-10T08:00:00")
STATE_MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:{}"
PROVISION_ARN = STATE_MACHINE.format("provision")
DEPROVISION_ARN = STATE_MACHINE.format("deprovision")
JOB_ARN = STATE_MACHINE.format("job")


def make_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "table_name": "itl-accelerator-memory",
        "provision_state_machine_arn": PROVISION_ARN,
        "deprovision_state_machine_arn": DEPROVISION_ARN,
        "job_state_machine_arn": JOB_ARN,
        "instance_poll_interval_seconds": 10,
        "instance_provision_timeout_seconds": 900,
        "workflow_start_grace_seconds": 120,
        "workflow_lease_grace_seconds": 120,
        "reconcile_batch_size": 25,
        "job_poll_interval_seconds": 30,
        "job_poll_max_interval_seconds": 600,
        "instance_watch_interval_seconds": 30,
        "job_pending_timeout_seconds": 7 * 24 * 3600,
        "job_placement_retry_seconds": 60,
        "job_starvation_seconds": 900,
        "job_track_margin_seconds": 3600,
        "job_stop_timeout_seconds": 300,
        "job_track_batch_size": 100,
        "usage_sync_interval_seconds": 300,
        "usage_late_windows": 2,
        "usage_sync_batch_size": 500,
        "usage_max_windows_per_meter": 48,
        "rollup_batch_hours": 48,
        "billing_export_max_days": 7,
        "billing_export_grace_seconds": 5400,
        "billing_export_bucket": BUCKET,
        "billing_export_prefix": "focus/",
        "default_page_size": 100,
    }
    # the values given here only: the process environment (which the slow suite's fixtures set for the handlers)
    # never changes what these tests run with
    return Settings(**{**values, **overrides})


# ---------------------------------------------------------------------------------------------------------- bodies
def node_body(
    *,
    devices: int = 8,
    gpu_memory_gb: int = 80,
    model: str = "H100",
    location: str = "eastus",
    price: float = 2.5,
    currency: str = "USD",
    increment: int = 60,
    minimum: int = 60,
    owner: str = "owner-123",
    availability: str = "Available",
    tags: dict[str, str] | None = None,
    backend: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A node PUT body (wire names); ``backend``: its ``properties.backend`` (None: the deployment's default)."""
    return {
        "location": location,
        "tags": tags or {},
        "sku": {"name": f"DGX-{model}-{devices}GPU", "capacity": devices},
        "properties": {
            "owner": owner,
            "hardwareSpecs": {"gpuModel": model, "gpuCount": devices, "gpuMemoryGb": gpu_memory_gb},
            "pricing": {
                "currency": currency,
                "pricePerGpuHour": price,
                "billingIncrementSeconds": increment,
                "minimumBillableSeconds": minimum,
            },
            "availability": availability,
            **({"backend": backend} if backend is not None else {}),
        },
    }


def job_body(
    devices: int = 1,
    memory_gb: int = 80,
    *,
    location: str | None = None,
    tags: dict[str, str] | None = None,
    **properties: Any,
) -> SparkJobWrite:
    """A job PUT body: ``properties`` in wire names (``priority``, ``maxDurationMinutes``, ``gpuModel``...)."""
    body: dict[str, Any] = {"properties": {"requestedGpus": devices, "requestedMemoryGb": memory_gb, **properties}}
    if location:
        body["location"] = location
    if tags:
        body["tags"] = tags
    return SparkJobWrite.model_validate(body)


def instance_body(devices: int = 2, memory_gb: int = 160, model: str = "mistral:7b") -> SparkOllamaInstanceWrite:
    return SparkOllamaInstanceWrite.model_validate(
        {"properties": {"model": model, "gpus": devices, "memoryGb": memory_gb}}
    )


@dataclass(frozen=True)
class Allocation:
    """What a node holds: GPUs, GiB of GPU memory, instances."""

    devices: int
    memory_gb: int
    instances: int = 0


# ---------------------------------------------------------------------------------------------------------- env
class Env:
    """One test's world (module docstring)."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        repositories: Repositories | None = None,
        slurm: Callable[[str], Any] | None = None,
    ):
        """``repositories``: another store than the in-memory twin (benchmarks/fleet_sweeps.py passes the DynamoDB
        repositories on moto); ``slurm``: the platform of a Slurm cluster by name (benchmarks/slurm_tracker.py)."""
        self.clock = FakeClock(START)
        self.dgx = FakeDgx(self.clock)
        self.sfn = FakeStepFunctions()
        self.s3 = FakeS3(BUCKET)
        self.state = MemoryState()
        self.repos: Repositories = repositories or memory_repositories(self.state)
        # hooks between a service's read and its write (fakes.Hooked); pass-through unless a test sets one
        self.nodes_hooks = Hooked(self.repos.nodes)
        self.instances_hooks = Hooked(self.repos.instances)
        self.repos.nodes = self.nodes_hooks
        self.repos.instances = self.instances_hooks
        self.settings = settings or make_settings()
        fake_dgx: Any = self.dgx  # a FakeDgx: the client's methods (test_fakes.py checks them)
        wiring = Wiring.build(
            self.settings,
            repositories=self.repos,
            dgx=fake_dgx,
            stepfunctions_client=self.sfn,
            s3_client=self.s3,
            slurm=slurm,
            clock=self.clock,
        )
        self.w = wiring
        self.workflows = Workflows(
            self.sfn,
            self.clock,
            {
                PROVISION_ARN: (
                    definition("provision_instance"),
                    instance_tasks(wiring.instance_steps, wiring.deprovision_steps),
                ),
                DEPROVISION_ARN: (
                    definition("deprovision_instance"),
                    instance_tasks(wiring.instance_steps, wiring.deprovision_steps),
                ),
                JOB_ARN: (definition("job_lifecycle"), job_tasks(wiring.job_steps)),
            },
        )
        self._requests = itertools.count(1)
        self.sub = SUB

    # ------------------------------------------------------------------------------------------- callers
    def ctx(self, principal: Principal, *, correlation_id: str | None = None) -> CallContext:
        n = next(self._requests)
        return CallContext(
            principal=principal,
            request_id=f"req-{n:04d}",
            correlation_id=correlation_id or f"corr-{n:04d}",
            source_ip="203.0.113.7",
            user_agent="tests/services",
            clock=self.clock.datetime,
        )

    @staticmethod
    def principal(role: str, subject: str, scopes: Iterable[str] = (f"/subscriptions/{SUB}",)) -> Principal:
        return Principal(
            subject=subject,
            display_name=subject,
            roles=[role],
            scopes=[s for s in (ArmScope.parse(v) for v in scopes) if s is not None],
        )

    def admin(self, subject: str = "admin-1", *, scopes: Iterable[str] = (f"/subscriptions/{SUB}",)) -> CallContext:
        return self.ctx(self.principal(ROLE_ADMIN, subject, scopes))

    def consumer(self, subject: str = "ann", *, scopes: Iterable[str] = (f"/subscriptions/{SUB}",)) -> CallContext:
        return self.ctx(self.principal(ROLE_CONSUMER, subject, scopes))

    def supplier(
        self, subject: str = "owner-123", *, scopes: Iterable[str] = (f"/subscriptions/{SUB}",)
    ) -> CallContext:
        return self.ctx(self.principal(ROLE_SUPPLIER, subject, scopes))

    # ------------------------------------------------------------------------------------------- nodes
    def add_node(self, name: str = "dgx-1", *, rg: str = RG, **body: Any) -> dict[str, Any]:
        """Register a node as an admin (``body``: :func:`node_body`'s keywords)."""
        node, created = self.w.nodes.put(
            self.admin(), self.sub, rg, name, SparkNodeWrite.model_validate(node_body(**body))
        )
        assert created
        return node

    def patch_node(self, name: str, patch: dict[str, Any], *, ctx: CallContext | None = None) -> dict[str, Any]:
        return self.w.nodes.patch(ctx or self.admin(), self.sub, RG, name, patch)

    def node(self, name: str = "dgx-1", rg: str = RG) -> Node:
        found = self.repos.nodes.get(node_key(self.sub, rg, name))
        assert found is not None, f"no node {name}"
        return found

    def node_state(self, name: str = "dgx-1") -> NodeState:
        """The node as a stream record reports it (services/streams/fleet.py)."""
        n = self.node(name)
        return NodeState(n.etag, n.availability, n.shape)

    def allocation(self, name: str = "dgx-1") -> Allocation:
        n = self.node(name)
        return Allocation(n.devices_allocated, n.memory_gb_allocated, n.child_count)

    # ------------------------------------------------------------------------------------------- jobs
    def submit(
        self, name: str, devices: int = 1, memory_gb: int = 80, *, ctx: CallContext | None = None, **props: Any
    ) -> Accepted:
        """Submit a job (PUT) as ``ctx`` (an admin by default); it must be accepted."""
        location = props.pop("location", None)
        accepted, _ = self.w.jobs.submit(
            ctx or self.admin(), self.sub, RG, name, job_body(devices, memory_gb, location=location, **props)
        )
        assert accepted is not None
        return accepted

    def job_key(self, name: str) -> ResourceKey:
        return ResourceKey(self.sub, RG, "sparkJobs", (name,))

    def job(self, name: str) -> Job:
        found = self.repos.jobs.get(self.job_key(name))
        assert found is not None, f"no job {name}"
        return found

    def job_props(self, name: str) -> dict[str, Any]:
        """The job's ``properties`` as an admin reads them."""
        return self.w.jobs.get(self.admin(), self.sub, RG, name)["properties"]

    def status(self, name: str) -> str:
        return str(self.job(name).status)

    def finish_on_platform(
        self, name: str, status: str = "Succeeded", *, exit_code: int = 0, at: float | None = None
    ) -> None:
        """The job ``name`` ends on the DGX Platform (by default now)."""
        dgx_id = self.job(name).dgx_id
        assert dgx_id, f"{name} is not on the DGX Platform"
        self.dgx.finish_job(dgx_id, status, exit_code=exit_code, at=at)

    def track(self) -> dict[str, int]:
        """One run of the job tracker (as its schedule would, at the clock's time); then the workflows go on."""
        counts = self.w.job_tracker.run()
        self.run()
        return counts

    def end_job(self, name: str, status: str = "Succeeded", *, exit_code: int = 0, at: float | None = None) -> Job:
        """The job ends on the platform, the tracker notices (its check is due), and its workflow finishes it."""
        self.finish_on_platform(name, status, exit_code=exit_code, at=at)
        lease = self.job(name).lease
        if lease is not None and lease.until >= self.clock():
            self.clock.set(lease.until + 1)
        self.track()
        return self.job(name)

    # ------------------------------------------------------------------------------------------- instances
    def provision(
        self,
        name: str = "llama",
        node: str = "dgx-1",
        *,
        devices: int = 2,
        memory_gb: int = 160,
        model: str = "mistral:7b",
        **kw: Any,
    ) -> tuple[Accepted | None, dict[str, Any]]:
        return self.w.instances.put(
            kw.pop("ctx", None) or self.admin(),
            self.sub,
            RG,
            node,
            name,
            instance_body(devices, memory_gb, model),
            **kw,
        )

    def delete_instance(self, name: str = "llama", node: str = "dgx-1", **kw: Any) -> Accepted | None:
        return self.w.instances.delete(kw.pop("ctx", None) or self.admin(), self.sub, RG, node, name, **kw)

    def instance_key(self, name: str = "llama", node: str = "dgx-1") -> ResourceKey:
        return ResourceKey(self.sub, RG, "sparkOllamaInstances", (node, name))

    def instance(self, name: str = "llama", node: str = "dgx-1") -> Instance | None:
        return self.repos.instances.get(self.instance_key(name, node))

    def instance_props(self, name: str = "llama", node: str = "dgx-1") -> dict[str, Any]:
        found = self.instance(name, node)
        assert found is not None, f"no instance {name}"
        return found.properties

    # ------------------------------------------------------------------------------------------- the rest
    def run(self, *, advance: float | None = None, stop_before: Iterable[str] = ()) -> None:
        """Let the workflows go as far as they can (see workflows.Workflows.run)."""
        self.workflows.run(advance=advance, stop_before=stop_before)

    def operation(self, operation_id: str) -> Operation:
        found = self.repos.operations.get(self.sub, operation_id)
        assert found is not None, f"no operation {operation_id}"
        return found

    def op_status(self, operation_id: str) -> str:
        return str(self.operation(operation_id).status)

    def meter(self, allocation_id: str) -> Meter | None:
        return self.repos.meters.get(MeterRef(self.sub, allocation_id))

    def audit(self, resource_id: str | None = None) -> list[AuditEvent]:
        """The subscription's audit trail (of one resource when given), oldest first."""
        return self.repos.audit.page(self.sub, None, None, resource_id, 10_000, None).items


@pytest.fixture
def env() -> Env:
    return Env()


@pytest.fixture
def node(env: Env) -> dict[str, Any]:
    """One 8-GPU H100 node (80 GiB per GPU), 2.50 USD per GPU-hour billed per started minute, owned by owner-123."""
    return env.add_node()
