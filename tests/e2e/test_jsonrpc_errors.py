"""Raw JSON-RPC over HTTP against the live platform (real daphne + Celery): every error code of
both dialects, the JSON-RPC 2.0 envelope, robustness against malformed bodies, and auth."""

from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from agents.services import api_key_create

from .helpers import Target, error_of, mid, result_of

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@dataclass(frozen=True)
class Dialect:
    """How one protocol version is spoken: version header or query, and method names."""

    label: str
    version: str
    headers: dict[str, str] = field(default_factory=dict)
    query: str = ""

    @property
    def v10(self) -> bool:
        return self.version == "1.0"

    def url(self, base: str) -> str:
        return base + self.query

    def m(self, name: str) -> str:
        return (V10_METHODS if self.v10 else V03_METHODS)[name]

    def message(self, text: str = "hi", **fields: Any) -> dict[str, Any]:
        if self.v10:
            return {"messageId": mid(), "role": "ROLE_USER", "parts": [{"text": text}], **fields}
        return {
            "kind": "message",
            "messageId": mid(),
            "role": "user",
            "parts": [{"kind": "text", "text": text}],
            **fields,
        }


V10_METHODS = {
    "send": "SendMessage",
    "get": "GetTask",
    "list": "ListTasks",
    "cancel": "CancelTask",
    "card": "GetExtendedAgentCard",
}
V03_METHODS = {
    "send": "message/send",
    "get": "tasks/get",
    "list": "tasks/list",
    "cancel": "tasks/cancel",
    "card": "agent/getAuthenticatedExtendedCard",
}
V10 = Dialect("v1.0", "1.0", {"A2A-Version": "1.0"})
V10_QUERY = Dialect("v1.0-query", "1.0", query="?A2A-Version=1.0")
V03 = Dialect("v0.3", "0.3")  # no version at all means 0.3
V03_HEADER = Dialect("v0.3-header", "0.3", {"A2A-Version": "0.3"})
BOTH = pytest.mark.parametrize("d", [V10, V03], ids=lambda d: d.label)
ALL = pytest.mark.parametrize("d", [V10, V10_QUERY, V03, V03_HEADER], ids=lambda d: d.label)


@pytest.fixture
def echo(make_target) -> Target:
    return make_target(default_input_modes=["text/plain"], default_output_modes=["text/plain"])


def post(
    http: httpx.Client, url: str, body: Any, headers: dict[str, str] | None = None
) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return http.post(
        url, content=content, headers={"Content-Type": "application/json", **(headers or {})}
    )


def call(
    http: httpx.Client,
    t: Target,
    d: Dialect,
    method: str,
    params: Any = None,
    *,
    key: str | None = "default",
    request_id: Any = 1,
) -> httpx.Response:
    """POST one request; `method` is a short name ("send", "get", ...) or a literal method."""
    key = t.key if key == "default" else key
    name = d.m(method) if method in V10_METHODS else method
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": name,
        "params": {} if params is None else params,
    }
    auth = {"X-API-Key": key} if key else {}
    return post(http, d.url(t.url), body, {**d.headers, **auth})


def task_of(d: Dialect, result: dict[str, Any]) -> dict[str, Any]:
    if d.v10:
        return result["task"]
    assert result["kind"] == "task", result
    return result


def completed_task(
    http: httpx.Client, t: Target, d: Dialect, key: Any = "default", message_id: str | None = None
) -> str:
    message = d.message("done")
    if message_id:
        message["messageId"] = message_id
    task = task_of(d, result_of(call(http, t, d, "send", {"message": message}, key=key)))
    assert task["status"]["state"] == ("TASK_STATE_COMPLETED" if d.v10 else "completed"), task
    return task["id"]


# --- -32700, -32600, -32601 -----------------------------------------------------------------


@BOTH
def test_parse_errors(http, echo, d):
    for raw, detail in (
        (b'{"jsonrpc": "2.0", "method": ', "Expecting value"),
        (b"not json at all", "Expecting value"),
        (b"", "Expecting value"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "x",}', "property name"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}', "0xff"),
        (b"\xc3\x28{}", "can't decode byte 0xc3"),
    ):
        response = post(http, d.url(echo.url), raw, {**d.headers, "X-API-Key": echo.key})
        error_of(response, -32700, "The body is not valid JSON", detail, request_id=None)


