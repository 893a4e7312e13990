"""``usage show``: a node's, an instance's or a job's usage statistics for the last ``--hours``; ``usage list``: the
GPUs the subscription holds against its quotas in a location (``GET .../locations/{location}/usages``).

Request: ``GET {resource}/stats?hours=N`` (N 1-720, default 24), answered with ``{"resourceId", "timespan",
"interval": "PT1H", "hours", "value": [one point per hour], "totals": {...}}`` (docs/API_REFERENCE.md, "Usage
statistics"). The body is printed as it comes (``-o json``), or as a table of its points and then its totals.
"""

from __future__ import annotations

import click

from itlc_accelerator import paths
from itlc_accelerator.output import emit
from itlc_accelerator.session import Session, pass_session

HOURS = click.option(
    "--hours", type=click.IntRange(1, 720), default=24, show_default=True, help="How many hours back (1-720)."
)


def show_stats(s: Session, resource: str, hours: int) -> None:
    """Print the statistics of ``resource`` (its path or ARM id) over ``hours``."""
    emit(s.output, "usage", s.client.get(paths.stats(resource), hours=str(hours)))


@click.group("usage")
def usage() -> None:
    """Usage statistics of nodes, instances and jobs; GPUs held against the quotas."""


@usage.command("show")
@click.option("--node", help="A node (with --instance: the node of the instance).")
@click.option("--instance", help="An instance (needs --node).")
@click.option("--job", help="A job.")
@click.option("--resource", "resource_id", help="Any of those by its ARM id (/subscriptions/...).")
@HOURS
@pass_session()
def show(
    s: Session, node: str | None, instance: str | None, job: str | None, resource_id: str | None, hours: int
) -> None:
    """Show one resource's usage for the last --hours: --node N, --node N --instance I, --job J or --resource ID."""
    if instance and not node:
        raise click.UsageError("--instance needs --node (the node it runs on).")
    chosen = [bool(resource_id), bool(job), bool(node)]
    if sum(chosen) != 1:
        raise click.UsageError("Name one resource: --node [--instance], --job, or --resource.")
    if resource_id:
        if not resource_id.startswith("/subscriptions/"):
            raise click.UsageError("--resource takes an ARM id: /subscriptions/{sub}/resourceGroups/{rg}/providers/...")
        path = resource_id
    elif job:
        path = paths.jobs(s.need_subscription(), s.need_resource_group(), job)
    elif instance:
        path = paths.instances(s.need_subscription(), s.need_resource_group(), str(node), instance)
    else:
        path = paths.nodes(s.need_subscription(), s.need_resource_group(), node)
    show_stats(s, path, hours)


@usage.command("list")
@click.option("-l", "--location", required=True, help="The location (e.g. us-east-1).")
@pass_session(resource_group=False)
def list_usages(s: Session, location: str) -> None:
    """List the GPUs the subscription holds against each quota in a location (limit -1: none set)."""
    emit(s.output, "quotaUsage", s.client.get(paths.usages(s.need_subscription(), location)), many=True)
