"""Reads: owner scoping, tenant-admin scope, ListTasks filters and keyset paging."""

from __future__ import annotations

import pytest
from a2a.types import ListTasksRequest, TaskState

from agents.auth import Principal
from tasks_app.errors import InvalidParamsError, TaskNotFoundError, UnsupportedOperationError
from tasks_app.models import Task
from tasks_app.selectors import task_get, task_list
from tests.factories import task_send

ALICE = Principal(owner="key:alice")
BOB = Principal(owner="key:bob")
ADMIN = Principal(owner="key:root", is_tenant_admin=True)


def test_get_is_scoped_by_owner_agent_and_admin(make_tenant, make_agent):
    tenant = make_tenant()
    agent, other_agent = make_agent(tenant, "a"), make_agent(tenant, "b")
    task_id = str(task_send(agent).task_id)
    assert task_get(agent=agent, principal=ALICE, task_id=task_id).id == task_id
    assert task_get(agent=agent, principal=ADMIN, task_id=task_id).id == task_id
    for agent_, principal in ((agent, BOB), (other_agent, ALICE), (other_agent, ADMIN)):
        with pytest.raises(TaskNotFoundError):
            task_get(agent=agent_, principal=principal, task_id=task_id)
    with pytest.raises(TaskNotFoundError):
        task_get(agent=agent, principal=ALICE, task_id="not-a-uuid")
    with pytest.raises(InvalidParamsError):
        task_get(agent=agent, principal=ALICE, task_id=task_id, history_length=-1)


def test_list_pages_through_everything_once_in_newest_first_order(make_tenant, make_agent):
    agent = make_agent(make_tenant())
    ids = [str(task_send(agent).task_id) for _ in range(7)]
    task_send(agent, principal=BOB)
    seen, token = [], ""
    while True:
        page = task_list(
            agent=agent, principal=ALICE, request=ListTasksRequest(page_size=3, page_token=token)
        )
        assert page.total_size == 7 and page.page_size == 3
        seen += [t.id for t in page.tasks]
        token = page.next_page_token
        if not token:
            break
    assert seen == list(reversed(ids))


def test_list_filters_and_validation(make_tenant, make_agent):
    agent = make_agent(make_tenant())
    a = str(task_send(agent, context_id="ctx-a").task_id)
    task_send(agent, context_id="ctx-b")
    Task.objects.filter(pk=a).update(state="TASK_STATE_COMPLETED")
    by_context = task_list(
        agent=agent, principal=ALICE, request=ListTasksRequest(context_id="ctx-a")
    )
    assert [t.id for t in by_context.tasks] == [a]
    by_state = task_list(
        agent=agent,
        principal=ALICE,
        request=ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED),
    )
    assert [t.id for t in by_state.tasks] == [a]
    no_history = task_list(agent=agent, principal=ALICE, request=ListTasksRequest(history_length=0))
    assert all(len(t.history) == 0 for t in no_history.tasks)
    for bad in (
        ListTasksRequest(page_size=101),
        ListTasksRequest(page_size=0),
        ListTasksRequest(page_token="garbage!"),
        ListTasksRequest(history_length=-2),
        ListTasksRequest(status=999),
    ):
        with pytest.raises(InvalidParamsError):
            task_list(agent=agent, principal=ALICE, request=bad)
    isolated = Principal(owner="anonymous", is_anonymous=True, can_list=False)
    with pytest.raises(UnsupportedOperationError, match="anonymous"):
        task_list(agent=agent, principal=isolated, request=ListTasksRequest())


def test_list_query_count_does_not_grow_with_the_page(
    make_tenant, make_agent, django_assert_max_num_queries
):
    agent = make_agent(make_tenant())
    for _ in range(20):
        task_send(agent)
    with django_assert_max_num_queries(4):
        page = task_list(
            agent=agent,
            principal=ALICE,
            request=ListTasksRequest(page_size=20, include_artifacts=True),
        )
    assert len(page.tasks) == 20 and all(len(t.history) == 1 for t in page.tasks)
    one = task_list(agent=agent, principal=ALICE, request=ListTasksRequest(history_length=1))
    assert all(len(t.history) == 1 for t in one.tasks)