@BOTH
def test_invalid_requests(http, echo, d):
    url, headers = d.url(echo.url), {**d.headers, "X-API-Key": echo.key}
    get = d.m("get")
    cases = [
        ({"id": 1, "method": get, "params": {}}, "'jsonrpc' must be exactly", 1),
        ({"jsonrpc": "1.0", "id": 1, "method": get}, "'jsonrpc' must be exactly", 1),
        ({"jsonrpc": 2.0, "id": "s", "method": get}, "'jsonrpc' must be exactly", "s"),
        ({"jsonrpc": "2.0", "id": 2, "params": {}}, "'method' must be a non-empty string", 2),
        ({"jsonrpc": "2.0", "id": 2, "method": 7}, "'method' must be a non-empty string", 2),
        ({"jsonrpc": "2.0", "id": 2, "method": ""}, "'method' must be a non-empty string", 2),
        ({"jsonrpc": "2.0", "id": True, "method": get}, "'id' must be a string", None),
        ({"jsonrpc": "2.0", "id": 1.5, "method": get}, "'id' must be a string", None),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": get}, "'id' must be a string", None),
        ({"jsonrpc": "2.0", "id": [1], "method": get}, "'id' must be a string", None),
        ([], "empty batch", None),
        ("just a string", "must be a JSON object", None),
        (42, "must be a JSON object", None),
        (None, "must be a JSON object", None),
    ]
    for body, fragment, request_id in cases:
        error_of(post(http, url, body, headers), -32600, fragment, request_id=request_id)
    response = post(http, url, [1, "x", None], headers)
    assert response.status_code == 200
    answers = response.json()
    assert isinstance(answers, list) and len(answers) == 3
    for answer in answers:
        assert answer["id"] is None and answer["error"]["code"] == -32600, answer
        assert "must be a JSON object" in answer["error"]["message"]


@ALL
def test_unknown_method(http, echo, d):
    error_of(
        call(http, echo, d, "tasks/frobnicate"),
        -32601,
        "'tasks/frobnicate'",
        "does not exist",
        f"A2A {d.version}",
    )
    # A method of the other dialect: the error says which header to send.
    other = V03_METHODS["get"] if d.v10 else V10_METHODS["get"]
    other_version = "0.3" if d.v10 else "1.0"
    error_of(
        call(http, echo, d, other, {"id": str(uuid.uuid4())}),
        -32601,
        f"is an A2A {other_version} method",
        f"A2A-Version: {other_version}",
    )


# --- -32602 -----------------------------------------------------------------------------------


def _invalid_params_cases(d: Dialect) -> list[tuple[str, Any, str]]:
    def send(message: dict[str, Any] | None = None, **rest: Any) -> dict[str, Any]:
        return {"message": message if message is not None else d.message(), **rest}

    def without(name: str) -> dict[str, Any]:
        message = d.message()
        del message[name]
        return message

    common = [
        ("send", [d.message()], "'params' must be an object"),
        ("get", ["some-id"], "'params' must be an object"),
        ("send", send(d.message(parts=[])), "message.parts must hold at least one part"),
        (
            "send",
            send(configuration={"historyLength": -1}),
            "historyLength must be zero or positive",
        ),
        (
            "get",
            {"id": str(uuid.uuid4()), "historyLength": -3},
            "'historyLength' must be zero or positive",
        ),
        ("list", {"pageSize": 0}, "minimum page size is 1"),
        ("list", {"pageSize": 101}, "maximum page size is 100"),
        ("list", {"historyLength": -1}, "'historyLength' must be zero or positive"),
        ("list", {"pageToken": "not-a-token-we-issued"}, "pageToken"),
    ]
    if d.v10:
        return common + [
            ("send", send(without("messageId")), "message.messageId is required"),
            ("send", {}, "'message' is required"),
            ("send", send(d.message(parts=[{}])), "message.parts[0] has no content"),
            (
                "send",
                send(d.message(parts=[{"text": "a"}, {"mediaType": "text/plain"}])),
                "message.parts[1] has no content",
            ),
            ("send", send(d.message(role="ROLE_AGENT")), "role must be ROLE_USER"),
            ("send", send(d.message(messageId=["x"])), "Invalid params for SendMessageRequest"),
            ("send", send(configuration={"returnImmediately": "y"}), "returnImmediately"),
            ("get", {"id": str(uuid.uuid4()), "historyLength": "many"}, "historyLength"),
            ("list", {"statusTimestampAfter": "yesterday"}, "statusTimestampAfter"),
        ]
    return common + [
        ("send", send(without("messageId")), "message.messageId: Field required"),
        ("send", {}, "message: Field required"),
        ("send", send(d.message(parts=[{"kind": "text"}])), "text: Field required"),
        ("send", send(d.message(parts=[{}])), "Field required"),
        ("send", send(d.message(role="agent")), "role must be ROLE_USER"),
        ("send", send(d.message(messageId=123)), "messageId: Input should be a valid string"),
        ("send", send(d.message(parts="hello")), "message.parts"),
        ("send", send(configuration={"blocking": "perhaps"}), "configuration.blocking"),
        ("get", {"id": 5}, "id: Input should be a valid string"),
        ("get", {}, "id: Field required"),
        ("cancel", {"id": None}, "id: Input should be a valid string"),
        ("list", {"bogus": 1, "alsoBogus": 2}, "Unknown tasks/list params: alsoBogus, bogus"),
        ("list", {"pageSize": "10"}, "'pageSize' must be a int"),
        ("list", {"includeArtifacts": 1}, "'includeArtifacts' must be a bool"),
        ("list", {"status": "done-ish"}, "is not a task state"),
        ("list", {"lastUpdatedAfter": -5}, "non-negative"),
    ]


