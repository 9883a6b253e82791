"""Idempotent sends: a SendMessage repeating a messageId its caller already sent to the agent
(a client retrying after a lost answer) gets what the first made, never a second task or run,
on every binding and version; one that reuses the id for another request is refused with
InvalidParamsError, and one to an agent that does not de-duplicate is a new message. The
official SDK client sends them and reads the answers."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import grpc
import grpc.aio
import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from a2a.types import a2a_pb2_grpc as pb10_grpc
from a2a.utils.errors import InvalidParamsError
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tasks_app.models import Task, TaskEvent

from .clients import GRPC, HTTP_JSON, JSONRPC, V0_3, V1_0, sdk_client, send, user_message
from .helpers import error_of, mid, result_of, rpc, rpc_stream, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BINDINGS = [
    (V1_0, JSONRPC),
    (V1_0, HTTP_JSON),
    (V1_0, GRPC),
    (V0_3, JSONRPC),
    (V0_3, HTTP_JSON),
    (V0_3, GRPC),
]


@pytest.mark.parametrize("version, binding", BINDINGS)
def test_a_repeated_message_id_returns_the_first_task(live_platform, make_target, version, binding):
    target = make_target()
    message_id = mid()

    async def twice():
        async with sdk_client(target.url, key=target.key, version=version, binding=binding) as c:
            first = await send(c, user_message("once", message_id))
            again = await send(c, user_message("once", message_id))
            other = await send(c, user_message("once", mid()))
            return first.task, again.task, other.task

    first, again, other = asyncio.run(twice())
    assert first.status.state == TaskState.TASK_STATE_COMPLETED
    assert again.id == first.id and again.status.state == TaskState.TASK_STATE_COMPLETED
    assert [a.parts[0].text for a in again.artifacts] == ["once"]
    assert other.id != first.id  # another id is another message
    assert target.agent.tasks.count() == 2
    # No second run: the task's log holds the one run's events.
    assert Task.objects.get(pk=first.id).last_seq == Task.objects.get(pk=other.id).last_seq


def reused(message_id: str, task_id: str) -> str:
    """The refusal's message: the id, and the task its first send made."""
    return (
        f"messageId '{message_id}' was already sent to this agent with another message (it "
        f"made task {task_id}); send a new messageId for a new message, or the same message to "
        "get that task again."
    )


def events_of(agent) -> int:
    return TaskEvent.objects.filter(task__agent=agent).count()


@pytest.mark.parametrize("version, binding", BINDINGS)
def test_a_repeated_message_id_with_another_message_is_refused_and_writes_nothing(
    live_platform, make_target, version, binding
):
    target = make_target()
    message_id = mid()

    async def first_send():
        async with sdk_client(target.url, key=target.key, version=version, binding=binding) as c:
            return (await send(c, user_message("once", message_id))).task

    first = asyncio.run(first_send())
    assert first.status.state == TaskState.TASK_STATE_COMPLETED
    events = events_of(target.agent)

    async def other_send():
        async with sdk_client(target.url, key=target.key, version=version, binding=binding) as c:
            with pytest.raises(InvalidParamsError) as refused:
                await send(c, user_message("other words", message_id))
            return str(refused.value)

    assert reused(message_id, first.id) in asyncio.run(other_send())
    assert target.agent.tasks.count() == 1 and events_of(target.agent) == events


def test_the_refusal_in_each_bindings_format(http, live_platform, make_target):
    """JSON-RPC -32602, REST 400 INVALID_ARGUMENT, gRPC INVALID_ARGUMENT: the A2A standard
    InvalidParamsError, with its ErrorInfo (reason INVALID_PARAMS), on the wire."""
    target = make_target()
    message_id = mid()
    sent = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "once"}]}
    first = result_of(rpc(http, target, "SendMessage", {"message": sent}))["task"]
    other = {"message": {**sent, "parts": [{"text": "other words"}]}}
    # JSON-RPC
    error = error_of(rpc(http, target, "SendMessage", other), -32602)
    assert error["message"] == reused(message_id, first["id"])
    assert error["data"][0]["reason"] == "INVALID_PARAMS"
    # REST
    response = http.post(
        f"{target.url}message:send",
        content=json.dumps(other).encode(),
        headers={"Content-Type": "application/json", "X-API-Key": target.key, **target.headers},
    )
    assert response.status_code == 400, response.text
    body = response.json()["error"]
    assert (body["status"], body["message"]) == (
        "INVALID_ARGUMENT",
        reused(message_id, first["id"]),
    )
    assert body["details"][0]["reason"] == "INVALID_PARAMS"

    # gRPC
    async def grpc_send() -> grpc.aio.AioRpcError:
        request = SendMessageRequest(
            tenant=target.tenant_value,
            message=Message(
                message_id=message_id, role=Role.ROLE_USER, parts=[Part(text="other words")]
            ),
        )
        async with grpc.aio.insecure_channel(live_platform.grpc_address) as channel:
            stub = pb10_grpc.A2AServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.SendMessage(
                    request,
                    metadata=[("x-api-key", target.key), ("a2a-version", "1.0")],
                    timeout=30,
                )
            return refused.value

    refusal = asyncio.run(grpc_send())
    assert refusal.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refusal.details() == reused(message_id, first["id"])
    status = rpc_status.from_call(refusal)
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info) and info.reason == "INVALID_PARAMS"
    assert target.agent.tasks.count() == 1


