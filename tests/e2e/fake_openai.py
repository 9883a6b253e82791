"""An OpenAI-compatible model endpoint for the `openai` executor's end-to-end tests: a stdlib
ThreadingHTTPServer on 127.0.0.1, in a thread of the test process, that the platform's workers
reach over real sockets.

It serves `GET <prefix>/v1/models` and `POST <prefix>/v1/chat/completions`, streaming (SSE
`data: {chunk}` lines, a usage chunk when `stream_options.include_usage` asks for it, then
`data: [DONE]`) and not. Every request is recorded as a `Call` (headers, JSON body, and for
a stream: how many chunks it sent, whether it finished, whether the client went away first).

What a completion does is chosen by its model name:

- `echo`: a reply made of the last user message and the number of messages received
  (`reply_to`), streamed a word a chunk; `echo-no-usage` too, but it never sends usage.
- `slow`: the same, with a pause between chunks, and the last chunk held back until the test
  sets the call's `release` (or HOLD_LIMIT passes): a test can look at the call while the
  stream is open, and see a client that goes away (`client_gone`) before the end.
- `broken`: two chunks, then an error object inside the stream.
- `fail-429`, `fail-500`: that status (with `retry-after-ms: 10`, so retries come quickly);
  `fail-401`: a refused key (its message quotes the key, as some endpoints do).
- `hang`: reads the request and never answers.

A request with the key WRONG_KEY is refused with 401, and under the prefix `/no-models` the
model list answers 404 (an endpoint that lists no models).
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODELS = ("echo", "echo-no-usage", "slow", "broken", "fail-429", "fail-500", "fail-401", "hang")
WRONG_KEY = "sk-wrong"
NO_MODELS_PREFIX = "/no-models"
# A held-back last chunk goes out after this long even if the test never releases it.
HOLD_LIMIT = 20.0
POLL = 0.02


def reply_to(messages: list[dict[str, Any]]) -> str:
    """What `echo` answers to these chat messages."""
    last = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    words = str(last.get("content", "")).split()
    return " ".join(["Heard", str(len(messages)), "messages;", "the", "last:", *words])


def pieces_of(text: str) -> list[str]:
    """The chunks `echo` streams `text` in: a word each, spaces kept."""
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + words[-1:]


def usage_of(messages: list[dict[str, Any]], pieces: list[str]) -> dict[str, int]:
    prompt = sum(len(str(m.get("content", "")).split()) for m in messages)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": len(pieces),
        "total_tokens": prompt + len(pieces),
    }


@dataclass
class Call:
    """One request the server got, and (for a stream) how its answer went."""

    n: int
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    body: Any
    status: int = 0
    chunks_total: int = 0
    chunks_sent: int = 0
    finished: bool = False
    client_gone: bool = False
    release: threading.Event = field(default_factory=threading.Event)

    @property
    def model(self) -> str:
        return str((self.body or {}).get("model", ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages", []))

    @property
    def last_user_text(self) -> str:
        users = [m for m in self.messages if m.get("role") == "user"]
        return str(users[-1].get("content", "")) if users else ""


class FakeOpenAI:
    """The server; `start()` it, point agents at `url`, look at `calls()`."""

    def __init__(self, *, pause: float = 0.05) -> None:
        self.pause = pause  # between the chunks of `slow`
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._calls: list[Call] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def url(self) -> str:
        """The base URL an agent is configured with."""
        return self.root + "/v1"

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def record(self, method: str, path: str, headers: dict[str, str], body: Any) -> Call:
        with self._lock:
            call = Call(len(self._calls) + 1, method, path, headers, body)
            self._calls.append(call)
            return call

    def calls(self, marker: str | None = None) -> list[Call]:
        """The calls so far; with `marker`, those whose last user message contains it."""
        with self._lock:
            calls = list(self._calls)
        return [c for c in calls if marker is None or marker in c.last_user_text]

    def wait_for(
        self, condition: Callable[[], bool], *, timeout: float = 20, what: str = "the calls"
    ) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {self.calls()[-5:]}")
            time.sleep(POLL)


def _handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            call = fake.record("GET", self.path, self._headers(), None)
            if self._refused(call):
                return
            if not self.path.rstrip("/").endswith("/models"):
                self._error(call, 404, "Not found.")
            elif self.path.startswith(NO_MODELS_PREFIX + "/"):
                self._error(call, 404, "This endpoint lists no models.")
            else:
                models = [
                    {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in MODELS
                ]
                self._json(call, 200, {"object": "list", "data": models})

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
            call = fake.record("POST", self.path, self._headers(), body)
            if self._refused(call):
                return
            if not self.path.endswith("/chat/completions") or not isinstance(body, dict):
                self._error(call, 404, "Not found.")
                return
            model = call.model
            if model == "fail-429":
                self._error(call, 429, "Rate limit reached for requests.", retry=True)
            elif model == "fail-500":
                self._error(call, 500, "The server had an error.", retry=True)
            elif model == "fail-401":
                key = call.headers.get("authorization", "").removeprefix("Bearer ")
                self._error(call, 401, f"Incorrect API key provided: {key}.")
            elif model == "hang":
                self._hang(call)
            elif model not in MODELS:
                self._error(call, 404, f"The model `{model}` does not exist.")
            elif body.get("stream"):
                self._stream(call, body)
            else:
                self._complete(call, body)

        # --- answers ---------------------------------------------------------------------

        def _refused(self, call: Call) -> bool:
            if call.headers.get("authorization") == f"Bearer {WRONG_KEY}":
                self._error(call, 401, "Incorrect API key provided.")
                return True
            return False

        def _complete(self, call: Call, body: dict[str, Any]) -> None:
            text = reply_to(call.messages)
            if body.get("max_tokens") == 1:
                text = text.split(" ")[0]
            self._json(
                call,
                200,
                {
                    "id": f"chatcmpl-{call.n}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": call.model,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": text},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": usage_of(call.messages, pieces_of(text)),
                },
            )

        def _stream(self, call: Call, body: dict[str, Any]) -> None:
            pieces = pieces_of(reply_to(call.messages))
            if call.model == "broken":
                pieces = pieces[:2]
            call.chunks_total = len(pieces)
            call.status = 200
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
                return {
                    "id": f"chatcmpl-{call.n}",
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": call.model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
                }

            if not self._event(call, chunk({"role": "assistant", "content": ""})):
                return
            for i, piece in enumerate(pieces):
                if call.model == "slow":
                    last = i == len(pieces) - 1
                    if not self._wait(call, call.release if last else None, fake.pause):
                        return
                if not self._event(call, chunk({"content": piece})):
                    return
                call.chunks_sent += 1
            if call.model == "broken":
                error = {"message": "The model is overloaded.", "type": "server_error"}
                self._event(call, {"error": error})
                self._end(call)
                return
            if not self._event(call, chunk({}, "stop")):
                return
            wants_usage = (body.get("stream_options") or {}).get("include_usage")
            if wants_usage and call.model != "echo-no-usage":
                usage = {**chunk({}), "choices": [], "usage": usage_of(call.messages, pieces)}
                if not self._event(call, usage):
                    return
            if self._write(call, b"data: [DONE]\n\n"):
                self._end(call)
                call.finished = True

        def _hang(self, call: Call) -> None:
            self._wait(call, None, HOLD_LIMIT * 10)
            self.close_connection = True

        # --- plumbing --------------------------------------------------------------------

        def _headers(self) -> dict[str, str]:
            return {k.lower(): v for k, v in self.headers.items()}

        def _json(
            self,
            call: Call,
            status: int,
            payload: Any,
            headers: dict[str, str] | None = None,
        ) -> None:
            data = json.dumps(payload).encode()
            call.status = status
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, call: Call, status: int, message: str, *, retry: bool = False) -> None:
            error = {"message": message, "type": "error", "code": str(status)}
            self._json(call, status, {"error": error}, {"retry-after-ms": "10"} if retry else {})

        def _event(self, call: Call, payload: dict[str, Any]) -> bool:
            return self._write(call, b"data: " + json.dumps(payload).encode() + b"\n\n")

        def _write(self, call: Call, data: bytes) -> bool:
            """One HTTP chunk; False (the client is gone) if it cannot be written."""
            try:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            except OSError:
                call.client_gone = True
                self.close_connection = True
                return False
            return True

        def _end(self, call: Call) -> None:
            try:
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                call.client_gone = True
                self.close_connection = True

        def _wait(self, call: Call, gate: threading.Event | None, seconds: float) -> bool:
            """Wait `seconds` (with a gate: until it is set, at most HOLD_LIMIT), watching the
            connection; False (recorded) if the client closed it meanwhile."""
            deadline = time.monotonic() + (HOLD_LIMIT if gate is not None else seconds)
            while time.monotonic() < deadline and not fake.stopping.is_set():
                if gate is not None and gate.is_set():
                    return True
                if self._gone():
                    call.client_gone = True
                    self.close_connection = True
                    return False
                time.sleep(min(POLL, seconds))
            return True

        def _gone(self) -> bool:
            sock: socket.socket = self.connection
            try:
                readable, _, _ = select.select([sock], [], [], 0)
                return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
