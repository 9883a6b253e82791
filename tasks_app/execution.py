"""One agent run: an `a2a-sdk` AgentExecutor driven by a durable event queue.

Any executor written for the official SDK runs unchanged: it gets a RequestContext and an
EventQueue, and every event it enqueues is persisted (TaskEvent row, task updated), in order,
before the run ends; events enqueued together are written together. Runs are hosted by the
worker's runtime (tasks_app.runtime), many at once on one event loop; every ORM call goes to
the process's database threads.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.types import Message as MessageProto
from a2a.types import SendMessageConfiguration, SendMessageRequest, TaskState
from django.conf import settings
from google.protobuf.json_format import ParseDict

from a2a_platform.db import database_lost, db
from agents.executors import agent_executor_build
from agents.executors.platform import STATE_KEY

from .errors import A2AError
from .models import Task
from .selectors import (
    context_executor_state,
    context_messages_before,
    executor_state,
    task_for_cancel,
    task_for_run,
)
from .services import executor_state_save, task_claim, task_end, task_events_record
from .streams import SETTLED_STATES, EventFollower

logger = logging.getLogger(__name__)


# At most this many events in one write; an executor that gets this far ahead of its writes
# waits for them.
EVENTS_PER_WRITE = 100


class PlatformEventQueue(EventQueue):
    """Persists the events of one task, in order, as the executor goes on.

    `enqueue_event` hands the event to a writer and returns without waiting for the database,
    as the SDK's own queue does; events enqueued while a write is under way go together in the
    next one (one transaction, one ring): an echo run's three events are one write. The run
    waits for `flush()` before it ends, so every event is stored before the task is released.
    A write that fails (an event that is not valid) is raised to the executor at its next
    enqueue, and by `flush()`; the events before the bad one are kept. A write that lost the
    database also asks the run to stop (`stop`), to be handed back.
    """

    def __init__(self, task_id: uuid.UUID, stop: Stop | None = None) -> None:
        self.task_id = task_id
        self.stop = stop
        self.error: Exception | None = None
        self.released = False  # an event ended the task, and with it the run's hold
        self.lane_waiting = True  # ... and whether runs of its tenant waited in their lane then
        self._pending: list[Event] = []
        self._writer: asyncio.Future[None] | None = None

    async def enqueue_event(self, event: Event) -> None:
        if self.error is not None:
            raise self.error
        self._pending.append(event)
        if self._writer is None:
            self._writer = asyncio.ensure_future(self._write())
        if len(self._pending) >= EVENTS_PER_WRITE:
            await self.flush()  # an executor that never awaits anything else waits here

    async def flush(self) -> None:
        """Return once every event enqueued so far is stored; raise the write's error if one
        failed."""
        while self._writer is not None:
            # Shielded: a cancelled executor does not cancel the write of its earlier events.
            await asyncio.shield(self._writer)
        if self.error is not None:
            raise self.error

    async def _write(self) -> None:
        try:
            while self._pending and self.error is None:
                events = self._pending[:EVENTS_PER_WRITE]
                del self._pending[: len(events)]
                try:
                    recorded = await db(task_events_record)(task_id=self.task_id, events=events)
                except Exception as exc:  # the database: the run fails with the reason
                    self.error = exc
                    if self.stop is not None and database_lost(exc):
                        self.stop.request(Stop.DATABASE)
                else:
                    self.error = recorded.error
                    if recorded.released:
                        self.released, self.lane_waiting = True, recorded.lane_waiting
            self._pending.clear()  # after an error nothing more is stored
        finally:
            self._writer = None


class Run:
    """The platform's side of one run, for the kinds that need more than the SDK's context
    (agents.executors.platform.PlatformRun: the conversation, state kept between the runs of
    a task, events written from outside the run)."""

    def __init__(self, task: Task, queue: PlatformEventQueue) -> None:
        self.task_id = str(task.pk)
        self.context_id = task.context_id
        self.agent_path = f"{task.agent.tenant.slug}/{task.agent.slug}"
        self.owner = task.owner
        self._pk = task.pk
        self._queue = queue

    async def conversation(self, *, earlier: int) -> list[MessageProto]:
        return await db(context_messages_before)(task_id=self._pk, limit=earlier)

    async def state(self) -> dict[str, Any]:
        return await db(executor_state)(task_id=self._pk)

    async def state_save(self, data: dict[str, Any]) -> None:
        await db(executor_state_save)(task_id=self._pk, data=data)

    async def context_state(self) -> dict[str, Any]:
        return await db(context_executor_state)(task_id=self._pk)

    async def events_mark(self) -> int:
        await self._queue.flush()
        return await db(_last_seq)(self._pk)

    async def wait_settled(self, *, after: int, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        async with EventFollower(self._pk, after, ends_at=SETTLED_STATES) as follower:
            await follower.settled(deadline=loop.time() + timeout)
        return await db(_settled_after)(self._pk, after)


def _last_seq(task_pk: uuid.UUID) -> int:
    return Task.objects.values_list("last_seq", flat=True).get(pk=task_pk)


def _settled_after(task_pk: uuid.UUID, seq: int) -> bool:
    return Task.objects.filter(pk=task_pk, state__in=SETTLED_STATES, last_seq__gt=seq).exists()


class Stop:
    """Why a run stops early: the caller canceled the task, the worker is shutting down and
    hands the run back to the queue, or the run's writes lost the database (handed back too,
    by the agent's `worker_loss` policy)."""

    CANCEL = "cancel"
    HANDBACK = "handback"
    DATABASE = "database"

    def __init__(self) -> None:
        self.reason: str | None = None
        self.event = asyncio.Event()

    def request(self, reason: str) -> None:
        if self.reason is None:  # a cancel is not turned into a hand-back, nor the reverse
            self.reason = reason
            self.event.set()


