"""``job submit|show|list|cancel|wait|logs|delete``: GPU jobs (sparkJobs) placed on the subscription's nodes.

Requests: submit ``POST .../resourceGroups/{rg}/providers/ITL.Accelerator/sparkJobs`` with ``{"name", "location"?,
"tags"?, "properties": {"requestedGpus", "requestedMemoryGb", "jobType"?, "workload"?: {"image", "command", "env"},
"gpuModel"?, "priority"?, "maxDurationMinutes"?}}`` (202 + operation, which ends with the job); show ``GET
.../sparkJobs/{name}``; list ``GET`` the resource group's collection, or the subscription's
(``/subscriptions/{sub}/providers/ITL.Accelerator/sparkJobs``) without one, ``?submitted_by=`` for one submitter;
cancel ``POST .../sparkJobs/{name}/cancel`` (202 + operation; 409 when it has ended); delete ``DELETE`` (a finished
job; 204 when there was none). Submit and cancel wait for their operation unless ``--no-wait``; ``job wait`` polls
the job itself until it ends. ``job logs`` reads ``GET .../sparkJobs/{name}/logs`` (``?tail=&since=``), following
``nextLink`` to the lines there are, or with ``--follow`` until the job has ended (``complete``), pausing
``--interval`` seconds whenever a page brought no new line.

Exit codes beyond 0/1/2: a waited-for job that ends ``Failed`` or ``Canceled`` exits 1 (``ERROR: JobFailed: <why>``).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import click

from itlc_accelerator import paths
from itlc_accelerator.commands.audit import MOMENT
from itlc_accelerator.errors import ApiError, interrupted
from itlc_accelerator.lro import Waiter, finish
from itlc_accelerator.output import emit
from itlc_accelerator.session import Session, parse_accelerator, parse_tags, pass_session, tag_option

JOB_TYPES = ("training", "fineTuning", "batchInference")
NO_WAIT = click.option("--no-wait", is_flag=True, help="Print the operation and return at once.")


@click.group("job")
def job() -> None:
    """Accelerator jobs (GPUs, TPUs, NPUs...): submit them, follow them, cancel them."""


@job.command("submit")
@click.argument("name")
@click.argument("command", nargs=-1, metavar="[-- COMMAND [ARG]...]")
@click.option(
    "--accelerator",
    callback=parse_accelerator,
    metavar="KIND[:MODEL]=COUNT",
    help="Devices to reserve, e.g. tpu:v5e=8, npu=4, gpu:h100=8 (or --gpus for GPUs).",
)
@click.option("--gpus", type=click.IntRange(1, 64), help="GPUs to reserve (the short form of --accelerator gpu=N).")
@click.option(
    "--nodes",
    type=click.IntRange(2, 16),
    help="Run on this many nodes at once, --accelerator's COUNT (and --memory-gb) on each (a multi-node job).",
)
@click.option(
    "--memory-gb", type=click.IntRange(0, 65536), help="GiB of device memory to reserve (needed with --gpus)."
)
@click.option("--type", "job_type", type=click.Choice(JOB_TYPES), help="training when left out.")
@click.option("--image", help="Container image to run (left out: the default workload of the job type).")
@click.option(
    "--env", "env", multiple=True, callback=parse_tags, metavar="NAME=VALUE", help="Environment (repeatable)."
)
@click.option("--gpu-model", help="Only nodes with this GPU model.")
@click.option(
    "--vendor",
    help="Who makes the devices (AMD, NVIDIA...; Any: any vendor's). Left out: NVIDIA for GPUs naming no model.",
)
@click.option("--location", "-l", help="Only nodes in this location.")
@click.option("--priority", type=click.IntRange(0, 9), help="0-9, higher first (5 when left out).")
@click.option("--max-duration-minutes", type=click.IntRange(1, 43200), help="Stop it after this long (7 days).")
@click.option(
    "--retry-attempts",
    type=click.IntRange(1, 10),
    help="Run it up to this many times in all when it fails on the DGX Platform (retryStrategy.attempts).",
)
@click.option(
    "--retry-on-exit-code",
    "retry_codes",
    multiple=True,
    metavar="CODE",
    help="Retry only these exit codes (repeatable; a trailing * matches a prefix). Needs --retry-attempts.",
)
@click.option(
    "--preemptible", is_flag=True, help="A higher-priority job of the subscription may stop it (it ends Preempted)."
)
@click.option(
    "--requeue-on-preemption", is_flag=True, help="When preempted, go back to the queue (with --preemptible)."
)
@tag_option()
@NO_WAIT
@pass_session()
def submit(s: Session, name: str, command: tuple[str, ...], **o: Any) -> None:
    """Submit job NAME and wait until it ends (prints the job; exit 1 when it fails or is canceled).

    The container's command comes after `--`: job submit train-1 --gpus 4 --memory-gb 320 --image IMAGE -- python
    train.py --epochs 3. On other accelerators: job submit tune-1 --accelerator tpu:v5e=8 --image IMAGE"""
    if (o["accelerator"] is None) == (o["gpus"] is None):
        raise click.UsageError("Say what the job runs on: --accelerator KIND[:MODEL]=COUNT, or --gpus N.")
    if o["accelerator"] is not None:
        if o["gpu_model"]:
            raise click.UsageError(
                "--gpu-model goes with --gpus; with --accelerator name the model in it (gpu:h100=8)."
            )
        wanted = dict(o["accelerator"])
        if o["vendor"]:
            wanted["vendor"] = o["vendor"]
        if o["memory_gb"] is not None:
            wanted["memoryGb"] = o["memory_gb"]
        if o["nodes"]:
            wanted["nodes"] = o["nodes"]
        properties: dict[str, Any] = {"accelerator": wanted}
    else:
        if o["nodes"]:
            raise click.UsageError("--nodes goes with --accelerator KIND[:MODEL]=COUNT (COUNT on each node).")
        if o["memory_gb"] is None:
            raise click.UsageError("--gpus needs --memory-gb (GiB of GPU memory to reserve).")
        properties = {"requestedGpus": o["gpus"], "requestedMemoryGb": o["memory_gb"]}
        if o["vendor"]:  # the seed's shorthand names no vendor: say it in the accelerator form
            properties = {
                "accelerator": {"kind": "GPU", "count": o["gpus"], "memoryGb": o["memory_gb"], "vendor": o["vendor"]}
            }
    if (command or o["env"]) and not o["image"]:
        raise click.UsageError("A command or --env needs --image (without them the job type's default workload runs).")
    if o["image"]:
        properties["workload"] = {"image": o["image"], "command": list(command), "env": o["env"] or {}}
    optional = {
        "jobType": o["job_type"],
        "gpuModel": o["gpu_model"],
        "priority": o["priority"],
        "maxDurationMinutes": o["max_duration_minutes"],
    }
    properties.update({k: v for k, v in optional.items() if v is not None})
    if o["retry_codes"] and not o["retry_attempts"]:
        raise click.UsageError("--retry-on-exit-code needs --retry-attempts (how many runs in all).")
    if len(o["retry_codes"]) > 4:
        raise click.UsageError(
            "At most 4 --retry-on-exit-code (a strategy holds 5 conditions; the last ends the rest)."
        )
    if o["retry_attempts"]:
        strategy: dict[str, Any] = {"attempts": o["retry_attempts"]}
        if o["retry_codes"]:
            # these codes are retried, any other failure ends the job (AWS Batch retries what no condition names)
            conditions = [{"onExitCode": code, "action": "RETRY"} for code in o["retry_codes"]]
            strategy["evaluateOnExit"] = [*conditions, {"onReason": "*", "action": "EXIT"}]
        properties["retryStrategy"] = strategy
    if o["requeue_on_preemption"] and not o["preemptible"]:
        raise click.UsageError("--requeue-on-preemption goes with --preemptible.")
    if o["preemptible"]:
        properties["preemptible"] = True
        properties["preemptMode"] = "Requeue" if o["requeue_on_preemption"] else "Cancel"
    body: dict[str, Any] = {"name": name}
    if o["location"]:
        body["location"] = o["location"]
    if o["tags"] is not None:
        body["tags"] = o["tags"]
    body["properties"] = properties
    response = s.client.send("POST", paths.jobs(s.need_subscription(), s.need_resource_group()), json=body)
    finish(s, response, label=f"job {name}", kind="job", wait=not o["no_wait"])


@job.command("show")
@click.argument("name")
@pass_session()
def show(s: Session, name: str) -> None:
    """Show job NAME: status and why, node, times, GPU-seconds and cost."""
    emit(s.output, "job", s.client.get(paths.jobs(s.need_subscription(), s.need_resource_group(), name)))


@job.command("list")
@click.option("--mine", is_flag=True, help="Only the jobs I submitted (the token's subject).")
@click.option("--submitted-by", help="Only the jobs this user (a token subject) submitted.")
@click.option("--max-items", type=click.IntRange(min=1), help="Stop after this many.")
@pass_session()
def list_(s: Session, mine: bool, submitted_by: str | None, max_items: int | None) -> None:
    """List the jobs of the resource group, or of the whole subscription without one."""
    if mine and submitted_by:
        raise click.UsageError("Give --mine or --submitted-by, not both.")
    who = s.token_subject() if mine else submitted_by
    path = paths.jobs(s.need_subscription(), s.resource_group)
    body = s.client.list(path, {"submitted_by": who} if who else None, max_items=max_items)
    emit(s.output, "job", body, many=True)


@job.command("cancel")
@click.argument("name")
@NO_WAIT
@pass_session()
def cancel(s: Session, name: str, no_wait: bool) -> None:
    """Cancel job NAME and wait until it has stopped (prints the job; a job that has ended: 409, exit 1)."""
    path = paths.jobs(s.need_subscription(), s.need_resource_group(), name) + "/cancel"
    finish(s, s.client.send("POST", path), label=f"job {name} cancel", kind="job", wait=not no_wait)


@job.command("wait")
@click.argument("name")
@click.option(
    "--interval", type=click.FloatRange(min=0.1), default=5.0, show_default=True, help="Seconds between polls."
)
@pass_session()
def wait(s: Session, name: str, interval: float) -> None:
    """Wait until job NAME ends; prints it. Exit 0 when it Succeeded, 1 when it Failed, was Canceled or Preempted."""
    subscription, group = s.need_subscription(), s.need_resource_group()
    path = paths.jobs(subscription, group, name)

    def probe() -> tuple[str, dict[str, Any], float | None]:
        body = s.client.get(path) or {}
        return str((body.get("properties") or {}).get("status") or "Unknown"), body, None

    resume = " ".join(
        [
            s.prog,
            "job",
            "wait",
            shlex.quote(name),
            "--subscription",
            shlex.quote(subscription),
            "-g",
            shlex.quote(group),
        ]
    )
    body = Waiter(s, f"job {name}", resume).wait(probe, every=interval)
    emit(s.output, "job", body)
    status = body["properties"]["status"]
    if status != "Succeeded":
        reason = body["properties"].get("statusReason") or f"The job ended {status}."
        code = {"Failed": "JobFailed", "Preempted": "JobPreempted"}.get(status, "JobCanceled")
        raise ApiError(code, reason)


@job.command("logs")
@click.argument("name")
@click.option("--follow", "-f", is_flag=True, help="Keep printing its new lines until the job ends.")
@click.option("--tail", type=click.IntRange(1, 10000), help="Start with its last N lines.")
@click.option("--since", type=MOMENT, help="Only lines written since: ISO 8601 with a zone, or 30m / 2h / 7d ago.")
@click.option(
    "--interval",
    type=click.FloatRange(min=0.1),
    default=2.0,
    show_default=True,
    help="With --follow: seconds to wait when no new line came.",
)
@pass_session()
def logs(s: Session, name: str, follow: bool, tail: int | None, since: str | None, interval: float) -> None:
    """Print job NAME's log: its lines so far, or with --follow its lines as it writes them until it ends.

    Its text lines on stdout, piped or not (as `kubectl logs`); -o json: one JSON object per line ({"lineNumber",
    "time", "text"}). Ctrl-C stops following (exit 130); the job goes on."""
    as_json = click.get_current_context().params.get("output") == "json"  # asked for, not the piped default
    path = paths.jobs(s.need_subscription(), s.need_resource_group(), name) + "/logs"
    url, params = path, {"tail": str(tail) if tail else None, "since": since}
    try:
        while True:
            page = s.client.get(url, **params) or {}
            for line in page.get("value") or []:
                click.echo(json.dumps(line) if as_json else line.get("text", ""))
            if page.get("complete") or not page.get("nextLink"):
                return
            if not page.get("value"):
                if not follow:
                    return  # every line there is now was printed
                s.runtime.sleep(interval)
            url, params = page["nextLink"], {}
    except KeyboardInterrupt:
        resume = f"{s.prog} job logs {shlex.quote(name)} --follow --since 1m"
        raise interrupted(f"Stopped following; job {name} goes on. To follow it again:\n  {resume}") from None


@job.command("delete")
@click.argument("name")
@pass_session()
def delete(s: Session, name: str) -> None:
    """Delete job NAME once it has ended (its name can then be submitted again)."""
    response = s.client.send("DELETE", paths.jobs(s.need_subscription(), s.need_resource_group(), name))
    if response.status_code == 204:
        click.echo(f"job {name} did not exist: nothing deleted.", err=True)
