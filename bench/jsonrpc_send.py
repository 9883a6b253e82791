"""Blocking SendMessage round trips against a running platform; prints throughput and latency.

    make run   # in another terminal; note the demo API key
    .venv/bin/python bench/jsonrpc_send.py --key a2a_... [--url URL] [--requests 200]
        [--concurrency 8]

Each request is a real round trip: HTTP -> service -> Celery -> executor -> database -> waiter.
Figures depend on the profile (SQLite + filesystem broker polls; PostgreSQL + Redis rings).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import httpx


async def one(http: httpx.AsyncClient, url: str) -> tuple[float, bool]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "bench"}],
            }
        },
    }
    started = time.perf_counter()
    response = await http.post(url, json=body)
    ok = response.status_code == 200 and (
        response.json().get("result", {}).get("task", {}).get("status", {}).get("state")
        == "TASK_STATE_COMPLETED"
    )
    return time.perf_counter() - started, ok


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/a2a/demo/echo/")
    parser.add_argument("--key", required=True)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    headers = {"X-API-Key": args.key, "A2A-Version": "1.0"}
    limit = asyncio.Semaphore(args.concurrency)
    async with httpx.AsyncClient(headers=headers, timeout=120) as http:

        async def guarded() -> tuple[float, bool]:
            async with limit:
                return await one(http, args.url)

        started = time.perf_counter()
        results = await asyncio.gather(*(guarded() for _ in range(args.requests)))
        elapsed = time.perf_counter() - started
    latencies = sorted(r[0] for r in results)
    failures = sum(not r[1] for r in results)
    print(f"requests      {args.requests} (concurrency {args.concurrency}), failures {failures}")
    print(f"throughput    {args.requests / elapsed:.1f} tasks/s")
    print(f"latency p50   {statistics.median(latencies) * 1000:.0f} ms")
    print(f"latency p95   {latencies[int(len(latencies) * 0.95) - 1] * 1000:.0f} ms")
    print(f"latency max   {latencies[-1] * 1000:.0f} ms")


if __name__ == "__main__":
    asyncio.run(main())
