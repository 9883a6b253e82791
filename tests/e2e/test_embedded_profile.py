"""The embedded profile as `make run` starts it (scripts/run.sh: SQLite in WAL mode, the
filesystem broker, no Redis; daphne, a worker, beat and the gRPC sidecar) under concurrent load:
every task completes, blocking, streaming and canceled alike; the sidecar answers on the address
run.sh prints, and SIGTERM stops every process. What it prints: a taken port said before
anything starts, the summary last and only once everything answers, every line led by its
process's name, and no housekeeping at the default log level. What it records in run.env for
the commands run in another shell, and how it stops: a Ctrl-C at its terminal, or an interrupt
sent to run.sh, ends `make run` with status 0."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import termios
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
from a2a.types import SendMessageRequest, TaskState
from a2a.types import a2a_pb2 as pb10
from a2a.types import a2a_pb2_grpc as pb10_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ..conftest import ROOT, _free_port, _wait_for_port, set_up_if_selected
from .clients import GRPC, V0_3, sdk_client, send, user_message
from .helpers import raw_send

pytestmark = pytest.mark.e2e


@dataclass
class Embedded:
    run: subprocess.Popen[bytes]  # make
    base: str  # http://127.0.0.1:<port>/a2a/demo/
    key: str
    grpc_address: str  # as run.sh prints it
    log: Path
    up_at: float  # time.monotonic() when the summary was seen
    # what answered at once when the summary appeared: /readyz's status, the sidecar's health
    answered: tuple[int, int]


def _printed(
    log: Path, pattern: str, proc: subprocess.Popen[bytes] | None, timeout: float = 60
) -> str:
    """The first group of `pattern` in run.sh's output, once it appears."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := re.search(pattern, log.read_text(errors="replace"), re.M):
            return found.group(1)
        if proc is not None and proc.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"run.sh did not print {pattern!r}:\n{log.read_text()[-4000:]}")


def _session_members(sid: int) -> list[str]:
    """Live (not zombie) processes of a session: '<pid> <command>'. run.sh starts each
    process in a process group of its own, all in run.sh's session."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            fields = text.rpartition(")")[2].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
                members.append(f"{stat.parent.name} {cmdline.decode(errors='replace')[:100]}")
        except (OSError, ValueError, IndexError):
            continue  # exited while we looked
    return members


_DERIVED = (
    "DATABASE_URL",
    "REDIS_URL",
    "CELERY_BROKER_URL",
    "A2A_PUBLIC_BASE_URL",
    "DJANGO_SECRET_KEY",
    "DJANGO_SECRET_KEY_FILE",
)


def _as_a_user_has_it() -> dict[str, str]:
    """This environment without what the test suite sets and a user's shell has not."""
    env = {
        key: value
        for key, value in os.environ.items()
        # (OPENAI_*: the optional openai demo agent stays off, as on a machine without them.)
        if key not in _DERIVED and not key.startswith(("A2A_GRPC_", "OPENAI_"))
    }
    env["PYTHONPATH"] = str(ROOT)
    return env


def _as_a_shell_starts_it() -> None:
    """In the child: the signal dispositions a user's shell gives a command it starts. A test
    run started in the background (`nohup make test &`) ignores SIGINT and SIGQUIT, and its
    children inherit that: run.sh could then not trap the interrupt these tests send it."""
    for number in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(number, signal.SIG_DFL)


def _run_sh(
    var: Path,
    port: int,
    log: Path,
    grpc_port: int | None = None,
    *,
    make: bool = False,
    **env: str,
) -> subprocess.Popen[bytes]:
    """`make run`'s script on `port` with var dir `var`, as a user starts it: what it derives
    itself (the key, the public URL and gRPC addresses) is left to it. With `make`, `make run`
    itself, without a terminal (as a script, an IDE or a service manager starts it). In a
    session of its own, so that a test can tell whether a signal stopped everything."""
    env = {**_as_a_user_has_it(), **env}
    env.update(A2A_VAR_DIR=str(var), PORT=str(port), GRPC_PORT=str(grpc_port or _free_port()))
    var.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        ["make", "--no-print-directory", "run"] if make else ["bash", "scripts/run.sh"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_as_a_shell_starts_it,
    )


SUMMARY = r"^== The A2A platform is up \(Ctrl-C stops it\) =+$"
RULE = "=" * 80
PROCESSES = ("web", "grpc", "agents", "push", "maintenance", "beat")
TAGGED = re.compile(rf"^({'|'.join(PROCESSES)}) +\| ")


