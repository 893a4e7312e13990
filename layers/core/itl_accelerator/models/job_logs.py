"""Shape of ``GET .../sparkJobs/{name}/logs`` (services/api/job_logs.py): a page of the job's log lines."""

from __future__ import annotations

from pydantic import Field

from itl_accelerator.models.common import ApiModel


class JobLogLine(ApiModel):
    """One line of the job's log, as the DGX Platform wrote it."""

    line_number: int = Field(description="The line's place in the log, 1 the first; never changes.")
    time: str = Field(description="When it was written (ISO 8601, UTC).")
    text: str


class JobLogPage(ApiModel):
    """A page of the log. ``nextLink`` is where the following lines are — now or, while the job runs, once it writes
    them (follow it to follow the log); null once the job has ended and this page holds its last line."""

    value: list[JobLogLine]
    next_link: str | None = Field(description="The following lines (null: the log is complete).")
    job_status: str = Field(description="The job's status as the provider knows it.")
    complete: bool = Field(description="The job has ended and no line follows this page.")
