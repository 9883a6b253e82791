"""SIGTERM drains a web process (manage.py runweb) and the gRPC sidecar (manage.py rungrpc):
readiness turns 503, no new connection is taken, every blocking sender gets its task (as it is),
streams end cleanly with a hint to resume (SSE `retry:`, gRPC UNAVAILABLE) and resume on
another process with nothing lost or repeated, the process exits, and the tasks complete on
the workers. Real daphne, sidecar, Celery worker, PostgreSQL and Redis processes; the official
SDK clients send."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import SubscribeToTaskRequest, TaskState
from a2a.types import a2a_pb2_grpc as pb10_grpc

from tasks_app.models import Task, TaskEvent

from ..conftest import ROOT, _free_port, _wait_for_port, start_grpc, stop_process
from .clients import GRPC, HTTP_JSON, JSONRPC, V0_3, V1_0, sdk_client, send, user_message
from .helpers import mid, poll, rpc_body, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# The drain of the processes started here: short, so that the tests wait little.
DRAIN_SECONDS = 3
# Upper bounds for liveness only (a busy machine is slow): never a measure of speed.
TIMEOUT = 90
IN_FLIGHT = {TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING}


@dataclass
class Web:
    proc: subprocess.Popen[bytes]
    url: str
    port: int
    log: Path

    def agent_url(self, agent: Any) -> str:
        return f"{self.url}/a2a/{agent.tenant.slug}/{agent.slug}/"


@pytest.fixture
def own_web(live_platform, tmp_path) -> Iterator[Callable[..., Web]]:
    """A web tier of its own (manage.py runweb, one daphne), on the live platform's database,
    broker and channel layer, whose cards name its own URL; stopped after the test."""
    started: list[Web] = []

    def start(**env: str) -> Web:
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        log = tmp_path / f"web-{port}.log"
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "runweb", "--port", str(port), "--processes", "1"],
            cwd=ROOT,
            env={
                **live_platform.env,
                "A2A_PUBLIC_BASE_URL": url,
                "A2A_DRAIN_SECONDS": str(DRAIN_SECONDS),
                **env,
            },
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        web = Web(proc, url, port, log)
        started.append(web)
        _wait_for_port(port, proc, log)  # runweb's socket; then daphne answers on it
        ready = poll(lambda: _status(f"{url}/readyz") == 200, timeout=TIMEOUT)
        assert ready, log.read_text()[-4000:]
        return web

    yield start
    for web in started:
        stop_process(web.proc)


def _status(url: str) -> int:
    try:
        return httpx.get(url, timeout=10).status_code
    except httpx.HTTPError:
        return 0


def refused(port: int) -> bool:
    """Whether a new connection to `port` is refused."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def tasks_of(agent: Any) -> list[Task]:
    return list(Task.objects.filter(agent=agent))


@pytest.fixture
def slow(make_tenant, make_agent, make_key) -> tuple[Any, str]:
    """An echo agent that works for 10 s: its runs are in flight while a process drains."""
    tenant = make_tenant()
    agent = make_agent(tenant, "slow", config={"delay_seconds": 10})
    return agent, make_key(tenant)


