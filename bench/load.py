"""The load client of bench/compare.py: one process, asyncio + aiohttp, A2A v1.0 JSON-RPC.

    .venv/bin/python bench/load.py < spec.json > result.json

compare.py spawns it once per measurement, with a JSON spec on stdin (`kind` and its
parameters, below); it prints one JSON object. Every result carries the client's own CPU use
(`client`: CPU seconds and per cent of one core over the measured window), so a saturated
client is seen, and, given `watch` ({"name": [root pids]}), the CPU the watched process trees
used meanwhile. Every loop is bounded by a count and a deadline.

kinds:
- `closed`: `concurrency` clients, each sending its next request when the last one answered,
  for `warmup` + `duration` seconds; `op` is `send` (blocking SendMessage), `send_nowait`
  (configuration.returnImmediately), `get` (GetTask on `task_ids`), or `stream`
  (SendStreamingMessage: time to the first and to the final event, the first event's state).
  After `send_nowait` it waits (at most `drain_timeout`) until the agent has no submitted or
  working task, and reports the sustained rate over that whole time.
- `io`: `count` non-blocking sends, then GetTask polls until every task is terminal.
- `memory`: `count` non-blocking sends to an agent that awaits long, then the RSS of the
  `rss` process trees once all runs are working (or `wait_timeout` passed); then cancels them.
- `cancel`: `samples` times: start a task, wait until working, CancelTask, then GetTask until
  canceled.
- `scale`: GetTask and ListTasks variants, one at a time, on each of `targets` (an agent and
  its `seeded` stored tasks), the targets taking turns call by call, each read after a few
  unmeasured calls of its kind.
- `sequential`: one client's blocking SendMessage calls, one after another, each call's start
  (CLOCK_MONOTONIC, comparable between processes) and latency, until `seconds` passed or the
  file `stop_file` exists (bench/noisy_neighbour.py's quiet tenant).
- `burst`: `count` non-blocking SendMessage calls at `concurrency` clients, none retried, each
  answer counted by HTTP status and error reason; then, reading the platform's task table in
  PostgreSQL (`dsn`, `task_table`, `tenant_id`: not through the web processes, whose latency
  another client measures meanwhile), the time until none of the tenant's tasks is submitted
  or working (bench/noisy_neighbour.py's noisy tenant).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp

TERMINAL = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_FAILED",
    "TASK_STATE_REJECTED",
}
SETTLED = TERMINAL | {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"}
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- /proc --------------------------------------------------------------------------------


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    return children


def tree(roots: list[int]) -> list[int]:
    """The roots and all their descendants that are alive."""
    children = _children_map()
    seen: list[int] = []
    todo = list(roots)
    while todo:
        pid = todo.pop()
        if pid in seen or not Path(f"/proc/{pid}").exists():
            continue
        seen.append(pid)
        todo.extend(children.get(pid, []))
    return seen


def rss_kib(roots: list[int]) -> int:
    """Summed VmRSS of the process trees (shared pages count in each process, as ps shows)."""
    total = 0
    for pid in tree(roots):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def cpu_seconds(roots: list[int]) -> float:
    total = 0
    for pid in tree(roots):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / CLK_TCK


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


class Meter:
    """CPU used by this client and by the watched trees between start() and stop()."""

    def __init__(self, watch: dict[str, list[int]]) -> None:
        self.watch = watch

    def start(self) -> None:
        self.wall = time.perf_counter()
        self.own = own_cpu()
        self.trees = {name: cpu_seconds(pids) for name, pids in self.watch.items()}
        self.machine = machine_jiffies()

    def stop(self) -> dict[str, Any]:
        wall = time.perf_counter() - self.wall
        own = own_cpu() - self.own
        out: dict[str, Any] = {
            "wall_s": round(wall, 3),
            "client": {"cpu_s": round(own, 3), "cpu_pct": round(100 * own / wall, 1)},
        }
        ours = own
        for name, pids in self.watch.items():
            # Live processes only: one that exited meanwhile takes its CPU time with it.
            used = max(0.0, cpu_seconds(pids) - self.trees[name])
            ours += used
            out[name] = {"cpu_s": round(used, 3), "cpu_pct": round(100 * used / wall, 1)}
        # The machine's whole CPU use meanwhile, and what of it was neither this client nor the
        # watched processes: other work on a shared box, which makes figures noisy.
        busy, total = machine_jiffies()
        cores = os.cpu_count() or 1
        busy_s = (busy - self.machine[0]) / max(1, total - self.machine[1]) * wall * cores
        out["machine"] = {
            "busy_pct": round(100 * busy_s / wall, 1),
            "others_pct": round(max(0.0, 100 * (busy_s - ours) / wall), 1),
        }
        return out


# --- protocol -----------------------------------------------------------------------------


def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def message(text: str = "bench") -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}


def send_params(*, nowait: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"message": message()}
    if nowait:
        params["configuration"] = {"returnImmediately": True}
    return params


def seeded_id(i: int) -> str:
    """The id bench/compare.py's seeders give stored task i."""
    return f"00000000-0000-4000-8000-{i:012d}"


