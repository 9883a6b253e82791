"""Every document that defines JSON-RPC for A2A, spoken as it is written, against the live
platform (daphne + Celery): each test sends the method names and the param and field spellings
of one document and checks the answer shapes that document defines, on the success path of
every method it has and with the errors it names.

The documents (reference material, not in the repository; each section's docstring names its
source): the v0.1 legacy JSON-RPC text, the v0.3.0 specification, the v0.3 endpoint summary
(in Chinese), the JSON-RPC column of the v0.3 transport mapping table, and the v1.0.1
specification's JSON-RPC binding. The shapes below are declared here, as those documents write
them. The documents before v1.0 send no version header (an absent version is v0.3): a call on
a task without one answers in the dialect of the request that created the task.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from .helpers import Target, error_of, result_of, rpc, rpc_stream

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

NO_HEADER: dict[str, str] = {}
V10 = {"A2A-Version": "1.0"}
HOOK = "http://127.0.0.1:9/hook"  # loopback is allowlisted in the tests; nothing listens


def call(
    http: httpx.Client,
    target: Target,
    method: str,
    params: Any = None,
    headers: dict[str, str] = NO_HEADER,
    **kwargs: Any,
) -> httpx.Response:
    return rpc(http, target, method, {} if params is None else params, headers=headers, **kwargs)


def post_raw(
    http: httpx.Client, target: Target, body: bytes, headers: dict[str, str] = NO_HEADER
) -> httpx.Response:
    sent = {"Content-Type": "application/json", "X-API-Key": target.key, **headers}
    return http.post(target.url, content=body, headers=sent)


def stream_results(
    http: httpx.Client,
    target: Target,
    method: str,
    params: Any,
    headers: dict[str, str] = NO_HEADER,
    *,
    after_first: Callable[[], Any] | None = None,
) -> list[Any]:
    """The results of a streaming call, every SSE answer checked to be a JSON-RPC result of
    request 1; `after_first` runs once the first has come (to end a stream that follows a
    task until it ends)."""
    with httpx.Client(timeout=60) as streamer:
        answers: Iterator[dict[str, Any]] = rpc_stream(
            streamer, target, method, params, headers=headers
        )
        collected = [next(answers)]
        if after_first is not None:
            after_first()
        collected.extend(answers)
    for answer in collected:
        assert answer["jsonrpc"] == "2.0" and answer["id"] == 1 and "error" not in answer, answer
    return [answer["result"] for answer in collected]


def keys_within(value: dict[str, Any], allowed: set[str], *required: str) -> None:
    assert set(value) <= allowed, (set(value) - allowed, value)
    for name in required:
        assert name in value, (name, value)


def error_shape(error: dict[str, Any]) -> None:
    """The JSON-RPC 2.0 error object every document shows: code, message, optional data."""
    keys_within(error, {"code", "message", "data"}, "code", "message")
    assert isinstance(error["code"], int) and isinstance(error["message"], str) and error["message"]


# --- a2a-v0.1-legacy-jsonrpc.md ------------------------------------------------------------------
# "Data Structures" (Agent Card, Task, Message Parts), "API Methods" (agent/getCard, tasks/send,
# tasks/sendSubscribe, tasks/get, tasks/cancel, tasks/pushNotification/get|set) and "Error
# Handling". The text sends no version header, and its clients choose their task ids.

V01_PART_TYPES = {"text", "data", "file"}
# "Task Lifecycle": created -> working -> input-required -> completed | failed | canceled
V01_STATES = {"created", "working", "input-required", "completed", "failed", "canceled"}


def v01_message(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "text": text}]}


def v01_parts(parts: list[dict[str, Any]]) -> None:
    for part in parts:
        assert part["type"] in V01_PART_TYPES and "kind" not in part, part
        if part["type"] == "text":
            keys_within(part, {"type", "text", "metadata"}, "text")


def v01_task(task: dict[str, Any], task_id: str) -> None:
    """Section "Task": id, status {state, message {role, parts}, timestamp}, artifacts {name,
    description, parts, index, append, lastChunk, metadata}, history; plus the sessionId that
    tasks/send takes."""
    keys_within(task, {"id", "sessionId", "status", "artifacts", "history", "metadata"}, "id")
    assert task["id"] == task_id  # exactly as the client wrote it
    keys_within(task["status"], {"state", "message", "timestamp"}, "state")
    assert task["status"]["state"] in V01_STATES
    if "message" in task["status"]:
        keys_within(task["status"]["message"], {"role", "parts", "metadata"}, "role", "parts")
        v01_parts(task["status"]["message"]["parts"])
    for index, artifact in enumerate(task.get("artifacts", [])):
        keys_within(
            artifact,
            {"name", "description", "parts", "index", "append", "lastChunk", "metadata"},
            "parts",
            "index",
        )
        assert artifact["index"] == index
        v01_parts(artifact["parts"])
    for message in task.get("history", []):
        assert message["role"] in ("user", "agent")
        v01_parts(message["parts"])


@pytest.fixture
def v01_echo(make_target) -> Target:
    return make_target(headers=NO_HEADER)


def test_v01_agent_get_card(http, v01_echo):
    """agent/getCard, params {}: the "Agent Card" structure."""
    card = result_of(call(http, v01_echo, "agent/getCard", {}))
    keys_within(
        card,
        {
            "name",
            "description",
            "url",
            "provider",
            "version",
            "documentationUrl",
            "capabilities",
            "authentication",
            "defaultInputModes",
            "defaultOutputModes",
            "skills",
        },
        "name",
        "url",
        "version",
        "capabilities",
        "skills",
    )
    keys_within(
        card["capabilities"],
        {"streaming", "pushNotifications", "stateTransitionHistory"},
        "streaming",
        "pushNotifications",
    )
    assert set(card["authentication"]) <= {"schemes", "credentials"}
    assert card["authentication"]["schemes"] and "credentials" not in card["authentication"]
    for skill in card["skills"]:
        keys_within(
            skill,
            {"id", "name", "description", "tags", "examples", "inputModes", "outputModes"},
            "id",
            "name",
        )


def test_v01_tasks_send_then_get_echo_the_clients_id(http, v01_echo):
    """tasks/send {id, sessionId, acceptedOutputModes, message {role, parts [{type, text}]}}
    and tasks/get {id, sessionId}: the "Task" structure, under the client's own id (here
    uuid4().hex, as the text's sample clients choose it)."""
    task_id = uuid.uuid4().hex
    params = {
        "id": task_id,
        "sessionId": "session-v01",
        "acceptedOutputModes": ["text/plain"],
        "message": v01_message("hello"),
    }
    task = result_of(call(http, v01_echo, "tasks/send", params))
    v01_task(task, task_id)
    assert task["sessionId"] == "session-v01" and task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"] == [{"type": "text", "text": "hello"}]
    assert task["history"][0] == v01_message("hello")

    # tasks/get, sent as the text sends it (no header): answered in v0.1, the creator's dialect
    got = result_of(call(http, v01_echo, "tasks/get", {"id": task_id, "sessionId": "session-v01"}))
    v01_task(got, task_id)
    assert got["status"] == task["status"] and got["artifacts"] == task["artifacts"]
    assert "kind" not in json.dumps(got)


