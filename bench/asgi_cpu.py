"""CPU per A2A request inside one process: the platform's ASGI application called directly,
without an HTTP server, load client or second process on the same cores. For comparing two
trees' request paths when the machine is too noisy for `compare.py` to tell a few percent apart.

    source scripts/services.sh && services_start      # a throwaway PostgreSQL (and Redis)
    DJANGO_SECRET_KEY=x .venv/bin/python bench/asgi_cpu.py [--platform-dir DIR]
        [--method GetTask|ListTasks|SendMessage] [--requests 1000] [--concurrency 16] [--rounds 7]

It migrates the database in DATABASE_URL, makes a tenant `cpu` with an `echo` agent, a key and
a few stored tasks (bench/platform_seed.py), then sends `--requests` JSON-RPC v1.0 calls to
`a2a_platform.asgi.application` from `--concurrency` coroutines, `--rounds` times, and prints
the process's CPU time (all threads: the event loop and the database threads) per request for
each round, lowest first. PostgreSQL's own CPU is not counted. Run two trees one after the
other, several times, and compare the lowest rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def boot(platform_dir: Path) -> Any:
    # The tree under test, not the one installed in the virtualenv (an editable install's
    # finder would win over sys.path), and Celery adds the working directory to sys.path.
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in getattr(f, "__module__", "")]
    os.chdir(platform_dir)
    sys.path[:0] = [str(platform_dir), str(HERE)]
    import platform_seed

    platform_seed.boot(platform_dir)
    return platform_seed


def setup(platform_seed: Any) -> dict[str, Any]:
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from tasks_app.models import Task

    made = platform_seed.setup("cpu", {"echo": {}})
    tasks = Task.objects.filter(agent_id=made["agents"]["echo"]["id"])
    if not tasks.exists():  # a second run on the same database reads the same tasks
        platform_seed.seed_tasks(agent_slug="echo", tenant_slug="cpu", start=0, count=20)
    task = tasks.order_by("pk").first()
    return {"key": made["key"], "task": str(task.pk)}


def request(method: str, made: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    params: dict[str, Any] = {"id": made["task"]}
    if method == "ListTasks":
        params = {"pageSize": 20}
    elif method == "SendMessage":  # a new task each time, answered at once (the run queued)
        message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        params = {"message": message, "configuration": {"returnImmediately": True}}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode()
    path = "/a2a/cpu/echo/"
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-api-key", made["key"].encode()),
        (b"a2a-version", b"1.0"),
        (b"user-agent", b"asgi_cpu"),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    return scope, body


async def call(application: Any, scope: dict[str, Any], body: bytes) -> int:
    """One request through the application, as an HTTP server would make it; its status."""
    sent: list[dict[str, Any]] = []
    answered = asyncio.Event()
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            answered.set()

    await application(dict(scope), receive, send)
    return int(sent[0]["status"])


async def measure(args: argparse.Namespace, made: dict[str, Any]) -> list[float]:
    from a2a_platform.asgi import application

    scope, body = request(args.method, made)
    status = await call(application, scope, body)
    if status != 200:
        raise SystemExit(f"{args.method} answered {status}")

    async def client(count: int) -> None:
        for _ in range(count):
            if args.method == "SendMessage":  # a messageId of its own
                await call(application, *request(args.method, made))
            else:
                await call(application, scope, body)

    each = max(1, args.requests // args.concurrency)
    await asyncio.gather(*(client(each) for _ in range(args.concurrency)))  # warm-up
    rounds = []
    for _ in range(args.rounds):
        started = time.process_time()
        await asyncio.gather(*(client(each) for _ in range(args.concurrency)))
        rounds.append((time.process_time() - started) / (each * args.concurrency) * 1e6)
    return sorted(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform-dir", type=Path, default=HERE.parent)
    parser.add_argument(
        "--method", default="GetTask", choices=["GetTask", "ListTasks", "SendMessage"]
    )
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        raise SystemExit("Set DATABASE_URL to a throwaway PostgreSQL (scripts/services.sh).")
    made = setup(boot(args.platform_dir.resolve()))
    rounds = asyncio.run(measure(args, made))
    print(
        f"{args.method} from {args.platform_dir}: CPU µs a request, lowest first: "
        + ", ".join(f"{r:.0f}" for r in rounds)
    )


if __name__ == "__main__":
    main()
