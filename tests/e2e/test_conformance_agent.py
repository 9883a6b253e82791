"""The `conformance` executor (the A2A TCK's scenarios, routed by messageId prefix) through the
official a2a-sdk clients (v1.0 and v0.3) against real daphne + Celery, with an API key and
anonymously; the event log each scenario leaves is read back from the database."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from a2a.types import CancelTaskRequest, Part, Role, StreamResponse, Task, TaskState
from google.protobuf.json_format import MessageToDict

from tasks_app.models import Task as TaskRow
from tasks_app.models import TaskEvent

from .clients import V0_3, V1_0, sdk_client, send, user_message
from .helpers import mid

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CONFIG = {"step_seconds": 0.2, "resubscribe_wait_seconds": 0.5}
# For the cancel tests: long enough that the cancel surely lands inside a wait.
SLOW_CONFIG = {"step_seconds": 2.0, "resubscribe_wait_seconds": 0.5}

COMPLETED = TaskState.TASK_STATE_COMPLETED
SUBMITTED = "TASK_STATE_SUBMITTED"
WORKING = "TASK_STATE_WORKING"
DONE = "TASK_STATE_COMPLETED"
CANCELED = "TASK_STATE_CANCELED"


@dataclass
class Conf:
    url: str
    key: str | None
    version: str


@pytest.fixture(params=[V1_0, V0_3])
def version(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=["key", "anonymous"])
def caller(request: pytest.FixtureRequest) -> str:
    return request.param


def _conf(live_platform, make_tenant, make_agent, make_key, version, caller, config) -> Conf:
    tenant = make_tenant()
    agent = make_agent(
        tenant,
        "conf",
        kind="conformance",
        config=config,
        visibility="public",
        anonymous_scope="shared",
    )
    key = make_key(tenant, "alice") if caller == "key" else None
    return Conf(url=live_platform.agent_url(agent), key=key, version=version)


@pytest.fixture
def conf(live_platform, make_tenant, make_agent, make_key, version, caller) -> Conf:
    return _conf(live_platform, make_tenant, make_agent, make_key, version, caller, CONFIG)


@pytest.fixture
def slow_conf(live_platform, make_tenant, make_agent, make_key, version, caller) -> Conf:
    return _conf(live_platform, make_tenant, make_agent, make_key, version, caller, SLOW_CONFIG)


def ask(
    conf: Conf, message_id: str, text: str = "hi", *, polling: bool = False, **fields: Any
) -> StreamResponse:
    async def go() -> StreamResponse:
        async with sdk_client(
            conf.url, key=conf.key, version=conf.version, polling=polling
        ) as client:
            return await send(client, user_message(text, message_id, **fields))

    return asyncio.run(go())


def ask_task(conf: Conf, prefix: str, text: str = "hi") -> Task:
    response = ask(conf, mid(prefix), text)
    assert response.HasField("task"), f"{prefix}: expected a Task, got {response}"
    assert not response.HasField("message")
    return response.task


def texts(parts: Any) -> list[str]:
    assert all(p.WhichOneof("content") == "text" for p in parts), list(parts)
    return [p.text for p in parts]


def only_artifact(task: Task) -> Any:
    assert len(task.artifacts) == 1, list(task.artifacts)
    artifact = task.artifacts[0]
    assert artifact.artifact_id
    return artifact


def events(task_id: str) -> list[tuple[int, str, dict[str, Any]]]:
    rows = TaskEvent.objects.filter(task_id=task_id).order_by("seq")
    return [(e.seq, e.kind, e.data) for e in rows]


def shape(task_id: str) -> list[tuple[str, str]]:
    """The event log as (kind, detail): the state for task/status events, the artifact's
    append/lastChunk flags for artifact events."""
    out = []
    for _, kind, data in events(task_id):
        if kind == TaskEvent.Kind.TASK:
            out.append((kind, data["task"]["status"]["state"]))
        elif kind == TaskEvent.Kind.STATUS:
            out.append((kind, data["statusUpdate"]["status"]["state"]))
        elif kind == TaskEvent.Kind.ARTIFACT:
            update = data["artifactUpdate"]
            out.append(
                (
                    kind,
                    f"append={update.get('append', False)} last={update.get('lastChunk', False)}",
                )
            )
        else:
            out.append((kind, ""))
    return out


TASK, STATUS, ARTIFACT = TaskEvent.Kind.TASK, TaskEvent.Kind.STATUS, TaskEvent.Kind.ARTIFACT


# --- non-streaming scenarios ------------------------------------------------------------


def test_complete_task(conf):
    task = ask_task(conf, "tck-complete-task")
    assert task.status.state == COMPLETED
    message = task.status.message
    assert message.role == Role.ROLE_AGENT
    assert texts(message.parts) == ["Hello from TCK"]
    assert message.task_id == task.id
    assert not task.artifacts
    assert shape(task.id) == [(TASK, SUBMITTED), (STATUS, DONE)]


ARTIFACT_PARTS = {
    "tck-artifact-text": Part(text="Generated text content"),
    "tck-artifact-file": Part(
        raw=b"Generated file content", filename="output.txt", media_type="text/plain"
    ),
    "tck-artifact-file-url": Part(
        url="https://example.com/output.txt", filename="output.txt", media_type="text/plain"
    ),
}


@pytest.mark.parametrize("prefix", list(ARTIFACT_PARTS))
def test_artifact_scenarios(conf, prefix):
    task = ask_task(conf, prefix)
    assert task.status.state == COMPLETED
    part = only_artifact(task).parts
    assert len(part) == 1
    expected = ARTIFACT_PARTS[prefix]
    assert part[0].WhichOneof("content") == expected.WhichOneof("content")
    assert part[0] == expected, MessageToDict(part[0])
    assert shape(task.id) == [
        (TASK, SUBMITTED),
        (ARTIFACT, "append=False last=False"),
        (STATUS, DONE),
    ]


def test_artifact_data(conf):
    task = ask_task(conf, "tck-artifact-data")
    assert task.status.state == COMPLETED
    parts = only_artifact(task).parts
    assert len(parts) == 1
    assert parts[0].WhichOneof("content") == "data"
    assert MessageToDict(parts[0].data) == {"key": "value", "count": 42}


def test_message_response_is_a_message_without_task(conf):
    context = str(uuid.uuid4())
    response = ask(conf, mid("tck-message-response"), context_id=context)
    assert response.HasField("message")
    assert not response.HasField("task")
    message = response.message
    assert message.role == Role.ROLE_AGENT
    assert texts(message.parts) == ["Direct message response"]
    assert message.context_id == context
    assert message.message_id


@pytest.mark.parametrize(
    "prefix",
    ["text-message-id", "cancel-test-message-id", "mapping-test-message-id", "test-history-create"],
)
def test_the_v03_tcks_tasks_to_cancel_or_continue_stay_open(conf, prefix):
    """The v0.3 TCK cancels these tasks, or adds to their history, after its blocking send."""
    task = ask_task(conf, prefix)
    assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    more = ask(conf, mid("test-history-message-1"), "more", task_id=task.id).task
    assert more.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


def test_input_required_then_follow_up_completes(conf):
    first = ask_task(conf, "tck-input-required", "first")
    assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert first.status.message.role == Role.ROLE_AGENT
    assert not first.artifacts
    # The follow-up's messageId has no known prefix: only the task's state routes it.
    second = ask(
        conf, mid("follow-up"), "second", task_id=first.id, context_id=first.context_id
    ).task
    assert second.id == first.id
    assert second.status.state == COMPLETED
    assert second.status.message.role == Role.ROLE_AGENT
    assert not second.artifacts  # the default scenario would have added a "response" artifact
    user_turns = [texts(m.parts) for m in second.history if m.role == Role.ROLE_USER]
    assert user_turns == [["first"], ["second"]]
    assert shape(first.id) == [
        (TASK, SUBMITTED),
        (STATUS, "TASK_STATE_INPUT_REQUIRED"),
        (STATUS, DONE),
    ]


def test_reject_task(conf):
    task = ask_task(conf, "tck-reject-task")
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert task.status.message.role == Role.ROLE_AGENT
    assert texts(task.status.message.parts) == ["rejected"]
    assert not task.artifacts


# --- streaming scenarios (sent blocking: the agent card does not offer streaming) ---------

STREAM_PARTS = {
    "tck-stream-001": Part(text="Stream hello from TCK"),
    "tck-stream-003": Part(text="Stream task lifecycle"),
    "tck-stream-ordering-001": Part(text="Ordered output"),
    "tck-stream-artifact-text": Part(text="Streamed text content"),
    "tck-stream-artifact-file": Part(
        raw=b"Streamed file content", filename="output.txt", media_type="text/plain"
    ),
}


@pytest.mark.parametrize("prefix", list(STREAM_PARTS))
def test_stream_scenarios(conf, prefix):
    task = ask_task(conf, prefix)
    assert task.status.state == COMPLETED
    parts = only_artifact(task).parts
    assert list(parts) == [STREAM_PARTS[prefix]], [MessageToDict(p) for p in parts]
    assert shape(task.id) == [
        (TASK, SUBMITTED),
        (STATUS, WORKING),
        (ARTIFACT, "append=False last=True"),
        (STATUS, DONE),
    ]


def test_stream_001_event_log_has_seq_1_to_4(conf):
    task = ask_task(conf, "tck-stream-001")
    log = events(task.id)
    assert [seq for seq, _, _ in log] == [1, 2, 3, 4]
    assert [kind for _, kind, _ in log] == [TASK, STATUS, ARTIFACT, STATUS]
    assert log[0][2]["task"]["status"]["state"] == SUBMITTED
    assert log[1][2]["statusUpdate"]["status"]["state"] == WORKING
    assert log[2][2]["artifactUpdate"]["artifact"]["parts"] == [{"text": "Stream hello from TCK"}]
    assert log[3][2]["statusUpdate"]["status"]["state"] == DONE
    assert all(
        data[key]["taskId" if key != "task" else "id"] == task.id
        for _, _, data in log
        for key in data
    )
    assert TaskRow.objects.get(pk=task.id).last_seq == 4


def test_stream_002_completes_only(conf):
    task = ask_task(conf, "tck-stream-002")
    assert task.status.state == COMPLETED
    assert not task.status.HasField("message")
    assert not task.artifacts
    assert shape(task.id) == [(TASK, SUBMITTED), (STATUS, DONE)]


def test_stream_artifact_chunked_is_one_appended_artifact(conf):
    task = ask_task(conf, "tck-stream-artifact-chunked")
    assert task.status.state == COMPLETED
    artifact = only_artifact(task)
    # Stored as one text (tasks_app.artifacts); the event log keeps the two chunks.
    assert texts(artifact.parts) == ["chunk-1 chunk-2"]
    assert shape(task.id) == [
        (TASK, SUBMITTED),
        (STATUS, WORKING),
        (ARTIFACT, "append=False last=False"),
        (ARTIFACT, "append=True last=True"),
        (STATUS, DONE),
    ]
    chunks = [data["artifactUpdate"] for _, kind, data in events(task.id) if kind == ARTIFACT]
    assert [c["artifact"]["artifactId"] for c in chunks] == [artifact.artifact_id] * 2
    assert [c["artifact"]["parts"] for c in chunks] == [
        [{"text": "chunk-1 "}],
        [{"text": "chunk-2"}],
    ]


def test_resubscribe_scenario_works_then_completes(conf):
    task = ask_task(conf, "test-resubscribe-message-id")
    assert task.status.state == COMPLETED
    assert not task.artifacts
    assert shape(task.id) == [(TASK, SUBMITTED), (STATUS, WORKING), (STATUS, DONE)]


# --- the default scenario -----------------------------------------------------------------


def test_default_greets_and_quotes_the_user(conf):
    task = ask_task(conf, "anything-else", "what is the weather?")
    assert task.status.state == COMPLETED
    expected = 'Hello! You said: "what is the weather?"'
    artifact = only_artifact(task)
    assert artifact.name == "response"
    assert texts(artifact.parts) == [expected]
    assert task.status.message.role == Role.ROLE_AGENT
    assert texts(task.status.message.parts) == [expected]
    assert shape(task.id) == [
        (TASK, SUBMITTED),
        (STATUS, SUBMITTED),
        (STATUS, WORKING),
        (ARTIFACT, "append=False last=False"),
        (STATUS, DONE),
    ]


def _wait_for_status_event(task_id: str, state: str) -> None:
    deadline = time.monotonic() + 30
    while (STATUS, state) not in shape(task_id):
        assert time.monotonic() < deadline, f"no {state} event: {shape(task_id)}"
        time.sleep(0.02)


def _cancel(conf: Conf, task_id: str) -> Task:
    async def go() -> Task:
        async with sdk_client(conf.url, key=conf.key, version=conf.version) as client:
            return await client.cancel_task(CancelTaskRequest(id=task_id))

    return asyncio.run(go())


@pytest.mark.parametrize("during", [SUBMITTED, WORKING])
def test_cancel_during_default_wait(slow_conf, during):
    task = ask(slow_conf, mid("cancel-me"), "long job", polling=True).task
    assert task.status.state == TaskState.TASK_STATE_SUBMITTED
    # The executor's own status event shows it is inside the wait that follows it.
    _wait_for_status_event(task.id, during)
    canceled = _cancel(slow_conf, task.id)
    assert canceled.id == task.id
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert not canceled.artifacts
    expected = [(TASK, SUBMITTED), (STATUS, SUBMITTED)]
    if during == WORKING:
        expected.append((STATUS, WORKING))
    # The executor's cancel() ended it (the platform's fallback would add a status message).
    assert shape(task.id) == [*expected, (STATUS, CANCELED)]
    last = events(task.id)[-1][2]["statusUpdate"]["status"]
    assert "message" not in last
    row = TaskRow.objects.get(pk=task.id)
    assert row.state == CANCELED
    assert not row.artifacts.exists()
