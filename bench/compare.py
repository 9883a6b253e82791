"""Side by side: this platform and the a2a-sdk's own server, same agent, same PostgreSQL.

    make bench                                   # the full run (about 15 minutes, 2 cores)
    .venv/bin/python bench/compare.py --quick    # a small bounded run (about 3 minutes)
    .venv/bin/python bench/compare.py --platform-dir /tmp/a2a-baseline --embedded ...

It starts one throwaway PostgreSQL and Redis (scripts/services.sh) and on them:

- `sdk`: bench/sdk_server.py, a2a-sdk's DefaultRequestHandler + DatabaseTaskStore (asyncpg,
  its own database `sdk` on that server) under uvicorn, one process, JSON-RPC v1.0;
- `platform`: the platform in `--platform-dir` on its production profile (database
  `platform` on the same server, Redis for broker and channel layer): daphne, the Celery
  worker(s) and beat, with the command lines scripts/run.sh of that tree uses (see
  PLATFORM PROCESSES below);
- `embedded` (with `--embedded`): the same platform on its embedded profile (SQLite and the
  filesystem broker, no DATABASE_URL), its figures printed beside.

`sdk` and `platform` run side by side and each measurement is taken on one, then on the
other (after both are idle again), so both meet the same background load on a shared machine
(`--sequential`: one system after the other). Each agent runs the `echo` executor (the SDK
server carries a copy of it), with a delay where a scenario needs one. The load comes from
bench/load.py in its own process, which reports its own CPU use so a saturated client is
noticed. Scenarios (A2A v1.0 JSON-RPC on both):

1. closed loop, 1/16/64 clients: blocking SendMessage, non-blocking SendMessage
   (returnImmediately), GetTask, SendStreamingMessage (first and final event);
2. I/O-bound: 20 and 200 non-blocking sends to an agent that awaits 2 s, wall time until all
   are terminal;
3. memory: 1000 runs in flight on an agent that awaits long; RSS of the worker (platform) or
   server (SDK) process trees per run;
4. cancel: CancelTask on a working task, and the time until GetTask shows it canceled;
5. scale: GetTask and ListTasks (first page, state filter, context filter, 20 pages deep) with
   1 thousand and 1 million stored tasks (`--scale-tasks`), seeded with SQL, an agent per
   size, the sizes' calls taking turns.

It prints one table (ratios are platform / sdk: above 1 means the platform has more
throughput, or takes longer) and writes it, with every figure, to `--out`
(var/bench/compare-<time>.{json,md}). Every process it started is stopped at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform as pyplatform
import re
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
TENANT = "bench"

# ============================================================================================
# PLATFORM PROCESSES: the one place that says how the platform under test is started.
#
# By default they are read from `<platform-dir>/scripts/run.sh`: every line that starts a
# process in the background (`... & pids+=($!)`) is one process, its role guessed from its
# command (daphne or manage.py runweb: web; celery ... beat: beat; manage.py rungrpc: not
# started, the comparison is JSON-RPC; anything else: a worker, whose memory the memory
# scenario sums). `.venv/bin/` and $PY become the venv in use; $PORT and $A2A_VAR_DIR are
# filled in.
# `--platform-processes builtin` uses PLATFORM_PROCESSES_BUILTIN instead: what run.sh runs
# today. When the worker's command line changes (the async runtime, separate queues), run.sh
# changes with it and this follows; or edit the builtin list here.
# ============================================================================================
PLATFORM_PROCESSES_BUILTIN: list[tuple[str, str]] = [
    ("web", "{bin}/daphne -b 127.0.0.1 -p {port} a2a_platform.asgi:application"),
    ("worker", "{bin}/celery -A a2a_platform worker --loglevel=INFO --concurrency=2"),
    (
        "beat",
        "{bin}/celery -A a2a_platform beat --loglevel=INFO --schedule {var}/celerybeat-schedule",
    ),
]


def platform_processes_from_run_sh(
    run_sh: Path, *, bin_dir: str, port: int, var: str
) -> list[tuple[str, list[str]]]:
    """(role, argv) of each background process scripts/run.sh starts; a simple
    `for x in a b c; do ... done` around such lines starts one per value."""
    text = re.sub(r"\\\n\s*", " ", run_sh.read_text())  # join continued lines
    values = {"PORT": str(port), "A2A_VAR_DIR": var, "PY": f"{bin_dir}/python", "PWD": "."}
    lines: list[tuple[str, dict[str, str]]] = []
    source = text.splitlines()
    n = 0
    while n < len(source):
        loop = re.match(r"^\s*for (\w+) in (.+?);\s*do\s*$", source[n])
        if loop:
            body = []
            n += 1
            while n < len(source) and not re.match(r"^\s*done\b", source[n]):
                body.append(source[n])
                n += 1
            for value in shlex.split(loop.group(2)):
                lines.extend((line, {loop.group(1): value}) for line in body)
        else:
            lines.append((source[n], {}))
        n += 1
    processes = []
    for line, bound in lines:
        match = re.match(r"^\s*([^#].*?)\s+&\s*(pids\+=\(\$!\))?\s*$", line)
        if not match:
            continue
        known = {**values, **bound}
        # run.sh's relative venv first, then its variables ($PY is already absolute).
        command = re.sub(r"(?<![\w/.])\.venv/bin/", f"{bin_dir}/", match.group(1))
        command = re.sub(
            r"\$\{?(\w+)\}?", lambda m, k=known: k.get(m.group(1), m.group(0)), command
        )
        argv = shlex.split(command)
        if any("$" in a for a in argv):
            raise ValueError(f"run.sh: cannot expand {command!r}")
        joined = " ".join(argv)
        if "rungrpc" in joined:
            continue
        web = "daphne" in argv[0] or " runweb" in joined
        role = "web" if web else "beat" if " beat" in joined else "worker"
        processes.append((role, argv))
    if not any(r == "web" for r, _ in processes) or not any(r == "worker" for r, _ in processes):
        raise ValueError(f"run.sh: found no web and worker processes in {run_sh}")
    return processes


def env_pairs(pairs: list[str]) -> dict[str, str]:
    """`--platform-env NAME=VALUE` options as a dict; a malformed one stops the run."""
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise SystemExit(f"--platform-env: expected NAME=VALUE, not {pair!r}")
        out[name] = value
    return out


def platform_processes(
    source: str, platform_dir: Path, *, bin_dir: str, port: int, var: str
) -> list[tuple[str, list[str]]]:
    if source == "run.sh":
        try:
            return platform_processes_from_run_sh(
                platform_dir / "scripts" / "run.sh", bin_dir=bin_dir, port=port, var=var
            )
        except (OSError, ValueError) as exc:
            print(f"  ! {exc}; using the built-in command lines", file=sys.stderr)
    return [
        (role, shlex.split(template.format(bin=bin_dir, port=port, var=var)))
        for role, template in PLATFORM_PROCESSES_BUILTIN
    ]


# --- plan -----------------------------------------------------------------------------------


# The closed-loop operations; `<op>_token` is `<op>` called with a bearer token of an issuer
# the bench registers (BenchIssuer) instead of an API key: the a2a-sdk server has no tokens.
ALL_OPS = "send,send_nowait,get,stream,send_token,get_token"
TOKEN_SUFFIX = "_token"


class Unsupported(Exception):
    """A measurement a system cannot take (its cell shows "-", the system goes on)."""


class BenchIssuer:
    """A token issuer for the bearer-token rows: an RS256 key whose set it serves at
    `jwks_uri` (a stdlib server on 127.0.0.1, in a thread of this process, read once by each
    platform process and then kept), and the tokens it signs."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from cryptography.hazmat.primitives.asymmetric import rsa
        from jwt.algorithms import RSAAlgorithm

        self.private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = RSAAlgorithm.to_jwk(self.private.public_key(), as_dict=True)
        body = json.dumps({"keys": [{**jwk, "kid": "bench", "alg": "RS256", "use": "sig"}]})
        self.reads = 0
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                issuer.reads += 1
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.issuer = f"http://127.0.0.1:{self.server.server_address[1]}/bench"
        self.jwks_uri = f"{self.issuer}/keys"

    def token(self, audience: str) -> str:
        import jwt

        now = int(time.time())
        claims = {"iss": self.issuer, "sub": "bench", "aud": audience, "iat": now}
        claims["exp"] = now + 24 * 3600
        return jwt.encode(claims, self.private, algorithm="RS256", headers={"kid": "bench"})


