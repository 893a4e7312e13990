"""A real Slurm cluster (Debian's Slurm 22.05) on this machine, in a directory of its own: the Slurm execution
backend's local cluster and the cluster of its live tests (tests/slurm/).

Everything lives under ``directory`` — the munge key and socket, ``slurm.conf`` and ``gres.conf``, fake GPU device
files (``mknod ... c 1 3``: character devices, which gres needs; regular files are refused), spool, state and log
directories, pid files — and every daemon runs in the foreground as a child of this process (no systemd, no
daemonising): munged, slurmctld, one slurmd per node (Debian's build has MULTIPLE_SLURMD: ``slurmd -N n1``, each node
on its own port of 127.0.0.1) and slurmrestd (``-a rest_auth/jwt -s openapi/v0.0.38`` on 127.0.0.1, as ``nobody``:
it refuses to run as root). Two clusters side by side work: each has its own directory and ports.

Rules (from a trial run of Slurm on this kind of machine; docs/SLURM.md): every wait is on a condition
with a deadline, never a fixed sleep; ``sinfo``/``squeue``/``scontrol``/``scancel`` always run under ``timeout``
(they hang for minutes when slurmctld is dead); stopping cancels the jobs first (slurmstepd outlives slurmd), then
stops each daemon by its pid, then kills whatever of the cluster is left (each daemon and each slurmstepd carries
``ITL_SLURM_CLUSTER=<directory>`` in its environment, so a cluster left by a process that died is found and stopped
from its directory alone).

Needs root (slurmd starts jobs as their users; ``mknod``). Install the packages with ``./dev slurm-install``.

Command line::

    python -m itl_local.slurm_cluster up --dir D [--port P] [--nodes N] [--gpus G] [--name NAME]   (Ctrl-C stops)
    python -m itl_local.slurm_cluster token --dir D [--user root] [--lifetime 3600]
    python -m itl_local.slurm_cluster stop --dir D     (stops a cluster left running in D)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx
import jwt

#: The REST version Debian's 22.05 slurmrestd is started with (``-s openapi/v0.0.38``).
REST_VERSION = "v0.0.38"
#: The packages ``./dev slurm-install`` installs; these daemons and the JWT plugin must be there.
BINARIES = ("munged", "slurmctld", "slurmd", "slurmrestd", "scontrol", "squeue", "scancel", "sinfo")
JWT_PLUGIN = "/usr/lib/x86_64-linux-gnu/slurm-wlm/auth_jwt.so"
#: Ports are picked below Linux's ephemeral range (32768-60999), so no outgoing connection can hold one meanwhile.
PORT_RANGE = (20000, 32000)
#: The environment variable each daemon (and so each slurmstepd) carries: the cluster's directory.
MARKER = "ITL_SLURM_CLUSTER"
#: Node states of slurmrestd v0.0.38 (lower case there) that mean a node takes jobs.
READY_STATES = frozenset({"idle", "mixed", "allocated"})

DAEMONS = ("munged", "slurmctld", "slurmrestd")  # plus "slurmd-<node>" for each node


class SlurmClusterError(RuntimeError):
    """The cluster did not start, or a daemon did not do what was asked in time (the message says which, with the
    end of its log)."""


def missing_binaries() -> list[str]:
    """What of Debian's Slurm packages is not installed (empty: everything a cluster needs is there)."""
    missing = [name for name in BINARIES if _which(name) is None]
    if not Path(JWT_PLUGIN).exists() and not any(Path("/usr/lib").glob("**/slurm*/auth_jwt.so")):
        missing.append("slurm-wlm-jwt-plugin")
    return missing


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin")


def _port_free(port: int) -> bool:
    """Whether ``port`` can be bound on every address (slurmctld and slurmd listen on 0.0.0.0). With SO_REUSEADDR,
    as the daemons bind: connections of a cluster just stopped (TIME_WAIT) do not make its ports look taken."""
    for address in ("0.0.0.0", "127.0.0.1"):  # noqa: S104 - a probe of the port, closed at once
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((address, port))
            except OSError:
                return False
    return True


def free_ports(count: int, *, avoid: set[int] | None = None) -> list[int]:
    """``count`` distinct ports in :data:`PORT_RANGE` that nothing listens on now (random, so two clusters started at
    once rarely pick the same; a port taken between this and the daemon's start makes :meth:`SlurmCluster.start`
    fail with the daemon's log)."""
    taken = set(avoid or ())
    ports: list[int] = []
    rng = random.SystemRandom()
    for _ in range(2000):
        port = rng.randrange(*PORT_RANGE)
        if port not in taken and _port_free(port):
            ports.append(port)
            taken.add(port)
            if len(ports) == count:
                return ports
    raise SlurmClusterError(f"no {count} free ports in {PORT_RANGE}")