def test_v01_tasks_send_subscribe_streams_status_and_artifact_events(http, v01_echo):
    """tasks/sendSubscribe: "Response Stream" of {id, status, final} and {id, artifact {parts,
    index, append}} results, the last one final and completed."""
    task_id = uuid.uuid4().hex
    params = {
        "id": task_id,
        "sessionId": "session-stream",
        "acceptedOutputModes": ["text/plain"],
        "message": v01_message("streamed"),
    }
    events = stream_results(http, v01_echo, "tasks/sendSubscribe", params)
    for event in events:
        assert event["id"] == task_id, event
        if "artifact" in event:
            keys_within(event, {"id", "artifact", "metadata"})
            keys_within(
                event["artifact"],
                {"name", "description", "parts", "index", "append", "lastChunk", "metadata"},
                "parts",
                "index",
                "append",
            )
            v01_parts(event["artifact"]["parts"])
        else:
            keys_within(event, {"id", "status", "final", "metadata"}, "status", "final")
            assert event["status"]["state"] in V01_STATES
    assert any("artifact" in e for e in events)
    assert events[-1]["final"] is True and events[-1]["status"]["state"] == "completed"
    assert not any(e.get("final") for e in events[:-1])


def test_v01_tasks_cancel_answers_the_canceled_task(http, make_target):
    """tasks/cancel {id, sessionId}: "Task structure with state "canceled"". A task that has
    ended cannot be: v0.1 has no code for that (its -32002 is "Session not found"), so it is a
    server error (-32000 to -32099)."""
    target = make_target(config={"input_required": True}, headers=NO_HEADER)
    task_id = uuid.uuid4().hex
    asked = result_of(
        call(
            http,
            target,
            "tasks/send",
            {"id": task_id, "sessionId": "s-cancel", "message": v01_message("one")},
        )
    )
    assert asked["status"]["state"] == "input-required"
    canceled = result_of(
        call(http, target, "tasks/cancel", {"id": task_id, "sessionId": "s-cancel"})
    )
    v01_task(canceled, task_id)
    assert canceled["status"]["state"] == "canceled"
    error = error_of(call(http, target, "tasks/cancel", {"id": task_id}), -32000, "canceled")
    error_shape(error)


def test_v01_push_notification_set_and_get(http, v01_echo):
    """tasks/pushNotification/set {id, sessionId, url, headers} and get {id, sessionId}: both
    answer {url, headers}, the headers empty: they are write-only."""
    task_id = uuid.uuid4().hex
    result_of(call(http, v01_echo, "tasks/send", {"id": task_id, "message": v01_message("x")}))
    params = {"id": task_id, "sessionId": "s", "url": HOOK, "headers": {"X-Hook": "h"}}
    assert result_of(call(http, v01_echo, "tasks/pushNotification/set", params)) == {
        "url": HOOK,
        "headers": {},
    }
    got = result_of(
        call(http, v01_echo, "tasks/pushNotification/get", {"id": task_id, "sessionId": "s"})
    )
    assert got == {"url": HOOK, "headers": {}}


def test_v01_error_codes(http, v01_echo, make_target):
    """ "Error Handling": -32700, -32600, -32601, -32602, -32001 (task not found) and -32003
    (push notification not supported), in the {code, message, data} error object."""
    errors = [
        error_of(post_raw(http, v01_echo, b'{"jsonrpc": "2.0", "id": 1,'), -32700, request_id=None),
        error_of(
            post_raw(http, v01_echo, b'{"jsonrpc": "1.0", "id": 1, "method": "tasks/get"}'),
            -32600,
        ),
        error_of(call(http, v01_echo, "tasks/unknown", {}), -32601, "tasks/unknown"),
        error_of(call(http, v01_echo, "tasks/send", {"id": uuid.uuid4().hex}), -32602, "message"),
        error_of(call(http, v01_echo, "tasks/get", {"id": (missing := uuid.uuid4().hex)}), -32001),
    ]
    assert missing in errors[-1]["message"]
    quiet = make_target("quiet", push_notifications=False, headers=NO_HEADER)
    task_id = uuid.uuid4().hex
    result_of(call(http, quiet, "tasks/send", {"id": task_id, "message": v01_message("x")}))
    errors.append(
        error_of(
            call(http, quiet, "tasks/pushNotification/set", {"id": task_id, "url": HOOK}), -32003
        )
    )
    errors.append(
        error_of(call(http, quiet, "tasks/pushNotification/get", {"id": task_id}), -32003)
    )
    for error in errors:
        error_shape(error)


