"""Tasks and task events in the admin: read-only pages (no add, change or delete), states as
the console names them, exact-id search, filters, and lists whose queries do not grow with
the rows shown or count a big table."""

from __future__ import annotations

import uuid

import pytest
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agents.auth import Principal
from tasks_app.admin import EstimatedCountPaginator
from tasks_app.models import TaskEvent
from tasks_app.services import message_send, task_event_record

ALICE = Principal(owner="key:alice")
TASKS = "/admin/tasks_app/task/"
EVENTS = "/admin/tasks_app/taskevent/"


@pytest.fixture
def admin_client(client, db):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw-123456789")
    client.force_login(user)
    return client


def run_task(agent, text="hello", context_id=""):
    """A task of `agent` taken to completed: an answer in its history, an artifact, events."""
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        context_id=context_id,
    )
    task_id = message_send(
        agent=agent, principal=ALICE, request=SendMessageRequest(message=message)
    ).task_id
    task_event_record(
        task_id=task_id,
        event=TaskArtifactUpdateEvent(
            task_id=str(task_id),
            artifact=Artifact(artifact_id="a1", name="out", parts=[Part(text=f"{text}-artifact")]),
        ),
    )
    task_event_record(
        task_id=task_id,
        event=TaskStatusUpdateEvent(
            task_id=str(task_id), status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
        ),
    )
    return task_id


@pytest.fixture
def tasks(make_tenant, make_agent):
    tenant = make_tenant()
    first, second = make_agent(tenant, "first"), make_agent(tenant, "second")
    return {
        "done": run_task(first, "done", context_id="ctx-done"),
        "other": run_task(second, "other", context_id="ctx-other"),
        "agents": (first, second),
    }


def test_the_task_list_is_read_only_and_names_states_as_the_console(admin_client, tasks):
    response = admin_client.get(TASKS)
    assert response.status_code == 200
    html = response.content.decode()
    assert str(tasks["done"]) in html and str(tasks["other"]) in html
    first, _ = tasks["agents"]
    assert str(first) in html and first.tenant.slug in html
    # the proto names, as on the console's task pages, in the list and in the filter
    assert "TASK_STATE_COMPLETED" in html and "?state__exact=TASK_STATE_FAILED" in html
    assert f"{TASKS}add/" not in html and 'value="delete_selected"' not in html
    assert admin_client.get(f"{TASKS}add/").status_code == 403


def test_the_task_page_shows_history_artifacts_and_a_link_to_its_events(admin_client, tasks):
    url = f"{TASKS}{tasks['done']}/change/"
    response = admin_client.get(url)
    assert response.status_code == 200
    html = response.content.decode()
    assert "done-artifact" in html and "ROLE_USER" in html and "ctx-done" in html
    assert f"{EVENTS}?task__exact={tasks['done']}" in html and "3 events" in html
    assert 'name="_save"' not in html and f"{url.removesuffix('change/')}delete/" not in html
    # nothing changes through it
    assert admin_client.post(url, {"owner": "mallory"}).status_code == 403
    assert admin_client.post(f"{TASKS}{tasks['done']}/delete/", {"post": "yes"}).status_code == 403


def test_tasks_filter_by_state_and_agent_and_search_by_exact_ids(admin_client, tasks):
    first, second = tasks["agents"]

    def listed(query):
        html = admin_client.get(TASKS + query).content.decode()
        return {name for name in ("done", "other") if str(tasks[name]) in html}

    assert listed("?state__exact=TASK_STATE_COMPLETED") == {"done", "other"}
    assert listed("?state__exact=TASK_STATE_WORKING") == set()
    assert listed(f"?agent__id__exact={second.pk}") == {"other"}
    assert listed(f"?q={tasks['done']}") == {"done"}
    assert listed("?q=ctx-other") == {"other"}
    # exact ids only: a part of one matches nothing
    assert listed(f"?q={str(tasks['done'])[:8]}") == set()
    assert listed("?q=ctx") == set()
    # the agent filter names agents as tenant/slug
    html = admin_client.get(TASKS).content.decode()
    assert f"?agent__id__exact={first.pk}" in html and str(second) in html


def test_the_event_log_is_read_only_and_filtered_by_task(admin_client, tasks):
    response = admin_client.get(EVENTS)
    assert response.status_code == 200
    html = response.content.decode()
    assert f"{EVENTS}add/" not in html and 'value="delete_selected"' not in html
    assert admin_client.get(f"{EVENTS}add/").status_code == 403
    of_done = TaskEvent.objects.filter(task_id=tasks["done"])
    assert of_done.count() == 3
    for query in (f"?task__exact={tasks['done']}", f"?q={tasks['done']}", "?q=ctx-done"):
        page = admin_client.get(EVENTS + query)
        assert page.status_code == 200, query
        shown = {e.pk for e in page.context["cl"].result_list}
        assert shown == set(of_done.values_list("pk", flat=True)), query
    first_events = admin_client.get(EVENTS + "?kind__exact=task").context["cl"].result_list
    assert [e.kind for e in first_events] == ["task", "task"]
    event = of_done.get(seq=3)
    page = admin_client.get(f"{EVENTS}{event.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "TASK_STATE_COMPLETED" in html and "statusUpdate" in html
    assert 'name="_save"' not in html
    assert admin_client.post(f"{EVENTS}{event.pk}/change/", {"seq": 9}).status_code == 403


@pytest.mark.parametrize("url", [TASKS, EVENTS])
def test_a_list_page_reads_the_same_number_of_times_for_more_rows(
    admin_client, make_tenant, make_agent, url
):
    # given one task, then five more on other agents and tenants
    run_task(make_agent(make_tenant(), "a"))
    admin_client.get(url)  # sessions, content types: read once per process or per login

    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(url).status_code == 200
        return len(captured)

    few = queries()
    for n in range(5):
        run_task(make_agent(make_tenant(), f"b{n}"))
    # then the page reads no more often: no query per row, per agent or per tenant
    assert queries() == few


def test_a_big_unfiltered_table_is_estimated_not_counted(make_tenant, make_agent):
    run_task(make_agent(make_tenant(), "a"))
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {TaskEvent._meta.db_table}")
    events = TaskEvent.objects.order_by("-id")

    class Estimating(EstimatedCountPaginator):
        exact_below = 0  # as if the table were big

    with CaptureQueriesContext(connection) as captured:
        assert Estimating(events, 100).count == 3
    assert not any("COUNT(" in q["sql"].upper() for q in captured)
    # a filtered list, and a small table, are counted exactly
    with CaptureQueriesContext(connection) as captured:
        assert Estimating(events.filter(kind="task"), 100).count == 1
        assert EstimatedCountPaginator(events, 100).count == 3
    assert sum("COUNT(" in q["sql"].upper() for q in captured) == 2