class RpcError(Exception):
    pass


async def call(http: aiohttp.ClientSession, url: str, method: str, params: dict[str, Any]) -> Any:
    async with http.post(url, json=rpc(method, params)) as response:
        text = await response.text()
    if response.status != 200:
        raise RpcError(f"HTTP {response.status}: {text[:200]}")
    body = json.loads(text)
    if "error" in body:
        raise RpcError(f"{method}: {json.dumps(body['error'])[:200]}")
    return body["result"]


def task_state(result: dict[str, Any]) -> str:
    task = result.get("task", result)
    return str(task.get("status", {}).get("state", ""))


def event_state(event: dict[str, Any]) -> str:
    if "task" in event:
        return str(event["task"].get("status", {}).get("state", ""))
    if "statusUpdate" in event:
        return str(event["statusUpdate"].get("status", {}).get("state", ""))
    if "artifactUpdate" in event:
        return "artifactUpdate"
    if "message" in event:
        return "message"
    return "?"


def client(spec: dict[str, Any], connections: int) -> aiohttp.ClientSession:
    """aiohttp rather than httpx: its C HTTP parser costs the client a fraction of the CPU,
    which matters on a box where the client shares two cores with the servers."""
    credentials = (
        {"Authorization": f"Bearer {spec['token']}"}
        if spec.get("token")
        else {"X-API-Key": spec["key"]}
    )
    return aiohttp.ClientSession(
        headers={**credentials, "A2A-Version": "1.0"},
        timeout=aiohttp.ClientTimeout(total=spec.get("timeout", 120)),
        connector=aiohttp.TCPConnector(limit=connections),
    )


def percentiles(values: list[float]) -> dict[str, float | int | None]:
    """p50/p95/p99 (nearest rank) in milliseconds, and the sample count."""
    if not values:
        return {"n": 0, "p50": None, "p95": None, "p99": None, "max": None}
    ordered = sorted(values)

    def rank(q: float) -> float:
        return round(
            ordered[min(len(ordered) - 1, max(0, int(q * len(ordered) + 0.5) - 1))] * 1e3, 2
        )

    return {
        "n": len(ordered),
        "p50": rank(0.50),
        "p95": rank(0.95),
        "p99": rank(0.99),
        "max": round(ordered[-1] * 1e3, 2),
    }


async def count_in_state(http: aiohttp.ClientSession, url: str, state: str) -> int:
    result = await call(http, url, "ListTasks", {"status": state, "pageSize": 1})
    return int(result.get("totalSize", 0))


async def unsettled(http: aiohttp.ClientSession, url: str) -> int:
    return await count_in_state(http, url, "TASK_STATE_SUBMITTED") + await count_in_state(
        http, url, "TASK_STATE_WORKING"
    )


async def wait_until(
    probe: Any, done: Any, *, timeout: float, interval: float = 0.25
) -> tuple[bool, float, Any]:
    """Call `probe()` until `done(value)`, at most `timeout` seconds: (done, seconds, last)."""
    started = time.perf_counter()
    value = None
    while time.perf_counter() - started < timeout:
        value = await probe()
        if done(value):
            return True, time.perf_counter() - started, value
        await asyncio.sleep(interval)
    return False, time.perf_counter() - started, value


async def gather_limited(limit: int, factories: list[Any]) -> list[Any]:
    gate = asyncio.Semaphore(limit)

    async def guarded(factory: Any) -> Any:
        async with gate:
            try:
                return await factory()
            except Exception as exc:  # counted by the caller
                return exc

    return await asyncio.gather(*(guarded(f) for f in factories))


# --- closed loop --------------------------------------------------------------------------


