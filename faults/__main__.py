"""`make faults`: the fault suite on a cluster of its own (docs/reliability.md).

    .venv/bin/python -m faults                         # every fault, 20 trials each
    .venv/bin/python -m faults --trials 2 --only redis-restart,web-sigterm

It starts throwaway PostgreSQL and Redis, two web processes, two agents workers, a push and a
maintenance worker, beat and a gRPC sidecar behind HAProxy, then runs each fault's trials in
turn and prints, per fault, trials / tasks / stuck / lost / duplicated, and what the counted
cases were. Exit status 0 when every count is 0. Logs of every process are kept in the run
directory (var/faults/run-<time>/ unless --run-dir).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import signal
import sys
import time
from pathlib import Path

from .cluster import ROOT, running_cluster
from .suite import AGENTS, FAULTS, SETTINGS, Outcome, notes, receiver_for, run_fault, table


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m faults", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--trials", type=int, default=20, help="trials of each fault (20)")
    parser.add_argument(
        "--only", help="a comma-separated subset of: " + ", ".join(f.name for f in FAULTS)
    )
    parser.add_argument("--run-dir", type=Path, help="logs and data (var/faults/run-<time>)")
    parser.add_argument("--json", type=Path, help="also write the counts here")
    args = parser.parse_args(argv)
    if args.trials < 1:
        parser.error("--trials must be at least 1")
    names = {f.name for f in FAULTS}
    if args.only and (unknown := set(args.only.split(",")) - names):
        parser.error(f"unknown fault(s) {', '.join(sorted(unknown))}; known: {', '.join(names)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    chosen = [f for f in FAULTS if not args.only or f.name in args.only.split(",")]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    run_dir = (args.run_dir or ROOT / "var" / "faults" / f"run-{stamp}").resolve()
    started = time.monotonic()

    def log(line: str) -> None:
        print(f"[{time.monotonic() - started:6.0f}s] {line}", flush=True)

    def interrupted(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    # SIGTERM too stops the cluster and its servers on the way out.
    signal.signal(signal.SIGTERM, interrupted)
    outcomes: list[Outcome] = []
    log(f"starting the cluster (logs in {run_dir})")
    with running_cluster(run_dir, settings=SETTINGS, grpc=1) as cluster:
        made = cluster.seed(AGENTS)
        if made["skipped"]:
            log(f"this platform's agents lack {', '.join(made['skipped'])}: left unset")
        receiver = receiver_for(run_dir)
        try:
            for fault in chosen:
                log(f"{fault.name}: {fault.what}")
                outcomes.append(
                    asyncio.run(
                        run_fault(fault, cluster, made, receiver, trials=args.trials, log=log)
                    )
                )
        finally:
            receiver.stop()
    print()
    print(table(outcomes))
    if text := notes(outcomes):
        print()
        print(text)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    o.fault.name: {
                        "trials": o.trials,
                        "tasks": o.counts.tasks,
                        "stuck": o.counts.stuck,
                        "lost": o.counts.lost,
                        "duplicated": o.counts.duplicated,
                        "notes": dict(o.counts.notes),
                        "seen": dict(o.counts.seen),
                        "revived": o.revived,
                    }
                    for o in outcomes
                },
                indent=2,
            )
            + "\n"
        )
    log("done")
    return 0 if all(o.counts.clean for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
