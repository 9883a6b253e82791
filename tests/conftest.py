"""Fixtures: real PostgreSQL (pytest-django's test database), and for end-to-end tests real
daphne and Celery worker processes that share that database, reached over real sockets."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from agents.models import Agent, Tenant
from agents.services import agent_create, api_key_create, tenant_create

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_port(
    port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 90
) -> None:
    """Until the process listens on `port`; a process that does not within `timeout` (a busy
    machine starts slowly: the bound is generous) is stopped, not left running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited early:\n{log.read_text()[-4000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    stop_process(proc)
    raise RuntimeError(f"port {port} did not open:\n{log.read_text()[-4000:]}")


def require(present: bool, missing: str) -> None:
    """A test whose component is missing skips on a developer's machine, saying what is
    missing; in CI (CI=true) a missing component is a failure, never a silent skip."""
    if present:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI lacks a component this test needs: {missing}", pytrace=False)
    pytest.skip(missing)


def set_up_if_selected(request: pytest.FixtureRequest, fixture: str) -> None:
    """Set up the module fixture `fixture` now if a test of this module that is to run uses
    it: what the fixture starts on a thread then goes on beside the tests before that one."""
    if any(
        fixture in item.fixturenames
        for item in request.session.items
        if getattr(item, "module", None) is request.module
    ):
        request.getfixturevalue(fixture)


AGENT_HOST_PATTERN = "{agent}--{tenant}.localhost"


@dataclass
class LivePlatform:
    url: str
    env: dict[str, str]
    log_dir: Path
    worker: subprocess.Popen[bytes]
    grpc_address: str = ""  # the gRPC sidecar, host:port

    def agent_url(self, agent: Agent) -> str:
        return f"{self.url}/a2a/{agent.tenant.slug}/{agent.slug}/"

    def start_worker(self, name: str, role: str = "agents", **env: str) -> subprocess.Popen[bytes]:
        """A Celery worker for one queue, started as `make run` starts it."""
        log = self.log_dir / f"{name}.log"
        proc = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "celeryworker",
                role,
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                "-n",
                f"{name}@%h",
            ],
            cwd=ROOT,
            env={**self.env, **env},
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 90  # as generous as _wait_for_port, for a busy machine
        while "ready" not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                # A worker that was slow to start would go on taking jobs of later tests.
                stop_process(proc)
                raise RuntimeError(f"worker did not start:\n{log.read_text()[-4000:]}")
            time.sleep(0.1)
        return proc


def start_web(port: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A web process serving the platform on `port`, once it accepts connections: daphne as
    `manage.py runweb` runs it (a2a_platform.webserver: its drain and HTTP-layer answers)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "a2a_platform.webserver",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "a2a_platform.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    _wait_for_port(port, proc, log)
    return proc


def start_grpc(address: str, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """A gRPC sidecar (manage.py rungrpc) listening on `address`, once it accepts connections."""
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "rungrpc"],
        cwd=ROOT,
        env={**env, "A2A_GRPC_LISTEN": address},
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    _wait_for_port(int(address.rpartition(":")[2]), proc, log)
    return proc


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def live_platform(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LivePlatform]:
    """daphne + a Celery worker on the test database, for the whole session."""
    with django_db_blocker.unblock():
        db = connection.settings_dict
        database_url = (
            f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}"
            if db["ENGINE"].endswith("postgresql")
            else None
        )
    require(database_url is not None, "end-to-end tests need PostgreSQL (run `make test`)")
    port, grpc_port = _free_port(), _free_port()
    grpc_address = f"127.0.0.1:{grpc_port}"
    log_dir = tmp_path_factory.mktemp("live")
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "A2A_PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
        "A2A_GRPC_PUBLIC_ADDRESS": grpc_address,
        # Agents at host names of their own (RFC 6761's .localhost; tests/e2e/clients.py
        # connects such names to 127.0.0.1 where the resolver does not).
        "A2A_AGENT_HOST_PATTERN": AGENT_HOST_PATTERN,
        # Push webhooks go to receivers on this machine; retries come quickly.
        "A2A_PUSH_ALLOWED_NETWORKS": "127.0.0.0/8,::1/128",
        "A2A_AGENT_ALLOWED_NETWORKS": "127.0.0.0/8,::1/128",
        # Token issuers are local providers the tests start (tests/e2e/oidc_provider.py).
        "A2A_IDENTITY_ALLOWED_NETWORKS": "127.0.0.0/8,::1/128",
        "A2A_JWKS_REFETCH_SECONDS": "0.2",
        "A2A_METRICS_OPEN": "true",
        "A2A_PUSH_BACKOFF_BASE_SECONDS": "0.2",
        "A2A_PUSH_BACKOFF_MAX_SECONDS": "1",
        "A2A_VAR_DIR": str(log_dir / "var"),
        "A2A_BLOCKING_TIMEOUT_SECONDS": "20",
        "A2A_CANCEL_TIMEOUT_SECONDS": "3",
        "A2A_POLL_INTERVAL_SECONDS": "0.05",
        "A2A_WORKER_GRACE_SECONDS": "2",
        "A2A_SSE_KEEPALIVE_SECONDS": "0.5",
        "A2A_PYTHON_EXECUTORS": (
            "tests.agents.sample_executors.ShoutingExecutor,"
            "tests.agents.sample_executors.ExtensionsExecutor,"
            "tests.agents.sample_executors.SleepRecorder,"
            "tests.agents.sample_executors.InvalidAfterWork"
        ),
        "PYTHONPATH": str(ROOT),
    }
    platform = LivePlatform(
        url=f"http://127.0.0.1:{port}",
        env=env,
        log_dir=log_dir,
        worker=None,  # type: ignore[arg-type]
        grpc_address=grpc_address,
    )
    # The five start side by side (each is mostly Python importing, on a CPU of its own when
    # there is one); each is waited for as before.
    with ThreadPoolExecutor(max_workers=5) as pool:
        starting = [
            pool.submit(start_web, port, env, log_dir / "daphne.log"),
            pool.submit(start_grpc, grpc_address, env, log_dir / "grpc.log"),
            pool.submit(platform.start_worker, "worker"),
            pool.submit(platform.start_worker, "push", "push"),
            pool.submit(platform.start_worker, "maintenance", "maintenance"),
        ]
    failed = [error for f in starting if (error := f.exception()) is not None]
    started = [f.result() for f in starting if f.exception() is None]
    if failed:
        for proc in started:
            stop_process(proc)
        raise failed[0]
    daphne, sidecar, platform.worker, *others = started
    try:
        yield platform
    finally:
        stop_process(platform.worker)
        for proc in others:
            stop_process(proc)
        stop_process(sidecar)
        stop_process(daphne)


