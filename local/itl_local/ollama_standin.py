"""A stand-in for ``ollama serve`` on the local Slurm cluster (``./dev up --backend slurm``: the cluster's
``ollamaServeCommand``): it serves Ollama's API as the DGX simulator's instances do — ``GET /api/tags``, ``GET
/api/ps``, ``POST /api/generate`` with a canned reply — on ``OLLAMA_HOST`` (``0.0.0.0:PORT``, what the instance's job
gives it), for the model ``ITL_OLLAMA_MODEL``. A model whose name part starts with ``unknown`` is refused as Ollama
refuses a model it cannot pull: it exits 1 at once, so the instance fails. Standard library only: it runs in a Slurm
job's environment, not the provider's."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = os.environ.get("ITL_OLLAMA_MODEL") or "llama3"


def _family(model: str) -> str:
    """The model part of a name (``myreg:5000/team/llama3:8b`` → ``llama3``)."""
    return model.rsplit("/", 1)[-1].split(":", 1)[0]


class OllamaHandler(BaseHTTPRequestHandler):
    """Ollama's API, as far as the provider and its users ask it (module docstring)."""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/api/tags":
            details = {"format": "gguf", "family": _family(MODEL)}
            self._answer(200, {"models": [{"name": MODEL, "model": MODEL, "size": 4_109_865_159, "details": details}]})
        elif self.path == "/api/ps":
            self._answer(200, {"models": [{"name": MODEL, "model": MODEL}]})
        else:
            self._answer(404, {"error": "not found"})

    def do_POST(self) -> None:
        if self.path != "/api/generate":
            self._answer(404, {"error": "not found"})
            return
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._answer(400, {"error": "invalid JSON"})
            return
        if body.get("model") not in (None, MODEL):
            self._answer(404, {"error": f"model '{body.get('model')}' not found"})
            return
        self._answer(
            200,
            {
                "model": MODEL,
                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "response": "Hello from the Slurm cluster.",
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": len(str(body.get("prompt", "")).split()),
                "eval_count": 6,
            },
        )


def main() -> None:
    if _family(MODEL).startswith("unknown"):
        print(f"Error: pull model manifest: file does not exist ({MODEL})", file=sys.stderr, flush=True)
        sys.exit(1)
    host, _, port = (os.environ.get("OLLAMA_HOST") or "127.0.0.1:11434").rpartition(":")
    server = ThreadingHTTPServer((host or "0.0.0.0", int(port)), OllamaHandler)  # noqa: S104 - as ollama serve
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"ollama stand-in serving {MODEL} on {host}:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