class HandedBack(Exception):
    """The run was stopped unfinished for another worker to take over: the worker is stopping,
    or the run lost the database (`lost`, the error)."""

    def __init__(self, lost: BaseException | None = None) -> None:
        super().__init__()
        self.lost = lost


def _fail(task_id: uuid.UUID, reason: str) -> None:
    task_end(task_id=task_id, state=TaskState.TASK_STATE_FAILED, reason=reason)


Loaded = tuple[Task, MessageProto, Any]


def claim(
    *, task_id: uuid.UUID, job_id: str, runner: str, position: int
) -> tuple[str, Loaded | None]:
    """Claim the task for this run and, if claimed, read what the run needs: one hop."""
    outcome = task_claim(task_id=task_id, job_id=job_id, runner=runner)
    if outcome != "claimed":
        return outcome, None
    return outcome, task_for_run(task_id=task_id, position=position)


async def run(
    task_id: uuid.UUID,
    loaded: Loaded,
    configuration: dict[str, Any],
    extensions: list[str],
    stop: Stop,
) -> bool:
    """Run the agent on a task this worker has claimed (`loaded` by `claim`). True when an
    event of the run ended the task and so released it; otherwise the caller releases the
    task afterwards, which also fails it if the executor left it unsettled.

    Raises HandedBack when `stop` asks for a hand-back before the executor finished, or when
    the run lost the database (a write of its events, or the executor's own reads, failed so).
    """
    task, message, current = loaded
    agent = task.agent
    fail = db(_fail)
    try:
        executor = agent_executor_build(agent=agent)
    except Exception as exc:
        # The constructor's own words may quote its arguments, and the secrets are among them:
        # the client and the log then get the error's kind only.
        kind = type(exc).__name__
        if agent.executor_secrets_encrypted:
            logger.error("Cannot build executor for agent %s: %s", agent, kind)
            detail = f"{kind} (its message is withheld: it may quote the agent's secrets)"
        else:
            logger.exception("Cannot build executor for agent %s", agent)
            detail = str(exc)
        await fail(task_id, f"The agent's executor could not be started: {detail}")
        return False
    request = SendMessageRequest(message=message)
    if configuration:
        request.configuration.CopyFrom(ParseDict(configuration, SendMessageConfiguration()))
    context = RequestContext(
        call_context=ServerCallContext(
            tenant=f"{agent.tenant.slug}/{agent.slug}",
            # attempt: which run of this turn it is, 1 unless an earlier one was handed back by
            # a stopping worker, or its worker died and the agent's `worker_loss` is "retry".
            state={"owner": task.owner, "attempt": task.attempt},
            requested_extensions=set(extensions),
        ),
        request=request,
        task_id=str(task_id),
        context_id=task.context_id,
        task=current,
    )
    queue = PlatformEventQueue(task_id, stop)
    context.call_context.state[STATE_KEY] = Run(task, queue)
    execution = asyncio.ensure_future(executor.execute(context, queue))
    stopping = asyncio.ensure_future(stop.event.wait())
    try:
        await asyncio.wait({execution, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not execution.done() and stop.reason is None:  # the run itself was cancelled
            execution.cancel()
    if not execution.done():
        if stop.reason == Stop.CANCEL:
            await _cancel(task_id, execution, executor, context, queue)
            return False
        execution.cancel()
        await asyncio.gather(execution, return_exceptions=True)
        error = await _flush(queue)  # what it said before it stopped stays said
        raise HandedBack(error if stop.reason == Stop.DATABASE else None)
    error = await _flush(queue)  # a write that failed fails the run, however it ended
    if error is None:
        if execution.cancelled():
            await fail(task_id, "The agent's executor was cancelled by itself.")
            return False
        error = execution.exception()
    if error is None:
        # For the hand-over after the run (tasks_app.runtime): not asked when no run waited.
        task.lane_waiting = queue.lane_waiting
        return queue.released
    if database_lost(error):  # not the agent failing: the platform lost the database
        raise HandedBack(error)
    reason = error.message if isinstance(error, A2AError) else f"{type(error).__name__}: {error}"
    logger.warning("Agent %s failed on task %s: %s", agent, task_id, reason)
    await fail(task_id, f"The agent failed: {reason}")
    return False


async def cancel_outside_run(task_id: uuid.UUID) -> str:
    """An executor's cancel() for a task canceled while no run held it (waiting for input):
    for kinds whose work goes on outside between runs (`ExecutorKind.cancels_outside_runs`:
    an upstream A2A task, a tenant's job). The task is already canceled, so what cancel()
    enqueues is not recorded; what it does outside is the point."""
    task, current = await db(task_for_cancel)(task_id=task_id)
    agent = task.agent
    try:
        executor = agent_executor_build(agent=agent)
    except Exception as exc:
        logger.warning("Cannot build the executor of %s to cancel %s: %s", agent, task_id, exc)
        return "not built"
    context = RequestContext(
        call_context=ServerCallContext(
            tenant=f"{agent.tenant.slug}/{agent.slug}", state={"owner": task.owner}
        ),
        task_id=str(task_id),
        context_id=task.context_id,
        task=current,
    )
    queue = PlatformEventQueue(task_id)
    context.call_context.state[STATE_KEY] = Run(task, queue)
    try:
        await asyncio.wait_for(
            executor.cancel(context, queue), timeout=settings.A2A_CANCEL_TIMEOUT_SECONDS
        )
    except Exception:
        logger.warning("The executor's cancel() failed for task %s", task_id, exc_info=True)
        return "failed"
    await _flush(queue)
    return "canceled"


async def _cancel(
    task_id: uuid.UUID,
    execution: asyncio.Future[None],
    executor: AgentExecutor,
    context: RequestContext,
    queue: PlatformEventQueue,
) -> None:
    execution.cancel()
    await asyncio.gather(execution, return_exceptions=True)
    try:
        await asyncio.wait_for(
            executor.cancel(context, queue), timeout=settings.A2A_CANCEL_TIMEOUT_SECONDS
        )
    except Exception:
        logger.warning("The executor's cancel() failed for task %s", task_id, exc_info=True)
    await _flush(queue)
    # If the executor did not end the task itself, task_release ends it as canceled.


async def _flush(queue: PlatformEventQueue) -> Exception | None:
    """Wait until the run's events are stored; the error if a write failed (logged)."""
    try:
        await queue.flush()
    except Exception as exc:
        logger.warning("Events of task %s not stored: %s", queue.task_id, exc)
        return exc
    return None
