"""Typed httpx client of slurmrestd (Slurm's REST API): the Slurm execution backend's counterpart of
dgx/client.py (docs/SLURM.md).

Rules, as the DGX client's: explicit connect/read timeouts; retries with exponential backoff and full jitter
(tenacity) on transient failures only (errors.py says which), within ``attempts`` tries and ``budget_seconds``;
JWT auth (``X-SLURM-USER-NAME``, ``X-SLURM-USER-TOKEN``) with a token minted from the cluster's signing key, short
lived and minted again before it expires; neither the token nor the key ever appears in a log line or an error
message. One client speaks one REST version (versions.py): ``v0.0.38`` (Slurm 22.05) or ``v0.0.41``-``v0.0.44``
(Slurm 24.05-25.11, AWS PCS).
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, Self, TypeVar

import httpx
import jwt
from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
)

from itl_accelerator.dgx.client import retry_wait
from itl_accelerator.observability import logger
from itl_accelerator.slurm.errors import (
    SlurmAuthError,
    SlurmError,
    SlurmJobNotFound,
    SlurmNodeNotFound,
    SlurmPermanentError,
    SlurmTransientError,
    SlurmUnsupported,
)
from itl_accelerator.slurm.models import SIGNALS, SlurmJob, SlurmJobSpec, SlurmNode
from itl_accelerator.slurm.versions import Dialect, dialect

T = TypeVar("T")

# Slurm's error numbers (slurm/slurm_errno.h) -> what they mean to a caller (errors.py has the table)
_JOB_NOT_FOUND = frozenset({2017, 2136, 2137, 2138, 2139, 2140})
_NODE_NOT_FOUND = frozenset({2018})
_AUTH = frozenset({1007, 2002, 2010, 9008, *range(6000, 6012)})
_TRANSIENT = frozenset({*range(1000, 1026), *range(1800, 1806), 5003, 5004, 5005, 2026, 2041, 2131, 4034})
_PARSE_FAILURE = 9001


class TokenSource(Protocol):
    """Where the client's JWT comes from: :meth:`token` returns one valid for at least the next call."""

    def token(self) -> str: ...


class StaticToken:
    """A token given as it is (e.g. from ``scontrol token lifespan=...``); never refreshed."""

    def __init__(self, token: str):
        self._token = token

    def token(self) -> str:
        return self._token

    def __repr__(self) -> str:
        return "StaticToken(<hidden>)"


class JwtTokenSource:
    """Mints HS256 JWTs from the cluster's signing key (slurm.conf ``AuthAltParameters=jwt_key=...``; AWS PCS keeps
    it in Secrets Manager): claims ``sun`` (the user), ``iat``, ``exp`` = now + ``lifetime_seconds`` (slurmctld
    refuses a token without ``exp``). A token is reused until less than ``refresh_margin_seconds`` of it is left,
    then a new one is minted, so no call goes out with a token about to expire. ``key``: the key's bytes, or a
    callable returning them (read from Secrets Manager when first needed). ``user`` is whom the token names; a
    token for ``root`` or ``SlurmUser`` may act as any user (``X-SLURM-USER-NAME``). Thread-safe."""

    def __init__(
        self,
        key: bytes | Callable[[], bytes],
        *,
        user: str,
        lifetime_seconds: int = 300,
        refresh_margin_seconds: int = 60,
        clock: Callable[[], float] = time.time,
    ):
        if refresh_margin_seconds >= lifetime_seconds:
            raise ValueError("refresh_margin_seconds must be shorter than lifetime_seconds")
        self._key = key
        self.user = user
        self.lifetime_seconds = lifetime_seconds
        self.refresh_margin_seconds = refresh_margin_seconds
        self._clock = clock
        self._token: str | None = None
        self._expires = 0.0
        self._lock = threading.Lock()

    @classmethod
    def from_base64(cls, text: str, **kwargs: Any) -> JwtTokenSource:
        """From the key as base64 text (how a binary key is kept in a secret string or an environment variable)."""
        return cls(base64.b64decode(text.strip(), validate=True), **kwargs)

    def token(self) -> str:
        with self._lock:
            now = self._clock()
            if self._token is None or now >= self._expires - self.refresh_margin_seconds:
                key = self._key() if callable(self._key) else self._key
                issued = int(now)
                self._expires = issued + self.lifetime_seconds
                self._token = jwt.encode(
                    {"sun": self.user, "iat": issued, "exp": int(self._expires)}, key, algorithm="HS256"
                )
            return self._token

    def invalidate(self) -> None:
        """Forget the current token: the next call mints a new one."""
        with self._lock:
            self._token = None

    def __repr__(self) -> str:
        return f"JwtTokenSource(user={self.user!r}, lifetime_seconds={self.lifetime_seconds}, key=<hidden>)"


