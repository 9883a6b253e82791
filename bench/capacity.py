"""What the platform stores and sustains, for docs/capacity.md: one production-profile platform
(bench/compare.py's, on its throwaway PostgreSQL and Redis), a closed loop of blocking sends to
the echo agent, then the database's own account of what those tasks left behind.

    .venv/bin/python bench/capacity.py                  # 16 clients for 20 s
    .venv/bin/python bench/capacity.py --duration 60 --concurrency 64

It prints, as markdown: the throughput of the loop (one web process, one agents worker: the
`make run` command lines), and for each table of the task path its rows and bytes (heap,
indexes and TOAST: `pg_total_relation_size`, after a VACUUM so that dead row versions are free
space, as autovacuum keeps them in a steady state), per task and per event.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import compare  # noqa: E402 (bench/ is not a package)

# The tables a task's life writes, by model: the task, its history, artifacts and event log,
# the sent messageId, the counts ListTasks reads, and push deliveries (none here: no configs).
TABLES = {
    "task": "tasks_app_task",
    "message": "tasks_app_message",
    "artifact": "tasks_app_artifact",
    "event": "tasks_app_taskevent",
    "sent messageId": "tasks_app_sentmessage",
    "task count": "tasks_app_taskcount",
}


def table_sizes(dsn: str) -> dict[str, dict[str, int]]:
    import psycopg

    sizes = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name, table in TABLES.items():
            conn.execute(f"VACUUM {table}")
            rows, total, heap, indexes = conn.execute(
                f"SELECT count(*), pg_total_relation_size(%s), pg_relation_size(%s), "
                f"pg_indexes_size(%s) FROM {table}",
                [table, table, table],
            ).fetchone()
            sizes[name] = {"rows": rows, "bytes": total, "heap": heap, "indexes": indexes}
    return sizes


def report(loop: dict[str, Any], sizes: dict[str, dict[str, int]], args: Any) -> str:
    tasks = sizes["task"]["rows"]
    events = sizes["event"]["rows"]
    lines = [
        f"Closed loop: {args.concurrency} clients, blocking SendMessage to `echo`, "
        f"{args.duration:g} s: {loop['rps']} tasks/s (p50 {loop['latency_ms']['p50']} ms, "
        f"{loop['errors']} errors), {tasks} tasks and {events} events stored in all.",
        "",
        "| table | rows | rows per task | bytes | bytes per task | of which indexes |",
        "|---|---|---|---|---|---|",
    ]
    total = 0
    for name, size in sizes.items():
        total += size["bytes"]
        lines.append(
            f"| {name} | {size['rows']} | {size['rows'] / tasks:.2f} | {size['bytes']} | "
            f"{size['bytes'] / tasks:.0f} | {size['indexes'] / tasks:.0f} |"
        )
    lines += [
        f"| **all** | | | {total} | **{total / tasks:.0f}** | |",
        "",
        f"Per event: {sizes['event']['bytes'] / max(events, 1):.0f} bytes "
        f"({events / tasks:.2f} events per task).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args(argv)
    plan = compare.plan_from(compare.parse_args(["--quick"]))
    processes, services = compare.Processes(), compare.Services()
    run_dir = Path(tempfile.mkdtemp(prefix="a2a-capacity-"))
    try:
        services.start()
        system = compare.PlatformSystem(
            profile="production",
            platform_dir=compare.REPO,
            python=Path(sys.executable),
            services=services,
            processes=processes,
            run_dir=run_dir,
            plan=plan,
            process_source="run.sh",
        )
        system.start()
        spec = {
            **system.common(),
            "kind": "closed",
            "op": "send",
            "url": system.url("echo"),
            "concurrency": args.concurrency,
            "duration": args.duration,
            "warmup": 1.0,
            "drain_timeout": 60.0,
        }
        loop = compare.load(spec, timeout=args.duration + 400)
        if "failed" in loop:
            print(f"the load failed: {loop['failed']}\n{loop.get('stderr', '')}", file=sys.stderr)
            return 1
        print(report(loop, table_sizes(services.url("platform")), args))
    finally:
        processes.stop_all()
        services.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