@dataclass
class Plan:
    duration: float
    warmup: float
    concurrency: list[int]
    ops: list[str]
    io_counts: list[int]
    io_delay: float
    memory_runs: int
    memory_delay: float
    memory_wait: float
    cancel_samples: int
    scale_tasks: list[int]
    scale_iterations: int
    scale_seconds: float
    drain_timeout: float
    settle_timeout: float
    scenarios: list[str]
    rounds: int = 1


def plan_from(args: argparse.Namespace) -> Plan:
    quick = args.quick

    def pick(value: Any, full: Any, small: Any) -> Any:
        return value if value is not None else (small if quick else full)

    def ints(text: str) -> list[int]:
        return [int(x) for x in text.split(",") if x.strip()]

    return Plan(
        duration=pick(args.duration, 6.0, 2.0),
        warmup=pick(args.warmup, 1.0, 0.5),
        concurrency=ints(pick(args.concurrency, "1,16,64", "1,16")),
        ops=pick(args.ops, ALL_OPS, ALL_OPS).split(","),
        io_counts=ints(pick(args.io_counts, "20,200", "20")),
        io_delay=2.0,
        memory_runs=pick(args.memory_runs, 1000, 50),
        memory_delay=300.0,
        memory_wait=pick(args.memory_wait, 90.0, 15.0),
        cancel_samples=pick(args.cancel_samples, 20, 3),
        scale_tasks=sorted(ints(pick(args.scale_tasks, "1000,1000000", "1000"))),
        # 200: a p99 of 40 samples is the slowest call of the 40, one hiccup of the machine.
        scale_iterations=pick(args.scale_iterations, 200, 10),
        scale_seconds=pick(None, 8.0, 2.0),
        drain_timeout=pick(None, 240.0, 60.0),
        settle_timeout=pick(None, 60.0, 10.0),
        scenarios=pick(
            args.scenarios, "closed,io,memory,cancel,scale", "closed,io,memory,cancel,scale"
        ).split(","),
        rounds=pick(args.rounds, 3, 1),
    )


def agents_for(plan: Plan) -> dict[str, dict[str, Any]]:
    """The agents both systems host, by slug: all run `echo`."""
    return {
        "echo": {},
        "io": {"delay_seconds": plan.io_delay},
        "hold": {"delay_seconds": plan.memory_delay},
        "long": {"delay_seconds": 3600},
        **{scale_agent(size): {} for size in plan.scale_tasks},
    }


def scale_agent(size: int) -> str:
    """The agent whose stored tasks the scale scenario reads at `size`: one per size, so the
    sizes can be read side by side."""
    return f"scale{size}"


# --- processes ------------------------------------------------------------------------------


@dataclass
class Proc:
    role: str
    popen: subprocess.Popen[bytes]
    log: Path


class Processes:
    """Processes this run started, each in its own process group; all stopped by stop_all()."""

    def __init__(self) -> None:
        self.running: list[Proc] = []

    def start(
        self, role: str, argv: list[str], *, cwd: Path, env: dict[str, str], log: Path
    ) -> Proc:
        log.parent.mkdir(parents=True, exist_ok=True)
        out = log.open("ab")
        popen = subprocess.Popen(
            argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        out.close()
        proc = Proc(role, popen, log)
        self.running.append(proc)
        return proc

    def stop(self, procs: list[Proc], grace: float = 10.0) -> None:
        for proc in procs:
            if proc.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(max(0.1, deadline - time.monotonic()))
        for proc in procs:
            # The group too: a Celery pool child outlives its parent's SIGTERM sometimes.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(5)
            if proc in self.running:
                self.running.remove(proc)

    def stop_all(self) -> None:
        self.stop(list(self.running))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_ok(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (loopback)
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def wait_for(
    check: Callable[[], bool], *, timeout: float, what: str, procs: list[Proc] = ()
) -> None:  # type: ignore[assignment]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        for proc in procs:
            if proc.popen.poll() is not None:
                raise RuntimeError(
                    f"{proc.role} exited ({proc.popen.returncode}) while waiting for {what}; "
                    f"see {proc.log}"
                )
        time.sleep(0.25)
    raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")


# --- services (PostgreSQL + Redis) ----------------------------------------------------------


class Services:
    """scripts/services.sh's throwaway PostgreSQL and Redis, stopped with it again."""

    def __init__(self) -> None:
        self.env: dict[str, str] = {}

    def start(self) -> None:
        script = (
            f"source {shlex.quote(str(REPO / 'scripts' / 'services.sh'))} && services_start >&2 && "
            'printf "%s\\n" "$DATABASE_URL" "$REDIS_URL" "$SERVICES_DIR" "$SERVICES_PG_BIN"'
        )
        out = subprocess.run(
            ["bash", "-c", script], check=True, capture_output=True, text=True, timeout=180
        )
        database_url, redis_url, services_dir, pg_bin = out.stdout.split()[:4]
        self.env = {
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "SERVICES_DIR": services_dir,
            "SERVICES_PG_BIN": pg_bin,
        }
        match = re.match(r"postgres://([^@]+)@([^:]+):(\d+)/", database_url)
        assert match, database_url
        self.pg_user, self.pg_host, self.pg_port = (
            match.group(1),
            match.group(2),
            int(match.group(3)),
        )
        self.redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])

    def stop(self) -> None:
        if not self.env:
            return
        run_as = (
            "SERVICES_RUN_AS=(runuser -u postgres --)" if os.getuid() == 0 else "SERVICES_RUN_AS=()"
        )
        script = (
            f"source {shlex.quote(str(REPO / 'scripts' / 'services.sh'))}; "
            f"SERVICES_DIR={shlex.quote(self.env['SERVICES_DIR'])}; "
            f"SERVICES_PG_BIN={shlex.quote(self.env['SERVICES_PG_BIN'])}; {run_as}; services_stop"
        )
        subprocess.run(["bash", "-c", script], check=False, timeout=120)
        self.env = {}

    def url(self, database: str, scheme: str = "postgres") -> str:
        return f"{scheme}://{self.pg_user}@{self.pg_host}:{self.pg_port}/{database}"

    def redis_pid(self) -> int:
        return int((Path(self.env["SERVICES_DIR"]) / "redis.pid").read_text().split()[0])

    def postmaster_pid(self) -> int:
        return int(
            (Path(self.env["SERVICES_DIR"]) / "pg" / "postmaster.pid").read_text().split()[0]
        )

    def create_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')