async def closed(spec: dict[str, Any]) -> dict[str, Any]:
    op, url, concurrency = spec["op"], spec["url"], int(spec["concurrency"])
    warmup, duration = float(spec.get("warmup", 1.0)), float(spec["duration"])
    task_ids: list[str] = list(spec.get("task_ids", []))
    meter = Meter(spec.get("watch", {}))
    latencies: list[float] = []
    first_event: list[float] = []
    first_states: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    created: list[str] = []
    completed = 0

    async with client(spec, concurrency + 4) as http:
        if op == "get" and not task_ids:
            for _ in range(20):
                task_ids.append(
                    (await call(http, url, "SendMessage", send_params(nowait=False)))["task"]["id"]
                )

        async def once() -> tuple[float | None, str | None]:
            """One request: (time to first event, first event's state) for streams."""
            if op in ("send", "send_nowait"):
                result = await call(
                    http, url, "SendMessage", send_params(nowait=op == "send_nowait")
                )
                state = task_state(result)
                created.append(result["task"]["id"])
                if op == "send" and state != "TASK_STATE_COMPLETED":
                    raise RpcError(f"blocking send answered {state}")
                return None, None
            if op == "get":
                result = await call(http, url, "GetTask", {"id": random.choice(task_ids)})
                if not result.get("id"):
                    raise RpcError("GetTask without id")
                return None, None
            if op == "stream":
                started = time.perf_counter()
                first: float | None = None
                first_state = None
                last_state = ""
                body = rpc("SendStreamingMessage", send_params(nowait=False))
                async with http.post(url, json=body) as response:
                    if response.status != 200:
                        raise RpcError(f"HTTP {response.status}")
                    async for raw in response.content:
                        line = raw.decode().rstrip("\r\n")
                        if not line.startswith("data:"):
                            continue
                        if first is None:
                            first = time.perf_counter() - started
                        payload = json.loads(line[5:])
                        if "error" in payload:
                            raise RpcError(json.dumps(payload["error"])[:200])
                        last_state = event_state(payload["result"])
                        if first_state is None:
                            first_state = last_state
                if last_state != "TASK_STATE_COMPLETED":
                    raise RpcError(f"stream ended on {last_state or 'nothing'}")
                return first, first_state
            raise SystemExit(f"unknown op {op}")

        begin = time.perf_counter()
        measure_from = begin + warmup
        measure_to = measure_from + duration

        async def worker() -> None:
            nonlocal completed
            for _ in range(1_000_000):  # bounded; the deadline ends it long before
                started = time.perf_counter()
                if started >= measure_to:
                    return
                try:
                    first, first_state = await once()
                except Exception as exc:
                    if measure_from <= time.perf_counter() <= measure_to:
                        errors[str(exc)[:120] or type(exc).__name__] += 1
                    await asyncio.sleep(0.05)  # a failing server is not hammered
                    continue
                ended = time.perf_counter()
                # What completes inside the window counts: its rate and its latencies.
                if measure_from <= ended <= measure_to:
                    completed += 1
                    latencies.append(ended - started)
                    if first is not None:
                        first_event.append(first)
                    if first_state is not None:
                        first_states[first_state] += 1

        async def start_meter() -> None:
            await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
            meter.start()

        meter_task = asyncio.create_task(start_meter())
        workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
        await asyncio.sleep(max(0.0, measure_to - time.perf_counter()))
        await meter_task
        usage = meter.stop()
        await asyncio.wait_for(
            asyncio.gather(*workers), timeout=float(spec.get("timeout", 120)) + 5
        )
        out: dict[str, Any] = {
            "op": op,
            "concurrency": concurrency,
            "duration_s": duration,
            "completed": completed,
            "rps": round(completed / duration, 1),
            "latency_ms": percentiles(latencies),
            "errors": sum(errors.values()),
            "error_samples": dict(errors.most_common(3)),
            "usage": usage,
        }
        if op == "stream":
            out["first_event_ms"] = percentiles(first_event)
            out["first_event_states"] = dict(first_states)
        if op == "send_nowait":
            ok, seconds, left = await wait_until(
                lambda: unsettled(http, url),
                lambda n: n == 0,
                timeout=float(spec.get("drain_timeout", 180)),
                interval=0.5,
            )
            whole = time.perf_counter() - begin
            out["created"] = len(created)
            out["drained"] = ok
            out["drain_s"] = round(seconds, 1)
            out["left_unsettled"] = left
            out["sustained_tps"] = round(len(created) / whole, 1) if ok else None
    return out


