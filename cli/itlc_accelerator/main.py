"""The command tree: ``accelerator`` (a click group the ITL CLI mounts as ``itlc accelerator``) and ``main()``, the
standalone ``itlc-accelerator`` command.

Mounting it in ``itlc`` (click-based)::

    from itlc_accelerator.main import accelerator
    itlc.add_command(accelerator)          # itlc accelerator node list ...

Exit codes: 0 ok; 1 the API answered with an error (``ERROR: <code>: <message>`` on stderr), could not be reached,
or a waited-for operation or job failed; 2 usage error; 130 Ctrl-C while waiting (the operation goes on).
"""

from __future__ import annotations

import click

from itlc_accelerator import __version__
from itlc_accelerator.commands.audit import audit
from itlc_accelerator.commands.instances import instance
from itlc_accelerator.commands.jobs import job
from itlc_accelerator.commands.limits import budget, cost, offer, quota
from itlc_accelerator.commands.mcp import mcp
from itlc_accelerator.commands.nodes import node
from itlc_accelerator.commands.operations import operation
from itlc_accelerator.commands.reservations import reservation
from itlc_accelerator.commands.slo import slo
from itlc_accelerator.commands.usage import usage


@click.group("accelerator", context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="itlc-accelerator")
def accelerator() -> None:
    """ITL Accelerator: GPU nodes, Ollama instances, GPU jobs, capacity reservations, their usage, logs and audit; quotas, budgets, costs; the API's SLOs.

    Every command takes --api-url (CONTROLPLANE_API_URL), --token (CONTROLPLANE_TOKEN), --subscription
    (CONTROLPLANE_SUBSCRIPTION), --resource-group/-g (CONTROLPLANE_RESOURCE_GROUP) and -o json|table|id.
    Exit codes: 0 ok, 1 API error, 2 usage error, 130 interrupted while waiting.
    """


for group in (node, instance, job, reservation, usage, quota, offer, budget, cost, audit, operation, slo, mcp):
    accelerator.add_command(group)


def main() -> None:
    """``itlc-accelerator``: the group run as a program of its own."""
    accelerator(prog_name="itlc-accelerator")
