"""Following a task's log (tasks_app.streams): a waiter subscribes to the task's doorbell before
it first reads the log, so an event written at any moment is either read or rung, and a
waiter with a doorbell wakes on the ring, not on its (slow) safety-net poll."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from asgiref.sync import async_to_sync

from a2a_platform.db import db
from agents.auth import Principal
from tasks_app.doorbell import Doorbell
from tasks_app.services import message_send, task_event_record
from tasks_app.streams import EventFollower
from tests.conftest import require

pytestmark = pytest.mark.django_db(transaction=True)  # waiters read on the database threads

# No poll can come in time: with a doorbell a waiter looks every 5 x this many seconds.
SLOW_POLL_SECONDS = 600.0
# Only so that a broken doorbell fails the test instead of hanging it.
GUARD_SECONDS = 60.0


@pytest.fixture
def doorbell(settings, monkeypatch):
    require(bool(settings.REDIS_URL), "the doorbell is a shared (Redis) channel layer")
    settings.A2A_POLL_INTERVAL_SECONDS = SLOW_POLL_SECONDS
    monkeypatch.setattr("tasks_app.services._enqueue_run", lambda *args: None)  # no worker


@pytest.fixture
def submitted(doorbell, make_tenant, make_agent):
    agent = make_agent(make_tenant())
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="x")])
    return message_send(
        agent=agent,
        principal=Principal(owner="key:alice"),
        request=SendMessageRequest(message=message),
    )


async def _complete(task_id: uuid.UUID) -> None:
    """What a worker does: record the event, ring the doorbell once it is committed."""
    status = TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
    event = TaskStatusUpdateEvent(task_id=str(task_id), status=status)
    await db(task_event_record)(task_id=task_id, event=event)


def test_a_waiter_wakes_on_the_ring_of_an_event_written_while_it_waits(submitted, monkeypatch):
    waiting = asyncio.Event()
    real_wait = Doorbell.wait

    async def wait(self, timeout):
        waiting.set()  # the waiter has read the log, found nothing, and waits
        await real_wait(self, timeout)

    monkeypatch.setattr(Doorbell, "wait", wait)

    async def scenario():
        loop = asyncio.get_running_loop()
        async with EventFollower(submitted.task_id, submitted.since_seq) as follower:
            events = follower.events(deadline=loop.time() + SLOW_POLL_SECONDS)
            first = asyncio.ensure_future(anext(events))
            await asyncio.wait_for(waiting.wait(), GUARD_SECONDS)
            await _complete(submitted.task_id)
            item = await asyncio.wait_for(first, GUARD_SECONDS)
            await events.aclose()
            return item

    item = async_to_sync(scenario)()
    assert item.final and item.response.status_update.status.state == TaskState.TASK_STATE_COMPLETED


def test_an_event_written_before_the_first_read_is_read_not_waited_for(submitted):
    async def scenario():
        loop = asyncio.get_running_loop()
        async with EventFollower(submitted.task_id, submitted.since_seq) as follower:
            # subscribed; the ring of this event is consumed by nobody yet, and the read finds it
            await _complete(submitted.task_id)
            events = follower.events(deadline=loop.time() + SLOW_POLL_SECONDS)
            item = await asyncio.wait_for(anext(events), GUARD_SECONDS)
            await events.aclose()
            return item

    assert async_to_sync(scenario)().final


def test_a_new_tasks_send_stream_opens_with_the_task_as_committed(submitted):
    """What SendStreamingMessage sends first for a new task: its own `submitted` event, with
    no worker anywhere (none is running here)."""
    from tasks_app.operations import _send_stream

    async def scenario():
        stream = _send_stream(submitted, history_length=0)
        first = await asyncio.wait_for(anext(stream), GUARD_SECONDS)
        await stream.aclose()
        return first

    first = async_to_sync(scenario)()
    assert first.seq == submitted.since_seq and not first.final
    assert first.response.task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert len(first.response.task.history) == 0  # historyLength 0, as a snapshot would be
