"""The official a2a-sdk client (v1.0 and its v0.3 compat client) against real daphne + Celery."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from a2a.client import A2AClientError
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskState,
    UnsupportedOperationError,
)

from .clients import GRPC, HTTP_JSON, JSONRPC, V0_3, V1_0, sdk_client, send, user_message
from .helpers import mid

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
BOTH = pytest.mark.parametrize("version", [V1_0, V0_3])


@pytest.fixture
def echo(live_platform, make_tenant, make_agent, make_key):
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    return live_platform.agent_url(agent), make_key(tenant, "alice")


@BOTH
def test_blocking_send_returns_completed_task_with_artifact(echo, version):
    url, key = echo

    async def scenario():
        async with sdk_client(url, key=key, version=version) as client:
            response = await send(client, user_message("hello there", mid()))
            task = response.task
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            assert task.artifacts[0].parts[0].text == "hello there"
            assert task.history[0].parts[0].text == "hello there"

    asyncio.run(scenario())


@BOTH
@pytest.mark.parametrize("binding", [JSONRPC, HTTP_JSON, GRPC])
def test_a_stream_opens_at_once_with_the_task_as_submitted(echo, version, binding):
    url, key = echo

    async def scenario():
        async with sdk_client(
            url, key=key, version=version, streaming=True, binding=binding
        ) as client:
            request = SendMessageRequest(message=user_message("hello there", mid()))
            return [r async for r in client.send_message(request)]

    responses = asyncio.run(scenario())
    # The first event is the task as the send committed it, before a worker had it (the
    # worker's first act is `working`); then the agent's events, to the end.
    opening = responses[0].task
    assert opening.status.state == TaskState.TASK_STATE_SUBMITTED
    assert [m.parts[0].text for m in opening.history] == ["hello there"]
    assert not opening.artifacts
    kinds = [r.WhichOneof("payload") for r in responses[1:]]
    assert set(kinds) <= {"status_update", "artifact_update"}, kinds
    assert responses[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    artifacts = [r.artifact_update.artifact for r in responses if r.HasField("artifact_update")]
    assert [p.text for a in artifacts for p in a.parts] == ["hello there"]


@BOTH
def test_non_blocking_send_returns_at_once_then_get_sees_completion(
    live_platform, make_tenant, make_agent, make_key, version
):
    tenant = make_tenant()
    agent = make_agent(tenant, "slow", config={"delay_seconds": 1.0})
    url, key = live_platform.agent_url(agent), make_key(tenant)

    async def scenario():
        async with sdk_client(url, key=key, version=version, polling=True) as client:
            task = (await send(client, user_message("later", mid()))).task
            assert task.status.state in (
                TaskState.TASK_STATE_SUBMITTED,
                TaskState.TASK_STATE_WORKING,
            )
            for _ in range(100):
                got = await client.get_task(GetTaskRequest(id=task.id))
                if got.status.state == TaskState.TASK_STATE_COMPLETED:
                    break
                await asyncio.sleep(0.1)
            assert got.status.state == TaskState.TASK_STATE_COMPLETED
            assert got.artifacts[0].parts[0].text == "later"

    asyncio.run(scenario())


@BOTH
def test_get_with_history_length(echo, version):
    url, key = echo

    async def scenario():
        async with sdk_client(url, key=key, version=version) as client:
            task = (await send(client, user_message("one", mid()))).task
            full = await client.get_task(GetTaskRequest(id=task.id))
            assert len(full.history) == 1
            one = await client.get_task(GetTaskRequest(id=task.id, history_length=1))
            assert [m.parts[0].text for m in one.history] == ["one"]
            if version == V1_0:  # v0.3 treats 0 as "no limit"
                none = await client.get_task(GetTaskRequest(id=task.id, history_length=0))
                assert len(none.history) == 0

    asyncio.run(scenario())


def test_list_with_filters_and_paging_v10(echo):
    url, key = echo

    async def scenario():
        async with sdk_client(url, key=key) as client:
            context = str(uuid.uuid4())
            ids = []
            for n in range(3):
                ids.append(
                    (await send(client, user_message(f"n{n}", mid(), context_id=context))).task.id
                )
            await send(client, user_message("other context", mid()))
            page1 = await client.list_tasks(ListTasksRequest(context_id=context, page_size=2))
            assert page1.total_size == 3 and len(page1.tasks) == 2 and page1.next_page_token
            page2 = await client.list_tasks(
                ListTasksRequest(context_id=context, page_size=2, page_token=page1.next_page_token)
            )
            assert len(page2.tasks) == 1 and not page2.next_page_token
            assert {t.id for t in [*page1.tasks, *page2.tasks]} == set(ids)
            done = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED))
            assert done.total_size == 4
            working = await client.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_WORKING))
            assert working.total_size == 0
            assert all(not t.artifacts for t in page1.tasks)
            with_artifacts = await client.list_tasks(
                ListTasksRequest(context_id=context, include_artifacts=True)
            )
            assert all(t.artifacts for t in with_artifacts.tasks)

    asyncio.run(scenario())


@BOTH
def test_cancel_running_task_then_cancel_again_is_not_cancelable(
    live_platform, make_tenant, make_agent, make_key, version
):
    tenant = make_tenant()
    agent = make_agent(tenant, "slow", config={"delay_seconds": 30})
    url, key = live_platform.agent_url(agent), make_key(tenant)

    async def scenario():
        async with sdk_client(url, key=key, version=version, polling=True) as client:
            task = (await send(client, user_message("long job", mid()))).task
            for _ in range(100):  # wait until a worker runs it
                got = await client.get_task(GetTaskRequest(id=task.id))
                if got.status.state == TaskState.TASK_STATE_WORKING:
                    break
                await asyncio.sleep(0.05)
            canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            with pytest.raises(TaskNotCancelableError):
                await client.cancel_task(CancelTaskRequest(id=task.id))

    asyncio.run(scenario())


@BOTH
def test_multi_turn_input_required(live_platform, make_tenant, make_agent, make_key, version):
    tenant = make_tenant()
    agent = make_agent(tenant, "asker", config={"input_required": True})
    url, key = live_platform.agent_url(agent), make_key(tenant)

    async def scenario():
        async with sdk_client(url, key=key, version=version) as client:
            first = (await send(client, user_message("first", mid()))).task
            assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            second = (
                await send(
                    client,
                    user_message("second", mid(), task_id=first.id, context_id=first.context_id),
                )
            ).task
            assert second.id == first.id
            assert second.status.state == TaskState.TASK_STATE_COMPLETED
            assert second.artifacts[0].parts[0].text == "first\nsecond"
            # A terminal task takes no more messages.
            with pytest.raises(UnsupportedOperationError):
                await send(client, user_message("third", mid(), task_id=first.id))

    asyncio.run(scenario())


@BOTH
def test_other_owner_and_other_tenant_get_task_not_found(
    live_platform, make_tenant, make_agent, make_key, version
):
    tenant = make_tenant()
    agent = make_agent(tenant, "echo")
    url = live_platform.agent_url(agent)
    alice, bob = make_key(tenant, "alice"), make_key(tenant, "bob")
    admin = make_key(tenant, "admin", scopes=["tenant-admin"])
    other_tenant = make_tenant()
    make_agent(other_tenant, "echo")
    intruder = make_key(other_tenant, "mallory")

    async def scenario():
        async with sdk_client(url, key=alice, version=version) as client:
            task = (await send(client, user_message("secret", mid()))).task
        async with sdk_client(url, key=bob, version=version) as client:
            with pytest.raises(TaskNotFoundError):
                await client.get_task(GetTaskRequest(id=task.id))
            with pytest.raises(TaskNotFoundError):
                await client.cancel_task(CancelTaskRequest(id=task.id))
            with pytest.raises(TaskNotFoundError):
                await send(client, user_message("hijack", mid(), task_id=task.id))
            if version == V1_0:
                assert (await client.list_tasks(ListTasksRequest())).total_size == 0
        async with sdk_client(url, key=admin, version=version) as client:
            assert (await client.get_task(GetTaskRequest(id=task.id))).id == task.id
        with pytest.raises(A2AClientError, match="401"):
            async with sdk_client(url, key=intruder, version=version) as client:
                await client.get_task(GetTaskRequest(id=task.id))

    asyncio.run(scenario())