@ALL
def test_invalid_params(http, echo, d):
    for n, (method, params, fragment) in enumerate(_invalid_params_cases(d)):
        response = call(http, echo, d, method, params, request_id=n)
        error_of(response, -32602, fragment, request_id=n)


# --- -32001, -32002, -32004, -32003 -----------------------------------------------------------


@BOTH
def test_task_not_found_not_cancelable_and_terminal_task(http, echo, d):
    missing = str(uuid.uuid4())
    error_of(call(http, echo, d, "get", {"id": missing}), -32001, missing, "not found")
    error_of(call(http, echo, d, "get", {"id": "not-a-uuid"}), -32001, "'not-a-uuid'")
    error_of(call(http, echo, d, "cancel", {"id": missing}), -32001, missing)
    error_of(call(http, echo, d, "send", {"message": d.message(taskId=missing)}), -32001, missing)

    task_id = completed_task(http, echo, d)
    error_of(
        call(http, echo, d, "cancel", {"id": task_id}),
        -32002,
        task_id,
        "only unfinished tasks can be canceled",
    )
    error_of(
        call(http, echo, d, "send", {"message": d.message("again", taskId=task_id)}),
        -32004,
        task_id,
        "accepts no more messages",
    )
    # The task is untouched by the refused calls.
    got = result_of(call(http, echo, d, "get", {"id": task_id}))
    assert got["status"]["state"] == ("TASK_STATE_COMPLETED" if d.v10 else "completed")
    assert len(got["history"]) == 1


PUSH = {
    "1.0": [
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ],
    "0.3": [
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
    ],
}
STREAMING = {
    "1.0": ("SendStreamingMessage", "SubscribeToTask"),
    "0.3": ("message/stream", "tasks/resubscribe"),
}


@BOTH
def test_streaming_methods_refuse_before_streaming(http, echo, d):
    send, subscribe = STREAMING[d.version]
    # Errors come back as plain JSON-RPC responses, not as a stream.
    response = call(http, echo, d, subscribe, {"id": str(uuid.uuid4())})
    assert response.headers["content-type"].startswith("application/json")
    error_of(response, -32001)
    error_of(call(http, echo, d, send, {"message": {"parts": []}}), -32602)
    done = result_of(call(http, echo, d, "send", {"message": d.message()}))
    task_id = done["task"]["id"] if d.v10 else done["id"]
    error_of(call(http, echo, d, subscribe, {"id": task_id}), -32004, "already")
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": subscribe, "params": {"id": task_id}},
        {"jsonrpc": "2.0", "id": 2, "method": d.m("list"), "params": {}},
    ]
    first, second = post(http, d.url(echo.url), batch, {**d.headers, "X-API-Key": echo.key}).json()
    assert first["error"]["code"] == -32600 and "cannot be batched" in first["error"]["message"]
    assert "result" in second


# A push URL on this machine: the live platform allowlists loopback.
HOOK = "http://127.0.0.1:9/hook"


def _push_params(d: Dialect, task_id: str, method: str) -> dict[str, Any]:
    """Params of each push method on `task_id`, config `c1`."""
    if d.v10:
        if method == "CreateTaskPushNotificationConfig":
            return {"taskId": task_id, "id": "c1", "url": HOOK}
        if method == "ListTaskPushNotificationConfigs":
            return {"taskId": task_id}
        return {"taskId": task_id, "id": "c1"}
    if method == "tasks/pushNotificationConfig/set":
        return {"taskId": task_id, "pushNotificationConfig": {"id": "c1", "url": HOOK}}
    if method == "tasks/pushNotificationConfig/list":
        return {"id": task_id}
    return {"id": task_id, "pushNotificationConfigId": "c1"}