# --- a2a-v0.3.0-specification.txt ----------------------------------------------------------------
# Section 7 ("Protocol RPC Methods", 7.1-7.10) and section 8 ("Error Handling", 8.1 and 8.2).
# No version header: v0.3 is what a request without one speaks.

V03_STATES = {
    "submitted",
    "working",
    "input-required",
    "completed",
    "canceled",
    "failed",
    "rejected",
    "auth-required",
    "unknown",
}


def v03_message(text: str, **fields: Any) -> dict[str, Any]:
    return {
        "kind": "message",
        "messageId": str(uuid.uuid4()),
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        **fields,
    }


def v03_task(task: dict[str, Any]) -> None:
    """The v0.3 Task: kind "task", id, contextId, status {state, message, timestamp},
    artifacts [{artifactId, parts}], history [Message]."""
    keys_within(
        task,
        {"kind", "id", "contextId", "status", "artifacts", "history", "metadata"},
        "kind",
        "id",
        "contextId",
        "status",
    )
    assert task["kind"] == "task"
    keys_within(task["status"], {"state", "message", "timestamp"}, "state")
    assert task["status"]["state"] in V03_STATES
    for artifact in task.get("artifacts", []):
        assert "artifactId" in artifact and artifact["parts"], artifact
        assert all("kind" in part for part in artifact["parts"])
    for message in task.get("history", []):
        assert message["kind"] == "message" and message["role"] in ("user", "agent")


def v03_event(event: dict[str, Any]) -> None:
    """7.2.1: a stream result is a Message, a Task, a TaskStatusUpdateEvent {taskId, contextId,
    kind, status, final, metadata} or a TaskArtifactUpdateEvent {taskId, contextId, kind,
    artifact, append, lastChunk, metadata}."""
    kind = event["kind"]
    if kind == "task":
        v03_task(event)
    elif kind == "status-update":
        keys_within(
            event,
            {"taskId", "contextId", "kind", "status", "final", "metadata"},
            "taskId",
            "contextId",
            "status",
            "final",
        )
    elif kind == "artifact-update":
        keys_within(
            event,
            {"taskId", "contextId", "kind", "artifact", "append", "lastChunk", "metadata"},
            "taskId",
            "contextId",
            "artifact",
        )
    else:
        assert kind == "message", event


def v03_push_config(config: dict[str, Any], task_id: str) -> None:
    """TaskPushNotificationConfig {taskId, pushNotificationConfig {id, url, token,
    authentication}}."""
    keys_within(config, {"taskId", "pushNotificationConfig"}, "taskId", "pushNotificationConfig")
    assert config["taskId"] == task_id
    keys_within(config["pushNotificationConfig"], {"id", "url", "token", "authentication"}, "url")


@pytest.fixture
def v03_echo(make_target) -> Target:
    return make_target(
        headers=NO_HEADER,
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
    )


def v03_send(http: httpx.Client, target: Target, text: str = "hi", **params: Any) -> Any:
    return result_of(call(http, target, "message/send", {"message": v03_message(text), **params}))


def test_v03_message_send_answers_a_task(http, v03_echo):
    """7.1 message/send, MessageSendParams {message, configuration {acceptedOutputModes,
    historyLength, pushNotificationConfig, blocking}, metadata}: Task | Message."""
    task = v03_send(
        http,
        v03_echo,
        "hello",
        configuration={"acceptedOutputModes": ["text/plain"], "historyLength": 5, "blocking": True},
        metadata={"trace": "v03"},
    )
    v03_task(task)
    assert task["status"]["state"] == "completed" and task["metadata"] == {"trace": "v03"}
    assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "hello"}]


def test_v03_message_stream_sends_stream_events(http, v03_echo):
    """7.2 message/stream: SSE, each data a SendStreamingMessageResponse whose result is a
    Message, Task, TaskStatusUpdateEvent or TaskArtifactUpdateEvent, the last one final."""
    events = stream_results(http, v03_echo, "message/stream", {"message": v03_message("s")})
    for event in events:
        v03_event(event)
    assert events[-1]["kind"] == "status-update" and events[-1]["final"] is True
    assert events[-1]["status"]["state"] == "completed"
    assert events[0]["kind"] == "task"
    # the artifact comes as an event, or whole in the task if the agent was quicker
    assert any(e["kind"] == "artifact-update" or e.get("artifacts") for e in events)


def test_v03_tasks_get_with_task_query_params(http, v03_echo):
    """7.3 tasks/get, TaskQueryParams {id, historyLength, metadata}: Task."""
    task_id = v03_send(http, v03_echo, "one")["id"]
    got = result_of(
        call(http, v03_echo, "tasks/get", {"id": task_id, "historyLength": 1, "metadata": {}})
    )
    v03_task(got)
    assert got["id"] == task_id and len(got["history"]) == 1


def test_v03_tasks_cancel_with_task_id_params(http, make_target):
    """7.4 tasks/cancel, TaskIdParams {id, metadata}: Task; 8.2's -32002 for a finished task."""
    target = make_target(config={"input_required": True}, headers=NO_HEADER)
    task_id = v03_send(http, target)["id"]
    canceled = result_of(call(http, target, "tasks/cancel", {"id": task_id, "metadata": {}}))
    v03_task(canceled)
    assert canceled["status"]["state"] == "canceled"
    error_shape(error_of(call(http, target, "tasks/cancel", {"id": task_id}), -32002, task_id))


