"""Shapes of the DGX Platform contract (docs/dgx-platform.openapi.yaml), as the client returns them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

DgxInstanceStatus = Literal["Provisioning", "Running", "Failed", "Deleting", "Deleted"]


class DgxInstance(BaseModel):
    """An Ollama instance on the platform. ``endpoint`` is its Ollama base URL once ``Running``."""

    model_config = ConfigDict(extra="ignore")

    id: str
    name: str
    node_id: str
    model: str
    gpus: int
    memory_gb: int
    status: DgxInstanceStatus
    endpoint: str | None = None
    error_code: str | None = None
    error_message: str | None = None


DgxJobStatus = Literal["Queued", "Running", "Succeeded", "Failed", "Canceled"]


class DgxJob(BaseModel):
    """A job on the platform. ``exit_code`` once it ended (0 on success); ``logs_url`` where its logs are;
    ``started_at``/``ended_at`` (ISO 8601 UTC) when it ran and when it ended, as the platform measured them."""

    model_config = ConfigDict(extra="ignore")

    id: str
    name: str
    node_id: str
    gpus: int
    status: DgxJobStatus
    exit_code: int | None = None
    logs_url: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    started_at: str | None = None
    ended_at: str | None = None

    @property
    def ended(self) -> bool:
        """Whether it reached a final status."""
        return self.status in ("Succeeded", "Failed", "Canceled")


class DgxUsage(BaseModel):
    """What the platform measured for one resource over ``[start, end)``: mean GPU utilisation (percent of the
    resource's GPUs), mean GPU memory in use (GiB), energy (Wh); for Ollama instances, requests served and tokens
    in (prompt) and out (generated). A metric the platform does not know is None."""

    model_config = ConfigDict(extra="ignore")

    gpu_utilization_percent: float | None = None
    gpu_memory_gb: float | None = None
    energy_wh: float | None = None
    requests: int | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None


class DgxLogLine(BaseModel):
    """One line of a job's log: ``number`` (1 the first; never changes), ``time`` (ISO 8601 UTC), ``text``."""

    model_config = ConfigDict(extra="ignore")

    number: int
    time: str
    text: str


class DgxLogPage(BaseModel):
    """A page of a job's log (the contract's LogPage): its ``lines``; ``next_after`` (ask again with it for the lines
    that follow); ``more`` (more lines are there now); ``ended`` (the job ended: no line will be added); the job's
    ``status`` now."""

    model_config = ConfigDict(extra="ignore")

    job_id: str
    status: str
    lines: list[DgxLogLine]
    next_after: int
    more: bool
    ended: bool
