"""Idempotent sends: a SendMessage repeating a messageId its caller already sent to the agent
(a client retrying after a lost answer) gets what the first made, never a second task or run,
on every binding and version. The official SDK client sends both."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from a2a.types import TaskState

from tasks_app.models import Task

from .clients import GRPC, HTTP_JSON, JSONRPC, V0_3, V1_0, sdk_client, send, user_message
from .helpers import mid, result_of, rpc, rpc_stream, wait_until

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
    # A blocking repeat waits for the first send's turn, as the first sender would have.
    settled = result_of(rpc(http, target, "SendMessage", params))["task"]
    assert settled["id"] == first["id"] and settled["status"]["state"] == "TASK_STATE_COMPLETED"
    assert target.agent.tasks.count() == 1
    # A streaming repeat replays the first send's stream: the same task, to its end.
    events = list(rpc_stream(http, target, "SendStreamingMessage", params))
    ids = {e["result"].get("task", e["result"].get("statusUpdate", {})).get("id") for e in events}
    assert events[0]["result"]["task"]["id"] == first["id"]
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert ids <= {first["id"], None}
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
