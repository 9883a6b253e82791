"""REST v0.3 (`/a2a/<tenant>/<agent>/v1/...`) as each document that defines REST spells it, on
the live platform (real daphne + Celery): every method of each document, in its own paths,
bodies and field spellings, answered in the request's spelling; requests without a body in
the spelling of the request that created the task; unreadable mixes of spellings refused with
a 400 that names the field.

The documents (reference material, not in the repository): the transport mapping table's REST
column (a2a-transport-mapping.md), the v0.3 endpoint summary's REST column
(a2a-v0.3.0-endpoints-zh.md), the v0.3.0 specification's REST sections (3.2.3, 3.5.6, 7.x), the
earlier v1 draft's proto HTTP rules and JSON Schema (a2a-v1-proto-and-json-schema.txt), and the
v1.0.1 proto's REST paths under the agent root. Each test declares the shapes it sends.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from .helpers import mid
from .test_rest_binding import (
    _DEFAULT,
    HOOK,
    V03,
    a2a_error,
    ok,
    refused_stream,
    req,
    sse,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CONFIG_NAME = "tasks/{task}/pushNotificationConfigs/{config}"


def url(t: Any, path: str) -> str:
    return t.url + "v1/" + path


def call(http: Any, t: Any, method: str, path: str, body: Any = _DEFAULT, **params: str) -> Any:
    """One v0.3 REST call that must succeed; its JSON answer."""
    return ok(req(http, method, url(t, path), key=t.key, body=body, params=params or None))


def stream(http: Any, t: Any, method: str, path: str, body: Any = _DEFAULT, **params: str):
    query = "?" + "&".join(f"{k}={v}" for k, v in params.items()) if params else ""
    return [f.data for f in sse(http, method, url(t, path) + query, key=t.key, body=body)]


def no_content_anywhere(value: Any) -> None:
    """No proto-JSON `content` (a message's parts), `kind` or `mimeType` in a draft answer."""
    if isinstance(value, dict):
        assert not {"content", "kind", "mimeType"} & set(value), value
        for key, item in value.items():
            if key != "metadata":
                no_content_anywhere(item)
    elif isinstance(value, list):
        for item in value:
            no_content_anywhere(item)


# --- the transport mapping table ------------------------------------------------------------


def proto_message(text: str) -> dict[str, Any]:
    """The mapping table's `message: Message`: its REST column is the AIP-127 transcoding of
    the v0.3 proto, so the Message is the proto's JSON."""
    return {"messageId": mid(), "role": "ROLE_USER", "content": [{"text": text}]}


def test_mapping_table(http, make_target):
    """a2a-transport-mapping.md, "API Structures", REST column: every row. Its bodies are the
    proto's JSON, so a request says it wants the table's answers with `?spelling=mapping`;
    the task keeps that spelling, and its two list rows answer bare arrays."""
    t = make_target()
    # message/send: POST /v1/message:send, {message, configuration?, metadata?} -> {task?}
    sent = call(
        http,
        t,
        "POST",
        "message:send",
        {"message": proto_message("map"), "configuration": {"blocking": True}, "metadata": {}},
        spelling="mapping",
    )
    task = sent["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", sent
    assert task["history"][0]["content"] == [{"text": "map"}], task
    task_id = task["id"]
    # tasks/get: GET /v1/tasks/{id} -> Task (no body: the creating request's spelling).
    got = call(http, t, "GET", f"tasks/{task_id}", historyLength="1")
    assert got["id"] == task_id and got["status"]["state"] == "TASK_STATE_COMPLETED"
    # tasks/pushNotificationConfig/set: POST /v1/tasks/{id}/pushNotificationConfigs,
    # `config: TaskPushNotificationConfig` -> TaskPushNotificationConfig
    created = call(
        http,
        t,
        "POST",
        f"tasks/{task_id}/pushNotificationConfigs",
        {"config": {"pushNotificationConfig": {"id": "c1", "url": HOOK}}},
    )
    assert created["name"] == CONFIG_NAME.format(task=task_id, config="c1"), created
    assert created["pushNotificationConfig"]["url"] == HOOK
    # tasks/pushNotificationConfig/get: GET /v1/tasks/*/pushNotificationConfigs/*
    assert call(http, t, "GET", f"tasks/{task_id}/pushNotificationConfigs/c1") == created
    # List Task Notifications: GET /v1/tasks/{id}/pushNotificationConfigs -> [config]
    assert call(http, t, "GET", f"tasks/{task_id}/pushNotificationConfigs") == [created]
    # List Tasks: GET /v1/tasks -> [Task] (no task to look at: asked for).
    listed = call(http, t, "GET", "tasks", spelling="mapping")
    assert isinstance(listed, list) and [x["id"] for x in listed] == [task_id], listed
    assert set(call(http, t, "GET", "tasks")) == {"tasks", "totalSize", "pageSize", "nextPageToken"}
    # card/get: GET v1/card -> AgentCard
    card = call(http, t, "GET", "card", spelling="mapping")
    assert card["name"] == t.agent.name and "protocolVersion" in card

    # message/stream: POST /v1/message:stream -> {message?, task?, statusUpdate?, artifactUpdate?}
    events = stream(
        http, t, "POST", "message:stream", {"message": proto_message("s")}, spelling="mapping"
    )
    assert all(len(e) == 1 for e in events) and "task" in events[0], events
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", events

    # task/cancel: POST /v1/tasks/{id}:cancel, `name: string`; tasks/resubscribe: POST
    # /v1/tasks/{id}:resubscribe, `name: string`.
    slow = make_target("slow", config={"delay_seconds": 3})
    running = call(
        http,
        slow,
        "POST",
        "message:send",
        {"message": proto_message("wait"), "configuration": {"blocking": False}},
        spelling="mapping",
    )["task"]
    name = f"tasks/{running['id']}"
    follow = stream(http, slow, "POST", f"tasks/{running['id']}:resubscribe", {"name": name})
    assert "task" in follow[0] and all(len(e) == 1 for e in follow), follow
    assert follow[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", follow
    running = call(
        http,
        slow,
        "POST",
        "message:send",
        {"message": proto_message("wait"), "configuration": {"blocking": False}},
        spelling="mapping",
    )["task"]
    name = f"tasks/{running['id']}"
    canceled = call(http, slow, "POST", f"tasks/{running['id']}:cancel", {"name": name})
    assert canceled["status"]["state"] == "TASK_STATE_CANCELLED", canceled
    a2a_error(
        req(
            http,
            "POST",
            url(slow, f"tasks/{running['id']}:cancel"),
            key=slow.key,
            body={"name": "tasks/another"},
        ),
        V03,
        400,
        "INVALID_PARAMS",
        "tasks/another",
    )
    # Delete (not in the table; proto-JSON's google.protobuf.Empty).
    assert call(http, t, "DELETE", f"tasks/{task_id}/pushNotificationConfigs/c1") == {}


# --- v0.3 JSON: the endpoint summary and the specification ------------------------------------


def json_message(text: str, **fields: Any) -> dict[str, Any]:
    """v0.3 JSON's Message (specification 6.4): `kind`, roles `user`/`agent`, parts with
    `kind`."""
    return {
        "kind": "message",
        "messageId": mid(),
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        **fields,
    }


def json_task(value: Any, state: str) -> dict[str, Any]:
    assert value["kind"] == "task" and value["status"]["state"] == state, value
    for message in value.get("history", []):
        assert message["kind"] == "message" and message["role"] in ("user", "agent"), message
        assert all("kind" in part for part in message["parts"]), message
    return value


def json_events(events: list[Any], final_state: str) -> None:
    kinds = [event["kind"] for event in events]
    assert set(kinds) <= {"task", "message", "status-update", "artifact-update"}, events
    assert events[-1]["kind"] == "status-update" and events[-1]["final"] is True, events
    assert events[-1]["status"]["state"] == final_state, events


def test_v03_endpoint_summary(http, make_target):
    """a2a-v0.3.0-endpoints-zh.md, 2.1 and 3.x, REST column: every endpoint with its request
    parameters (MessageSendParams, TaskIdParams, TaskPushNotificationConfig) and responses
    (Task, ListTasksResult, TaskPushNotificationConfig, TaskPushNotificationConfig[], null)."""
    t = make_target()
    # 3.1.1 message/send: POST /v1/message:send
    params = {
        "message": json_message("zh"),
        "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 5},
        "metadata": {"source": "zh"},
    }
    task = json_task(call(http, t, "POST", "message:send", params), "completed")
    task_id = task["id"]
    assert task["history"][0]["parts"] == [{"kind": "text", "text": "zh"}], task
    # 3.2.1 tasks/get: GET /v1/tasks/{id} (the task was created in v0.3 JSON).
    json_task(call(http, t, "GET", f"tasks/{task_id}", historyLength="2"), "completed")
    # 3.2.2 tasks/list: GET /v1/tasks -> ListTasksResult
    listed = call(http, t, "GET", "tasks", spelling="json", status="completed", pageSize="10")
    assert set(listed) == {"tasks", "totalSize", "pageSize", "nextPageToken"}, listed
    assert [json_task(x, "completed")["id"] for x in listed["tasks"]] == [task_id]
    assert listed["nextPageToken"] == "" and listed["totalSize"] == 1
    # 3.3.1 tasks/pushNotificationConfig/set: POST /v1/tasks/{id}/pushNotificationConfigs
    config = {
        "id": "zh-1",
        "url": HOOK,
        "token": "tok",
        "authentication": {"schemes": ["Bearer"], "credentials": "secret"},
    }
    created = call(
        http,
        t,
        "POST",
        f"tasks/{task_id}/pushNotificationConfigs",
        {"taskId": task_id, "pushNotificationConfig": config},
    )
    assert created["taskId"] == task_id, created
    assert created["pushNotificationConfig"]["id"] == "zh-1"
    assert created["pushNotificationConfig"]["authentication"]["schemes"] == ["Bearer"]
    # 3.3.2 get, 3.3.3 list (an array), 3.3.4 delete (null).
    path = f"tasks/{task_id}/pushNotificationConfigs"
    assert call(http, t, "GET", f"{path}/zh-1") == created
    assert call(http, t, "GET", path) == [created]
    response = req(http, "DELETE", url(t, f"{path}/zh-1"), key=t.key)
    assert response.status_code == 200 and response.content == b"null", response.text
    assert call(http, t, "GET", path) == []
    # 3.4.1 agent/getAuthenticatedExtendedCard: GET /v1/card
    card = call(http, t, "GET", "card", spelling="json")
    assert card["name"] == t.agent.name and card["protocolVersion"], card
    # 3.1.2 message/stream: POST /v1/message:stream, SendStreamingMessageResponse events.
    events = stream(http, t, "POST", "message:stream", {"message": json_message("zh stream")})
    json_events(events, "completed")

    # 3.2.3 tasks/cancel and 3.2.4 tasks/resubscribe: POST, TaskIdParams `{id}`.
    slow = make_target("slow", config={"delay_seconds": 3})
    running = call(
        http,
        slow,
        "POST",
        "message:send",
        {"message": json_message("wait"), "configuration": {"blocking": False}},
    )
    assert running["kind"] == "task", running
    json_events(
        stream(http, slow, "POST", f"tasks/{running['id']}:subscribe", {"id": running["id"]}),
        "completed",
    )
    running = call(
        http,
        slow,
        "POST",
        "message:send",
        {"message": json_message("wait"), "configuration": {"blocking": False}},
    )
    canceled = call(http, slow, "POST", f"tasks/{running['id']}:cancel", {"id": running["id"]})
    json_task(canceled, "canceled")


def test_v03_specification(http, make_target):
    """a2a-v0.3.0-specification.txt, 3.2.3 (HTTP+JSON transport), 3.5.6 (the method mapping
    table: its REST endpoints) and 7.1-7.10 (payloads MessageSendParams with
    MessageSendConfiguration.pushNotificationConfig, TaskPushNotificationConfig; responses Task
    | Message, TaskPushNotificationConfig[]), with file and data parts (6.5)."""
    t = make_target()
    message = json_message(
        "spec",
        parts=[
            {"kind": "text", "text": "spec"},
            {
                "kind": "file",
                "file": {"uri": "https://example.com/a.txt", "mimeType": "text/plain"},
            },
            {"kind": "data", "data": {"answer": 42}},
        ],
    )
    configuration = {"blocking": True, "pushNotificationConfig": {"id": "inline", "url": HOOK}}
    task = call(
        http, t, "POST", "message:send", {"message": message, "configuration": configuration}
    )
    json_task(task, "completed")
    task_id = task["id"]
    # GET /v1/tasks/{id}: the history keeps the file and data parts in v0.3 JSON.
    got = json_task(call(http, t, "GET", f"tasks/{task_id}"), "completed")
    parts = got["history"][0]["parts"]
    assert {"kind": "data", "data": {"answer": 42}} in parts, parts
    file = next(p["file"] for p in parts if p["kind"] == "file")
    assert file["uri"] == "https://example.com/a.txt" and file["mimeType"] == "text/plain"
    # GET /v1/tasks (gRPC/REST only).
    listed = call(http, t, "GET", "tasks", spelling="json")
    assert [json_task(x, "completed")["id"] for x in listed["tasks"]] == [task_id]
    # The inline config, then the push config methods (7.5-7.8).
    path = f"tasks/{task_id}/pushNotificationConfigs"
    inline = call(http, t, "GET", f"{path}/inline")
    assert inline == {"taskId": task_id, "pushNotificationConfig": {"id": "inline", "url": HOOK}}
    created = call(http, t, "POST", path, {"pushNotificationConfig": {"id": "p2", "url": HOOK}})
    assert created["taskId"] == task_id, created  # unwrapped: the task's spelling (JSON)
    assert [c["pushNotificationConfig"]["id"] for c in call(http, t, "GET", path)] == [
        "inline",
        "p2",
    ]
    for config_id in ("inline", "p2"):
        response = req(http, "DELETE", url(t, f"{path}/{config_id}"), key=t.key)
        assert response.json() is None
    # 7.10 GET /v1/card.
    assert call(http, t, "GET", "card", spelling="json")["name"] == t.agent.name
    # 7.2 message/stream, and 7.9 POST /v1/tasks/{id}:subscribe (3.5.6) of a running task.
    json_events(
        stream(http, t, "POST", "message:stream", {"message": json_message("s")}), "completed"
    )
    slow = make_target("slow", config={"delay_seconds": 2})
    running = call(
        http,
        slow,
        "POST",
        "message:send",
        {"message": json_message("w"), "configuration": {"blocking": False}},
    )
    json_events(stream(http, slow, "POST", f"tasks/{running['id']}:subscribe"), "completed")
    # 7.4 tasks/cancel of a finished task: TaskNotCancelableError, the REST error body.
    response = req(http, "POST", url(slow, f"tasks/{running['id']}:cancel"), key=slow.key, body={})
    a2a_error(response, V03, 400, "TASK_NOT_CANCELABLE")


# --- the earlier v1 draft ----------------------------------------------------------------------


def draft_message(text: str, **fields: Any) -> dict[str, Any]:
    """The draft's Message (JSON Schema "Message"): `parts`, roles `ROLE_USER`, parts without
    `kind`."""
    return {"messageId": mid(), "role": "ROLE_USER", "parts": [{"text": text}], **fields}


def test_v1_draft_schema(http, make_target):
    """a2a-v1-proto-and-json-schema.txt: the draft proto's HTTP rules (`/v1/message:send`,
    `/v1/tasks`, GET `/v1/{name=tasks/*}:subscribe`, `/v1/extendedAgentCard`, push configs with
    `body: "config"`) and its JSON Schema's shapes ("Send Message Request", "Part", "File Part"
    with `mediaType`, "Send Message Configuration" with `pushNotificationConfig`, "Task Push
    Notification Config", "List Tasks Response")."""
    t = make_target()
    message = draft_message(
        "draft",
        parts=[
            {"text": "draft"},
            {"file": {"fileWithUri": "https://example.com/d.txt", "mediaType": "text/plain"}},
            {"data": {"data": {"k": "v"}}},
        ],
        referenceTaskIds=[],
    )
    configuration = {"blocking": True, "historyLength": 10, "acceptedOutputModes": ["text/plain"]}
    sent = call(
        http, t, "POST", "message:send", {"message": message, "configuration": configuration}
    )
    task = sent["task"]
    no_content_anywhere(sent)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    parts = task["history"][0]["parts"]
    assert parts[0] == {"text": "draft"}, parts
    assert parts[1]["file"] == {
        "fileWithUri": "https://example.com/d.txt",
        "mediaType": "text/plain",
    }
    task_id = task["id"]
    # GET /v1/{name=tasks/*}: the creating request's spelling.
    got = call(http, t, "GET", f"tasks/{task_id}")
    no_content_anywhere(got)
    assert got["history"][0]["parts"][0] == {"text": "draft"}
    # GET /v1/tasks: ListTasksResponse {tasks, nextPageToken, pageSize, totalSize}.
    listed = call(http, t, "GET", "tasks", spelling="draft")
    assert set(listed) == {"tasks", "nextPageToken", "pageSize", "totalSize"}, listed
    no_content_anywhere(listed)
    # POST /v1/{parent=tasks/*/pushNotificationConfigs}, body "config": the bare
    # TaskPushNotificationConfig, named by `name`, or by the transcoded `configId` parameter.
    path = f"tasks/{task_id}/pushNotificationConfigs"
    name = CONFIG_NAME.format(task=task_id, config="d1")
    created = call(http, t, "POST", path, {"name": name, "pushNotificationConfig": {"url": HOOK}})
    assert created == {"name": name, "pushNotificationConfig": {"id": "d1", "url": HOOK}}
    second = call(http, t, "POST", path, {"pushNotificationConfig": {"url": HOOK}}, configId="d2")
    assert second["name"] == CONFIG_NAME.format(task=task_id, config="d2"), second
    # GET /v1/{name=tasks/*/pushNotificationConfigs/*}, GET .../pushNotificationConfigs
    # (ListTaskPushNotificationConfigResponse), DELETE (google.protobuf.Empty).
    assert call(http, t, "GET", f"{path}/d1") == created
    assert call(http, t, "GET", path) == {"configs": [created, second]}
    assert call(http, t, "DELETE", f"{path}/d1") == {}
    # GET /v1/extendedAgentCard: AgentCard with supportedInterfaces / protocolBinding.
    card = call(http, t, "GET", "extendedAgentCard", spelling="draft")
    assert card["supportedInterfaces"][0]["url"] == card["url"], card
    assert all("protocolBinding" in i and "transport" not in i for i in card["supportedInterfaces"])
    # POST /v1/message:stream: StreamResponse events in the draft's spelling.
    events = stream(http, t, "POST", "message:stream", {"message": draft_message("ds")})
    no_content_anywhere(events)
    assert "task" in events[0] and events[-1]["statusUpdate"]["final"] is True, events
    # A push config asked for inline, as the draft's SendMessageConfiguration spells it.
    inline = call(
        http,
        t,
        "POST",
        "message:send",
        {
            "message": draft_message("push"),
            "configuration": {"pushNotificationConfig": {"id": "in", "url": HOOK}},
        },
    )["task"]
    assert call(http, t, "GET", f"tasks/{inline['id']}/pushNotificationConfigs/in")

    # GET /v1/{name=tasks/*}:subscribe and POST /v1/{name=tasks/*}:cancel of running tasks.
    slow = make_target("slow", config={"delay_seconds": 2})
    running = call(
        http,
        slow,
        "POST",
        "message:send",
        {"message": draft_message("w"), "configuration": {"blocking": False}},
    )["task"]
    follow = stream(http, slow, "GET", f"tasks/{running['id']}:subscribe")
    no_content_anywhere(follow)
    assert follow[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", follow
    running = call(
        http,
        slow,
        "POST",
        "message:send",
        {"message": draft_message("w"), "configuration": {"blocking": False}},
    )["task"]
    canceled = call(
        http, slow, "POST", f"tasks/{running['id']}:cancel", {"name": f"tasks/{running['id']}"}
    )
    no_content_anywhere(canceled)
    assert canceled["status"]["state"] == "TASK_STATE_CANCELLED", canceled


# --- v1.0.1 under the agent root ------------------------------------------------------------


def test_v101_paths_under_the_agent_root(http, make_target):
    """a2a-v1.0.1.proto's HTTP rules (`/message:send`, `/tasks/{id=*}`, `/tasks`) directly
    under the agent's URL: one spelling (v1.0 proto-JSON), so `?spelling=` changes nothing;
    the same message sent under v1/ reads as the draft (`parts`, `ROLE_USER`)."""
    t = make_target()
    message = {"messageId": mid(), "role": "ROLE_USER", "parts": [{"text": "v1"}]}
    root = t.url
    sent = ok(req(http, "POST", root + "message:send", key=t.key, body={"message": message}))
    task = sent["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    got = ok(req(http, "GET", root + f"tasks/{task['id']}", key=t.key, params={"spelling": "x"}))
    assert got["history"][0]["parts"] == [{"text": "v1"}], got
    assert "tasks" in ok(req(http, "GET", root + "tasks", key=t.key, params={"spelling": "json"}))
    message["messageId"] = mid()
    under_v1 = call(http, t, "POST", "message:send", {"message": message})
    assert under_v1["task"]["history"][0]["parts"] == [{"text": "v1"}], under_v1


# --- which spelling answers ---------------------------------------------------------------------


def test_proto_json_stays_the_default_and_spelling_overrides(http, make_target):
    """The SDK's v0.3 REST client's proto-JSON answers proto-JSON; a task created over JSON-RPC
    (no REST spelling recorded) answers proto-JSON on REST; `?spelling=` overrides the
    creating request's spelling on a request without a body."""
    t = make_target()
    task = call(http, t, "POST", "message:send", {"message": proto_message("p")})["task"]
    assert task["history"][0]["content"] == [{"text": "p"}]
    got = call(http, t, "GET", f"tasks/{task['id']}")
    assert got["status"]["state"] == "TASK_STATE_COMPLETED" and "kind" not in got
    assert call(http, t, "GET", f"tasks/{task['id']}", spelling="json")["kind"] == "task"
    assert "parts" in call(http, t, "GET", f"tasks/{task['id']}", spelling="draft")["history"][0]

    rpc = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {"message": json_message("rpc")},
    }
    answer = ok(req(http, "POST", t.url, key=t.key, body=rpc, headers={"A2A-Version": "0.3"}))
    rpc_task = answer["result"]
    assert rpc_task["kind"] == "task", answer
    over_rest = call(http, t, "GET", f"tasks/{rpc_task['id']}")
    assert over_rest["status"]["state"] == "TASK_STATE_COMPLETED" and "kind" not in over_rest

    json_created = call(http, t, "POST", "message:send", {"message": json_message("j")})
    as_proto = call(http, t, "GET", f"tasks/{json_created['id']}", spelling="proto-json")
    assert as_proto["status"]["state"] == "TASK_STATE_COMPLETED", as_proto
    listed = call(
        http, t, "GET", f"tasks/{json_created['id']}/pushNotificationConfigs", spelling="mapping"
    )
    assert listed == []


# --- unreadable mixes -------------------------------------------------------------------------


MIXES: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    (
        "proto-JSON content with a v0.3 JSON role",
        {"message": {"messageId": "m", "role": "user", "content": [{"text": "x"}]}},
        ("message.role", "message.content"),
    ),
    (
        "v0.3 JSON parts with kind, with a proto role",
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"kind": "text"}]}},
        ("message.parts[0].kind", "message.role"),
    ),
    (
        "proto-JSON's configuration with the draft's message",
        {
            "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
            "configuration": {"pushNotification": {"url": HOOK}},
        },
        ("configuration.pushNotification", "message.parts"),
    ),
    (
        "the draft's mediaType in a v0.3 JSON file part",
        {
            "message": {
                "messageId": "m",
                "role": "user",
                "parts": [{"kind": "file", "file": {"uri": "https://e/x", "mediaType": "a/b"}}],
            }
        },
        ("mediaType",),
    ),
    (
        "both content and parts",
        {"message": {"messageId": "m", "content": [], "parts": []}},
        ("message.parts", "message.content"),
    ),
]


