"""The console's task pages: the scoped task list with its filters and keyset pages, a task's
page (history, artifacts, timeline) and its live event stream, against real PostgreSQL; the
stream also end to end, with real daphne and Celery worker processes and a logged-in browser
session driven by httpx."""

from __future__ import annotations

import base64
import html
import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from a2a.types import (
    Artifact,
    Message,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from asgiref.sync import async_to_sync
from django.db import transaction
from django.urls import reverse
from google.protobuf.json_format import ParseDict

from agents.auth import Principal
from agents.models import Membership
from tasks_app.models import Task, TaskEvent
from tasks_app.services import task_claim, task_event_record
from tests.factories import task_create

TASK_ROW = re.compile(r'<tr data-task-id="([0-9a-f-]{36})">')


# --- data ------------------------------------------------------------------------------------


def agent_message(parts: list[dict]) -> Message:
    return ParseDict(
        {"messageId": str(uuid.uuid4()), "role": "ROLE_AGENT", "parts": parts}, Message()
    )


def set_status(task: Task, state: int, parts: list[dict] | None = None) -> None:
    event = TaskStatusUpdateEvent(task_id=str(task.pk), status=TaskStatus(state=state))
    if parts:
        event.status.message.CopyFrom(agent_message(parts))
    assert task_event_record(task_id=task.pk, event=event)


def add_artifact(task: Task, artifact: dict) -> None:
    event = TaskArtifactUpdateEvent(task_id=str(task.pk), artifact=ParseDict(artifact, Artifact()))
    assert task_event_record(task_id=task.pk, event=event)


def complete(task: Task, text: str = "done") -> None:
    set_status(task, TaskState.TASK_STATE_WORKING)
    add_artifact(task, {"artifactId": "a1", "name": "answer", "parts": [{"text": text}]})
    set_status(task, TaskState.TASK_STATE_COMPLETED, [{"text": text}])


def at(task: Task, moment: datetime) -> None:
    """Put the task's last status change at `moment` (the services stamp `now`)."""
    Task.objects.filter(pk=task.pk).update(status_timestamp=moment)


def listed(client, **query) -> list[str]:
    response = client.get(reverse("console:tasks"), query)
    assert response.status_code == 200
    return TASK_ROW.findall(response.content.decode())


def task_url(task: Task, name: str = "console:task") -> str:
    return reverse(name, kwargs={"tenant_slug": task.tenant.slug, "task_id": str(task.pk)})


def problems(body: str) -> list[str]:
    box = re.search(r'<ul class="messages" id="filter-errors">(.*?)</ul>', body, re.S)
    if box is None:
        return []
    return [html.unescape(p) for p in re.findall(r"<li[^>]*>(.*?)</li>", box.group(1))]


# --- login and scoping -----------------------------------------------------------------------


def test_pages_need_a_login(client, world):
    task = task_create(world["agent_a"])
    for url in (reverse("console:tasks"), task_url(task), task_url(task, "console:task-events")):
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("console:login"))
        assert not response.streaming


def test_list_shows_only_the_tasks_of_the_users_tenants(client, world):
    task_a, task_b = task_create(world["agent_a"]), task_create(world["agent_b"])

    client.force_login(world["member_a"])
    assert listed(client) == [str(task_a.pk)]
    client.force_login(world["member_b"])
    assert listed(client) == [str(task_b.pk)]
    client.force_login(world["operator"])
    assert sorted(listed(client)) == sorted([str(task_a.pk), str(task_b.pk)])


def test_a_member_cannot_filter_into_another_tenant(client, world):
    task_create(world["agent_b"])
    client.force_login(world["member_a"])
    response = client.get(reverse("console:tasks"), {"agent": f"{world['b'].slug}/beta"})
    body = response.content.decode()
    assert response.status_code == 200 and not TASK_ROW.findall(body)
    assert problems(body) == [
        "Agent (agent): not an agent you can see; pick one from the list (values look like "
        "<tenant>/<agent>)."
    ]
    assert world["b"].slug not in body  # neither echoed nor offered in the agent choices