# --- systems under test ---------------------------------------------------------------------


@dataclass
class System:
    name: str
    label: str
    base_url: str = ""
    key: str = ""
    procs: list[Proc] = field(default_factory=list)
    # What load.py watches: CPU of these trees per measurement; `run_rss`: the trees whose
    # memory grows with runs in flight.
    watch: dict[str, list[int]] = field(default_factory=dict)
    run_rss: list[int] = field(default_factory=list)
    failed: str = ""

    database = ""  # its PostgreSQL database, if it has one

    def start(self) -> None:
        raise NotImplementedError

    def _postgres(self, database: str) -> str | None:
        """The DSN of `database` on the system's PostgreSQL, if it has one."""
        services: Services | None = getattr(self, "services", None)
        if not self.database or services is None or not services.env:
            return None
        return services.url(database)

    def db_sessions(self) -> int | None:
        """Sessions PostgreSQL has opened on the system's database so far."""
        dsn = self._postgres("postgres")
        if dsn is None:
            return None
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute(
                "SELECT sessions FROM pg_stat_database WHERE datname = %s", (self.database,)
            ).fetchone()
        return int(row[0]) if row else None

    def settle_seeded(self) -> None:
        """After seeding, the database as a live one would be: vacuumed (hint bits and the
        visibility map set), analyzed, and written out. Otherwise the first reads of a million
        fresh rows dirty every page, and the checkpoint that writes them out, or autovacuum,
        lands in the measurement of whichever system comes next."""
        dsn = self._postgres(self.database)
        if dsn is None:
            return
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("VACUUM (ANALYZE)")
            conn.execute("CHECKPOINT")

    def common(self) -> dict[str, Any]:
        """What every load.py spec for this system carries."""
        return {"key": self.key, "watch": self.watch}

    def bearer_token(self) -> str:
        """A token its agents accept in place of the key (the `_token` rows)."""
        raise Unsupported(f"{self.label} takes no bearer tokens")

    def check_alive(self) -> None:
        for proc in self.procs:
            if proc.popen.poll() is not None:
                raise RuntimeError(
                    f"{self.name}: {proc.role} exited ({proc.popen.returncode}); see {proc.log}"
                )

    def url(self, agent: str, tenant: str = TENANT) -> str:
        return f"{self.base_url}/a2a/{tenant}/{agent}/"

    def seed(self, agent: str, start: int, count: int) -> dict[str, Any]:
        """Stored tasks start .. start + count - 1 for `agent`."""
        raise NotImplementedError


class SdkSystem(System):
    def __init__(self, services: Services, processes: Processes, run_dir: Path, plan: Plan) -> None:
        super().__init__("sdk", "a2a-sdk")
        self.services, self.processes, self.run_dir, self.plan = services, processes, run_dir, plan

    def start(self) -> None:
        self.database = "sdk"
        self.services.create_database("sdk")
        port = free_port()
        self.key = "sdk_" + secrets.token_urlsafe(24)  # never starting with "-" (argparse)
        argv = [
            sys.executable,
            str(BENCH / "sdk_server.py"),
            "--port", str(port),
            "--database-url", self.services.url("sdk", "postgresql+asyncpg"),
            "--agents", json.dumps(agents_for(self.plan)),
            f"--api-key={self.key}",
        ]  # fmt: skip
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        proc = self.processes.start(
            "sdk", argv, cwd=REPO, env=env, log=self.run_dir / "logs" / "sdk.log"
        )
        self.procs = [proc]
        self.base_url = f"http://127.0.0.1:{port}"
        wait_for(
            lambda: http_ok(self.base_url + "/healthz"),
            timeout=60,
            what="the SDK server",
            procs=self.procs,
        )
        self.watch = {"server": [proc.popen.pid], "postgres": [self.services.postmaster_pid()]}
        self.run_rss = [proc.popen.pid]

    def seed(self, agent: str, start: int, count: int) -> dict[str, Any]:
        return seed_sdk_tasks(
            self.services.url("sdk"),
            table=f"tasks_{agent}",
            owner="key:bench",
            start=start,
            count=count,
        )


def seed_sdk_tasks(dsn: str, *, table: str, owner: str, start: int, count: int) -> dict[str, Any]:
    """Stored tasks start .. start + count - 1 in a DatabaseTaskStore table (a2a.server.models
    TaskMixin): the same finished echo tasks bench/platform_seed.py writes for the platform
    (ids, contexts, states, timestamps, one user message, one artifact, the agent's reply as
    the status message), in the JSON the store writes (MessageToDict, camelCase)."""
    import psycopg

    ctx = "'ctx-' || (i / 10)::text"
    text = "'seeded ' || i::text"
    task_id = "'00000000-0000-4000-8000-' || lpad(i::text, 12, '0')"
    # The statement has a parameter, so a literal % is written %%.
    ts = "(now() AT TIME ZONE 'UTC' - interval '1 day' - make_interval(secs => i))"
    state = (
        "CASE WHEN i %% 20 = 0 THEN 'TASK_STATE_FAILED' "
        "WHEN i %% 20 = 1 THEN 'TASK_STATE_CANCELED' ELSE 'TASK_STATE_COMPLETED' END"
    )
    user = (
        f"json_build_object('messageId', 'm-' || i::text, 'contextId', {ctx}, 'taskId', {task_id}, "
        f"'role', 'ROLE_USER', 'parts', json_build_array(json_build_object('text', {text})))"
    )
    reply = (
        f"json_build_object('messageId', 'a-' || i::text, 'contextId', {ctx}, 'taskId', {task_id}, "
        "'role', 'ROLE_AGENT', 'parts', "
        f"json_build_array(json_build_object('text', 'Echoed: ' || {text})))"
    )
    status = (
        f"json_build_object('state', {state}, 'message', {reply}, "
        f"'timestamp', to_char({ts}, 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'))"
    )
    artifact = (
        "json_build_object('artifactId', 'art-' || i::text, 'name', 'echo', "
        f"'parts', json_build_array(json_build_object('text', {text})))"
    )
    started = time.monotonic()
    with psycopg.connect(dsn, autocommit=True) as conn:
        batch = 250_000
        for first in range(start, start + count, batch):
            last = min(first + batch, start + count) - 1
            conn.execute(
                f"INSERT INTO {table} (id, context_id, kind, owner, last_updated, status, "
                "artifacts, history, protocol_version, metadata) "
                f"SELECT {task_id}, {ctx}, 'task', %s, {ts}, "
                f"{status}, json_build_array({artifact}), json_build_array({user}), '1.0', NULL "
                f"FROM generate_series({int(first)}, {int(last)}) AS g(i)",
                (owner,),
            )
        conn.execute(f"ANALYZE {table}")
    return {"seeded": count, "seconds": round(time.monotonic() - started, 1)}


# Each production platform's Redis databases (its own, its broker's) on the shared server.
REDIS_DATABASES = {"platform": (0, 1), "before": (2, 3)}