def _started(run: subprocess.Popen[bytes], port: int, log: Path) -> str:
    """Once run.sh has printed its summary (it waits for every process to answer, up to
    A2A_START_SECONDS): the demo API key in it."""
    _printed(log, f"({SUMMARY})", run, timeout=150)
    _wait_for_port(port, run, log)  # type: ignore[arg-type]
    return _printed(log, r"^API key \(demo\): (\S+)$", run)


def _grpc_health(address: str) -> int:
    with grpc.insecure_channel(address) as channel:
        request = health_pb2.HealthCheckRequest(service="")
        return health_pb2_grpc.HealthStub(channel).Check(request, timeout=10).status


def _kill_session(sid: int) -> None:
    for member in _session_members(sid):
        try:
            os.kill(int(member.split()[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _shell(
    argv: list[str], env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """A command typed in the project directory of a shell with `env`; what it printed."""
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _exit_status(run: subprocess.Popen[bytes], seconds: float) -> int:
    """How run.sh ended by itself within `seconds`; its session is killed if it did not."""
    try:
        return run.wait(timeout=seconds)
    finally:
        if run.poll() is None:
            _kill_session(run.pid)
            run.wait()


def _gone(sid: int, seconds: float) -> list[str]:
    """The session's processes still alive after up to `seconds` (output still flowing through
    run.sh's line tagging may take a moment to end)."""
    deadline = time.monotonic() + seconds
    while (left := _session_members(sid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def _migrated_with_a_secret(var: Path) -> Path:
    """`var` made a var dir whose database is migrated and holds a secret (a tenant's signing
    key) stored under the var dir's own key, as the commands a user runs leave it."""
    env = {**_as_a_user_has_it(), "A2A_VAR_DIR": str(var)}
    store = (
        "from agents.models import Tenant; from agents.services import signing_key_active, "
        "tenant_create; signing_key_active(tenant=tenant_create(slug='acme'))"
    )
    for argv in (["migrate", "--noinput"], ["shell", "-c", store]):
        done = _shell([".venv/bin/python", "manage.py", *argv], env, timeout=120)
        assert done.returncode == 0, done.stderr
    return var


@pytest.fixture(scope="module")
def migrated(tmp_path_factory) -> Iterator[Future[Path]]:
    """A var dir made by _migrated_with_a_secret, on a thread; tests take copies of it."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        yield pool.submit(_migrated_with_a_secret, tmp_path_factory.mktemp("migrated") / "var")


@pytest.fixture(scope="module", autouse=True)
def _migrate_beside_the_first_start(request) -> None:
    """Its two commands, one process at a time, start with the module: beside the embedded
    instance's start, whose migrate and seed_demo also use one CPU at a time."""
    set_up_if_selected(request, "migrated")


def _copy_of(migrated: Future[Path], var: Path) -> Path:
    shutil.copytree(migrated.result(), var)
    return var


@pytest.fixture(scope="module")
def embedded(request, tmp_path_factory):
    var = tmp_path_factory.mktemp("embedded")
    port, grpc_port, log = _free_port(), _free_port(), var / "run.log"
    run = _run_sh(var, port, log, grpc_port, make=True)
    try:
        _printed(log, f"({SUMMARY})", run, timeout=150)
        # at once, with no retry: the summary comes after everything answers
        up_at = time.monotonic()
        ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).status_code
        answered = (ready, _grpc_health(f"127.0.0.1:{grpc_port}"))
        key = _started(run, port, log)
        grpc_address = _printed(log, r"^gRPC \(.*\): (\S+)$", run)
        base = f"http://127.0.0.1:{port}/a2a/demo/"
        # Up: from here this instance mostly waits on its tests' requests, and the Ctrl-C
        # test's `make run` can come up meanwhile.
        set_up_if_selected(request, "in_a_terminal")
        yield Embedded(run, base, key, grpc_address, log, up_at, answered)
    finally:
        # (Already ended by the last test that uses it, unless that one did not run.) make
        # passes SIGTERM on to run.sh.
        run.send_signal(signal.SIGTERM)
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        left = _gone(run.pid, 30)
        if left:
            _kill_session(run.pid)
            run.wait()
        assert not left, "run.sh left processes running after SIGTERM:\n" + "\n".join(left)


def test_the_summary_comes_last_once_every_process_answers(embedded):
    # the web tier was ready and the sidecar serving the moment the summary appeared
    assert embedded.answered == (200, health_pb2.HealthCheckResponse.SERVING)
    text = embedded.log.read_text()
    before, summary = re.split(SUMMARY, text, maxsplit=1, flags=re.M)
    # every process had said it was up before it
    for started in (
        r"^web +\| .*Listening on TCP address",
        r"^grpc +\| gRPC sidecar listening on ",
        r"^agents +\| .*agents@\S+ ready\.$",
        r"^push +\| .*push@\S+ ready\.$",
        r"^maintenance +\| .*maintenance@\S+ ready\.$",
    ):
        assert re.search(started, before, re.M), f"{started} not before the summary:\n{before}"
    # and the block is whole: the demo's key and logins, the addresses, then a rule
    block = summary.split(RULE + "\n", 1)[0].splitlines()[1:]
    assert [line.split(" (")[0].split(":")[0] for line in block] == [
        "agent card",
        "agent card",
        "agent card",  # demo/echo-proxy
        "demo/assistant",  # the one line that enables it
        "plans",  # and what limits the demo: nothing
        "API key",
        "console login",
        "console login",
        "gRPC",
        "console",
    ]
    assert not re.search(r"^(API key|console login)", before, re.M)


def test_concurrent_sends_all_complete_on_sqlite_and_the_filesystem_broker(embedded):
    base, key = embedded.base, embedded.key

    async def one(http: httpx.AsyncClient, n: int) -> str:
        body = {
            "jsonrpc": "2.0",
            "id": n,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"text": f"n{n}"}],
                }
            },
        }
        answer = (await http.post(base + "echo/", json=body)).json()
        return answer["result"]["task"]["status"]["state"]

    async def scenario():
        headers = {"X-API-Key": key, "A2A-Version": "1.0"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            return await asyncio.gather(*(one(http, n) for n in range(40)))

    states = asyncio.run(scenario())
    assert states == ["TASK_STATE_COMPLETED"] * 40
    assert "Traceback" not in embedded.log.read_text()


def test_the_demo_proxy_fronts_demo_echo_through_the_platforms_own_url(embedded):
    # given the a2a-sdk client on demo/echo-proxy, as a client of the printed key
    async def scenario(streaming: bool) -> list[Any]:
        async with sdk_client(
            embedded.base + "echo-proxy/", key=embedded.key, streaming=streaming
        ) as proxy:
            message = user_message("through the proxy", f"m-{uuid.uuid4()}")
            request = SendMessageRequest(message=message)
            return [r async for r in proxy.send_message(request)]

    # then the answer is echo's, in the proxy's own task, streamed or not
    for streaming in (False, True):
        responses = asyncio.run(scenario(streaming))
        last = responses[-1]
        task = last.task if last.HasField("task") else None
        state = task.status.state if task else last.status_update.status.state
        assert state == TaskState.TASK_STATE_COMPLETED, responses
        texts = [
            p.text
            for r in responses
            for p in (
                r.artifact_update.artifact.parts
                if r.HasField("artifact_update")
                else [p for a in r.task.artifacts for p in a.parts]
                if r.HasField("task")
                else []
            )
        ]
        assert "through the proxy" in texts, responses


def test_streaming_without_redis_polls_the_log(embedded):
    base = embedded.base
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {
            "message": {
                "messageId": f"tck-stream-001-{uuid.uuid4()}",
                "role": "ROLE_USER",
                "parts": [{"text": "x"}],
            }
        },
    }
    with httpx.stream(
        "POST", base + "conformance/", json=body, headers={"A2A-Version": "1.0"}, timeout=30
    ) as response:
        lines = list(response.iter_lines())
    data = [line for line in lines if line.startswith("data: ")]
    # Polling may find the task already done: then the opening snapshot is the whole story.
    assert '"TASK_STATE_COMPLETED"' in data[-1]
    assert any("Stream hello from TCK" in line for line in data)
    assert lines[0].startswith("id: ")


def test_the_grpc_sidecar_serves_on_the_address_run_sh_prints(embedded):
    with grpc.insecure_channel(embedded.grpc_address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "lf.a2a.v1.A2AService"):
            answer = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert answer.status == health_pb2.HealthCheckResponse.SERVING, service
    card = httpx.get(embedded.base + "echo/.well-known/agent-card.json", timeout=10).json()
    advertised = [
        (i["protocolVersion"], i["url"])
        for i in card["supportedInterfaces"]
        if i["protocolBinding"] == "GRPC"
    ]
    # v0.3 requests name no agent: their interfaces give the agent's own port of the sidecar
    # (make run's range starts just above its port), at 127.0.0.1: no name to resolve, no proxy
    first = int(embedded.grpc_address.rpartition(":")[2]) + 1
    own = advertised[1][1]
    assert first <= int(own.rpartition(":")[2]) < first + 100, own
    assert advertised == [
        ("1.0", embedded.grpc_address),
        ("0.3", own),
        ("0.3", f"grpc://{own}"),
    ]
    assert own.startswith("127.0.0.1:") and ".localhost" not in json.dumps(card)

    # which the SDK's v0.3 gRPC client follows to demo/echo, naming no agent (not to
    # demo/conformance, the default agent of calls that name none)
    async def follow() -> Any:
        async with sdk_client(
            embedded.base + "echo/", key=embedded.key, version=V0_3, binding=GRPC, name_agent=False
        ) as client:
            return (await send(client, user_message("to echo", str(uuid.uuid4())))).task

    task = asyncio.run(follow())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert "to echo" in str(task.artifacts)
    got = httpx.get(
        f"{embedded.base}echo/tasks/{task.id}", headers={"X-API-Key": embedded.key}, timeout=10
    )
    assert got.status_code == 200, got.text


def test_grpc_sends_share_the_embedded_database_and_broker(embedded):
    def send(stub, tenant: str, message_id: str, metadata=()) -> pb10.SendMessageResponse:
        message = pb10.Message(
            message_id=message_id, role=pb10.ROLE_USER, parts=[pb10.Part(text="over grpc")]
        )
        request = pb10.SendMessageRequest(tenant=tenant, message=message)
        return stub.SendMessage(request, metadata=metadata, timeout=60)

    with grpc.insecure_channel(embedded.grpc_address) as channel:
        stub = pb10_grpc.A2AServiceStub(channel)
        echoed = send(stub, "demo/echo", str(uuid.uuid4()), [("x-api-key", embedded.key)])
        # No tenant: run.sh makes demo/conformance the default agent.
        default = send(stub, "", f"tck-complete-task-{uuid.uuid4()}")
    assert echoed.task.status.state == pb10.TASK_STATE_COMPLETED
    assert "over grpc" in str(echoed.task.artifacts)
    assert default.task.status.state == pb10.TASK_STATE_COMPLETED
    jsonrpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": default.task.id}}
    fetched = httpx.post(
        embedded.base + "conformance/", json=jsonrpc, headers={"A2A-Version": "1.0"}, timeout=10
    ).json()
    assert fetched["result"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_the_printed_console_login_works_and_metrics_are_open(embedded):
    """make run's console: the operator login it printed, the page with its stylesheet, and
    /metrics (opened on this development profile) counting the demo tasks."""
    password = _printed(embedded.log, r"^console login \(operator\): operator / (\S+)$", None)
    root = embedded.base.split("/a2a/")[0]
    with httpx.Client(base_url=root, timeout=10) as http:
        front = http.get("/")
        assert front.status_code == 302 and front.headers["location"] == "/console/"
        http.get("/console/login/")
        login = http.post(
            "/console/login/",
            data={"username": "operator", "password": password},
            headers={"X-CSRFToken": http.cookies["csrftoken"]},
        )
        assert login.status_code == 302
        page = http.get("/console/")
        assert page.status_code == 200 and "/console/t/demo/a/echo/" in page.text
        css = re.search(r'href="([^"]+console\.css)"', page.text)[1]
        assert http.get(css).status_code == 200
        metrics = http.get("/metrics")
    assert metrics.status_code == 200
    assert re.search(r'^a2a_tasks\{[^}]*agent="echo"[^}]*\} ', metrics.text, re.M)


def _readme_registration() -> list[str]:
    """The shell commands of the README's "Registering an agent", as printed (a line that ends
    with a backslash continues on the next)."""
    section = (ROOT / "README.md").read_text().split("## Registering an agent", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    commands, line = [], ""
    for raw in block.splitlines():
        line += raw
        if line.endswith("\\"):
            line = line[:-1]
            continue
        commands.append(line)
        line = ""
    return commands


def test_the_readme_registration_works_as_printed(embedded):
    # given the README's commands, run from the project directory in another shell, with the
    # var dir `make run` used and nothing else set (no key, no URL)
    commands = _readme_registration()
    assert len(commands) == 4 and all(c.startswith(".venv/bin/python manage.py") for c in commands)
    env = _as_a_user_has_it()
    env["A2A_VAR_DIR"] = str(embedded.log.parent)
    printed = []
    for command in commands:
        done = _shell(["bash", "-c", command], env)
        assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}"
        printed.append(done.stdout)
    # then the printed card URL is the running platform's, and the printed key calls the agent
    card_url = re.search(r"^card: (\S+)$", printed[1], re.M).group(1)
    assert card_url.startswith(embedded.base.removesuffix("demo/"))
    card = httpx.get(card_url, timeout=10)
    assert card.status_code == 200 and card.json()["name"]
    key = re.search(r"^api key: (\S+)$", printed[2], re.M).group(1)
    body = raw_send("hi")
    answer = httpx.post(
        card_url.removesuffix(".well-known/agent-card.json"),
        json=body,
        headers={"X-API-Key": key, "A2A-Version": "1.0"},
        timeout=30,
    ).json()
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "hi" in json.dumps(task["artifacts"])


RUN_ENV = (
    "A2A_PUBLIC_BASE_URL",
    "A2A_GRPC_LISTEN",
    "A2A_GRPC_PUBLIC_ADDRESS",
    "A2A_GRPC_AGENT_PORTS",
    "A2A_DEFAULT_AGENT",
    "A2A_AGENT_HOST_PATTERN",
    "A2A_PUSH_ALLOWED_NETWORKS",
    "A2A_AGENT_ALLOWED_NETWORKS",
    "A2A_IDENTITY_ALLOWED_NETWORKS",
    "A2A_METRICS_OPEN",
    "A2A_WORKER_GRACE_SECONDS",
    "A2A_ACCESS_LOG",
    "DJANGO_SECRET_KEY_FILE",
)
# The settings a command sees: those run.env records, and (a digest of) the key in use.
SHOW_SETTINGS = (
    "import hashlib, json; from django.conf import settings; print(json.dumps({name: "
    f"getattr(settings, name) for name in {list(RUN_ENV[:-1])!r}}} | {{'SECRET_KEY': "
    "hashlib.sha256(settings.SECRET_KEY.encode()).hexdigest()}))"
)


def test_commands_in_another_shell_use_the_settings_make_run_derived(embedded):
    # given make run up, and another shell in the project directory with its var dir and
    # nothing else set
    var = embedded.log.parent
    env = {**_as_a_user_has_it(), "A2A_VAR_DIR": str(var)}
    recorded = dict(line.split("=", 1) for line in (var / "run.env").read_text().splitlines())
    assert sorted(recorded) == sorted(RUN_ENV)
    # when a command there reads the settings
    shown = _shell([".venv/bin/python", "manage.py", "shell", "-c", SHOW_SETTINGS], env)
    assert shown.returncode == 0, shown.stderr
    settings = json.loads(shown.stdout.strip().splitlines()[-1])
    # then they are the running platform's: its URLs and addresses, the default agent, the host
    # pattern, loopback allowed for agents and pushes, /metrics open, its key
    port = embedded.base.split(":")[2].split("/")[0]
    loopback = ["127.0.0.0/8", "::1/128"]
    grpc_port = int(embedded.grpc_address.rpartition(":")[2])
    agent_ports = f"{grpc_port + 1}-{grpc_port + 100}"
    assert settings == {
        "A2A_PUBLIC_BASE_URL": f"http://127.0.0.1:{port}",
        "A2A_GRPC_LISTEN": embedded.grpc_address,
        "A2A_GRPC_PUBLIC_ADDRESS": embedded.grpc_address,
        "A2A_GRPC_AGENT_PORTS": [int(port) for port in agent_ports.split("-")],
        "A2A_DEFAULT_AGENT": "demo/conformance",
        "A2A_AGENT_HOST_PATTERN": "{agent}--{tenant}.localhost",
        "A2A_PUSH_ALLOWED_NETWORKS": loopback,
        "A2A_AGENT_ALLOWED_NETWORKS": loopback,
        "A2A_IDENTITY_ALLOWED_NETWORKS": loopback,
        "A2A_METRICS_OPEN": True,
        "A2A_WORKER_GRACE_SECONDS": 5.0,
        "A2A_ACCESS_LOG": False,
        "SECRET_KEY": hashlib.sha256((var / "secret_key").read_text().strip().encode()).hexdigest(),
    }
    # and an a2a-proxy agent in front of a loopback upstream (demo/echo) is registered there,
    # as make run's own processes allow it, and answers
    card_url = embedded.base + "echo/.well-known/agent-card.json"
    create = [".venv/bin/python", "manage.py", "create_agent", "demo", "echo-front"]
    create += ["--kind", "a2a-proxy", "--config", json.dumps({"card_url": card_url})]
    made = _shell([*create, "--secret", f"api_key={embedded.key}"], env)
    assert made.returncode == 0, made.stdout + made.stderr
    body = raw_send("hi")
    headers = {"X-API-Key": embedded.key, "A2A-Version": "1.0"}
    answer = httpx.post(embedded.base + "echo-front/", json=body, headers=headers, timeout=60)
    assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer.text
    # and a variable set in that shell still wins over the recorded one
    create[4] = "echo-front-2"
    refused = _shell(create, {**env, "A2A_AGENT_ALLOWED_NETWORKS": ""})
    assert refused.returncode != 0
    assert "card_url: " in refused.stderr and "127.0.0.1 is a loopback address" in refused.stderr


def test_every_line_is_tagged_and_housekeeping_is_quiet_by_default(embedded):
    # given the platform up for 20 s at the default log level (beat sends the reaper every 5 s
    # and the push dispatcher every 15 s), and the other tests' requests meanwhile (this test
    # comes after them: their time counts toward the 20 s)
    time.sleep(max(0.0, 20 - (time.monotonic() - embedded.up_at)))
    # the maintenance worker did run them (Celery's own count, over remote control)
    env = {**_as_a_user_has_it(), "A2A_VAR_DIR": str(embedded.log.parent)}
    inspected = _shell(
        [".venv/bin/celery", "-A", "a2a_platform", "inspect", "stats", "--json"]
        + ["--destination", f"maintenance@{socket.gethostname()}"],
        env,
    )
    assert inspected.returncode == 0, inspected.stderr
    done = json.loads(inspected.stdout)[f"maintenance@{socket.gethostname()}"]["total"]
    assert done.get("tasks_app.tasks.reap_stuck_tasks_task", 0) >= 2, done
    # then every line a process wrote is led by its name, run.sh's summary apart
    text = embedded.log.read_text()
    before, summary = re.split(SUMMARY, text, maxsplit=1, flags=re.M)
    after = summary.split(RULE + "\n", 1)[1]
    untagged = [ln for ln in (before + after).splitlines() if ln and not TAGGED.match(ln)]
    assert not untagged, "\n".join(untagged)
    # and the housekeeping said nothing: no beat sends, no maintenance jobs, no "received"
    # lines, no access log, and no complaint of the filesystem broker about its host
    for noise in (
        "Sending due task",
        "reap_stuck_tasks_task",
        "push_dispatch_due_task",
        "] received",
        '"GET ',
        "No hostname was supplied",
    ):
        assert noise not in text, noise
    assert not re.search(r"^beat +\| ", after, re.M)
    # one line at most per job: each agent run's outcome, once
    runs = re.findall(r"run_agent_task\[([0-9a-f-]+)\]", after)
    assert len(runs) == len(set(runs))


def _children(pid: int) -> list[tuple[int, str]]:
    """The live child processes of `pid`: (pid, command line)."""
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
                children.append((int(stat.parent.name), cmdline.decode(errors="replace")))
        except (OSError, ValueError, IndexError):
            continue  # exited while we looked
    return children


def test_an_interrupt_to_run_sh_ends_make_run_with_exit_0(embedded):
    """Last of the tests on the embedded instance: it stops it. make run without a terminal
    (from a script, an IDE): an interrupt sent to run.sh itself (`kill -INT`) stops everything,
    and make exits 0. (At a terminal, Ctrl-C reaches run.sh alone: the test after this one.)"""
    run = embedded.run
    # given make run's recipe, which is run.sh itself (nothing between make and it)
    [(script, command)] = _children(run.pid)
    assert command.endswith("./scripts/run.sh "), command
    # when it gets SIGINT
    os.kill(script, signal.SIGINT)
    # then make run ends with 0, leaving nothing running, and quietly
    code = _exit_status(run, 60)
    log = embedded.log.read_text()
    assert code == 0, log[-3000:]
    assert not _gone(run.pid, 5)
    stopping = log.split(RULE + "\n", 1)[1]
    for scary in ("Traceback", "ERROR", "CRITICAL", "exited with signal", "exited (status"):
        assert scary not in stopping, stopping
    assert "make: ***" not in stopping, stopping


@pytest.mark.parametrize("taken", ["PORT", "GRPC_PORT"])
def test_a_taken_port_is_said_before_anything_starts(tmp_path, taken):
    # given another program listening on the port make run would use
    var, log = tmp_path / "var", tmp_path / "run.log"
    with socket.create_server(("127.0.0.1", 0)) as other:
        busy = other.getsockname()[1]
        ports = {"PORT": _free_port(), "GRPC_PORT": _free_port(), taken: busy}
        # when make run starts
        run = _run_sh(var, ports["PORT"], log, ports["GRPC_PORT"])
        code = _exit_status(run, 60)
    # then it stops at once with one line naming the port and how to choose another
    printed = log.read_text().splitlines()
    assert code != 0
    assert printed == [
        f"make run: port {busy} on 127.0.0.1 is already in use: stop what listens there, or "
        f"choose another port: {taken}={busy + 1} make run"
    ]
    # before anything started: no database, no key, no processes
    assert not (var / "db.sqlite3").exists() and not (var / "secret_key").exists()
    assert not _gone(run.pid, 5)


def test_a_key_that_does_not_read_the_stored_secrets_stops_make_run_before_the_logins(
    migrated, tmp_path
):
    # given a var dir whose database holds a secret stored under its key, and then another key
    var, log = _copy_of(migrated, tmp_path / "var"), tmp_path / "run.log"
    (var / "secret_key").write_text("not-the-key-that-stored-them\n")
    # when make run starts
    run = _run_sh(var, _free_port(), log)
    code = _exit_status(run, 120)
    # then it stops with one line that says what to do, and prints no key or login
    printed = log.read_text().splitlines()
    assert code != 0
    assert len(printed) == 1, printed
    assert printed[0].startswith("ImproperlyConfigured: The encryption key derived from ")
    assert "the var dir's secret_key file" in printed[0]
    assert not _gone(run.pid, 5)


def test_log_level_debug_shows_what_the_default_leaves_out(migrated, tmp_path):
    """LOG_LEVEL governs beat and the workers too: at DEBUG, beat's sends and the maintenance
    jobs' outcomes are logged (the default level's quiet is the level's, not a silent beat)."""
    var = _copy_of(migrated, tmp_path / "var")  # a migrated database, its key beside it
    env = {**_as_a_user_has_it(), "A2A_VAR_DIR": str(var), "LOG_LEVEL": "DEBUG"}
    logs = {name: tmp_path / f"{name}.log" for name in ("beat", "maintenance")}
    started = [
        subprocess.Popen(
            argv,
            cwd=ROOT,
            env=env,
            stdout=logs[name].open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        for name, argv in (
            (
                "maintenance",
                [".venv/bin/python", "manage.py", "celeryworker", "maintenance"]
                + ["-n", "maintenance@%h"],
            ),
            (
                "beat",
                [".venv/bin/celery", "-A", "a2a_platform", "beat"]
                + ["--schedule", str(var / "celerybeat-schedule")],
            ),
        )
    ]
    try:
        _printed(logs["beat"], r"(Scheduler: Sending due task reap-stuck-tasks)", None, 90)
        _printed(logs["maintenance"], r"(reap_stuck_tasks_task\[\S+\] received)", None, 90)
        _printed(logs["maintenance"], r"(reap_stuck_tasks_task\[\S+\] succeeded)", None, 90)
    finally:
        for proc in started:
            proc.terminate()
        for proc in started:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _make_run_in_a_terminal(
    var: Path, port: int, log: Path, **env: str
) -> tuple[subprocess.Popen[bytes], int]:
    """`make run > run.log 2>&1` as typed in a terminal: a pseudo-terminal of its own is its
    controlling terminal (so Ctrl-C typed there is the terminal's SIGINT to its foreground
    process group) and its input; what it prints goes to `log` (before, make run kept a Ctrl-C
    from make only when its output went to the terminal). The process and the terminal's master
    end, to type into."""
    master, slave = pty.openpty()

    def take_the_terminal() -> None:  # in the child, after setsid (start_new_session)
        _as_a_shell_starts_it()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = {**_as_a_user_has_it(), "A2A_VAR_DIR": str(var), **env}
    env.update(PORT=str(port), GRPC_PORT=str(_free_port()))
    var.mkdir(parents=True, exist_ok=True)
    run = subprocess.Popen(
        ["make", "--no-print-directory", "run"],
        cwd=ROOT,
        env=env,
        stdin=slave,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=take_the_terminal,
    )
    os.close(slave)

    def drain() -> None:  # what the terminal shows (its echo of ^C), kept beside the log
        with log.with_name("terminal.log").open("wb") as shown:
            while True:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the terminal closed: everything on it has exited
                    return
                if not data:
                    return
                shown.write(data)

    threading.Thread(target=drain, daemon=True).start()
    return run, master


@dataclass
class InATerminal:
    run: subprocess.Popen[bytes]  # make
    terminal: int  # the terminal's master end, to type into
    log: Path
    slow: str  # the URL of an agent that takes a minute
    key: str  # the demo's, as printed


def _up_with_a_slow_agent(
    run: subprocess.Popen[bytes], terminal: int, var: Path, port: int, log: Path
) -> InATerminal:
    """Once `make run` is up: the printed key, and an agent that takes a minute, registered
    as a user registers one."""
    key = _started(run, port, log)
    made = _shell(
        [".venv/bin/python", "manage.py", "create_agent", "demo", "slow", "--kind", "echo"]
        + ["--config", '{"delay_seconds": 60}', "--description", "Slow"],
        {**_as_a_user_has_it(), "A2A_VAR_DIR": str(var)},
    )
    assert made.returncode == 0, made.stderr
    return InATerminal(run, terminal, log, f"http://127.0.0.1:{port}/a2a/demo/slow/", key)


def _end(run: subprocess.Popen[bytes]) -> None:
    if run.poll() is None:
        _kill_session(run.pid)
        run.wait()


@pytest.fixture(scope="module")
def in_a_terminal(tmp_path_factory) -> Iterator[Future[InATerminal]]:
    """`make run` typed in a terminal, with a var dir of its own, coming up on a thread with an
    agent that takes a minute. Set up once the embedded instance is up (see `embedded`), it
    comes up while that instance's tests and the ones above with var dirs of their own run,
    which leave it most of the CPU; its test comes last."""
    root = tmp_path_factory.mktemp("terminal")
    var, port, log = root / "var", _free_port(), root / "run.log"
    # It shares the machine with those tests, so its start may take longer than on a user's:
    # it waits for its processes as long as the test waits for it (how long is not what the
    # test is about).
    run, terminal = _make_run_in_a_terminal(var, port, log, A2A_START_SECONDS="150")
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        yield pool.submit(_up_with_a_slow_agent, run, terminal, var, port, log)
    finally:
        _end(run)  # first: a start still under way then ends at once
        pool.shutdown()
        os.close(terminal)


def test_ctrl_c_stops_make_run_with_exit_0_within_15_s_while_a_run_is_in_progress(in_a_terminal):
    # given make run up in a terminal, and an agent that takes a minute
    up = in_a_terminal.result()
    run, log = up.run, up.log
    try:
        # with a run of it in progress
        headers = {"X-API-Key": up.key, "A2A-Version": "1.0"}
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "x"}]}
        send = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": message, "configuration": {"returnImmediately": True}},
        }
        sent = httpx.post(up.slow, json=send, headers=headers, timeout=30).json()
        task_id = sent["result"]["task"]["id"]
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
        deadline = time.monotonic() + 60
        state = ""
        while state != "TASK_STATE_WORKING" and time.monotonic() < deadline:
            time.sleep(0.2)
            state = httpx.post(up.slow, json=get, headers=headers, timeout=10).json()["result"]
            state = state["status"]["state"]
        assert state == "TASK_STATE_WORKING"
        # (run.sh's job holds the terminal, not make's)
        assert os.tcgetpgrp(up.terminal) not in (-1, os.getpgid(run.pid))
        # when the user presses Ctrl-C at the terminal `make run` was typed in: SIGINT to the
        # terminal's foreground process group
        pressed = time.monotonic()
        os.write(up.terminal, b"\x03")
        code = run.wait(timeout=60)
        took = time.monotonic() - pressed
        # then make run ends cleanly and soon (make too: no "Interrupt"), leaving nothing running
        assert code == 0, log.read_text()[-3000:]
        assert took < 15, f"stopping took {took:.1f} s"
        assert not _gone(run.pid, 5)
        # and quietly: no traceback, no error, no process killed by a signal
        stopping = log.read_text().split(RULE + "\n", 1)[1]
        for scary in ("Traceback", "ERROR", "CRITICAL", "exited with signal", "exited (status"):
            assert scary not in stopping, stopping
        assert "make: ***" not in stopping, stopping
    finally:
        _end(run)