# --- I/O-bound ----------------------------------------------------------------------------


async def io(spec: dict[str, Any]) -> dict[str, Any]:
    url, count = spec["url"], int(spec["count"])
    meter = Meter(spec.get("watch", {}))
    async with client(spec, 68) as http:
        meter.start()
        started = time.perf_counter()
        sent = await gather_limited(
            64, [lambda: call(http, url, "SendMessage", send_params(nowait=True))] * count
        )
        accepted_s = time.perf_counter() - started
        # In the order sent: runs start (and so end) roughly in that order.
        pending = [r["task"]["id"] for r in sent if isinstance(r, dict)]
        send_errors = [str(r)[:120] for r in sent if not isinstance(r, dict)]
        states: Counter[str] = Counter()
        deadline = started + float(spec.get("wait_timeout", 600))
        polls = 0
        # Each round polls the pending tasks 16 at a time, oldest first, and stops at a batch
        # that is not all terminal: the polling itself stays light (a GetTask per pending task
        # per round would load the server with the measurement), yet a burst of tasks ending
        # together is seen within one round.
        for _ in range(100_000):
            if not pending or time.perf_counter() >= deadline:
                break
            while pending:
                batch = pending[:16]
                results = await gather_limited(
                    16, [lambda i=i: call(http, url, "GetTask", {"id": i}) for i in batch]
                )
                polls += len(batch)
                done = {
                    task_id: task_state(result)
                    for task_id, result in zip(batch, results, strict=True)
                    if isinstance(result, dict) and task_state(result) in TERMINAL
                }
                states.update(done.values())
                pending = [task_id for task_id in pending if task_id not in done]
                if len(done) < len(batch):
                    break
            if pending:
                await asyncio.sleep(0.1)
        wall = time.perf_counter() - started
        usage = meter.stop()
    return {
        "count": count,
        "wall_s": round(wall, 2) if not pending else None,
        "accepted_s": round(accepted_s, 2),
        "not_terminal": len(pending),
        "states": dict(states),
        "get_task_polls": polls,
        "send_errors": len(send_errors),
        "error_samples": send_errors[:3],
        "usage": usage,
    }


# --- memory per in-flight run -------------------------------------------------------------


async def memory(spec: dict[str, Any]) -> dict[str, Any]:
    url, count = spec["url"], int(spec["count"])
    roots: list[int] = spec["rss"]
    async with client(spec, 40) as http:
        # One run first, so that what a first run loads lazily is in the baseline.
        warm = await call(http, url, "SendMessage", send_params(nowait=True))
        await wait_until(
            lambda: call(http, url, "GetTask", {"id": warm["task"]["id"]}),
            lambda r: task_state(r) == "TASK_STATE_WORKING",
            timeout=60,
            interval=0.1,
        )
        await call(http, url, "CancelTask", {"id": warm["task"]["id"]})
        await wait_until(lambda: unsettled(http, url), lambda n: n == 0, timeout=60, interval=0.2)
        await asyncio.sleep(1)
        before = rss_kib(roots)
        started = time.perf_counter()
        sent = await gather_limited(
            32, [lambda: call(http, url, "SendMessage", send_params(nowait=True))] * count
        )
        accepted_s = time.perf_counter() - started
        ids = [r["task"]["id"] for r in sent if isinstance(r, dict)]
        peak = before
        working = 0
        deadline = started + float(spec.get("wait_timeout", 120))
        for _ in range(100_000):
            working = await count_in_state(http, url, "TASK_STATE_WORKING")
            peak = max(peak, rss_kib(roots))
            if working >= len(ids) or time.perf_counter() >= deadline:
                break
            await asyncio.sleep(0.5)
        all_working_s = time.perf_counter() - started if working >= len(ids) else None
        await asyncio.sleep(1)
        working = await count_in_state(http, url, "TASK_STATE_WORKING")
        after = rss_kib(roots)
        peak = max(peak, after)
        processes = len(tree(roots))
        # Cancel everything, so that nothing of this scenario runs into the next one.
        cancel_started = time.perf_counter()
        cancels = await gather_limited(
            16, [lambda i=i: call(http, url, "CancelTask", {"id": i}) for i in ids]
        )
        cleared, clear_s, left = await wait_until(
            lambda: unsettled(http, url),
            lambda n: n == 0,
            timeout=float(spec.get("clear_timeout", 180)),
            interval=0.5,
        )
        cancel_errors = Counter(str(c)[:100] for c in cancels if not isinstance(c, dict))
    delta = after - before
    return {
        "count": count,
        "accepted": len(ids),
        "accepted_s": round(accepted_s, 2),
        "working": working,
        "all_working_s": round(all_working_s, 1) if all_working_s is not None else None,
        "rss_before_kib": before,
        "rss_after_kib": after,
        "rss_peak_kib": peak,
        "processes": processes,
        "kib_per_run": round(delta / working, 1) if working else None,
        "cancel_all_s": round(time.perf_counter() - cancel_started, 1),
        "cleared": cleared,
        "left_unsettled": left,
        "cancel_errors": dict(cancel_errors.most_common(3)),
    }


