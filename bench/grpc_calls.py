"""The gRPC sidecar: unary SendMessage round trips, idle SubscribeToTask streams, and what a
stream costs on a thread-pool server versus an asyncio one. Prints figures; asserts nothing.

    make run   # in another terminal (it starts the sidecar on 127.0.0.1:50051); note the key
    .venv/bin/python bench/grpc_calls.py send --key a2a_... [--address 127.0.0.1:50051]
        [--tenant demo/echo] [--requests 200] [--concurrency 8]

    # an agent whose tasks stay busy, and the sidecar's pid
    .venv/bin/python manage.py create_agent demo slow --kind echo --config '{"delay_seconds": 3600}'
    .venv/bin/python bench/grpc_calls.py streams --key a2a_... --tenant demo/slow \\
        --sidecar-pid $(pgrep -f 'manage.py rungrpc') [--streams 200] [--tasks 2]

    # no platform needed: two trivial servers (proto-free generic handlers) in subprocesses
    .venv/bin/python bench/grpc_calls.py threads [--streams 200]

`send` is bench/jsonrpc_send.py over gRPC v1.0 (`lf.a2a.v1.A2AService/SendMessage`, blocking):
gRPC -> send service -> broker -> worker -> executor -> database -> waiter -> gRPC.
`streams` is bench/idle_streams.py over gRPC: it starts `--tasks` long tasks (keep it at or below
the worker's concurrency so they run), opens `--streams` SubscribeToTask streams spread over
them, reads the sidecar's VmRSS and thread count before and after and its CPU use over 5 s of
idle streams, times GetTask calls before and while they are open, then cancels the tasks and
counts the streams that saw TASK_STATE_CANCELED.
`threads` holds `--streams` open server-streaming calls on a sync `grpc.server` with a
ThreadPoolExecutor of that many workers (each open call holds one) and on a `grpc.aio` server,
reads each server's VmRSS and thread count, and times one more (unary) call while they are open.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import grpc.aio
from a2a.types import a2a_pb2 as pb
from a2a.types import a2a_pb2_grpc as pb_grpc

FINAL = {pb.TASK_STATE_COMPLETED, pb.TASK_STATE_CANCELED, pb.TASK_STATE_FAILED}


def proc_status(pid: int) -> tuple[int, int]:
    """(VmRSS in KiB, thread count) of a process."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]), int(fields["Threads"])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(sorted_values: list[float], fraction: float) -> float:
    return sorted_values[max(int(len(sorted_values) * fraction) - 1, 0)]


def message(text: str) -> pb.Message:
    return pb.Message(message_id=str(uuid.uuid4()), role=pb.ROLE_USER, parts=[pb.Part(text=text)])


# --- send -----------------------------------------------------------------------------------


async def send(args: argparse.Namespace) -> None:
    metadata = (("x-api-key", args.key), ("a2a-version", "1.0"))
    limit = asyncio.Semaphore(args.concurrency)
    async with grpc.aio.insecure_channel(args.address) as channel:
        stub = pb_grpc.A2AServiceStub(channel)

        async def one() -> tuple[float, bool]:
            async with limit:
                request = pb.SendMessageRequest(tenant=args.tenant, message=message("bench"))
                started = time.perf_counter()
                try:
                    answer = await stub.SendMessage(request, metadata=metadata, timeout=120)
                    ok = answer.task.status.state == pb.TASK_STATE_COMPLETED
                except grpc.aio.AioRpcError:
                    ok = False
                return time.perf_counter() - started, ok

        await one()  # connect and warm up; not counted
        started = time.perf_counter()
        results = await asyncio.gather(*(one() for _ in range(args.requests)))
        elapsed = time.perf_counter() - started
    latencies = sorted(r[0] for r in results)
    failures = sum(not r[1] for r in results)
    print(f"requests      {args.requests} (concurrency {args.concurrency}), failures {failures}")
    print(f"throughput    {args.requests / elapsed:.1f} tasks/s")
    print(f"latency p50   {statistics.median(latencies) * 1000:.0f} ms")
    print(f"latency p95   {percentile(latencies, 0.95) * 1000:.0f} ms")
    print(f"latency max   {latencies[-1] * 1000:.0f} ms")


