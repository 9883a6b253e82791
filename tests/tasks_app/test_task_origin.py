"""A task remembers how the request that created it spoke (Task.dialect, Task.spelling): the
send writes both in its INSERT, and GetTask and CancelTask read them back from the same row as
the task (`with_origin`), or `task_origin` alone in one query, scoped as GetTask is."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Iterator
from typing import Any

import pytest
from a2a.types import GetTaskRequest, SendMessageRequest, TaskState
from asgiref.sync import async_to_sync
from django.db.backends.utils import CursorWrapper

from a2a_platform.versions import V0_1, V0_3, V1_0
from agents.auth import Principal
from tasks_app.models import Task
from tasks_app.operations import (
    Caller,
    TaskOrigin,
    message_send,
    task_cancel,
    task_get,
    task_origin,
)
from tests.conftest import require
from tests.factories import ALICE, task_create, user_message

pytestmark = pytest.mark.django_db(transaction=True)

BOB = Principal(owner="key:bob")
ADMIN = Principal(owner="key:root", is_tenant_admin=True)


def run(operation: Awaitable[Any]) -> Any:
    async def call() -> Any:
        return await operation

    return async_to_sync(call)()


@pytest.fixture
def caller(settings, no_worker, make_tenant, make_agent) -> Caller:
    require(bool(settings.REDIS_URL), "the doorbell is a shared (Redis) channel layer")
    return Caller(agent=make_agent(make_tenant()), principal=ALICE)


@pytest.fixture
def queries(monkeypatch) -> Iterator[list[str]]:
    """Every SQL statement run in this process, from any thread."""
    seen: list[str] = []
    real = CursorWrapper._execute

    def spy(self, sql, *args):
        seen.append(sql)
        return real(self, sql, *args)

    monkeypatch.setattr(CursorWrapper, "_execute", spy)
    return seen


def _send(caller: Caller) -> str:
    request = SendMessageRequest(message=user_message())
    request.configuration.return_immediately = True
    return run(message_send(caller=caller, request=request)).id


@pytest.mark.parametrize(
    ("dialect", "spelling"), [(V0_1, ""), (V0_3, ""), (V1_0, ""), (V1_0, "snake"), (V0_3, "camel")]
)
def test_a_new_task_keeps_the_dialect_and_spelling_of_the_send_that_made_it(
    caller, dialect, spelling
):
    task_id = _send(dataclasses.replace(caller, dialect=dialect, spelling=spelling))
    stored = Task.objects.get(pk=task_id)
    assert (stored.dialect, stored.spelling) == (dialect, spelling)
    expected = TaskOrigin(dialect=dialect, spelling=spelling)
    assert run(task_origin(caller=caller, task_id=task_id)) == expected
    # GetTask with the origin answers the same task it answers without it
    request = GetTaskRequest(id=task_id)
    task, origin = run(task_get(caller=caller, request=request, with_origin=True))
    assert origin == expected and task == run(task_get(caller=caller, request=request))
    as_json, origin = run(task_get(caller=caller, request=request, as_json=True, with_origin=True))
    assert origin == expected and as_json["id"] == task_id


def test_a_follow_up_in_another_dialect_leaves_the_origin_as_the_creator_made_it(caller):
    task = task_create(caller.agent, state=TaskState.TASK_STATE_INPUT_REQUIRED, reply="which?")
    assert (task.dialect, task.spelling) == ("", "")  # made below the operations: none recorded
    follow_up = SendMessageRequest(
        message=user_message("that", task_id=str(task.pk), context_id=task.context_id)
    )
    follow_up.configuration.return_immediately = True
    run(message_send(caller=dataclasses.replace(caller, dialect=V0_1), request=follow_up))
    assert run(task_origin(caller=caller, task_id=str(task.pk))) == TaskOrigin("", "")


def test_cancel_answers_with_the_origin_of_the_task_it_canceled(caller):
    task_id = _send(dataclasses.replace(caller, dialect=V0_1))
    task, origin = run(task_cancel(caller=caller, task_id=task_id, with_origin=True))
    assert task.id == task_id and task.status.state == TaskState.TASK_STATE_CANCELED
    assert origin == TaskOrigin(dialect=V0_1, spelling="")


def test_the_origin_of_a_task_the_caller_cannot_see_is_none(caller, make_agent):
    task_id = _send(dataclasses.replace(caller, dialect=V1_0))
    assert (
        run(task_origin(caller=dataclasses.replace(caller, principal=BOB), task_id=task_id)) is None
    )
    admin = dataclasses.replace(caller, principal=ADMIN)
    assert run(task_origin(caller=admin, task_id=task_id)) == TaskOrigin(V1_0, "")
    elsewhere = dataclasses.replace(caller, agent=make_agent(caller.agent.tenant, slug="other"))
    assert run(task_origin(caller=elsewhere, task_id=task_id)) is None
    for no_task in ("", "not-a-uuid", "00000000-0000-0000-0000-000000000000"):
        assert run(task_origin(caller=caller, task_id=no_task)) is None


def test_the_origin_costs_no_query_on_get_and_one_alone(caller, queries):
    task_id = _send(dataclasses.replace(caller, dialect=V0_3))
    request = GetTaskRequest(id=task_id)
    queries.clear()
    run(task_get(caller=caller, request=request))
    plain = len(queries)
    queries.clear()
    run(task_get(caller=caller, request=request, with_origin=True))
    assert len(queries) == plain
    queries.clear()
    run(task_origin(caller=caller, task_id=task_id))
    assert len(queries) == 1, queries
