"""The platform on many processes behind a load balancer: two daphne, two agents workers, two
gRPC sidecars, a maintenance worker and beat, behind HAProxy (deploy/haproxy.cfg), every
request free to land on any process (round robin, no stickiness), on PostgreSQL and Redis of
their own (faults/cluster.py).

Which process answered is what the front says: `X-Served-By` on each HTTP response, and its
per-server request counts. The official a2a-sdk client speaks to the front; a stream resumed
with `Last-Event-ID`, which the SDK does not send, is read as raw SSE.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    GetTaskRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)

from faults.cluster import FAULT_EXECUTORS, Cluster, wait_until
from faults.observe import TERMINAL, rpc, send_params, sse_frames, state_of

from .clients import GRPC, JSONRPC, V1_0, sdk_client, send, user_message
from .conftest import SharedCluster
from .helpers import mid

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

AGENTS = {
    # Eight artifacts 0.4 s apart: a stream that is still going when its process is killed.
    "steps": {
        "kind": "python",
        "config": {"class_path": FAULT_EXECUTORS, "init_kwargs": {"steps": 8, "seconds": 0.4}},
    },
    # Asks for input on its first turn, echoes on the second: a task that takes two sends.
    "turns": {"kind": "echo", "config": {"input_required": True, "delay_seconds": 0.3}},
    "echo": {"kind": "echo"},
}


@pytest.fixture(scope="module")
def cluster(shared_cluster: SharedCluster) -> Iterator[tuple[Cluster, dict[str, Any]]]:
    """The suite's one cluster (the fault test's before it), stopped after this module."""
    running = shared_cluster.get()
    try:
        yield running, running.seed(AGENTS, tenant="topology")
    finally:
        shared_cluster.close()


class ServedBy:
    """The server the front named for each response (`X-Served-By`), in order."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []  # (request method and path, server)

    async def __call__(self, response: httpx.Response) -> None:
        request = response.request
        self.seen.append(
            (f"{request.method} {request.url.path}", response.headers.get("x-served-by", "?"))
        )

    @property
    def last(self) -> str:
        return self.seen[-1][1]


@asynccontextmanager
async def sdk_jsonrpc(url: str, key: str, served: ServedBy) -> AsyncIterator[tuple[Client, Client]]:
    """The SDK's own clients for the agent's v1.0 JSON-RPC interface, one that sends without
    streaming and one that streams (the SDK subscribes only with the latter), on one httpx
    client that notes which server answered each request."""
    async with httpx.AsyncClient(
        headers={"X-API-Key": key}, timeout=60, event_hooks={"response": [served]}
    ) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        only = AgentCard()
        only.CopyFrom(card)
        del only.supported_interfaces[:]
        only.supported_interfaces.extend(
            i
            for i in card.supported_interfaces
            if i.protocol_binding == JSONRPC and i.protocol_version == V1_0
        )
        client, streamer = (
            ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(only)
            for streaming in (False, True)
        )
        try:
            yield client, streamer
        finally:
            await client.close()
            await streamer.close()


def test_a_stream_on_one_web_process_follows_a_task_whose_turns_go_through_the_other(cluster):
    running, made = cluster
    served = ServedBy()

    async def scenario() -> tuple[list[StreamResponse], str, str]:
        async with sdk_jsonrpc(made["agents"]["turns"], made["key"], served) as (client, streamer):
            first = await send(client, user_message("first", mid()))
            task = first.task
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, task
            items: list[StreamResponse] = []
            opened = asyncio.Event()

            async def follow() -> None:
                async for item in streamer.subscribe(SubscribeToTaskRequest(id=task.id)):
                    items.append(item)
                    opened.set()

            following = asyncio.create_task(follow())
            await asyncio.wait_for(opened.wait(), 60)
            stream_server = next(s for r, s in reversed(served.seen) if r.startswith("POST"))
            # Round robin: the request after one the stream's server answered goes to the other.
            while served.last != stream_server:
                await client.get_task(GetTaskRequest(id=task.id))
            second = user_message("second", mid(), task_id=task.id, context_id=task.context_id)
            answered = await send(client, second)
            send_server = served.last
            assert answered.task.status.state == TaskState.TASK_STATE_COMPLETED, answered
            await asyncio.wait_for(following, 60)
            return items, stream_server, send_server

    items, stream_server, send_server = asyncio.run(scenario())
    assert {stream_server, send_server} == {"web1", "web2"}, served.seen
    # The stream, on the other process, saw the turn the send started: the worker's events
    # reached it through PostgreSQL and the doorbell.
    assert items[0].task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, items[0]
    states = [i.status_update.status.state for i in items[1:] if i.HasField("status_update")]
    assert TaskState.TASK_STATE_WORKING in states, items
    assert states[-1] == TaskState.TASK_STATE_COMPLETED, items
    echoed = [i.artifact_update.artifact for i in items if i.HasField("artifact_update")]
    assert [a.parts[0].text for a in echoed] == ["first\nsecond"], echoed


