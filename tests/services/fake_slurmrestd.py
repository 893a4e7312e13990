"""A stand-in slurmrestd (v0.0.38 shapes) for the service tests and benchmarks/slurm_tracker.py: served through an
httpx ``MockTransport`` to a real :class:`~itl_accelerator.slurm.client.SlurmRestClient`, counting what it is asked.
The live cluster's behaviour it copies is in docs/SLURM.md; tests/slurm/ hold the real one."""

from __future__ import annotations

import json
from typing import Any

import httpx

from itl_accelerator.settings import SlurmClusterSettings
from itl_accelerator.slurm.client import SlurmRestClient, StaticToken
from itl_accelerator.slurm.platform import SlurmPlatform


class FakeSlurmrestd:
    """v0.0.38 as far as the platform asks it: submit (the job RUNNING at once, on its node list), a job, every job
    (304 when nothing changed since ``update_time``), the nodes. ``requests`` counts calls by method and path kind."""

    def __init__(self, clock: Any, nodes: list[str]):
        self.clock = clock
        self.nodes = nodes
        self.jobs: dict[int, dict[str, Any]] = {}
        self.changed = 0.0
        self.requests: dict[str, int] = {}
        #: faults: the next submit is accepted but its answer lost (502); then this many requests answer 503
        self.lose_next_submit = False
        self.unavailable_for = 0
        #: once the next submit's answer is lost, this many requests after it answer 503
        self.then_unavailable_for = 0
        #: a node's GRES as slurmctld reports it (default ``gpu:h100:8``)
        self.gres: dict[str, str] = {}
        #: the job descriptions submitted, in order; the signals sent ``(job id, signal)``; ``fail_comment``: a
        #: comment update answers 500 (slurmctld refusing it)
        self.submitted: list[dict[str, Any]] = []
        self.signals: list[tuple[int, str]] = []
        self.fail_comment = False

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path.split("/v0.0.38", 1)[-1]
        kind = f"{request.method} {path.rstrip('0123456789')}"
        self.requests[kind] = self.requests.get(kind, 0) + 1
        now = int(self.clock())
        if self.unavailable_for > 0:
            self.unavailable_for -= 1
            return httpx.Response(503, text="Service Unavailable")
        if request.method == "POST" and path == "/job/submit":
            body = json.loads(request.content)
            job_id = len(self.jobs) + 1
            job = body["job"]
            self.submitted.append(job)
            self.jobs[job_id] = {
                "job_id": job_id,
                "name": job["name"],
                "comment": job.get("comment", ""),
                "job_state": "RUNNING",
                "start_time": now,
                "submit_time": now,
                "end_time": now + 60 * int(job.get("time_limit") or 60),
                "nodes": job.get("nodelist") or "",
                "exit_code": 0,
                "user_name": "root",
            }
            self.changed = now
            if self.lose_next_submit:
                self.lose_next_submit = False
                self.unavailable_for = self.then_unavailable_for
                return httpx.Response(502, text="Bad Gateway")
            return httpx.Response(200, json={"job_id": job_id, "errors": []})
        if request.method == "GET" and path.startswith("/job/"):
            job = self.jobs.get(int(path.rsplit("/", 1)[1]))
            if job is None:
                return httpx.Response(500, json={"errors": [{"error_number": 2017, "error": "Invalid job id"}]})
            return httpx.Response(200, json={"jobs": [job]})
        if request.method in ("POST", "DELETE") and path.startswith("/job/"):
            job = self.jobs.get(int(path.rsplit("/", 1)[1]))
            if job is None:
                return httpx.Response(500, json={"errors": [{"error_number": 2017, "error": "Invalid job id"}]})
            if request.method == "POST":
                if self.fail_comment:
                    return httpx.Response(500, json={"errors": [{"error_number": 2002, "error": "Access denied"}]})
                job["comment"] = json.loads(request.content)["comment"]
            elif "signal" in request.url.params:
                self.signals.append((job["job_id"], request.url.params["signal"]))
            else:
                job.update(job_state="CANCELLED", end_time=now)
                self.changed = now
            return httpx.Response(200, json={"errors": []})
        if request.method == "GET" and path == "/jobs":
            since = request.url.params.get("update_time")
            if since is not None and self.changed <= int(since):
                return httpx.Response(304)
            return httpx.Response(200, json={"jobs": list(self.jobs.values())})
        if request.method == "GET" and path == "/nodes":
            nodes = [{"name": n, "state": "mixed", "state_flags": [], "gres": self.gres.get(n, "gpu:h100:8"), "gres_used": "gpu:h100:8(IDX:0-7)",
                      "reason": ""} for n in self.nodes]  # fmt: skip
            return httpx.Response(200, json={"nodes": nodes})
        return httpx.Response(404, json={"errors": []})

    def end(self, job_id: int, state: str = "COMPLETED", *, exit_code: int = 0, at: float | None = None) -> None:
        """Job ``job_id`` ends in ``state`` (Slurm's word) with ``exit_code`` (reported as the wait status, as
        v0.0.38 does: ``exit_code << 8``) at ``at`` (epoch seconds; default now)."""
        at = self.clock() if at is None else at
        self.jobs[job_id].update(job_state=state, end_time=int(at), exit_code=exit_code << 8)
        self.changed = self.clock()

    def purge(self, job_id: int) -> None:
        """slurmctld forgets the ended job ``job_id`` (its MinJobAge passed)."""
        del self.jobs[job_id]
        self.changed = self.clock()


def platform_on(fake: FakeSlurmrestd, cluster: SlurmClusterSettings, clock: Any, *, attempts: int = 3) -> SlurmPlatform:
    """The Slurm platform of ``cluster`` speaking to ``fake`` (no waits: ``sleep`` returns at once; ``attempts`` of
    each call by the client, 1: a failure is the step's at once)."""
    http = httpx.Client(base_url=cluster.url, transport=httpx.MockTransport(fake.handle))
    client = SlurmRestClient(cluster.url, "v0.0.38", "root", StaticToken("t"), attempts=attempts, http=http)
    return SlurmPlatform(cluster, client, clock=clock, sleep=lambda seconds: None)