def test_v03_push_notification_config_methods(http, v03_echo):
    """7.5-7.8 tasks/pushNotificationConfig/set (TaskPushNotificationConfig), get
    (GetTaskPushNotificationConfigParams {id, pushNotificationConfigId}, or TaskIdParams), list
    (ListTaskPushNotificationConfigParams {id}: TaskPushNotificationConfig[]) and delete
    (DeleteTaskPushNotificationConfigParams {id, pushNotificationConfigId}: null)."""
    task_id = v03_send(http, v03_echo)["id"]
    config = {
        "taskId": task_id,
        "pushNotificationConfig": {
            "id": "hook",
            "url": HOOK,
            "token": "t0k",
            "authentication": {"schemes": ["Bearer"], "credentials": "secret"},
        },
    }
    created = result_of(call(http, v03_echo, "tasks/pushNotificationConfig/set", config))
    v03_push_config(created, task_id)
    assert created["pushNotificationConfig"]["id"] == "hook"
    # the token and credentials are write-only: absent from every answer, the scheme kept
    assert "token" not in created["pushNotificationConfig"]
    assert created["pushNotificationConfig"]["authentication"] == {"schemes": ["Bearer"]}
    method = "tasks/pushNotificationConfig/get"
    got = result_of(
        call(http, v03_echo, method, {"id": task_id, "pushNotificationConfigId": "hook"})
    )
    v03_push_config(got, task_id)
    assert got["pushNotificationConfig"]["url"] == HOOK
    # 7.4.1: TaskIdParams serve tasks/pushNotificationConfig/get too
    assert result_of(call(http, v03_echo, method, {"id": task_id})) == got
    listed = result_of(call(http, v03_echo, "tasks/pushNotificationConfig/list", {"id": task_id}))
    assert isinstance(listed, list) and [c["pushNotificationConfig"]["id"] for c in listed] == [
        "hook"
    ]
    for config in listed:
        v03_push_config(config, task_id)
    deleted = call(
        http,
        v03_echo,
        "tasks/pushNotificationConfig/delete",
        {"id": task_id, "pushNotificationConfigId": "hook"},
    )
    assert result_of(deleted) is None
    assert (
        result_of(call(http, v03_echo, "tasks/pushNotificationConfig/list", {"id": task_id})) == []
    )


def test_v03_tasks_resubscribe_follows_the_task(http, make_target):
    """7.9 tasks/resubscribe, TaskIdParams: SSE of SendStreamingMessageResponse, here until the
    task is canceled."""
    target = make_target(config={"input_required": True}, headers=NO_HEADER)
    task_id = v03_send(http, target)["id"]
    events = stream_results(
        http,
        target,
        "tasks/resubscribe",
        {"id": task_id},
        after_first=lambda: result_of(call(http, target, "tasks/cancel", {"id": task_id})),
    )
    for event in events:
        v03_event(event)
    assert events[0]["kind"] == "task" and events[0]["status"]["state"] == "input-required"
    assert events[-1]["kind"] == "status-update" and events[-1]["final"] is True
    assert events[-1]["status"]["state"] == "canceled"


def test_v03_authenticated_extended_card(http, v03_echo):
    """7.10 agent/getAuthenticatedExtendedCard, no payload: AgentCard; 401 without
    credentials."""
    card = result_of(call(http, v03_echo, "agent/getAuthenticatedExtendedCard"))
    for name in ("name", "description", "url", "version", "capabilities", "skills"):
        assert name in card, name
    assert card["protocolVersion"].startswith("0.3")
    anonymous = http.post(
        v03_echo.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"},
    )
    assert anonymous.status_code == 401 and "WWW-Authenticate" in anonymous.headers


def test_v03_error_codes(http, v03_echo, make_target):
    """8.1 (-32700, -32600, -32601, -32602) and 8.2 (-32001 TaskNotFoundError, -32003
    PushNotificationNotSupportedError, -32004 UnsupportedOperationError, -32005
    ContentTypeNotSupportedError; -32002 is above)."""
    done = v03_send(http, v03_echo)["id"]
    missing = str(uuid.uuid4())
    errors = [
        error_of(post_raw(http, v03_echo, b"{not json"), -32700, request_id=None),
        error_of(post_raw(http, v03_echo, b'{"jsonrpc": "2.0", "id": 1}'), -32600, "method"),
        error_of(call(http, v03_echo, "tasks/foo", {}), -32601, "tasks/foo"),
        error_of(call(http, v03_echo, "tasks/get", {"historyLength": 1}), -32602, "id"),
        error_of(call(http, v03_echo, "tasks/get", {"id": missing}), -32001, missing),
        error_of(call(http, v03_echo, "tasks/resubscribe", {"id": done}), -32004, done),
        error_of(
            call(
                http,
                v03_echo,
                "message/send",
                {
                    "message": v03_message("x"),
                    "configuration": {"acceptedOutputModes": ["image/png"]},
                },
            ),
            -32005,
            "image/png",
        ),
    ]
    quiet = make_target("quiet", push_notifications=False, headers=NO_HEADER)
    config = {"taskId": done, "pushNotificationConfig": {"url": HOOK}}
    errors.append(error_of(call(http, quiet, "tasks/pushNotificationConfig/set", config), -32003))
    for error in errors:
        error_shape(error)


# --- a2a-v0.3.0-endpoints-zh.md ------------------------------------------------------------------
# Section 3 (the eleven endpoints with their params, 3.2.2 tasks/list and its errors, 3.3 the
# push config params {taskId, configId}) and 4.2 (the error codes). No version header.


