"""The task operations (tasks_app.operations) called as every binding calls them, with a Caller,
against the real database and Redis: the tenant check, history cuts, how long a blocking send
waits and what it answers, Last-Event-ID, subscriptions to finished tasks, cancels, and the
extended card. No worker takes these tasks (`no_worker`): each is in the state the test made."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
import uuid
from collections.abc import Awaitable
from typing import Any

import pytest
from a2a.types import GetTaskRequest, ListTasksRequest, SendMessageRequest, TaskState
from asgiref.sync import async_to_sync

from a2a_platform.db import db
from agents.auth import Principal
from agents.errors import AuthenticationRequired
from tasks_app.errors import (
    InvalidParamsError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)
from tasks_app.models import Task
from tasks_app.operations import (
    Caller,
    check_tenant,
    extended_card_get,
    message_send,
    message_stream,
    task_cancel,
    task_get,
    task_list,
    task_subscribe,
)
from tests.conftest import require
from tests.factories import ALICE, task_create, task_status_record, user_message

# The operations read on the database threads: what a test writes must be committed.
pytestmark = pytest.mark.django_db(transaction=True)

COMPLETED = TaskState.TASK_STATE_COMPLETED
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED


def run(operation: Awaitable[Any]) -> Any:
    async def call() -> Any:
        return await operation

    return async_to_sync(call)()


def collect(operation: Awaitable[Any]) -> list[Any]:
    """Every item of the stream a streaming operation opens (it must end by itself)."""

    async def read() -> list[Any]:
        stream = await operation
        return await asyncio.wait_for(_items(stream), 60)

    return async_to_sync(read)()


async def _items(stream: Any) -> list[Any]:
    return [item async for item in stream]


@pytest.fixture
def caller(settings, no_worker, make_tenant, make_agent) -> Caller:
    require(bool(settings.REDIS_URL), "the doorbell is a shared (Redis) channel layer")
    return Caller(agent=make_agent(make_tenant()), principal=ALICE)


def texts(task: Any) -> list[str]:
    return [part.text for message in task.history for part in message.parts]


def test_a_request_naming_another_tenant_value_is_refused_before_anything_happens(caller):
    right = f"{caller.agent.tenant.slug}/{caller.agent.slug}"
    check_tenant(caller, "")  # none: this agent
    check_tenant(caller, right)
    refused = f"'tenant' is 'other/agent' but this agent's tenant value is '{right}'"
    with pytest.raises(InvalidParamsError, match=re.escape(refused)):
        check_tenant(caller, "other/agent")

    task = task_create(caller.agent)
    elsewhere = "other/agent"
    with pytest.raises(InvalidParamsError, match="tenant"):
        run(task_get(caller=caller, request=GetTaskRequest(tenant=elsewhere, id=str(task.pk))))
    with pytest.raises(InvalidParamsError, match="tenant"):
        run(task_list(caller=caller, request=ListTasksRequest(tenant=elsewhere)))
    with pytest.raises(InvalidParamsError, match="tenant"):
        run(task_cancel(caller=caller, task_id=str(task.pk), tenant=elsewhere))
    with pytest.raises(InvalidParamsError, match="tenant"):
        run(task_subscribe(caller=caller, task_id=str(task.pk), tenant=elsewhere))
    send = SendMessageRequest(tenant=elsewhere, message=user_message())
    with pytest.raises(InvalidParamsError, match="tenant"):
        run(message_send(caller=caller, request=send))
    with pytest.raises(InvalidParamsError, match="tenant"):
        run(message_stream(caller=caller, request=send))
    # nothing was sent, and the task is as it was
    assert Task.objects.filter(agent=caller.agent).count() == 1
    task.refresh_from_db()
    assert task.state == "TASK_STATE_SUBMITTED" and not task.cancel_requested


def test_history_is_cut_to_its_newest_messages(caller):
    # given a task of three messages: the user's, the agent's question, the user's answer
    task = task_create(caller.agent, text="one", state=INPUT_REQUIRED, reply="which one?")
    follow_up = SendMessageRequest(
        message=user_message("two", task_id=str(task.pk), context_id=task.context_id)
    )
    follow_up.configuration.return_immediately = True
    follow_up.configuration.history_length = 1
    # when the follow-up is sent asking for one message of history, it answers with the newest
    sent = run(message_send(caller=caller, request=follow_up))
    assert sent.id == str(task.pk) and texts(sent) == ["two"]

    # and GetTask cuts the same way: all, the newest N, or none
    def history(length: int | None = None) -> list[str]:
        request = GetTaskRequest(id=str(task.pk))
        if length is not None:
            request.history_length = length
        return texts(run(task_get(caller=caller, request=request)))

    assert history() == ["one", "which one?", "two"]
    assert history(2) == ["which one?", "two"]
    assert history(5) == ["one", "which one?", "two"]
    assert history(0) == []


def test_a_blocking_send_that_outlasts_its_wait_answers_with_the_task_as_it_is(caller, settings):
    settings.A2A_BLOCKING_TIMEOUT_SECONDS = 0.5
    started = time.monotonic()
    answer = run(message_send(caller=caller, request=SendMessageRequest(message=user_message())))
    waited = time.monotonic() - started
    # no worker took it: after the whole wait, the task as the send left it, not an error
    assert answer.status.state == TaskState.TASK_STATE_SUBMITTED, answer
    assert Task.objects.get(pk=answer.id).state == "TASK_STATE_SUBMITTED"
    assert 0.5 <= waited < 30, waited


def test_a_blocking_send_returns_once_the_turn_settles(caller, settings):
    settings.A2A_BLOCKING_TIMEOUT_SECONDS = 60
    task_id = uuid.uuid4()

    async def send_while_a_worker_answers() -> Any:
        async def worker() -> None:
            # the task exists once the send stored it; then the agent asks for input
            while not await Task.objects.filter(pk=task_id).aexists():
                await asyncio.sleep(0.05)
            await db(task_status_record)(task_id, INPUT_REQUIRED, "which one?")

        answering = asyncio.ensure_future(worker())
        request = SendMessageRequest(message=user_message())
        answer = await message_send(caller=caller, request=request, new_task_id=task_id)
        await answering
        return answer

    started = time.monotonic()
    answer = async_to_sync(send_while_a_worker_answers)()
    assert answer.id == str(task_id) and answer.status.state == INPUT_REQUIRED
    assert answer.status.message.parts[0].text == "which one?"
    assert time.monotonic() - started < 30  # the settled state ended the wait, not its bound


@pytest.mark.parametrize("event_id", ["garbage", "{task}:x", "{task}:", ":1", "{task}:99"])
def test_a_last_event_id_that_names_no_event_is_refused(caller, event_id):
    task = task_create(caller.agent, state=COMPLETED)
    event_id = event_id.format(task=task.pk)
    # a reconnecting SendStreamingMessage, and SubscribeToTask, refuse it alike
    resuming = dataclasses.replace(caller, last_event_id=event_id)
    with pytest.raises(InvalidParamsError, match="Last-Event-ID"):
        run(message_stream(caller=resuming, request=SendMessageRequest(message=user_message())))
    with pytest.raises(InvalidParamsError, match="Last-Event-ID"):
        run(task_subscribe(caller=caller, task_id=str(task.pk), last_event_id=event_id))
    assert Task.objects.filter(agent=caller.agent).count() == 1  # the send was not made


@pytest.mark.parametrize("event_id", ["{other}:1", "not-a-uuid:1"])
def test_a_subscription_refuses_an_event_id_of_another_task(caller, event_id):
    task = task_create(caller.agent, state=COMPLETED)
    other = task_create(caller.agent, state=COMPLETED)
    event_id = event_id.format(other=other.pk)
    with pytest.raises(InvalidParamsError, match=f"is not an event of task {task.pk}"):
        run(task_subscribe(caller=caller, task_id=str(task.pk), last_event_id=event_id))


def test_a_finished_task_cannot_be_subscribed_to_but_a_dropped_stream_resumes(caller):
    task = task_create(caller.agent, state=COMPLETED, reply="done")
    with pytest.raises(UnsupportedOperationError, match="already TASK_STATE_COMPLETED"):
        run(task_subscribe(caller=caller, task_id=str(task.pk)))
    # resuming after its last event: nothing is left, and the stream ends at once
    last = f"{task.pk}:{task.last_seq}"
    assert collect(task_subscribe(caller=caller, task_id=str(task.pk), last_event_id=last)) == []
    # resuming after its first event: exactly the events missed, the last one final
    resumed = collect(
        task_subscribe(caller=caller, task_id=str(task.pk), last_event_id=f"{task.pk}:1")
    )
    assert [item.seq for item in resumed] == list(range(2, task.last_seq + 1))
    assert resumed[-1].final and resumed[-1].response.status_update.status.state == COMPLETED
    # and a reconnecting send stream resumes the same way, without sending again
    resuming = dataclasses.replace(caller, last_event_id=f"{task.pk}:1")
    again = collect(message_stream(caller=resuming, request=SendMessageRequest()))
    assert [item.seq for item in again] == [item.seq for item in resumed]
    assert Task.objects.filter(agent=caller.agent).count() == 1


def test_a_finished_task_cannot_be_canceled_and_an_unstarted_one_is_at_once(caller):
    done = task_create(caller.agent, state=COMPLETED)
    with pytest.raises(TaskNotCancelableError, match="already TASK_STATE_COMPLETED"):
        run(task_cancel(caller=caller, task_id=str(done.pk)))
    done.refresh_from_db()
    assert done.state == "TASK_STATE_COMPLETED" and not done.cancel_requested
    # a task no worker has started ends at once, canceled by the platform
    waiting = task_create(caller.agent)
    canceled = run(task_cancel(caller=caller, task_id=str(waiting.pk)))
    assert canceled.id == str(waiting.pk)
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert Task.objects.get(pk=waiting.pk).state == "TASK_STATE_CANCELED"


def test_the_extended_card_needs_a_key(caller):
    anonymous = dataclasses.replace(
        caller, principal=Principal(owner="anonymous", is_anonymous=True)
    )
    with pytest.raises(AuthenticationRequired):
        run(extended_card_get(caller=anonymous))
    assert run(extended_card_get(caller=caller)).name == caller.agent.name