def test_a_sigterm_hands_every_blocking_sender_its_task(own_web, slow):
    agent, key = slow
    web = own_web()
    url = web.agent_url(agent)
    clients = [(V1_0, JSONRPC), (V0_3, JSONRPC), (V1_0, HTTP_JSON), (V0_3, HTTP_JSON)]

    async def v01_send(http: httpx.AsyncClient) -> dict[str, Any]:
        message = {"role": "user", "parts": [{"type": "text", "text": "v0.1"}]}
        body = rpc_body("tasks/send", {"id": str(uuid.uuid4()), "message": message})
        response = await http.post(url, json=body, headers={"A2A-Version": "0.1"})
        assert response.status_code == 200, response.text
        return response.json()["result"]

    async def scenario() -> tuple[Any, ...]:
        async with contextlib.AsyncExitStack() as stack:
            sdks = [
                await stack.enter_async_context(
                    sdk_client(url, key=key, version=version, binding=binding)
                )
                for version, binding in clients
            ]
            http = await stack.enter_async_context(
                httpx.AsyncClient(headers={"X-API-Key": key}, timeout=TIMEOUT)
            )
            # A connection kept alive from before the signal: readiness is asked on it.
            kept = await stack.enter_async_context(httpx.AsyncClient(timeout=TIMEOUT))
            assert (await kept.get(f"{web.url}/healthz")).status_code == 200

            sends = [
                asyncio.ensure_future(send(client, user_message(f"blocking {n}", mid())))
                for n, client in enumerate(sdks)
            ]
            sends.append(asyncio.ensure_future(v01_send(http)))
            # Every send has reached the process (its task exists) and waits on its task.
            await asyncio.to_thread(
                wait_until,
                lambda: len(tasks_of(agent)) == len(sends),
                timeout=TIMEOUT,
                what="every send to reach the web process",
            )
            web.proc.send_signal(signal.SIGTERM)
            # Asked on the connection kept from before, until the signal has reached daphne
            # (through runweb): ready before, draining after.
            async with asyncio.timeout(TIMEOUT):
                readiness = await kept.get(f"{web.url}/readyz")
                while readiness.status_code == 200:
                    await asyncio.sleep(0.05)
                    readiness = await kept.get(f"{web.url}/readyz")
            refused_after = await asyncio.to_thread(
                poll, lambda: refused(web.port), timeout=TIMEOUT
            )
            answers = await asyncio.wait_for(
                asyncio.gather(*sends, return_exceptions=True), TIMEOUT
            )
        return readiness, refused_after, answers

    readiness, refused_after, answers = asyncio.run(scenario())

    assert readiness.status_code == 503, readiness.text
    assert readiness.json()["status"] == "draining"
    assert readiness.headers["Connection"] == "close"
    assert refused_after, "the port still takes new connections while the process drains"
    errors = [a for a in answers if isinstance(a, BaseException)]
    assert not errors, errors
    *sdk_answers, v01 = answers
    for answer in sdk_answers:
        assert answer.HasField("task"), answer
        assert answer.task.status.state in IN_FLIGHT, answer.task.status
    assert v01["status"]["state"] in ("created", "working"), v01  # v0.1's names
    answered = {uuid.UUID(a.task.id) for a in sdk_answers} | {uuid.UUID(v01["id"])}
    assert answered == {t.pk for t in tasks_of(agent)}  # each sender got its own task
    assert web.proc.wait(timeout=TIMEOUT) == 0
    said = web.log.read_text()
    assert "web: draining" in said and "Traceback" not in said, said[-4000:]
    # The runs went on on the worker.
    wait_until(
        lambda: {t.state for t in tasks_of(agent)} == {"TASK_STATE_COMPLETED"},
        timeout=TIMEOUT,
        what="every task to complete on the worker",
    )


# --- SSE ----------------------------------------------------------------------------------------


