"""A job's log, for whoever may read the job: proxied from the DGX Platform with the provider's own credentials
(the platform's ``logsUrl`` answers 401 to a user's token), paged.

Rules: who may read a job's log is who may read the job (services/common/job_access.py ``visible_to``: admins every job,
a consumer its own, a supplier those placed on its nodes; anyone else gets the 404 a missing job gets). A job not
on the platform yet (Pending, Scheduled) has no lines so far; one that ended without ever running has none at all;
one the platform no longer knows has none left. Paging is by line number: a page holds the lines after the last
line of the one before (``$skipToken``), so a client follows a running job's log by asking for the next page again
(services answer ``next`` until the job has ended and its last line was given). A platform that does not answer is
503 ``ServiceUnavailable`` (retry), never a 500.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# the DGX client (httpx, tenacity) loads at the function's cold start, so it is in the SnapStart snapshot: most
# jobs' logs are the DGX Platform's (docs/ARCHITECTURE.md, "Cold start")
from itl_accelerator.dgx import client as _dgx_client  # noqa: F401
from itl_accelerator.dgx.errors import DgxError, DgxNotFound
from itl_accelerator.errors import InvalidParameter, LogsNotAvailable, ServiceUnavailable
from itl_accelerator.models.common import parse_instant
from itl_accelerator.observability import logger
from itl_accelerator.platforms.protocol import LogsNotServed
from itl_accelerator.platforms.router import UnknownCluster, platform_name
from itl_accelerator.resources import JOBS
from itl_accelerator.services.common.context import CallContext
from itl_accelerator.services.common.job_access import visible_to
from itl_accelerator.services.common.kernel import ResourceKernel

if TYPE_CHECKING:
    from itl_accelerator.platforms.router import Platforms

MAX_TAIL = 10_000
_DIGITS = re.compile(r"[0-9]{1,12}")


@dataclass(frozen=True)
class LogPage:
    """What a page holds: ``lines`` (``lineNumber``, ``time``, ``text``), ``job_status``, ``complete``, and
    ``next`` — the line number the following page starts after (None once complete)."""

    lines: list[dict[str, Any]]
    job_status: str
    complete: bool
    next: int | None


def parse_tail(value: str | None) -> int | None:
    """``tail``: a whole number of lines, 1 to 10000 (ASCII digits). Raises 400 ``InvalidParameter``."""
    if value is None:
        return None
    if not _DIGITS.fullmatch(value) or not 1 <= int(value) <= MAX_TAIL:
        raise InvalidParameter(f"tail must be a whole number from 1 to {MAX_TAIL}; got '{value[:20]}'.", target="tail")
    return int(value)


def parse_since(value: str | None) -> str | None:
    """``since``: an ISO 8601 time with a zone (``2026-12-01T10:00:00Z``) between 1970 and 9000, passed on in UTC.
    Raises 400 ``InvalidParameter``."""
    if value is None:
        return None
    moment = parse_instant(value)
    if moment is None:
        raise InvalidParameter(
            f"since must be an ISO 8601 time with a zone, between 1970 and 9000; got '{value[:40]}'.", target="since"
        )
    return moment.isoformat().replace("+00:00", "Z")


def parse_after(skip_token: str | None) -> int:
    """``$skipToken`` of this route: the number of the last line already read. Raises 400 ``InvalidParameter``."""
    if skip_token is None:
        return 0
    if not _DIGITS.fullmatch(skip_token):
        raise InvalidParameter("The $skipToken is not one this route gave out.", target="$skipToken")
    return int(skip_token)


class JobLogService:
    """``kernel``: access checks and the store; ``platforms``: the execution platforms (each client made on its first
    call; the job's platform id says which serves its log)."""

    def __init__(self, kernel: ResourceKernel, platforms: Platforms):
        self._kernel = kernel
        self._platforms = platforms

    def page(
        self,
        ctx: CallContext,
        subscription_id: str,
        resource_group: str,
        name: str,
        *,
        after: int,
        since: str | None,
        tail: int | None,
        top: int,
    ) -> LogPage:
        """Lines of the job's log after line ``after``, written at or after ``since``, the last ``tail`` of them,
        ``top`` at most. 404 when the caller may not read the job (or it does not exist); 409 ``LogsNotAvailable``
        when its platform serves no logs or its Slurm cluster is no longer configured; 503 when its platform does not
        answer."""
        key = self._kernel.key(JOBS, subscription_id, resource_group, name)
        self._kernel.require(ctx, JOBS, key, JOBS.read)
        record = self._kernel.repositories.jobs.get(key)
        if record is None or not visible_to(ctx.principal, record):
            raise JOBS.not_found(key.names, key.resource_group)
        status = str(record.status)
        ended = record.status.final
        if not record.dgx_id:  # not on the platform yet, or it ended before it ran
            return LogPage([], status, ended, None if ended else after)
        try:
            found = self._platforms.get_job_logs(record.dgx_id, after=after, since=since, tail=tail, limit=top)
        except DgxNotFound:
            return LogPage([], status, True, None)  # the platform no longer has it, nor its log
        except LogsNotServed as exc:  # a Slurm cluster's job: its platform serves none (docs/SLURM.md, "Logs")
            raise LogsNotAvailable(str(exc)) from None
        except UnknownCluster:  # its cluster was removed from SLURM_CLUSTERS since: nothing to read it from
            raise LogsNotAvailable(
                f"The job ran on {platform_name(record.dgx_id)}, which this deployment no longer configures; "
                "its logs cannot be read."
            ) from None
        except DgxError as exc:
            logger.warning("Job log unavailable", extra={"job": key.names[-1], "error": str(exc)})
            where = platform_name(record.dgx_id)
            raise ServiceUnavailable(
                f"{where[0].upper()}{where[1:]} did not answer for the job's log; retry later.",
                headers={"Retry-After": "5"},
            ) from None
        lines = [{"lineNumber": line.number, "time": line.time, "text": line.text} for line in found.lines]
        complete = found.ended and not found.more
        return LogPage(lines, status, complete, None if complete else found.next_after)