def _listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as probe:
        probe.settimeout(1.0)
        return probe.connect_ex((host, port)) == 0


def wait_until(
    condition: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.05, max_interval: float = 0.5
) -> Any:
    """Poll ``condition`` until it returns something truthy (returned) or ``timeout`` seconds pass
    (:class:`SlurmClusterError` naming ``what``). The interval grows from ``interval`` to ``max_interval``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise SlurmClusterError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)
        interval = min(interval * 1.5, max_interval)


@dataclass
class _Daemon:
    name: str
    argv: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = None


class SlurmCluster:
    """One Slurm cluster in ``directory``: ``nodes`` nodes named ``n1``, ``n2``... of ``gpus_per_node`` fake GPUs
    each (``gpu:<gpu_type>:<gpus_per_node>``, files ``directory/dev/nvidia0..``) and ``cpus_per_node`` CPUs (what
    slurm.conf says: ``SlurmdParameters=config_overrides``, so the machine's own 2 cores are no limit), in one
    default partition ``partition``. ``kill_wait`` (seconds between a cancel's SIGTERM and SIGKILL), ``min_job_age``
    (seconds a finished job stays known to slurmctld; 2 is Slurm's least useful value) and ``slurmd_timeout``
    (seconds without an answer before slurmctld marks a node DOWN) go into slurm.conf as they are. Ports: given, or
    free ones found at :meth:`start`.

    A context manager (``with SlurmCluster(d) as cluster:`` starts and stops it). Needs root.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        cluster_name: str = "itl",
        nodes: int = 2,
        gpus_per_node: int = 8,
        gpu_type: str = "h100",
        cpus_per_node: int = 16,
        real_memory_mb: int = 64000,
        partition: str = "gpu",
        kill_wait: int = 10,
        min_job_age: int = 300,
        slurmd_timeout: int = 300,
        rest_port: int | None = None,
        slurmctld_port: int | None = None,
        slurmd_ports: list[int] | None = None,
        start_timeout: float = 90.0,
        node_names: list[str] | None = None,
    ):
        if node_names:
            nodes = len(node_names)
        if nodes < 1 or gpus_per_node < 0:
            raise ValueError("a cluster has at least one node and no negative GPU count")
        if slurmd_ports is not None and len(slurmd_ports) != nodes:
            raise ValueError("slurmd_ports names one port per node")
        self.directory = Path(directory).resolve()
        self.cluster_name = cluster_name
        self.node_names = list(node_names) if node_names else [f"n{i}" for i in range(1, nodes + 1)]
        self.gpus_per_node = gpus_per_node
        self.gpu_type = gpu_type
        self.cpus_per_node = cpus_per_node
        self.real_memory_mb = real_memory_mb
        self.partition = partition
        self.kill_wait = kill_wait
        self.min_job_age = min_job_age
        self.slurmd_timeout = slurmd_timeout
        self.rest_port = rest_port
        self.slurmctld_port = slurmctld_port
        self.slurmd_ports = list(slurmd_ports) if slurmd_ports else None
        self.start_timeout = start_timeout
        self.hostname = socket.gethostname().split(".")[0]
        self._daemons: dict[str, _Daemon] = {}
        self._started = False
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------------------------------------ paths
    @property
    def conf(self) -> Path:
        """``slurm.conf``; commands find it through ``SLURM_CONF`` (:attr:`env`)."""
        return self.directory / "etc" / "slurm.conf"

    @property
    def munge_socket(self) -> Path:
        return self.directory / "munge" / "munge.sock"

    @property
    def jwt_key_path(self) -> Path:
        return self.directory / "etc" / "jwt_hs256.key"

    @property
    def jwt_key(self) -> bytes:
        """The HS256 signing key of the cluster's JWTs (32 random bytes; what AWS PCS keeps in Secrets Manager)."""
        return self.jwt_key_path.read_bytes()

    @property
    def workdir(self) -> Path:
        """A directory every user may write (mode 1777): a job's working directory and output, whoever it runs as."""
        return self.directory / "work"

    @property
    def log_dir(self) -> Path:
        return self.directory / "log"

    @property
    def jobcomp_log(self) -> Path:
        """``jobcomp/filetxt``'s file: one line per ended job (there is no accounting database)."""
        return self.log_dir / "jobcomp.txt"

    @property
    def url(self) -> str:
        """slurmrestd's base URL (``http://127.0.0.1:PORT``); the API is under ``/slurm/v0.0.38/``."""
        if self.rest_port is None:
            raise SlurmClusterError("the cluster has no REST port before start()")
        return f"http://127.0.0.1:{self.rest_port}"

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm's commands (``scontrol``, ``sbatch``...) against this cluster."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        env["SLURM_CONF"] = str(self.conf)
        env[MARKER] = str(self.directory)
        env["PATH"] = env.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
        return env

    # ------------------------------------------------------------------------------------------------ tokens
    def token(self, user: str = "root", lifetime: float = 3600) -> str:
        """A JWT for slurmrestd (``X-SLURM-USER-TOKEN``, with ``X-SLURM-USER-NAME: user``): HS256 over
        :attr:`jwt_key` with ``sun`` (the user), ``iat`` and ``exp`` (``lifetime`` seconds on; slurmctld refuses a
        token without ``exp``). A root token may act as any user (``X-SLURM-USER-NAME: nobody``)."""
        now = int(time.time())
        claims = {"sun": user, "iat": now, "exp": now + int(lifetime)}
        return jwt.encode(claims, self.jwt_key, algorithm="HS256")

    def headers(self, user: str = "root", lifetime: float = 300) -> dict[str, str]:
        """slurmrestd's auth headers for ``user``."""
        return {"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": self.token(user, lifetime)}

    # ------------------------------------------------------------------------------------------------ set-up
    def _prepare(self) -> None:
        missing = missing_binaries()
        if missing:
            raise SlurmClusterError(f"Slurm is not installed (missing: {', '.join(missing)}); run ./dev slurm-install")
        if os.geteuid() != 0:
            raise SlurmClusterError("a local Slurm cluster needs root (slurmd starts jobs as their users; mknod)")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.directory.chmod(0o755)
        # munged checks the socket's directories, and slurmrestd (nobody) and jobs of other users read the
        # configuration: every parent must be world-searchable
        for parent in self.directory.parents:
            if not parent.stat().st_mode & stat.S_IXOTH:
                raise SlurmClusterError(
                    f"{parent} is not world-searchable (o+x): munge and slurmrestd (run as nobody) need every parent "
                    f"of {self.directory} to be; use a directory made with tempfile.mkdtemp() under /tmp, chmod 0755"
                )
        for sub, mode in (
            ("etc", 0o755),
            ("munge", 0o755),
            ("run", 0o755),
            ("log", 0o755),
            ("state", 0o700),
            ("spool", 0o755),
            ("dev", 0o755),
            ("work", 0o1777),
        ):
            path = self.directory / sub
            path.mkdir(exist_ok=True)
            path.chmod(mode)
        for node in self.node_names:
            (self.directory / "spool" / node).mkdir(exist_ok=True)
        key = self.directory / "munge" / "munge.key"
        if not key.exists():
            _write_secret(key, secrets.token_bytes(1024))
        if not self.jwt_key_path.exists():
            _write_secret(self.jwt_key_path, secrets.token_bytes(32))
        for i in range(self.gpus_per_node):
            device = self.directory / "dev" / f"nvidia{i}"
            if not device.exists():
                os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers: harmless to open
        if self.slurmctld_port is None or self.rest_port is None or self.slurmd_ports is None:
            given = {p for p in (self.slurmctld_port, self.rest_port, *(self.slurmd_ports or [])) if p}
            ports = iter(free_ports(2 + len(self.node_names), avoid=given))
            self.slurmctld_port = self.slurmctld_port or next(ports)
            self.rest_port = self.rest_port or next(ports)
            self.slurmd_ports = self.slurmd_ports or [next(ports) for _ in self.node_names]
        all_ports = [self.slurmctld_port, self.rest_port, *self.slurmd_ports]
        if len(set(all_ports)) != len(all_ports):
            raise SlurmClusterError(f"the cluster's ports must differ: {all_ports}")
        busy = [p for p in all_ports if not _port_free(p)]
        if busy:
            raise SlurmClusterError(f"ports already in use: {busy} (another cluster?)")
        (self.directory / "etc" / "plugstack.conf").write_text("")
        self.conf.write_text(self.slurm_conf())
        (self.directory / "etc" / "gres.conf").write_text(self.gres_conf())
        (self.directory / "cluster.json").write_text(
            json.dumps(
                {
                    "cluster_name": self.cluster_name,
                    "url": self.url,
                    "rest_version": REST_VERSION,
                    "nodes": self.node_names,
                    "slurmctld_port": self.slurmctld_port,
                    "slurmd_ports": self.slurmd_ports,
                    "jwt_key_path": str(self.jwt_key_path),
                },
                indent=2,
            )
        )

    def slurm_conf(self) -> str:
        """The cluster's slurm.conf (written by :meth:`start`)."""
        d = self.directory
        assert self.slurmd_ports is not None
        lines = [
            f"ClusterName={self.cluster_name}",
            f"SlurmctldHost={self.hostname}(127.0.0.1)",
            f"SlurmctldPort={self.slurmctld_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "CredType=cred/munge",
            "AuthAltTypes=auth/jwt",
            f"AuthAltParameters=jwt_key={self.jwt_key_path}",
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/run/slurmctld.pid",
            f"SlurmdPidFile={d}/run/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log",
            f"SlurmdLogFile={d}/log/slurmd-%n.log",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            f"PlugStackConfig={d}/etc/plugstack.conf",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={self.jobcomp_log}",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "GresTypes=gpu",
            "SchedulerParameters=batch_sched_delay=0",
            "SlurmdParameters=config_overrides",
            "ReturnToService=2",
            f"MinJobAge={self.min_job_age}",
            f"KillWait={self.kill_wait}",
            f"SlurmdTimeout={self.slurmd_timeout}",
            "InactiveLimit=0",
            "MailProg=/bin/true",
        ]
        for node, port in zip(self.node_names, self.slurmd_ports, strict=True):
            gres = f" Gres=gpu:{self.gpu_type}:{self.gpus_per_node}" if self.gpus_per_node else ""
            lines.append(
                f"NodeName={node} NodeHostname={self.hostname} NodeAddr=127.0.0.1 Port={port} "
                f"CPUs={self.cpus_per_node} RealMemory={self.real_memory_mb}{gres} State=UNKNOWN"
            )
        lines.append(f"PartitionName={self.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        return "\n".join(lines) + "\n"

    def gres_conf(self) -> str:
        """The cluster's gres.conf: autodetection off, each node's GPUs the fake device files (a count without
        ``File=`` makes a node INVAL: "count reported lower than configured")."""
        if not self.gpus_per_node:
            return "AutoDetect=off\n"
        files = f"{self.directory}/dev/nvidia[0-{self.gpus_per_node - 1}]"
        if self.gpus_per_node == 1:
            files = f"{self.directory}/dev/nvidia0"
        lines = [f"NodeName={node} Name=gpu Type={self.gpu_type} File={files}" for node in self.node_names]
        return "AutoDetect=off\n" + "\n".join(lines) + "\n"

    # ------------------------------------------------------------------------------------------------ start
    def start(self) -> Self:
        """Start munged, slurmctld, every slurmd and slurmrestd; return once every node is idle as slurmrestd
        reports it. Raises :class:`SlurmClusterError` (with the failing daemon's log) after stopping what started."""
        if self._started:
            raise SlurmClusterError(f"the cluster in {self.directory} is already started")
        began = time.monotonic()
        self.stop_leftovers()
        self._prepare()
        self._started = True
        try:
            self._start_munged()
            self._start_slurmctld()
            for node in self.node_names:
                self.start_slurmd(node, wait=False)
            self.start_slurmrestd()
            self.wait_nodes({"idle"}, timeout=self.start_timeout)
        except BaseException:
            self.stop()
            raise
        self.timings["start_seconds"] = time.monotonic() - began
        return self

    def _spawn(self, name: str, argv: list[str], *, env: Mapping[str, str] | None = None) -> _Daemon:
        log = self.log_dir / f"{name}.out"
        with log.open("ab") as out:
            process = subprocess.Popen(  # noqa: S603 - argv of installed Slurm binaries, no shell
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env or self.env),
                cwd=self.directory,
                start_new_session=True,  # a Ctrl-C in the terminal reaches this process only: stop() ends them
            )
        (self.directory / "run" / f"{name}.pid").write_text(f"{process.pid}\n")
        daemon = _Daemon(name, argv, log, process)
        self._daemons[name] = daemon
        return daemon

    def _alive(self, name: str) -> bool:
        daemon = self._daemons.get(name)
        return bool(daemon and daemon.process and daemon.process.poll() is None)

    def _check_alive(self, name: str) -> None:
        daemon = self._daemons.get(name)
        if daemon and daemon.process and daemon.process.poll() is not None:
            raise SlurmClusterError(f"{name} exited with {daemon.process.returncode}:\n{self.log_tail(name)}")

    def log_tail(self, name: str, lines: int = 30) -> str:
        """The last ``lines`` of a daemon's logs (``slurmctld``, ``slurmd-n1``, ``slurmrestd``, ``munged``)."""
        out: list[str] = []
        for path in (self.log_dir / f"{name}.log", self.log_dir / f"{name}.out"):
            if path.exists():
                text = path.read_text(errors="replace").splitlines()[-lines:]
                out += [f"--- {path}", *text]
        return "\n".join(out)

    def _start_munged(self) -> None:
        d = self.directory / "munge"
        munged = _which("munged")
        assert munged
        self._spawn(
            "munged",
            [
                munged,
                "--foreground",
                "--force",
                f"--key-file={d}/munge.key",
                f"--socket={self.munge_socket}",
                f"--pid-file={self.directory}/run/munged.pid.own",
                f"--log-file={self.log_dir}/munged.log",
                f"--seed-file={d}/munge.seed",
            ],
        )

        def ready() -> bool:
            self._check_alive("munged")
            with socket.socket(socket.AF_UNIX) as probe:
                probe.settimeout(1.0)
                return self.munge_socket.exists() and probe.connect_ex(str(self.munge_socket)) == 0

        wait_until(ready, timeout=self.start_timeout, what="munged's socket")
        self.munge_socket.chmod(0o777)

    def _start_slurmctld(self) -> None:
        slurmctld = _which("slurmctld")
        assert slurmctld and self.slurmctld_port
        self._spawn("slurmctld", [slurmctld, "-D", "-i", "-f", str(self.conf)])
        port = self.slurmctld_port

        def ready() -> bool:
            self._check_alive("slurmctld")
            return _listening(port)

        wait_until(ready, timeout=self.start_timeout, what="slurmctld to listen")

    def start_slurmd(self, node: str, *, wait: bool = True) -> None:
        """Start (again) the slurmd of ``node``; ``wait``: return once it listens and the node is no longer
        NOT_RESPONDING (``*``) as slurmctld sees it."""
        if node not in self.node_names:
            raise ValueError(f"no node {node!r} in this cluster")
        if self._alive(f"slurmd-{node}"):
            raise SlurmClusterError(f"the slurmd of {node} is already running")
        slurmd = _which("slurmd")
        assert slurmd and self.slurmd_ports
        port = self.slurmd_ports[self.node_names.index(node)]
        self._spawn(f"slurmd-{node}", [slurmd, "-D", "-N", node, "-f", str(self.conf)])

        def ready() -> bool:
            self._check_alive(f"slurmd-{node}")
            return _listening(port)

        wait_until(ready, timeout=self.start_timeout, what=f"the slurmd of {node} to listen")
        if wait:
            wait_until(
                lambda: "NOT_RESPONDING" not in self.node_flags(node),
                timeout=self.start_timeout,
                what=f"{node} to respond to slurmctld",
            )

    def start_slurmrestd(self) -> None:
        """Start slurmrestd as ``nobody`` (JWT auth, v0.0.38) and return once it answers."""
        if self._alive("slurmrestd"):
            raise SlurmClusterError("slurmrestd is already running")
        slurmrestd = _which("slurmrestd")
        assert slurmrestd and self.rest_port
        env = {**self.env, "SLURM_JWT": "daemon"}
        self._spawn(
            "slurmrestd",
            [
                slurmrestd,
                "-f",
                str(self.conf),
                "-u",
                "nobody",
                "-g",
                "nogroup",
                "-a",
                "rest_auth/jwt",
                "-s",
                f"openapi/{REST_VERSION}",
                f"127.0.0.1:{self.rest_port}",
            ],
            env=env,
        )

        def ready() -> bool:
            self._check_alive("slurmrestd")
            return self._rest("GET", "ping", quiet=True) is not None

        wait_until(ready, timeout=self.start_timeout, what="slurmrestd to answer")

    # ------------------------------------------------------------------------------------------------ reads
    def _rest(self, method: str, path: str, *, quiet: bool = False, **kwargs: Any) -> dict[str, Any] | None:
        """One slurmrestd call as root; None when it cannot be reached (``quiet``) — a 2xx body otherwise."""
        try:
            response = httpx.request(
                method,
                f"{self.url}/slurm/{REST_VERSION}/{path}",
                headers=self.headers("root"),
                timeout=httpx.Timeout(10.0, connect=2.0),
                **kwargs,
            )
        except httpx.HTTPError:
            if quiet:
                return None
            raise
        if response.status_code >= 400:
            if quiet:
                return None
            raise SlurmClusterError(f"slurmrestd answered {response.status_code} to {method} {path}: {response.text}")
        body: dict[str, Any] = response.json()
        return body

    def nodes(self) -> dict[str, dict[str, Any]]:
        """slurmrestd's nodes by name (v0.0.38 shapes: ``state`` lower case, ``state_flags``...). Empty when
        slurmrestd does not answer."""
        body = self._rest("GET", "nodes", quiet=True) or {}
        return {n["name"]: n for n in body.get("nodes", [])}

    def node_flags(self, node: str) -> set[str]:
        """A node's state and its flags, upper case (``IDLE``, ``DRAIN``, ``NOT_RESPONDING``...); ``UNKNOWN``
        when slurmrestd does not answer."""
        info = self.nodes().get(node)
        if not info:
            return {"UNKNOWN"}
        return {str(info.get("state", "")).upper(), *(str(f).upper() for f in info.get("state_flags") or [])}

    def wait_nodes(
        self,
        states: set[str] | frozenset[str],
        *,
        nodes: list[str] | None = None,
        timeout: float = 60.0,
    ) -> dict[str, dict[str, Any]]:
        """Wait until each of ``nodes`` (default: all) is in one of ``states`` (slurmrestd's lower-case words:
        ``idle``, ``mixed``, ``allocated``, ``down``...) with no flag (DRAIN, NOT_RESPONDING...); returns the nodes.
        Raises :class:`SlurmClusterError` at ``timeout``."""
        wanted = set(states)
        names = nodes or self.node_names

        def ready() -> dict[str, dict[str, Any]] | None:
            for name in ("slurmctld", "slurmrestd", *(f"slurmd-{n}" for n in names)):
                self._check_alive(name)
            current = self.nodes()
            if all(
                n in current and current[n].get("state") in wanted and not current[n].get("state_flags") for n in names
            ):
                return current
            return None

        try:
            found: dict[str, dict[str, Any]] = wait_until(ready, timeout=timeout, what=f"nodes {names} {wanted}")
        except SlurmClusterError as exc:
            seen = {n: (v.get("state"), v.get("state_flags"), v.get("reason")) for n, v in self.nodes().items()}
            raise SlurmClusterError(f"{exc}; they are {seen}\n{self.log_tail('slurmctld')}") from None
        return found

    def run(self, *argv: str, timeout: float = 20.0, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A Slurm command against this cluster under ``timeout`` (they hang when slurmctld is dead), e.g.
        ``cluster.run("scontrol", "update", "nodename=n1", "state=drain", "reason=x")``."""
        binary = _which(argv[0])
        if binary is None:
            raise SlurmClusterError(f"{argv[0]} is not installed")
        timeout_bin = _which("timeout") or "timeout"
        result = subprocess.run(  # noqa: S603 - installed Slurm binaries, no shell
            [timeout_bin, "-k", "2", str(int(timeout)), binary, *argv[1:]],
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
        )
        if check and result.returncode != 0:
            raise SlurmClusterError(
                f"{' '.join(argv)} exited with {result.returncode}: {result.stderr.strip() or result.stdout.strip()}"
            )
        return result

    def job_ids(self, states: str = "all") -> list[int]:
        """The job ids slurmctld knows (``squeue -t states``)."""
        result = self.run("squeue", "-h", "-o", "%i", "-t", states, check=False)
        return [int(x) for x in result.stdout.split() if x.isdigit()]

    def drain(self, node: str, reason: str = "itl test") -> None:
        """``scontrol update nodename=... state=drain`` (slurmrestd v0.0.38 has no node update)."""
        self.run("scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}")

    def resume(self, node: str) -> None:
        """``scontrol update nodename=... state=resume``."""
        self.run("scontrol", "update", f"nodename={node}", "state=resume")

    # ------------------------------------------------------------------------------------------------ faults
    def pid(self, name: str) -> int | None:
        """The pid of a daemon this object started and that still runs (``slurmctld``, ``slurmd-n1``...)."""
        daemon = self._daemons.get(name)
        if daemon and daemon.process and daemon.process.poll() is None:
            return daemon.process.pid
        return None

    def _stop_daemon(self, name: str, sig: signal.Signals = signal.SIGTERM, *, timeout: float = 30.0) -> None:
        daemon = self._daemons.get(name)
        if not daemon or not daemon.process:
            return
        process = daemon.process
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(sig)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                process.wait(timeout=10)
        (self.directory / "run" / f"{name}.pid").unlink(missing_ok=True)

    def kill_slurmd(self, node: str) -> None:
        """SIGKILL the slurmd of ``node`` (a crash: its jobs' slurmstepd go on running; slurmctld marks the node DOWN
        after ``slurmd_timeout``)."""
        self._stop_daemon(f"slurmd-{node}", signal.SIGKILL)

    def stop_slurmd(self, node: str) -> None:
        """Stop the slurmd of ``node`` cleanly (SIGTERM)."""
        self._stop_daemon(f"slurmd-{node}")

    def restart_slurmctld(self) -> None:
        """Stop slurmctld (SIGTERM: it saves its state) and start it again from that state; return once it answers
        through slurmrestd."""
        self._stop_daemon("slurmctld")
        self._start_slurmctld()
        wait_until(lambda: self._rest("GET", "ping", quiet=True), timeout=self.start_timeout, what="slurmctld (ping)")

    def kill_slurmctld(self) -> None:
        """SIGKILL slurmctld (no state saved since its last periodic save). :meth:`start_slurmctld` starts it."""
        self._stop_daemon("slurmctld", signal.SIGKILL)

    def start_slurmctld(self) -> None:
        """Start slurmctld (after :meth:`kill_slurmctld`); return once it listens."""
        if self._alive("slurmctld"):
            raise SlurmClusterError("slurmctld is already running")
        self._start_slurmctld()

    def stop_slurmrestd(self) -> None:
        """Stop slurmrestd (SIGINT, as it wants): the REST API is unreachable (connection refused) until
        :meth:`start_slurmrestd`."""
        self._stop_daemon("slurmrestd", signal.SIGINT)

    def freeze(self, name: str) -> None:
        """SIGSTOP a daemon (``slurmrestd``: its port accepts connections that are never answered — a client's read
        timeout; ``slurmctld``: slurmrestd's calls hang). :meth:`thaw` resumes it; :meth:`stop` thaws first."""
        pid = self.pid(name)
        if pid is None:
            raise SlurmClusterError(f"{name} is not running")
        os.kill(pid, signal.SIGSTOP)

    def thaw(self, name: str) -> None:
        """SIGCONT a daemon stopped by :meth:`freeze`."""
        pid = self.pid(name)
        if pid is not None:
            os.kill(pid, signal.SIGCONT)

    # ------------------------------------------------------------------------------------------------ stop
    def stop(self) -> None:
        """Cancel every job, then stop slurmrestd, each slurmd, slurmctld and munged by their pids, then kill what
        of the cluster is left (a slurmstepd whose slurmd died; a daemon of an earlier process). Leaves nothing of
        the cluster running; safe to call again, or on a cluster that never started."""
        for name in list(self._daemons):
            self.thaw(name)
        if self._alive("slurmctld"):
            self._cancel_all()
        self._stop_daemon("slurmrestd", signal.SIGINT)
        for node in self.node_names:
            self._stop_daemon(f"slurmd-{node}")
        self._stop_daemon("slurmctld")
        self._stop_daemon("munged")
        self._daemons.clear()
        self.stop_leftovers()
        self._started = False

    def _cancel_all(self) -> None:
        result = self.run("scancel", f"--partition={self.partition}", check=False)
        if result.returncode != 0:
            return  # slurmctld does not answer: the leftovers' sweep kills the job steps

        def no_jobs_running() -> bool:
            listed = self.run("squeue", "-h", "-o", "%i", "-t", "R,CG,S,CF", check=False)
            return listed.returncode == 0 and not listed.stdout.strip()

        with contextlib.suppress(SlurmClusterError):
            wait_until(no_jobs_running, timeout=self.kill_wait + 30.0, what="the jobs to end")

    def stop_leftovers(self) -> list[int]:
        """Kill every process that carries this cluster's marker (daemons, slurmstepd) and their descendants (a
        job's processes); returns their pids. Used by :meth:`stop`, and by :meth:`start` for a directory whose
        cluster was left running."""
        marked = [pid for pid in _pids() if _environ(pid).get(MARKER) == str(self.directory)]
        if not marked:
            return []
        victims = set(marked)
        children = _children()
        stack = list(marked)
        while stack:
            for child in children.get(stack.pop(), []):
                if child not in victims:
                    victims.add(child)
                    stack.append(child)
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(SlurmClusterError):
            wait_until(lambda: not any(_exists(p) for p in victims), timeout=20, what="killed processes to exit")
        return sorted(victims)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


# ---------------------------------------------------------------------------------------------------- helpers
def _write_secret(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    path.chmod(0o600)


def _pids() -> Iterator[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for pid in _pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(pid)
    return children


def _exists(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has ended: its parent (maybe this process) reaps it


# ---------------------------------------------------------------------------------------------------- command line
def _cmd_up(args: argparse.Namespace) -> int:
    cluster = SlurmCluster(
        args.dir,
        cluster_name=args.name,
        nodes=args.nodes,
        gpus_per_node=args.gpus,
        rest_port=args.port,
        min_job_age=args.min_job_age,
        kill_wait=args.kill_wait,
    )
    stop_now = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stop_now
        stop_now = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C, even when started with SIGINT ignored
    try:
        cluster.start()
        print(
            f"Slurm cluster {cluster.cluster_name!r} ({len(cluster.node_names)} nodes of gpu:{cluster.gpu_type}:"
            f"{cluster.gpus_per_node}) is up in {cluster.timings['start_seconds']:.1f} s"
        )
        print(f"  url:      {cluster.url}   (REST {REST_VERSION}: {cluster.url}/slurm/{REST_VERSION}/ping)")
        print(f"  cluster:  {cluster.cluster_name}")
        print(f"  token:    python -m itl_local.slurm_cluster token --dir {cluster.directory} --user root")
        print("            send it as X-SLURM-USER-TOKEN, with X-SLURM-USER-NAME: root")
        print(f"  jwt key:  {cluster.jwt_key_path}")
        print(f"  commands: SLURM_CONF={cluster.conf} squeue")
        print("Ctrl-C stops it.", flush=True)
        while not stop_now:
            time.sleep(0.5)
            for name in ("slurmctld", "slurmrestd"):
                cluster._check_alive(name)
    except KeyboardInterrupt:
        pass
    finally:
        print("stopping ...", flush=True)
        cluster.stop()
    return 0


def _cmd_token(args: argparse.Namespace) -> int:
    key_path = Path(args.dir).resolve() / "etc" / "jwt_hs256.key"
    if not key_path.exists():
        print(f"no cluster in {args.dir} ({key_path} is missing)", file=sys.stderr)
        return 1
    now = int(time.time())
    claims = {"sun": args.user, "iat": now, "exp": now + args.lifetime}
    print(jwt.encode(claims, key_path.read_bytes(), algorithm="HS256"))
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    killed = SlurmCluster(args.dir).stop_leftovers()
    print(f"stopped {len(killed)} processes" if killed else "nothing of that cluster was running")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m itl_local.slurm_cluster", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a cluster in DIR and keep it up until Ctrl-C")
    up.add_argument("--dir", required=True, help="the cluster's directory (created; its parents must be o+x)")
    up.add_argument("--port", type=int, default=None, help="slurmrestd's port on 127.0.0.1 (default: a free one)")
    up.add_argument("--name", default="itl", help="the cluster's name (default: itl)")
    up.add_argument("--nodes", type=int, default=2, help="nodes n1..nN (default: 2)")
    up.add_argument("--gpus", type=int, default=8, help="fake H100 GPUs per node (default: 8)")
    up.add_argument("--min-job-age", type=int, default=300, help="seconds a finished job stays known (default: 300)")
    up.add_argument("--kill-wait", type=int, default=10, help="seconds from SIGTERM to SIGKILL (default: 10)")
    up.set_defaults(func=_cmd_up)
    token = sub.add_parser("token", help="print a JWT for the cluster in DIR")
    token.add_argument("--dir", required=True)
    token.add_argument("--user", default="root")
    token.add_argument("--lifetime", type=int, default=3600, help="seconds (default: 3600)")
    token.set_defaults(func=_cmd_token)
    stop = sub.add_parser("stop", help="kill whatever of the cluster in DIR is still running")
    stop.add_argument("--dir", required=True)
    stop.set_defaults(func=_cmd_stop)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