def test_zh_message_send_and_stream(http, v03_echo):
    """3.1.1 message/send (MessageSendParams with configuration {acceptedOutputModes,
    historyLength, pushNotificationConfig, blocking}): Task or Message; 3.1.2 message/stream:
    SSE of SendStreamingMessageResponse."""
    configuration = {
        "acceptedOutputModes": ["text/plain"],
        "historyLength": 1,
        "pushNotificationConfig": {"url": HOOK},
        "blocking": True,
    }
    task = v03_send(http, v03_echo, "zh", configuration=configuration, metadata={"k": "v"})
    v03_task(task)
    assert task["status"]["state"] == "completed" and len(task["history"]) == 1
    listed = result_of(
        call(http, v03_echo, "tasks/pushNotificationConfig/list", {"taskId": task["id"]})
    )
    assert [c["pushNotificationConfig"]["url"] for c in listed] == [HOOK]
    events = stream_results(http, v03_echo, "message/stream", {"message": v03_message("zh")})
    for event in events:
        v03_event(event)
    assert events[-1]["final"] is True


def test_zh_tasks_get_cancel_and_resubscribe(http, make_target):
    """3.2.1 tasks/get {id, historyLength}: Task; 3.2.3 tasks/cancel {id}: the updated Task,
    TaskNotCancelableError after; 3.2.4 tasks/resubscribe {id}: SSE."""
    target = make_target(config={"input_required": True}, headers=NO_HEADER)
    task_id = v03_send(http, target)["id"]
    got = result_of(call(http, target, "tasks/get", {"id": task_id, "historyLength": 2}))
    v03_task(got)
    assert got["status"]["state"] == "input-required"
    events = stream_results(
        http,
        target,
        "tasks/resubscribe",
        {"id": task_id},
        after_first=lambda: v03_task(
            result_of(call(http, target, "tasks/cancel", {"id": task_id}))
        ),
    )
    for event in events:
        v03_event(event)
    assert events[-1]["status"]["state"] == "canceled" and events[-1]["final"] is True
    error_of(call(http, target, "tasks/cancel", {"id": task_id}), -32002)


def test_zh_tasks_list_params_and_result(http, v03_echo):
    """3.2.2 tasks/list, ListTasksParams {contextId, status, pageSize (1-100, default 50),
    pageToken, historyLength, lastUpdatedAfter (ms), includeArtifacts, metadata}:
    ListTasksResult {tasks, totalSize, pageSize, nextPageToken ("" when no more)}."""
    context = f"ctx-{uuid.uuid4()}"
    before = int(time.time() * 1000) - 60_000
    first, second = (
        result_of(
            call(http, v03_echo, "message/send", {"message": v03_message(t, contextId=context)})
        )
        for t in ("a", "b")
    )
    params = {
        "contextId": context,
        "status": "completed",
        "pageSize": 1,
        "historyLength": 0,
        "lastUpdatedAfter": before,
        "includeArtifacts": True,
        "metadata": {},
    }
    page = result_of(call(http, v03_echo, "tasks/list", params))
    keys_within(page, {"tasks", "totalSize", "pageSize", "nextPageToken"}, *page)
    assert set(page) == {"tasks", "totalSize", "pageSize", "nextPageToken"}
    assert page["totalSize"] == 2 and page["pageSize"] == 1 and page["nextPageToken"]
    (newest,) = page["tasks"]
    v03_task(newest)
    assert newest["id"] == second["id"] and newest["artifacts"] and not newest.get("history")
    rest = result_of(
        call(http, v03_echo, "tasks/list", {**params, "pageToken": page["nextPageToken"]})
    )
    assert [t["id"] for t in rest["tasks"]] == [first["id"]] and rest["nextPageToken"] == ""
    # pageSize defaults to 50; artifacts only when asked for
    everything = result_of(call(http, v03_echo, "tasks/list", {"contextId": context}))
    assert everything["pageSize"] == 50 and everything["nextPageToken"] == ""
    assert all("artifacts" not in t for t in everything["tasks"])


@pytest.mark.parametrize(
    ("params", "fragments"),
    [
        ({"pageSize": 0}, ["pageSize"]),
        ({"pageSize": 101}, ["pageSize"]),
        ({"pageToken": "not-a-token"}, ["pageToken"]),
        ({"historyLength": -1}, ["historyLength"]),
        ({"status": "finished"}, ["status", "finished"]),
        ({"lastUpdatedAfter": "yesterday"}, ["lastUpdatedAfter"]),
        ({"lastUpdatedAfter": 4102444800000}, ["4102444800000", "2100-01-01", "in the future"]),
    ],
    ids=[
        "pageSize-0",
        "pageSize-101",
        "pageToken",
        "historyLength",
        "status",
        "lastUpdatedAfter-format",
        "lastUpdatedAfter-future",
    ],
)
def test_zh_tasks_list_errors(http, v03_echo, params, fragments):
    """3.2.2's 错误情况: pageSize outside 1-100, a bad pageToken, a negative historyLength, an
    invalid status, a lastUpdatedAfter of a bad format or in the future: each invalid params
    (4.2.1's -32602), naming what is wrong."""
    error_shape(error_of(call(http, v03_echo, "tasks/list", params), -32602, *fragments))


def test_zh_future_last_updated_after_names_the_servers_time(http, v03_echo):
    """A future lastUpdatedAfter: the answer gives the server's now, so a client can tell its
    clock (or its unit) is off."""
    ahead = int(time.time() * 1000) + 3_600_000
    error = error_of(call(http, v03_echo, "tasks/list", {"lastUpdatedAfter": ahead}), -32602)
    assert str(ahead) in error["message"] and "this server's time is" in error["message"]


