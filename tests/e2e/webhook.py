"""A real webhook receiver for the push tests: a separate process running a tiny stdlib HTTP
server (ThreadingHTTPServer on 127.0.0.1) that records every request it gets (method, path,
headers, exact body) as one JSON line, and answers as it is told.

How it answers: a `script` of answers consumed one per request, in order, then a `default`
answer. Each answer is {"status": int, "headers": {name: value}, "body": str}. The test side
sets them when the process starts, or later with `PUT /__control__` (not recorded). Stopping
the process and starting it again on the same port simulates a receiver that is down.

This file is also the server script: `python webhook.py --port P --log FILE --control JSON`
(stdlib only, so the subprocess imports nothing of the platform).
"""

from __future__ import annotations

import argparse
import base64
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CONTROL_PATH = "/__control__"
OK = {"status": 200, "headers": {}, "body": "ok"}


def answer(status: int, *, retry_after: str | None = None, **headers: str) -> dict[str, Any]:
    """One scripted answer: a status, with `Retry-After` and other headers."""
    all_headers = {k.replace("_", "-"): v for k, v in headers.items()}
    if retry_after is not None:
        all_headers["Retry-After"] = retry_after
    return {"status": status, "headers": all_headers, "body": f"answer {status}"}


# --- the test side ---------------------------------------------------------------------------


@dataclass
class Received:
    """One request the receiver recorded."""

    n: int
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: bytes
    answered: int

    def header(self, name: str) -> str | None:
        values = [v for k, v in self.headers if k.lower() == name.lower()]
        assert len(values) <= 1, f"header {name} sent {len(values)} times: {values}"
        return values[0] if values else None

    def json(self) -> Any:
        return json.loads(self.body)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Receiver:
    """The receiver process, on a port of its own chosen up front (so it can start later)."""

    directory: Path
    port: int = field(default_factory=_free_port)
    script: list[dict[str, Any]] = field(default_factory=list)
    default: dict[str, Any] = field(default_factory=lambda: dict(OK))
    proc: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.directory / f"webhook-{self.port}.jsonl"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10) -> Receiver:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.directory.mkdir(parents=True, exist_ok=True)
        control = json.dumps({"script": self.script, "default": self.default})
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--port", str(self.port), "--log", str(self.log)]
            + ["--control", control],
            stdout=(self.directory / f"webhook-{self.port}.out").open("ab"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the webhook receiver exited ({self.proc.returncode})")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the webhook receiver did not open {self.port}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def control(self, *script: dict[str, Any], default: dict[str, Any] | None = None) -> None:
        """Answer the next requests with `script`, then `default` (the running process too)."""
        self.script = list(script)
        if default is not None:
            self.default = default
        if self.proc is not None and self.proc.poll() is None:
            import httpx

            response = httpx.put(
                self.url + CONTROL_PATH,
                json={"script": self.script, "default": self.default},
                timeout=5,
            )
            response.raise_for_status()

    def requests(self) -> list[Received]:
        if not self.log.exists():
            return []
        received = []
        for line in self.log.read_text().splitlines():
            if not line.strip():
                continue  # pragma: no cover - lines are written whole
            record = json.loads(line)
            received.append(
                Received(
                    n=record["n"],
                    method=record["method"],
                    path=record["path"],
                    headers=[(k, v) for k, v in record["headers"]],
                    body=base64.b64decode(record["body_b64"]),
                    answered=record["answered"],
                )
            )
        return received

    def wait_for(
        self,
        condition: Callable[[list[Received]], bool],
        *,
        timeout: float = 20,
        what: str = "the expected requests",
    ) -> list[Received]:
        """Poll the log until `condition(requests)` holds; the requests then."""
        deadline = time.monotonic() + timeout
        while True:
            received = self.requests()
            if condition(received):
                return received
            if time.monotonic() > deadline:
                bodies = [(r.answered, r.body[:200]) for r in received]
                raise AssertionError(f"timed out waiting for {what}; received {bodies}")
            time.sleep(0.1)

    def wait_for_count(self, count: int, **kwargs: Any) -> list[Received]:
        return self.wait_for(
            lambda received: len(received) >= count, what=f"{count} requests", **kwargs
        )


# --- the server process ----------------------------------------------------------------------


class _State:
    def __init__(self, log: Path, control: dict[str, Any]) -> None:
        self.log = log
        self.lock = threading.Lock()
        self.script: list[dict[str, Any]] = list(control.get("script", []))
        self.default: dict[str, Any] = control.get("default") or dict(OK)
        # Request numbers continue across restarts: the log is appended to.
        self.count = sum(1 for line in log.read_text().splitlines() if line) if log.exists() else 0

    def set(self, control: dict[str, Any]) -> None:
        with self.lock:
            self.script = list(control.get("script", []))
            self.default = control.get("default") or self.default

    def take(self, method: str, path: str, headers: list[tuple[str, str]], body: bytes) -> dict:
        """The answer to this request, recorded (before it is sent) with the request."""
        with self.lock:
            reply = self.script.pop(0) if self.script else self.default
            self.count += 1
            record = {
                "n": self.count,
                "time": time.time(),
                "method": method,
                "path": path,
                "headers": headers,
                "body_b64": base64.b64encode(body).decode(),
                "answered": reply["status"],
            }
            with self.log.open("a") as f:
                f.write(json.dumps(record) + "\n")
                f.flush()
            return reply


def _handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _handle(self) -> None:
            body = self._body()
            if self.path == CONTROL_PATH:
                state.set(json.loads(body))
                self._reply({"status": 204, "headers": {}, "body": ""})
                return
            headers = [(k, v) for k, v in self.headers.items()]
            self._reply(state.take(self.command, self.path, headers, body))

        def _reply(self, reply: dict[str, Any]) -> None:
            payload = str(reply.get("body", "")).encode()
            self.send_response(int(reply["status"]))
            for name, value in (reply.get("headers") or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if payload and reply["status"] not in (204, 304):
                self.wfile.write(payload)

        do_POST = do_PUT = do_GET = do_DELETE = do_PATCH = _handle

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--control", default="{}")
    args = parser.parse_args()
    state = _State(args.log, json.loads(args.control))
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _handler(state))
    server.daemon_threads = True
    print(f"listening on 127.0.0.1:{args.port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    main()
