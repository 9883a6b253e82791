"""An example service behind a `webhook` agent (docs/webhook-agents.md), standard library plus
PyJWT only, to copy from.

    python examples/webhook_receiver.py --port 9000 \\
        --jwks http://127.0.0.1:8000/a2a/<tenant>/.well-known/jwks.json [--token SECRET]

Every request is checked first: `Authorization: Bearer <token>` when started with --token (the
agent's `token` secret), and the `X-A2A-Signature` JWT against the tenant's JWKS (ES256 only,
issuer = the platform, the exact body's SHA-256, the body's task id). Anything else is answered
401. Then:

- a ping (`{"ping": true}`, the console's "test connection") is answered 200;
- a cancel notice (`{"cancel": true}`) stops the background work on that task, 200;
- a message whose text starts with "ask" is answered at once with state input-required;
- a message whose text starts with "slow" is answered 202 Accepted, and a background thread
  posts to the callback URL: a working status, the first chunk of an artifact, then (two
  events in one callback) its last chunk and the final completed state;
- any other message is answered at once: completed, with an artifact echoing the user's
  messages of the task so far and a data part counting them.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import jwt  # pip install "PyJWT[crypto]"

REQUIRED_CLAIMS = ["iss", "iat", "exp", "jti", "task_id", "body_sha256"]


class Refused(Exception):
    """The request is not from the platform (or not for us); answered 401."""


class Service:
    def __init__(self, jwks_url: str, issuer: str, token: str, step_delay: float) -> None:
        self.jwks = jwt.PyJWKClient(jwks_url)
        self.issuer = issuer
        self.token = token
        self.step_delay = step_delay
        self.canceled: set[str] = set()
        self.lock = threading.Lock()

    # --- checking a request -------------------------------------------------------------

    def verify(self, headers: Any, body: bytes) -> dict[str, Any]:
        """The parsed body of a request the platform sent; Refused otherwise."""
        if self.token:
            scheme, _, given = headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(given, self.token):
                raise Refused("missing or wrong Bearer token")
        signature = headers.get("X-A2A-Signature", "")
        if not signature:
            raise Refused("no X-A2A-Signature")
        try:
            key = self.jwks.get_signing_key_from_jwt(signature)  # by the token's kid
            claims = jwt.decode(
                signature,
                key.key,
                algorithms=["ES256"],  # never the algorithm the token names
                issuer=self.issuer,
                leeway=30,
                options={"require": REQUIRED_CLAIMS},
            )
        except jwt.PyJWTError as exc:
            raise Refused(f"bad signature: {exc}") from None
        # The hash of the bytes as received, before parsing them.
        if not hmac.compare_digest(claims["body_sha256"], hashlib.sha256(body).hexdigest()):
            raise Refused("the signature does not cover this body")
        payload = json.loads(body)
        if claims["task_id"] != payload.get("taskId", ""):
            raise Refused("the signature is for another task")
        return payload

    # --- answering ----------------------------------------------------------------------

    def answer(self, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if payload.get("ping"):
            return 200, {"pong": True}
        if payload.get("cancel"):
            with self.lock:
                self.canceled.add(payload["taskId"])
            return 200, {}
        text = text_of(payload["message"])
        if text.startswith("ask"):
            return 200, {"state": "input-required", "message": "What else should I add?"}
        if text.startswith("slow"):
            worker = threading.Thread(
                target=self.work, args=(payload["taskId"], payload["callback"], text), daemon=True
            )
            worker.start()
            return 202, {}
        said = [text_of(m) for m in payload["history"] if m.get("role") == "ROLE_USER"]
        return 200, {
            "state": "completed",
            "message": f"You said: {text}",
            "artifacts": [
                {
                    "name": "echo",
                    "parts": [
                        {"text": "\n".join(said)},
                        {"data": {"turns": len(said), "historyLength": len(payload["history"])}},
                    ],
                }
            ],
        }

    def work(self, task_id: str, callback: dict[str, str], text: str) -> None:
        """The slow path: events posted to the callback URL as the work goes on."""
        artifact_id = f"{task_id}-result"
        steps: list[Any] = [
            {"state": "working", "message": "Working on it..."},
            {
                "artifact": {
                    "artifactId": artifact_id,
                    "name": "result",
                    "parts": [{"text": "1/2 "}],
                }
            },
            [  # one callback may carry several events
                {
                    "artifact": {"artifactId": artifact_id, "parts": [{"text": "2/2"}]},
                    "append": True,
                    "lastChunk": True,
                },
                {"state": "completed", "message": f"Done: {text}"},
            ],
        ]
        for step in steps:
            time.sleep(self.step_delay)
            with self.lock:
                if task_id in self.canceled:
                    return
            status, answer = post_json(callback["url"], step, callback["token"])
            log(f"callback for {task_id}: HTTP {status} {answer}")
            if status != 200:  # 409: the task was canceled or ended; stop working on it
                return


def text_of(message: dict[str, Any]) -> str:
    return "\n".join(p["text"] for p in message.get("parts", []) if "text" in p)


def post_json(url: str, data: Any, token: str) -> tuple[int, str]:
    request = urllib.request.Request(
        url,
        data=json.dumps(data).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def handler(service: Service) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                payload = service.verify(self.headers, body)
            except (Refused, ValueError) as exc:
                log(f"refused: {exc}")
                self.reply(401, {"error": str(exc)})
                return
            status, answer = service.answer(payload)
            log(f"{payload.get('taskId', 'ping')}: answered {status}")
            self.reply(status, answer)

        def reply(self, status: int, data: dict[str, Any]) -> None:
            body = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # one line per request from do_POST instead

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--jwks", required=True, help="the tenant's JWKS URL on the platform")
    parser.add_argument(
        "--issuer", help="the platform's public base URL (default: the JWKS URL's origin)"
    )
    parser.add_argument("--token", default="", help="the Bearer token the agent sends, if any")
    parser.add_argument(
        "--step-delay", type=float, default=0.1, help="seconds between the slow path's callbacks"
    )
    args = parser.parse_args()
    origin = urlsplit(args.jwks)
    issuer = args.issuer or f"{origin.scheme}://{origin.netloc}"
    service = Service(args.jwks, issuer, args.token, args.step_delay)
    server = ThreadingHTTPServer((args.host, args.port), handler(service))
    server.daemon_threads = True
    log(f"listening on http://{args.host}:{args.port}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