# --- cancel latency -----------------------------------------------------------------------


async def cancel(spec: dict[str, Any]) -> dict[str, Any]:
    url, samples = spec["url"], int(spec["samples"])
    calls: list[float] = []
    totals: list[float] = []
    answered: Counter[str] = Counter()
    problems: Counter[str] = Counter()
    deadline = time.perf_counter() + float(spec.get("max_seconds", 300))
    async with client(spec, 4) as http:
        for _ in range(samples):
            if time.perf_counter() > deadline:
                problems["time budget spent"] += 1
                break
            task_id = (await call(http, url, "SendMessage", send_params(nowait=True)))["task"]["id"]
            ok, _, _ = await wait_until(
                lambda task_id=task_id: call(http, url, "GetTask", {"id": task_id}),
                lambda r: task_state(r) == "TASK_STATE_WORKING",
                timeout=60,
                interval=0.02,
            )
            if not ok:
                problems["never working"] += 1
                continue
            started = time.perf_counter()
            try:
                result = await call(http, url, "CancelTask", {"id": task_id})
                answered[task_state(result)] += 1
            except RpcError as exc:
                problems[str(exc)[:100]] += 1
                continue
            calls.append(time.perf_counter() - started)
            ok, _, _ = await wait_until(
                lambda task_id=task_id: call(http, url, "GetTask", {"id": task_id}),
                lambda r: task_state(r) == "TASK_STATE_CANCELED",
                timeout=30,
                interval=0.005,
            )
            if ok:
                totals.append(time.perf_counter() - started)
            else:
                problems["not canceled within 30 s"] += 1
    return {
        "samples": samples,
        "cancel_call_ms": percentiles(calls),
        "to_canceled_ms": percentiles(totals),
        "cancel_answered": dict(answered),
        "problems": dict(problems),
    }


# --- scale: reads over many stored tasks --------------------------------------------------


# Calls of each scale read made before its measured ones (see `scale`).
SCALE_WARMUP_CALLS = 4


