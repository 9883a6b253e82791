"""Many idle SSE streams on one daphne process: is it still responsive, and what does a stream cost?

    # an agent whose task stays busy, and a running platform (make run, or the production profile)
    .venv/bin/python manage.py create_agent demo slow --kind echo --config '{"delay_seconds": 3600}'
    .venv/bin/python bench/idle_streams.py --url http://127.0.0.1:8000/a2a/demo/slow/ \\
        --key a2a_... --daphne-pid $(pgrep -f 'daphne .*-p 8000') [--streams 200]

It starts one long task, opens N `SubscribeToTask` streams on it, measures the daphne process's
resident memory before and after, times GetTask and card requests while the streams are open,
then cancels the task and checks that every stream received the final event and closed.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from pathlib import Path

import httpx


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def rpc(method: str, params: dict) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


async def stream(
    http: httpx.AsyncClient, url: str, task_id: str, opened: asyncio.Event, counter: list[int]
) -> str:
    async with http.stream("POST", url, json=rpc("SubscribeToTask", {"id": task_id})) as response:
        response.raise_for_status()
        counter[0] += 1
        if counter[0] == counter[1]:
            opened.set()
        last = ""
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                last = line
        return last


async def timed(http: httpx.AsyncClient, method: str, url: str, **kwargs: object) -> float:
    started = time.perf_counter()
    response = await http.request(method, url, **kwargs)
    response.raise_for_status()
    return time.perf_counter() - started


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--daphne-pid", type=int, required=True)
    parser.add_argument("--streams", type=int, default=200)
    args = parser.parse_args()
    headers = {"X-API-Key": args.key, "A2A-Version": "1.0"}
    limits = httpx.Limits(max_connections=args.streams + 20)
    async with httpx.AsyncClient(headers=headers, timeout=120, limits=limits) as http:
        send = rpc(
            "SendMessage",
            {
                "message": {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"text": "busy"}],
                },
                "configuration": {"returnImmediately": True},
            },
        )
        task_id = (await http.post(args.url, json=send)).json()["result"]["task"]["id"]
        await asyncio.sleep(1)
        before = rss_kib(args.daphne_pid)
        opened, counter = asyncio.Event(), [0, args.streams]
        streams = [
            asyncio.create_task(stream(http, args.url, task_id, opened, counter))
            for _ in range(args.streams)
        ]
        await asyncio.wait_for(opened.wait(), 120)
        await asyncio.sleep(2)
        after = rss_kib(args.daphne_pid)
        card = args.url + ".well-known/agent-card.json"
        get = rpc("GetTask", {"id": task_id})
        latencies = []
        for _ in range(20):
            latencies.append(await timed(http, "POST", args.url, json=get))
            latencies.append(await timed(http, "GET", card))
        latencies.sort()
        await http.post(args.url, json=rpc("CancelTask", {"id": task_id}))
        finals = await asyncio.wait_for(asyncio.gather(*streams), 120)
    closed = sum("TASK_STATE_CANCELED" in last for last in finals)
    print(f"streams open           {args.streams}")
    print(f"daphne RSS before      {before / 1024:.1f} MiB")
    print(f"daphne RSS with streams {after / 1024:.1f} MiB")
    print(f"memory per stream      {(after - before) / args.streams:.1f} KiB")
    print(
        f"requests during        p50 {statistics.median(latencies) * 1000:.0f} ms, "
        f"p95 {latencies[int(len(latencies) * 0.95) - 1] * 1000:.0f} ms, "
        f"max {latencies[-1] * 1000:.0f} ms"
    )
    print(f"streams ended on cancel {closed}/{args.streams}")


if __name__ == "__main__":
    asyncio.run(main())