@BOTH
def test_push_methods_work_and_name_their_errors(http, echo, d):
    create, get, list_, delete = PUSH[d.version]
    done = result_of(call(http, echo, d, "send", {"message": d.message()}))
    task_id = done["task"]["id"] if d.v10 else done["id"]
    created = result_of(call(http, echo, d, create, _push_params(d, task_id, create)))
    assert created == (
        {"taskId": task_id, "id": "c1", "url": HOOK}
        if d.v10
        else {"taskId": task_id, "pushNotificationConfig": {"id": "c1", "url": HOOK}}
    )
    assert result_of(call(http, echo, d, get, _push_params(d, task_id, get))) == created
    listed = result_of(call(http, echo, d, list_, _push_params(d, task_id, list_)))
    assert listed == ({"configs": [created]} if d.v10 else [created])
    deleted = result_of(call(http, echo, d, delete, _push_params(d, task_id, delete)))
    assert deleted == ({} if d.v10 else None)
    error_of(call(http, echo, d, get, _push_params(d, task_id, get)), -32001, "c1")
    # An unknown task, for every method.
    unknown = str(uuid.uuid4())
    for method in PUSH[d.version]:
        error_of(call(http, echo, d, method, _push_params(d, unknown, method)), -32001)
    # A URL into a private network: invalid params that say why.
    params = _push_params(d, task_id, create)
    if d.v10:
        params["url"] = "http://10.0.0.1/hook"
    else:
        params["pushNotificationConfig"]["url"] = "http://10.0.0.1/hook"
    error_of(call(http, echo, d, create, params), -32602, "10.0.0.1 is a private address")


@BOTH
def test_push_methods_of_an_agent_without_push_are_refused(
    http, live_platform, make_tenant, make_agent, make_key, d
):
    tenant = make_tenant()
    agent = make_agent(tenant, "quiet", push_notifications=False)
    quiet = Target(live_platform.agent_url(agent), make_key(tenant, "alice"), agent)
    done = result_of(call(http, quiet, d, "send", {"message": d.message()}))
    task_id = done["task"]["id"] if d.v10 else done["id"]
    for tid in (task_id, str(uuid.uuid4())):
        for method in PUSH[d.version]:
            error_of(
                call(http, quiet, d, method, _push_params(d, tid, method)),
                -32003,
                "push notifications",
            )
    push_config = (
        {"taskPushNotificationConfig": {"url": HOOK}}
        if d.v10
        else {"pushNotificationConfig": {"url": HOOK}}
    )
    error_of(
        call(http, quiet, d, "send", {"message": d.message(), "configuration": push_config}),
        -32003,
        "push notifications",
    )


@BOTH
def test_content_type_not_supported(http, echo, d):
    png = base64.b64encode(b"\x89PNG\r\n").decode()
    part = (
        {"raw": png, "mediaType": "image/png", "filename": "a.png"}
        if d.v10
        else {"kind": "file", "file": {"bytes": png, "mimeType": "image/png", "name": "a.png"}}
    )
    text = {"text": "look"} if d.v10 else {"kind": "text", "text": "look"}
    error_of(
        call(http, echo, d, "send", {"message": d.message(parts=[text, part])}),
        -32005,
        "message.parts[1]",
        "'image/png'",
        "text/plain",
    )
    configuration = {"acceptedOutputModes": ["image/png"]}
    error_of(
        call(http, echo, d, "send", {"message": d.message(), "configuration": configuration}),
        -32005,
        "acceptedOutputModes",
        "image/png",
    )
    # Nothing was created by the refused sends.
    listed = result_of(call(http, echo, d, "list", {}))
    assert listed["totalSize"] == 0 and listed["tasks"] == []


def test_version_not_supported(http, echo):
    get = {"jsonrpc": "2.0", "id": "v", "method": "GetTask", "params": {"id": "x"}}
    auth = {"X-API-Key": echo.key}
    for version, fragment in (
        ("2.0", "A2A-Version 2.0 is not supported"),
        ("abc", "'abc' is not a version"),
        ("0.2", "0.2 is not supported"),
        ("9" * 5000, "is not a version"),
    ):
        error_of(
            post(http, echo.url, get, {**auth, "A2A-Version": version}),
            -32009,
            fragment,
            "1.0, 0.3",
            request_id="v",
        )
        error_of(
            post(http, f"{echo.url}?A2A-Version={version}", get, auth),
            -32009,
            fragment,
            request_id="v",
        )
    # A patch version is the same protocol version.
    error_of(post(http, echo.url, get, {**auth, "A2A-Version": "1.0.7"}), -32001, request_id="v")


# --- the JSON-RPC 2.0 envelope ---------------------------------------------------------------


