"""``itl-local``: the local runtime's commands.

- ``itl-local up``       embedded AWS + dev OIDC issuer + API Gateway emulator on 127.0.0.1:8003, the web portal
                         at /portal/ (Ctrl-C stops); prints each request, each workflow step and the functions' logs
                         (``--quiet``: none).
- ``itl-local token``    prints a dev bearer token (stdout: the token alone).
- ``itl-local invoke``   runs one function of template.yaml with an event file, like ``sam local invoke``.
- ``itl-local portal-publish``  uploads the built portal to a deployed stack's portal bucket.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from itl_local.settings import LocalSettings

REPO_ROOT = Path(__file__).resolve().parents[2]


def _settings() -> LocalSettings:
    """The settings as the environment says now (read afresh: ``up`` sets variables as it goes)."""
    from itl_local.settings import LocalSettings

    return LocalSettings.from_environ()


def _home(settings: Any) -> Path:
    home = Path(settings.local_home)
    return home if home.is_absolute() else REPO_ROOT / home


def local_issuer(settings: Any) -> str:
    """The dev issuer URL the local stack serves and the token command signs for."""
    return f"http://127.0.0.1:{settings.local_idp_port}/realms/{settings.oidc_realm}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _require_free_ports(ports: dict[str, int]) -> None:
    """Exit with a clear message when a port the stack needs is taken (moto's server would wait for it forever).

    The probe binds as the servers themselves do, with ``SO_REUSEADDR`` (uvicorn through asyncio, moto through
    werkzeug), so it refuses exactly what they would: a port something listens on. The TIME-WAIT sockets a
    stopped stack leaves for about a minute do not count."""
    for variable, port in ports.items():
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                raise SystemExit(
                    f"127.0.0.1:{port} is in use (another ./dev up?). Stop it, or choose another port with {variable}."
                ) from None


#: How long the stack's servers keep an idle connection open (seconds). Longer than clients keep one in their pools
#: (httpx: 5 s), so a client never sends on a connection the server is closing at that moment: at uvicorn's own 5 s
#: a request now and then got "connection reset by peer" (as load balancers, e.g. ALB's 60 s, outlast clients too).
KEEP_ALIVE_SECONDS = 60


def _serve_in_thread(app: Any, port: int, log_level: str = "warning") -> tuple[Any, threading.Thread]:
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level=log_level,
            lifespan="off",
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
        )
    )
    thread = threading.Thread(target=server.run, name=f"http-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise SystemExit(f"could not start a server on 127.0.0.1:{port} (port in use?)")
        time.sleep(0.02)
    return server, thread


#: The simulator's API key locally (DGX_PLATFORM_API_KEY overrides it).
LOCAL_DGX_API_KEY = "local-dgx-key"
#: The secret the simulator signs its callbacks with locally (DGX_CALLBACK_SECRET overrides it).
LOCAL_DGX_CALLBACK_SECRET = "local-dgx-callback-secret"


def _callback_environment(settings: Any, port: int, callbacks: bool) -> dict[str, str]:
    """The DGX callbacks locally: the simulator calls the local API back (``POST /dgx/callbacks``, as the platform
    calls ``PublicApiUrl/dgx/callbacks`` in AWS), signing with the local secret; without ``callbacks`` the
    workflows are not asked for any and poll (``--no-dgx-callbacks``). An explicit ``DGX_CALLBACK_URL`` wins."""
    url = settings.dgx_callback_url or (f"http://127.0.0.1:{port}/dgx/callbacks" if callbacks else "")
    secret = settings.dgx_callback_secret.get_secret_value() or LOCAL_DGX_CALLBACK_SECRET
    return {"DGX_CALLBACK_URL": url, "DGX_CALLBACK_SECRET": secret}


def portal_origins(port: int) -> list[str]:
    """The origins the local portal is served from (the API's port, by IP and by name)."""
    return [f"http://127.0.0.1:{port}", f"http://localhost:{port}"]


def _local_environment(settings: Any, aws_port: int, idp_port: int) -> dict[str, str]:
    from itl_local.aws import aws_environment, local_bucket_name, local_event_bus_name

    return {
        **aws_environment(aws_port),
        "TABLE_NAME": settings.table_name,
        "CONTROL_PLANE_AUTH_URL": f"http://127.0.0.1:{idp_port}",
        "LOCAL_IDP_PORT": str(idp_port),
        "DGX_PLATFORM_API_URL": f"http://127.0.0.1:{settings.local_dgx_port}",
        "DGX_PLATFORM_API_KEY": settings.dgx_platform_api_key.get_secret_value() or LOCAL_DGX_API_KEY,
        # the embedded S3's bucket for template.yaml's BillingExportBucket (created by `up`)
        "BILLING_EXPORT_BUCKET": settings.billing_export_bucket or local_bucket_name("BillingExportBucket"),
        # and for its AuditArchiveBucket (audit events whose retention ended)
        "AUDIT_ARCHIVE_BUCKET": settings.audit_archive_bucket or local_bucket_name("AuditArchiveBucket"),
        # the embedded AWS's bus for template.yaml's EventBus (state-change events; created by `up`)
        "EVENT_BUS_NAME": settings.event_bus_name or local_event_bus_name("EventBus"),
        # Local default: poll every 2 s (settings default 10 s for real hardware); explicit values win.
        "INSTANCE_POLL_INTERVAL_SECONDS": str(
            settings.instance_poll_interval_seconds
            if "instance_poll_interval_seconds" in settings.model_fields_set
            else 2
        ),
        # Likewise a running job is first checked after 2 s (30 s in AWS), then at most every 10 s (300 s).
        "JOB_POLL_INTERVAL_SECONDS": str(
            settings.job_poll_interval_seconds if "job_poll_interval_seconds" in settings.model_fields_set else 2
        ),
        "JOB_POLL_MAX_INTERVAL_SECONDS": str(
            settings.job_poll_max_interval_seconds
            if "job_poll_max_interval_seconds" in settings.model_fields_set
            else 10
        ),
        # and a live instance checked every 10 s (300 s in AWS)
        "INSTANCE_WATCH_INTERVAL_SECONDS": str(
            settings.instance_watch_interval_seconds
            if "instance_watch_interval_seconds" in settings.model_fields_set
            else 10
        ),
        "POWERTOOLS_TRACE_DISABLED": "true",
        # CloudWatch's embedded-metric lines have no CloudWatch to go to locally: the console's schedule lines and
        # the functions' logs say the same
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_SERVICE_NAME": "itl-accelerator",
        "POWERTOOLS_LOG_LEVEL": settings.log_level,
    }


#: The Slurm nodes of the local cluster (``up --backend slurm``), each of 8 fake H100s: named as the README's and the
#: tests' nodes, so a node registered without a backend runs on the Slurm node of its own name (DEFAULT_NODE_BACKEND).
LOCAL_SLURM_NODES = ("dgx-1", "dgx-2", "dgx-meter", "n1", "n2")
#: The local cluster's name (a node's ``properties.backend.cluster``).
LOCAL_SLURM_CLUSTER = "local"
_REPO = Path(__file__).resolve().parents[2]


def start_local_slurm(
    home: Path, port: int, *, nodes: tuple[str, ...] = LOCAL_SLURM_NODES
) -> tuple[Any, dict[str, str]]:
    """Start a real Slurm cluster for the local stack (Debian's 22.05: itl_local/slurm_cluster.py) and the environment
    that makes it the stack's (:func:`slurm_environment`). Returns ``(cluster, environment)``; stop the cluster with
    ``cluster.stop()``."""
    import tempfile

    from itl_local.slurm_cluster import SlurmCluster

    # munged and slurmrestd (run as nobody) need every parent of the directory searchable: one of /tmp's, one per API
    # port, so a cluster a stack of that port left running (killed) is stopped when the next one starts
    directory = Path(tempfile.gettempdir()) / f"itl-slurm-{port}"
    directory.mkdir(mode=0o755, exist_ok=True)
    directory.chmod(0o755)
    cluster = SlurmCluster(directory, cluster_name=LOCAL_SLURM_CLUSTER, node_names=list(nodes), kill_wait=5)
    cluster.start()
    # the README's jobs run `python train.py` in their working directory: there, the job types' stand-in
    (Path(cluster.workdir) / "train.py").write_text('from itl_workloads._run import main\n\nmain("train.py")\n')
    return cluster, slurm_environment(cluster)


def slurm_environment(cluster: Any, *, default_backend: bool = True) -> dict[str, str]:
    """The environment that makes a running local Slurm ``cluster`` (itl_local/slurm_cluster.py ``SlurmCluster``) one
    of the stack's clusters: ``SLURM_CLUSTERS`` naming it (slurmrestd's URL, its JWT key, its KillWait and MinJobAge,
    the job environment that runs the job types' stand-in workloads and the Ollama stand-in), and — with
    ``default_backend`` — ``DEFAULT_NODE_BACKEND`` (a node registered without a backend runs on the Slurm node of its
    own name)."""
    import base64

    venv_bin = Path(sys.executable).parent
    job_environment = {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "PYTHONPATH": str(_REPO / "local" / "workloads"),
        "SLURM_CONF": str(cluster.conf),
        "ITL_ENDPOINT_HOST": "127.0.0.1",
        "ITL_SIM_STATE_DIR": str(Path(cluster.directory) / "sim-runs"),
        "HOME": str(cluster.workdir),
    }
    clusters = [
        {
            "name": cluster.cluster_name,
            "url": cluster.url,
            "apiVersion": "v0.0.38",
            "user": "root",
            "jwtKey": base64.b64encode(cluster.jwt_key).decode(),
            "partition": cluster.partition,
            "killWaitSeconds": cluster.kill_wait,
            "minJobAgeSeconds": cluster.min_job_age,
            "workingDirectory": str(cluster.workdir),
            "jobEnvironment": job_environment,
            "ollamaServeCommand": "python -m itl_local.ollama_standin",
        }
    ]
    environment = {"SLURM_CLUSTERS": json.dumps(clusters)}
    if default_backend:
        environment["DEFAULT_NODE_BACKEND"] = json.dumps({"type": "Slurm", "cluster": cluster.cluster_name})
    return environment


def cmd_up(args: argparse.Namespace) -> int:
    """Start the whole local stack and block until SIGINT/SIGTERM."""
    settings = _settings()
    port = args.port or settings.service_port
    _require_free_ports(
        {
            "SERVICE_PORT or --port": port,
            "LOCAL_AWS_PORT": settings.local_aws_port,
            "LOCAL_IDP_PORT": settings.local_idp_port,
            "LOCAL_DGX_PORT": settings.local_dgx_port,
        }
    )
    os.environ.update(_local_environment(settings, settings.local_aws_port, settings.local_idp_port))
    registration = _registration_environment(settings, port)
    os.environ.update(registration.environment)
    os.environ.update(_callback_environment(settings, port, not args.no_dgx_callbacks))
    # the API Gateway emulator's request log: what the SLO report counts locally (CloudWatch's metrics in AWS)
    os.environ["API_REQUEST_LOG"] = str(_home(settings) / f"api-requests-{port}.jsonl")
    # the stage's access log (AccessLogSetting: the line a deployed stack writes to its access log group)
    os.environ["API_ACCESS_LOG"] = str(_home(settings) / f"api-access-{port}.jsonl")
    slurm = None
    if args.backend == "slurm":
        slurm, slurm_environment = start_local_slurm(_home(settings), port)
        os.environ.update(slurm_environment)
    from itl_accelerator.settings import get_settings

    get_settings.cache_clear()
    settings = _settings()

    from itl_accelerator.observability import logger
    from itl_local.aws import (
        EmbeddedAws,
        create_buckets,
        create_event_buses,
        create_table,
        load_items,
        make_dynamodb_faithful,
        save_items,
    )
    from itl_local.console import Console
    from itl_local.devauth import PORTAL_CLIENT_ID, idp_app, load_or_create_key
    from itl_local.dgx_simulator import DgxSimulator, SimulatorConfig
    from itl_local.gateway import ApiGatewayEmulator
    from itl_local.portal import PortalSite, portal_config, with_portal
    from itl_local.template import Template
    from itl_local.workflows import (
        MOTO_CONFIG,
        deploy_workflows,
        route_lambda_invocations_in_process,
        workflow_environment,
    )

    template = Template(parameters={"PortalOrigin": portal_origins(port)[0]})
    # the functions answer the portal's origin with CORS as the template configures them (Globals)
    os.environ["CORS_ALLOWED_ORIGIN"] = str(template.global_environment().get("CORS_ALLOWED_ORIGIN", ""))
    # ... and count requests against the template's rate limits (Globals; a RATE_LIMIT_* variable set in the shell
    # wins, as a parameter override would)
    for name, value in template.global_environment().items():
        if name.startswith("RATE_LIMIT_"):
            os.environ.setdefault(name, value)
    get_settings.cache_clear()
    settings = _settings()
    console = None if args.quiet else Console()
    if console is not None:
        console.show_function_logs(logger)
    else:
        Console.silence_function_logs(logger)
        # --quiet: only the start and stop lines — no Python warnings, no server tracebacks (a client that hangs
        # up mid-request, a stopped stack's last connections)
        warnings.simplefilter("ignore")
        for name in ("werkzeug", "itl_local.streams"):  # (the servers' own: log_level below)
            logging.getLogger(name).setLevel(logging.CRITICAL)
    make_dynamodb_faithful()
    aws = EmbeddedAws(settings.local_aws_port)
    aws.start()
    aws.configure(MOTO_CONFIG)
    route_lambda_invocations_in_process(console)
    dynamodb = aws.client("dynamodb")
    create_table(dynamodb, template, settings.table_name)
    create_buckets(aws.client("s3"), template)
    create_event_buses(aws.client("events"), template)
    machines = deploy_workflows(
        template, iam=aws.client("iam"), lambda_client=aws.client("lambda"), sfn=aws.client("stepfunctions")
    )
    os.environ.update(workflow_environment(machines))
    get_settings.cache_clear()
    settings = _settings()
    data = Path(args.data) if args.data else None
    if data and data.exists():
        print(f"loaded {load_items(dynamodb, settings.table_name, data)} items from {data}", flush=True)
    key = load_or_create_key(_home(settings))
    level = "critical" if args.quiet else "warning"
    idp = idp_app(
        key, f"/realms/{settings.oidc_realm}", audience=settings.oidc_audience, portal_origins=portal_origins(port)
    )
    servers = [_serve_in_thread(idp, settings.local_idp_port, level)[0]]
    simulator = DgxSimulator(
        SimulatorConfig(
            api_key=settings.dgx_platform_api_key.get_secret_value(),
            provisioning_seconds=args.dgx_provisioning_seconds,
            callbacks=not args.no_dgx_callbacks,
            callback_secret=settings.dgx_callback_secret.get_secret_value(),
        )
    )
    servers.append(_serve_in_thread(simulator.app, settings.local_dgx_port, level)[0])
    site = PortalSite(portal_config(api_base_url="", authority=local_issuer(settings), client_id=PORTAL_CLIENT_ID))
    gateway = with_portal(ApiGatewayEmulator(template, console=console, access_lines=args.access_log), site)
    servers.append(_serve_in_thread(gateway, port, level)[0])
    from itl_local.aws import trim_stream
    from itl_local.streams import StreamPoller

    poller = StreamPoller(
        template,
        settings.table_name,
        console=console,
        trim=lambda sequence: trim_stream(settings.table_name, sequence),
    )
    poller.start()
    tap = None
    if console is not None:
        from itl_local.event_tap import EventTap

        tap = EventTap(aws.client("events"), aws.client("sqs"), settings.event_bus_name, console.event)
        tap.start()
    runners = []
    if not args.no_schedules:
        from itl_local.schedules import ScheduleRunner, schedules

        report = (lambda s, o, ms: console.schedule(s.name, o, ms)) if console else None
        every = [s for s in schedules(template) if s.function_id != REGISTRATION_FUNCTION]
        # the ITL gateway registration keeps its own rate (every 15 minutes): a gateway is not asked every 5 s
        own_rate = [s for s in schedules(template) if s.function_id == REGISTRATION_FUNCTION]
        runners = [
            ScheduleRunner(every, report=report, every=args.schedule_every or None),
            ScheduleRunner(own_rate, report=report),
        ]
        for runner in runners:
            runner.start()

    # A plain flag, not a threading.Event: the handler runs in the main thread between two bytecodes, possibly
    # inside Event.wait holding the Event's own (non-reentrant) lock, where Event.set would deadlock
    stop_requested: list[bool] = []

    def on_signal(*_: object) -> None:
        if stop_requested:  # a second Ctrl-C while it stops: at once
            _leave(130)
        stop_requested.append(True)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    print(
        f"ITL Accelerator local stack ready: API http://127.0.0.1:{port} | portal http://127.0.0.1:{port}/portal/ | "
        f"issuer {local_issuer(settings)} | embedded AWS http://127.0.0.1:{settings.local_aws_port} | "
        f"DGX simulator {settings.dgx_platform_api_url}"
        + (
            f" | Slurm cluster '{LOCAL_SLURM_CLUSTER}' {slurm.url} (nodes {', '.join(slurm.node_names)})"
            if slurm
            else ""
        )
        + "\n"
        "  token: ./dev token --sub alice --role itl-accelerator-admin --scope /subscriptions/sub-123"
        + (
            f"  (with LOCAL_IDP_PORT={settings.local_idp_port} set: the issuer is in the token)"
            if settings.local_idp_port != 8180
            else ""
        ),
        flush=True,
    )
    if registration.note and console is not None:
        console.note(registration.note)
    if registration.register:
        threading.Thread(
            target=_register_with_gateway, args=(settings, console), name="itl-registration", daemon=True
        ).start()
    # A short sleep in a loop, not a wait with no timeout: CPython runs a signal's handler in the main thread only
    # when that thread runs bytecode. Blocked on a lock with no timeout it was not always woken: a Ctrl-C delivered
    # while the stack was busy went unanswered for minutes (py-spy: MainThread still in Event.wait 30 s after SIGINT).
    while not stop_requested:
        time.sleep(0.2)
    print("stopping...", flush=True)
    for runner in runners:
        runner.stop()
    if tap is not None:
        tap.stop()
    poller.stop()
    for server in servers:
        server.should_exit = True
    if data:
        data.parent.mkdir(parents=True, exist_ok=True)
        print(f"saved {save_items(dynamodb, settings.table_name, data)} items to {data}", flush=True)
    stopping = threading.Thread(target=aws.stop, name="embedded-aws-stop", daemon=True)
    stopping.start()
    stopping.join(timeout=10)  # it only waits for its server loop (0.5 s polls): a stuck request is not waited for
    if slurm is not None:
        slurm.stop()  # its jobs canceled, its daemons stopped: nothing of it outlives the stack
    _leave(0)


def _leave(code: int) -> NoReturn:
    """End the process with ``code`` now, without the interpreter's finalization. ``up`` has saved and printed
    all it keeps by then; finalization would only tear down the servers' daemon threads, which costs seconds of CPU
    and, on CPython 3.13.0, can hang on one of them (python/cpython#123940, #87135): a Ctrl-C then went
    unanswered for minutes on a busy machine."""
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(code)


REGISTRATION_FUNCTION = "ProviderRegistrationFunction"


@dataclass(frozen=True)
class _Registration:
    """Whether ``up`` registers with an ITL gateway: the environment that says so to the stack's functions, whether
    to register at start, and a note for the console."""

    environment: dict[str, str]
    register: bool
    note: str = ""


def _registration_environment(settings: Any, port: int) -> _Registration:
    """Register only with a gateway ``CONTROLPLANE_API_URL`` (or ``CONTROL_PLANE_API_URL``) names explicitly, and
    never with this stack itself (the CLI's walkthrough points ``CONTROLPLANE_API_URL`` at the stack's own API)."""
    base = f"http://127.0.0.1:{port}"
    off = {"CONTROL_PLANE_API_URL": "", "PROVIDER_BASE_URL": base}
    if "control_plane_api_url" not in settings.model_fields_set or not settings.control_plane_api_url:
        return _Registration(off, False)
    from urllib.parse import urlsplit

    gateway = urlsplit(settings.control_plane_api_url)
    if gateway.hostname in ("127.0.0.1", "localhost") and (gateway.port or 80) == port:
        note = "ITL gateway: CONTROLPLANE_API_URL is this stack's own API (the CLI's setting); not registering"
        return _Registration(off, False, note)
    return _Registration({"CONTROL_PLANE_API_URL": settings.control_plane_api_url, "PROVIDER_BASE_URL": base}, True)


def _register_with_gateway(settings: Any, console: Any) -> None:
    """Register with the ITL gateway as the ITL SDK's provider server does (wait for its /health, 30 x 2 s, then
    POST /providers/register), and say how it went; a gateway that is away is a note, not an error."""
    from itl_accelerator.gateway_registration import register_provider

    outcome = register_provider(settings)
    if outcome.registered:
        text = (
            f"ITL gateway: registered ITL.Accelerator with {outcome.gateway} (base URL {settings.provider_base_url}, "
            f"answered {outcome.status})"
        )
    else:
        text = f"ITL gateway: not registered with {outcome.gateway}: {outcome.reason} (the stack works without it)"
    if console is not None:
        console.note(text)


def cmd_token(args: argparse.Namespace) -> int:
    """Print a dev token signed by the local stack's key (created on first use). The subject, roles and scopes are
    checked as the dev issuer's login page checks them: a typo (a role the provider does not know, a scope that is
    no ARM scope) is a usage error here (exit 2), not a 403 later."""
    from itl_local.devauth import DEV_ROLES, SCOPE_PATTERN, SUBJECT_PATTERN, load_or_create_key, mint_token

    problems = []
    if not SUBJECT_PATTERN.fullmatch(args.sub):
        problems.append(f"--sub {args.sub!r}: 1 to 128 letters, digits or . _ @ + -")
    problems += [f"--role {r!r}: not one of {', '.join(DEV_ROLES)}" for r in args.role or [] if r not in DEV_ROLES]
    problems += [
        f"--scope {s!r}: not /subscriptions/{{sub}} or /subscriptions/{{sub}}/resourceGroups/{{rg}}"
        for s in args.scope or []
        if not SCOPE_PATTERN.match(s)
    ]
    if problems:
        print("itl-local token: " + "; ".join(problems), file=sys.stderr)
        return 2
    settings = _settings()
    token = mint_token(
        load_or_create_key(_home(settings)),
        issuer=args.issuer or local_issuer(settings),
        audience=args.audience or settings.oidc_audience,
        subject=args.sub,
        roles=args.role or [],
        scopes=args.scope or [],
        name=args.name,
        lifetime_seconds=args.ttl,
    )
    print(token)
    return 0


def running_stack_environment(settings: Any, template: Any) -> dict[str, str]:
    """The environment of a handler that runs in this process against a running ``itl-local up`` (its embedded
    AWS, issuer and DGX simulator on their ports; its state machines, whose ARNs moto derives from their names)."""
    from itl_local.aws import REGION
    from itl_local.workflows import workflow_environment

    machines = {name: f"arn:aws:states:{REGION}:123456789012:stateMachine:{name}" for name in template.state_machines()}
    port = settings.service_port
    return {
        **_local_environment(settings, settings.local_aws_port, settings.local_idp_port),
        **workflow_environment(machines),
        **_registration_environment(settings, port).environment,
        "API_REQUEST_LOG": str(_home(settings) / f"api-requests-{port}.jsonl"),
    }


def cmd_schedule(args: argparse.Namespace) -> int:
    """Fire one schedule of template.yaml now, against the running local stack; print what its handler returned."""
    from itl_local.schedules import find, fire, schedules
    from itl_local.template import Template

    template = Template()
    if args.name is None:
        for schedule in schedules(template):
            short = json.loads(schedule.input or "{}").get("schedule", "")
            print(f"{short}\t{schedule.name}\t{schedule.expression}")
        return 0
    try:
        schedule = find(template, args.name)
    except KeyError as exc:
        print(exc.args[0], file=sys.stderr)
        return 2
    if args.day is not None and schedule.function_id != "BillingExportFunction":
        print("--day is for the billing export only (./dev schedule billing-export --day YYYY-MM-DD)", file=sys.stderr)
        return 2
    settings = _settings()
    os.environ.update(running_stack_environment(settings, template))
    from itl_accelerator.services.schedules.billing_export import ExportRefused
    from itl_accelerator.settings import get_settings

    get_settings.cache_clear()
    from itl_accelerator.observability import logger

    # the handler's own log lines go to stderr: stdout is its result alone (JSON a script can read). Powertools'
    # handler holds the stdout it found at import, which redirect_stdout alone does not move
    for handler in logger.handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(sys.stderr)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            result = fire(schedule, extra={"day": args.day.isoformat()} if args.day else None)
    except ExportRefused as exc:
        print(f"not exported: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2, default=str))
    return 0


def utc_day(text: str) -> date:
    """A UTC day given as ``YYYY-MM-DD`` exactly (argparse turns the ValueError into a usage error, exit 2)."""
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", text):
        raise ValueError(text)
    return date.fromisoformat(text)


def utc_day_text(text: str) -> str:
    """:func:`utc_day` as its ``YYYY-MM-DD`` text."""
    return utc_day(text).isoformat()


utc_day.__name__ = utc_day_text.__name__ = "day (YYYY-MM-DD)"  # argparse names the type in its usage error


def cmd_export_download(args: argparse.Namespace) -> int:
    """Download a day's billing export (the gzipped FOCUS CSV and its manifest) from the running stack's embedded
    S3 into ``--out``; check the object against the manifest's SHA-256; print the paths."""
    import hashlib

    from itl_local.aws import EmbeddedAws, local_bucket_name

    settings = _settings()
    s3 = EmbeddedAws(settings.local_aws_port).client("s3")
    bucket = settings.billing_export_bucket or local_bucket_name("BillingExportBucket")
    prefix = f"{settings.billing_export_prefix}{args.day[:7]}/{args.day}/"
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    keys = {item["Key"].rsplit("/", 1)[-1]: item["Key"] for item in listed}
    if "manifest.json" not in keys:
        print(
            f"no complete export of {args.day} in s3://{bucket}/{prefix} (fire: ./dev schedule billing-export)",
            file=sys.stderr,
        )
        return 1
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=keys["manifest.json"])["Body"].read())
    data = s3.get_object(Bucket=bucket, Key=manifest["objectKey"])["Body"].read()
    if hashlib.sha256(data).hexdigest() != manifest["sha256"]:
        print(f"{manifest['objectKey']} does not match its manifest's sha256", file=sys.stderr)
        return 1
    data_path = out / manifest["objectKey"].rsplit("/", 1)[-1]
    data_path.write_bytes(data)
    manifest_path = out / f"manifest-{args.day}.json"
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    print(data_path)
    print(manifest_path)
    return 0


def cmd_invoke(args: argparse.Namespace) -> int:
    """Run one function with an event, on a fresh embedded AWS (or ``--endpoint-url``), print its result."""
    from moto import mock_aws

    from itl_local.aws import aws_environment, create_table
    from itl_local.devauth import idp_app, load_or_create_key, mint_token
    from itl_local.lambda_runtime import invoke
    from itl_local.template import Template, load_handler

    template = Template()
    functions = template.functions()
    if args.function not in functions:
        print(f"unknown function {args.function}; one of: {', '.join(sorted(functions))}", file=sys.stderr)
        return 2
    event_text = Path(args.event).read_text()
    settings = _settings()
    idp_port = _free_port()
    key = load_or_create_key(_home(settings))
    env = _local_environment(settings, 0, idp_port)
    if args.endpoint_url:
        env["AWS_ENDPOINT_URL"] = args.endpoint_url
    else:
        env.pop("AWS_ENDPOINT_URL")
        os.environ.pop("AWS_ENDPOINT_URL", None)  # a fresh embedded AWS, whatever the shell points at
    os.environ.update(env)
    issuer = f"http://127.0.0.1:{idp_port}/realms/{settings.oidc_realm}"
    if "${DEV_TOKEN}" in event_text:
        event_text = event_text.replace(
            "${DEV_TOKEN}",
            mint_token(
                key,
                issuer=issuer,
                audience=settings.oidc_audience,
                subject="dev-admin",
                roles=["itl-accelerator-admin"],
                scopes=["/subscriptions/sub-123"],
            ),
        )
    if "${TOMORROW}" in event_text:  # a booking's window ahead (events/CapacityReservationsCreateOrUpdateFunction.json)
        event_text = event_text.replace("${TOMORROW}", (date.today() + timedelta(days=1)).isoformat())
    event = json.loads(event_text)
    from itl_accelerator.settings import get_settings

    get_settings.cache_clear()
    server, _ = _serve_in_thread(idp_app(key, f"/realms/{settings.oidc_realm}"), idp_port)
    try:
        handler = load_handler(functions[args.function]["Handler"])
        if args.endpoint_url:
            result = invoke(handler, event, args.function)
        else:
            with mock_aws():
                import boto3

                from itl_local.aws import make_dynamodb_faithful

                make_dynamodb_faithful()
                create_table(
                    boto3.client("dynamodb", region_name=aws_environment(0)["AWS_REGION"]),
                    template,
                    get_settings().table_name,
                )
                result = invoke(handler, event, args.function)
    finally:
        server.should_exit = True
    print(json.dumps(result, indent=2))
    return 0


def cmd_portal_publish(args: argparse.Namespace) -> int:
    """Upload the built portal and its config.json to a deployed stack's portal bucket (AWS credentials of the
    environment); the bucket, API URL and distribution come from the stack's outputs unless given."""
    import boto3

    from itl_local.devauth import PORTAL_CLIENT_ID
    from itl_local.portal import portal_config, publish

    outputs: dict[str, str] = {}
    if args.stack:
        stacks = boto3.client("cloudformation").describe_stacks(StackName=args.stack)["Stacks"]
        outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    bucket = args.bucket or outputs.get("PortalBucketName")
    api_url = args.api_url or outputs.get("ApiUrl")
    if not bucket or not api_url:
        print("name the stack (--stack) or give --bucket and --api-url", file=sys.stderr)
        return 2
    settings = _settings()
    config = portal_config(
        api_base_url=api_url, authority=args.issuer or settings.issuer, client_id=args.client_id or PORTAL_CLIENT_ID
    )
    distribution = args.distribution_id or outputs.get("PortalDistributionId")
    keys = publish(
        boto3.client("s3"),
        bucket,
        config,
        cloudfront=boto3.client("cloudfront") if distribution else None,
        distribution_id=distribution,
    )
    print(f"published {len(keys)} files to s3://{bucket}" + (f"; invalidated {distribution}" if distribution else ""))
    if outputs.get("PortalUrl"):
        print(outputs["PortalUrl"])
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``itl-local``."""
    parser = argparse.ArgumentParser(
        prog="itl-local", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start the local stack (Ctrl-C stops)")
    up.add_argument("--port", type=int, default=None, help="API port (default SERVICE_PORT, 8003)")
    up.add_argument("--data", default=None, help="load items from this file at start and save them at stop")
    up.add_argument(
        "--dgx-provisioning-seconds",
        type=float,
        default=3.0,
        help="how long the DGX simulator takes to make an instance ready (default 3)",
    )
    up.add_argument(
        "--no-dgx-callbacks",
        action="store_true",
        help="ask the DGX simulator for no callbacks: the workflows learn of ready instances and ended jobs by "
        "polling only (as with no PublicApiUrl in AWS)",
    )
    up.add_argument(
        "--quiet",
        action="store_true",
        help="print only the start and stop lines: no request or workflow step lines, no function logs",
    )
    up.add_argument(
        "--access-log",
        action="store_true",
        help="print each request as the API's access log line (JSON, template.yaml's AccessLogSetting format) in "
        "place of the short request line; the lines always go to the local home's api-access-{port}.jsonl",
    )
    up.add_argument(
        "--no-schedules", action="store_true", help="do not fire template.yaml's schedules (./dev schedule still does)"
    )
    up.add_argument(
        "--backend",
        choices=("dgx", "slurm"),
        default="dgx",
        help="where nodes registered without a backend run: the DGX simulator (default), or a real Slurm cluster "
        f"started on this machine (Debian's Slurm 22.05; nodes {', '.join(LOCAL_SLURM_NODES)} of 8 GPUs each, "
        "named as the nodes registered: docs/SLURM.md)",
    )
    up.add_argument(
        "--schedule-every",
        type=float,
        default=5.0,
        help="fire every schedule this often, seconds (default 5, so their effect shows at once; 0: each at its own "
        "rate in template.yaml)",
    )
    up.set_defaults(func=cmd_up)

    sched = sub.add_parser("schedule", help="fire one schedule of template.yaml now, on the running stack")
    sched.add_argument("name", nargs="?", help="schedule (Function.Event) or function name; none: list them")
    sched.add_argument(
        "--day",
        default=None,
        type=utc_day,
        help="billing-export only: export this UTC day (YYYY-MM-DD) now (days go out in order, none after today)",
    )
    sched.set_defaults(func=cmd_schedule)

    download = sub.add_parser(
        "export-download", help="download a day's FOCUS billing export and its manifest from the embedded S3"
    )
    download.add_argument("day", type=utc_day_text, help="UTC day, YYYY-MM-DD")
    download.add_argument("--out", default="exports", help="directory to write to (default ./exports)")
    download.set_defaults(func=cmd_export_download)

    token = sub.add_parser("token", help="print a dev bearer token")
    token.add_argument("--sub", required=True, help="subject (user id)")
    token.add_argument("--role", action="append", help="role, repeatable (e.g. itl-accelerator-admin)")
    token.add_argument(
        "--scope", action="append", help="ARM scope, repeatable: /subscriptions/{sub}[/resourceGroups/{rg}]"
    )
    token.add_argument("--name", default=None, help="display name")
    token.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds (default 3600)")
    token.add_argument("--audience", default=None)
    token.add_argument("--issuer", default=None)
    token.set_defaults(func=cmd_token)

    inv = sub.add_parser("invoke", help="run one function with an event file (like sam local invoke)")
    inv.add_argument("function", help="logical id in template.yaml, e.g. SparkNodesGetFunction")
    inv.add_argument("-e", "--event", required=True, help="event JSON file (see events/)")
    inv.add_argument("--endpoint-url", default=None, help="use this AWS endpoint (e.g. a running stack's)")
    inv.set_defaults(func=cmd_invoke)

    pub = sub.add_parser(
        "portal-publish", help="upload the built portal and its config.json to a deployed stack's portal bucket"
    )
    pub.add_argument(
        "--stack", default=None, help="the stack's name: bucket, API URL and distribution from its outputs"
    )
    pub.add_argument("--bucket", default=None, help="the portal bucket (output PortalBucketName)")
    pub.add_argument(
        "--api-url", default=None, help="the API's base URL (output ApiUrl, or the Control Plane's domain)"
    )
    pub.add_argument(
        "--issuer", default=None, help="OIDC issuer the portal logs in with (default: the settings' issuer)"
    )
    pub.add_argument("--client-id", default=None, help="Keycloak public client id (default itl-accelerator-portal)")
    pub.add_argument("--distribution-id", default=None, help="CloudFront distribution to invalidate")
    pub.set_defaults(func=cmd_portal_publish)

    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