def test_rows_show_the_task_columns(client, world):
    task = task_create(
        world["agent_a"], principal=Principal(owner="key:carol"), context_id="ctx-42"
    )
    client.force_login(world["member_a"])
    body = client.get(reverse("console:tasks")).content.decode()
    row = re.search(rf'<tr data-task-id="{task.pk}">(.*?)</tr>', body, re.S).group(1)
    assert f'href="{task_url(task)}"' in row
    assert f"{world['a'].slug}/alpha" in row and "TASK_STATE_SUBMITTED" in row
    assert "ctx-42" in row and "key:carol" in row
    assert task.status_timestamp.strftime("%Y-%m-%d %H:%M:%S") in row
    assert 'id="task-list"' in body


# --- filters ---------------------------------------------------------------------------------


def test_filter_by_agent(client, world, make_agent):
    gamma = make_agent(world["a"], "gamma")
    on_alpha, on_gamma, on_beta = (
        task_create(world["agent_a"]),
        task_create(gamma),
        task_create(world["agent_b"]),
    )
    client.force_login(world["operator"])
    assert listed(client, agent=f"{world['a'].slug}/gamma") == [str(on_gamma.pk)]
    assert listed(client, agent=f"{world['a'].slug}/alpha") == [str(on_alpha.pk)]
    assert listed(client, agent=f"{world['b'].slug}/beta") == [str(on_beta.pk)]


def test_filter_by_state(client, world):
    submitted, done = task_create(world["agent_a"]), task_create(world["agent_a"])
    complete(done)
    client.force_login(world["member_a"])
    assert listed(client, state="TASK_STATE_COMPLETED") == [str(done.pk)]
    assert listed(client, state="TASK_STATE_SUBMITTED") == [str(submitted.pk)]
    assert listed(client, state="TASK_STATE_FAILED") == []


def test_filter_by_context(client, world):
    first = task_create(world["agent_a"], context_id="ctx-one")
    task_create(world["agent_a"], context_id="ctx-two")
    task_create(world["agent_a"], context_id="ctx-one-and-more")  # exact match only
    client.force_login(world["member_a"])
    assert listed(client, context="ctx-one") == [str(first.pk)]


def test_filter_by_time(client, world):
    tasks = [task_create(world["agent_a"]) for _ in range(3)]
    for day, task in enumerate(tasks, start=1):
        at(task, datetime(2024, 1, day, 10, 0, tzinfo=UTC))
    one, two, three = (str(t.pk) for t in tasks)
    client.force_login(world["member_a"])
    assert listed(client, since="2024-01-02T00:00") == [three, two]
    assert listed(client, since="2024-01-02T10:00") == [three, two]  # inclusive
    assert listed(client, until="2024-01-02T10:00") == [one]  # exclusive
    assert listed(client, since="2024-01-01T12:00", until="2024-01-03T09:59") == [two]


def test_counts_by_state_follow_the_agent_filter(client, world, make_agent):
    gamma = make_agent(world["a"], "gamma")
    complete(task_create(world["agent_a"]))
    task_create(world["agent_a"])
    task_create(world["agent_a"])
    task_create(gamma)
    client.force_login(world["member_a"])

    def counts(**query) -> dict[str, int]:
        body = client.get(reverse("console:tasks"), query).content.decode()
        section = re.search(r'id="state-counts">(.*?)</section>', body, re.S).group(1)
        found = re.findall(r'data-state="(\w+)"[^>]*>\w+ <b class="count">(\d+)</b>', section)
        return {state: int(n) for state, n in found}

    assert counts() == {"TASK_STATE_SUBMITTED": 3, "TASK_STATE_COMPLETED": 1}
    # The counts ignore the other filters, so they say what each state filter would find.
    assert counts(agent=f"{world['a'].slug}/alpha", state="TASK_STATE_COMPLETED") == {
        "TASK_STATE_SUBMITTED": 2,
        "TASK_STATE_COMPLETED": 1,
    }
    assert counts(agent=f"{world['a'].slug}/gamma") == {"TASK_STATE_SUBMITTED": 1}


