"""GetTask's path: with the caller cached, one hop to a database thread and one query (the
task, its history and its artifacts together); the answer is what the plain reads give."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator

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
from asgiref.sync import async_to_sync
from django.db import connection
from django.db.backends.utils import CursorWrapper
from django.test import AsyncClient
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct, Value

from a2a_platform import db as db_threads
from agents.auth import Principal
from agents.services import api_key_create
from tasks_app.models import Task
from tasks_app.selectors import task_get, task_get_row, task_to_json, task_to_proto
from tasks_app.services import message_send, task_event_record
from tests.conftest import require

ALICE = Principal(owner="key:alice")


@pytest.fixture
def queries(monkeypatch) -> Iterator[list[tuple[str, str]]]:
    """Every SQL statement run in this process, from any thread: (thread name, sql)."""
    seen: list[tuple[str, str]] = []
    for name in ("_execute", "_executemany"):
        real = getattr(CursorWrapper, name)

        def spy(self, sql, *args, _real=real):
            seen.append((threading.current_thread().name, sql))
            return _real(self, sql, *args)

        monkeypatch.setattr(CursorWrapper, name, spy)
    yield seen


@pytest.fixture
def hops(monkeypatch) -> list[str]:
    """The calls handed to the process's database threads (a2a_platform.db)."""
    calls: list[str] = []
    pool = db_threads.executor()
    real = pool.submit

    def submit(fn, *args, **kwargs):
        calls.append(getattr(fn, "__name__", repr(fn)))
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(pool, "submit", submit)
    return calls


def _message(text: str, role: Role = Role.ROLE_USER, **fields) -> Message:
    return Message(message_id=str(uuid.uuid4()), role=role, parts=[Part(text=text)], **fields)


def _busy_task(agent, principal: Principal = ALICE) -> str:
    """A task with three turns of history and two artifacts, made as the worker makes them."""
    outcome = message_send(
        agent=agent, principal=principal, request=SendMessageRequest(message=_message("one"))
    )
    task_id = str(outcome.task_id)
    for n, name in enumerate(("first", "second")):
        artifact = Artifact(artifact_id=name, parts=[Part(text=f"artifact {n}")])
        task_event_record(
            task_id=outcome.task_id,
            event=TaskArtifactUpdateEvent(task_id=task_id, artifact=artifact),
        )
    reply = _message("two", Role.ROLE_AGENT, task_id=task_id)
    status = TaskStatus(state=TaskState.TASK_STATE_INPUT_REQUIRED, message=reply)
    task_event_record(
        task_id=outcome.task_id, event=TaskStatusUpdateEvent(task_id=task_id, status=status)
    )
    Task.objects.filter(pk=task_id).update(job_id="")  # as if a worker had taken the first turn
    follow_up = _message("three", task_id=task_id)
    message_send(agent=agent, principal=principal, request=SendMessageRequest(message=follow_up))
    return task_id


@pytest.mark.parametrize("history_length", [None, 0, 1, 2, 3, 10])
def test_the_one_query_read_answers_as_the_plain_reads_do(make_tenant, make_agent, history_length):
    agent = make_agent(make_tenant())
    task_id = _busy_task(agent)
    row = task_get_row(agent=agent, principal=ALICE, task_id=task_id)
    plain = task_to_proto(row, history_length=history_length)
    got = task_get(agent=agent, principal=ALICE, task_id=task_id, history_length=history_length)
    assert got == plain
    assert [a.artifact_id for a in got.artifacts] == ["first", "second"]
    said = ["one", "two", "three"]
    expected = said if history_length is None else said[len(said) - history_length :]
    assert [m.parts[0].text for m in got.history] == (expected if history_length != 0 else [])


@pytest.mark.parametrize("after_seq", [0, 1, 3, 99])
def test_the_event_log_reads_answer_as_the_orm_does(make_tenant, make_agent, after_seq):
    from tasks_app.models import TaskEvent
    from tasks_app.selectors import task_event_states_after, task_events_after

    require(connection.vendor == "postgresql", "the statements written once are PostgreSQL's")
    agent = make_agent(make_tenant())
    task_id = uuid.UUID(_busy_task(agent))
    events = TaskEvent.objects.filter(task_id=task_id, seq__gt=after_seq).order_by("seq")
    orm = list(events.values_list("seq", "kind", "state", "data"))
    assert task_events_after(task_id=task_id, after_seq=after_seq) == orm
    assert task_events_after(task_id=task_id, after_seq=after_seq, limit=2) == orm[:2]
    assert task_event_states_after(task_id=task_id, after_seq=after_seq) == [r[:3] for r in orm]
    assert (len(orm) > 0) == (after_seq < 99)  # the busy task has events to compare


def _struct(**fields) -> Struct:
    struct = Struct()
    struct.update(fields)
    return struct