@pytest.mark.parametrize(("label", "body", "fields"), MIXES, ids=[m[0] for m in MIXES])
def test_unreadable_mixes_are_400_naming_the_field(http, make_target, label, body, fields):
    t = make_target()
    for path in ("message:send", "message:stream"):
        response = req(http, "POST", url(t, path), key=t.key, body=body)
        error = a2a_error(response, V03, 400, "INVALID_PARAMS", *fields)
        assert "spelling" in error["message"], error
    assert call(http, t, "GET", "tasks")["totalSize"] == 0


def test_push_config_and_query_refusals_name_the_field(http, make_target):
    t = make_target()
    task_id = call(http, t, "POST", "message:send", {"message": json_message("x")})["id"]
    path = url(t, f"tasks/{task_id}/pushNotificationConfigs")
    cases = [
        ({"taskId": task_id, "config": {"pushNotificationConfig": {"url": HOOK}}}, ("config",)),
        ({"name": CONFIG_NAME.format(task=task_id, config="a"), "taskId": task_id}, ("taskId",)),
        ({"url": HOOK}, ("'url'", "wraps")),
        ({"taskId": str(uuid.uuid4()), "pushNotificationConfig": {"url": HOOK}}, (task_id,)),
        (
            {"name": "tasks/other/pushNotificationConfigs/a", "pushNotificationConfig": {}},
            ("'name'", "other"),
        ),
    ]
    for body, fragments in cases:
        response = req(http, "POST", path, key=t.key, body=body)
        a2a_error(response, V03, 400, "INVALID_PARAMS", *fragments)
    assert call(http, t, "GET", f"tasks/{task_id}/pushNotificationConfigs") == []

    # `?spelling=` must name a spelling, and a body must fit the one it names.
    for method, route, body in (
        ("GET", "tasks", _DEFAULT),
        ("GET", f"tasks/{task_id}", _DEFAULT),
        ("GET", "card", _DEFAULT),
        ("POST", "message:send", {"message": json_message("x")}),
    ):
        response = req(
            http, method, url(t, route), key=t.key, body=body, params={"spelling": "yaml"}
        )
        a2a_error(response, V03, 400, "INVALID_PARAMS", "spelling", "proto-json")
    response = req(
        http,
        "POST",
        url(t, "message:send"),
        key=t.key,
        body={"message": proto_message("x")},
        params={"spelling": "json"},
    )
    a2a_error(response, V03, 400, "INVALID_PARAMS", "spelling", "message.content")
    response = refused_stream(
        http,
        "POST",
        url(t, "message:stream") + "?spelling=draft",
        key=t.key,
        body={"message": json_message("x")},
    )
    a2a_error(response, V03, 400, "INVALID_PARAMS", "spelling", "message.kind")
    assert call(http, t, "GET", "tasks")["totalSize"] == 1


def test_query_parameters_take_their_proto_field_names_too(http, make_target):
    """The mapping table's REST column is the AIP-127 transcoding of the proto, where a query
    parameter is named by its field (`history_length`) as well as its JSON name."""
    t = make_target("conformance", kind="conformance")
    first = {**proto_message("x"), "messageId": mid("tck-input-required")}
    task_id = call(http, t, "POST", "message:send", {"message": first})["task"]["id"]
    call(http, t, "POST", "message:send", {"message": {**proto_message("y"), "taskId": task_id}})
    full = call(http, t, "GET", f"tasks/{task_id}")["history"]
    assert len(full) > 1
    for name in ("history_length", "historyLength"):
        assert len(call(http, t, "GET", f"tasks/{task_id}", **{name: "1"})["history"]) == 1
    response = req(
        http,
        "GET",
        url(t, f"tasks/{task_id}"),
        key=t.key,
        params={"history_length": "1", "historyLength": "2"},
    )
    a2a_error(response, V03, 400, "INVALID_PARAMS", "historyLength", "history_length")