@pytest.mark.parametrize(
    "query, expected",
    [
        (
            {"state": "TASK_STATE_DONE"},
            "State (state): TASK_STATE_DONE is not a task state; pick one from the list "
            "(e.g. TASK_STATE_COMPLETED).",
        ),
        (
            {"since": "yesterday"},
            "Updated since (since): Enter a date and time like 2025-01-31T14:30 (UTC).",
        ),
        (
            {"until": "2024-13-45T10:00"},
            "Updated before (until): Enter a date and time like 2025-01-31T14:30 (UTC).",
        ),
        (
            {"since": "2024-01-02T00:00", "until": "2024-01-01T00:00"},
            "Updated before (until): must be later than 'Updated since'.",
        ),
        (
            {"agent": "nobody/nothing"},
            "Agent (agent): not an agent you can see; pick one from the list (values look like "
            "<tenant>/<agent>).",
        ),
        (
            {"context": "c" * 201},
            "Context id (context): Ensure this value has at most 200 characters (it has 201).",
        ),
        (
            {"after": "not-a-cursor!"},
            "Page (after): this is not a page link this console made; start again from the "
            "first page.",
        ),
        (
            {
                "after": base64.urlsafe_b64encode(
                    b"0001-01-01T00:00:00+01:00|00000000-0000-0000-0000-000000000000"
                ).decode()
            },
            "Page (after): this is not a page link this console made; start again from the "
            "first page.",
        ),
        (
            {"after": base64.urlsafe_b64encode(b"2024-01-01T00:00:00|nope").decode()},
            "Page (after): this is not a page link this console made; start again from the "
            "first page.",
        ),
    ],
)
def test_bad_filter_values_are_explained_on_the_page(client, world, query, expected):
    task_create(world["agent_a"])
    client.force_login(world["member_a"])
    response = client.get(reverse("console:tasks"), query)
    assert response.status_code == 200
    body = response.content.decode()
    assert problems(body) == [expected]
    assert not TASK_ROW.findall(body)  # nothing shown that the filters did not select


# --- keyset pages ----------------------------------------------------------------------------


