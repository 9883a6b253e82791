"""The v0.1 legacy dialect: its codec both ways, and its methods on real PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import uuid

import pytest
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict

from a2a_platform.versions import V0_1
from agents.auth import Principal
from agents.cards import agent_base_url, agent_card_build
from bindings.codecs.v01 import (
    v01_card_json,
    v01_message_json,
    v01_part,
    v01_part_json,
    v01_send_request,
    v01_state,
    v01_stream_event,
    v01_stream_events,
    v01_task_id,
    v01_task_json,
)
from bindings.jsonrpc import METHODS
from tasks_app.errors import (
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from tasks_app.models import Task as TaskRow
from tasks_app.operations import Caller
from tasks_app.services import message_send

ALICE = Principal(owner="key:alice")
BOB = Principal(owner="key:bob")
PNG = base64.b64encode(b"\x89PNG\r\n").decode()


def user_message(text: str = "hi", **fields):
    return {"role": "user", "parts": [{"type": "text", "text": text}], **fields}


# --- parts, both ways ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "part",
    [
        {"type": "text", "text": "hello"},
        {"type": "text", "text": "hello", "metadata": {"lang": "en"}},
        {"type": "data", "data": {"a": 1.5, "b": ["x", None, True], "c": {"d": "e"}}},
        {"type": "data", "data": {"k": "v"}, "metadata": {"schema": "s"}},
        {"type": "file", "file": {"name": "p.png", "mimeType": "image/png", "bytes": PNG}},
        {"type": "file", "file": {"bytes": PNG}},
        {"type": "file", "file": {"mimeType": "text/plain", "uri": "https://x.example/a.txt"}},
        {"type": "file", "file": {"name": "a", "uri": "https://x.example/a"}, "metadata": {"m": 1}},
    ],
)
def test_every_part_type_round_trips(part):
    assert v01_part_json(v01_part(part)) == part


def test_parts_become_v10_parts():
    text = v01_part({"type": "text", "text": "t", "metadata": {"k": "v"}})
    assert text.text == "t" and MessageToDict(text.metadata) == {"k": "v"}
    data = v01_part({"type": "data", "data": {"n": 2}})
    assert MessageToDict(data.data) == {"n": 2}
    raw = v01_part({"type": "file", "file": {"name": "p", "mimeType": "image/png", "bytes": PNG}})
    assert (raw.raw, raw.filename, raw.media_type) == (b"\x89PNG\r\n", "p", "image/png")
    url = v01_part({"type": "file", "file": {"uri": "https://x.example/f"}})
    assert url.url == "https://x.example/f" and not url.media_type and not url.filename


def test_data_that_is_not_an_object_goes_out_wrapped_and_comes_back_unwrapped():
    # given a v1.0 data part holding a list, which v0.1 (data is an object) cannot hold
    part = Part()
    part.data.list_value.values.add().number_value = 1
    # when
    out = v01_part_json(part)
    # then
    assert out == {"type": "data", "data": {"value": [1.0]}, "metadata": {"data_part_compat": True}}
    back = v01_part(out)
    assert back == part and not back.HasField("metadata")


@pytest.mark.parametrize(
    "part, words",
    [
        ("text", "'message.parts[0]' must be an object, not a string"),
        ({"text": "no type"}, "'message.parts[0].type' must be one of text, data, file"),
        ({"kind": "text", "text": "v0.3"}, "'message.parts[0].type'"),
        ({"type": "image", "text": "x"}, "not 'image'"),
        ({"type": "text"}, "'message.parts[0].text' is required"),
        ({"type": "text", "text": 3}, "'message.parts[0].text' must be a string, not a number"),
        ({"type": "data", "data": [1, 2]}, "'message.parts[0].data' must be an object"),
        ({"type": "data"}, "'message.parts[0].data' is required"),
        ({"type": "file"}, "'message.parts[0].file' is required"),
        ({"type": "file", "file": "x"}, "'message.parts[0].file' must be an object"),
        ({"type": "file", "file": {"name": "n"}}, "exactly one of 'bytes' and 'uri'"),
        (
            {"type": "file", "file": {"bytes": PNG, "uri": "https://x.example"}},
            "exactly one of 'bytes' and 'uri'",
        ),
        ({"type": "file", "file": {"bytes": "not base64!"}}, "file.bytes' is not valid base64"),
        ({"type": "file", "file": {"bytes": 12}}, "file.bytes' must be a string"),
        ({"type": "file", "file": {"uri": "u", "name": 1}}, "file.name' must be a string"),
        ({"type": "file", "file": {"uri": "u", "mimeType": []}}, "file.mimeType' must be"),
        ({"type": "text", "text": "t", "metadata": [1]}, "parts[0].metadata' must be an object"),
    ],
)
def test_bad_parts_name_the_field(part, words):
    params = {"id": uuid.uuid4().hex, "message": {"role": "user", "parts": [part]}}
    with pytest.raises(InvalidParamsError) as caught:
        v01_send_request(params)
    assert words in caught.value.message


# --- tasks/send params -> SendMessageRequest -------------------------------------------------


def test_send_params_map_every_field():
    task_id = uuid.uuid4()
    request, chosen = v01_send_request(
        {
            "id": task_id.hex,  # v0.1 samples send uuid4().hex: any UUID spelling is accepted
            "sessionId": "session-1",
            "message": user_message("hello", metadata={"m": "x"}),
            "acceptedOutputModes": ["text/plain", "application/json"],
            "historyLength": 3,
            "metadata": {"trace": "t-1"},
            "pushNotification": None,
            "unknownFutureField": 1,
        }
    )
    assert chosen == task_id
    message = request.message
    assert message.role == Role.ROLE_USER and message.context_id == "session-1"
    assert not message.task_id  # continuing or creating is decided with the caller's tasks
    assert uuid.UUID(message.message_id)  # v0.1 messages have no id: one is made
    assert [p.text for p in message.parts] == ["hello"]
    assert MessageToDict(message.metadata) == {"m": "x"}
    assert list(request.configuration.accepted_output_modes) == ["text/plain", "application/json"]
    assert request.configuration.history_length == 3
    assert not request.configuration.return_immediately  # tasks/send blocks
    assert MessageToDict(request.metadata) == {"trace": "t-1"}


def test_send_params_minimal():
    request, chosen = v01_send_request({"message": user_message()})
    assert chosen is None
    assert not request.message.context_id and not request.HasField("configuration")
    assert not request.HasField("metadata")
    other, _ = v01_send_request({"message": user_message()})
    assert other.message.message_id != request.message.message_id
    agent, _ = v01_send_request(
        {"message": {"role": "agent", "parts": [{"type": "text", "text": "x"}]}}
    )
    assert agent.message.role == Role.ROLE_AGENT  # the service refuses it: rules live there


@pytest.mark.parametrize(
    "params, words",
    [
        ({"id": "task-1"}, "'id' must be a UUID"),
        ({"id": 42}, "'id' must be a string, not a number"),
        ({"sessionId": 7}, "'sessionId' must be a string"),
        ({"sessionId": "s" * 201}, "'sessionId' is longer than 200 characters"),
        ({"message": None}, "'message' must be an object, not null"),
        ({"message": "hi"}, "'message' must be an object, not a string"),
        ({"message": {"parts": [{"type": "text", "text": "x"}]}}, "'message.role' must be"),
        ({"message": {"role": "system", "parts": []}}, "not 'system'"),
        # An object or an array is unhashable: it was a TypeError (JSON-RPC -32603).
        ({"message": {"role": {"x": 1}, "parts": []}}, "'message.role' must be"),
        ({"message": {"role": ["user"], "parts": []}}, "'message.role' must be"),
        ({"message": {"role": "user"}}, "'message.parts' is required"),
        ({"message": {"role": "user", "parts": {}}}, "'message.parts' must be an array"),
        ({"message": {"role": "user", "parts": []}}, "'message.parts' must hold at least one"),
        ({"message": user_message(metadata="m")}, "'message.metadata' must be an object"),
        ({"historyLength": -1}, "'historyLength' must be zero or positive"),
        ({"historyLength": "2"}, "'historyLength' must be an integer, not a string"),
        ({"historyLength": True}, "'historyLength' must be an integer, not a boolean"),
        ({"acceptedOutputModes": "text/plain"}, "'acceptedOutputModes' must be an array"),
        ({"acceptedOutputModes": ["text/plain", 1]}, "'acceptedOutputModes[1]' must be"),
        ({"metadata": [1]}, "'metadata' must be an object, not an array"),
    ],
)
def test_bad_send_params_name_the_field(params, words):
    with pytest.raises(InvalidParamsError) as caught:
        v01_send_request({"id": uuid.uuid4().hex, "message": user_message(), **params})
    assert words in caught.value.message


def test_push_notification_in_send_becomes_the_sends_push_config():
    request, _ = v01_send_request(
        {"message": user_message(), "pushNotification": {"url": "https://x.example/h"}}
    )
    assert request.configuration.task_push_notification_config.url == "https://x.example/h"
    with pytest.raises(InvalidParamsError, match="pushNotification.url"):
        v01_send_request({"message": user_message(), "pushNotification": {"headers": {}}})


def test_task_id_params():
    assert v01_task_id({"id": "abc", "historyLength": 2, "metadata": {}}) == "abc"
    for params, words in (
        ({}, "'id' is required"),
        ({"id": None}, "'id' is required"),
        ({"id": ""}, "'id' must not be empty"),
        ({"id": ["x"]}, "'id' must be a string, not an array"),
        ({"id": "x", "metadata": "m"}, "'metadata' must be an object"),
    ):
        with pytest.raises(InvalidParamsError) as caught:
            v01_task_id(params)
        assert words in caught.value.message


# --- v1.0 -> v0.1 --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "state, name",
    [
        # v0.1's document names six states, created first; no other name goes out.
        (TaskState.TASK_STATE_UNSPECIFIED, "created"),
        (TaskState.TASK_STATE_SUBMITTED, "created"),
        (TaskState.TASK_STATE_WORKING, "working"),
        (TaskState.TASK_STATE_INPUT_REQUIRED, "input-required"),
        (TaskState.TASK_STATE_COMPLETED, "completed"),
        (TaskState.TASK_STATE_CANCELED, "canceled"),
        (TaskState.TASK_STATE_FAILED, "failed"),
        (TaskState.TASK_STATE_REJECTED, "failed"),
        (TaskState.TASK_STATE_AUTH_REQUIRED, "input-required"),
    ],
)
def test_states(state, name):
    task = Task(id="t", context_id="c", status=TaskStatus(state=state))
    assert v01_task_json(task)["status"]["state"] == name
    event = StreamResponse(status_update=TaskStatusUpdateEvent(task_id="t", status=task.status))
    assert v01_stream_event(event, final=False)["status"]["state"] == name


def test_every_state_goes_out_by_a_name_of_the_v01_lifecycle():
    """a2a-v0.1-legacy-jsonrpc.md, "Task Lifecycle": these six, and no other."""
    lifecycle = {"created", "working", "input-required", "completed", "failed", "canceled"}
    assert {v01_state(state) for state in TaskState.values()} == lifecycle
    assert v01_state(99) in lifecycle  # a number no version names yet


def _agent_message(text: str, message_id: str = "a1") -> Message:
    return Message(message_id=message_id, role=Role.ROLE_AGENT, parts=[Part(text=text)])


def _task(state=TaskState.TASK_STATE_COMPLETED) -> Task:
    task = Task(id=str(uuid.uuid4()), context_id="session-1")
    task.status.state = state
    task.status.timestamp.FromJsonString("2025-05-01T12:00:00.250Z")
    task.status.message.CopyFrom(_agent_message("Echoed: hi"))
    task.history.append(Message(message_id="u1", role=Role.ROLE_USER, parts=[Part(text="hi")]))
    task.artifacts.append(Artifact(artifact_id="a", name="echo", parts=[Part(text="hi")]))
    task.artifacts.append(
        Artifact(artifact_id="b", description="second", parts=[Part(url="https://x.example/f")])
    )
    task.artifacts[1].metadata.update({"k": "v"})
    task.metadata.update({"trace": "t-1"})
    return task


def test_task_as_v01():
    task = _task()
    assert v01_task_json(task) == {
        "id": task.id,
        "sessionId": "session-1",
        "status": {
            "state": "completed",
            "message": {"role": "agent", "parts": [{"type": "text", "text": "Echoed: hi"}]},
            "timestamp": "2025-05-01T12:00:00.250Z",
        },
        "artifacts": [
            {
                "name": "echo",
                "parts": [{"type": "text", "text": "hi"}],
                "index": 0,
                "append": False,
                "lastChunk": True,
            },
            {
                "description": "second",
                "parts": [{"type": "file", "file": {"uri": "https://x.example/f"}}],
                "index": 1,
                "append": False,
                "lastChunk": True,
                "metadata": {"k": "v"},
            },
        ],
        "history": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        "metadata": {"trace": "t-1"},
    }


def test_artifacts_of_an_unfinished_task_are_not_last_chunks():
    artifacts = v01_task_json(_task(TaskState.TASK_STATE_WORKING))["artifacts"]
    assert [a["index"] for a in artifacts] == [0, 1]
    assert all(a["append"] is False and "lastChunk" not in a for a in artifacts)


def test_an_empty_task():
    task = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
    assert v01_task_json(task) == {
        "id": "t",
        "sessionId": "c",
        "status": {"state": "created"},
        "artifacts": [],
        "history": [],
    }


def test_a_direct_reply_becomes_the_status_message():
    task = _task()
    task.status.ClearField("message")
    reply = _agent_message("the answer", "r1")
    task.history.append(reply)
    result = v01_task_json(task, reply=reply)
    assert result["status"]["message"]["parts"] == [{"type": "text", "text": "the answer"}]
    assert result["status"]["state"] == "completed"
    assert [m["role"] for m in result["history"]] == ["user"]


def test_message_roles_and_metadata():
    message = _agent_message("x")
    message.metadata.update({"a": 1})
    assert v01_message_json(message) == {
        "role": "agent",
        "parts": [{"type": "text", "text": "x"}],
        "metadata": {"a": 1.0},
    }
    assert v01_message_json(Message(parts=[Part(text="u")]))["role"] == "user"


# --- streaming events ----------------------------------------------------------------------


def test_status_update_event():
    update = TaskStatusUpdateEvent(task_id="t1", context_id="c")
    update.status.state = TaskState.TASK_STATE_WORKING
    update.status.message.CopyFrom(_agent_message("on it"))
    update.metadata.update({"step": 1})
    event = v01_stream_event(StreamResponse(status_update=update), final=False)
    assert event == {
        "id": "t1",
        "status": {
            "state": "working",
            "message": {"role": "agent", "parts": [{"type": "text", "text": "on it"}]},
        },
        "final": False,
        "metadata": {"step": 1.0},
    }
    update.status.state = TaskState.TASK_STATE_COMPLETED
    update.status.ClearField("message")
    update.ClearField("metadata")
    done = v01_stream_event(StreamResponse(status_update=update), final=True)
    assert done == {"id": "t1", "status": {"state": "completed"}, "final": True}


def test_artifact_update_events_carry_index_append_and_last_chunk():
    indexes: dict[str, int] = {}

    def chunk(artifact_id, text, append, last):
        update = TaskArtifactUpdateEvent(task_id="t1", append=append, last_chunk=last)
        update.artifact.artifact_id = artifact_id
        update.artifact.name = artifact_id
        update.artifact.parts.append(Part(text=text))
        return v01_stream_event(
            StreamResponse(artifact_update=update), final=False, artifact_indexes=indexes
        )

    # given a task snapshot that already holds one artifact
    snapshot = _task(TaskState.TASK_STATE_WORKING)
    snapshot.ClearField("artifacts")
    snapshot.artifacts.append(Artifact(artifact_id="first", parts=[Part(text="x")]))
    opening = v01_stream_event(StreamResponse(task=snapshot), final=False, artifact_indexes=indexes)
    assert opening["status"]["state"] == "working" and opening["final"] is False
    assert opening["id"] == snapshot.id and opening["metadata"] == {"trace": "t-1"}
    # when chunks arrive for a new artifact and for the known one
    events = [
        chunk("second", "Hel", False, False),
        chunk("second", "lo", True, True),
        chunk("first", "more", True, False),
    ]
    # then indexes follow tasks/get's numbering and append/lastChunk pass through
    assert [
        (e["id"], e["artifact"]["index"], e["artifact"]["append"], e["artifact"]["lastChunk"])
        for e in events
    ] == [("t1", 1, False, False), ("t1", 1, True, True), ("t1", 0, True, False)]
    assert events[1]["artifact"]["parts"] == [{"type": "text", "text": "lo"}]
    assert events[0]["artifact"]["name"] == "second" and "final" not in events[0]
    # without a numbering every artifact is index 0
    update = TaskArtifactUpdateEvent(task_id="t1", artifact=Artifact(artifact_id="z"))
    assert (
        v01_stream_event(StreamResponse(artifact_update=update), final=False)["artifact"]["index"]
        == 0
    )


def test_a_direct_message_ends_the_stream_as_completed():
    reply = _agent_message("the answer")
    event = v01_stream_event(StreamResponse(message=reply), final=False, task_id="t9")
    assert event == {
        "id": "t9",
        "status": {
            "state": "completed",
            "message": {"role": "agent", "parts": [{"type": "text", "text": "the answer"}]},
        },
        "final": True,
    }
    reply.task_id = "t1"
    assert v01_stream_event(StreamResponse(message=reply), final=True, task_id="t9")["id"] == "t1"


def test_a_snapshot_streams_its_artifacts_then_its_status():
    # given a stream that opens with a finished task holding two artifacts
    indexes: dict[str, int] = {}
    task = _task()
    # when
    events = v01_stream_events(
        StreamResponse(task=task), final=True, task_id="ignored", artifact_indexes=indexes
    )
    # then each artifact comes whole, numbered as tasks/get numbers them, then the status
    expected = v01_task_json(task)
    assert events == [
        {"id": task.id, "artifact": expected["artifacts"][0]},
        {"id": task.id, "artifact": expected["artifacts"][1]},
        {
            "id": task.id,
            "status": expected["status"],
            "final": True,
            "metadata": {"trace": "t-1"},
        },
    ]
    assert indexes == {"a": 0, "b": 1}
    # and later chunks keep that numbering
    update = TaskArtifactUpdateEvent(task_id=task.id, artifact=Artifact(artifact_id="b"))
    chunk = v01_stream_events(
        StreamResponse(artifact_update=update), final=False, artifact_indexes=indexes
    )
    assert [e["artifact"]["index"] for e in chunk] == [1]


def test_an_unfinished_snapshot_streams_artifacts_without_last_chunk():
    events = v01_stream_events(
        StreamResponse(task=_task(TaskState.TASK_STATE_WORKING)), final=False
    )
    assert [(e["artifact"]["index"], "lastChunk" in e["artifact"]) for e in events[:2]] == [
        (0, False),
        (1, False),
    ]
    assert events[2]["status"]["state"] == "working" and events[2]["final"] is False


def test_other_responses_are_one_event():
    reply = StreamResponse(message=_agent_message("x"))
    assert v01_stream_events(reply, final=True, task_id="t") == [
        v01_stream_event(reply, final=True, task_id="t")
    ]


def test_an_empty_stream_response_is_refused():
    with pytest.raises(ValueError, match="without a payload"):
        v01_stream_event(StreamResponse(), final=False)


# --- the card ------------------------------------------------------------------------------


def test_card_in_v01_shape(make_tenant, make_agent):
    agent = make_agent(
        make_tenant(),
        "helper",
        visibility="public",
        documentation_url="https://docs.example/helper",
        provider_organization="Example Org",
        provider_url="https://example.org",
        skills=[
            {
                "id": "s1",
                "name": "Skill",
                "description": "does things",
                "tags": ["t"],
                "examples": ["do it"],
                "inputModes": ["text/plain"],
                "outputModes": ["application/json"],
            },
            {"id": "s2", "name": "Plain", "description": "d", "tags": ["plain"]},
        ],
        extended_skills=[{"id": "x", "name": "X", "description": "d", "tags": ["t"]}],
    )
    card = v01_card_json(agent_card_build(agent))
    assert card == {
        "name": "Helper",
        "description": "The helper agent.",
        "url": agent_base_url(agent) + "?A2A-Version=0.1",
        "provider": {"organization": "Example Org", "url": "https://example.org"},
        "version": agent.version,
        "documentationUrl": "https://docs.example/helper",
        "capabilities": {
            "streaming": agent_card_build(agent).capabilities.streaming,
            "pushNotifications": True,
            "stateTransitionHistory": False,
        },
        "authentication": {"schemes": ["apiKey", "bearer", "none"]},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {
                "id": "s1",
                "name": "Skill",
                "description": "does things",
                "tags": ["t"],
                "examples": ["do it"],
                "inputModes": ["text/plain"],
                "outputModes": ["application/json"],
            },
            {"id": "s2", "name": "Plain", "description": "d", "tags": ["plain"]},
        ],
    }
    assert f"/a2a/{agent.tenant.slug}/helper/?" in card["url"]


def test_private_card_names_only_the_key_schemes(make_tenant, make_agent):
    card = v01_card_json(agent_card_build(make_agent(make_tenant(), "private")))
    assert card["authentication"] == {"schemes": ["apiKey", "bearer"]}
    assert "provider" not in card and "documentationUrl" not in card


# --- the methods, on PostgreSQL ------------------------------------------------------------


@pytest.fixture
def agent(make_tenant, make_agent):
    return make_agent(make_tenant(), "echo")


def _send(agent, principal=ALICE, new_task_id=None, text="hi"):
    message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    return message_send(
        agent=agent,
        principal=principal,
        request=SendMessageRequest(message=message),
        new_task_id=new_task_id,
    )


def test_message_send_creates_the_task_with_the_given_id(agent):
    task_id = uuid.uuid4()
    assert _send(agent, new_task_id=task_id).task_id == task_id
    assert TaskRow.objects.get(pk=task_id).owner == ALICE.owner


def test_message_send_refuses_a_taken_id_without_saying_whose(agent, make_tenant, make_agent):
    # given Alice's task, and an agent of another tenant
    task_id = _send(agent).task_id
    stranger_agent = make_agent(make_tenant(), "echo")
    # when others try to create a task with its id
    for other_agent, principal in ((agent, BOB), (stranger_agent, ALICE), (stranger_agent, BOB)):
        with pytest.raises(InvalidParamsError) as caught:
            _send(other_agent, principal, new_task_id=task_id)
        # then the answer is the same for all, and names no owner, agent or state
        assert caught.value.message == (
            f"Task id {task_id} cannot be used for a new task; choose a fresh UUID."
        )
    assert TaskRow.objects.get(pk=task_id).messages.count() == 1
    assert TaskRow.objects.filter(pk=task_id).values_list("owner", flat=True).get() == ALICE.owner


@pytest.fixture
def no_runs(monkeypatch):
    """The methods below run without a worker: nothing is queued."""
    monkeypatch.setattr("tasks_app.services.enqueue_run", lambda *args: None)


def call(agent, principal, method, params):
    return asyncio.run(METHODS[V0_1][method](Caller(agent=agent, principal=principal), params))


@pytest.mark.django_db(transaction=True)
def test_methods_send_get_cancel(agent, no_runs, settings):
    settings.A2A_BLOCKING_TIMEOUT_SECONDS = 0.3  # no worker: the send returns the task as is
    task_id = uuid.uuid4()
    params = {"id": task_id.hex, "sessionId": "s-1", "message": user_message("one")}

    created = call(agent, ALICE, "tasks/send", params)
    # The id comes back as the client wrote it (hex), in every answer.
    assert created["id"] == task_id.hex and created["sessionId"] == "s-1"
    assert created["status"]["state"] == "created"  # v0.1's name: no worker has it yet
    assert created["history"] == [{"role": "user", "parts": [{"type": "text", "text": "one"}]}]

    # The same id again is the same task: a follow-up, refused while the agent is on it.
    with pytest.raises(UnsupportedOperationError, match="still on it"):
        call(agent, ALICE, "tasks/send", params)
    # Another owner's attempt neither continues it nor learns whose it is.
    with pytest.raises(InvalidParamsError, match="cannot be used for a new task"):
        call(agent, BOB, "tasks/send", params)
    with pytest.raises(TaskNotFoundError):
        call(agent, BOB, "tasks/get", {"id": str(task_id)})
    with pytest.raises(TaskNotFoundError):
        call(agent, BOB, "tasks/cancel", {"id": str(task_id)})

    got = call(agent, ALICE, "tasks/get", {"id": task_id.hex, "historyLength": 0})
    assert got["id"] == task_id.hex and got["history"] == []
    canceled = call(agent, ALICE, "tasks/cancel", {"id": str(task_id)})
    assert canceled["status"]["state"] == "canceled"
    assert canceled["status"]["message"]["role"] == "agent"


@pytest.mark.django_db(transaction=True)
def test_send_without_an_id_creates_a_task(agent, no_runs, settings):
    settings.A2A_BLOCKING_TIMEOUT_SECONDS = 0.3
    created = call(agent, ALICE, "tasks/send", {"message": user_message(), "historyLength": 1})
    assert uuid.UUID(created["id"]) and created["sessionId"]
    assert TaskRow.objects.filter(pk=created["id"], owner=ALICE.owner).exists()


def test_push_methods_are_refused_when_the_agent_offers_no_push(agent):
    agent.push_notifications = False
    for method in ("tasks/pushNotification/get", "tasks/pushNotification/set"):
        with pytest.raises(PushNotificationNotSupportedError):
            call(agent, ALICE, method, {"id": str(uuid.uuid4()), "url": "https://x.example/"})


@pytest.mark.django_db(transaction=True)
def test_send_answered_by_a_message_returns_the_completed_task(agent, monkeypatch):
    # given an "agent" that answers every message at once with a direct Message
    from tasks_app.services import task_event_record

    def answer(task_pk, job_id, job_args):
        reply = _agent_message("the answer", f"reply-{task_pk}")
        reply.task_id = str(task_pk)
        task_event_record(task_id=task_pk, event=reply)

    monkeypatch.setattr("tasks_app.services.enqueue_run", answer)
    task_id = uuid.uuid4()
    # when
    result = call(agent, ALICE, "tasks/send", {"id": str(task_id), "message": user_message()})
    # then v0.1 gets the task, completed, with the answer as its status message
    assert result["id"] == str(task_id)
    assert result["status"]["state"] == "completed"
    assert result["status"]["message"] == {
        "role": "agent",
        "parts": [{"type": "text", "text": "the answer"}],
    }
    assert [m["role"] for m in result["history"]] == ["user"]