async def scale(spec: dict[str, Any]) -> dict[str, Any]:
    """Each read on every target (an agent and its stored tasks `start` .. `start + seeded -
    1`), the targets taking turns call by call, so that each read's figures for the targets
    are taken under the same conditions."""
    targets = spec["targets"]
    iterations, budget = int(spec.get("iterations", 50)), float(spec.get("seconds_per_op", 10))
    budget *= len(targets)
    pages = int(spec.get("pages", 20))
    rng = random.Random(7)
    outs: list[dict[str, Any]] = [{"seeded": int(t["seeded"])} for t in targets]
    async with client(spec, 2) as http:

        async def timed(params_for: Any, check: Any, runs: int) -> list[dict[str, Any]]:
            # Unmeasured first calls: each web process's first call of a kind pays its
            # one-time costs (caches, lazy imports), which say nothing about the data's size.
            for target in targets:
                for _ in range(SCALE_WARMUP_CALLS):
                    await call(http, target["url"], *params_for(target))
            values: list[list[float]] = [[] for _ in targets]
            bad: list[Counter[str]] = [Counter() for _ in targets]
            until = time.perf_counter() + budget
            for n in range(runs):
                if n >= 3 and time.perf_counter() > until:
                    break
                for i, target in enumerate(targets):
                    method, params = params_for(target)
                    started = time.perf_counter()
                    try:
                        result = await call(http, target["url"], method, params)
                    except RpcError as exc:
                        bad[i][str(exc)[:100]] += 1
                        continue
                    values[i].append(time.perf_counter() - started)
                    problem = check(result)
                    if problem:
                        bad[i][problem] += 1
            return [
                {**percentiles(v), "problems": dict(b)} for v, b in zip(values, bad, strict=True)
            ]

        def page_of(size: int) -> Any:
            return lambda r: (
                None if len(r.get("tasks", [])) == size else f"{len(r.get('tasks', []))} tasks"
            )

        def each(key: str, figures: list[dict[str, Any]]) -> None:
            for out, figure in zip(outs, figures, strict=True):
                out[key] = figure

        each(
            "get",
            await timed(
                lambda t: (
                    "GetTask",
                    {"id": seeded_id(int(t["start"]) + rng.randrange(int(t["seeded"])))},
                ),
                lambda r: None if r.get("id") else "no id",
                iterations,
            ),
        )
        each(
            "list_first",
            await timed(lambda t: ("ListTasks", {"pageSize": 50}), page_of(50), iterations),
        )
        for out, target in zip(outs, targets, strict=True):
            first = await call(http, target["url"], "ListTasks", {"pageSize": 50})
            out["total_size"] = first.get("totalSize")
        each(
            "list_state",
            await timed(
                lambda t: ("ListTasks", {"pageSize": 50, "status": "TASK_STATE_FAILED"}),
                page_of(50),
                iterations,
            ),
        )
        each(
            "list_context",
            await timed(
                lambda t: (
                    "ListTasks",
                    {
                        "pageSize": 50,
                        "contextId": "ctx-"
                        + str(int(t["start"]) // 10 + rng.randrange(int(t["seeded"]) // 10)),
                    },
                ),
                page_of(10),
                iterations,
            ),
        )
        # 20 pages deep: each walk starts at the first page and follows nextPageToken.
        walks: list[list[float]] = [[] for _ in targets]
        page_times: list[list[float]] = [[] for _ in targets]
        last_page: list[list[float]] = [[] for _ in targets]
        bad: list[Counter[str]] = [Counter() for _ in targets]
        until = time.perf_counter() + budget * 2
        for n in range(max(1, iterations // 5)):
            if n >= 2 and time.perf_counter() > until:
                break
            for i, target in enumerate(targets):
                token = ""
                walk_started = time.perf_counter()
                for p in range(pages):
                    params: dict[str, Any] = {"pageSize": 50}
                    if token:
                        params["pageToken"] = token
                    started = time.perf_counter()
                    result = await call(http, target["url"], "ListTasks", params)
                    elapsed = time.perf_counter() - started
                    page_times[i].append(elapsed)
                    if p == pages - 1:
                        last_page[i].append(elapsed)
                    if len(result.get("tasks", [])) != 50:
                        bad[i][f"page {p + 1}: {len(result.get('tasks', []))} tasks"] += 1
                    token = result.get("nextPageToken", "")
                    if not token and p < pages - 1:
                        bad[i][f"no token after page {p + 1}"] += 1
                        break
                walks[i].append(time.perf_counter() - walk_started)
        for i, out in enumerate(outs):
            out["list_deep"] = {
                "pages": pages,
                "walk": percentiles(walks[i]),
                "page": percentiles(page_times[i]),
                "last_page": percentiles(last_page[i]),
                "problems": dict(bad[i]),
            }
    return {"sizes": outs}


# --- two tenants: one client's latency while another tenant bursts ---------------------------


def refusal(status: int, body: Any) -> str:
    """What a refused call was refused with: the HTTP status and the ErrorInfo reason (else the
    JSON-RPC code), e.g. `HTTP 429 RATE_LIMITED`."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return f"HTTP {status}"
    details = error.get("data") if isinstance(error.get("data"), list) else []
    reasons = [
        d.get("reason")
        for d in details
        if isinstance(d, dict) and str(d.get("@type", "")).endswith("google.rpc.ErrorInfo")
    ]
    return f"HTTP {status} {reasons[0] if reasons and reasons[0] else error.get('code')}"


async def send_once(
    http: aiohttp.ClientSession, url: str, *, nowait: bool
) -> tuple[str, dict[str, Any] | None]:
    """One SendMessage: ("ok", its result) or (what refused or broke it, None)."""
    try:
        async with http.post(url, json=rpc("SendMessage", send_params(nowait=nowait))) as r:
            text = await r.text()
            status = r.status
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"transport {type(exc).__name__}", None
    try:
        body = json.loads(text)
    except ValueError:
        return f"HTTP {status} (not JSON)", None
    if status != 200 or "error" in body:
        return refusal(status, body), None
    return "ok", body.get("result") or {}


async def sequential(spec: dict[str, Any]) -> dict[str, Any]:
    url = spec["url"]
    stop_file = Path(spec["stop_file"]) if spec.get("stop_file") else None
    samples: list[list[Any]] = []
    async with client(spec, 2) as http:
        for _ in range(int(spec.get("warmup_calls", 3))):  # not measured: first-call costs
            await send_once(http, url, nowait=False)
        deadline = time.monotonic() + float(spec["seconds"])
        for _ in range(1_000_000):  # bounded; the deadline or the stop file ends it first
            if time.monotonic() >= deadline or (stop_file is not None and stop_file.exists()):
                break
            started = time.monotonic()
            outcome, result = await send_once(http, url, nowait=False)
            if outcome == "ok" and task_state(result or {}) != "TASK_STATE_COMPLETED":
                outcome = f"answered {task_state(result or {}) or 'no task'}"
            samples.append([round(started, 6), round(time.monotonic() - started, 6), outcome])
    return {"samples": samples}


class TenantTasks:
    """A tenant's tasks by state, read from the platform's task table on one connection."""

    def __init__(self, dsn: str, table: str, tenant_id: int) -> None:
        import psycopg
        from psycopg import sql

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.statement = sql.SQL(
            "SELECT state, count(*) FROM {} WHERE tenant_id = %s GROUP BY state"
        ).format(sql.Identifier(table))
        self.tenant_id = tenant_id

    def states(self) -> dict[str, int]:
        rows = self.conn.execute(self.statement, (self.tenant_id,)).fetchall()
        return {str(state): int(n) for state, n in rows}

    def close(self) -> None:
        self.conn.close()


def in_flight(states: dict[str, int]) -> int:
    """Tasks submitted or working (a run waiting or running)."""
    return sum(n for state, n in states.items() if state not in SETTLED)


async def burst(spec: dict[str, Any]) -> dict[str, Any]:
    url, count, concurrency = spec["url"], int(spec["count"]), int(spec["concurrency"])
    tasks = TenantTasks(spec["dsn"], spec["task_table"], int(spec["tenant_id"]))
    try:
        return await _burst(spec, url, count, concurrency, tasks)
    finally:
        tasks.close()


async def _burst(
    spec: dict[str, Any], url: str, count: int, concurrency: int, tasks: TenantTasks
) -> dict[str, Any]:
    before = await asyncio.to_thread(tasks.states)
    meter = Meter(spec.get("watch", {}))
    outcomes: Counter[str] = Counter()
    accept_latency: list[float] = []
    async with client(spec, concurrency + 4) as http:
        meter.start()
        started = time.monotonic()

        async def one() -> None:
            sent = time.monotonic()
            outcome, _ = await send_once(http, url, nowait=True)
            outcomes[outcome] += 1
            if outcome == "ok":
                accept_latency.append(time.monotonic() - sent)

        await gather_limited(concurrency, [one] * count)
        sent_all = time.monotonic()
        # Until nothing of the tenant's waits or runs: its backlog has drained.
        drained_at = None
        states: dict[str, int] = {}
        deadline = started + float(spec.get("drain_timeout", 600))
        for _ in range(1_000_000):
            states = await asyncio.to_thread(tasks.states)
            if in_flight(states) == 0:
                drained_at = time.monotonic()
                break
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.2)
        usage = meter.stop()
    accepted = outcomes.pop("ok", 0)
    return {
        "count": count,
        "concurrency": concurrency,
        "started": round(started, 6),
        "drained_at": round(drained_at, 6) if drained_at is not None else None,
        "accepted": accepted,
        "refused": dict(outcomes.most_common()),
        "accept_latency_ms": percentiles(accept_latency),
        "sending_s": round(sent_all - started, 2),
        "drain_s": round(drained_at - started, 2) if drained_at is not None else None,
        "left_in_flight": in_flight(states),
        # What became of this burst's tasks: the change per state since it began.
        "states": {s: n - before.get(s, 0) for s, n in states.items() if n != before.get(s, 0)},
        "usage": usage,
    }


KINDS = {
    "closed": closed,
    "io": io,
    "memory": memory,
    "cancel": cancel,
    "scale": scale,
    "sequential": sequential,
    "burst": burst,
}


def main() -> None:
    spec = json.load(sys.stdin)
    result = asyncio.run(KINDS[spec["kind"]](spec))
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
