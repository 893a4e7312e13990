"""Record slurmrestd v0.0.38's answers from a real cluster into tests/unit/data/slurm_v0.0.38_recorded.json, which
tests/unit/test_slurm_contract.py decodes without a cluster: ``python -m tests.slurm.record_v0038`` (root, Slurm
installed: ./dev slurm-install). About two minutes (one job runs into its 1-minute time limit)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from itl_local.slurm_cluster import SlurmCluster, wait_until

OUT = Path(__file__).resolve().parents[1] / "unit" / "data" / "slurm_v0.0.38_recorded.json"
KEEP = ("meta", "errors", "jobs", "nodes", "job_id")


def main() -> None:
    directory = tempfile.mkdtemp(prefix="itl-slurm-record-")
    os.chmod(directory, 0o755)
    with SlurmCluster(directory, cluster_name="rec", kill_wait=2) as cluster:
        base = f"{cluster.url}/slurm/v0.0.38"

        def call(method: str, path: str, **kwargs: Any) -> dict[str, Any]:
            response = httpx.request(method, base + path, headers=cluster.headers(), timeout=30, **kwargs)
            body: dict[str, Any] = response.json() if response.content.strip() else {}
            return {"status": response.status_code, "body": body}

        def submit(script: str, **job: Any) -> int:
            job = {"partition": "gpu", "tasks": 1, "environment": {"PATH": "/bin:/usr/bin"}, **job}
            job.setdefault("current_working_directory", str(cluster.workdir))
            job.setdefault("standard_output", "/dev/null")
            answer = call("POST", "/job/submit", json={"script": "#!/bin/bash\n" + script, "job": job})
            return int(answer["body"]["job_id"])

        def state_of(job_id: int) -> str:
            return str(call("GET", f"/job/{job_id}")["body"]["jobs"][0]["job_state"])

        def wait(job_id: int, state: str, timeout: float = 180) -> dict[str, Any]:
            wait_until(lambda: state_of(job_id) == state, timeout=timeout, what=f"{job_id} {state}")
            return call("GET", f"/job/{job_id}")

        timeout_job = submit("sleep 600", name="timeout", time_limit=1)
        recorded: dict[str, Any] = {
            "submit": call(
                "POST",
                "/job/submit",
                json={
                    "script": "#!/bin/bash\nexit 3",
                    "job": {
                        "name": "exit3",
                        "environment": {"PATH": "/bin"},
                        "current_working_directory": str(cluster.workdir),
                        "standard_output": "/dev/null",
                    },
                },
            )
        }
        exit3 = recorded["submit"]["body"]["job_id"]
        completed = submit("sleep 1", name="two-gpu", gres="gpu:h100:2", nodes=2, comment="op-1")
        running = submit("sleep 600", name="running", gres="gpu:8", nodelist="n1")
        pending = submit("sleep 600", name="pending", gres="gpu:8", nodelist="n1")
        recorded["completed"] = wait(completed, "COMPLETED")
        recorded["failed_exit_3"] = wait(exit3, "FAILED")
        recorded["running"] = wait(running, "RUNNING")
        wait_until(
            lambda: call("GET", f"/job/{pending}")["body"]["jobs"][0]["state_reason"] == "Resources",
            timeout=60,
            what="pending for Resources",
        )
        recorded["pending"] = call("GET", f"/job/{pending}")
        cluster.drain("n2", "recorded drain")
        recorded["nodes"] = call("GET", "/nodes")
        cluster.resume("n2")
        call("DELETE", f"/job/{pending}")
        call("DELETE", f"/job/{running}")
        recorded["cancelled"] = wait(running, "CANCELLED")
        recorded["not_found"] = call("GET", "/job/99999999")
        recorded["refused_submit"] = call(
            "POST",
            "/job/submit",
            json={"script": "#!/bin/bash\ntrue", "job": {"name": "big", "gres": "gpu:9", "environment": {"A": "1"}}},
        )
        since = int(time.time()) + 5
        recorded["not_modified_status"] = call("GET", "/jobs", params={"update_time": since})["status"]
        recorded["timeout"] = wait(timeout_job, "TIMEOUT", timeout=240)
    for answer in recorded.values():
        if isinstance(answer, dict) and isinstance(answer.get("body"), dict):
            answer["body"] = {k: v for k, v in answer["body"].items() if k in KEEP}
    shutil.rmtree(directory, ignore_errors=True)
    OUT.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