def _rich_task(agent) -> str:
    """A task whose stored JSON uses every kind of part, metadata with numbers, lists and
    nesting, a message's extensions and references, and an artifact's name and description."""
    meta = {"n": 1, "x": 2.5, "flag": True, "none": None, "list": [1, "a"], "deep": {"k": [{}]}}
    message = _message("one", metadata=_struct(**meta), extensions=["urn:ext"])
    message.reference_task_ids.append(str(uuid.uuid4()))
    message.parts.extend(
        [
            Part(raw=b"\x00\x01bytes", media_type="application/octet-stream", filename="b.bin"),
            Part(url="https://example.com/f.pdf", media_type="application/pdf"),
            Part(data=Value(struct_value=_struct(**meta)), metadata=_struct(part=1)),
            Part(text=""),
        ]
    )
    request = SendMessageRequest(message=message, metadata=_struct(**meta))
    outcome = message_send(agent=agent, principal=ALICE, request=request)
    task_id = str(outcome.task_id)
    artifact = Artifact(
        artifact_id="a1",
        name="report",
        description="all of it",
        parts=[Part(data=Value(list_value={"values": [Value(number_value=3)]}))],
        metadata=_struct(size=10),
        extensions=["urn:ext"],
    )
    task_event_record(
        task_id=outcome.task_id, event=TaskArtifactUpdateEvent(task_id=task_id, artifact=artifact)
    )
    reply = _message("done", Role.ROLE_AGENT, task_id=task_id, metadata=_struct(t=0))
    status = TaskStatus(state=TaskState.TASK_STATE_COMPLETED, message=reply)
    task_event_record(
        task_id=outcome.task_id,
        event=TaskStatusUpdateEvent(task_id=task_id, status=status, metadata=_struct(end=1)),
    )
    return task_id


@pytest.mark.parametrize("history_length", [None, 0, 1, 2])
@pytest.mark.parametrize("make", [_busy_task, _rich_task])
def test_the_task_as_json_is_what_its_proto_prints(make_tenant, make_agent, make, history_length):
    """GetTask's v1.0 JSON comes from the stored JSON without a proto (task_to_json): on every
    read path it must be exactly what printing the proto gives."""
    agent = make_agent(make_tenant(), default_input_modes=["*/*"])
    task_id = make(agent)
    proto = task_get(agent=agent, principal=ALICE, task_id=task_id, history_length=history_length)
    printed = MessageToDict(proto)

    def assert_printed(answer: dict) -> None:
        # the same JSON, spelled the same (1.0 is not 1, nor True), its fields in the same order
        assert json.dumps(answer, sort_keys=True) == json.dumps(printed, sort_keys=True)
        assert list(answer) == list(printed)

    # the plain reads every database has
    row = task_get_row(agent=agent, principal=ALICE, task_id=task_id)
    assert_printed(task_to_json(row, history_length=history_length))
    if history_length != 0:
        assert printed["history"]
    # the one-statement read GetTask makes
    require(
        connection.vendor == "postgresql",
        "the one-statement read is PostgreSQL's; SQLite has only the plain reads",
    )
    assert_printed(
        task_get(
            agent=agent,
            principal=ALICE,
            task_id=task_id,
            history_length=history_length,
            as_json=True,
        )
    )


def test_the_task_row_history_and_artifacts_are_one_query(make_tenant, make_agent, queries):
    require(
        connection.vendor == "postgresql",
        "the one-query read is PostgreSQL's; SQLite reads the three plainly",
    )
    agent = make_agent(make_tenant())
    task_id = _busy_task(agent)
    queries.clear()
    task = task_get(agent=agent, principal=ALICE, task_id=task_id, history_length=2)
    assert len(queries) == 1, queries
    assert len(task.history) == 2 and len(task.artifacts) == 2


@pytest.mark.django_db(transaction=True)  # the request reads on the database threads
def test_a_cached_caller_gets_a_task_in_one_hop_and_one_query(
    make_tenant, make_agent, queries, hops, monkeypatch
):
    require(
        connection.vendor == "postgresql",
        "the one-query read is PostgreSQL's; SQLite reads the three plainly",
    )
    # No worker may change the task between the two reads (a live one may be running).
    monkeypatch.setattr("tasks_app.services.enqueue_run", lambda *args: None)
    tenant = make_tenant()
    agent = make_agent(tenant)
    _, secret = api_key_create(tenant=tenant, name="alice", principal="alice")
    task_id = _busy_task(agent)
    url = f"/a2a/{tenant.slug}/{agent.slug}/"
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    headers = {"X-API-Key": secret, "A2A-Version": "1.0"}

    async def get() -> dict:
        response = await AsyncClient().post(
            url, json.dumps(body), content_type="application/json", headers=headers
        )
        assert response.status_code == 200
        return response.json()["result"]

    # given a first call, which reads the agent and the key (one hop) and the task (another)
    first = async_to_sync(get)()
    assert len(hops) == 3  # the caller's rows, the key's last use, the task
    # when the same caller asks again
    queries.clear()
    hops.clear()
    again = async_to_sync(get)()
    # then one hop to a database thread, one query
    assert again == first and len(again["history"]) == 3 and len(again["artifacts"]) == 2
    assert len(hops) == 1, hops
    assert len(queries) == 1, queries
    assert queries[0][0].startswith("a2a-db") and 'FROM "tasks_app_task"' in queries[0][1]