class SlurmRestClient:
    """Client of one cluster's slurmrestd at ``url`` (``http://host:6820``), speaking ``api_version``, as ``user``
    (``X-SLURM-USER-NAME``: jobs run as this user) with tokens from ``token_source``.

    Units: seconds for timeouts and ``budget_seconds`` (no retry starts after it: bounds a call with its retries);
    ``attempts`` counts the first try. ``http`` is injectable (tests pass a client with a mock transport).
    """

    def __init__(
        self,
        url: str,
        api_version: str,
        user: str,
        token_source: TokenSource,
        *,
        connect_timeout: float = 2.0,
        read_timeout: float = 10.0,
        attempts: int = 3,
        budget_seconds: float = 20.0,
        http: httpx.Client | None = None,
    ):
        self.dialect: Dialect = dialect(api_version)
        self.api_version = api_version
        self.user = user
        self._tokens = token_source
        self._http = http or httpx.Client(
            base_url=url.rstrip("/"),
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            headers={"User-Agent": "itl-accelerator-provider"},
        )
        self._retrying = retry(
            retry=retry_if_exception_type(SlurmTransientError),
            stop=stop_after_attempt(attempts) | stop_after_delay(budget_seconds),
            wait=retry_wait,
            reraise=True,
        )
        self._call = self._retrying(self._once)
        #: The ids of the last listing's job records that could not be read (:meth:`_decoded_jobs`).
        self.unreadable: frozenset[int] = frozenset()

    # ----------------------------------------------------------------------------------------------- transport
    def _once(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        headers = {"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": self._tokens.token()}
        try:
            response = self._http.request(method, path, headers=headers, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise SlurmTransientError(f"slurmrestd unreachable on {method} {path}: {type(exc).__name__}") from exc
        except httpx.TimeoutException as exc:
            raise SlurmTransientError(f"slurmrestd timed out on {method} {path}", ambiguous=True) from exc
        except httpx.TransportError as exc:
            raise SlurmTransientError(
                f"slurmrestd failed on {method} {path}: {type(exc).__name__}", ambiguous=True
            ) from exc
        if response.status_code == 304:
            return {}  # GET .../jobs?update_time=: nothing changed in the cluster since (slurmctld's "no change")
        body = _json(response)
        if 200 <= response.status_code < 300 and body is not None:
            return body
        raise _error(response, body, method, path)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------------------------- jobs
    def submit(self, spec: SlurmJobSpec) -> int:
        """``POST .../job/submit``: the new job's id. Idempotent by the job's name, its marker (the provider names
        each job after its operation id, so the name is unique per submit): when an attempt's answer is lost after
        the request may have reached slurmctld (a read timeout, a 5xx), the next attempt first looks for a job of
        that name and this user (:meth:`find_job`) and returns its id instead of submitting again. Raises
        :class:`SlurmPermanentError` with Slurm's text when the cluster refuses the job (no such partition,
        "Requested node configuration is not available"...), :class:`SlurmTransientError` when it cannot be
        reached within the budget."""
        body = self.dialect.submit_body(spec)
        lost = False

        def attempt() -> int:
            nonlocal lost
            if lost:
                found = self._find_once(name=spec.name)
                if found is not None:
                    logger.info("Slurm submit answer was lost; found the job", extra={"job_id": found.job_id})
                    return found.job_id
            try:
                data = self._once("POST", self.dialect.submit_path(), json=body)
            except SlurmTransientError as exc:
                lost = lost or exc.ambiguous
                raise
            job_id = data.get("job_id")
            if not isinstance(job_id, int) or isinstance(job_id, bool):
                raise SlurmPermanentError(f"slurmrestd accepted the submit but gave no job id: {_texts(data)}")
            return job_id

        result: int = self._retrying(attempt)()
        return result

    def get_job(self, job_id: int) -> SlurmJob:
        """``GET .../job/{id}``. Raises :class:`SlurmJobNotFound` when slurmctld does not know it (never submitted,
        or ended more than ``MinJobAge`` seconds ago: 300 by default)."""
        data = self._call("GET", self.dialect.job_path(job_id))
        for raw in data.get("jobs") or []:
            if isinstance(raw, dict) and raw.get("job_id") == int(job_id):
                job = self._decoded_job(raw)
                if job is None:
                    raise SlurmPermanentError(f"Slurm's record of job {int(job_id)} could not be read")
                return job
        raise SlurmJobNotFound(f"Slurm does not know job {int(job_id)}")

    def jobs(self) -> list[SlurmJob]:
        """``GET .../jobs``: every job slurmctld knows (pending, running, and ended less than ``MinJobAge`` ago),
        by job id."""
        return self._jobs(None)

    def jobs_changed_since(self, epoch: int) -> list[SlurmJob]:
        """The jobs that changed state at or after ``epoch`` (seconds): submitted, started or ended since then.
        ``GET .../jobs?update_time=epoch`` answers 304 Not Modified when nothing changed in the whole cluster
        since (a cheap answer: no job); otherwise slurmctld answers *every* job (its filter is one cluster-wide time, checked
        live), so the client keeps those whose :attr:`SlurmJob.last_event_time` is at or after ``epoch``. A change
        that leaves no time in the job record (a comment, a waiting job's new reason) is not seen."""
        return [job for job in self._jobs(int(epoch)) if (job.update_time or job.last_event_time or 0) >= int(epoch)]

    def listing_since(self, epoch: int) -> list[SlurmJob] | None:
        """``GET .../jobs?update_time=epoch`` as slurmctld answers it: None (304 Not Modified) when nothing in the
        whole cluster changed since ``epoch``, else every job it holds — one request either way (a tracker's read of
        a cluster: itl_accelerator/slurm/platform.py ``ClusterView``)."""
        data = self._call("GET", self.dialect.jobs_path(), params={"update_time": str(int(epoch))})
        if not data:
            return None
        return self._decoded_jobs(data)

    def _jobs(self, update_time: int | None) -> list[SlurmJob]:
        params = {"update_time": str(update_time)} if update_time is not None else None
        return self._decoded_jobs(self._call("GET", self.dialect.jobs_path(), params=params))

    def _decoded_jobs(self, data: dict[str, Any]) -> list[SlurmJob]:
        """A listing's jobs by id. A record this version's adapter cannot read (a state or GRES word it does not
        know) is left out with a warning and its id kept in :attr:`unreadable` — one odd job never stops the reading
        of the others (the view keeps what it knew of it: slurm/platform.py ``ClusterView``)."""
        jobs, unreadable = [], set()
        for raw in data.get("jobs") or []:
            job = self._decoded_job(raw) if isinstance(raw, dict) else None
            if job is not None:
                jobs.append(job)
            elif isinstance(raw, dict) and isinstance(raw.get("job_id"), int):
                unreadable.add(raw["job_id"])
        self.unreadable = frozenset(unreadable)
        return sorted(jobs, key=lambda j: j.job_id)

    def _decoded_job(self, raw: dict[str, Any]) -> SlurmJob | None:
        return _decoded(self.dialect.decode_job, raw, "job", "job_id", raw.get("job_id"))

    def find_job(self, *, name: str | None = None, comment: str | None = None) -> SlurmJob | None:
        """The newest job (highest id) of this client's user whose name and/or comment are exactly these, among
        those slurmctld knows; None when none is. The lookup of an idempotent submit (:meth:`submit`)."""
        if name is None and comment is None:
            raise ValueError("find_job needs a name or a comment")
        found: SlurmJob | None = self._retrying(self._find_once)(name=name, comment=comment)
        return found

    def _find_once(self, *, name: str | None = None, comment: str | None = None) -> SlurmJob | None:
        data = self._once("GET", self.dialect.jobs_path())
        matches = [
            job
            for job in self._decoded_jobs(data)
            if (name is None or job.name == name)
            and (comment is None or job.comment == comment)
            and (job.user_name in (None, self.user))
        ]
        return max(matches, key=lambda j: j.job_id) if matches else None

    def cancel(self, job_id: int, signal: str | None = None) -> bool:
        """``DELETE .../job/{id}``. Without ``signal``: cancel — Slurm sends SIGTERM at once and SIGKILL after the
        cluster's ``KillWait`` (slurm.conf; no per-request grace), and the job ends ``CANCELLED``. With ``signal``
        (``TERM``, ``USR1``...): only sends it, to the batch script and its steps; the job goes on unless that ends
        it (a script that traps TERM and exits 0 ends ``COMPLETED``). A grace period is these two calls:
        ``cancel(id, "TERM")`` now, ``cancel(id)`` once the grace has passed and the job still runs. A job that
        already ended is fine (True); False when slurmctld no longer knows the job."""
        name = None
        if signal is not None:
            name = signal.upper().removeprefix("SIG")
            if name not in SIGNALS:
                raise ValueError(f"signal is one of {sorted(SIGNALS)}")
        try:
            self._call("DELETE", self.dialect.job_path(job_id), params=self.dialect.cancel_params(name) or None)
        except SlurmJobNotFound:
            return False
        return True

    def set_comment(self, job_id: int, comment: str) -> None:
        """``POST .../job/{id}`` ``{"comment": ...}``: set the job's comment (what a job may also do itself with
        ``scontrol update jobid=$SLURM_JOB_ID comment=...``, e.g. to publish its endpoint). Raises
        :class:`SlurmJobNotFound` when slurmctld does not know the job."""
        self._call("POST", self.dialect.job_path(job_id), json=self.dialect.update_body(comment=comment))

    # ----------------------------------------------------------------------------------------------- nodes
    def nodes(self) -> list[SlurmNode]:
        """``GET .../nodes``: every node with its state, flags, reason and gres (total and in use)."""
        data = self._call("GET", self.dialect.nodes_path())
        nodes = (self._decoded_node(raw) for raw in data.get("nodes") or [] if isinstance(raw, dict))
        return [node for node in nodes if node is not None]

    def node(self, name: str) -> SlurmNode:
        """``GET .../node/{name}``. Raises :class:`SlurmNodeNotFound` when the cluster has no such node."""
        data = self._call("GET", self.dialect.node_path(name))
        for raw in data.get("nodes") or []:
            if isinstance(raw, dict) and raw.get("name") == name:
                node = self._decoded_node(raw)
                if node is None:
                    raise SlurmPermanentError(f"Slurm's record of node {name!r} could not be read")
                return node
        raise SlurmNodeNotFound(f"Slurm has no node {name!r}")

    def _decoded_node(self, raw: dict[str, Any]) -> SlurmNode | None:
        """A node record, or None (with a warning) when this version's adapter cannot read it: the sweep then sees
        the node as absent, so nothing is placed on it until it reads again (slurm/platform.py ``node_health``)."""
        return _decoded(self.dialect.decode_node, raw, "node", "node", str(raw.get("name"))[:80])

    def drain_node(self, name: str, reason: str) -> None:
        """``POST .../node/{name}`` ``{"state": ["DRAIN"], "reason"}``: no new job lands there; running ones go on.
        v0.0.41+ only: raises :class:`SlurmUnsupported` on v0.0.38, which serves no node update (its ``/openapi``
        lists ``GET /node/{name}`` alone); there the provider cordons the node itself and submits with
        ``SlurmJobSpec.exclude_nodes`` (or an operator runs ``scontrol update nodename=... state=drain``)."""
        self._update_node(name, "DRAIN", reason)

    def resume_node(self, name: str) -> None:
        """``POST .../node/{name}`` ``{"state": ["RESUME"]}``: undo :meth:`drain_node` (v0.0.41+ only)."""
        self._update_node(name, "RESUME", None)

    def _update_node(self, name: str, state: str, reason: str | None) -> None:
        body = self.dialect.node_update_body(state=state, reason=reason)
        self._call("POST", self.dialect.node_path(name), json=body)

    def ping(self) -> bool:
        """``GET .../ping``: whether slurmrestd answers and reaches slurmctld (errors raise, as any call's)."""
        self._call("GET", self.dialect.ping_path())
        return True


def _decoded(
    decode: Callable[[dict[str, Any]], T], raw: dict[str, Any], what: str, field: str, ident: object
) -> T | None:
    """``decode(raw)``, or None with a warning when the adapter cannot read the record (a word it does not know)."""
    try:
        return decode(raw)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:  # pydantic's errors are ValueErrors
        logger.warning(
            f"A Slurm {what} record could not be read",
            extra={field: ident, "error": type(exc).__name__, "detail": str(exc)[:200]},
        )
        return None


# --------------------------------------------------------------------------------------------------- errors
def _json(response: httpx.Response) -> dict[str, Any] | None:
    try:
        body = response.json()
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _entries(body: dict[str, Any] | None) -> list[dict[str, Any]]:
    errors = (body or {}).get("errors")
    return [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []


def _number(entry: dict[str, Any]) -> int | None:
    # v0.0.38 names it error_number, error_code (submit) or errno (nodes); v0.0.41+ error_number
    for key in ("error_number", "error_code", "errno"):
        value = entry.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _texts(body: dict[str, Any] | None) -> str:
    texts = []
    for entry in _entries(body):
        text = entry.get("description") or entry.get("error") or ""
        if entry.get("error") and entry.get("description") and entry["error"] not in text:
            text = f"{entry['error']}: {text}"
        if text:
            texts.append(str(text))
    return "; ".join(dict.fromkeys(texts))[:300] or "no error text"


def _error(response: httpx.Response, body: dict[str, Any] | None, method: str, path: str) -> SlurmError:
    """The typed error of a failed answer (errors.py has the table)."""
    status = response.status_code
    entries = _entries(body)
    numbers = tuple(n for n in (_number(e) for e in entries) if n is not None)
    texts = _texts(body)
    where = f"{method} {path}"
    logger.info("Slurm refused or failed", extra={"status": status, "path": path, "error_numbers": list(numbers)})
    if status == 429 or status in (502, 503, 504):
        retry_after = response.headers.get("Retry-After")
        return SlurmTransientError(
            f"slurmrestd answered {status} on {where}",
            ambiguous=status != 429,
            status=status,
            error_numbers=numbers,
            retry_after=float(retry_after) if retry_after and retry_after.replace(".", "", 1).isdigit() else None,
        )
    if status in (401, 403):
        return SlurmAuthError(f"slurmrestd refused the credentials ({status}) on {where}", status=status)
    if _JOB_NOT_FOUND & set(numbers):
        return SlurmJobNotFound(f"Slurm does not know the job: {texts}", status=status, error_numbers=numbers)
    if _NODE_NOT_FOUND & set(numbers):
        return SlurmNodeNotFound(f"Slurm does not know the node: {texts}", status=status, error_numbers=numbers)
    if _AUTH & set(numbers):
        return SlurmAuthError(f"Slurm refused the request: {texts}", status=status, error_numbers=numbers)
    if numbers and all(n == -1 for n in numbers) and all(e.get("error") == "Unspecified error" for e in entries):
        # how 22.05 answers a token slurmctld refused (expired, wrong key, unknown user), whatever the path
        return SlurmAuthError(
            f"Slurm refused the request (an unspecified error: a token slurmctld refused?): {texts}",
            status=status,
            error_numbers=numbers,
        )
    if _TRANSIENT & set(numbers) and _PARSE_FAILURE not in numbers:
        return SlurmTransientError(
            f"Slurm could not reach slurmctld on {where}: {texts}", status=status, error_numbers=numbers, ambiguous=True
        )
    if status >= 500 and not entries:
        return SlurmTransientError(
            f"slurmrestd answered {status} without an error on {where}", status=status, ambiguous=True
        )
    if status == 404:
        return SlurmUnsupported(
            f"slurmrestd does not serve {where} (is it started with -s openapi/<this version>?)", status=status
        )
    if 200 <= status < 300:
        return SlurmTransientError(
            f"slurmrestd answered {status} with no JSON body on {where}", status=status, ambiguous=True
        )
    return SlurmPermanentError(f"Slurm refused the request: {texts}", status=status, error_numbers=numbers)
