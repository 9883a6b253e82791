"""The embedded profile as `make run` starts it (scripts/run.sh: SQLite in WAL mode, the
filesystem broker, no Redis; daphne, a worker, beat and the gRPC sidecar) under concurrent load:
every task completes, blocking, streaming and canceled alike; the sidecar answers on the address
run.sh prints, and SIGTERM stops every process."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2 as pb10
from a2a.types import a2a_pb2_grpc as pb10_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ..conftest import ROOT, _free_port, _wait_for_port

pytestmark = pytest.mark.e2e


@dataclass
class Embedded:
    base: str  # http://127.0.0.1:<port>/a2a/demo/
    key: str
    grpc_address: str  # as run.sh prints it
    log: Path


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


def _group_members(pgid: int) -> list[str]:
    """Live (not zombie) processes of a process group: '<pid> <command>'."""
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            fields = text.rpartition(")")[2].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
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
        if key not in _DERIVED and not key.startswith("A2A_GRPC_")
    }
    env["PYTHONPATH"] = str(ROOT)
    return env


def _run_sh(var: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """`make run`'s script on `port` with var dir `var`, as a user starts it: what it derives
    itself (the key, the public URL and gRPC addresses) is left to it. In its own process
    group, so that a test can tell whether a signal stopped everything."""
    env = _as_a_user_has_it()
    env.update(A2A_VAR_DIR=str(var), PORT=str(port), GRPC_PORT=str(_free_port()))
    var.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        ["bash", "scripts/run.sh"],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _started(run: subprocess.Popen[bytes], port: int, log: Path) -> str:
    """Once run.sh serves on every port: the demo API key it printed."""
    key = _printed(log, r"^API key \(demo\): (\S+)$", run)
    _printed(log, r"^gRPC sidecar (listening) on ", run)
    _wait_for_port(port, run, log)  # type: ignore[arg-type]
    return key


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    var = tmp_path_factory.mktemp("embedded")
    port, log = _free_port(), var / "run.log"
    run = _run_sh(var, port, log)
    try:
        key = _started(run, port, log)
        grpc_address = _printed(log, r"^gRPC \(.*\): (\S+)$", run)
        yield Embedded(f"http://127.0.0.1:{port}/a2a/demo/", key, grpc_address, log)
    finally:
        run.send_signal(signal.SIGTERM)  # what Ctrl-C or `kill` does to `make run`
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + 30
        while (left := _group_members(run.pid)) and time.monotonic() < deadline:
            time.sleep(0.2)
        if left:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        assert not left, "run.sh left processes running after SIGTERM:\n" + "\n".join(left)


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
    advertised = {i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC"}
    assert advertised == {embedded.grpc_address}


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
        done = subprocess.run(
            ["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}"
        printed.append(done.stdout)
    # then the printed card URL is the running platform's, and the printed key calls the agent
    card_url = re.search(r"^card: (\S+)$", printed[1], re.M).group(1)
    assert card_url.startswith(embedded.base.removesuffix("demo/"))
    card = httpx.get(card_url, timeout=10)
    assert card.status_code == 200 and card.json()["name"]
    key = re.search(r"^api key: (\S+)$", printed[2], re.M).group(1)
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": str(uuid.uuid4()),
                "role": "ROLE_USER",
                "parts": [{"text": "hi"}],
            }
        },
    }
    answer = httpx.post(
        card_url.removesuffix(".well-known/agent-card.json"),
        json=body,
        headers={"X-API-Key": key, "A2A-Version": "1.0"},
        timeout=30,
    ).json()
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "hi" in json.dumps(task["artifacts"])


def test_ctrl_c_stops_make_run_with_exit_0_within_15_s_while_a_run_is_in_progress(tmp_path):
    var, port, log = tmp_path / "var", _free_port(), tmp_path / "run.log"
    run = _run_sh(var, port, log)
    env = {**_as_a_user_has_it(), "A2A_VAR_DIR": str(var)}
    try:
        key = _started(run, port, log)
        # given an agent that takes a minute, with a run of it in progress
        made = subprocess.run(
            [".venv/bin/python", "manage.py", "create_agent", "demo", "slow", "--kind", "echo"]
            + ["--config", '{"delay_seconds": 60}', "--description", "Slow"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert made.returncode == 0, made.stderr
        url = f"http://127.0.0.1:{port}/a2a/demo/slow/"
        headers = {"X-API-Key": key, "A2A-Version": "1.0"}
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "x"}]}
        send = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": message, "configuration": {"returnImmediately": True}},
        }
        task_id = httpx.post(url, json=send, headers=headers, timeout=30).json()["result"]["task"][
            "id"
        ]
        get = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
        deadline = time.monotonic() + 60
        state = ""
        while state != "TASK_STATE_WORKING" and time.monotonic() < deadline:
            time.sleep(0.2)
            state = httpx.post(url, json=get, headers=headers, timeout=10).json()["result"]
            state = state["status"]["state"]
        assert state == "TASK_STATE_WORKING"
        # when the user presses Ctrl-C (the terminal signals the whole process group)
        pressed = time.monotonic()
        os.killpg(run.pid, signal.SIGINT)
        code = run.wait(timeout=60)
        took = time.monotonic() - pressed
        # then make run ends cleanly and soon, and leaves nothing running
        assert code == 0, log.read_text()[-3000:]
        assert took < 15, f"stopping took {took:.1f} s"
        assert not _group_members(run.pid)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
