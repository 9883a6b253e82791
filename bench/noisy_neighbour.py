"""Noisy neighbour: one tenant's latency while another tenant bursts, on the production profile.

    make bench-noisy                                     # both variants, 2 rounds (about 6 minutes)
    .venv/bin/python bench/noisy_neighbour.py --quick    # a small bounded run (about 2 minutes)
    .venv/bin/python bench/noisy_neighbour.py --platform-dir /tmp/before --variants none
    .venv/bin/python bench/noisy_neighbour.py --platform-env A2A_LANE_WINDOW=0 \\
        --n-limits running_runs=20,requests_per_second=50,request_burst=50

The platform in `--platform-dir` runs as bench/compare.py runs it (PostgreSQL and Redis of
its own, the processes scripts/run.sh of that tree starts, `--platform-env` added to their
settings), with tenants of this scenario's own:

- `quiet` (Q): an `echo` agent. One client sends blocking v1.0 JSON-RPC SendMessage calls,
  one after another, and records each call's latency.
- `noisy` (N): an `echo` agent whose every run awaits `--n-delay` seconds (2: an agent
  waiting on a model). It sends `--n-messages` non-blocking SendMessage calls at
  `--n-clients` clients at once, none retried.
- `limited`: the same as `noisy`, on a plan of its own (`agents.models.Plan`, made by
  bench/platform_seed.py before the platform starts) with the limits of `--n-limits`.

Each variant (`--variants`: `none` bursts from `noisy`, the platform's defaults deciding;
`limits` from `limited`) is measured in two phases, `--rounds` times, the variants taking
turns, each phase once the platform's processes are idle:

(a) Q alone for `--q-alone-seconds`;
(b) Q while N bursts: Q's calls that start between the first of N's sends and the moment
    none of N's tasks is submitted or working any more (N's backlog drained, read from the
    platform's task table in PostgreSQL, not through the web processes Q is measured on), at
    most `--drain-timeout` seconds.

Q's client and N's clients run in processes of their own (bench/load.py's `sequential` and
`burst`), so N's 64 clients do not delay Q's client on the client side. Per phase it reports
Q's p50, p95, max and count; for N, the calls accepted and refused (by HTTP status and error
reason, e.g. `HTTP 429 RATE_LIMITED`), how long its sends took and how long until its
backlog drained. A platform with no plans reports the `limits` variant as not supported.
It prints one table and writes it, with every figure, to `--out`
(var/bench/noisy-<time>.{json,md}). Every process it started is stopped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))

import compare  # noqa: E402 (bench/ is a folder of scripts, not a package)
from load import percentiles  # noqa: E402

QUIET, NOISY, LIMITED = "quiet", "noisy", "limited"
# The tenant each variant's burst comes from.
BURSTING = {"none": NOISY, "limits": LIMITED}
# Limits the `limits` variant gives its tenant unless --n-limits says otherwise.
DEFAULT_N_LIMITS = "running_runs=20,requests_per_second=50,request_burst=50"


@dataclass
class Settings:
    variants: list[str]
    n_limits: dict[str, int]
    n_messages: int
    n_clients: int
    n_delay: float
    q_alone_seconds: float
    rounds: int
    drain_timeout: float
    settle_timeout: float


def limits_from(text: str) -> dict[str, int]:
    """`name=value,...` as a dict; values are whole numbers (0: unlimited)."""
    out = {}
    for pair in (p.strip() for p in text.split(",") if p.strip()):
        name, sep, value = pair.partition("=")
        if not sep or not value.strip().isdigit():
            raise SystemExit(f"--n-limits: expected name=number, not {pair!r}")
        out[name.strip()] = int(value)
    return out


class TwoTenants(compare.PlatformSystem):
    """The platform with the quiet tenant, the noisy one and, for the `limits` variant, the
    limited one on its plan: all made before the processes start, so no cache of theirs holds
    a tenant's limits from before its plan."""

    def __init__(self, settings: Settings, **kwargs: Any) -> None:
        super().__init__(profile="production", plan=None, **kwargs)  # type: ignore[arg-type]
        self.settings = settings
        self.tenants: dict[str, dict[str, Any]] = {}
        self.plan_result: dict[str, Any] = {}
        self.task_table = ""

    def prepare(self) -> None:
        slow = {"slow": {"delay_seconds": self.settings.n_delay}}
        wanted: dict[str, dict[str, Any]] = {
            QUIET: {"agents": {"echo": {}}},
            NOISY: {"agents": slow},
        }
        if "limits" in self.settings.variants:
            wanted[LIMITED] = {"agents": slow, "limits": self.settings.n_limits}
        made = self.seed_script("tenants", "--spec", json.dumps(wanted))
        self.task_table = made["task_table"]
        self.tenants = made["tenants"]
        self.plan_result = made["plans"].get(LIMITED, {})
        self.key = self.tenants[QUIET]["key"]

    def first_url(self) -> str:
        return self.url("echo", QUIET)

    def spec(self, tenant: str, agent: str) -> dict[str, Any]:
        return {"key": self.tenants[tenant]["key"], "url": self.url(agent, tenant)}