def test_zh_push_config_methods_with_task_id_and_config_id(http, v03_echo):
    """3.3.1 set {taskId, pushNotificationConfig {id, url, token, authentication {schemes,
    credentials}}}; 3.3.2 get {taskId, configId}; 3.3.3 list {taskId}:
    TaskPushNotificationConfig[]; 3.3.4 delete {taskId, configId}: null."""
    task_id = v03_send(http, v03_echo)["id"]
    config = {
        "taskId": task_id,
        "pushNotificationConfig": {
            "id": "zh",
            "url": HOOK,
            "token": "tok",
            "authentication": {"schemes": ["Bearer"], "credentials": "c"},
        },
    }
    v03_push_config(
        result_of(call(http, v03_echo, "tasks/pushNotificationConfig/set", config)), task_id
    )
    ids = {"taskId": task_id, "configId": "zh"}
    got = result_of(call(http, v03_echo, "tasks/pushNotificationConfig/get", ids))
    v03_push_config(got, task_id)
    assert (
        got["pushNotificationConfig"]["id"] == "zh" and got["pushNotificationConfig"]["url"] == HOOK
    )
    listed = result_of(
        call(http, v03_echo, "tasks/pushNotificationConfig/list", {"taskId": task_id})
    )
    assert [c["pushNotificationConfig"]["id"] for c in listed] == ["zh"]
    # the specification's spelling of the same param, with the same value, is no conflict
    same = {**ids, "id": task_id, "pushNotificationConfigId": "zh"}
    assert result_of(call(http, v03_echo, "tasks/pushNotificationConfig/get", same)) == got
    assert result_of(call(http, v03_echo, "tasks/pushNotificationConfig/delete", ids)) is None
    assert (
        result_of(call(http, v03_echo, "tasks/pushNotificationConfig/list", {"taskId": task_id}))
        == []
    )


@pytest.mark.parametrize(
    ("method", "params", "fragments"),
    [
        ("get", {"taskId": "a", "id": "b"}, ["'taskId' 'a'", "'id' 'b'"]),
        (
            "get",
            {"taskId": "t", "configId": "x", "pushNotificationConfigId": "y"},
            ["'configId' 'x'", "'pushNotificationConfigId' 'y'"],
        ),
        ("list", {"taskId": "a", "id": "b"}, ["'taskId' 'a'", "'id' 'b'"]),
        (
            "delete",
            {"taskId": "t", "configId": "x", "pushNotificationConfigId": "y"},
            ["'configId' 'x'", "'pushNotificationConfigId' 'y'"],
        ),
    ],
)
def test_zh_and_specification_spellings_that_disagree_are_refused(
    http, v03_echo, method, params, fragments
):
    """Both spellings of one param (the summary's and the specification's), naming different
    things: invalid params naming both, rather than one chosen silently."""
    response = call(http, v03_echo, f"tasks/pushNotificationConfig/{method}", params)
    error_of(response, -32602, *fragments)


def test_zh_extended_card_and_error_codes(http, v03_echo, make_target):
    """3.4.1 agent/getAuthenticatedExtendedCard (no params): AgentCard, 401 without
    credentials; 4.2 the error codes: -32700, -32600, -32601, -32602, -32001, -32002, -32003,
    -32004, -32005."""
    card = result_of(call(http, v03_echo, "agent/getAuthenticatedExtendedCard"))
    assert card["name"] and card["capabilities"] is not None and "skills" in card
    anonymous = http.post(
        v03_echo.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"},
    )
    assert anonymous.status_code == 401
    done = v03_send(http, v03_echo)["id"]
    quiet = make_target("quiet", push_notifications=False, headers=NO_HEADER)
    errors = [
        error_of(post_raw(http, v03_echo, b"[{"), -32700, request_id=None),
        error_of(post_raw(http, v03_echo, b'{"jsonrpc": "2.0", "id": 1, "method": 7}'), -32600),
        error_of(call(http, v03_echo, "tasks/search", {}), -32601),
        error_of(call(http, v03_echo, "tasks/list", {"pageSize": "ten"}), -32602, "pageSize"),
        error_of(call(http, v03_echo, "tasks/get", {"id": str(uuid.uuid4())}), -32001),
        error_of(call(http, v03_echo, "tasks/cancel", {"id": done}), -32002),
        error_of(call(http, quiet, "tasks/pushNotificationConfig/list", {"taskId": done}), -32003),
        error_of(call(http, v03_echo, "tasks/resubscribe", {"id": done}), -32004),
        error_of(
            call(
                http,
                v03_echo,
                "message/send",
                {"message": v03_message("x"), "configuration": {"acceptedOutputModes": ["a/b"]}},
            ),
            -32005,
        ),
    ]
    for error in errors:
        error_shape(error)


# --- a2a-transport-mapping.md, the JSONRPC column ------------------------------------------------
# Rows tasks/get, task/cancel, message/send, message/stream, tasks/resubscribe,
# tasks/pushNotificationConfig/get and /set, card/get ("Not defined now" for JSON-RPC). Payloads
# as the column writes them; POST to the agent's one URL, no version header.


def test_mapping_tasks_get_and_task_cancel(http, make_target):
    """tasks/get {id, metadata?, historyLength?}: Task; task/cancel (the table's spelling of
    the method) {id, metadata?}: Task."""
    target = make_target(config={"input_required": True}, headers=NO_HEADER)
    task_id = v03_send(http, target)["id"]
    got = result_of(
        call(http, target, "tasks/get", {"id": task_id, "metadata": {}, "historyLength": 1})
    )
    v03_task(got)
    assert got["id"] == task_id and len(got["history"]) == 1
    canceled = result_of(call(http, target, "task/cancel", {"id": task_id, "metadata": {}}))
    v03_task(canceled)
    assert canceled["status"]["state"] == "canceled"