class PlatformSystem(System):
    def __init__(
        self,
        *,
        profile: str,
        platform_dir: Path,
        python: Path,
        services: Services | None,
        processes: Processes,
        run_dir: Path,
        plan: Plan,
        process_source: str,
        extra_env: dict[str, str] | None = None,
        name: str = "",
        label: str = "",
    ) -> None:
        # `before`: a second production tree (`--before-dir`), on its own database and Redis
        # databases, so the two platforms share the servers but no queue, stream or row.
        name = name or ("platform" if profile == "production" else "embedded")
        label = label or ("platform" if profile == "production" else "platform (embedded)")
        super().__init__(name, label)
        self.profile, self.platform_dir, self.python = profile, platform_dir, python
        self.services, self.processes, self.run_dir, self.plan = services, processes, run_dir, plan
        self.process_source = process_source
        # Settings of the platform's own (`--platform-env`), set on every process it runs.
        self.extra_env = dict(extra_env or {})
        self.var = Path(tempfile.mkdtemp(prefix=f"a2a-bench-{name}-"))
        self.commands: list[tuple[str, list[str]]] = []
        self.port_text = ""

    def env(self, port: int) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE")
            and not k.startswith(("A2A_", "DATABASE_", "DJANGO_"))
        }
        env.update(
            {
                "PYTHONPATH": str(self.platform_dir),  # the tree under test, not the venv's copy
                "DJANGO_SETTINGS_MODULE": "a2a_platform.settings",
                "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
                "A2A_VAR_DIR": str(self.var),
                "A2A_PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
                "A2A_METRICS_OPEN": "true",
                # The bench's token issuer (BenchIssuer) serves its key set on this machine.
                "A2A_IDENTITY_ALLOWED_NETWORKS": "127.0.0.0/8",
                "PYTHONWARNINGS": "ignore",
            }
        )
        if self.profile == "production":
            assert self.services is not None
            redis, broker = REDIS_DATABASES[self.name]
            redis_server = self.services.env["REDIS_URL"].rsplit("/", 1)[0]
            env["DATABASE_URL"] = self.services.url(self.name)
            env["REDIS_URL"] = f"{redis_server}/{redis}"
            env["CELERY_BROKER_URL"] = f"{redis_server}/{broker}"
        env.update(self.extra_env)
        return env

    def manage(self, *args: str, env: dict[str, str], timeout: float = 1800) -> str:
        out = subprocess.run(
            [str(self.python), *args],
            cwd=self.platform_dir,
            env=env,
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if out.returncode:
            raise RuntimeError(
                f"{' '.join(args[:3])} failed:\n{out.stdout[-2000:]}\n{out.stderr[-4000:]}"
            )
        return out.stdout

    def seed_script(
        self, *args: str, tenant: str = TENANT, timeout: float = 1800
    ) -> dict[str, Any]:
        script = [str(BENCH / "platform_seed.py"), "--platform-dir", str(self.platform_dir)]
        out = self.manage(*script, "--tenant", tenant, *args, env=self._env, timeout=timeout)
        return json.loads(out.strip().splitlines()[-1])

    def prepare(self) -> None:
        """What the platform holds before its processes start: here the bench tenant, its
        agents and key (a scenario with tenants of its own says its own)."""
        made = self.seed_script("setup", "--agents", json.dumps(agents_for(self.plan)))
        self.key = made["key"]
        if any(op.endswith(TOKEN_SUFFIX) for op in self.plan.ops):
            self.issuer, self.audience = BenchIssuer(), made["agents"]["echo"]["url"]
            self.tokens = self.seed_script(
                "issuer",
                "--issuer", self.issuer.issuer,
                "--jwks-uri", self.issuer.jwks_uri,
                "--audience", self.audience,
            )  # fmt: skip

    def bearer_token(self) -> str:
        tokens = getattr(self, "tokens", {})
        if not tokens.get("supported"):
            raise Unsupported(tokens.get("reason", "no token issuer was registered"))
        return self.issuer.token(self.audience)

    def start(self) -> None:
        port = free_port()
        self.port_text = f"-p {port}"
        self._env = env = self.env(port)
        if self.profile == "production":
            assert self.services is not None
            self.database = self.name
            self.services.create_database(self.name)
        where = self.seed_script("check")
        print(f"  platform code: {where['tasks_app']} ({where['database']})")
        self.manage("manage.py", "migrate", "--noinput", env=env)
        self.prepare()
        bin_dir = str(self.python.parent)
        self.commands = platform_processes(
            self.process_source, self.platform_dir, bin_dir=bin_dir, port=port, var=str(self.var)
        )
        logs = self.run_dir / "logs"
        self.procs = [
            self.processes.start(
                role, argv, cwd=self.platform_dir, env=env, log=logs / f"{self.name}-{role}-{n}.log"
            )
            for n, (role, argv) in enumerate(self.commands)
        ]
        for role, argv in self.commands:
            print(f"  {role:6} {' '.join(argv)}")
        self.base_url = f"http://127.0.0.1:{port}"
        wait_for(
            lambda: http_ok(self.base_url + "/healthz"), timeout=90, what="daphne", procs=self.procs
        )
        wait_for(
            lambda: http_ok(self.base_url + "/readyz", 5),
            timeout=60,
            what="/readyz",
            procs=self.procs,
        )
        self.watch = {
            "web": [p.popen.pid for p in self.procs if p.role == "web"],
            "worker": [p.popen.pid for p in self.procs if p.role == "worker"],
        }
        if self.services is not None:
            self.watch["postgres"] = [self.services.postmaster_pid()]
            self.watch["redis"] = [self.services.redis_pid()]
        self.watch["beat"] = [p.popen.pid for p in self.procs if p.role == "beat"]
        self.run_rss = self.watch["worker"]
        # The whole path works (web, broker, worker, doorbell) before anything is measured.
        wait_for(
            self._one_blocking_send,
            timeout=120,
            what="a first blocking SendMessage",
            procs=self.procs,
        )

    def first_url(self) -> str:
        """The `echo` agent the first blocking send goes to, with `self.key`."""
        return self.url("echo")

    def _one_blocking_send(self) -> bool:
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SendMessage",
                "params": {
                    "message": {
                        "messageId": secrets.token_hex(8),
                        "role": "ROLE_USER",
                        "parts": [{"text": "hi"}],
                    }
                },
            }
        ).encode()
        request = urllib.request.Request(
            self.first_url(),
            data=body,
            headers={
                "Content-Type": "application/json",
                "X-API-Key": self.key,
                "A2A-Version": "1.0",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (loopback)
                result = json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return (
            result.get("result", {}).get("task", {}).get("status", {}).get("state")
            == "TASK_STATE_COMPLETED"
        )

    def display_commands(self) -> list[list[str]]:
        """The command lines as run.sh writes them: no machine's paths, port or scratch dir."""
        shown = []
        for role, argv in self.commands:
            line = shlex.join(argv).replace(f"{self.python.parent}/", ".venv/bin/")
            line = line.replace(str(self.var), "$A2A_VAR_DIR").replace(self.port_text, "-p $PORT")
            line = line.replace(f"--port {self.port_text[3:]}", "--port $PORT")  # runweb
            shown.append([role, line])
        return shown

    def seed(self, agent: str, start: int, count: int) -> dict[str, Any]:
        return self.seed_script(
            "seed-tasks", "--agent", agent, "--start", str(start), "--count", str(count)
        )

    def cleanup(self) -> None:
        shutil.rmtree(self.var, ignore_errors=True)


# --- running scenarios ----------------------------------------------------------------------


def load(spec: dict[str, Any], *, timeout: float) -> dict[str, Any]:
    """Run bench/load.py on one spec, in its own process."""
    out = subprocess.run(
        [sys.executable, str(BENCH / "load.py")],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if out.returncode:
        return {
            "failed": out.stderr.strip().splitlines()[-1]
            if out.stderr.strip()
            else f"exit {out.returncode}",
            "stderr": out.stderr[-3000:],
        }
    return json.loads(out.stdout)


def settle(systems: list[System], timeout: float) -> None:
    """Wait until the systems' own processes are idle (together less than 10 % of a core for a
    second), so one measurement's leftovers (a backlog, cancelled runs) do not load the next."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    from load import cpu_seconds

    roots = [
        pid
        for system in systems
        for name, pids in system.watch.items()
        if name not in ("postgres", "redis")
        for pid in pids
    ]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        used = cpu_seconds(roots)
        time.sleep(1.0)
        if cpu_seconds(roots) - used < 0.10:
            return


Measure = Callable[["System"], dict[str, Any]]


def steps(plan: Plan) -> list[tuple[tuple[str, ...], Measure]]:
    """The plan as measurements, in order: (where the result goes, how to take it)."""
    out: list[tuple[tuple[str, ...], Measure]] = []
    if "closed" in plan.scenarios:
        for op in plan.ops:
            for n in plan.concurrency:
                out.append(
                    (("closed", op, str(n)), lambda s, op=op, n=n: measure_closed(s, plan, op, n))
                )
    if "io" in plan.scenarios:
        for count in plan.io_counts:
            out.append((("io", str(count)), lambda s, count=count: measure_io(s, count)))
    if "memory" in plan.scenarios:
        out.append((("memory",), lambda s: measure_memory(s, plan)))
    if "cancel" in plan.scenarios:
        out.append((("cancel",), lambda s: measure_cancel(s, plan)))
    if "scale" in plan.scenarios:
        out.append((("scale",), lambda s: measure_scale(s, plan)))
    return out


def measure_closed(system: System, plan: Plan, op: str, concurrency: int) -> dict[str, Any]:
    credentials = {}
    if op.endswith(TOKEN_SUFFIX):
        op, credentials = op.removesuffix(TOKEN_SUFFIX), {"token": system.bearer_token()}
    spec = {
        **system.common(),
        **credentials,
        "kind": "closed",
        "op": op,
        "url": system.url("echo"),
        "concurrency": concurrency,
        "duration": plan.duration,
        "warmup": plan.warmup,
        "drain_timeout": plan.drain_timeout,
    }
    return load(spec, timeout=plan.duration + plan.warmup + plan.drain_timeout + 300)


def measure_io(system: System, count: int) -> dict[str, Any]:
    spec = {**system.common(), "kind": "io", "url": system.url("io"), "count": count}
    return load({**spec, "wait_timeout": 900}, timeout=1000)


def measure_memory(system: System, plan: Plan) -> dict[str, Any]:
    spec = {
        **system.common(),
        "kind": "memory",
        "url": system.url("hold"),
        "count": plan.memory_runs,
        "rss": system.run_rss,
        "wait_timeout": plan.memory_wait,
        "clear_timeout": 300,
    }
    return load(spec, timeout=plan.memory_wait + 900)


def measure_cancel(system: System, plan: Plan) -> dict[str, Any]:
    spec = {**system.common(), "kind": "cancel", "url": system.url("long")}
    return load({**spec, "samples": plan.cancel_samples, "max_seconds": 600}, timeout=700)


def measure_scale(system: System, plan: Plan) -> dict[str, Any]:
    """Every size's reads in one load.py run, their calls taking turns: the machine's speed
    drifts by more than the sizes' difference from one minute to the next, so sizes measured
    one after the other would compare two moments, not two sizes. Each size has its own agent
    (`scale_agent`), its tasks numbered after the smaller sizes' (task ids are unique)."""
    targets, seeding, start = [], {}, 0
    for size in plan.scale_tasks:
        seeding[size] = system.seed(scale_agent(size), start, size)
        targets.append({"url": system.url(scale_agent(size)), "seeded": size, "start": start})
        start += size
    system.settle_seeded()
    spec = {
        **system.common(),
        "kind": "scale",
        "targets": targets,
        "iterations": plan.scale_iterations,
        "seconds_per_op": plan.scale_seconds,
    }
    measured = load(spec, timeout=3600)
    if "failed" in measured:
        return measured
    return {
        str(size): {**out, "seeding": seeding[size]}
        for size, out in zip(plan.scale_tasks, measured["sizes"], strict=True)
    }


def summary(path: tuple[str, ...], result: dict[str, Any]) -> str:
    if "failed" in result:
        return f"FAILED: {result['failed']}"
    kind = path[0]
    if kind == "closed":
        usage = result["usage"]
        text = (
            f"{result['rps']:>7} req/s  {fmt_pcts(result['latency_ms'])}  client CPU "
            f"{usage['client']['cpu_pct']} %, others {usage['machine']['others_pct']} %"
        )
        if result.get("errors"):
            text += f"  errors {result['errors']} {result['error_samples']}"
        if "sustained_tps" in result:
            text += f"  (drained in {result['drain_s']} s: {result['sustained_tps']} tasks/s)"
        return text
    if kind == "io":
        return f"wall {result.get('wall_s')} s, not terminal {result.get('not_terminal')}"
    if kind == "memory":
        return (
            f"{result.get('working')}/{result.get('count')} working, RSS "
            f"{result.get('rss_before_kib')} -> {result.get('rss_after_kib')} KiB, "
            f"{result.get('kib_per_run')} KiB/run"
        )
    if kind == "cancel":
        return (
            f"call {fmt_pcts(result.get('cancel_call_ms'))}, to canceled "
            f"{fmt_pcts(result.get('to_canceled_ms'))} {result.get('problems') or ''}"
        )
    return "; ".join(
        f"{size}: seeded in {r['seeding'].get('seconds')} s, get {fmt_pcts(r.get('get'))}, "
        f"list {fmt_pcts(r.get('list_first'))}, "
        f"20-page walk {fmt_pcts((r.get('list_deep') or {}).get('walk'))}"
        for size, r in result.items()
        if isinstance(r, dict) and "seeding" in r
    )


def run_steps(
    systems: list[System], plan: Plan, log: Callable[[str], None], results: dict[str, Any]
) -> None:
    """Each measurement on each running system in turn (sdk, then platform, then the next
    measurement), so that both meet the same background load on a shared machine. A
    closed-loop or I/O-bound cell is measured `plan.rounds` times, the systems alternating
    (each round led by the next), and each system's median round (by throughput, or wall
    time: ROUNDED) is kept, with every round's figure beside it: the load other jobs put on
    a shared machine drifts within seconds, and one cell measured once per system put a 30 %
    swing into a ratio. Figures go into `results` as they come: a system that fails keeps what
    it measured."""
    for path, measure in steps(plan):
        rounds = plan.rounds if path[0] in ROUNDED else 1
        taken: dict[str, list[dict[str, Any]]] = {}
        for n in range(rounds):
            # Each round starts with the next system: what one measurement leaves behind
            # (PostgreSQL's vacuum and checkpoints, a warm cache) falls on each in turn.
            for system in systems[n % len(systems) :] + systems[: n % len(systems)]:
                if system.failed:
                    continue
                settle(systems, plan.settle_timeout)
                try:
                    system.check_alive()
                    sessions = system.db_sessions()
                    result = measure(system)
                    if sessions is not None and (after := system.db_sessions()) is not None:
                        # Connections the system opened meanwhile: a pool that works opens few.
                        result["db_sessions_opened"] = after - sessions
                except Unsupported as exc:
                    log(f"{system.name:9} {' '.join(path):22} not measured: {exc}")
                    continue
                except Exception as exc:  # noqa: BLE001 (recorded; the other systems go on)
                    system.failed = str(exc)
                    results[system.name]["failed"] = str(exc)
                    log(f"{system.name:9} {' '.join(path)}: FAILED: {exc}")
                    continue
                taken.setdefault(system.name, []).append(result)
                node = results[system.name]
                for key in path[:-1]:
                    node = node.setdefault(key, {})
                node[path[-1]] = median_round(taken[system.name], ROUNDED.get(path[0], "rps"))
                round_note = f" (round {n + 1}/{rounds})" if rounds > 1 else ""
                log(f"{system.name:9} {' '.join(path):22} {summary(path, result)}{round_note}")


# The scenarios measured `--rounds` times, and the figure that ranks their rounds: the closed
# loop's throughput, the I/O-bound run's wall time (a round that left runs unfinished ranks
# last).
ROUNDED = {"closed": "rps", "io": "wall_s"}


def median_round(taken: list[dict[str, Any]], key: str = "rps") -> dict[str, Any]:
    """Of a cell's rounds, the one with the median `key`, noting every round's."""
    if len(taken) == 1:
        return taken[0]
    unfinished = float("inf") if key == "wall_s" else 0
    ordered = sorted(taken, key=lambda r: unfinished if r.get(key) is None else r[key])
    return {**ordered[(len(ordered) - 1) // 2], f"rounds_{key}": [r.get(key) for r in taken]}


def fmt_pcts(p: dict[str, Any] | None, keys: tuple[str, ...] = ("p50", "p95", "p99")) -> str:
    if not p or not p.get("n"):
        return "-"
    return " / ".join(f"{p[k]:.1f}" if p[k] < 100 else f"{p[k]:.0f}" for k in keys) + " ms"


# --- the table ------------------------------------------------------------------------------


def num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}{unit}"
    if abs(value) >= 10:
        return f"{value:.1f}{unit}"
    return f"{value:.2f}{unit}"


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "-"
    return f"{a / b:.2f}×"


def triple(
    p: dict[str, Any] | None, keys: tuple[str, ...] = ("p50", "p95", "p99")
) -> tuple[str, list[float | None]]:
    if not p or not p.get("n"):
        return "-", [None] * len(keys)
    values = [p.get(k) for k in keys]
    return " / ".join(num(v) for v in values), values


Cell = dict[str, Any]
Value = tuple[str, Any]  # (shown text, number(s) for the ratio)

OP_NAMES = {
    "send": "SendMessage blocking",
    "send_nowait": "SendMessage returnImmediately",
    "get": "GetTask",
    "stream": "SendStreamingMessage",
    "send_token": "SendMessage blocking, bearer token",
    "get_token": "GetTask, bearer token",
}


def ratio_pairs(systems: list[str]) -> list[tuple[str, str]]:
    """The ratio columns of the table: platform ÷ sdk always, platform ÷ before with a
    `--before-dir` tree."""
    return [("platform", "sdk")] + ([("platform", "before")] if "before" in systems else [])


def rows_for(results: dict[str, dict[str, Any]], systems: list[str], plan: Plan) -> list[list[str]]:
    """One row per figure: scenario, metric, each system's value, each ratio (`ratio_pairs`),
    notes."""
    rows: list[list[str]] = []

    def cells(*path: str) -> dict[str, Cell]:
        out = {}
        for system in systems:
            node: Any = results.get(system, {})
            for key in path:
                node = node.get(key) if isinstance(node, dict) else None
            out[system] = node or {}
        return out

    def add(
        scenario: str,
        metric: str,
        cell: dict[str, Cell],
        value: Callable[[Cell], Value],
        *,
        ratio_of: bool = True,
        note: str = "",
    ) -> None:
        values = {s: value(cell[s]) for s in systems}
        shown = []
        for top, bottom in ratio_pairs(systems):
            if not (ratio_of and top in values and bottom in values):
                shown.append("-")
                continue
            a, b = values[top][1], values[bottom][1]
            if isinstance(a, list):
                shown.append(" / ".join(ratio(x, y) for x, y in zip(a, b, strict=True)))
            else:
                shown.append(ratio(a, b))
        rows.append([scenario, metric, *[values[s][0] for s in systems], *shown, note])

    def per_system(cell: dict[str, Cell], text: Callable[[Cell], str]) -> str:
        parts = [f"{s} {text(cell[s])}" for s in systems if cell[s] and text(cell[s])]
        return "; ".join(parts)

    def usage_note(c: Cell) -> str:
        if "failed" in c:
            return f"FAILED {c['failed'][:60]}"
        if "usage" not in c:
            return ""
        client = c["usage"]["client"]["cpu_pct"]
        text = f"client {client:.0f}%{' (client-bound?)' if client > 70 else ''}"
        text += f", others {c['usage']['machine']['others_pct']:.0f}%"
        if c.get("db_sessions_opened"):
            text += f", {c['db_sessions_opened']} new PG sessions"
        if c.get("errors"):
            text += f", {c['errors']} errors"
        if c.get("rounds_rps"):
            text += f", rounds {' / '.join(num(r) for r in c['rounds_rps'])} req/s"
        return text

    for op in plan.ops if "closed" in plan.scenarios else []:
        for n in plan.concurrency:
            cell = cells("closed", op, str(n))
            label = f"{OP_NAMES[op]}, {n} client{'s' if n > 1 else ''}"
            note = "CPU % of a core: " + per_system(cell, usage_note)
            add(label, "req/s", cell, lambda c: (num(c.get("rps")), c.get("rps")), note=note)
            latency = "final event p50 / p95 / p99 ms" if op == "stream" else "p50 / p95 / p99 ms"
            add(label, latency, cell, lambda c: triple(c.get("latency_ms")))
            if op == "stream":
                add(
                    label,
                    "first event p50 / p95 / p99 ms",
                    cell,
                    lambda c: triple(c.get("first_event_ms")),
                )
                add(label, "first event's state", cell, lambda c: (states(c), None), ratio_of=False)
            if op == "send_nowait":
                add(
                    label,
                    "tasks/s incl. draining the backlog",
                    cell,
                    lambda c: (
                        num(c.get("sustained_tps"))
                        + (f" ({num(c['drain_s'])} s drain)" if c.get("drain_s") else ""),
                        c.get("sustained_tps"),
                    ),
                )

    def io_rounds(c: Cell) -> str:
        rounds = c.get("rounds_wall_s") or []
        return " / ".join("-" if r is None else num(r) for r in rounds)

    for count in plan.io_counts if "io" in plan.scenarios else []:
        cell = cells("io", str(count))
        rounds = per_system(cell, io_rounds)
        add(
            f"I/O-bound: {count} sends, agent awaits {plan.io_delay:g} s",
            "wall s until all terminal",
            cell,
            lambda c: (
                num(c.get("wall_s")) if c.get("wall_s") is not None
                else f"{c.get('not_terminal', '-')} unfinished",
                c.get("wall_s"),
            ),
            note=f"rounds (s): {rounds}" if rounds else "",
        )  # fmt: skip
    if "memory" in plan.scenarios:
        cell = cells("memory")
        label = f"Memory: {plan.memory_runs} runs in flight"
        add(
            label,
            "runs WORKING when measured",
            cell,
            lambda c: (f"{c.get('working', '-')} / {c.get('accepted', '-')}", None),
            ratio_of=False,
        )
        add(
            label,
            "RSS before → with runs, MiB",
            cell,
            lambda c: (
                f"{c['rss_before_kib'] / 1024:.0f} → {c['rss_after_kib'] / 1024:.0f}"
                if "rss_after_kib" in c
                else "-",
                None,
            ),
            ratio_of=False,
            note="platform: its worker process trees; sdk: its one server process",
        )
        # A per-run figure from a few runs is noise: it is compared only when all ran.
        add(
            label,
            "KiB per WORKING run",
            cell,
            lambda c: (
                num(c.get("kib_per_run")) + ("" if all_working(c) else " (few runs: noise)"),
                c.get("kib_per_run") if all_working(c) else None,
            ),
        )
        add(
            label,
            "s until all WORKING",
            cell,
            lambda c: (
                num(c.get("all_working_s")) if c.get("all_working_s") is not None
                else f"not in {plan.memory_wait:g} s",
                c.get("all_working_s"),
            ),
        )  # fmt: skip
    if "cancel" in plan.scenarios:
        cell = cells("cancel")
        label = f"Cancel ({plan.cancel_samples} samples)"
        problems = per_system(cell, lambda c: str(c.get("problems") or ""))
        add(
            label,
            "CancelTask call p50 / p95 ms",
            cell,
            lambda c: triple(c.get("cancel_call_ms"), ("p50", "p95")),
        )
        add(
            label,
            "cancel → GetTask canceled p50 / p95 ms",
            cell,
            lambda c: triple(c.get("to_canceled_ms"), ("p50", "p95")),
            note=problems,
        )
    for size in plan.scale_tasks if "scale" in plan.scenarios else []:
        cell = cells("scale", str(size))
        label = f"Scale: {size:,} stored tasks"
        for key, metric in (
            ("get", "GetTask p50 / p99 ms"),
            ("list_first", "ListTasks first page (50) p50 / p99 ms"),
            ("list_state", "ListTasks state filter p50 / p99 ms"),
            ("list_context", "ListTasks contextId filter p50 / p99 ms"),
        ):
            problems = per_system(
                cell, lambda c, k=key: str((c.get(k) or {}).get("problems") or "")
            )
            add(
                label,
                metric,
                cell,
                lambda c, k=key: triple(c.get(k), ("p50", "p99")),
                note=problems,
            )
        deep = {s: c.get("list_deep") or {} for s, c in cell.items()}
        add(
            label,
            "ListTasks 20 pages deep: whole walk p50 / p99 ms",
            deep,
            lambda c: triple(c.get("walk"), ("p50", "p99")),
            note=per_system(deep, lambda c: str(c.get("problems") or "")),
        )
        add(
            label,
            "ListTasks 20th page p50 / p99 ms",
            deep,
            lambda c: triple(c.get("last_page"), ("p50", "p99")),
        )
    return rows


def all_working(cell: Cell) -> bool:
    return bool(cell.get("accepted")) and cell.get("working") == cell.get("accepted")


def states(cell: Cell) -> str:
    counts = cell.get("first_event_states") or {}
    total = sum(counts.values()) or 1
    return (
        ", ".join(
            f"{state.replace('TASK_STATE_', '')} {100 * n / total:.0f}%"
            for state, n in sorted(counts.items())
        )
        or "-"
    )


def markdown(rows: list[list[str]], headers: list[str]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def text_table(rows: list[list[str]], headers: list[str]) -> str:
    """Aligned columns; the last (notes) runs on as long as it is."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers) - 1)]
    lines = []
    for n, row in enumerate([headers, *rows]):
        lines.append("  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]))
        if n == 0:
            lines.append("  ".join("-" * w for w in [*widths, len(headers[-1])]))
    return "\n".join(line.rstrip() for line in lines)


# --- machine --------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem_kib = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    return {
        "nproc": os.cpu_count(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "cpu": cpu,
        "kernel": pyplatform.release(),
        "python": pyplatform.python_version(),
    }


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def git_describe(path: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    rev = out.stdout.strip() or "unknown"
    dirty = subprocess.run(
        ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    )
    return rev + (" (modified)" if dirty.stdout.strip() else "")


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for package in (
        "a2a-sdk",
        "uvicorn",
        "sqlalchemy",
        "asyncpg",
        "aiohttp",
        "django",
        "daphne",
        "celery",
    ):
        try:
            out[package] = version(package)
        except PackageNotFoundError:
            out[package] = "-"
    return out


# --- main -----------------------------------------------------------------------------------


def platform_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that say which platform runs and how (this script's and the scenarios')."""
    parser.add_argument(
        "--platform-dir",
        type=Path,
        default=REPO,
        help="the platform tree under test (default: this repo)",
    )
    parser.add_argument(
        "--platform-python",
        type=Path,
        help="its Python (default: <platform-dir>/.venv, else this one)",
    )
    parser.add_argument("--platform-processes", choices=["run.sh", "builtin"], default="run.sh")
    parser.add_argument(
        "--platform-env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting for every platform process (repeatable), e.g. A2A_LANE_WINDOW=0",
    )


def platform_python(args: argparse.Namespace) -> tuple[Path, Path]:
    """The platform tree under test and its Python."""
    platform_dir = args.platform_dir.resolve()
    venv = platform_dir / ".venv" / "bin" / "python"
    return platform_dir, args.platform_python or (venv if venv.exists() else Path(sys.executable))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="a small bounded run: seconds per scenario, no 1M"
    )
    platform_arguments(parser)
    parser.add_argument("--systems", default="sdk,platform", help="any of sdk, platform, embedded")
    parser.add_argument(
        "--before-dir",
        type=Path,
        help="a second platform tree (a git worktree of the commit before a change), run beside "
        "the others and measured in turn with them, cell by cell; adds a platform ÷ before column",
    )
    parser.add_argument(
        "--before-python", type=Path, help="its Python (default: <before-dir>/.venv, else this one)"
    )
    parser.add_argument(
        "--embedded", action="store_true", help="also the platform's embedded profile"
    )
    parser.add_argument(
        "--sequential",
        action="store_true",
        help="one system at a time (default: sdk and platform both up, measured in turn)",
    )
    parser.add_argument("--scenarios", help="subset of closed,io,memory,cancel,scale")
    parser.add_argument("--ops", help=f"closed-loop operations: {ALL_OPS}")
    parser.add_argument(
        "--duration", type=float, help="seconds measured per closed-loop cell (6; quick 2)"
    )
    parser.add_argument(
        "--warmup", type=float, help="seconds before measuring a cell (1; quick 0.5)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        help="closed-loop and I/O-bound cells measured this many times, the systems "
        "alternating; each system's median round is reported (3; quick 1)",
    )
    parser.add_argument("--concurrency", help="closed-loop clients (1,16,64; quick 1,16)")
    parser.add_argument("--io-counts", help="I/O-bound send counts (20,200; quick 20)")
    parser.add_argument(
        "--memory-runs", type=int, help="runs in flight for the memory figure (1000; quick 50)"
    )
    parser.add_argument(
        "--memory-wait", type=float, help="at most this long for all to work (90; quick 15)"
    )
    parser.add_argument("--cancel-samples", type=int, help="(20; quick 3)")
    parser.add_argument("--scale-tasks", help="stored-task counts (1000,1000000; quick 1000)")
    parser.add_argument("--scale-iterations", type=int, help="samples per read (200; quick 10)")
    parser.add_argument("--out", type=Path, default=REPO / "var" / "bench")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    plan = plan_from(args)
    systems = [s for s in args.systems.split(",") if s]
    if args.embedded and "embedded" not in systems:
        systems.append("embedded")
    platform_dir, python = platform_python(args)
    before_dir, before_python = None, None
    if args.before_dir:
        before_dir = args.before_dir.resolve()
        venv = before_dir / ".venv" / "bin" / "python"
        before_python = args.before_python or (venv if venv.exists() else Path(sys.executable))
        systems.insert(systems.index("platform") + 1 if "platform" in systems else 0, "before")
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)
    run_dir = args.out / f"run-{stamp}"
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    meta: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "loadavg_start": loadavg(),
        "platform_dir": str(platform_dir),
        "platform_commit": git_describe(platform_dir),
        "platform_python": str(python),
        "before_dir": str(before_dir) if before_dir else None,
        "before_commit": git_describe(before_dir) if before_dir else None,
        "platform_env": env_pairs(args.platform_env),
        "versions": versions(),
        "quick": args.quick,
        "plan": plan.__dict__,
        "argv": sys.argv[1:] if argv is None else argv,
    }
    logfile = (run_dir / "progress.log").open("a")

    def log(line: str) -> None:
        stamp_line = f"[{time.monotonic() - started:7.1f}s] {line}"
        print(stamp_line, flush=True)
        logfile.write(stamp_line + "\n")
        logfile.flush()

    print(f"platform: {platform_dir} @ {meta['platform_commit']}, python {python}")
    if before_dir:
        print(f"before: {before_dir} @ {meta['before_commit']}, python {before_python}")
    print(f"machine: {meta['machine']}, load {meta['loadavg_start']}; logs in {run_dir}")
    processes = Processes()
    services = Services()
    results: dict[str, Any] = {}
    labels: dict[str, str] = {s: s for s in systems}
    commands: dict[str, Any] = {}

    def interrupted(signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)
    try:
        if {"sdk", "platform", "before"} & set(systems):
            services.start()

        def make(name: str) -> System:
            if name == "sdk":
                return SdkSystem(services, processes, run_dir, plan)
            # `before`: the --before-dir tree, a second production platform beside the first.
            before = name == "before"
            return PlatformSystem(
                profile="embedded" if name == "embedded" else "production",
                name=name,
                label=f"before ({meta['before_commit']})" if before else "",
                platform_dir=before_dir if before and before_dir else platform_dir,
                python=before_python if before and before_python else python,
                services=None if name == "embedded" else services,
                processes=processes,
                run_dir=run_dir,
                plan=plan,
                process_source=args.platform_processes,
                extra_env=env_pairs(args.platform_env),
            )

        # The production pair runs side by side, measured in turn; the embedded profile (its
        # broker and streams poll, so it is never quite idle) runs alone after them.
        if args.sequential:
            groups = [[name] for name in systems]
        else:
            groups = [
                [n for n in systems if n != "embedded"],
                [n for n in systems if n == "embedded"],
            ]
        for group in (g for g in groups if g):
            running: list[System] = []
            try:
                for name in group:
                    system = make(name)
                    labels[name] = system.label
                    results[name] = {}
                    running.append(system)
                    log(f"{name}: starting")
                    try:
                        system.start()
                    except Exception as exc:  # noqa: BLE001 (the others still run)
                        system.failed = results[name]["failed"] = f"start: {exc}"
                        log(f"{name}: FAILED to start: {exc}")
                    if isinstance(system, PlatformSystem):
                        commands[name] = system.display_commands()
                run_steps([s for s in running if not s.failed], plan, log, results)
            finally:
                for system in running:
                    processes.stop(system.procs)
                    if isinstance(system, PlatformSystem):
                        system.cleanup()
    except KeyboardInterrupt:
        log("interrupted; stopping everything")
    finally:
        processes.stop_all()
        services.stop()
        logfile.close()
    meta["loadavg_end"] = loadavg()
    meta["elapsed_s"] = round(time.monotonic() - started)
    meta["platform_processes"] = commands
    headers = [
        "scenario",
        "metric",
        *[labels.get(s, s) for s in systems],
        *[f"{top} ÷ {bottom}" for top, bottom in ratio_pairs(systems)],
        "notes",
    ]
    rows = rows_for(results, systems, plan)
    print()
    print(text_table(rows, headers))
    print()
    print(RATIO_NOTE)
    report = markdown_report(meta, rows, headers, commands)
    base = args.out / f"compare-{stamp}"
    Path(f"{base}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    Path(f"{base}.md").write_text(report)
    print(f"\nwrote {base}.json and {base}.md ({meta['elapsed_s']} s)")
    failed = [name for name in systems if "failed" in results.get(name, {})]
    return 1 if failed else 0


RATIO_NOTE = (
    "platform ÷ sdk: for req/s and tasks/s, above 1 means the platform does more; for times and "
    "memory, above 1 means the platform takes more. Notes: CPU of the load client and of other "
    "work on the machine (neither the client nor the system under test) meanwhile, in % of one "
    "core."
)


def settings_note(extra: dict[str, str]) -> str:
    """The `--platform-env` settings, as a sentence of the report."""
    if not extra:
        return ""
    return " Their added settings: " + ", ".join(f"`{k}={v}`" for k, v in extra.items()) + "."


def markdown_report(
    meta: dict[str, Any], rows: list[list[str]], headers: list[str], commands: dict[str, Any]
) -> str:
    box = meta["machine"]
    processes = "; ".join(
        f"{name}: " + ", ".join(f"`{cmd}`" for _, cmd in cmds) for name, cmds in commands.items()
    )
    title = f"### {meta['date'][:10]}: platform {meta['platform_commit']}"
    if meta.get("before_commit"):
        title += f", before {meta['before_commit']}"
    title += f" and a2a-sdk {meta['versions']['a2a-sdk']}" + (" (quick)" if meta["quick"] else "")
    return "\n".join(
        [
            title,
            "",
            f"Machine: {box['nproc']} cores ({box['cpu']}), {box['memory_gib']} GiB, Python "
            f"{box['python']}; load average {meta['loadavg_start']} at the start, "
            f"{meta['loadavg_end']} at the end. Everything on one box: the load client, the "
            "system under test, PostgreSQL and Redis. "
            f"`bench/compare.py {' '.join(meta['argv'])}` took {meta['elapsed_s']} s.",
            "",
            f"Platform processes: {processes}." + settings_note(meta.get("platform_env") or {}),
            "",
            markdown(rows, headers),
            "",
            RATIO_NOTE,
            "",
        ]
    )


if __name__ == "__main__":
    sys.exit(main())
