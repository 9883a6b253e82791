"""The worker side of a task run: an `a2a-sdk` AgentExecutor driven by a durable event queue.

Any executor written for the official SDK runs unchanged: it gets a RequestContext and an
EventQueue, and every event it enqueues is persisted (TaskEvent row, task updated) before
`enqueue_event` returns.
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
from channels.db import database_sync_to_async
from django.conf import settings
from google.protobuf.json_format import ParseDict

from agents.executors import executor_build

from .errors import A2AError
from .models import INTERRUPTED_STATES, TERMINAL_STATES, Task
from .selectors import task_to_proto
from .services import (
    task_claim,
    task_end,
    task_event_record,
    task_lease_renew,
    task_release,
)

logger = logging.getLogger(__name__)


class PlatformEventQueue(EventQueue):
    """Persists each event of one task; the doorbell rings after each commit."""

    def __init__(self, task_id: uuid.UUID) -> None:
        self.task_id = task_id

    async def enqueue_event(self, event: Event) -> None:
        await database_sync_to_async(task_event_record)(task_id=self.task_id, event=event)


def task_run(
    *,
    task_id: uuid.UUID,
    job_id: str,
    position: int,
    configuration: dict[str, Any],
    extensions: list[str] | None = None,
) -> str:
    """Run the agent for the message at `position`. Returns how the claim went."""
    claim = task_claim(task_id=task_id, job_id=job_id)
    if claim != "claimed":
        return claim
    try:
        asyncio.run(_run(task_id, position, configuration, extensions or []))
    except Exception as exc:
        # Whatever broke outside the executor (the database, the platform), the task must not
        # be left working with no run behind it.
        logger.exception("Run of task %s failed", task_id)
        _fail(task_id, f"The platform could not run the agent ({type(exc).__name__}: {exc}).")
    finally:
        task_release(task_id=task_id)
    return claim


def _fail(task_id: uuid.UUID, reason: str) -> None:
    task_end(task_id=task_id, state=TaskState.TASK_STATE_FAILED, reason=reason)


def _load(task_id: uuid.UUID, position: int) -> tuple[Task, MessageProto, Any]:
    task = Task.objects.select_related("agent__tenant").get(pk=task_id)
    message = ParseDict(task.messages.get(position=position).data, MessageProto())
    return task, message, task_to_proto(task)


async def _run(
    task_id: uuid.UUID, position: int, configuration: dict[str, Any], extensions: list[str]
) -> None:
    task, message, current = await database_sync_to_async(_load)(task_id, position)
    agent = task.agent
    fail = database_sync_to_async(_fail)
    try:
        executor = executor_build(kind=agent.executor_kind, config=agent.executor_config)
    except Exception as exc:
        logger.exception("Cannot build executor for agent %s", agent)
        await fail(task_id, f"The agent's executor could not be started: {exc}")
        return
    request = SendMessageRequest(message=message)
    if configuration:
        request.configuration.CopyFrom(ParseDict(configuration, SendMessageConfiguration()))
    context = RequestContext(
        call_context=ServerCallContext(
            tenant=f"{agent.tenant.slug}/{agent.slug}",
            state={"owner": task.owner},
            requested_extensions=set(extensions),
        ),
        request=request,
        task_id=str(task_id),
        context_id=task.context_id,
        task=current,
    )
    queue = PlatformEventQueue(task_id)
    run = asyncio.ensure_future(executor.execute(context, queue))
    if await _supervise(task_id, run) == "cancel":
        await _cancel(task_id, run, executor, context, queue)
        return
    if run.cancelled():
        await fail(task_id, "The agent's executor was cancelled by itself.")
        return
    error = run.exception()
    if error is not None:
        reason = (
            error.message if isinstance(error, A2AError) else f"{type(error).__name__}: {error}"
        )
        logger.warning("Agent %s failed on task %s: %s", agent, task_id, reason)
        await fail(task_id, f"The agent failed: {reason}")
        return
    state = await database_sync_to_async(
        lambda: Task.objects.values_list("state", flat=True).get(pk=task_id)
    )()
    if state not in TERMINAL_STATES and state not in INTERRUPTED_STATES:
        await fail(task_id, f"The agent's executor returned while the task was still {state}.")


async def _supervise(task_id: uuid.UUID, run: asyncio.Future[None]) -> str:
    """Wait for the run, renewing its lease and watching for a cancel request."""
    poll = settings.A2A_POLL_INTERVAL_SECONDS
    while True:
        done, _ = await asyncio.wait({run}, timeout=poll)
        if done:
            return "done"
        if await database_sync_to_async(task_lease_renew)(task_id=task_id):
            return "cancel"


async def _cancel(
    task_id: uuid.UUID,
    run: asyncio.Future[None],
    executor: AgentExecutor,
    context: RequestContext,
    queue: EventQueue,
) -> None:
    run.cancel()
    await asyncio.gather(run, return_exceptions=True)
    try:
        await asyncio.wait_for(
            executor.cancel(context, queue), timeout=settings.A2A_CANCEL_TIMEOUT_SECONDS
        )
    except Exception:
        logger.warning("The executor's cancel() failed for task %s", task_id, exc_info=True)
    # If the executor did not end the task itself, task_release ends it as canceled.