@dataclass
class SseRead:
    """A stream as read: its events (`id:`, `data:`), and every line in order."""

    events: list[tuple[str | None, dict[str, Any]]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    @property
    def last_id(self) -> str:
        return next(i for i, _ in reversed(self.events) if i)

    def seqs(self) -> list[int]:
        return [int(i.rpartition(":")[2]) for i, _ in self.events if i]


async def read_sse(response: httpx.Response) -> SseRead:
    """The whole stream, to its end; a reset or an incomplete chunked body raises."""
    assert response.status_code == 200, (await response.aread()).decode()
    read, event_id, data = SseRead(), None, None
    async for line in response.aiter_lines():
        read.lines.append(line)
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
        elif line == "":
            if data is not None:
                read.events.append((event_id, data))
            event_id, data = None, None
    return read


@pytest.fixture
def stepping(make_tenant, make_agent, make_key) -> tuple[Any, str]:
    """The conformance agent: submitted, then working 4 s later, then an artifact and
    completed 4 s after that: events before, during and after a drain."""
    tenant = make_tenant()
    agent = make_agent(tenant, "stepping", kind="conformance", config={"step_seconds": 4})
    return agent, make_key(tenant)


def test_open_sse_streams_end_with_a_retry_hint_and_resume_elsewhere(
    live_platform, own_web, stepping
):
    agent, key = stepping
    web = own_web()
    here, elsewhere = web.agent_url(agent), live_platform.agent_url(agent)
    v10 = {"X-API-Key": key, "A2A-Version": "1.0"}
    v03 = {"X-API-Key": key}
    v03_message = {"messageId": mid(), "role": "user", "parts": [{"kind": "text", "text": "x"}]}
    streams = {  # name: (method, path under the agent, body, headers)
        "jsonrpc 1.0": (
            "",
            rpc_body("SendStreamingMessage", {"message": _message()}),
            v10,
        ),
        "jsonrpc 0.3": ("", rpc_body("message/stream", {"message": v03_message}), v03),
        "rest 1.0": ("message:stream", {"message": _message()}, v10),
    }

    async def scenario() -> dict[str, tuple[SseRead, SseRead]]:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            # A subscription too, to a task sent here without waiting.
            sent = await http.post(
                here,
                json=rpc_body(
                    "SendMessage",
                    {"message": _message(), "configuration": {"returnImmediately": True}},
                ),
                headers=v10,
            )
            task_id = sent.json()["result"]["task"]["id"]
            streams["subscribe 1.0"] = ("", rpc_body("SubscribeToTask", {"id": task_id}), v10)

            async def cut_then_resumed(path: str, body: Any, headers: Any) -> tuple[SseRead, ...]:
                async with http.stream("POST", here + path, json=body, headers=headers) as r:
                    first = await read_sse(r)
                # What an SSE client does: the same request again, with the last id it saw,
                # through the load balancer: here, another process.
                resume = {**headers, "Last-Event-ID": first.last_id}
                async with http.stream("POST", elsewhere + path, json=body, headers=resume) as r:
                    return first, await read_sse(r)

            reads = {
                name: asyncio.ensure_future(cut_then_resumed(*spec))
                for name, spec in streams.items()
            }
            await asyncio.sleep(1)  # every stream open, and waiting for its task's next event
            web.proc.send_signal(signal.SIGTERM)
            done = await asyncio.wait_for(asyncio.gather(*reads.values()), TIMEOUT)
        return dict(zip(reads, done, strict=True))

    results = asyncio.run(scenario())
    for name, (first, rest) in results.items():
        # The cut stream ended as a complete response (read_sse raises on a reset or a
        # chunked body cut short), its last bytes the hint to resume.
        tail = [line for line in first.lines if line][-2:]
        assert tail[0].startswith(": this server is stopping"), (name, first.lines[-5:])
        assert tail[1] == "retry: 1000", (name, first.lines[-5:])
        assert first.events, (name, first.lines)
        # Resumed elsewhere: the events after the last one seen, each once, to the end.
        task_id = first.last_id.rpartition(":")[0]
        logged = list(
            TaskEvent.objects.filter(task_id=task_id).order_by("seq").values_list("seq", flat=True)
        )
        seen = first.seqs() + rest.seqs()
        assert seen == sorted(set(seen)), (name, seen)
        assert seen == logged[logged.index(seen[0]) :], (name, seen, logged)
        final = json.dumps(rest.events[-1][1])
        assert "COMPLETED" in final.upper(), (name, final)
    assert web.proc.wait(timeout=TIMEOUT) == 0


def _message() -> dict[str, Any]:
    return {"messageId": mid(), "role": "ROLE_USER", "parts": [{"text": "x"}]}


# --- gRPC ---------------------------------------------------------------------------------------


def test_the_grpc_sidecar_answers_blocking_sends_and_ends_streams_on_sigterm(
    live_platform, tmp_path, slow, stepping
):
    agent, key = slow
    stepper, stepper_key = stepping
    address = f"127.0.0.1:{_free_port()}"
    sidecar = start_grpc(
        address, {**live_platform.env, "A2A_DRAIN_SECONDS": str(DRAIN_SECONDS)}, tmp_path / "g.log"
    )
    tenant = f"{stepper.tenant.slug}/{stepper.slug}"
    metadata = (("x-api-key", stepper_key),)

    async def subscribe(channel: grpc.aio.Channel, task_id: str) -> list[Any]:
        stub = pb10_grpc.A2AServiceStub(channel)
        call = stub.SubscribeToTask(
            SubscribeToTaskRequest(tenant=tenant, id=task_id), metadata=metadata, timeout=TIMEOUT
        )
        return [response async for response in call]

    async def scenario() -> tuple[Any, ...]:
        async with contextlib.AsyncExitStack() as stack:
            sdks = [
                await stack.enter_async_context(
                    sdk_client(
                        live_platform.agent_url(agent),
                        key=key,
                        version=version,
                        binding=GRPC,
                        grpc_via=address,
                    )
                )
                for version in (V1_0, V0_3)
            ]
            sends = [
                asyncio.ensure_future(send(client, user_message(f"grpc {n}", mid())))
                for n, client in enumerate(sdks)
            ]
            # A server stream: a subscription to a task of the stepping agent.
            async with httpx.AsyncClient(timeout=TIMEOUT) as http:
                sent = await http.post(
                    live_platform.agent_url(stepper),
                    json=rpc_body(
                        "SendMessage",
                        {"message": _message(), "configuration": {"returnImmediately": True}},
                    ),
                    headers={"X-API-Key": stepper_key, "A2A-Version": "1.0"},
                )
            task_id = sent.json()["result"]["task"]["id"]
            channel = await stack.enter_async_context(grpc.aio.insecure_channel(address))
            stream = asyncio.ensure_future(subscribe(channel, task_id))
            await asyncio.to_thread(
                wait_until,
                lambda: len(tasks_of(agent)) == len(sends),
                timeout=TIMEOUT,
                what="every send to reach the sidecar",
            )
            await asyncio.sleep(1)  # the subscription open too
            sidecar.send_signal(signal.SIGTERM)
            refused_after = await asyncio.to_thread(
                poll, lambda: refused(int(address.rpartition(":")[2])), timeout=TIMEOUT
            )
            answers = await asyncio.wait_for(
                asyncio.gather(*sends, return_exceptions=True), TIMEOUT
            )
            with pytest.raises(grpc.aio.AioRpcError) as cut:
                await asyncio.wait_for(stream, TIMEOUT)
            # Subscribed again on another sidecar: the task now, then to its end.
            async with grpc.aio.insecure_channel(live_platform.grpc_address) as other:
                resumed = await subscribe(other, task_id)
        return refused_after, answers, cut.value, resumed

    try:
        refused_after, answers, cut, resumed = asyncio.run(scenario())
        assert refused_after, "the sidecar's port still takes new connections while it drains"
        errors = [a for a in answers if isinstance(a, BaseException)]
        assert not errors, errors
        for answer in answers:
            assert answer.HasField("task") and answer.task.status.state in IN_FLIGHT, answer
        assert cut.code() == grpc.StatusCode.UNAVAILABLE, cut
        assert "draining" in cut.details() and "Resubscribe" in cut.details(), cut.details()
        assert resumed[0].HasField("task"), resumed[0]
        assert resumed[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
        assert sidecar.wait(timeout=TIMEOUT) == 0
        assert "Traceback" not in (tmp_path / "g.log").read_text()
        wait_until(
            lambda: {t.state for t in tasks_of(agent)} == {"TASK_STATE_COMPLETED"},
            timeout=TIMEOUT,
            what="every task to complete on the worker",
        )
    finally:
        stop_process(sidecar)