# --- streams --------------------------------------------------------------------------------


def final_state(response: pb.StreamResponse) -> int:
    if response.HasField("status_update"):
        return response.status_update.status.state
    if response.HasField("task"):
        return response.task.status.state
    return pb.TASK_STATE_UNSPECIFIED


async def streams(args: argparse.Namespace) -> None:
    metadata = (("x-api-key", args.key), ("a2a-version", "1.0"))
    async with grpc.aio.insecure_channel(args.address) as channel:
        stub = pb_grpc.A2AServiceStub(channel)
        config = pb.SendMessageConfiguration(return_immediately=True)
        task_ids = []
        for n in range(args.tasks):
            request = pb.SendMessageRequest(
                tenant=args.tenant, message=message(f"busy {n}"), configuration=config
            )
            task_ids.append((await stub.SendMessage(request, metadata=metadata)).task.id)
        await asyncio.sleep(2)

        async def time_get_task(count: int) -> list[float]:
            latencies = []
            for n in range(count):
                request = pb.GetTaskRequest(tenant=args.tenant, id=task_ids[n % len(task_ids)])
                started = time.perf_counter()
                await stub.GetTask(request, metadata=metadata)
                latencies.append(time.perf_counter() - started)
            return sorted(latencies)

        alone = await time_get_task(40)
        rss_before, threads_before = proc_status(args.sidecar_pid)
        opened = asyncio.Event()
        counter = [0]

        async def subscribe(task_id: str) -> int:
            request = pb.SubscribeToTaskRequest(tenant=args.tenant, id=task_id)
            last = pb.TASK_STATE_UNSPECIFIED
            first = True
            async for response in stub.SubscribeToTask(request, metadata=metadata):
                if first:
                    first = False
                    counter[0] += 1
                    if counter[0] == args.streams:
                        opened.set()
                last = final_state(response) or last
            return last

        subscriptions = [
            asyncio.create_task(subscribe(task_ids[n % len(task_ids)])) for n in range(args.streams)
        ]
        await asyncio.wait_for(opened.wait(), 120)
        await asyncio.sleep(2)
        rss_after, threads_after = proc_status(args.sidecar_pid)
        cpu = cpu_seconds(args.sidecar_pid)
        await asyncio.sleep(5)
        cpu = (cpu_seconds(args.sidecar_pid) - cpu) / 5
        meanwhile = await time_get_task(40)
        for task_id in task_ids:
            await stub.CancelTask(
                pb.CancelTaskRequest(tenant=args.tenant, id=task_id), metadata=metadata
            )
        finals = await asyncio.wait_for(asyncio.gather(*subscriptions, return_exceptions=True), 120)
    closed = sum(state == pb.TASK_STATE_CANCELED for state in finals)
    print(f"streams open             {args.streams} on {args.tasks} running task(s)")
    print(f"sidecar RSS before       {rss_before / 1024:.1f} MiB ({threads_before} threads)")
    print(f"sidecar RSS with streams {rss_after / 1024:.1f} MiB ({threads_after} threads)")
    print(f"memory per stream        {(rss_after - rss_before) / args.streams:.1f} KiB")
    print(f"sidecar CPU, streams idle {cpu * 100:.0f}% of one core")
    for label, latencies in (("GetTask before", alone), ("GetTask meanwhile", meanwhile)):
        print(
            f"{label:24} p50 {statistics.median(latencies) * 1000:.0f} ms, "
            f"p95 {percentile(latencies, 0.95) * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms"
        )
    print(f"streams ended on cancel  {closed}/{args.streams}")


# --- threads: a thread-pool server versus an asyncio one --------------------------------------

IDLE_METHOD = "/bench.Idle/Wait"
SERVER_OPTIONS = [("grpc.max_concurrent_streams", 10_000)]


