"""``operation show|wait``: a long-running operation (an instance's provisioning or deletion, a job's submission
or cancel) by its status URL.

``ID`` is what a command printed: the status URL (``Azure-AsyncOperation``), its path
(``/subscriptions/{sub}/providers/ITL.Accelerator/locations/{loc}/operationStatuses/{id}``, as the operation's ``id``),
a result URL (``.../operationResults/{id}``, the ``Location``), or the bare operation id with ``--location`` (jobs
without a location: ``global``; instances: their node's location) and ``--subscription``.
Request: ``GET`` the status URL: ``{"id", "name", "status", "startTime", "endTime"?, "resourceId", "error"?}``.
``operation wait`` exits 1 when the operation ended Failed or Canceled (after printing it).
"""

from __future__ import annotations

import click

from itlc_accelerator import paths
from itlc_accelerator.lro import Waiter, raise_unless_succeeded, status_probe
from itlc_accelerator.output import emit
from itlc_accelerator.session import Session, pass_session

ID = click.argument("operation")
LOCATION = click.option("--location", "-l", help="The operation's location, when OPERATION is a bare id.")


def status_url(s: Session, operation: str, location: str | None) -> str:
    """The status URL (or path) an OPERATION argument names."""
    if "://" in operation or operation.startswith("/"):
        return operation.replace("/operationResults/", "/operationStatuses/")
    if not location:
        raise click.UsageError("A bare operation id needs --location (jobs without one: global).")
    return paths.operation_status(s.need_subscription(), location, operation)


@click.group("operation")
def operation() -> None:
    """Long-running operations: show one, or wait for it."""


@operation.command("show")
@ID
@LOCATION
@pass_session(resource_group=False)
def show(s: Session, operation: str, location: str | None) -> None:
    """Show OPERATION's status."""
    emit(s.output, "operation", s.client.get(status_url(s, operation, location)))


@operation.command("wait")
@ID
@LOCATION
@pass_session(resource_group=False)
def wait(s: Session, operation: str, location: str | None) -> None:
    """Wait until OPERATION ends; prints it. Exit 0 when it Succeeded, 1 when it Failed or was Canceled."""
    url = status_url(s, operation, location)
    url = url if "://" in url else s.client.api_url + url
    resume = f"{s.prog} operation wait '{url}'"
    body = Waiter(s, f"operation {url.split('?')[0].rsplit('/', 1)[-1]}", resume).wait(status_probe(s, url))
    emit(s.output, "operation", body)
    raise_unless_succeeded(body)