@BOTH
def test_batch_answers_in_order_and_skips_notifications(http, echo, d):
    missing = str(uuid.uuid4())
    batch = [
        {"jsonrpc": "2.0", "id": "first", "method": d.m("get"), "params": {"id": missing}},
        {"jsonrpc": "2.0", "method": d.m("list"), "params": {}},  # notification
        {"jsonrpc": "2.0", "id": 2, "method": d.m("list"), "params": {}},
        {"jsonrpc": "2.0", "method": "no/such/method"},  # a failing notification: no answer
        {"jsonrpc": "2.0", "id": 3, "method": "no/such/method"},
        {"jsonrpc": "2.0", "id": None, "method": d.m("list"), "params": {}},  # null id: answered
    ]
    response = post(http, d.url(echo.url), batch, {**d.headers, "X-API-Key": echo.key})
    assert response.status_code == 200
    answers = response.json()
    assert [a["id"] for a in answers] == ["first", 2, 3, None]
    assert answers[0]["error"]["code"] == -32001 and missing in answers[0]["error"]["message"]
    assert answers[1]["result"]["totalSize"] == 0 and "error" not in answers[1]
    assert answers[2]["error"]["code"] == -32601
    assert answers[3]["result"]["tasks"] == []
    assert all(a["jsonrpc"] == "2.0" for a in answers)


@BOTH
def test_notifications_get_no_response(http, echo, d):
    headers = {**d.headers, "X-API-Key": echo.key}
    only_notifications = [
        {"jsonrpc": "2.0", "method": d.m("list"), "params": {}},
        {"jsonrpc": "2.0", "method": d.m("get"), "params": {"id": "nope"}},
    ]
    for body in (only_notifications, only_notifications[0], only_notifications[1]):
        response = post(http, d.url(echo.url), body, headers)
        assert response.status_code == 204, response.text
        assert response.content == b""


@BOTH
def test_response_id_echoes_request_id(http, echo, d):
    for request_id in ("abc-1", 42, 0, "", 10**20, None):
        listed = result_of(call(http, echo, d, "list", {}, request_id=request_id), request_id)
        assert listed["tasks"] == []
        error_of(
            call(http, echo, d, "get", {"id": "x"}, request_id=request_id),
            -32001,
            request_id=request_id,
        )


# --- no 5xx, ever -----------------------------------------------------------------------------


