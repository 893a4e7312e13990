"""The options every command shares (the ITL CLI's conventions) and the session they make.

Options, each with an environment default:

- ``--api-url`` (``CONTROLPLANE_API_URL``, default ``http://127.0.0.1:8003``): the API (the ITL Control Plane's
  gateway, or the local stack).
- ``--token`` (``CONTROLPLANE_TOKEN``): the bearer token; without one the API answers 401.
- ``--subscription`` (``CONTROLPLANE_SUBSCRIPTION``) and ``--resource-group``/``-g`` (``CONTROLPLANE_RESOURCE_GROUP``):
  where the resources are. A command that needs one and has none is a usage error (exit 2).
- ``--output``/``-o`` ``json|table|id``: ``table`` when stdout is a terminal, ``json`` otherwise.

:class:`Runtime` is what tests replace: the HTTP transport, the clock, sleeping, and whether stdout/stderr are
terminals. Pass one as ``obj`` to click (``runner.invoke(accelerator, args, obj=Runtime(...))``).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import click
import httpx

from itlc_accelerator.client import Client

DEFAULT_API_URL = "http://127.0.0.1:8003"
OUTPUT_FORMATS = ("json", "table", "id")


@dataclass
class Runtime:
    """The outside world of a command: replaced in tests, defaults otherwise."""

    transport: httpx.BaseTransport | None = None
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    stdout_tty: bool | None = None  # None: ask the stream
    stderr_tty: bool | None = None

    def is_tty(self, err: bool = False) -> bool:
        flag = self.stderr_tty if err else self.stdout_tty
        if flag is not None:
            return flag
        stream = sys.stderr if err else sys.stdout
        return bool(getattr(stream, "isatty", lambda: False)())


@dataclass
class Session:
    """What a command works with: the client, where its resources are, how to print, and how to resume."""

    client: Client
    token: str | None
    subscription: str | None
    resource_group: str | None
    output: str
    runtime: Runtime
    prog: str = "itlc-accelerator"

    def need_subscription(self) -> str:
        if not self.subscription:
            raise click.UsageError("No subscription: give --subscription or set CONTROLPLANE_SUBSCRIPTION.")
        return self.subscription

    def need_resource_group(self) -> str:
        if not self.resource_group:
            raise click.UsageError("No resource group: give --resource-group/-g or set CONTROLPLANE_RESOURCE_GROUP.")
        return self.resource_group

    def token_subject(self) -> str:
        """The ``sub`` claim of the bearer token (read, not verified: the API verifies it)."""
        if not self.token:
            raise click.UsageError("--mine needs a token (--token or CONTROLPLANE_TOKEN): it lists by the token's sub.")
        return token_subject(self.token)


def token_subject(token: str) -> str:
    """The ``sub`` claim of a JWT, decoded without verifying; a usage error when it is not a JWT with one."""
    parts = token.split(".")
    try:
        if len(parts) != 3:
            raise ValueError
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        subject = payload["sub"]
        if not isinstance(subject, str) or not subject:
            raise ValueError
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise click.UsageError("The token is not a JWT with a 'sub' claim; give --submitted-by instead.") from None
    return subject


def _notice(runtime: Runtime, text: str) -> None:
    """A line on stderr (a wait's spinner line cleared first on a terminal, so the two never share a line)."""
    click.echo(("\r\x1b[K" if runtime.is_tty(err=True) else "") + text, err=True)


def _group_path(ctx: click.Context) -> str:
    """How the user called this CLI: ``itlc-accelerator`` standalone, ``itlc accelerator`` mounted."""
    from itlc_accelerator.main import accelerator

    while ctx.parent is not None and ctx.command is not accelerator:
        ctx = ctx.parent
    return ctx.command_path


def _api_url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """``--api-url`` as given, when it is an absolute http(s) URL with a host; otherwise a usage error (exit 2)."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.BadParameter(f"{value!r} is not an http:// or https:// URL with a host", ctx, param)
    return value.strip()


def pass_session(*, subscription: bool = True, resource_group: bool = True) -> Callable[..., Any]:
    """Add the shared options to a command and call it with a :class:`Session` as its first argument.

    ``subscription``/``resource_group``: whether the command takes those options (whether it *needs* them is the
    command's business: :meth:`Session.need_subscription`)."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(command)
        def run(**kwargs: Any) -> Any:
            ctx = click.get_current_context()
            runtime = ctx.find_object(Runtime) or Runtime()
            output = kwargs.pop("output") or ("table" if runtime.is_tty() else "json")
            token = kwargs.pop("token") or None
            session = Session(
                client=Client(
                    kwargs.pop("api_url"),
                    token,
                    transport=runtime.transport,
                    sleep=runtime.sleep,
                    notice=lambda text: _notice(runtime, text),
                ),
                token=token,
                subscription=kwargs.pop("subscription", None) or None,
                resource_group=kwargs.pop("resource_group", None) or None,
                output=output,
                runtime=runtime,
                prog=_group_path(ctx),
            )
            try:
                return command(session, **kwargs)
            finally:
                session.client.close()

        options = [
            click.option(
                "--api-url",
                envvar="CONTROLPLANE_API_URL",
                default=DEFAULT_API_URL,
                show_default=True,
                show_envvar=True,
                callback=_api_url,
                help="The API's base URL.",
            ),
            click.option(
                "--token",
                envvar="CONTROLPLANE_TOKEN",
                show_envvar=True,
                help="Bearer token (a Keycloak JWT; locally: ./dev token).",
            ),
        ]
        if subscription:
            options.append(
                click.option(
                    "--subscription",
                    envvar="CONTROLPLANE_SUBSCRIPTION",
                    show_envvar=True,
                    help="Subscription id.",
                )
            )
        if resource_group:
            options.append(
                click.option(
                    "--resource-group",
                    "-g",
                    envvar="CONTROLPLANE_RESOURCE_GROUP",
                    show_envvar=True,
                    help="Resource group.",
                )
            )
        options.append(
            click.option(
                "--output",
                "-o",
                type=click.Choice(OUTPUT_FORMATS),
                help="json (the API's body), table, or id (one per line). Default: table on a terminal, else json.",
            )
        )
        for option in reversed(options):
            run = option(run)
        return run

    return decorate


def parse_tags(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str] | None:
    """``--tag k=v`` (repeatable) → ``{"k": "v"}``; None when none was given. A tag without ``=`` is a usage
    error."""
    if not values:
        return None
    tags: dict[str, str] = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"'{value}' is not KEY=VALUE.", ctx=ctx, param=param)
        tags[key] = text
    return tags


#: ``KIND[:MODEL]=COUNT`` (SkyPilot's ``--accelerators tpu-v5e:8``, Slurm's ``--gres=gpu:a100:2``, in one form).
_ACCELERATOR = re.compile(
    r"^(?P<kind>[A-Za-z][A-Za-z0-9]{1,15})(?::(?P<model>[A-Za-z0-9][A-Za-z0-9 ._-]*))?=(?P<count>[0-9]+)$"
)


def parse_accelerator(ctx: click.Context, param: click.Parameter, value: str | None) -> dict[str, str | int] | None:
    """``--accelerator tpu:v5e=8`` → ``{"kind": "tpu", "model": "v5e", "count": 8}`` (the API says the kind in its
    usual spelling); None when not given. Anything else is a usage error (exit 2)."""
    if value is None:
        return None
    found = _ACCELERATOR.match(value.strip())
    if found is None or not 1 <= int(found["count"]) <= 64:
        raise click.BadParameter(
            f"'{value}' is not KIND[:MODEL]=COUNT with COUNT 1 to 64 (tpu:v5e=8, npu=4, gpu:h100=8).",
            ctx=ctx,
            param=param,
        )
    wanted: dict[str, str | int] = {"kind": found["kind"], "count": int(found["count"])}
    if found["model"]:
        wanted["model"] = found["model"]
    return wanted


def tag_option(help_text: str = "Tag KEY=VALUE (repeatable).") -> Callable[..., Any]:
    return click.option("--tag", "tags", multiple=True, callback=parse_tags, metavar="KEY=VALUE", help=help_text)
