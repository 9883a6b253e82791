"""Streaming end to end: the official SDK clients stream and subscribe; a dropped stream resumes
with Last-Event-ID with nothing lost or repeated; keep-alives; and the stream survives its
Redis doorbell going away. Real daphne, Celery worker, PostgreSQL and Redis processes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from dataclasses import dataclass, field

import httpx
import pytest
from a2a.types import SendMessageRequest, SubscribeToTaskRequest, TaskState

from ..conftest import _free_port, start_web, stop_process
from .clients import V0_3, V1_0, sdk_client, user_message
from .helpers import doorbell_waiters, message, rpc_body

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
BOTH = pytest.mark.parametrize("version", [V1_0, V0_3])


@dataclass
class SseEvent:
    id: str | None = None
    data: dict | None = None
    event: str | None = None


@dataclass
class SseRead:
    events: list[SseEvent] = field(default_factory=list)
    keepalives: int = 0


async def read_sse(source, *, stop_after: int | None = None) -> SseRead:
    """Parse an SSE body (a response, or its line iterator to go on reading); stop after
    `stop_after` events (leaving the block then drops the connection)."""
    lines = source.aiter_lines() if isinstance(source, httpx.Response) else source
    read, current = SseRead(), SseEvent()
    async for line in lines:
        if line.startswith(":"):
            read.keepalives += 1
        elif line.startswith("id: "):
            current.id = line[4:]
        elif line.startswith("event: "):
            current.event = line[7:]
        elif line.startswith("data: "):
            current.data = json.loads(line[6:])
        elif line == "" and current.data is not None:
            read.events.append(current)
            current = SseEvent()
            if stop_after is not None and len(read.events) >= stop_after:
                break
    return read


@pytest.fixture
def conformance(live_platform, make_tenant, make_agent):
    agent = make_agent(
        make_tenant(),
        "conf",
        kind="conformance",
        visibility="public",
        anonymous_scope="shared",
        config={"step_seconds": 0.7},
    )
    return live_platform.agent_url(agent)


@BOTH
def test_sdk_client_streams_a_task_to_completion(conformance, version):
    async def scenario():
        async with sdk_client(conformance, version=version, streaming=True) as client:
            request = SendMessageRequest(
                message=user_message("go", f"tck-stream-001-{uuid.uuid4()}")
            )
            return [r async for r in client.send_message(request)]

    responses = asyncio.run(scenario())
    kinds = [r.WhichOneof("payload") for r in responses]
    assert kinds[0] == "task" and kinds[-1] == "status_update", kinds
    assert responses[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    artifacts = [r.artifact_update.artifact for r in responses if r.HasField("artifact_update")]
    snapshot_artifacts = list(responses[0].task.artifacts)
    texts = [p.text for a in [*snapshot_artifacts, *artifacts] for p in a.parts]
    assert texts == ["Stream hello from TCK"]


@BOTH
def test_sdk_client_streams_a_direct_message_reply(conformance, version):
    async def scenario():
        async with sdk_client(conformance, version=version, streaming=True) as client:
            message = user_message("go", f"tck-message-response-{uuid.uuid4()}")
            return [r async for r in client.send_message(SendMessageRequest(message=message))]

    opening, reply = asyncio.run(scenario())
    # The task as the send made it goes first, at once; the agent's Message then ends the
    # stream: as itself in v1.0, as the final status update that completes the task in v0.3
    # (which has no Message after a Task).
    assert opening.task.status.state == TaskState.TASK_STATE_SUBMITTED
    if version == V1_0:
        assert reply.message.parts[0].text == "Direct message response"
    else:
        assert reply.status_update.task_id == opening.task.id
        assert reply.status_update.status.state == TaskState.TASK_STATE_COMPLETED
        assert reply.status_update.status.message.parts[0].text == "Direct message response"


@BOTH
def test_sdk_client_subscribes_to_a_running_task(conformance, version):
    async def scenario():
        async with sdk_client(conformance, version=version, polling=True) as poller:
            request = SendMessageRequest(message=user_message("slow please", f"m-{uuid.uuid4()}"))
            task = [r async for r in poller.send_message(request)][0].task
        async with sdk_client(conformance, version=version, streaming=True) as client:
            return task, [r async for r in client.subscribe(SubscribeToTaskRequest(id=task.id))]

    task, responses = asyncio.run(scenario())
    assert responses[0].task.id == task.id
    last = responses[-1]
    assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    assert 'You said: "slow please"' in last.status_update.status.message.parts[0].text


def test_dropped_stream_resumes_with_last_event_id_exactly_once(conformance):
    headers = {"A2A-Version": "1.0"}

    async def scenario():
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            send = rpc_body("SendStreamingMessage", {"message": message()})
            async with http.stream("POST", conformance, json=send) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                first = await read_sse(response, stop_after=1)  # then the connection drops
            snapshot = first.events[0]
            task_id = snapshot.data["result"]["task"]["id"]
            assert snapshot.id.startswith(f"{task_id}:")
            resume = rpc_body("SubscribeToTask", {"id": task_id}, request_id=2)
            async with http.stream(
                "POST", conformance, json=resume, headers={"Last-Event-ID": snapshot.id}
            ) as response:
                rest = await read_sse(response)
            # The whole log, to compare with: replay from the very start.
            async with http.stream(
                "POST", conformance, json=resume, headers={"Last-Event-ID": f"{task_id}:0"}
            ) as response:
                everything = await read_sse(response)
        return task_id, snapshot, rest, everything

    task_id, snapshot, rest, everything = asyncio.run(scenario())
    seqs = [int(e.id.split(":")[1]) for e in rest.events]
    start = int(snapshot.id.split(":")[1])
    assert seqs == list(range(start + 1, start + 1 + len(seqs))), seqs
    all_seqs = [int(e.id.split(":")[1]) for e in everything.events]
    assert all_seqs == list(range(1, all_seqs[-1] + 1)) and seqs == all_seqs[start:]
    results = [e.data["result"] for e in rest.events]
    assert all(
        r.get("statusUpdate", r.get("artifactUpdate", {})).get("taskId") == task_id for r in results
    )
    assert results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert any("artifactUpdate" in r for r in results)
    assert rest.keepalives >= 1  # 0.7 s steps, 0.5 s keep-alive interval


def test_bad_last_event_ids_are_refused(conformance):
    async def scenario():
        async with httpx.AsyncClient(headers={"A2A-Version": "1.0"}, timeout=30) as http:
            send = rpc_body(
                "SendMessage", {"message": message(messageId=f"tck-complete-task-{uuid.uuid4()}")}
            )
            task_id = (await http.post(conformance, json=send)).json()["result"]["task"]["id"]
            answers = []
            for bad in (f"{uuid.uuid4()}:1", f"{task_id}:999", "garbage", f"{task_id}:-1"):
                response = await http.post(
                    conformance,
                    json=rpc_body("SubscribeToTask", {"id": task_id}),
                    headers={"Last-Event-ID": bad},
                )
                answers.append(response.json()["error"])
            return answers

    for error in asyncio.run(scenario()):
        assert error["code"] == -32602 and "Last-Event-ID" in error["message"]


def test_a_disconnected_stream_leaves_its_doorbell(
    live_platform, make_tenant, make_agent, make_key
):
    tenant = make_tenant()
    agent = make_agent(tenant, "slow", config={"delay_seconds": 2})
    url, key = live_platform.agent_url(agent), make_key(tenant)
    before = doorbell_waiters(live_platform)

    async def scenario():
        headers = {"A2A-Version": "1.0", "X-API-Key": key}
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            send = rpc_body("SendStreamingMessage", {"message": message()})
            async with http.stream("POST", url, json=send) as response:
                first = await read_sse(response, stop_after=1)
                task_id = first.events[0].data["result"]["task"]["id"]
                waiting = doorbell_waiters(live_platform)
            left = False
            for _ in range(100):  # the server notices the disconnect and cleans up
                if doorbell_waiters(live_platform) == before:
                    left = True
                    break
                await asyncio.sleep(0.05)
            # The run goes on without the stream; it ends before the test does, so the worker
            # is not writing while the next test's set-up empties the tables.
            for _ in range(200):
                got = await http.post(url, json=rpc_body("GetTask", {"id": task_id}, request_id=2))
                if got.json()["result"]["status"]["state"] == "TASK_STATE_COMPLETED":
                    break
                await asyncio.sleep(0.1)
        return waiting, left

    waiting, left = asyncio.run(scenario())
    assert waiting == before + 1
    assert left


def test_stream_completes_when_its_redis_doorbell_dies(live_platform, make_tenant, make_agent):
    """A second daphne whose channel layer is a Redis we kill mid-stream (the task runs on the
    Celery worker, another process): the stream falls back to polling the log, and a resume
    with Last-Event-ID after the drop gets the rest exactly once."""
    redis_port, web_port = _free_port(), _free_port()
    doorbell = subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    env = {
        **live_platform.env,
        "REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "A2A_PUBLIC_BASE_URL": f"http://127.0.0.1:{web_port}",
    }
    log = live_platform.log_dir / "doorbell-daphne.log"
    web = start_web(web_port, env, log)
    agent = make_agent(
        make_tenant(),
        "conf",
        kind="conformance",
        visibility="public",
        anonymous_scope="shared",
        config={"step_seconds": 1},
    )
    url = f"http://127.0.0.1:{web_port}/a2a/{agent.tenant.slug}/conf/"
    # The only worker is one that rings this Redis, so the stream starts with a live doorbell.
    stop_process(live_platform.worker)
    worker = live_platform.start_worker("doorbell-worker", REDIS_URL=env["REDIS_URL"])
    try:

        async def scenario():
            async with httpx.AsyncClient(headers={"A2A-Version": "1.0"}, timeout=30) as http:
                send = rpc_body("SendStreamingMessage", {"message": message()})
                async with http.stream("POST", url, json=send) as response:
                    lines = response.aiter_lines()
                    events = (await read_sse(lines, stop_after=1)).events
                    doorbell.kill()  # mid-stream
                    events += (await read_sse(lines, stop_after=1)).events
                # The connection dropped; resume on the same daphne, still without Redis.
                task_id = events[0].data["result"]["task"]["id"]
                resume = rpc_body("SubscribeToTask", {"id": task_id}, request_id=2)
                headers = {"Last-Event-ID": events[-1].id}
                async with http.stream("POST", url, json=resume, headers=headers) as response:
                    events += (await read_sse(response)).events
            return events

        events = asyncio.run(scenario())
    finally:
        stop_process(web)
        stop_process(worker)
        stop_process(doorbell)
        live_platform.worker = live_platform.start_worker("worker")
    results = [e.data["result"] for e in events]
    assert "task" in results[0]
    assert results[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    seqs = [int(e.id.split(":")[1]) for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs  # none lost, none twice
    # Nothing could ring after the kill (the worker rings only the dead Redis): the events
    # after it came from reading the log at the doorbell's safety-net interval.


def test_a_subscription_follows_an_input_required_task_until_it_ends(conformance):
    async def scenario():
        async with httpx.AsyncClient(headers={"A2A-Version": "1.0"}, timeout=30) as http:
            ask = rpc_body(
                "SendMessage", {"message": message(messageId=f"tck-input-required-{uuid.uuid4()}")}
            )
            task = (await http.post(conformance, json=ask)).json()["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            subscribe = rpc_body("SubscribeToTask", {"id": task["id"]}, request_id=2)
            async with http.stream("POST", conformance, json=subscribe) as response:
                lines = response.aiter_lines()
                opening = (await read_sse(lines, stop_after=1)).events
                answer = {**message("here"), "taskId": task["id"]}
                await http.post(conformance, json=rpc_body("SendMessage", {"message": answer}))
                rest = (await read_sse(lines)).events
            return opening, rest

    opening, rest = asyncio.run(scenario())
    assert opening[0].data["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert rest[-1].data["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def v03_message(message_id: str, text: str = "hi", **fields: str) -> dict:
    return {
        "kind": "message",
        "messageId": message_id,
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        **fields,
    }


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
def test_a_v03_stream_on_a_task_that_ended_at_once_ends_with_a_final_status_update(
    conformance, binding
):
    """A follow-up the agent completes in its first event: the stream opens with the task
    already completed, and v0.3 clients still get the final status update they wait for."""

    async def scenario():
        async with httpx.AsyncClient(timeout=30) as http:  # no A2A-Version: v0.3
            ask = rpc_body(
                "message/send", {"message": v03_message(f"tck-input-required-{uuid.uuid4()}")}
            )
            task = (await http.post(conformance, json=ask)).json()["result"]
            assert task["status"]["state"] == "input-required"
            ids = {"taskId": task["id"], "contextId": task["contextId"]}
            if binding == "jsonrpc":
                url, body = (
                    conformance,
                    rpc_body(
                        "message/stream",
                        {"message": v03_message(f"m-{uuid.uuid4()}", "more", **ids)},
                    ),
                )
            else:
                message = {
                    "messageId": f"m-{uuid.uuid4()}",
                    "role": "ROLE_USER",
                    "content": [{"text": "more"}],
                    **ids,
                }
                url, body = conformance + "v1/message:stream", {"message": message}
            async with http.stream("POST", url, json=body) as response:
                events = (await read_sse(response)).events
        return task["id"], [e.data["result"] if binding == "jsonrpc" else e.data for e in events]

    task_id, results = asyncio.run(scenario())
    if binding == "jsonrpc":
        kinds = [r["kind"] for r in results]
        last, state = results[-1], "completed"
    else:  # the JSON of v0.3's proto StreamResponse
        kinds = [
            "task" if "task" in r else "status-update" if "statusUpdate" in r else "?"
            for r in results
        ]
        last, state = results[-1].get("statusUpdate", {}), "TASK_STATE_COMPLETED"
    assert kinds[0] == "task" and kinds[-1] == "status-update", kinds
    assert last["final"] is True and last["status"]["state"] == state and last["taskId"] == task_id


def test_resuming_at_the_end_closes_and_a_repost_with_last_event_id_sends_nothing(conformance):
    from channels.db import database_sync_to_async

    from tasks_app.models import Task

    async def scenario():
        async with httpx.AsyncClient(headers={"A2A-Version": "1.0"}, timeout=30) as http:
            send = rpc_body("SendStreamingMessage", {"message": message()})
            async with http.stream("POST", conformance, json=send) as response:
                events = (await read_sse(response)).events
            last = events[-1]
            task_id = last.id.split(":")[0]
            resume = rpc_body("SubscribeToTask", {"id": task_id}, request_id=2)
            async with http.stream(
                "POST", conformance, json=resume, headers={"Last-Event-ID": last.id}
            ) as response:
                after_end = await read_sse(response)  # returns: the stream closes at once
            # Re-POSTing the send with Last-Event-ID resumes instead of sending again.
            before = await database_sync_to_async(Task.objects.count)()
            middle = events[1].id
            async with http.stream(
                "POST", conformance, json=send, headers={"Last-Event-ID": middle}
            ) as response:
                resumed = await read_sse(response)
            return (
                events,
                after_end,
                resumed,
                before,
                await database_sync_to_async(Task.objects.count)(),
            )

    events, after_end, resumed, before, after = asyncio.run(scenario())
    assert after_end.events == []
    assert [e.id for e in resumed.events] == [e.id for e in events[2:]]
    assert before == after


def test_a_client_that_never_reads_blocks_neither_the_worker_nor_other_callers(conformance):
    from channels.db import database_sync_to_async

    from tasks_app.models import Message

    stalled_id = f"m-{uuid.uuid4()}"

    def stalled_state() -> str:
        return Message.objects.select_related("task").get(message_id=stalled_id).task.state

    async def scenario():
        async with httpx.AsyncClient(headers={"A2A-Version": "1.0"}, timeout=30) as http:
            stalled = rpc_body("SendStreamingMessage", {"message": message(messageId=stalled_id)})
            async with http.stream("POST", conformance, json=stalled):  # opened, never read
                sends = [
                    http.post(
                        conformance,
                        json=rpc_body(
                            "SendMessage",
                            {"message": message(messageId=f"tck-complete-task-{uuid.uuid4()}")},
                        ),
                    )
                    for _ in range(5)
                ]
                answers = [r.json()["result"]["task"] for r in await asyncio.gather(*sends)]
                # The stalled stream's own task still runs to the end on the worker.
                for _ in range(100):
                    state = await database_sync_to_async(stalled_state)()
                    if state == "TASK_STATE_COMPLETED":
                        break
                    await asyncio.sleep(0.1)
                return answers, state

    answers, stalled = asyncio.run(scenario())
    assert [a["status"]["state"] for a in answers] == ["TASK_STATE_COMPLETED"] * 5
    assert stalled == "TASK_STATE_COMPLETED"