def test_pages_walk_every_task_once_newest_first(client, world):
    tasks = [task_create(world["agent_a"], context_id="paged") for _ in range(107)]
    task_create(world["agent_b"], context_id="paged")  # another tenant's: never on any page
    base = datetime(2024, 6, 1, tzinfo=UTC)
    for n, task in enumerate(tasks):
        # Runs of equal timestamps, some straddling page boundaries: the id breaks the ties.
        at(task, base + timedelta(seconds=n // 7))
    expected = [
        str(pk)
        for pk in Task.objects.filter(pk__in=[t.pk for t in tasks])
        .order_by("-status_timestamp", "-id")
        .values_list("pk", flat=True)
    ]
    client.force_login(world["member_a"])

    pages, url = [], reverse("console:tasks") + f"?agent={world['a'].slug}/alpha&context=paged"
    while url:
        body = client.get(url).content.decode()
        pages.append(TASK_ROW.findall(body))
        link = re.search(r'<a id="next-page" class="button" href="([^"]+)"', body)
        url = reverse("console:tasks") + html.unescape(link.group(1)) if link else None
        if link:  # the filters ride along with the cursor
            assert f"agent={world['a'].slug}%2Falpha" in url and "context=paged" in url
    assert [len(p) for p in pages] == [50, 50, 7]
    assert [pk for page in pages for pk in page] == expected


def test_a_full_last_page_has_no_next_link(client, world):
    for _ in range(50):
        task_create(world["agent_a"])
    client.force_login(world["member_a"])
    body = client.get(reverse("console:tasks")).content.decode()
    assert len(TASK_ROW.findall(body)) == 50 and 'id="next-page"' not in body


# --- a task's page ---------------------------------------------------------------------------


@pytest.fixture
def rich_task(world):
    """A completed task whose history and artifacts hold every kind of part, and hostile text.

    The test plays the agent: the run is claimed in the same transaction as the send, so a
    live worker that receives the queued job (in transactional tests) finds nothing to do."""
    with transaction.atomic():
        task = task_create(world["agent_a"], text="<script>alert('user')</script>")
        assert task_claim(task_id=task.pk, job_id=task.job_id) == "claimed"
    Task.objects.filter(pk=task.pk).update(metadata={"ticket": "T-9"})
    set_status(task, TaskState.TASK_STATE_WORKING, [{"text": "thinking <b>hard</b>"}])
    add_artifact(
        task,
        {
            "artifactId": "report-1",
            "name": "Report",
            "description": "The <i>summary</i>",
            "parts": [
                {"text": "line one\nline two"},
                {"data": {"score": 7, "tags": ["a", "b"]}},
                {
                    "raw": base64.b64encode(b"x" * 2048).decode(),
                    "filename": "r.bin",
                    "mediaType": "application/octet-stream",
                },
                {
                    "url": "https://files.example.com/r.pdf",
                    "filename": "r.pdf",
                    "mediaType": "application/pdf",
                },
                {"url": "javascript:alert(1)", "filename": "evil"},
            ],
        },
    )
    set_status(task, TaskState.TASK_STATE_COMPLETED, [{"text": "All done."}])
    task.refresh_from_db()
    return task


def test_task_page_shows_status_history_artifacts_and_timeline(client, world, rich_task):
    client.force_login(world["member_a"])
    response = client.get(task_url(rich_task))
    assert response.status_code == 200
    body = response.content.decode()

    state = re.search(r'<span id="task-state" class="([^"]+)">([^<]+)</span>', body)
    assert state.groups() == ("state s-task_state_completed", "TASK_STATE_COMPLETED")
    agent_link = reverse(
        "console:agent", kwargs={"tenant_slug": world["a"].slug, "agent_slug": "alpha"}
    )
    assert f'id="task-agent" href="{agent_link}"' in body
    assert "All done." in body and rich_task.context_id in body and "key:alice" in body
    assert "&quot;ticket&quot;: &quot;T-9&quot;" in body

    history = re.search(r'<section class="card" id="history">(.*?)</section>', body, re.S)[1]
    assert history.count('<article class="message') == 2  # the user's, the moved status
    assert "&lt;script&gt;alert(&#x27;user&#x27;)&lt;/script&gt;" in history
    assert "thinking &lt;b&gt;hard&lt;/b&gt;" in history and "ROLE_AGENT" in history

    artifacts = re.search(r'<section class="card" id="artifacts">(.*?)</section>', body, re.S)[1]
    assert "Report" in artifacts and "The &lt;i&gt;summary&lt;/i&gt;" in artifacts
    assert "line one<br>line two" in artifacts
    assert "&quot;score&quot;: 7" in artifacts and "&quot;tags&quot;: [" in artifacts
    assert "r.bin" in artifacts and "application/octet-stream" in artifacts
    assert "2.0\xa0KB" in artifacts
    assert '<a href="https://files.example.com/r.pdf" rel="noopener noreferrer nofollow"' in (
        artifacts
    )
    assert 'href="javascript:' not in body
    assert '<code class="url">javascript:alert(1)</code>' in artifacts
    assert "<script>alert" not in body and "<b>hard</b>" not in body

    rows = re.findall(r'<tr class="event" data-seq="(\d+)" data-kind="(\w+)">', body)
    assert rows == [
        ("1", "task"),
        ("2", "status_update"),
        ("3", "artifact_update"),
        ("4", "status_update"),
    ]
    timeline = re.search(r'<tbody id="timeline">(.*?)</tbody>', body, re.S)[1]
    assert "Status TASK_STATE_WORKING: thinking &lt;b&gt;hard&lt;/b&gt;" in timeline
    assert "Artifact Report: line one line two [data] [file r.bin] [url r.pdf] [url evil]" in (
        timeline
    )
    assert "<details><summary>JSON</summary>" in timeline
    assert "&quot;artifactUpdate&quot;" in timeline
    events = re.search(r'<section class="card" id="events"(.*?)>', body, re.S)[1]
    assert f'data-events-url="{task_url(rich_task, "console:task-events")}"' in events
    assert 'data-last-seq="4"' in events


def test_task_page_shows_the_token_usage_a_model_agent_reported(client, world):
    task = task_create(world["agent_a"])
    event = TaskStatusUpdateEvent(
        task_id=str(task.pk), status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED)
    )
    usage = {"model": "m-1", "promptTokens": 12, "completionTokens": 30, "totalTokens": 42}
    event.metadata.update({"usage": usage})
    assert task_event_record(task_id=task.pk, event=event)
    plain = task_create(world["agent_a"])
    client.force_login(world["member_a"])

    body = client.get(task_url(task)).content.decode()

    shown = re.search(r'<td id="task-usage">([^<]*)</td>', body)
    assert shown[1] == "m-1: 12 prompt + 30 completion = 42 tokens"
    assert 'id="task-usage"' not in client.get(task_url(plain)).content.decode()


def test_another_tenants_task_and_its_events_are_404(client, world):
    task = task_create(world["agent_a"])
    client.force_login(world["member_b"])
    assert client.get(task_url(task)).status_code == 404
    assert client.get(task_url(task, "console:task-events")).status_code == 404
    # Under B's own tenant slug the task is not found either.
    for name in ("console:task", "console:task-events"):
        url = reverse(name, kwargs={"tenant_slug": world["b"].slug, "task_id": str(task.pk)})
        assert client.get(url).status_code == 404
    client.force_login(world["operator"])
    assert client.get(task_url(task)).status_code == 200


@pytest.mark.parametrize("task_id", ["not-a-uuid", "1234", str(uuid.uuid4())])
def test_malformed_or_unknown_task_ids_are_404(client, world, task_id):
    client.force_login(world["member_a"])
    for name in ("console:task", "console:task-events"):
        url = reverse(name, kwargs={"tenant_slug": world["a"].slug, "task_id": task_id})
        assert client.get(url).status_code == 404


# --- the event stream, in process -----------------------------------------------------------


@dataclass
class SseRead:
    events: list[dict] = field(default_factory=list)  # {"id", "event", "data"}
    keepalives: int = 0


def parse_sse(lines) -> SseRead:
    read, current = SseRead(), {}
    for line in lines:
        if line.startswith(":"):
            read.keepalives += 1
        elif line.startswith(("id: ", "event: ", "data: ")):
            name, _, value = line.partition(": ")
            current[name] = json.loads(value) if name == "data" else value
        elif line == "" and current:
            read.events.append(current)
            current = {}
    return read


async def _read_all(content) -> bytes:
    return b"".join([chunk async for chunk in content])


def stream(client, task: Task, headers: dict | None = None, **query) -> SseRead:
    response = client.get(task_url(task, "console:task-events"), query, headers=headers or {})
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    assert response["Cache-Control"] == "no-store" and response["X-Accel-Buffering"] == "no"
    body = async_to_sync(_read_all)(response.streaming_content).decode()
    return parse_sse(body.split("\n"))


# The stream's reads go through database_sync_to_async, which drops a connection left inside a
# transaction: these tests commit their data instead of rolling back one transaction.
@pytest.mark.django_db(transaction=True)
def test_stream_of_a_finished_task_replays_what_follows_and_ends(client, world, rich_task):
    client.force_login(world["member_a"])

    everything = stream(client, rich_task, after=0)
    frames = [e for e in everything.events if "id" in e]
    assert [e["id"] for e in frames] == ["1", "2", "3", "4"]
    assert [e["data"]["seq"] for e in frames] == [1, 2, 3, 4]
    assert [e["data"]["kind"] for e in frames] == [
        "task",
        "status_update",
        "artifact_update",
        "status_update",
    ]
    rows = TaskEvent.objects.filter(task=rich_task).order_by("seq")
    for frame, row in zip(frames, rows, strict=True):
        assert frame["data"]["state"] == row.state and frame["data"]["data"] == row.data
        assert datetime.fromisoformat(frame["data"]["created_at"]) == row.created_at
    assert frames[-1]["data"]["summary"] == "Status TASK_STATE_COMPLETED: All done."
    assert everything.events[-1] == {"event": "end", "data": {"state": "TASK_STATE_COMPLETED"}}

    rest = stream(client, rich_task, after=2)
    assert [e.get("id") for e in rest.events] == ["3", "4", None]
    # A reconnecting EventSource names the last event it saw; that wins over the URL's `after`.
    resumed = stream(client, rich_task, headers={"Last-Event-ID": "3"}, after=0)
    assert [e.get("id") for e in resumed.events] == ["4", None]
    # Nothing after the end: the stream says so at once.
    assert stream(client, rich_task, after=4).events == [
        {"event": "end", "data": {"state": "TASK_STATE_COMPLETED"}}
    ]


@pytest.mark.parametrize("after", ["-1", "5", "two", "1.5"])
def test_stream_refuses_a_seq_the_task_does_not_have(client, world, rich_task, after):
    client.force_login(world["member_a"])
    response = client.get(task_url(rich_task, "console:task-events"), {"after": after})
    assert response.status_code == 400 and not response.streaming
    assert b"0 to 4" in response.content


# --- end to end ------------------------------------------------------------------------------


def console_login(http: httpx.Client, base: str, username: str, password: str) -> None:
    login = http.get(f"{base}/console/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    response = http.post(
        f"{base}/console/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302 and response.headers["location"] == "/console/"


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_task_events_stream_live_until_the_task_ends(
    live_platform, make_tenant, make_agent, make_key, django_user_model
):
    # given a member of a tenant whose echo agent takes a second to answer
    tenant = make_tenant()
    agent = make_agent(tenant, "slow", config={"delay_seconds": 1})
    key = make_key(tenant)
    user = django_user_model.objects.create_user("watcher", password="pw-watcher")
    Membership.objects.create(user=user, tenant=tenant, role="member")
    base = live_platform.url

    with httpx.Client(timeout=30) as http:
        console_login(http, base, "watcher", "pw-watcher")
        # when a message is sent without waiting for the answer
        send = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {
                    "messageId": str(uuid.uuid4()),
                    "role": "ROLE_USER",
                    "parts": [{"text": "watch me"}],
                },
                "configuration": {"returnImmediately": True},
            },
        }
        answer = http.post(
            live_platform.agent_url(agent),
            json=send,
            headers={"A2A-Version": "1.0", "X-API-Key": key},
        )
        task_id = answer.json()["result"]["task"]["id"]
        assert answer.json()["result"]["task"]["status"]["state"] in (
            "TASK_STATE_SUBMITTED",
            "TASK_STATE_WORKING",
        )
        # and its console event stream is followed from the start
        url = f"{base}/console/t/{tenant.slug}/tasks/{task_id}/events"
        with http.stream("GET", url, params={"after": 0}) as response:
            headers = response.headers
            read = parse_sse(list(response.iter_lines()))
        page = http.get(f"{base}/console/t/{tenant.slug}/tasks/{task_id}/")

    # then every event arrives once, in order, and the stream ends with the task
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["cache-control"] == "no-store"
    frames = [e for e in read.events if "id" in e]
    seqs = [e["data"]["seq"] for e in frames]
    assert seqs == list(range(1, len(seqs) + 1)) and [int(e["id"]) for e in frames] == seqs
    assert seqs[-1] == Task.objects.get(pk=task_id).last_seq
    states = [e["data"]["state"] for e in frames]
    assert states[0] == "TASK_STATE_SUBMITTED" and "TASK_STATE_WORKING" in states
    assert states[-1] == "TASK_STATE_COMPLETED"
    assert any(e["data"]["kind"] == "artifact_update" for e in frames)
    assert frames[-1]["data"]["summary"] == "Status TASK_STATE_COMPLETED: Echoed: watch me"
    assert read.events[-1] == {"event": "end", "data": {"state": "TASK_STATE_COMPLETED"}}
    assert read.keepalives >= 1  # it waited on the running task, saying so while idle
    # and the task page, read afterwards by the same session, shows the result
    assert page.status_code == 200
    assert '<span id="task-state" class="state s-task_state_completed">' in page.text
    assert "watch me" in page.text and "Echoed: watch me" in page.text


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_task_events_stream_is_refused_without_a_session(live_platform, make_tenant, make_agent):
    tenant = make_tenant()
    make_agent(tenant, "echo")
    url = f"{live_platform.url}/console/t/{tenant.slug}/tasks/{uuid.uuid4()}/events"
    with httpx.Client(timeout=30) as http:
        response = http.get(url)
    assert response.status_code == 302
    assert response.headers["location"].startswith("/console/login/")
    assert not response.headers["content-type"].startswith("text/event-stream")