def test_mapping_message_send_and_stream(http, v03_echo):
    """message/send {message, configuration?, metadata?}: Message | Task; message/stream: Message
    | Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent."""
    sent = result_of(
        call(
            http,
            v03_echo,
            "message/send",
            {"message": v03_message("m"), "configuration": {"blocking": True}, "metadata": {}},
        )
    )
    assert sent["kind"] in ("task", "message")
    v03_task(sent)
    events = stream_results(
        http, v03_echo, "message/stream", {"message": v03_message("m"), "metadata": {}}
    )
    assert {e["kind"] for e in events} <= {"message", "task", "status-update", "artifact-update"}
    for event in events:
        v03_event(event)


def test_mapping_resubscribe_and_push_config_get_and_set(http, make_target):
    """tasks/resubscribe {id, metadata?}: the stream; tasks/pushNotificationConfig/set
    (TaskPushNotificationConfig) and get {id, metadata?}: TaskPushNotificationConfig."""
    target = make_target(config={"input_required": True}, headers=NO_HEADER)
    task_id = v03_send(http, target)["id"]
    config = {"taskId": task_id, "pushNotificationConfig": {"url": HOOK}}
    v03_push_config(
        result_of(call(http, target, "tasks/pushNotificationConfig/set", config)), task_id
    )
    got = result_of(
        call(http, target, "tasks/pushNotificationConfig/get", {"id": task_id, "metadata": {}})
    )
    v03_push_config(got, task_id)
    assert got["pushNotificationConfig"]["url"] == HOOK
    events = stream_results(
        http,
        target,
        "tasks/resubscribe",
        {"id": task_id, "metadata": {}},
        after_first=lambda: result_of(call(http, target, "task/cancel", {"id": task_id})),
    )
    for event in events:
        v03_event(event)
    assert events[-1]["status"]["state"] == "canceled"


def test_mapping_card_get_is_not_a_jsonrpc_method(http, v03_echo):
    """card/get: "Not defined now" in the JSONRPC column: method not found, pointing nowhere
    else."""
    error_shape(error_of(call(http, v03_echo, "card/get", {}), -32601, "card/get"))


# --- a2a-v1.0.1-specification.md, section 9 (and 5.3, 5.4) ---------------------------------------
# PascalCase methods (9.1, 5.3), service parameters as headers (9.2: A2A-Version), 9.4's methods
# with their example params, 9.5's error object with `data` details, 5.4's codes.

V10_STATE = "TASK_STATE_"


def v10_message(text: str = "hi") -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}


def v10_task(task: dict[str, Any]) -> None:
    """Task (4.1.1): id, contextId, status {state, message, timestamp}, artifacts, history,
    metadata; no v0.3 `kind`."""
    keys_within(
        task, {"id", "contextId", "status", "artifacts", "history", "metadata"}, "id", "status"
    )
    assert task["status"]["state"].startswith(V10_STATE)


@pytest.fixture
def v10_echo(make_target) -> Target:
    return make_target(
        headers=V10, default_input_modes=["text/plain"], default_output_modes=["text/plain"]
    )


def v10_send(http: httpx.Client, target: Target, text: str = "hi") -> dict[str, Any]:
    result = result_of(call(http, target, "SendMessage", {"message": v10_message(text)}, V10))
    assert set(result) == {"task"}, result
    return result["task"]


def test_v10_send_get_list_and_cancel(http, make_target, v10_echo):
    """9.4.1 SendMessage: SendMessageResponse {task | message}; 9.4.3 GetTask {id,
    historyLength}; 9.4.4 ListTasks {contextId, status, pageSize, pageToken}; 9.4.5 CancelTask
    {id}."""
    task = v10_send(http, v10_echo, "one")
    v10_task(task)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    got = result_of(call(http, v10_echo, "GetTask", {"id": task["id"], "historyLength": 10}, V10))
    v10_task(got)
    assert got["id"] == task["id"] and got["artifacts"] == task["artifacts"]
    params = {
        "contextId": task["contextId"],
        "status": "TASK_STATE_COMPLETED",
        "pageSize": 50,
    }
    page = result_of(call(http, v10_echo, "ListTasks", params, V10))
    assert set(page) >= {"tasks", "nextPageToken", "pageSize", "totalSize"}
    assert [t["id"] for t in page["tasks"]] == [task["id"]] and page["nextPageToken"] == ""
    again = result_of(call(http, v10_echo, "ListTasks", {**params, "pageToken": ""}, V10))
    assert again == page

    asking = make_target(config={"input_required": True}, headers=V10)
    waiting = v10_send(http, asking)
    canceled = result_of(call(http, asking, "CancelTask", {"id": waiting["id"]}, V10))
    v10_task(canceled)
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"


