"""Tasks made as the platform makes them: a user's message sent through the service every binding
calls (tasks_app.services.message_send), then moved to a state as a worker moves it (it claims
the queued run, records the status event, and releases the run once it stopped). No row is
written by hand."""

from __future__ import annotations

import uuid
from typing import Any

from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from agents.auth import Principal
from agents.models import Agent
from tasks_app.models import INTERRUPTED_STATES, TERMINAL_STATES, Task
from tasks_app.services import (
    SendOutcome,
    message_send,
    task_claim,
    task_event_record,
    task_release,
)

ALICE = Principal(owner="key:alice")


def user_message(text: str = "hi", **fields: Any) -> Message:
    fields.setdefault("message_id", str(uuid.uuid4()))
    return Message(role=Role.ROLE_USER, parts=[Part(text=text)], **fields)


def task_send(
    agent: Agent,
    *,
    text: str = "hi",
    principal: Principal = ALICE,
    context_id: str = "",
    task_id: uuid.UUID | str = "",
    new_task_id: uuid.UUID | None = None,
    push_url: str = "",
    **message_fields: Any,
) -> SendOutcome:
    """`principal` sends `text` to `agent`: a new task, or the next turn of `task_id`. With
    `push_url`, the send carries a push config for it (as a client's inline config)."""
    message = user_message(text, context_id=context_id, task_id=str(task_id), **message_fields)
    request = SendMessageRequest(message=message)
    if push_url:
        request.configuration.task_push_notification_config.url = push_url
    return message_send(agent=agent, principal=principal, request=request, new_task_id=new_task_id)


def task_status_record(task_id: uuid.UUID, state: int, reply: str = "") -> None:
    """The status event a worker records for the agent (with the agent's message `reply`)."""
    task = Task.objects.get(pk=task_id)
    event = TaskStatusUpdateEvent(
        task_id=str(task_id), context_id=task.context_id, status=TaskStatus(state=state)
    )
    if reply:
        event.status.message.CopyFrom(
            Message(message_id=str(uuid.uuid4()), role=Role.ROLE_AGENT, parts=[Part(text=reply)])
        )
    assert task_event_record(task_id=task_id, event=event), f"no event recorded for {task_id}"


def task_create(
    agent: Agent,
    *,
    state: int = TaskState.TASK_STATE_SUBMITTED,
    reply: str = "",
    **send_fields: Any,
) -> Task:
    """A new task of `agent` (sent with `task_send`'s fields) in `state`: as the send left it
    (submitted, its run queued), or as a worker left it after its status event (with `reply`,
    the agent's message): still running when working, released when it asks for input or
    ended. The row as it is then."""
    outcome = task_send(agent, **send_fields)
    if state == TaskState.TASK_STATE_SUBMITTED:
        return Task.objects.get(pk=outcome.task_id)
    job_id = Task.objects.values_list("job_id", flat=True).get(pk=outcome.task_id)
    if job_id:  # the run the send queued: a worker takes it before it records anything
        claimed = task_claim(task_id=outcome.task_id, job_id=job_id, runner="tests.factories")
        assert claimed == "claimed", claimed
    task_status_record(outcome.task_id, state, reply)
    if job_id and TaskState.Name(state) in TERMINAL_STATES | INTERRUPTED_STATES:
        task_release(task_id=outcome.task_id, executor_returned=True)
    return Task.objects.get(pk=outcome.task_id)