def _nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def _malformed_bodies() -> list[tuple[str, dict[str, str], bytes, int]]:
    """(label, headers, body, expected JSON-RPC error code or HTTP status)."""
    v10, v03, v01 = {"A2A-Version": "1.0"}, {}, {"A2A-Version": "0.1"}

    def rpc(method: str, params: Any, **extra: Any) -> bytes:
        return json.dumps(
            {"jsonrpc": "2.0", "id": 9, "method": method, "params": params, **extra}
        ).encode()

    def v10_msg(**fields: Any) -> bytes:
        message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}], **fields}
        return rpc("SendMessage", {"message": message})

    def v03_msg(**fields: Any) -> bytes:
        message = {
            "kind": "message",
            "messageId": "m",
            "role": "user",
            "parts": [{"kind": "text", "text": "x"}],
            **fields,
        }
        return rpc("message/send", {"message": message})

    cases: list[tuple[str, dict[str, str], bytes, int]] = [
        ("deep arrays", v10, b"[" * 100_000 + b"]" * 100_000, -32700),
        ("deep objects", v03, b'{"a":' * 50_000 + b"1" + b"}" * 50_000, -32700),
        (
            "deep params",
            v10,
            b'{"jsonrpc":"2.0","id":9,"method":"SendMessage","params":'
            + b'{"a":' * 2_000
            + b"1"
            + b"}" * 2_001,
            -32700,
        ),
        (
            "deep id",
            v03,
            b'{"jsonrpc":"2.0","method":"tasks/get","id":' + b"[" * 5_000 + b"]" * 5_000 + b"}",
            -32700,
        ),
        ("deep metadata v1.0", v10, v10_msg(metadata=_nested(300)), -32602),
        ("deep metadata v0.3", v03, v03_msg(metadata=_nested(300)), -32602),
        ("huge method", v10, rpc("M" * 2_000_000, {}), -32601),
        (
            "huge jsonrpc",
            v03,
            json.dumps({"jsonrpc": "2" * 1_000_000, "id": 9, "method": "x"}).encode(),
            -32600,
        ),
        ("too big", v10, b'{"x": "' + b"y" * (11 * 1024 * 1024) + b'"}', 413),
        ("huge int id", v10, b'{"jsonrpc":"2.0","id":' + b"7" * 5000 + b',"method":"x"}', -32700),
        ("NaN id", v10, b'{"jsonrpc":"2.0","id":NaN,"method":"GetTask"}', -32700),
        ("null params v1.0", v10, rpc("SendMessage", None), -32602),
        ("null params v0.3", v03, rpc("message/send", None), -32602),
        ("number params", v10, rpc("GetTask", 5), -32602),
        ("string params", v03, rpc("tasks/get", "abc"), -32602),
        ("number message v1.0", v10, rpc("SendMessage", {"message": 5}), -32602),
        ("number message v0.3", v03, rpc("message/send", {"message": 5}), -32602),
        (
            "number configuration",
            v10,
            rpc("SendMessage", {"message": {}, "configuration": 1}),
            -32602,
        ),
        ("lone surrogate v1.0", v10, v10_msg(parts=[{"text": "\ud800"}]), -32602),
        ("lone surrogate v0.3", v03, v03_msg(parts=[{"kind": "text", "text": "\udfff"}]), -32602),
        ("surrogate task id v0.3", v03, rpc("tasks/get", {"id": "\ud83d"}), -32602),
        ("unicode method", v10, rpc("\u202eSendMessage\u200b\U0001f4a5", {}), -32601),
        ("bad base64 v1.0", v10, v10_msg(parts=[{"raw": "!!not base64!!"}]), -32602),
        (
            "bad base64 v0.3",
            v03,
            v03_msg(parts=[{"kind": "file", "file": {"bytes": "notb64!"}}]),
            -32602,
        ),
        ("int32 overflow v1.0", v10, rpc("GetTask", {"id": "x", "historyLength": 2**40}), -32602),
        ("int32 overflow v0.3", v03, rpc("tasks/get", {"id": "x", "historyLength": 2**40}), -32602),
        (
            "int32 overflow send v0.3",
            v03,
            rpc(
                "message/send",
                {
                    "message": json.loads(v03_msg())["params"]["message"],
                    "configuration": {"historyLength": 10**30},
                },
            ),
            -32602,
        ),
        ("page size overflow v0.3", v03, rpc("tasks/list", {"pageSize": 10**30}), -32602),
        ("timestamp overflow v0.3", v03, rpc("tasks/list", {"lastUpdatedAfter": 10**30}), -32602),
        ("unknown state v1.0", v10, rpc("ListTasks", {"status": 999}), -32602),
        ("bogus version header", {"A2A-Version": "\u00e9".encode()}, rpc("GetTask", {}), -32009),
        ("NUL in contextId v1.0", v10, v10_msg(contextId="a\u0000b"), -32602),
        ("NUL in text v0.3", v03, v03_msg(parts=[{"kind": "text", "text": "\u0000"}]), -32602),
        ("NUL in list filter", v10, rpc("ListTasks", {"contextId": "\u0000"}), -32602),
        # Valid JSON, but no Unicode text: protobuf and PostgreSQL cannot hold it.
        ("lone surrogate in text v1.0", v10, v10_msg(parts=[{"text": "a\ud800b"}]), -32602),
        (
            "lone surrogate in a metadata key v0.3",
            v03,
            v03_msg(metadata={"\udfff": "v"}),
            -32602,
        ),
        ("batch of junk", v10, json.dumps([[], {}, 1, None, "x", [[[]]]]).encode(), -32600),
        # An object or an array where v0.1's role goes is unhashable: it was -32603.
        (
            "v0.1 role an object",
            v01,
            rpc("tasks/send", {"message": {"role": {"a": 1}, "parts": [{"type": "text"}]}}),
            -32602,
        ),
        ("v0.1 role an array", v01, rpc("tasks/sendSubscribe", {"message": {"role": []}}), -32602),
    ]
    v10_fields: dict[str, Any] = {
        "messageId": 5,
        "role": [1],
        "parts": {"a": 1},
        "contextId": 1.5,
        "taskId": {},
        "metadata": [1],
        "extensions": "x",
        "referenceTaskIds": 3,
    }
    cases += [(f"v1.0 message.{k}", v10, v10_msg(**{k: v}), -32602) for k, v in v10_fields.items()]
    cases += [
        (f"v1.0 part.{k}", v10, v10_msg(parts=[{k: v}]), -32602)
        for k, v in {"text": 5, "raw": 5, "url": [], "metadata": "m", "mediaType": 1}.items()
    ]
    v03_fields: dict[str, Any] = {
        "messageId": 5,
        "role": "boss",
        "parts": {"a": 1},
        "contextId": 1.5,
        "taskId": {},
        "metadata": [1],
        "extensions": "x",
        "referenceTaskIds": 3,
        "kind": "task",
    }
    cases += [(f"v0.3 message.{k}", v03, v03_msg(**{k: v}), -32602) for k, v in v03_fields.items()]
    cases += [
        (
            f"v0.3 params.{k}",
            v03,
            rpc("message/send", {"message": json.loads(v03_msg())["params"]["message"], k: v}),
            -32602,
        )
        for k, v in {"configuration": "c", "metadata": 7}.items()
    ]
    return cases


