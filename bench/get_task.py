"""Closed-loop GetTask (JSON-RPC or REST, v1.0) against a running platform; prints throughput
and latency.

    make run   # in another terminal; note the demo API key
    .venv/bin/python bench/get_task.py --key a2a_... [--url URL] [--task-id ID]
        [--concurrency 16] [--seconds 10] [--warmup 2] [--binding jsonrpc|rest]

Each of `--concurrency` clients sends its next GetTask as soon as the previous one answered
(a closed loop), for `--seconds` after `--warmup` seconds of the same. Without `--task-id` the
script first makes a task with one blocking SendMessage (so a worker must be running), and
reads that task as the echo agent leaves it: the user's message in its history, the agent's in
its status, one artifact.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import httpx


async def make_task(http: httpx.AsyncClient, url: str) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "x"}],
            }
        },
    }
    response = await http.post(url, json=body)
    response.raise_for_status()
    return str(response.json()["result"]["task"]["id"])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/a2a/demo/echo/")
    parser.add_argument("--key", required=True)
    parser.add_argument("--task-id", default="")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument(
        "--binding", choices=("jsonrpc", "rest"), default="jsonrpc", help="REST: GET tasks/{id}"
    )
    args = parser.parse_args()
    headers = {"X-API-Key": args.key, "A2A-Version": "1.0"}
    limits = httpx.Limits(
        max_connections=args.concurrency, max_keepalive_connections=args.concurrency
    )
    async with httpx.AsyncClient(headers=headers, timeout=60, limits=limits) as http:
        task_id = args.task_id or await make_task(http, args.url)
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
        rest = args.binding == "rest"
        latencies: list[float] = []
        failures = 0
        loop = asyncio.get_running_loop()
        measure_from = loop.time() + args.warmup
        stop_at = measure_from + args.seconds

        async def client() -> None:
            nonlocal failures
            while (now := loop.time()) < stop_at:
                started = time.perf_counter()
                if rest:
                    response = await http.get(f"{args.url}tasks/{task_id}")
                else:
                    response = await http.post(args.url, json=body)
                elapsed = time.perf_counter() - started
                if now < measure_from:
                    continue
                latencies.append(elapsed)
                answer = response.json() if response.status_code == 200 else {}
                if (answer.get("id") if rest else answer.get("result", {}).get("id")) != task_id:
                    failures += 1

        await asyncio.gather(*(client() for _ in range(args.concurrency)))
    latencies.sort()
    print(
        f"GetTask       {len(latencies)} in {args.seconds:g} s (concurrency {args.concurrency}), "
        f"failures {failures}"
    )
    print(f"throughput    {len(latencies) / args.seconds:.1f} req/s")
    print(f"latency p50   {statistics.median(latencies) * 1000:.1f} ms")
    print(f"latency p95   {latencies[int(len(latencies) * 0.95) - 1] * 1000:.1f} ms")


if __name__ == "__main__":
    asyncio.run(main())
