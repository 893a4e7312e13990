"""One ``StrEnum`` per state machine, shared by the API models, the services, the repositories and the workflow steps'
inputs and outputs. Members compare and serialise as their values (``ProvisioningState.SUCCEEDED == "Succeeded"``),
so the wire and the table keep the names ARM and the seed use."""

from __future__ import annotations

from enum import StrEnum


class ProvisioningState(StrEnum):
    """ARM ``provisioningState`` of a resource. Instances: ``Accepted`` → ``Provisioning`` → ``Succeeded`` (or, once
    compensated, ``Failed``); ``Deleting`` while a delete runs. Jobs: ``Accepted`` while pending or placed,
    ``Running``, then their final status. Nodes are synchronous: ``Succeeded``."""

    ACCEPTED = "Accepted"
    PROVISIONING = "Provisioning"
    RUNNING = "Running"
    UPDATING = "Updating"
    DELETING = "Deleting"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELED = "Canceled"


#: An instance a workflow is still provisioning (a DELETE then cancels the provisioning).
INSTANCE_IN_FLIGHT: tuple[ProvisioningState, ...] = (ProvisioningState.ACCEPTED, ProvisioningState.PROVISIONING)


class JobStatus(StrEnum):
    """A job's own lifecycle: ``Pending`` (admitted or waiting for capacity) → ``Scheduled`` (placed on a node) →
    ``Running`` (on the DGX Platform) → ``Succeeded`` / ``Failed`` / ``Canceled`` / ``Preempted`` (stopped for a
    higher-priority job: domain/preemption.py)."""

    PENDING = "Pending"
    SCHEDULED = "Scheduled"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELED = "Canceled"
    PREEMPTED = "Preempted"

    @property
    def final(self) -> bool:
        """Whether the job has ended."""
        return self in FINAL_JOB_STATUSES

    @property
    def provisioning_state(self) -> str:
        """ARM's ``provisioningState`` of a job that ended so (a preempted job's: ``Canceled``, ARM's terminal state
        of work stopped before it completed)."""
        return "Canceled" if self == JobStatus.PREEMPTED else str(self)


FINAL_JOB_STATUSES: tuple[JobStatus, ...] = (
    JobStatus.SUCCEEDED,
    JobStatus.FAILED,
    JobStatus.CANCELED,
    JobStatus.PREEMPTED,
)
ACTIVE_JOB_STATUSES: tuple[JobStatus, ...] = (JobStatus.PENDING, JobStatus.SCHEDULED, JobStatus.RUNNING)


class OperationStatus(StrEnum):
    """ARM long-running operation status (Azure-AsyncOperation): ``Accepted``, ``Running``, then exactly one of
    ``Succeeded``, ``Failed`` or ``Canceled`` (ARM_CONTRACT.md line 14)."""

    ACCEPTED = "Accepted"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELED = "Canceled"

    @property
    def final(self) -> bool:
        """Whether the operation has ended (it never changes again)."""
        return self in FINAL_OPERATION_STATUSES


FINAL_OPERATION_STATUSES: tuple[OperationStatus, ...] = (
    OperationStatus.SUCCEEDED,
    OperationStatus.FAILED,
    OperationStatus.CANCELED,
)


class OperationKind(StrEnum):
    """What a long-running operation does: an instance's provisioning or deletion, a job's run, a job's cancel."""

    PROVISION = "provision"
    DEPROVISION = "deprovision"
    JOB = "job"
    CANCEL = "cancel"

    @property
    def of_job(self) -> bool:
        """Whether the operation belongs to a job (its run or a cancel), rather than to an instance."""
        return self in (OperationKind.JOB, OperationKind.CANCEL)


class Availability(StrEnum):
    """Whether a node takes new work. Only ``Available`` nodes receive new instances and jobs."""

    AVAILABLE = "Available"
    CORDONED = "Cordoned"
    MAINTENANCE = "Maintenance"
    OFFLINE = "Offline"


class LeaseKind(StrEnum):
    """What a workload's lease means: ``LEASE`` — a workflow owns it and must make progress by then (the
    reconciler's); ``TRACK`` — a running job whose state on the DGX Platform is due to be checked then (the job
    tracker's)."""

    LEASE = "LEASE"
    TRACK = "TRACK"