def test_malformed_bodies_never_cause_a_server_error(http, echo):
    cases = _malformed_bodies()
    assert len(cases) >= 30
    problems = []
    for label, headers, body, expected in cases:
        response = post(http, echo.url, body, {**headers, "X-API-Key": echo.key})
        if response.status_code >= 500:
            problems.append(f"{label}: HTTP {response.status_code}")
            continue
        try:
            answer = response.json()
        except ValueError:
            problems.append(f"{label}: HTTP {response.status_code}, not JSON: {response.text[:80]}")
            continue
        if expected >= 400:
            codes = {response.status_code}
        else:
            answers = answer if isinstance(answer, list) else [answer]
            codes = {a.get("error", {}).get("code", "result") for a in answers}
        if codes != {expected}:
            problems.append(f"{label}: expected {expected}, got {codes}: {str(answer)[:200]}")
    assert not problems, "\n".join(problems)
    # The platform still works after all that.
    assert result_of(call(http, echo, V10, "list", {}))["totalSize"] == 0


def test_forged_page_tokens_and_overlong_push_fields_are_invalid_params(http, echo):
    """What the fuzzer found behind the bindings: a page token of base64 JSON nested past
    the recursion limit, and a push config whose url or authentication scheme is longer than
    its column, were -32603 (a RecursionError, a database error)."""
    deep = base64.urlsafe_b64encode(b"[" * 50_000).decode().rstrip("=")
    for d, method in ((V10, "ListTasks"), (V03, "tasks/list")):
        error_of(call(http, echo, d, method, {"pageToken": deep}), -32602, "pageToken")
    task_id = completed_task(http, echo, V10)
    url = "http://127.0.0.1:9/hook"
    for config in (
        {"url": url + "x" * 3_000},
        {"url": url, "authentication": {"scheme": "B" * 150}},
    ):
        create = {"taskId": task_id, **config}
        error_of(call(http, echo, V10, "CreateTaskPushNotificationConfig", create), -32602)
        inline = {"message": V10.message(), "configuration": {"taskPushNotificationConfig": config}}
        error_of(call(http, echo, V10, "send", inline), -32602)


def test_too_many_query_parameters_is_an_invalid_request(http, echo):
    """More query parameters than DATA_UPLOAD_MAX_NUMBER_FIELDS (1000) make Django refuse to
    read the query (where A2A-Version may be): a client's mistake, not -32603."""
    query = "&".join(f"p{n}=v" for n in range(1100))
    body = {"jsonrpc": "2.0", "id": 4, "method": "tasks/get", "params": {"id": "x"}}
    response = post(http, f"{echo.url}?{query}", body, {"X-API-Key": echo.key})
    assert response.status_code == 400, response.text
    answer = response.json()
    assert answer["id"] == 4 and answer["error"]["code"] == -32600, answer
    assert answer["error"]["data"][0]["reason"] == "INVALID_REQUEST", answer


def test_http_level_errors(http, echo, live_platform):
    response = http.get(echo.url)
    assert response.status_code == 405 and response.headers["Allow"] == "POST"
    assert response.json()["error"]["code"] == -32600
    assert "POSTed" in response.json()["error"]["message"]
    assert http.put(echo.url, content=b"{}").status_code == 405
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/xml"):
        response = http.post(
            echo.url,
            content=b'{"jsonrpc":"2.0","id":1,"method":"tasks/list"}',
            headers={"Content-Type": content_type, "X-API-Key": echo.key},
        )
        assert response.status_code == 415, (content_type, response.text)
        assert response.json()["error"]["code"] == -32005
        assert content_type in response.json()["error"]["message"]
    slug = echo.agent.tenant.slug
    for path in ("/a2a/no-such-tenant/echo/", f"/a2a/{slug}/no-such-agent/"):
        response = post(
            http, live_platform.url + path, {"jsonrpc": "2.0", "id": 1, "method": "tasks/list"}
        )
        assert response.status_code == 404
        # A JSON-RPC error like every other answer of this endpoint, naming the agent.
        error = response.json()["error"]
        assert error["code"] == -32051 and error["data"][0]["reason"] == "AGENT_NOT_FOUND"
        assert "is hosted for tenant" in error["message"]


# --- authentication ---------------------------------------------------------------------------


