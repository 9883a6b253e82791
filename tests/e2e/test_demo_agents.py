"""The issue's acceptance path: the demo agents that `make run` creates (`seed_demo`), called with
the official a2a-sdk client in v1.0 and v0.3: send, get, list, cancel and multi-turn."""

from __future__ import annotations

import asyncio
import uuid

import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    TaskNotCancelableError,
    TaskState,
)
from django.core.management import call_command

from .clients import V0_3, V1_0, sdk_client, send, user_message

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def demo(live_platform, capsys, settings):
    call_command("seed_demo", "--tenant", f"demo-{uuid.uuid4().hex[:8]}")
    out = capsys.readouterr().out
    key = out.split("API key (")[1].split(": ")[1].split()[0]
    cards = [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("agent card")]
    echo, conformance = (card.removesuffix(".well-known/agent-card.json") for card in cards)
    return (
        key,
        echo.replace("http://127.0.0.1:8000", live_platform.url),
        conformance.replace("http://127.0.0.1:8000", live_platform.url),
    )


@pytest.mark.parametrize("version", [V1_0, V0_3])
def test_demo_agents_with_the_sdk_client(demo, version):
    key, echo_url, conformance_url = demo

    async def scenario():
        async with sdk_client(echo_url, key=key, version=version) as echo:
            task = (await send(echo, user_message("hello demo", f"m-{uuid.uuid4()}"))).task
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            got = await echo.get_task(GetTaskRequest(id=task.id, history_length=1))
            assert got.artifacts[0].parts[0].text == "hello demo" and len(got.history) == 1
            with pytest.raises(TaskNotCancelableError):
                await echo.cancel_task(CancelTaskRequest(id=task.id))
            if version == V1_0:
                listed = await echo.list_tasks(ListTasksRequest(page_size=10))
                assert [t.id for t in listed.tasks] == [task.id]
        async with sdk_client(conformance_url, version=version) as conformance:  # anonymous
            asked = (
                await send(conformance, user_message("?", f"tck-input-required-{uuid.uuid4()}"))
            ).task
            assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            done = (
                await send(
                    conformance,
                    user_message(
                        "here", f"m-{uuid.uuid4()}", task_id=asked.id, context_id=asked.context_id
                    ),
                )
            ).task
            assert done.status.state == TaskState.TASK_STATE_COMPLETED
            slow = (
                await send(
                    conformance, user_message("slow", f"m-{uuid.uuid4()}"), return_immediately=True
                )
            ).task
            canceled = await conformance.cancel_task(CancelTaskRequest(id=slow.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        if version == V0_3:  # the SDK's v0.3 client has no list_tasks: speak tasks/list directly
            body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/list", "params": {"pageSize": 1}}
            async with httpx.AsyncClient(headers={"X-API-Key": key}) as http:
                page = (await http.post(echo_url, json=body)).json()["result"]
            assert page["totalSize"] == 1 and page["tasks"][0]["kind"] == "task"
            assert page["tasks"][0]["status"]["state"] == "completed"

    asyncio.run(scenario())
