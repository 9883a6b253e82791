"""Following a task's log (tasks_app.streams): what ends a wait (`is_final`); a follower hands
out the logged events in order up to the final one, says when nothing comes, and a `settled`
wait stops at the first state that ends it. A waiter subscribes to the task's doorbell before
it first reads the log, so an event written at any moment is either read or rung, and a
waiter with a doorbell wakes on the ring, not on its (slow) safety-net poll."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from a2a.types import (
    Artifact,
    Part,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from asgiref.sync import async_to_sync

from a2a_platform.db import db
from tasks_app.doorbell import Doorbell
from tasks_app.models import TERMINAL_STATES, TaskEvent
from tasks_app.services import task_event_record
from tasks_app.streams import SETTLED_STATES, EventFollower, is_final
from tests.conftest import require
from tests.factories import task_send, task_status_record

# No poll can come in time: with a doorbell a waiter looks every 5 x this many seconds.
SLOW_POLL_SECONDS = 600.0
# Only so that a broken doorbell fails the test instead of hanging it.
GUARD_SECONDS = 60.0


@pytest.fixture
def doorbell(transactional_db, settings, no_worker):
    require(bool(settings.REDIS_URL), "the doorbell is a shared (Redis) channel layer")
    settings.A2A_POLL_INTERVAL_SECONDS = SLOW_POLL_SECONDS


@pytest.fixture
def submitted(doorbell, make_tenant, make_agent):
    """A new task (the send's outcome) that no worker takes. Waiters read on the database
    threads, so what the test writes is committed (transactional_db)."""
    return task_send(make_agent(make_tenant()))


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


def test_what_ends_a_wait():
    settled, terminal = SETTLED_STATES, TERMINAL_STATES
    cases = [
        # kind, state, states that end it, final
        (TaskEvent.Kind.MESSAGE, "", settled, True),  # a direct reply ends the exchange
        (TaskEvent.Kind.STATUS, "TASK_STATE_COMPLETED", terminal, True),
        (TaskEvent.Kind.STATUS, "TASK_STATE_INPUT_REQUIRED", settled, True),
        (TaskEvent.Kind.STATUS, "TASK_STATE_INPUT_REQUIRED", terminal, False),  # a subscription
        (TaskEvent.Kind.STATUS, "TASK_STATE_WORKING", settled, False),
        (TaskEvent.Kind.TASK, "TASK_STATE_FAILED", settled, True),
        (TaskEvent.Kind.TASK, "TASK_STATE_SUBMITTED", settled, False),
        # an artifact carries the task's state but never ends anything
        (TaskEvent.Kind.ARTIFACT, "TASK_STATE_COMPLETED", terminal, False),
    ]
    assert [is_final(kind, state, ends) for kind, state, ends, _ in cases] == [
        final for *_, final in cases
    ]


def _run_of(task_id: uuid.UUID) -> None:
    """A whole run as a worker records it: working, an artifact, completed."""
    task_status_record(task_id, TaskState.TASK_STATE_WORKING)
    artifact = Artifact(artifact_id="a1", parts=[Part(text="the answer")])
    event = TaskArtifactUpdateEvent(task_id=str(task_id), artifact=artifact)
    assert task_event_record(task_id=task_id, event=event)
    task_status_record(task_id, TaskState.TASK_STATE_COMPLETED)


def _follow(task_id: uuid.UUID, seq: int, **events_args) -> list:
    async def scenario():
        async with EventFollower(task_id, seq) as follower:
            return [item async for item in follower.events(**events_args)]

    return async_to_sync(scenario)()


def test_events_hands_out_the_log_in_order_until_the_final_event(submitted):
    # given a run's events in the log
    _run_of(submitted.task_id)
    # when a follower reads from the send's own event
    items = _follow(submitted.task_id, submitted.since_seq - 1)
    # then every event after it comes once, in order, and the completed status ends the stream
    first = submitted.since_seq
    assert [item.seq for item in items] == [first, first + 1, first + 2, first + 3]
    assert [item.response.WhichOneof("payload") for item in items] == [
        "task",
        "status_update",
        "artifact_update",
        "status_update",
    ]
    assert [item.final for item in items] == [False, False, False, True]
    assert items[2].response.artifact_update.artifact.parts[0].text == "the answer"
    assert items[-1].event_id == f"{submitted.task_id}:{first + 3}"
    # and one that starts later gets only what follows its seq
    assert [item.seq for item in _follow(submitted.task_id, first + 2)] == [first + 3]


def test_events_says_when_nothing_comes_and_stops_at_its_deadline(submitted):
    async def scenario():
        loop = asyncio.get_running_loop()
        async with EventFollower(submitted.task_id, submitted.since_seq) as follower:
            started = loop.time()
            items = [i async for i in follower.events(idle=0.1, deadline=started + 0.5)]
            return items, loop.time() - started, follower.seq

    items, waited, seq = async_to_sync(scenario)()
    # keep-alive marks (None) only: the task has nothing new; the stream ends at the deadline
    assert items and set(items) == {None}, items
    assert 0.5 <= waited < GUARD_SECONDS
    assert seq == submitted.since_seq


def _settle(task_id: uuid.UUID, seq: int, *, within: float, **follower_args) -> tuple[int, float]:
    """A `settled` wait from `seq`: the follower's seq after it, and how long it took."""

    async def scenario():
        loop = asyncio.get_running_loop()
        async with EventFollower(task_id, seq, **follower_args) as follower:
            started = loop.time()
            await follower.settled(deadline=started + within)
            return follower.seq, loop.time() - started

    return async_to_sync(scenario)()


def test_settled_returns_at_the_first_settled_state_in_the_log(submitted):
    task_status_record(submitted.task_id, TaskState.TASK_STATE_WORKING)
    task_status_record(submitted.task_id, TaskState.TASK_STATE_INPUT_REQUIRED, "which one?")
    seq, waited = _settle(submitted.task_id, submitted.since_seq, within=GUARD_SECONDS)
    assert seq == submitted.since_seq + 2  # it read up to the input-required status
    assert waited < GUARD_SECONDS / 2


def test_settled_waits_past_what_does_not_end_it_until_its_deadline(submitted):
    # given a task asking for input: settled for a send, but not the end a subscription waits for
    task_status_record(submitted.task_id, TaskState.TASK_STATE_INPUT_REQUIRED, "which one?")
    seq, waited = _settle(
        submitted.task_id, submitted.since_seq, within=0.5, ends_at=TERMINAL_STATES
    )
    assert seq == submitted.since_seq + 1  # it saw the status, and waited on
    assert 0.5 <= waited < GUARD_SECONDS