@BOTH
def test_private_agent_rejects_bad_credentials(
    http, echo, d, live_platform, make_tenant, make_agent, make_key
):
    tenant = echo.agent.tenant
    other_agent = make_agent(tenant, "other")
    _, restricted_elsewhere = api_key_create(tenant=tenant, name="r1", agent=other_agent)
    _, restricted_here = api_key_create(tenant=tenant, name="r2", agent=echo.agent)
    foreign = make_key(make_tenant(), "mallory")
    body = {"jsonrpc": "2.0", "id": "auth", "method": d.m("list"), "params": {}}
    url = d.url(echo.url)
    bad = [
        {},
        {"X-API-Key": "a2a_deadbeef_" + "x" * 32},
        {"X-API-Key": "garbage"},
        {"Authorization": "Basic " + base64.b64encode(b"alice:pw").decode()},
        {"Authorization": "Bearer"},
        {"Authorization": f"Token {echo.key}"},
        {"Authorization": "Bearer " + echo.key[:-2]},
        {"X-API-Key": foreign},
        {"Authorization": f"Bearer {foreign}"},
        {"X-API-Key": restricted_elsewhere},
    ]
    for headers in bad:
        response = post(http, url, body, {**d.headers, **headers})
        assert response.status_code == 401, (headers, response.text)
        assert response.headers["WWW-Authenticate"].startswith("Bearer"), headers
        assert response.json()["id"] == "auth" and "result" not in response.json()
        error = response.json()["error"]
        assert error["code"] == -32050 and error["data"][0]["reason"] == "UNAUTHENTICATED"
    assert (
        "must be 'Bearer <api key or token>'"
        in post(http, url, body, {**d.headers, "Authorization": "Basic eHg="}).json()["error"][
            "message"
        ]
    )
    assert "private" in post(http, url, body, d.headers).json()["error"]["message"]
    for headers in (
        {"Authorization": f"Bearer {echo.key}"},
        {"X-API-Key": echo.key},
        {"authorization": f"bearer   {echo.key}"},
        {"X-API-Key": restricted_here},
    ):
        assert result_of(post(http, url, body, {**d.headers, **headers}), "auth")["tasks"] == []


@pytest.fixture
def public(live_platform, make_tenant, make_agent, make_key):
    def make(scope: str) -> Target:
        tenant = make_tenant()
        agent = make_agent(
            tenant,
            "pub",
            kind="conformance",
            visibility="public",
            anonymous_scope=scope,
            skills=[{"id": "pub", "name": "P", "description": "d", "tags": ["t"]}],
            extended_skills=[{"id": "x", "name": "X", "description": "d", "tags": ["t"]}],
        )
        return Target(live_platform.agent_url(agent), make_key(tenant, "bob"), agent)

    return make


@BOTH
def test_public_shared_scope_anonymous_callers_share_tasks(http, public, d):
    target = public("shared")
    task_id = completed_task(http, target, d, key=None, message_id=f"tck-complete-task-{mid()}")
    with httpx.Client(timeout=30) as stranger:  # another anonymous caller
        listed = result_of(call(stranger, target, d, "list", {}, key=None))
        assert [t["id"] for t in listed["tasks"]] == [task_id]
        assert (
            result_of(call(stranger, target, d, "get", {"id": task_id}, key=None))["id"] == task_id
        )
    # A key holder is not the anonymous owner.
    assert result_of(call(http, target, d, "list", {}))["tasks"] == []


@BOTH
def test_public_isolated_scope_allows_get_but_not_list(http, public, d):
    target = public("isolated")
    task_id = completed_task(http, target, d, key=None, message_id=f"tck-complete-task-{mid()}")
    assert result_of(call(http, target, d, "get", {"id": task_id}, key=None))["id"] == task_id
    error_of(call(http, target, d, "list", {}, key=None), -32004, "anonymous callers are isolated")
    assert result_of(call(http, target, d, "list", {}))["totalSize"] == 0


@BOTH
def test_extended_card_needs_a_key(http, public, d, live_platform):
    target = public("isolated")
    response = call(http, target, d, "card", {}, key=None, request_id="card")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert response.json()["id"] == "card" and "requires authentication" in response.text
    card = result_of(call(http, target, d, "card", {}, request_id="card"), "card")
    assert {s["id"] for s in card["skills"]} == {"pub", "x"}
    assert card["name"] == "Pub"
    public_card = http.get(target.url + ".well-known/agent-card.json").json()
    assert {s["id"] for s in public_card["skills"]} == {"pub"}


def test_non_finite_numbers_oversized_batches_and_forged_page_tokens(http, echo):
    headers = {**V10.headers, "X-API-Key": echo.key}
    for number in (b"NaN", b"Infinity", b"-Infinity", b"1e400"):
        body = (
            b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m",'
            b'"role":"ROLE_USER","parts":[{"data":{"x":' + number + b"}}]}}}"
        )
        error_of(post(http, echo.url, body, headers), -32700, "JSON", request_id=None)
    batch = [{"jsonrpc": "2.0", "id": n, "method": "ListTasks", "params": {}} for n in range(51)]
    error_of(post(http, echo.url, batch, headers), -32600, "limit of 50", request_id=None)
    forged = base64.urlsafe_b64encode(json.dumps({"ts": 10**30, "id": "x"}).encode()).decode()
    error_of(call(http, echo, V10, "list", {"pageToken": forged}), -32602, "pageToken")