# --- the two phases ---------------------------------------------------------------------------


def q_figures(samples: list[list[Any]]) -> dict[str, Any]:
    """Q's calls: latency percentiles of those that completed, and what the others met."""
    ok = [latency for _, latency, outcome in samples if outcome == "ok"]
    problems: dict[str, int] = {}
    for _, _, outcome in samples:
        if outcome != "ok":
            problems[outcome] = problems.get(outcome, 0) + 1
    return {"latency_ms": percentiles(ok), "calls": len(samples), "problems": problems}


def q_alone(system: TwoTenants, settings: Settings) -> dict[str, Any]:
    spec = {**system.spec(QUIET, "echo"), "kind": "sequential"}
    spec["seconds"] = settings.q_alone_seconds
    result = compare.load(spec, timeout=settings.q_alone_seconds + 300)
    if "failed" in result:
        return result
    return q_figures(result["samples"])


def q_during_burst(
    system: TwoTenants, settings: Settings, variant: str, stop_file: Path
) -> dict[str, Any]:
    """Q's client runs in its own process from before N's first send until N's backlog has
    drained; its calls that started in that window are Q's figures."""
    tenant = BURSTING[variant]
    q_spec = {**system.spec(QUIET, "echo"), "kind": "sequential", "stop_file": str(stop_file)}
    q_spec["seconds"] = settings.drain_timeout + 60  # the stop file ends it first
    assert system.services is not None
    n_spec = {
        **system.spec(tenant, "slow"),
        "kind": "burst",
        "count": settings.n_messages,
        "concurrency": settings.n_clients,
        "drain_timeout": settings.drain_timeout,
        "dsn": system.services.url("platform"),
        "task_table": system.task_table,
        "tenant_id": system.tenants[tenant]["tenant_id"],
    }
    stop_file.unlink(missing_ok=True)
    spec_file = stop_file.with_name("quiet-spec.json")
    spec_file.write_text(json.dumps(q_spec))
    with spec_file.open() as spec_in:
        quiet = subprocess.Popen(
            [sys.executable, str(BENCH / "load.py")],
            stdin=spec_in,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    n_spec["watch"] = {**system.watch, "q_client": [quiet.pid]}
    try:
        time.sleep(1.0)  # Q's client past its unmeasured first calls, measuring
        burst = compare.load(n_spec, timeout=settings.drain_timeout + 300)
        stop_file.touch()
        out, err = quiet.communicate(timeout=300)
    finally:
        if quiet.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(quiet.pid, signal.SIGKILL)
            quiet.wait(10)
    if "failed" in burst:
        return {"failed": f"N's burst: {burst['failed']}", "stderr": burst.get("stderr", "")}
    if quiet.returncode:
        return {"failed": f"Q's client: {err.strip().splitlines()[-1:]}", "burst": burst}
    samples = json.loads(out)["samples"]
    start = burst["started"]
    end = burst["drained_at"] or start + settings.drain_timeout
    sent = start + burst["sending_s"]
    inside = [s for s in samples if start <= s[0] <= end]
    return {
        **q_figures(inside),
        "window_s": round(end - start, 2),
        # The window's two parts: while N's sends are being answered (the web processes busy
        # with them), then while its accepted runs are worked off.
        "while_sending": q_figures([s for s in inside if s[0] < sent]),
        "while_draining": q_figures([s for s in inside if s[0] >= sent]),
        "burst": burst,
    }


def run_rounds(
    system: TwoTenants,
    settings: Settings,
    run_dir: Path,
    log: Any,
    results: dict[str, list[dict[str, Any]]],
) -> None:
    """Each variant's two phases, `rounds` times, the variants taking turns; the figures go
    into `results` as they come, so that a failure keeps what was measured."""
    for variant in settings.variants:
        results[variant] = []
    for n in range(settings.rounds):
        for variant in settings.variants:
            if variant == "limits" and not system.plan_result.get("supported"):
                reason = system.plan_result.get("reason", "no plan")
                results[variant].append({"not_supported": reason})
                log(f"limits, round {n + 1}: not supported: {reason}")
                continue
            system.check_alive()
            compare.settle([system], settings.settle_timeout)
            alone = q_alone(system, settings)
            log(f"{variant}, round {n + 1}: Q alone {q_text(alone)}")
            compare.settle([system], settings.settle_timeout)
            during = q_during_burst(system, settings, variant, run_dir / "stop")
            log(f"{variant}, round {n + 1}: Q during N's burst {q_text(during)}")
            if "while_sending" in during:
                log(
                    f"{variant}, round {n + 1}: of which while N sends "
                    f"{q_text(during['while_sending'])}, then {q_text(during['while_draining'])}"
                )
            log(f"{variant}, round {n + 1}: N {n_text(during)}, {drain_note(during)}")
            results[variant].append({"alone": alone, "during": during})


# --- the table ------------------------------------------------------------------------------


def q_text(figures: dict[str, Any]) -> str:
    if "failed" in figures:
        return f"FAILED: {figures['failed']}"
    p = figures["latency_ms"]
    if not p["n"]:
        return f"no call completed ({figures['calls']} calls)"
    text = " / ".join(compare.num(p[k]) for k in ("p50", "p95", "max")) + f" ms ({p['n']:,})"
    if figures["problems"]:
        text += " " + ", ".join(f"{k}: {v}" for k, v in figures["problems"].items())
    return text


def n_text(during: dict[str, Any]) -> str:
    burst = during.get("burst")
    if not burst:
        return "-"
    refused = sum(burst["refused"].values())
    text = f"{burst['accepted']:,} accepted, {refused:,} refused"
    if refused:
        text += " (" + ", ".join(f"{k} {v:,}" for k, v in burst["refused"].items()) + ")"
    return text


def drained_text(burst: dict[str, Any]) -> str:
    if burst.get("drain_s") is not None:
        return compare.num(burst["drain_s"])
    return f"not drained ({burst['left_in_flight']:,} left)"


def drain_note(during: dict[str, Any]) -> str:
    burst = during.get("burst")
    if not burst:
        return "-"
    drained = burst.get("drain_s")
    return f"sent in {burst['sending_s']} s, " + (
        f"drained in {drained} s" if drained is not None else drained_text(burst)
    )


def cpu_text(burst: dict[str, Any]) -> str:
    usage = burst.get("usage") or {}
    names = {"client": "N's client", "q_client": "Q's client"}
    parts = [
        f"{names.get(name, name)} {usage[name]['cpu_pct']:.0f}%"
        for name in ("client", "q_client", "web", "worker", "postgres", "redis")
        if name in usage
    ]
    if "machine" in usage:
        parts.append(f"others {usage['machine']['others_pct']:.0f}%")
    return ", ".join(parts)


HEADERS = [
    "variant",
    "round",
    "Q alone p50 / p95 / max ms (calls)",
    "Q during N's burst p50 / p95 / max ms (calls)",
    "Q p95 ÷ alone",
    "N accepted / refused",
    "N sends s",
    "N drained s",
    "CPU % of a core during the burst",
]


def rows_for(results: dict[str, list[dict[str, Any]]]) -> list[list[str]]:
    rows = []
    for variant, rounds in results.items():
        for n, result in enumerate(rounds, 1):
            if "not_supported" in result:
                rows.append([variant, str(n), f"not supported: {result['not_supported']}"])
                rows[-1] += [""] * (len(HEADERS) - len(rows[-1]))
                continue
            alone, during = result["alone"], result["during"]
            burst = during.get("burst") or {}
            p95 = (
                (alone.get("latency_ms") or {}).get("p95"),
                (during.get("latency_ms") or {}).get("p95"),
            )
            rows.append(
                [
                    variant,
                    str(n),
                    q_text(alone),
                    q_text(during),
                    compare.ratio(p95[1], p95[0]),
                    n_text(during),
                    compare.num(burst.get("sending_s")),
                    drained_text(burst) if burst else "-",
                    cpu_text(burst),
                ]
            )
    return rows


def report(meta: dict[str, Any], settings: Settings, rows: list[list[str]]) -> str:
    box = meta["machine"]
    variants = []
    if "none" in settings.variants:
        variants.append("`none`: no plan, the platform's defaults")
    if "limits" in settings.variants:
        plan = meta.get("plan") or {}
        shown = plan.get("plan") or settings.n_limits
        given = ", ".join(f"{k}={v}" for k, v in shown.items() if k != "name" and v)
        variants.append(
            f"`limits`: the noisy tenant on a plan ({given})"
            if plan.get("supported")
            else f"`limits`: not supported ({plan.get('reason', '-')})"
        )
    return "\n".join(
        [
            f"### {meta['date'][:10]}: platform {meta['platform_commit']}, noisy neighbour"
            + (" (quick)" if meta["quick"] else ""),
            "",
            f"Machine: {box['nproc']} cores ({box['cpu']}), {box['memory_gib']} GiB, Python "
            f"{box['python']}; load average {meta['loadavg_start']} at the start, "
            f"{meta['loadavg_end']} at the end. Everything on one box: the clients, the "
            "platform, PostgreSQL and Redis. "
            f"`bench/noisy_neighbour.py {' '.join(meta['argv'])}` took {meta['elapsed_s']} s.",
            "",
            f"Platform processes: {', '.join(f'`{c}`' for _, c in meta['platform_processes'])}."
            + compare.settings_note(meta["platform_env"]),
            "",
            f"N: {settings.n_messages:,} non-blocking sends at {settings.n_clients} clients to an "
            f"agent that awaits {settings.n_delay:g} s. Variants: {'; '.join(variants)}.",
            "",
            compare.markdown(rows, HEADERS),
            "",
        ]
    )


# --- main -----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small counts, one round")
    compare.platform_arguments(parser)
    parser.add_argument("--variants", default="none,limits", help="none, limits or both")
    parser.add_argument(
        "--n-limits",
        default=DEFAULT_N_LIMITS,
        help=f"the limited tenant's plan: Plan fields (default {DEFAULT_N_LIMITS})",
    )
    parser.add_argument("--n-messages", type=int, help="N's sends (3000; quick 300)")
    parser.add_argument("--n-clients", type=int, help="N's clients at once (64; quick 16)")
    parser.add_argument("--n-delay", type=float, default=2.0, help="seconds each N run awaits")
    parser.add_argument("--q-alone-seconds", type=float, help="phase (a) (10; quick 3)")
    parser.add_argument("--rounds", type=int, help="each variant this many times (2; quick 1)")
    parser.add_argument(
        "--drain-timeout", type=float, help="at most this long for N's backlog (600; quick 120)"
    )
    parser.add_argument("--out", type=Path, default=REPO / "var" / "bench")
    return parser.parse_args(argv)


def settings_from(args: argparse.Namespace) -> Settings:
    def pick(value: Any, full: Any, small: Any) -> Any:
        return value if value is not None else (small if args.quick else full)

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = set(variants) - set(BURSTING)
    if unknown or not variants:
        raise SystemExit(f"--variants: none, limits or both, not {args.variants!r}")
    return Settings(
        variants=variants,
        n_limits=limits_from(args.n_limits),
        n_messages=pick(args.n_messages, 3000, 300),
        n_clients=pick(args.n_clients, 64, 16),
        n_delay=args.n_delay,
        q_alone_seconds=pick(args.q_alone_seconds, 10.0, 3.0),
        rounds=pick(args.rounds, 2, 1),
        drain_timeout=pick(args.drain_timeout, 600.0, 120.0),
        settle_timeout=pick(None, 60.0, 15.0),
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    settings = settings_from(args)
    extra_env = compare.env_pairs(args.platform_env)
    platform_dir, python = compare.platform_python(args)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    run_dir = args.out / f"noisy-run-{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    meta: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": compare.machine(),
        "loadavg_start": compare.loadavg(),
        "platform_dir": str(platform_dir),
        "platform_commit": compare.git_describe(platform_dir),
        "platform_env": extra_env,
        "quick": args.quick,
        "settings": settings.__dict__,
        "argv": sys.argv[1:] if argv is None else argv,
    }

    def log(line: str) -> None:
        print(f"[{time.monotonic() - started:6.0f}s] {line}", flush=True)

    def interrupted(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)
    print(f"platform: {platform_dir} @ {meta['platform_commit']}; logs in {run_dir}")
    processes = compare.Processes()
    services = compare.Services()
    results: dict[str, list[dict[str, Any]]] = {}
    system: TwoTenants | None = None
    failed = ""
    try:
        services.start()
        system = TwoTenants(
            settings,
            platform_dir=platform_dir,
            python=python,
            services=services,
            processes=processes,
            run_dir=run_dir,
            process_source=args.platform_processes,
            extra_env=extra_env,
        )
        log("platform: starting")
        system.start()
        meta["plan"] = system.plan_result
        run_rounds(system, settings, run_dir, log, results)
    except KeyboardInterrupt:
        log("interrupted; stopping everything")
        failed = "interrupted"
    except Exception as exc:  # noqa: BLE001 (reported; what was measured is still written)
        log(f"FAILED: {exc}")
        failed = str(exc)
    finally:
        if system is not None:
            meta["platform_processes"] = system.display_commands()
            processes.stop_all()
            system.cleanup()
        processes.stop_all()
        services.stop()
    meta.setdefault("platform_processes", [])
    meta["loadavg_end"] = compare.loadavg()
    meta["elapsed_s"] = round(time.monotonic() - started)
    if failed:
        meta["failed"] = failed
    rows = rows_for(results)
    print()
    print(compare.text_table(rows, HEADERS) if rows else "(nothing measured)")
    base = args.out / f"noisy-{stamp}"
    Path(f"{base}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    Path(f"{base}.md").write_text(report(meta, settings, rows))
    print(f"\nwrote {base}.json and {base}.md ({meta['elapsed_s']} s)")
    broken = failed or any(
        "failed" in phase
        for rounds in results.values()
        for result in rounds
        for phase in (result.get("alone", {}), result.get("during", {}))
    )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