# --- data --------------------------------------------------------------------------------


@dataclass
class Setup:
    tenant: Tenant
    agent: Agent
    key: str


_TENANT_NUMBERS = itertools.count()


@pytest.fixture(scope="session", autouse=True)
def _usage_dropped_with_the_test_database(django_db_setup: Any) -> Iterator[None]:
    """The usage (and the refused credentials) this process counted and has not flushed
    belong to the test database, which is dropped after this: not flushed at exit into a
    database that is gone."""
    yield
    from agents import usage
    from audit.failures import FAILURES

    usage.METER.forget()
    FAILURES.forget()


@pytest.fixture(autouse=True)
def _fresh_agent_cache() -> Iterator[None]:
    """Each test starts with this process's agent and key cache empty, as rows (and their ids)
    of earlier tests are gone, and as a process that has seen no sends."""
    from agents import cache, identity
    from tasks_app import lanes

    cache.forget_all()
    identity.forget_all()  # no key set read and no token verified
    lanes.CONTENTION = lanes.Contention()  # and no record of which tenants sent lately
    yield
    cache.forget_all()
    identity.forget_all()


@pytest.fixture
def make_tenant(db: Any) -> Any:
    def make(slug: str | None = None) -> Tenant:
        # Never a slug an earlier test used: a running daphne may still hold that test's
        # (deleted) agent at the same URL for A2A_AUTH_CACHE_SECONDS (agents.cache).
        return tenant_create(slug=slug or f"t{next(_TENANT_NUMBERS)}-{os.getpid()}")

    return make


@pytest.fixture
def make_agent(db: Any) -> Any:
    def make(
        tenant: Tenant,
        slug: str = "echo",
        kind: str = "echo",
        config: dict[str, Any] | None = None,
        **fields: Any,
    ) -> Agent:
        return agent_create(
            tenant=tenant,
            slug=slug,
            name=slug.title(),
            description=f"The {slug} agent.",
            executor_kind=kind,
            executor_config=config or {},
            **fields,
        )

    return make


@pytest.fixture
def make_key(db: Any) -> Any:
    def make(tenant: Tenant, name: str = "key", **fields: Any) -> str:
        return api_key_create(tenant=tenant, name=name, **fields)[1]

    return make
