"""The platform on one process of each kind, and on two, behind HAProxy: its throughput on
bench/compare.py's closed-loop scenarios, one topology beside the other.

    .venv/bin/python bench/topology.py            # about 8 minutes on 2 cores
    .venv/bin/python bench/topology.py --quick    # about 4 minutes

Each topology is a cluster of faults/cluster.py with PostgreSQL and Redis of its own: `1` is
one web process (daphne), one agents worker, beat and a maintenance worker; `2` is two web
processes and two agents workers, the rest as in `1`. Both are reached through HAProxy
(deploy/haproxy.cfg, round robin) so that the proxy's hop is in both figures. Both run side by
side and each measurement is taken on one, then the other, once both are idle (as
bench/compare.py does with its two systems), with bench/load.py as the client: blocking and
non-blocking SendMessage, GetTask and SendStreamingMessage to the `echo` agent, at each
concurrency. It prints one table (`2 ÷ 1`: above 1, two processes of each kind do more) and
writes it, with every figure, to `--out` (var/bench/topology-<time>.{json,md}).

Everything runs on one machine: with two cores, two processes of each kind share the cores
that one process had, with the client, PostgreSQL, Redis and HAProxy.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path[:0] = [str(REPO), str(BENCH)]

import compare  # noqa: E402 (bench/ is a folder of scripts, not a package)

from faults.cluster import Cluster, running_cluster  # noqa: E402

TENANT = "bench"
SIZES = (1, 2)
# As scripts/run.sh runs the platform unless LOG_LEVEL=DEBUG: no access log, quiet workers.
SETTINGS = {"A2A_ACCESS_LOG": "false", "CELERY_QUIET": "true"}


def start(size: int, run_dir: Path, stack: contextlib.ExitStack) -> dict[str, Any]:
    """A cluster of `size` web processes and agents workers, its `echo` agent and key."""
    cluster: Cluster = stack.enter_context(
        running_cluster(
            run_dir / f"size-{size}",
            settings=SETTINGS,
            web=size,
            agents=size,
            grpc=1,
            push=0,
            maintenance=1,
        )
    )
    out = cluster.manage(
        str(BENCH / "platform_seed.py"),
        "--platform-dir",
        str(REPO),
        "--tenant",
        TENANT,
        "setup",
        "--agents",
        json.dumps({"echo": {}}),
    )
    key = json.loads(out.strip().splitlines()[-1])["key"]
    pids = {
        role: [m.pid for m in cluster.members.values() if m.role == role]
        for role in ("web", "agents", "front")
    }
    services = cluster.services
    watch = {
        "web": pids["web"],
        "worker": pids["agents"],
        "haproxy": pids["front"],
        "postgres": [int((services.directory / "pg" / "postmaster.pid").read_text().split()[0])],
        "redis": [int((services.directory / "redis.pid").read_text().split()[0])],
    }
    return {
        "size": size,
        "cluster": cluster,
        "url": cluster.agent_url(TENANT, "echo"),
        "key": key,
        "watch": watch,
    }


def settle(topologies: list[dict[str, Any]], timeout: float) -> None:
    """Until the clusters' own processes are idle (bench/compare.py's settle)."""
    systems = [compare.System(f"size-{t['size']}", "", watch=t["watch"]) for t in topologies]
    compare.settle(systems, timeout)


def measure(
    topology: dict[str, Any], op: str, concurrency: int, args: argparse.Namespace
) -> dict[str, Any]:
    spec = {
        "key": topology["key"],
        "watch": topology["watch"],
        "kind": "closed",
        "op": op,
        "url": topology["url"],
        "concurrency": concurrency,
        "duration": args.duration,
        "warmup": args.warmup,
        "drain_timeout": 120,
    }
    return compare.load(spec, timeout=args.duration + args.warmup + 600)


def cpu_note(result: dict[str, Any]) -> str:
    usage = result.get("usage") or {}
    parts = [
        f"{name} {usage[name]['cpu_pct']:.0f}%"
        for name in ("client", "web", "worker", "postgres", "redis", "haproxy")
        if name in usage
    ]
    if "machine" in usage:  # neither the client nor the cluster: other work on the machine
        parts.append(f"others {usage['machine']['others_pct']:.0f}%")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, 16 clients, 3 s cells")
    parser.add_argument("--ops", default="send,send_nowait,get,stream")
    parser.add_argument("--concurrency", help="closed-loop clients (16,64; quick 16)")
    parser.add_argument("--duration", type=float, help="seconds measured per cell (6; quick 3)")
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, help="each cell this many times (3; quick 1)")
    parser.add_argument("--out", type=Path, default=REPO / "var" / "bench")
    args = parser.parse_args(argv)
    args.duration = args.duration or (3.0 if args.quick else 6.0)
    args.rounds = args.rounds or (1 if args.quick else 3)
    concurrency = [
        int(c) for c in (args.concurrency or ("16" if args.quick else "16,64")).split(",")
    ]
    ops = args.ops.split(",")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    run_dir = args.out / f"topology-run-{stamp}"
    started = time.monotonic()
    meta = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": compare.machine(),
        "loadavg_start": compare.loadavg(),
        "commit": compare.git_describe(REPO),
        "argv": sys.argv[1:] if argv is None else argv,
    }
    results: dict[str, dict[str, Any]] = {}

    def log(line: str) -> None:
        print(f"[{time.monotonic() - started:6.0f}s] {line}", flush=True)

    with contextlib.ExitStack() as stack:
        topologies = []
        for size in SIZES:
            log(f"starting topology {size}")
            topologies.append(start(size, run_dir, stack))
        for op in ops:
            for n in concurrency:
                cell = f"{op}/{n}"
                taken: dict[int, list[dict[str, Any]]] = {}
                for r in range(args.rounds):
                    for topology in topologies:
                        settle(topologies, 60)
                        result = measure(topology, op, n, args)
                        taken.setdefault(topology["size"], []).append(result)
                        summary = compare.summary(("closed",), result)
                        log(f"{topology['size']} of each, {cell}, round {r + 1}: {summary}")
                for size, rounds in taken.items():
                    results.setdefault(str(size), {})[cell] = compare.median_round(rounds)
    meta["loadavg_end"] = compare.loadavg()
    meta["elapsed_s"] = round(time.monotonic() - started)

    headers = [
        "scenario",
        "1 process of each: req/s",
        "p50 / p95 ms",
        "2 processes of each: req/s",
        "p50 / p95 ms",
        "2 ÷ 1",
        "CPU % of a core (1 / 2)",
    ]
    rows = []
    for op in ops:
        for n in concurrency:
            cell = f"{op}/{n}"
            one, two = results["1"].get(cell, {}), results["2"].get(cell, {})
            rows.append(
                [
                    f"{compare.OP_NAMES[op]}, {n} clients",
                    compare.num(one.get("rps")),
                    compare.triple(one.get("latency_ms"), ("p50", "p95"))[0],
                    compare.num(two.get("rps")),
                    compare.triple(two.get("latency_ms"), ("p50", "p95"))[0],
                    compare.ratio(two.get("rps"), one.get("rps")),
                    f"{cpu_note(one)} / {cpu_note(two)}",
                ]
            )
    print()
    print(compare.text_table(rows, headers))
    box = meta["machine"]
    report = "\n".join(
        [
            f"### {meta['date'][:10]}: platform {meta['commit']}, 1 and 2 processes of each kind",
            "",
            f"Machine: {box['nproc']} cores ({box['cpu']}), {box['memory_gib']} GiB; load average "
            f"{meta['loadavg_start']} at the start, {meta['loadavg_end']} at the end. "
            f"`bench/topology.py {' '.join(meta['argv'])}` took {meta['elapsed_s']} s.",
            "",
            compare.markdown(rows, headers),
            "",
        ]
    )
    base = args.out / f"topology-{stamp}"
    Path(f"{base}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    Path(f"{base}.md").write_text(report)
    print(f"\nwrote {base}.json and {base}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