def test_the_same_message_in_another_version_is_the_same_message(http, live_platform, make_target):
    """Sent in v1.0, then again in v0.3's JSON (and its empty configuration): one request."""
    target = make_target()
    message_id = mid()
    v10 = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "once"}]}
    first = result_of(rpc(http, target, "SendMessage", {"message": v10}))["task"]
    v03 = {
        "kind": "message",
        "messageId": message_id,
        "role": "user",
        "parts": [{"kind": "text", "text": "once"}],
    }
    params = {"message": v03, "configuration": {}}
    again = result_of(rpc(http, target, "message/send", params, headers={}))
    assert again["id"] == first["id"] and again["kind"] == "task"
    assert target.agent.tasks.count() == 1


@pytest.mark.parametrize("binding", [JSONRPC, HTTP_JSON, GRPC])
def test_an_agent_that_does_not_deduplicate_makes_a_task_of_each_send(
    live_platform, make_target, binding
):
    target = make_target(deduplicate_messages=False)
    message_id = mid()

    async def twice():
        async with sdk_client(target.url, key=target.key, binding=binding) as c:
            first = await send(c, user_message("once", message_id))
            again = await send(c, user_message("once", message_id))
            return first.task, again.task

    first, again = asyncio.run(twice())
    assert again.id != first.id
    assert first.status.state == again.status.state == TaskState.TASK_STATE_COMPLETED
    assert target.agent.tasks.count() == 2


def test_a_repeat_while_the_first_still_runs_returns_that_task_without_a_second_run(
    http, live_platform, make_target
):
    target = make_target("slow", config={"delay_seconds": 2})
    message_id = mid()
    params = {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "x"}]}}
    quick = {**params, "configuration": {"returnImmediately": True}}
    first = result_of(rpc(http, target, "SendMessage", quick))["task"]
    again = result_of(rpc(http, target, "SendMessage", quick))["task"]
    assert again["id"] == first["id"]
    assert again["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    # A blocking repeat of a non-blocking send asks for another answer: another request.
    error_of(rpc(http, target, "SendMessage", params), -32602, reused(message_id, first["id"]))
    # A streaming repeat replays the first send's stream: the same task, to its end (the
    # method is not part of what a send asks; returnImmediately means nothing to a stream).
    events = list(rpc_stream(http, target, "SendStreamingMessage", quick))
    ids = {e["result"].get("task", e["result"].get("statusUpdate", {})).get("id") for e in events}
    assert events[0]["result"]["task"]["id"] == first["id"]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert ids <= {first["id"], None}
    assert target.agent.tasks.count() == 1


def test_a_blocking_repeat_waits_for_the_first_sends_turn(live_platform, make_target):
    target = make_target("slow", config={"delay_seconds": 2})
    message_id = mid()
    params = {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "x"}]}}

    def blocking_send():
        with httpx.Client(timeout=60) as client:
            return result_of(rpc(client, target, "SendMessage", params))["task"]

    with ThreadPoolExecutor(1) as pool:
        sending = pool.submit(blocking_send)
        wait_until(lambda: target.agent.tasks.exists(), what="the first send's task")
        again = blocking_send()  # while the agent is on the first send's turn
        first = sending.result()
    assert again["id"] == first["id"]
    assert first["status"]["state"] == again["status"]["state"] == "TASK_STATE_COMPLETED"
    assert target.agent.tasks.count() == 1


def test_concurrent_repeats_make_one_task(live_platform, make_target):
    """Sends of one messageId racing each other: the database's unique key decides, and every
    sender gets the one task."""
    target = make_target()
    message_id = mid()
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "x"}]},
            "configuration": {"returnImmediately": True},
        },
    }
    headers = {"X-API-Key": target.key, "A2A-Version": "1.0"}

    async def race():
        async with httpx.AsyncClient(timeout=30) as client:
            answers = await asyncio.gather(
                *(client.post(target.url, json=body, headers=headers) for _ in range(8))
            )
        return [a.json()["result"]["task"]["id"] for a in answers]

    ids = asyncio.run(race())
    assert len(set(ids)) == 1, ids
    assert target.agent.tasks.count() == 1
    wait_until(
        lambda: Task.objects.get(pk=ids[0]).state == "TASK_STATE_COMPLETED",
        timeout=30,
        what="the one run",
    )


def test_the_same_message_id_from_another_caller_is_another_message(
    http, live_platform, make_target, make_key
):
    target = make_target()
    message_id = mid()
    params = {"message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": "x"}]}}
    alices = result_of(rpc(http, target, "SendMessage", params))["task"]
    bob = make_key(target.agent.tenant, "bob")
    bobs = result_of(rpc(http, target, "SendMessage", params, key=bob))["task"]
    assert bobs["id"] != alices["id"]
    assert target.agent.tasks.count() == 2