def test_grpc_calls_through_the_front_land_on_both_sidecars(cluster):
    running, made = cluster
    before = running.served()

    async def scenario() -> list[str]:
        async with sdk_client(
            made["agents"]["echo"], key=made["key"], version=V1_0, binding=GRPC
        ) as client:
            ids = []
            for n in range(4):
                response = await send(client, user_message(f"grpc {n}", mid()))
                assert response.task.status.state == TaskState.TASK_STATE_COMPLETED, response
                got = await client.get_task(GetTaskRequest(id=response.task.id))
                assert got.artifacts[0].parts[0].text == f"grpc {n}", got
                ids.append(got.id)
            return ids

    assert len(set(asyncio.run(scenario()))) == 4
    after = running.served()
    calls = {name: after[name] - before.get(name, 0) for name in ("grpc1", "grpc2")}
    # Eight calls (a send and a get, four times), each balanced on its own.
    assert sum(calls.values()) == 8 and all(n >= 2 for n in calls.values()), calls


def test_a_stream_cut_by_a_killed_web_process_resumes_on_the_other_with_nothing_lost(cluster):
    """SIGKILL to the daphne serving a stream: the client resumes through the front, which
    sends it to the other process, with the last event's id; every event arrives once, in
    order, to the end. Run last: it leaves one web process down."""
    running, made = cluster
    url, key = made["agents"]["steps"], made["key"]
    body = rpc("SendStreamingMessage", send_params("go", mid()))
    headers = {"X-API-Key": key, "A2A-Version": "1.0"}

    async def scenario() -> tuple[list[int], list[str], str]:
        seqs: list[int] = []
        servers: list[str] = []
        last_id, state = "", ""
        async with httpx.AsyncClient(timeout=60) as http:
            try:
                async with http.stream("POST", url, json=body, headers=headers) as response:
                    assert response.status_code == 200
                    servers.append(response.headers["x-served-by"])
                    async for frame in sse_frames(response):
                        last_id = frame.event_id or last_id
                        seqs.append(int(last_id.rpartition(":")[2]))
                        if len(seqs) == 3:  # working, and a step or two: the run is under way
                            await asyncio.to_thread(running.kill, servers[0])
            except httpx.HTTPError:
                pass  # the connection died with its process
            assert len(seqs) >= 3 and seqs[-1] < 10, seqs  # cut before the end
            resume = {**headers, "Last-Event-ID": last_id}
            async with http.stream("POST", url, json=body, headers=resume) as response:
                assert response.status_code == 200, await response.aread()
                servers.append(response.headers["x-served-by"])
                async for frame in sse_frames(response):
                    seqs.append(int(frame.event_id.rpartition(":")[2]))
                    state = state_of(frame.data["result"])
        return seqs, servers, state

    seqs, servers, state = asyncio.run(scenario())
    assert state == "TASK_STATE_COMPLETED" and state in TERMINAL
    assert servers[0] != servers[1] and set(servers) == {"web1", "web2"}, servers
    # The send's event, working, eight steps, completed: each once, in order.
    assert seqs == list(range(1, 12)), seqs


def _run_spans(database_url: str, task_ids: list[str]) -> list[tuple[float, float]]:
    """Each run's span, from its task's event log in the cluster's PostgreSQL: from its first
    `working` status to its last event."""
    import psycopg

    with psycopg.connect(database_url) as db:
        rows = db.execute(
            "SELECT task_id::text, min(created_at) FILTER (WHERE state = 'TASK_STATE_WORKING'), "
            "max(created_at) FROM tasks_app_taskevent WHERE task_id = ANY(%s::uuid[]) "
            "GROUP BY task_id",
            [task_ids],
        ).fetchall()
    assert len(rows) == len(task_ids) and all(start for _, start, _ in rows), rows
    return [(start.timestamp(), end.timestamp()) for _, start, end in rows]


def test_a_running_cap_holds_on_two_web_processes_and_two_workers_and_survives_restarts(
    cluster,
):
    """Sends through both web processes while no worker runs: two runs go to the broker,
    the rest wait in the tenant's lane in PostgreSQL. Then every process of the platform and
    the broker start again, and the two workers run all of them, never more than two at once."""
    running, _ = cluster
    steps = {"class_path": FAULT_EXECUTORS, "init_kwargs": {"steps": 2, "seconds": 0.3}}
    made = running.seed(
        {"capped": {"kind": "python", "config": steps}},
        tenant="lanes",
        limits={"running_runs": 2},
    )
    url = made["agents"]["capped"]
    headers = {"X-API-Key": made["key"], "A2A-Version": "1.0"}
    for name in ("agents1", "agents2"):
        running.terminate(name)
    task_ids = []
    with httpx.Client(timeout=60, headers=headers) as http:
        for n in range(6):
            params = send_params(f"run {n}", mid())
            params["configuration"] = {"returnImmediately": True}
            answer = http.post(url, json=rpc("SendMessage", params)).json()
            task_ids.append(answer["result"]["task"]["id"])
        running.services.stop_redis()
        running.services.start_redis()
        for name in [m for m in running.members if m != "front"]:
            running.restart(name)

        def ended() -> bool:
            answers = [http.post(url, json=rpc("GetTask", {"id": t})).json() for t in task_ids]
            return all(state_of(a.get("result", {})) in TERMINAL for a in answers)

        wait_until(ended, timeout=180, what="the six runs to end")
        answers = [http.post(url, json=rpc("GetTask", {"id": t})).json() for t in task_ids]
        assert {state_of(a["result"]) for a in answers} == {"TASK_STATE_COMPLETED"}, answers
    spans = _run_spans(running.env["DATABASE_URL"], task_ids)
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    assert peak == 2, f"{peak} runs of a tenant capped at 2 ran at once"