def serve_sync(port: int, workers: int) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    def wait(request: bytes, context: grpc.ServicerContext):  # noqa: ANN202
        yield b"open"
        done = threading.Event()
        context.add_callback(done.set)  # runs when the client cancels
        done.wait()  # the worker thread is held for as long as the stream is open

    handler = grpc.method_handlers_generic_handler(
        "bench.Idle",
        {
            "Wait": grpc.unary_stream_rpc_method_handler(wait),
            "Ping": grpc.unary_unary_rpc_method_handler(lambda request, context: b"pong"),
        },
    )
    server = grpc.server(
        ThreadPoolExecutor(max_workers=workers), handlers=[handler], options=SERVER_OPTIONS
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print("ready", flush=True)
    server.wait_for_termination()


async def serve_aio(port: int) -> None:
    async def wait(request: bytes, context: grpc.aio.ServicerContext):  # noqa: ANN202
        yield b"open"
        await asyncio.Event().wait()  # a suspended coroutine; cancelled with the call

    async def ping(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        return b"pong"

    handler = grpc.method_handlers_generic_handler(
        "bench.Idle",
        {
            "Wait": grpc.unary_stream_rpc_method_handler(wait),
            "Ping": grpc.unary_unary_rpc_method_handler(ping),
        },
    )
    server = grpc.aio.server(options=SERVER_OPTIONS)
    server.add_generic_rpc_handlers((handler,))
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def hold_streams(kind: str, count: int) -> tuple[int, int, int, int, str]:
    """Start a `kind` server, open `count` idle streams on it: RSS and threads before, with, and
    how a unary call fares while they are open."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "_server", kind, str(port), str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            wait = channel.unary_stream(IDLE_METHOD)
            warm = wait(b"")  # one call first, so that lazy set-up is in the baseline
            await warm.read()
            warm.cancel()
            await asyncio.sleep(1)
            before = proc_status(server.pid)
            calls = [wait(b"") for _ in range(count)]
            await asyncio.wait_for(asyncio.gather(*(call.read() for call in calls)), 60)
            await asyncio.sleep(1)
            after = proc_status(server.pid)
            started = time.perf_counter()
            try:
                await channel.unary_unary("/bench.Idle/Ping")(b"", timeout=3)
                ping = f"{(time.perf_counter() - started) * 1000:.0f} ms"
            except grpc.aio.AioRpcError as exc:
                ping = f"{exc.code().name} after {time.perf_counter() - started:.0f} s"
            for call in calls:
                call.cancel()
        return (*before, *after, ping)
    finally:
        server.terminate()
        server.wait(10)


async def threads(args: argparse.Namespace) -> None:
    print(f"{args.streams} open server-streaming calls, one client channel")
    for kind, label in (
        ("sync", f"grpc.server(ThreadPoolExecutor({args.streams}))"),
        ("aio", "grpc.aio.server()"),
    ):
        rss0, threads0, rss1, threads1, ping = await hold_streams(kind, args.streams)
        print(
            f"{label:42} RSS {rss0 / 1024:6.1f} -> {rss1 / 1024:6.1f} MiB "
            f"({(rss1 - rss0) / args.streams:5.1f} KiB/stream), threads {threads0} -> {threads1}"
            f", a unary call meanwhile: {ping}"
        )


def main() -> None:
    if sys.argv[1:2] == ["_server"]:
        kind, port, workers = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        if kind == "sync":
            serve_sync(port, workers)
        else:
            asyncio.run(serve_aio(port))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("send", "streams"):
        sub = commands.add_parser(name)
        sub.add_argument("--address", default="127.0.0.1:50051")
        sub.add_argument("--key", required=True)
    commands.choices["send"].add_argument("--tenant", default="demo/echo")
    commands.choices["send"].add_argument("--requests", type=int, default=200)
    commands.choices["send"].add_argument("--concurrency", type=int, default=8)
    commands.choices["streams"].add_argument("--tenant", default="demo/slow")
    commands.choices["streams"].add_argument("--sidecar-pid", type=int, required=True)
    commands.choices["streams"].add_argument("--streams", type=int, default=200)
    commands.choices["streams"].add_argument("--tasks", type=int, default=2)
    commands.add_parser("threads").add_argument("--streams", type=int, default=200)
    args = parser.parse_args()
    asyncio.run({"send": send, "streams": streams, "threads": threads}[args.command](args))


if __name__ == "__main__":
    main()