def test_v10_streaming_and_subscribe(http, make_target):
    """9.4.2 SendStreamingMessage: SSE of StreamResponse {task | message | statusUpdate |
    artifactUpdate}; 9.4.6 SubscribeToTask {id}: the same stream format."""
    target = make_target(config={"input_required": True}, headers=V10)
    events = stream_results(http, target, "SendStreamingMessage", {"message": v10_message()}, V10)
    for event in events:
        assert len(event) == 1 and set(event) <= {
            "task",
            "message",
            "statusUpdate",
            "artifactUpdate",
        }, event
    task_id = events[0]["task"]["id"]
    followed = stream_results(
        http,
        target,
        "SubscribeToTask",
        {"id": task_id},
        V10,
        after_first=lambda: result_of(call(http, target, "CancelTask", {"id": task_id}, V10)),
    )
    assert followed[0]["task"]["id"] == task_id
    assert followed[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"


def test_v10_push_notification_config_methods(http, v10_echo):
    """9.4.7 CreateTaskPushNotificationConfig (TaskPushNotificationConfig {taskId, id, url,
    token}), GetTaskPushNotificationConfig {taskId, id}, ListTaskPushNotificationConfigs
    {taskId}: {configs}, DeleteTaskPushNotificationConfig {taskId, id}: {}."""
    task_id = v10_send(http, v10_echo)["id"]
    config = {"taskId": task_id, "id": "v10", "url": HOOK, "token": "tk"}
    created = result_of(call(http, v10_echo, "CreateTaskPushNotificationConfig", config, V10))
    assert created["taskId"] == task_id and created["id"] == "v10" and created["url"] == HOOK
    ids = {"taskId": task_id, "id": "v10"}
    assert result_of(call(http, v10_echo, "GetTaskPushNotificationConfig", ids, V10)) == created
    listed = result_of(
        call(http, v10_echo, "ListTaskPushNotificationConfigs", {"taskId": task_id}, V10)
    )
    assert listed["configs"] == [created]
    assert result_of(call(http, v10_echo, "DeleteTaskPushNotificationConfig", ids, V10)) == {}


def test_v10_extended_card_without_params(http, v10_echo):
    """9.4.8 GetExtendedAgentCard, sent as the example sends it (no params member)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 6, "method": "GetExtendedAgentCard"}).encode()
    card = result_of(post_raw(http, v10_echo, body, V10), 6)
    assert card["name"] and card["supportedInterfaces"] and "url" not in card


def test_v10_error_codes_and_details(http, v10_echo, make_target):
    """9.5 (-32700, -32600, -32601, -32602; `data` an array of objects with `@type`) and 5.4
    (-32001, -32002, -32003, -32004, -32005, -32009)."""
    done = v10_send(http, v10_echo)["id"]
    quiet = make_target("quiet", push_notifications=False, headers=V10)
    errors = [
        error_of(post_raw(http, v10_echo, b"{", V10), -32700, request_id=None),
        error_of(post_raw(http, v10_echo, b'{"jsonrpc": "2.0", "id": 1}', V10), -32600),
        error_of(call(http, v10_echo, "tasks/get", {"id": done}, V10), -32601, "0.3"),
        error_of(call(http, v10_echo, "GetTask", {"id": done, "historyLength": "x"}, V10), -32602),
        error_of(call(http, v10_echo, "GetTask", {"id": str(uuid.uuid4())}, V10), -32001),
        error_of(call(http, v10_echo, "CancelTask", {"id": done}, V10), -32002),
        error_of(
            call(
                http,
                quiet,
                "CreateTaskPushNotificationConfig",
                {"taskId": done, "url": HOOK},
                V10,
            ),
            -32003,
        ),
        error_of(call(http, v10_echo, "SubscribeToTask", {"id": done}, V10), -32004),
        error_of(
            call(
                http,
                v10_echo,
                "SendMessage",
                {"message": v10_message(), "configuration": {"acceptedOutputModes": ["a/b"]}},
                V10,
            ),
            -32005,
        ),
        error_of(call(http, v10_echo, "GetTask", {"id": done}, {"A2A-Version": "9.9"}), -32009),
    ]
    for error in errors:
        error_shape(error)
        # every detail is an `@type` object; A2A's own errors carry one (ErrorInfo)
        assert all("@type" in detail for detail in error.get("data", [])), error
        if -32099 <= error["code"] <= -32001:
            assert error["data"], error


# --- no version header: the creator's dialect -------------------------------------------------
# tasks/get, tasks/cancel and tasks/resubscribe are both v0.1 and v0.3 names; sent without a
# version they answer as the task's creator spoke (docs/decisions.md, "JSON-RPC without a
# version header").


def test_without_a_header_a_v10_task_answers_in_v10(http, make_target):
    target = make_target(config={"input_required": True}, headers=V10)
    task_id = v10_send(http, target)["id"]
    got = result_of(call(http, target, "tasks/get", {"id": task_id, "historyLength": 0}))
    v10_task(got)
    assert got["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and "history" not in got
    events = stream_results(
        http,
        target,
        "tasks/resubscribe",
        {"id": task_id},
        after_first=lambda: v10_task(
            result_of(call(http, target, "tasks/cancel", {"id": task_id}))
        ),
    )
    assert events[0]["task"]["id"] == task_id
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
    # its refusals too: TaskNotCancelable is v1.0's -32002
    error_of(call(http, target, "tasks/cancel", {"id": task_id}), -32002)
    # a version named in the request is spoken, whoever made the task
    v03_task(result_of(call(http, target, "tasks/get", {"id": task_id}, {"A2A-Version": "0.3"})))


def test_without_a_header_a_v01_task_answers_in_v01(http, make_target):
    target = make_target(config={"input_required": True}, headers={"A2A-Version": "0.1"})
    task_id = uuid.uuid4().hex
    result_of(
        call(
            http, target, "tasks/send", {"id": task_id, "message": v01_message("x")}, target.headers
        )
    )
    got = result_of(call(http, target, "tasks/get", {"id": task_id, "historyLength": 0}))
    v01_task(got, task_id)
    assert got["history"] == []
    events = stream_results(
        http,
        target,
        "tasks/resubscribe",
        {"id": task_id},
        after_first=lambda: v01_task(
            result_of(call(http, target, "tasks/cancel", {"id": task_id})), task_id
        ),
    )
    assert all(e["id"] == task_id for e in events)
    assert events[-1]["status"]["state"] == "canceled" and events[-1]["final"] is True
    error_of(call(http, target, "tasks/cancel", {"id": task_id}), -32000, "canceled")
    error_of(call(http, target, "tasks/resubscribe", {"id": task_id}), -32000)
