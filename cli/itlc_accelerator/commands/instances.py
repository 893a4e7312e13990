"""``instance create|show|list|delete|stats``: Ollama instances (sparkOllamaInstances) provisioned on a node.

Requests: create ``POST .../sparkNodes/{node}/sparkOllamaInstances`` with ``{"name", "properties": {"model", "gpus",
"memoryGb"}}`` (202 + operation; 409 when it exists, ``InsufficientCapacity``, ``NodeNotAvailable``); show/list
``GET``; delete ``DELETE .../sparkOllamaInstances/{name}`` (202 + operation; 204 when there was none); stats
``GET .../sparkOllamaInstances/{name}/stats?hours=N``. Create and delete wait for their operation unless
``--no-wait``.
"""

from __future__ import annotations

import click

from itlc_accelerator import paths
from itlc_accelerator.commands.usage import HOURS, show_stats
from itlc_accelerator.lro import finish
from itlc_accelerator.output import emit
from itlc_accelerator.session import Session, pass_session

NODE = click.option("--node", required=True, help="The node the instance runs on.")
NO_WAIT = click.option("--no-wait", is_flag=True, help="Print the operation and return at once.")


@click.group("instance")
def instance() -> None:
    """Ollama instances: provision them on a node, read them, remove them."""


@instance.command("create")
@click.argument("name")
@NODE
@click.option("--model", "-m", required=True, help="An Ollama model name, e.g. mistral:7b.")
@click.option("--gpus", type=click.IntRange(1, 64), required=True, help="GPUs to reserve.")
@click.option("--memory-gb", type=click.IntRange(1, 65536), required=True, help="GiB of GPU memory to reserve.")
@NO_WAIT
@pass_session()
def create(s: Session, name: str, node: str, model: str, gpus: int, memory_gb: int, no_wait: bool) -> None:
    """Provision instance NAME on --node and wait until it serves (prints the instance, with its endpoint)."""
    path = paths.instances(s.need_subscription(), s.need_resource_group(), node)
    body = {"name": name, "properties": {"model": model, "gpus": gpus, "memoryGb": memory_gb}}
    response = s.client.send("POST", path, json=body)
    finish(s, response, label=f"instance {name}", kind="instance", wait=not no_wait)


@instance.command("show")
@click.argument("name")
@NODE
@pass_session()
def show(s: Session, name: str, node: str) -> None:
    """Show instance NAME (its provisioningState, and its endpoint once Succeeded)."""
    emit(
        s.output, "instance", s.client.get(paths.instances(s.need_subscription(), s.need_resource_group(), node, name))
    )


@instance.command("list")
@NODE
@click.option("--max-items", type=click.IntRange(min=1), help="Stop after this many.")
@pass_session()
def list_(s: Session, node: str, max_items: int | None) -> None:
    """List the instances of --node."""
    path = paths.instances(s.need_subscription(), s.need_resource_group(), node)
    emit(s.output, "instance", s.client.list(path, max_items=max_items), many=True)


@instance.command("delete")
@click.argument("name")
@NODE
@NO_WAIT
@pass_session()
def delete(s: Session, name: str, node: str, no_wait: bool) -> None:
    """Deprovision instance NAME (a provisioning in progress is canceled) and wait until it is gone."""
    response = s.client.send("DELETE", paths.instances(s.need_subscription(), s.need_resource_group(), node, name))
    if response.status_code == 204:
        click.echo(f"instance {name} did not exist: nothing deleted.", err=True)
        return
    finish(s, response, label=f"instance {name}", kind="instance", wait=not no_wait)


@instance.command("stats")
@click.argument("name")
@NODE
@HOURS
@pass_session()
def stats(s: Session, name: str, node: str, hours: int) -> None:
    """Usage of instance NAME over the last --hours."""
    show_stats(s, paths.instances(s.need_subscription(), s.need_resource_group(), node, name), hours)
