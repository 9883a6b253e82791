"""A task's events look for push configs only once it has one (Task.has_push_configs). A
database trigger sets the flag whatever code stores the config, so a config stored by code
that does not know of the flag (a process of the previous version during a rolling upgrade,
the admin, SQL) still gets its deliveries."""

from __future__ import annotations

import uuid

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
from push_app.models import Delivery, PushConfig
from tasks_app.models import Task
from tasks_app.services import message_send, task_event_record

ALICE = Principal(owner="key:alice")


def _task(agent) -> Task:
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="x")])
    outcome = message_send(
        agent=agent, principal=ALICE, request=SendMessageRequest(message=message)
    )
    return Task.objects.get(pk=outcome.task_id)


def _working(task: Task) -> None:
    status = TaskStatus(state=TaskState.TASK_STATE_WORKING)
    task_event_record(
        task_id=task.pk, event=TaskStatusUpdateEvent(task_id=str(task.pk), status=status)
    )


def test_a_task_without_configs_is_not_flagged_and_its_events_queue_nothing(
    make_tenant, make_agent
):
    task = _task(make_agent(make_tenant()))
    assert not task.has_push_configs
    _working(task)
    assert not Delivery.objects.filter(event__task=task).exists()


def test_a_config_stored_by_any_code_flags_its_task_and_gets_the_next_event(
    make_tenant, make_agent
):
    task = _task(make_agent(make_tenant()))
    # Not through push_app.services: as older code or the admin would store it.
    config = PushConfig.objects.create(
        task=task,
        config_id="plain",
        url="https://hooks.example/a2a",
        event_kinds=["status_update"],
    )
    task.refresh_from_db()
    assert task.has_push_configs
    _working(task)
    assert Delivery.objects.filter(config=config).count() == 1
