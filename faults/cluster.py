"""The platform on the production profile as named processes that can be stopped, killed and
restarted one by one: daphne web processes, Celery workers (agents, push, maintenance), beat,
gRPC sidecars and HAProxy in front (deploy/haproxy.cfg), on the throwaway PostgreSQL and Redis
of scripts/services.sh, which can be restarted too.

    with running_cluster(Path("var/cluster"), web=2, agents=2, grpc=2) as cluster:
        cluster.seed({...})                  # tenant, agents, key (faults/seed.py)
        cluster.kill("web1"); cluster.restart("web1")

Every process is started the way scripts/run.sh and docker-compose.yml start it (the same
manage.py commands), each in a process group of its own, its output in `<run dir>/<name>.log`.
Clients reach the platform through the front only (`cluster.url`, `cluster.grpc_address`), so
every request may land on any process; `X-Served-By` on each HTTP response and the front's
per-server counts (`cluster.served()`) say which one did.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FRONT_CONFIG = ROOT / "deploy" / "haproxy.cfg"
PYTHON = Path(sys.executable)
# The executors the cluster's agents may run (A2A_PYTHON_EXECUTORS).
FAULT_EXECUTORS = "tests.agents.fault_executors.StepsExecutor"
# How long a process may take to start on a busy two-core machine: a bound, not an estimate.
START_SECONDS = 120.0


def haproxy_bin() -> Path:
    """Debian's HAProxy (scripts/services.sh installs it), or A2A_HAPROXY_BIN."""
    return Path(os.environ.get("A2A_HAPROXY_BIN", "").strip() or "/usr/sbin/haproxy")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_until(check: Callable[[], bool], *, timeout: float, what: str, pause: float = 0.1) -> None:
    """Until `check()` holds; a RuntimeError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(pause)


# --- PostgreSQL and Redis ---------------------------------------------------------------------


class Services:
    """scripts/services.sh's throwaway PostgreSQL and Redis, which the fault suite also stops
    and starts again: PostgreSQL with `pg_ctl` on its data directory (a restart reuses the
    options it was started with), Redis with the options services.sh gives it (no persistence:
    a restart loses every queued job, the harshest case of a broker restart)."""

    def __init__(self) -> None:
        self.env: dict[str, str] = {}
        self.directory = Path()
        self.pg_bin = Path()
        self.redis_port = 0
        self.run_as = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []

    def start(self) -> None:
        script = (
            f"unset SERVICES_DIR; source {shlex.quote(str(ROOT / 'scripts' / 'services.sh'))} "
            "&& { services_ensure_haproxy >&2 || true; } "
            '&& services_start >&2 && printf "%s\\n" "$DATABASE_URL" "$REDIS_URL" '
            '"$CELERY_BROKER_URL" "$SERVICES_DIR" "$SERVICES_PG_BIN"'
        )
        out = subprocess.run(
            ["bash", "-c", script], check=True, capture_output=True, text=True, timeout=300
        )
        database, redis, broker, directory, pg_bin = out.stdout.split()[:5]
        self.env = {"DATABASE_URL": database, "REDIS_URL": redis, "CELERY_BROKER_URL": broker}
        self.directory, self.pg_bin = Path(directory), Path(pg_bin)
        self.redis_port = int(redis.rsplit(":", 1)[1].split("/")[0])

    def stop(self) -> None:
        if not self.env:
            return
        with contextlib.suppress(OSError, ValueError):
            os.kill(self._redis_pid(), signal.SIGKILL)
        self._pg_ctl("-m", "immediate", "stop", check=False)
        shutil.rmtree(self.directory, ignore_errors=True)
        self.env = {}

    # PostgreSQL

    def _pg_ctl(self, *args: str, check: bool = True) -> None:
        command = [*self.run_as, str(self.pg_bin / "pg_ctl"), "-D", str(self.directory / "pg")]
        subprocess.run(
            [*command, "-l", str(self.directory / "pg.log"), "-w", "-t", "60", *args],
            check=check,
            capture_output=True,
            timeout=120,
        )

    def stop_postgres(self, mode: str = "fast") -> None:
        """`fast`: every session is ended at once (clients see their connections close);
        `immediate`: as a crash (recovery from the WAL at the next start)."""
        self._pg_ctl("-m", mode, "stop")

    def start_postgres(self) -> None:
        # `restart` on a stopped server starts it with the options of its last start.
        self._pg_ctl("restart")

    # Redis

    def _redis_pid(self) -> int:
        return int((self.directory / "redis.pid").read_text().split()[0])

    def redis_ping(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.redis_port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def queued(self, queue: str) -> int:
        """Jobs waiting in a Celery queue of the broker (kombu keeps each queue in a list)."""
        import redis

        with redis.Redis.from_url(self.env["CELERY_BROKER_URL"], socket_timeout=5) as client:
            return int(client.llen(queue))

    def stop_redis(self, sig: int = signal.SIGKILL) -> None:
        pid = self._redis_pid()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        wait_until(lambda: not Path(f"/proc/{pid}").exists(), timeout=30, what="Redis to stop")

    def start_redis(self) -> None:
        binary = os.environ.get("A2A_REDIS_SERVER") or shutil.which("redis-server")
        if not binary:
            raise RuntimeError("redis-server is not on PATH (or set A2A_REDIS_SERVER)")
        d = str(self.directory)
        # As scripts/services.sh starts it.
        argv = [binary, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", ""]
        argv += ["--appendonly", "no", "--daemonize", "yes", "--dir", d]
        argv += ["--pidfile", f"{d}/redis.pid", "--logfile", f"{d}/redis.log"]
        subprocess.run([*self.run_as, *argv], check=True, timeout=30)
        wait_until(self.redis_ping, timeout=30, what="Redis to answer PING")


# --- the platform's processes -----------------------------------------------------------------


@dataclass
class Member:
    """One named process of the cluster."""

    name: str
    role: str  # web, agents, push, maintenance, beat, grpc, front
    argv: list[str]
    env: dict[str, str]
    log: Path
    port: int | None = None
    ready_marker: str = ""  # a line of its log that says it is ready (workers, sidecars)
    popen: subprocess.Popen[bytes] | None = None
    log_offset: int = 0  # the log's size when it last started
    started_at: float = 0.0  # when it last started (wall clock)
    starts: int = 0

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def pid(self) -> int:
        assert self.popen is not None, f"{self.name} was never started"
        return self.popen.pid

    def log_since_start(self) -> str:
        with contextlib.suppress(OSError), self.log.open("rb") as f:
            f.seek(self.log_offset)
            return f.read().decode(errors="replace")
        return ""


class Cluster:
    """The processes, by name; clients go through the front (`url`, `grpc_address`)."""

    def __init__(
        self, services: Services, run_dir: Path, *, settings: dict[str, str] | None = None
    ) -> None:
        self.services = services
        self.run_dir = run_dir
        (run_dir / "var").mkdir(parents=True, exist_ok=True)
        self.front_port, self.front_grpc_port, self.stats_port = (free_port() for _ in range(3))
        inherited = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("A2A_", "DATABASE_", "DJANGO_", "CELERY_", "REDIS_"))
        }
        self.env: dict[str, str] = {
            **inherited,
            **services.env,
            "PYTHONPATH": str(ROOT),
            "DJANGO_SETTINGS_MODULE": "a2a_platform.settings",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "A2A_VAR_DIR": str(run_dir / "var"),
            "A2A_PUBLIC_BASE_URL": self.url,
            "A2A_GRPC_PUBLIC_ADDRESS": self.grpc_address,
            "A2A_PYTHON_EXECUTORS": FAULT_EXECUTORS,
            "A2A_PUSH_ALLOWED_NETWORKS": "127.0.0.0/8,::1/128",
            "A2A_METRICS_OPEN": "true",
            **(settings or {}),
        }
        self.members: dict[str, Member] = {}

    @property
    def url(self) -> str:
        """The front's HTTP origin: the platform's public base URL."""
        return f"http://127.0.0.1:{self.front_port}"

    @property
    def grpc_address(self) -> str:
        return f"127.0.0.1:{self.front_grpc_port}"

    def agent_url(self, tenant: str, agent: str) -> str:
        return f"{self.url}/a2a/{tenant}/{agent}/"

    # --- what runs ----------------------------------------------------------------------------

    def _add(self, member: Member) -> Member:
        assert member.name not in self.members, f"{member.name} twice"
        self.members[member.name] = member
        return member

    def add_web(self, name: str) -> Member:
        """One daphne process (`runweb --processes 1`) on a port of its own behind the front."""
        port = free_port()
        argv = [str(PYTHON), "manage.py", "runweb", "--processes", "1", "--port", str(port)]
        return self._add(Member(name, "web", argv, self.env, self.run_dir / f"{name}.log", port))

    def add_worker(self, name: str, queue: str) -> Member:
        """A Celery worker for one queue (agents, push or maintenance), as `make run` starts
        it; `name` is its node name."""
        argv = [str(PYTHON), "manage.py", "celeryworker", queue, "--loglevel=INFO"]
        argv += ["--without-gossip", "--without-mingle", "-n", f"{name}@%h"]
        log = self.run_dir / f"{name}.log"
        return self._add(Member(name, queue, argv, self.env, log, ready_marker=" ready."))

    def add_beat(self, name: str = "beat") -> Member:
        celery = PYTHON.parent / "celery"
        argv = [str(celery), "-A", "a2a_platform", "beat", "--loglevel=INFO"]
        argv += ["--scheduler", "a2a_platform.beat:Scheduler"]
        argv += ["--schedule", str(self.run_dir / "var" / "celerybeat-schedule")]
        log = self.run_dir / f"{name}.log"
        return self._add(Member(name, "beat", argv, self.env, log))

    def add_grpc(self, name: str) -> Member:
        port = free_port()
        env = {**self.env, "A2A_GRPC_LISTEN": f"127.0.0.1:{port}"}
        argv = [str(PYTHON), "manage.py", "rungrpc"]
        log = self.run_dir / f"{name}.log"
        return self._add(Member(name, "grpc", argv, env, log, port, "sidecar listening"))

    def add_front(self, name: str = "front") -> Member:
        """HAProxy with deploy/haproxy.cfg over the web and gRPC members added so far, in the
        order they were added (web1, web2, ... and grpc1, grpc2, ... in its statistics)."""
        env = {
            **os.environ,
            "A2A_FRONT_WEB_LISTEN": f"127.0.0.1:{self.front_port}",
            "A2A_FRONT_GRPC_LISTEN": self.grpc_address,
            "A2A_FRONT_STATS_LISTEN": f"127.0.0.1:{self.stats_port}",
        }
        for role, prefix in (("web", "A2A_WEB_SERVER"), ("grpc", "A2A_GRPC_SERVER")):
            members = [m for m in self.members.values() if m.role == role]
            assert 1 <= len(members) <= 4, f"deploy/haproxy.cfg takes 1 to 4 {role} servers"
            for n, member in enumerate(members, start=1):
                env[f"{prefix}_{n}"] = f"127.0.0.1:{member.port}"
        argv = [str(haproxy_bin()), "-db", "-f", str(FRONT_CONFIG)]
        log = self.run_dir / f"{name}.log"
        return self._add(Member(name, "front", argv, env, log, self.front_port))

    def add_topology(
        self,
        *,
        web: int = 2,
        agents: int = 2,
        grpc: int = 2,
        push: int = 1,
        maintenance: int = 1,
        beat: bool = True,
    ) -> None:
        """web1.., agents1.., push1.., maintenance1.., beat, grpc1.. and the front."""
        for n in range(1, web + 1):
            self.add_web(f"web{n}")
        for n in range(1, agents + 1):
            self.add_worker(f"agents{n}", "agents")
        for n in range(1, push + 1):
            self.add_worker(f"push{n}", "push")
        for n in range(1, maintenance + 1):
            self.add_worker(f"maintenance{n}", "maintenance")
        if beat:
            self.add_beat()
        for n in range(1, grpc + 1):
            self.add_grpc(f"grpc{n}")
        self.add_front()

    # --- set-up -------------------------------------------------------------------------------

    def manage(self, *args: str, stdin: str | None = None, timeout: float = 600) -> str:
        out = subprocess.run(
            [str(PYTHON), *args],
            cwd=ROOT,
            env=self.env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if out.returncode:
            raise RuntimeError(
                f"{' '.join(args)} failed:\n{out.stdout[-2000:]}{out.stderr[-4000:]}"
            )
        return out.stdout

    def migrate(self) -> None:
        self.manage("manage.py", "migrate", "--noinput")

    def seed(
        self,
        agents: dict[str, dict[str, Any]],
        tenant: str = "faults",
        limits: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        """A tenant (with its own `limits`), its agents ({slug: {"kind", "config", "fields"}})
        and a key: faults/seed.py in a process of the cluster's settings. Returns {"key",
        "agents": {slug: url}}."""
        spec = json.dumps({"tenant": tenant, "agents": agents, "limits": limits or {}})
        made = json.loads(self.manage("-m", "faults.seed", stdin=spec).strip().splitlines()[-1])
        made["agents"] = {slug: self.agent_url(tenant, slug) for slug in agents}
        return made

    # --- starting and stopping ----------------------------------------------------------------

    def start(self, *names: str) -> None:
        """Start the members (all not running, if none is named) side by side; wait until each
        is ready. The front starts last, once what it balances over is up."""
        chosen = [self.members[n] for n in names] or [
            m for m in self.members.values() if not m.alive
        ]
        inner = [m for m in chosen if m.role != "front"]
        with ThreadPoolExecutor(max_workers=max(1, len(inner))) as pool:
            failures = [f.exception() for f in [pool.submit(self._start, m) for m in inner]]
        if error := next((e for e in failures if e is not None), None):
            raise error
        for member in chosen:
            if member.role == "front":
                self._start(member)

    def _start(self, member: Member) -> None:
        assert not member.alive, f"{member.name} is running"
        member.log_offset = member.log.stat().st_size if member.log.exists() else 0
        member.started_at = time.time()
        with member.log.open("ab") as out:
            out.write(f"--- start {member.starts + 1}: {shlex.join(member.argv)}\n".encode())
            out.flush()
            member.popen = subprocess.Popen(
                member.argv,
                cwd=ROOT,
                env=member.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        member.starts += 1
        self.wait_ready(member.name)

    def ready(self, name: str) -> bool:
        member = self.members[name]
        if not member.alive:
            return False
        if member.role == "web":
            return http_status(f"http://127.0.0.1:{member.port}/readyz") == 200
        if member.role == "beat":
            return self._beat_ticked_since(member.started_at)
        if member.ready_marker:
            return member.ready_marker in member.log_since_start()
        return member.port is None or port_open(member.port)

    def _beat_ticked_since(self, started_at: float) -> bool:
        """Whether beat's scheduler has recorded a tick (console.BeatHeartbeat) since then."""
        import psycopg

        try:
            with psycopg.connect(self.env["DATABASE_URL"], connect_timeout=5) as conn:
                row = conn.execute(
                    "SELECT extract(epoch FROM ticked_at) FROM console_beatheartbeat"
                ).fetchone()
        except psycopg.Error:
            return False
        return row is not None and float(row[0]) >= started_at - 1

    def wait_ready(self, name: str, timeout: float = START_SECONDS) -> None:
        member = self.members[name]

        def check() -> bool:
            if member.popen is not None and member.popen.poll() is not None:
                raise RuntimeError(
                    f"{name} exited ({member.popen.returncode}) while starting:\n"
                    + member.log_since_start()[-4000:]
                )
            return self.ready(name)

        wait_until(check, timeout=timeout, what=f"{name} to be ready", pause=0.2)

    def kill(self, name: str) -> None:
        """SIGKILL to the member's whole process group (runweb and its server process alike),
        as the kernel's OOM killer or a lost host would: nothing of it runs on."""
        member = self.members[name]
        if member.popen is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(member.pid, signal.SIGKILL)
        member.popen.wait()

    def terminate(self, name: str, *, grace: float = 60.0) -> float:
        """SIGTERM to the member's main process, as a supervisor stops it (runweb passes it on
        to its daphne); SIGKILL to its group if it has not exited within `grace` seconds.
        Returns how long it took to exit."""
        member = self.members[name]
        if not member.alive:
            return 0.0
        started = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            os.kill(member.pid, signal.SIGTERM)
        try:
            member.popen.wait(grace)  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            self.kill(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(member.pid, signal.SIGKILL)  # whatever it left behind
        return time.monotonic() - started

    def restart(self, name: str) -> None:
        """Start a stopped member again, on the same port, and wait until it is ready."""
        if self.members[name].alive:
            self.terminate(name)
        self._start(self.members[name])

    def exited(self) -> list[Member]:
        """Members that were started and are no longer running."""
        return [m for m in self.members.values() if m.popen is not None and not m.alive]

    def stop_all(self, grace: float = 10.0) -> None:
        running = [m for m in self.members.values() if m.alive]
        for member in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(member.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for member in running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                member.popen.wait(max(0.1, deadline - time.monotonic()))  # type: ignore[union-attr]
        for member in self.members.values():
            if member.popen is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(member.pid, signal.SIGKILL)
                member.popen.wait()

    # --- what the front saw -------------------------------------------------------------------

    def _stats(self) -> list[dict[str, str]]:
        """The front's statistics, a row per frontend, backend and server."""
        with urllib.request.urlopen(  # noqa: S310 (the front's loopback statistics page)
            f"http://127.0.0.1:{self.stats_port}/stats;csv", timeout=10
        ) as response:
            text = response.read().decode()
        return list(csv.DictReader(io.StringIO(text.lstrip("# "))))

    def served(self) -> dict[str, int]:
        """Requests the front sent to each server so far ({"web1": n, "grpc2": m, ...})."""
        return {
            row["svname"]: int(row["req_tot"] or row["stot"] or 0)
            for row in self._stats()
            if row["svname"] not in ("FRONTEND", "BACKEND")
        }

    def front_status(self) -> dict[str, str]:
        """What the front's health checks say of each server: UP, DOWN, ..."""
        return {
            row["svname"]: row["status"]
            for row in self._stats()
            if row["svname"] not in ("FRONTEND", "BACKEND")
        }

    def wait_front_up(self, timeout: float = START_SECONDS) -> None:
        """Until the front's checks find every server up (a restarted one takes two checks)."""
        if not (front := self.members.get("front")) or not front.alive:
            return
        wait_until(
            lambda: all(s == "UP" for s in self.front_status().values()),
            timeout=timeout,
            what="the front to see every server up",
            pause=0.25,
        )


def http_status(url: str, host: str = "127.0.0.1") -> int | None:
    request = urllib.request.Request(url, headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 (loopback)
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return None


@contextlib.contextmanager
def running_cluster(
    run_dir: Path, *, settings: dict[str, str] | None = None, **topology: Any
) -> Iterator[Cluster]:
    """Throwaway PostgreSQL and Redis, the database migrated, and the topology's processes
    running behind the front; everything stopped and removed afterwards. HAProxy is
    installed as the test suite installs it (scripts/services.sh), where it can be."""
    services = Services()
    services.start()
    cluster = Cluster(services, run_dir, settings=settings)
    try:
        if not haproxy_bin().exists():
            raise RuntimeError(
                f"HAProxy ({haproxy_bin()}) is missing: apt-get install haproxy, or set "
                "A2A_HAPROXY_BIN to its path"
            )
        cluster.add_topology(**topology)
        cluster.migrate()
        cluster.start()
        yield cluster
    finally:
        cluster.stop_all()
        services.stop()
