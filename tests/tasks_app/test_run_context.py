"""What a run reads beside its task (agents.executors.platform.PlatformRun): the conversation's
earlier messages, scoped to one agent, owner and context, and the state an executor keeps."""

from __future__ import annotations

import uuid

from a2a.types import (
    Message,
    Part,
    Role,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from agents.auth import Principal
from tasks_app.selectors import context_executor_state, context_messages_before, executor_state
from tasks_app.services import (
    executor_state_save,
    task_claim,
    task_events_record,
    task_release,
)
from tests.factories import task_send

ALICE = Principal(owner="key:alice")
BOB = Principal(owner="key:bob")


def answer(task_id, text, state=TaskState.TASK_STATE_COMPLETED):
    """The agent's answer as a run gives it: a status with its message."""
    from tasks_app.models import Task

    task = Task.objects.get(pk=task_id)
    if task.job_id:  # as a worker would: take the queued run first
        assert task_claim(task_id=task_id, job_id=task.job_id, runner="test") == "claimed"
    reply = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_AGENT, parts=[Part(text=text)])
    event = TaskStatusUpdateEvent(
        task_id=str(task_id),
        context_id=task.context_id,
        status=TaskStatus(state=state, message=reply),
    )
    assert task_events_record(task_id=task_id, events=[event]).count == 1
    task_release(task_id=task_id, executor_returned=True)
    return task.context_id


def texts(messages):
    return [(m.role, m.parts[0].text) for m in messages]


def test_the_conversation_is_the_earlier_tasks_of_one_agent_owner_and_context(
    make_tenant, make_agent
):
    tenant = make_tenant()
    agent, other_agent = make_agent(tenant, "a"), make_agent(tenant, "b")
    first = task_send(agent, text="hi").task_id
    context = answer(first, "hello")
    second = task_send(agent, text="how are you", context_id=context).task_id
    answer(second, "fine")
    third = task_send(agent, text="bye", context_id=context).task_id
    # Not the conversation: another owner's task in the same context, another agent's, another
    # context's.
    task_send(agent, text="bob here", context_id=context, principal=BOB)
    task_send(other_agent, text="elsewhere", context_id=context)
    task_send(agent, text="another chat")

    assert texts(context_messages_before(task_id=third, limit=10)) == [
        (Role.ROLE_USER, "hi"),
        (Role.ROLE_AGENT, "hello"),
        (Role.ROLE_USER, "how are you"),
        (Role.ROLE_AGENT, "fine"),
    ]
    # The limit keeps the latest messages; the task's own history is not included.
    assert texts(context_messages_before(task_id=third, limit=3)) == [
        (Role.ROLE_AGENT, "hello"),
        (Role.ROLE_USER, "how are you"),
        (Role.ROLE_AGENT, "fine"),
    ]
    assert context_messages_before(task_id=third, limit=0) == []
    assert context_messages_before(task_id=first, limit=10) == []


def test_an_answer_moved_into_the_history_is_not_given_twice(make_tenant, make_agent):
    agent = make_agent(make_tenant())
    first = task_send(agent, text="question").task_id
    context = answer(first, "which one?", TaskState.TASK_STATE_INPUT_REQUIRED)
    # the status goes to history
    task_send(agent, text="this one", context_id=context, task_id=first)
    answer(first, "done")
    later = task_send(agent, text="next", context_id=context).task_id
    assert texts(context_messages_before(task_id=later, limit=10)) == [
        (Role.ROLE_USER, "question"),
        (Role.ROLE_AGENT, "which one?"),
        (Role.ROLE_USER, "this one"),
        (Role.ROLE_AGENT, "done"),
    ]


def test_executor_state_is_kept_per_task_and_read_back_for_the_conversation(
    make_tenant, make_agent
):
    agent = make_agent(make_tenant())
    first = task_send(agent, text="one").task_id
    context = answer(first, "ok")
    assert executor_state(task_id=first) == {}
    executor_state_save(task_id=first, data={"upstream": "t-1"})
    executor_state_save(task_id=first, data={"upstream": "t-2"})  # replaced, not added
    assert executor_state(task_id=first) == {"upstream": "t-2"}
    second = task_send(agent, text="two", context_id=context).task_id
    assert executor_state(task_id=second) == {}
    assert context_executor_state(task_id=second) == {"upstream": "t-2"}
    # Another owner's task in the same context does not see it.
    bobs = task_send(agent, text="bob", context_id=context, principal=BOB).task_id
    assert context_executor_state(task_id=bobs) == {}
