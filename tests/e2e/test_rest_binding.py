"""Raw HTTP against the REST (HTTP+JSON) binding on the live platform (real daphne + Celery):
v1.0 paths directly under the agent root, v0.3 paths under `v1/`. The status code and the
google.rpc.Status body of every A2A error, query parameter checks that name their parameter, the
list filters, content types, SSE framing and resuming with Last-Event-ID, and the extended card.
No response here may be a 5xx: requests go through `req` and `opened`, which fail on one (the
bad-query test reports a 5xx along with its other findings)."""

from __future__ import annotations

import base64
import http.client as http_client
import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
import pytest
from django.conf import settings

from .helpers import mid

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

A2A_JSON = "application/a2a+json"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"

# reason -> (gRPC status, the v0.3 `type` the SDK's error class has)
A2A_ERRORS = {
    "TASK_NOT_FOUND": ("NOT_FOUND", "TaskNotFoundError"),
    "TASK_NOT_CANCELABLE": ("FAILED_PRECONDITION", "TaskNotCancelableError"),
    "PUSH_NOTIFICATION_NOT_SUPPORTED": (
        "FAILED_PRECONDITION",
        "PushNotificationNotSupportedError",
    ),
    "UNSUPPORTED_OPERATION": ("FAILED_PRECONDITION", "UnsupportedOperationError"),
    "CONTENT_TYPE_NOT_SUPPORTED": ("INVALID_ARGUMENT", "ContentTypeNotSupportedError"),
    "VERSION_NOT_SUPPORTED": ("FAILED_PRECONDITION", "VersionNotSupportedError"),
    "INVALID_PARAMS": ("INVALID_ARGUMENT", "InvalidParamsError"),
    "INVALID_REQUEST": ("INVALID_ARGUMENT", "InvalidRequestError"),
    "METHOD_NOT_FOUND": ("NOT_FOUND", "MethodNotFoundError"),
}


@dataclass(frozen=True)
class Rest:
    """One dialect of the REST binding: where its paths live and how its bodies look."""

    label: str
    version: str
    prefix: str  # under the agent root

    @property
    def v10(self) -> bool:
        return self.version == "1.0"

    def message(self, text: str = "hi", **fields: Any) -> dict[str, Any]:
        parts = "parts" if self.v10 else "content"  # v0.3 protos call them `content`
        return {"messageId": mid(), "role": "ROLE_USER", parts: [{"text": text}], **fields}

    def no_wait(self) -> dict[str, Any]:
        return {"returnImmediately": True} if self.v10 else {"blocking": False}

    def state(self, name: str) -> str:
        """A task state as this dialect's task JSON spells it."""
        if name == "CANCELED" and not self.v10:
            return "TASK_STATE_CANCELLED"
        return f"TASK_STATE_{name}"

    def status_query(self, name: str) -> str:
        """A task state as the `status` query parameter of GET tasks takes it."""
        return f"TASK_STATE_{name}" if self.v10 else name.lower().replace("_", "-")


V10 = Rest("v1.0", "1.0", "")
V03 = Rest("v0.3", "0.3", "v1/")
BOTH = pytest.mark.parametrize("d", [V10, V03], ids=lambda d: d.label)


@dataclass
class Target:
    root: str  # the agent's URL, ending in `/`
    key: str
    agent: Any

    def url(self, d: Rest, path: str) -> str:
        return self.root + d.prefix + path

    @property
    def tenant_value(self) -> str:
        return f"{self.agent.tenant.slug}/{self.agent.slug}"


@pytest.fixture
def target(live_platform, make_tenant, make_agent, make_key):
    """A private agent of a fresh tenant (echo unless told), with a key of principal alice."""

    def make(slug: str = "echo", kind: str = "echo", **fields: Any) -> Target:
        tenant = make_tenant()
        agent = make_agent(tenant, slug, kind=kind, **fields)
        return Target(live_platform.agent_url(agent), make_key(tenant, "alice"), agent)

    return make


@pytest.fixture
def echo(target) -> Target:
    return target()


# --- HTTP helpers ---------------------------------------------------------------------------

_DEFAULT = object()


def _request_args(
    key: str | None, body: Any, content: bytes | None, headers: dict[str, str] | None
) -> tuple[bytes | None, dict[str, str]]:
    sent: dict[str, str] = {}
    if key:
        sent["X-API-Key"] = key
    if body is not _DEFAULT:
        content = json.dumps(body).encode()
    if content is not None:
        sent["Content-Type"] = "application/json"
    sent.update(headers or {})
    return content, sent


def req(
    http: httpx.Client,
    method: str,
    url: str,
    *,
    key: str | None = None,
    body: Any = _DEFAULT,
    content: bytes | None = None,
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
) -> httpx.Response:
    """One request; JSON `body` (or raw `content`) is sent as application/json unless
    `headers` says otherwise. A 5xx fails the test at once."""
    content, sent = _request_args(key, body, content, headers)
    response = http.request(method, url, content=content, headers=sent, params=params)
    assert response.status_code < 500, (
        f"{method} {url} {params or ''} -> {response.status_code}: {response.text[:1000]}"
    )
    return response


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, f"{response.request.url}: {response.text[:1000]}"
    return response.json()


def status_body(response: httpx.Response, status: int) -> dict[str, Any]:
    """A google.rpc.Status error body with HTTP status `status`; returns the body."""
    assert response.status_code == status, (
        f"{response.request.method} {response.request.url}: expected {status}, got "
        f"{response.status_code}: {response.text[:1000]}"
    )
    content_type = response.headers["content-type"]
    assert content_type.startswith(("application/json", A2A_JSON)), content_type
    body = response.json()
    error = body["error"]
    assert error["code"] == status, body
    assert isinstance(error["message"], str) and error["message"], body
    assert isinstance(error["status"], str) and error["status"], body
    infos = [x for x in error["details"] if x["@type"] == ERROR_INFO]
    assert len(infos) == 1 and infos[0]["domain"] == "a2a-protocol.org", body
    return body


def a2a_error(
    response: httpx.Response, d: Rest, status: int, reason: str, *fragments: str
) -> dict[str, Any]:
    """An A2A error: the spec's HTTP status, the ErrorInfo reason, and (v0.3) the `type` and
    `message` the v0.3 REST clients read. Returns the `error` object."""
    body = status_body(response, status)
    error = body["error"]
    grpc_status, v03_type = A2A_ERRORS[reason]
    assert error["status"] == grpc_status, body
    assert error["details"][0]["reason"] == reason, body
    for fragment in fragments:
        assert fragment in error["message"], (fragment, body)
    if d.v10:
        assert set(body) == {"error"}, body
    else:
        assert body["type"] == v03_type and body["message"] == error["message"], body
    return error


def send(
    http: httpx.Client, t: Target, d: Rest, text: str = "hi", *, key: Any = _DEFAULT, **extra: Any
) -> dict[str, Any]:
    """message:send; the task it answers with."""
    message = {**d.message(text), **extra.pop("message_fields", {})}
    response = req(
        http,
        "POST",
        t.url(d, "message:send"),
        key=t.key if key is _DEFAULT else key,
        body={"message": message, **extra},
    )
    return ok(response)["task"]


def completed_task(http: httpx.Client, t: Target, d: Rest, **kwargs: Any) -> dict[str, Any]:
    task = send(http, t, d, "done", **kwargs)
    assert task["status"]["state"] == d.state("COMPLETED"), task
    return task


# --- SSE ------------------------------------------------------------------------------------


@dataclass
class Frame:
    id: str | None
    event: str | None
    data: Any


def read_frames(response: httpx.Response) -> list[Frame]:
    frames: list[Frame] = []
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if line == "":
            if "data" in fields:
                frames.append(
                    Frame(fields.get("id"), fields.get("event"), json.loads(fields["data"]))
                )
            fields = {}
        elif not line.startswith(":"):  # `:` lines are keep-alives
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
    if "data" in fields:
        frames.append(Frame(fields.get("id"), fields.get("event"), json.loads(fields["data"])))
    return frames


@contextmanager
def opened(
    http: httpx.Client,
    method: str,
    url: str,
    *,
    key: str | None = None,
    body: Any = _DEFAULT,
    headers: dict[str, str] | None = None,
) -> Iterator[httpx.Response]:
    content, sent = _request_args(
        key, body, None, {"Accept": "text/event-stream", **(headers or {})}
    )
    with http.stream(method, url, content=content, headers=sent) as response:
        if response.status_code >= 500:
            response.read()
            pytest.fail(f"{method} {url} -> {response.status_code}: {response.text[:1000]}")
        yield response


def sse(http: httpx.Client, method: str, url: str, **kwargs: Any) -> list[Frame]:
    """A whole SSE stream, which must be one (200, text/event-stream) and hold no error frame."""
    with opened(http, method, url, **kwargs) as response:
        if response.status_code != 200:
            response.read()
        assert response.status_code == 200, f"{method} {url}: {response.text[:1000]}"
        assert response.headers["content-type"].startswith("text/event-stream")
        frames = read_frames(response)
    errors = [f for f in frames if f.event == "error"]
    assert not errors, errors
    return frames


def refused_stream(http: httpx.Client, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """A streaming request that is refused before it streams: a plain JSON error response."""
    with opened(http, method, url, **kwargs) as response:
        response.read()
    assert not response.headers["content-type"].startswith("text/event-stream"), response.text
    return response


def seq_of(frame: Frame, task_id: str) -> int:
    match = re.fullmatch(rf"{re.escape(task_id)}:(\d+)", frame.id or "")
    assert match, f"frame id {frame.id!r} is not {task_id}:<seq>"
    return int(match.group(1))


# --- A2A errors: 404, 400 -------------------------------------------------------------------


@BOTH
def test_task_not_found_unknown_other_tenant_and_other_owner(http, echo, d, target, make_key):
    missing = str(uuid.uuid4())
    key = echo.key
    for task_id in (missing, "not-a-uuid"):
        a2a_error(
            req(http, "GET", echo.url(d, f"tasks/{task_id}"), key=key),
            d,
            404,
            "TASK_NOT_FOUND",
            task_id,
        )
    # Odd ids in the path (NUL, very long, a space, a bidi control) are just not found.
    for task_id in ("%00", "x" * 2000, "a%20b", "%E2%80%AE"):
        for method, action in (("GET", ""), ("POST", ":cancel")):
            url = echo.url(d, f"tasks/{task_id}{action}")
            a2a_error(req(http, method, url, key=key, body={}), d, 404, "TASK_NOT_FOUND")
        url = echo.url(d, f"tasks/{task_id}:subscribe")
        a2a_error(refused_stream(http, "GET", url, key=key), d, 404, "TASK_NOT_FOUND")
    a2a_error(
        req(http, "POST", echo.url(d, f"tasks/{missing}:cancel"), key=key, body={}),
        d,
        404,
        "TASK_NOT_FOUND",
        missing,
    )
    subscribes = [("POST", ":subscribe"), ("GET", ":subscribe")]
    if not d.v10:
        subscribes.append(("POST", ":resubscribe"))
    for method, action in subscribes:
        response = refused_stream(http, method, echo.url(d, f"tasks/{missing}{action}"), key=key)
        a2a_error(response, d, 404, "TASK_NOT_FOUND", missing)
    a2a_error(
        req(
            http,
            "POST",
            echo.url(d, "message:send"),
            key=key,
            body={"message": d.message(taskId=missing)},
        ),
        d,
        404,
        "TASK_NOT_FOUND",
        missing,
    )

    # Another tenant's task (an agent of the same slug there) is not found here.
    elsewhere = target()
    foreign = completed_task(http, elsewhere, d)["id"]
    # Another owner's task (bob, a key of the same tenant) is not found for alice.
    bob = make_key(echo.agent.tenant, "bob")
    bobs = completed_task(http, echo, d, key=bob)["id"]
    for task_id in (foreign, bobs):
        a2a_error(
            req(http, "GET", echo.url(d, f"tasks/{task_id}"), key=key),
            d,
            404,
            "TASK_NOT_FOUND",
            task_id,
        )
        a2a_error(
            req(http, "POST", echo.url(d, f"tasks/{task_id}:cancel"), key=key, body={}),
            d,
            404,
            "TASK_NOT_FOUND",
        )
        for method, action in subscribes:
            url = echo.url(d, f"tasks/{task_id}{action}")
            a2a_error(refused_stream(http, method, url, key=key), d, 404, "TASK_NOT_FOUND")
    assert ok(req(http, "GET", echo.url(d, "tasks"), key=key))["tasks"] == []
    # Their owners still get them.
    assert (
        ok(req(http, "GET", elsewhere.url(d, f"tasks/{foreign}"), key=elsewhere.key))["id"]
        == foreign
    )
    assert ok(req(http, "GET", echo.url(d, f"tasks/{bobs}"), key=bob))["id"] == bobs


@BOTH
def test_a_running_task_cancels_and_then_is_not_cancelable(http, target, d):
    t = target("slow", config={"delay_seconds": 5})
    running = send(http, t, d, configuration=d.no_wait())
    assert running["status"]["state"] in (d.state("SUBMITTED"), d.state("WORKING")), running
    # The body may repeat the path's id, but not name another task.
    a2a_error(
        req(
            http,
            "POST",
            t.url(d, f"tasks/{running['id']}:cancel"),
            key=t.key,
            body={"id": str(uuid.uuid4())},
        ),
        d,
        400,
        "INVALID_PARAMS",
    )
    canceled = ok(
        req(
            http,
            "POST",
            t.url(d, f"tasks/{running['id']}:cancel"),
            key=t.key,
            body={"id": running["id"]},
        )
    )
    assert canceled["id"] == running["id"]
    assert canceled["status"]["state"] == d.state("CANCELED"), canceled
    # Canceled is final: a second cancel (with no body at all) is refused.
    a2a_error(
        req(http, "POST", t.url(d, f"tasks/{running['id']}:cancel"), key=t.key),
        d,
        400,
        "TASK_NOT_CANCELABLE",
        running["id"],
    )
    got = ok(req(http, "GET", t.url(d, f"tasks/{running['id']}"), key=t.key))
    assert got["status"]["state"] == d.state("CANCELED")


@BOTH
def test_completed_task_is_not_cancelable(http, echo, d):
    task = completed_task(http, echo, d)
    a2a_error(
        req(http, "POST", echo.url(d, f"tasks/{task['id']}:cancel"), key=echo.key, body={}),
        d,
        400,
        "TASK_NOT_CANCELABLE",
        task["id"],
    )
    got = ok(req(http, "GET", echo.url(d, f"tasks/{task['id']}"), key=echo.key))
    assert got["status"]["state"] == d.state("COMPLETED")


@BOTH
def test_subscribe_to_a_finished_task_is_unsupported(http, echo, d):
    task_id = completed_task(http, echo, d)["id"]
    subscribes = [("POST", ":subscribe"), ("GET", ":subscribe")]
    if not d.v10:
        subscribes.append(("POST", ":resubscribe"))
    for method, action in subscribes:
        response = refused_stream(
            http, method, echo.url(d, f"tasks/{task_id}{action}"), key=echo.key
        )
        a2a_error(response, d, 400, "UNSUPPORTED_OPERATION", task_id)


# Push URLs on this machine: the live platform allowlists loopback (A2A_PUSH_ALLOWED_NETWORKS);
# nothing needs to listen there for CRUD.
HOOK = "http://127.0.0.1:9/hook"
OTHER_HOOK = "http://127.0.0.1:9/other"


def push_body(d: Rest, task_id: str, url: str, config_id: str = "", **fields: Any) -> Any:
    """A create body: v1.0 a TaskPushNotificationConfig, v0.3 its
    CreateTaskPushNotificationConfigRequest (the config inside, `parent` naming the task)."""
    config = {"url": url, **fields}
    if config_id:
        config["id"] = config_id
    if d.v10:
        return config
    return {
        "parent": f"tasks/{task_id}",
        "configId": config_id,
        "config": {"pushNotificationConfig": config},
    }


def push_config(d: Rest, body: Any) -> tuple[str, str, str]:
    """(task id, config id, url) of a config as the dialect answers it."""
    if d.v10:
        assert set(body) <= {"id", "taskId", "url", "authentication"}, body
        return body["taskId"], body["id"], body["url"]
    config = body["pushNotificationConfig"]
    task_id, config_id = re.fullmatch(
        r"tasks/([^/]+)/pushNotificationConfigs/([^/]+)", body["name"]
    ).groups()
    assert config["id"] == config_id, body
    return task_id, config_id, config["url"]


@BOTH
def test_push_notification_config_crud(http, echo, d):
    task_id = completed_task(http, echo, d)["id"]
    configs = echo.url(d, f"tasks/{task_id}/pushNotificationConfigs")

    def create(body: Any) -> Any:
        return ok(req(http, "POST", configs, key=echo.key, body=body))

    def listed(**params: str) -> Any:
        return ok(req(http, "GET", configs, key=echo.key, params=params))

    # With a client-chosen id, and with a generated one.
    chosen = create(push_body(d, task_id, HOOK, "cfg-1", token="secret"))
    assert push_config(d, chosen) == (task_id, "cfg-1", HOOK)
    # The token is write-only: not in the answer.
    assert "token" not in (chosen if d.v10 else chosen["pushNotificationConfig"]), chosen
    generated = push_config(d, create(push_body(d, task_id, OTHER_HOOK)))
    assert generated[0] == task_id and generated[2] == OTHER_HOOK
    generated_id = generated[1]
    assert uuid.UUID(generated_id)
    # A v1.0 body may name the path's task.
    if d.v10:
        same = create({"url": HOOK, "id": "cfg-1", "taskId": task_id})
        assert push_config(d, same) == (task_id, "cfg-1", HOOK)

    # Get.
    got = ok(req(http, "GET", f"{configs}/cfg-1", key=echo.key))
    assert push_config(d, got) == (task_id, "cfg-1", HOOK)

    # List, ordered by id, and a page at a time.
    page = listed()
    assert set(page) == {"configs"}, page
    ids = sorted(["cfg-1", generated_id])
    assert [push_config(d, c)[1] for c in page["configs"]] == ids
    first = listed(pageSize="1")
    assert [push_config(d, c)[1] for c in first["configs"]] == ids[:1]
    assert first["nextPageToken"], first
    second = listed(pageSize="1", pageToken=first["nextPageToken"])
    assert [push_config(d, c)[1] for c in second["configs"]] == ids[1:]
    assert not second.get("nextPageToken"), second
    for bad in ("0x", "101", "-1"):
        a2a_error(
            req(http, "GET", configs, key=echo.key, params={"pageSize": bad}),
            d,
            400,
            "INVALID_PARAMS",
            "pageSize",
        )

    # Creating with an existing id replaces the config.
    replaced = create(push_body(d, task_id, OTHER_HOOK, "cfg-1"))
    assert push_config(d, replaced) == (task_id, "cfg-1", OTHER_HOOK)
    assert len(listed()["configs"]) == 2

    # Delete answers {}; then the config is gone.
    assert ok(req(http, "DELETE", f"{configs}/cfg-1", key=echo.key)) == {}
    a2a_error(req(http, "GET", f"{configs}/cfg-1", key=echo.key), d, 404, "TASK_NOT_FOUND", "cfg-1")
    # Deleting is idempotent (v1.0.1 3.1.10): gone already is no error.
    assert ok(req(http, "DELETE", f"{configs}/cfg-1", key=echo.key)) == {}
    assert [push_config(d, c)[1] for c in listed()["configs"]] == [generated_id]
    assert ok(req(http, "DELETE", f"{configs}/{generated_id}", key=echo.key)) == {}
    assert listed() == ({} if d.v10 else {"configs": []})


@BOTH
def test_push_notification_config_refusals(http, echo, d, target):
    task_id = completed_task(http, echo, d)["id"]
    configs = echo.url(d, f"tasks/{task_id}/pushNotificationConfigs")
    # The path names the task: a body naming another one is refused.
    other = str(uuid.uuid4())
    if d.v10:
        wrong_task = {"url": HOOK, "taskId": other}
    else:
        wrong_task = push_body(d, other, HOOK)
    response = req(http, "POST", configs, key=echo.key, body=wrong_task)
    a2a_error(response, d, 400, "INVALID_PARAMS", other, task_id)
    # A URL into a private network, with the reason.
    response = req(
        http, "POST", configs, key=echo.key, body=push_body(d, task_id, "http://10.0.0.1/h")
    )
    a2a_error(response, d, 400, "INVALID_PARAMS", "10.0.0.1 is a private address")
    # No URL at all; a body that is not an object.
    response = req(http, "POST", configs, key=echo.key, body=push_body(d, task_id, ""))
    a2a_error(response, d, 400, "INVALID_PARAMS", "url")
    a2a_error(req(http, "POST", configs, key=echo.key, body=[]), d, 400, "INVALID_REQUEST")
    # A config id the database could not hold in a comparison.
    a2a_error(req(http, "GET", f"{configs}/a%00b", key=echo.key), d, 400, "INVALID_PARAMS")
    # Nothing was created by the refusals.
    assert not ok(req(http, "GET", configs, key=echo.key)).get("configs")

    # Unknown tasks, and another tenant's task, are not found.
    stranger = target("stranger")
    foreign_task = completed_task(http, stranger, d)["id"]
    for tid in (str(uuid.uuid4()), foreign_task):
        base = echo.url(d, f"tasks/{tid}/pushNotificationConfigs")
        for method, url, body in (
            ("POST", base, push_body(d, tid, HOOK, "c1")),
            ("GET", base, _DEFAULT),
            ("GET", f"{base}/c1", _DEFAULT),
            ("DELETE", f"{base}/c1", _DEFAULT),
        ):
            response = req(http, method, url, key=echo.key, body=body)
            a2a_error(response, d, 404, "TASK_NOT_FOUND")


@BOTH
def test_push_notifications_off_refuses_every_push_call(http, target, d):
    quiet = target("quiet", push_notifications=False)
    card = ok(req(http, "GET", quiet.root + ".well-known/agent-card.json"))
    assert card["capabilities"].get("pushNotifications", False) is False
    task_id = completed_task(http, quiet, d)["id"]
    calls = [
        ("POST", f"tasks/{task_id}/pushNotificationConfigs", push_body(d, task_id, HOOK, "c1")),
        ("GET", f"tasks/{task_id}/pushNotificationConfigs", _DEFAULT),
        ("GET", f"tasks/{task_id}/pushNotificationConfigs/c1", _DEFAULT),
        ("DELETE", f"tasks/{task_id}/pushNotificationConfigs/c1", _DEFAULT),
        ("GET", f"tasks/{uuid.uuid4()}/pushNotificationConfigs", _DEFAULT),
    ]
    for method, path, body in calls:
        response = req(http, method, quiet.url(d, path), key=quiet.key, body=body)
        a2a_error(response, d, 400, "PUSH_NOTIFICATION_NOT_SUPPORTED", "push notifications")
    # Asking for a push config in a send is refused the same way, and creates no task.
    push = (
        {"taskPushNotificationConfig": {"url": HOOK}}
        if d.v10
        else {"pushNotification": {"url": HOOK}}
    )
    response = req(
        http,
        "POST",
        quiet.url(d, "message:send"),
        key=quiet.key,
        body={"message": d.message(), "configuration": push},
    )
    a2a_error(response, d, 400, "PUSH_NOTIFICATION_NOT_SUPPORTED")
    assert ok(req(http, "GET", quiet.url(d, "tasks"), key=quiet.key))["totalSize"] == 1


# --- authentication, versions, tenant ---------------------------------------------------------


def _operations(d: Rest, task_id: str) -> list[tuple[str, str, Any]]:
    """(method, path, body) of every operation of the dialect, on `task_id`."""
    calls: list[tuple[str, str, Any]] = [
        ("POST", "message:send", {"message": d.message()}),
        ("POST", "message:stream", {"message": d.message()}),
        ("GET", "tasks", _DEFAULT),
        ("GET", f"tasks/{task_id}", _DEFAULT),
        ("POST", f"tasks/{task_id}:cancel", {}),
        ("POST", f"tasks/{task_id}:subscribe", _DEFAULT),
        ("GET", f"tasks/{task_id}:subscribe", _DEFAULT),
        ("POST", f"tasks/{task_id}/pushNotificationConfigs", {"url": "https://example.com/h"}),
        ("GET", f"tasks/{task_id}/pushNotificationConfigs", _DEFAULT),
        ("GET", f"tasks/{task_id}/pushNotificationConfigs/c1", _DEFAULT),
        ("DELETE", f"tasks/{task_id}/pushNotificationConfigs/c1", _DEFAULT),
        ("GET", "extendedAgentCard", _DEFAULT),
    ]
    if not d.v10:
        calls += [("POST", f"tasks/{task_id}:resubscribe", _DEFAULT), ("GET", "card", _DEFAULT)]
    return calls


@BOTH
def test_private_agent_without_a_valid_key_is_401_everywhere(http, echo, d, make_tenant, make_key):
    task_id = completed_task(http, echo, d)["id"]
    foreign = make_key(make_tenant(), "mallory")
    for credentials in ({}, {"X-API-Key": "garbage"}, {"Authorization": f"Bearer {foreign}"}):
        for method, path, body in _operations(d, task_id):
            response = req(http, method, echo.url(d, path), body=body, headers=credentials)
            status_body(response, 401)
            assert response.headers["WWW-Authenticate"].startswith("Bearer"), (method, path)
    response = req(http, "GET", echo.url(d, "tasks"))
    assert "private" in response.json()["error"]["message"]
    # Nothing was created by the refused sends.
    assert ok(req(http, "GET", echo.url(d, "tasks"), key=echo.key))["totalSize"] == 1


def test_unknown_agent_is_404(http, echo, live_platform):
    slug = echo.agent.tenant.slug
    for path in (f"/a2a/{slug}/nobody/tasks", "/a2a/no-such-tenant/echo/v1/tasks"):
        response = req(http, "GET", live_platform.url + path, key=echo.key)
        assert status_body(response, 404)["error"]["details"][0]["reason"] == "AGENT_NOT_FOUND"


@BOTH
def test_version_header_must_be_supported_and_match_the_path(http, echo, d):
    other = "0.3" if d.v10 else "1.0"
    for method, path, body in (
        ("GET", "tasks", _DEFAULT),
        ("POST", "message:send", {"message": d.message()}),
        ("GET", "extendedAgentCard", _DEFAULT),
    ):
        url = echo.url(d, path)
        for version, fragment in (("9.9", "9.9"), (other, other), ("0.1", "0.1"), ("abc", "abc")):
            a2a_error(
                req(http, method, url, key=echo.key, body=body, headers={"A2A-Version": version}),
                d,
                400,
                "VERSION_NOT_SUPPORTED",
                fragment,
            )
            a2a_error(
                req(http, method, url, key=echo.key, body=body, params={"A2A-Version": version}),
                d,
                400,
                "VERSION_NOT_SUPPORTED",
                fragment,
            )
    # Where the other version lives is in the message.
    error = a2a_error(
        req(http, "GET", echo.url(d, "tasks"), key=echo.key, headers={"A2A-Version": other}),
        d,
        400,
        "VERSION_NOT_SUPPORTED",
    )
    assert ("v1/" in error["message"]) == d.v10, error
    # The path's own version (a patch release too) is accepted.
    for version in (d.version, f"{d.version}.2"):
        response = req(
            http, "GET", echo.url(d, "tasks"), key=echo.key, headers={"A2A-Version": version}
        )
        assert ok(response)["tasks"] == []
    assert ok(req(http, "GET", echo.url(d, "tasks"), key=echo.key))["totalSize"] == 0


def test_v10_tenant_must_be_the_agents(http, echo):
    d, key = V10, echo.key
    right = echo.tenant_value
    wrongs = ["someone/else", echo.agent.tenant.slug, f"{right}/x", "x"]
    for wrong in wrongs:
        response = req(
            http,
            "POST",
            echo.url(d, "message:send"),
            key=key,
            body={"message": d.message(), "tenant": wrong},
        )
        a2a_error(response, d, 400, "INVALID_PARAMS", "tenant", right)
        response = req(
            http,
            "POST",
            echo.url(d, "message:stream"),
            key=key,
            body={"message": d.message(), "tenant": wrong},
        )
        a2a_error(response, d, 400, "INVALID_PARAMS", "tenant")
    assert ok(req(http, "GET", echo.url(d, "tasks"), key=key))["totalSize"] == 0

    task = ok(
        req(
            http,
            "POST",
            echo.url(d, "message:send"),
            key=key,
            body={"message": d.message(), "tenant": right},
        )
    )["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    task_id = task["id"]
    wrong = "someone/else"
    for method, path, params, body in (
        ("GET", "tasks", {"tenant": wrong}, _DEFAULT),
        ("GET", f"tasks/{task_id}", {"tenant": wrong}, _DEFAULT),
        ("POST", f"tasks/{task_id}:cancel", None, {"tenant": wrong}),
        ("POST", f"tasks/{task_id}:subscribe", {"tenant": wrong}, _DEFAULT),
        ("POST", f"tasks/{task_id}/pushNotificationConfigs", None, {"url": HOOK, "tenant": wrong}),
        ("GET", f"tasks/{task_id}/pushNotificationConfigs", {"tenant": wrong}, _DEFAULT),
        ("GET", f"tasks/{task_id}/pushNotificationConfigs/c1", {"tenant": wrong}, _DEFAULT),
        ("DELETE", f"tasks/{task_id}/pushNotificationConfigs/c1", {"tenant": wrong}, _DEFAULT),
    ):
        response = req(http, method, echo.url(d, path), key=key, params=params, body=body)
        a2a_error(response, d, 400, "INVALID_PARAMS", "tenant")
    a2a_error(
        req(http, "POST", echo.url(d, f"tasks/{task_id}:cancel"), key=key, body={"tenant": 5}),
        d,
        400,
        "INVALID_PARAMS",
        "tenant",
    )
    assert (
        ok(req(http, "GET", echo.url(d, "tasks"), key=key, params={"tenant": right}))["totalSize"]
        == 1
    )
    got = ok(req(http, "GET", echo.url(d, f"tasks/{task_id}"), key=key, params={"tenant": right}))
    assert got["id"] == task_id
    # With the right tenant, the cancel gets as far as the task's own state.
    a2a_error(
        req(http, "POST", echo.url(d, f"tasks/{task_id}:cancel"), key=key, body={"tenant": right}),
        d,
        400,
        "TASK_NOT_CANCELABLE",
    )


# --- HTTP-level errors: 405, 415, 413, malformed bodies -------------------------------------


@BOTH
def test_wrong_method_is_405_with_allow(http, echo, d):
    task_id = str(uuid.uuid4())
    cases = [
        ("GET", "message:send", {"POST"}),
        ("PUT", "message:stream", {"POST"}),
        ("POST", "tasks", {"GET"}),
        ("DELETE", f"tasks/{task_id}", {"GET"}),
        ("GET", f"tasks/{task_id}:cancel", {"POST"}),
        ("DELETE", f"tasks/{task_id}:subscribe", {"GET", "POST"}),
        ("PUT", f"tasks/{task_id}/pushNotificationConfigs", {"GET", "POST"}),
        ("DELETE", f"tasks/{task_id}/pushNotificationConfigs", {"GET", "POST"}),
        ("POST", f"tasks/{task_id}/pushNotificationConfigs/c1", {"GET", "DELETE"}),
        ("POST", "extendedAgentCard", {"GET"}),
        ("OPTIONS", "tasks", {"GET"}),  # OPTIONS is no A2A operation
        ("OPTIONS", "message:send", {"POST"}),
    ]
    if not d.v10:
        cases += [
            ("DELETE", f"tasks/{task_id}:resubscribe", {"GET", "POST"}),
            ("POST", "card", {"GET"}),
        ]
    for method, path, allowed in cases:
        for key in (echo.key, None):  # the method is checked before the caller
            response = req(http, method, echo.url(d, path), key=key, body={})
            body = status_body(response, 405)
            allow = {m.strip() for m in response.headers["Allow"].split(",")}
            assert allow - {"HEAD"} == allowed, (method, path, response.headers["Allow"])
            assert method not in allow
            assert method in body["error"]["message"], body


@BOTH
def test_unsupported_content_type_is_415(http, echo, d):
    task_id = completed_task(http, echo, d)["id"]
    body = json.dumps({"message": d.message()}).encode()
    for path in ("message:send", "message:stream", f"tasks/{task_id}:cancel"):
        for content_type in ("text/plain", "application/x-www-form-urlencoded", "text/xml"):
            response = req(
                http,
                "POST",
                echo.url(d, path),
                key=echo.key,
                content=body,
                headers={"Content-Type": content_type},
            )
            answer = status_body(response, 415)
            error = answer["error"]
            assert d.v10 or answer["type"] == "ContentTypeNotSupportedError", answer
            assert error["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED", error
            assert content_type in error["message"], error
    # application/a2a+json (with parameters, any case) is a JSON body too.
    for content_type in (A2A_JSON, "application/a2a+json; charset=utf-8", "Application/JSON"):
        response = req(
            http,
            "POST",
            echo.url(d, "message:send"),
            key=echo.key,
            content=body,
            headers={"Content-Type": content_type},
        )
        assert ok(response)["task"]["status"]["state"] == d.state("COMPLETED")


@BOTH
def test_body_over_the_upload_limit_is_413(http, echo, d):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    text = "y" * limit
    for path in ("message:send", "message:stream"):
        response = req(
            http, "POST", echo.url(d, path), key=echo.key, body={"message": d.message(text)}
        )
        error = status_body(response, 413)["error"]
        assert str(limit) in error["message"], error
    # Just under the limit is read, and then refused for what it says (no parts), not its size.
    message = {**d.message(), ("parts" if d.v10 else "content"): []}
    padding = limit - len(json.dumps({"message": message, "metadata": {"x": ""}})) - 100
    response = req(
        http,
        "POST",
        echo.url(d, "message:send"),
        key=echo.key,
        body={"message": message, "metadata": {"x": "z" * padding}},
    )
    a2a_error(response, d, 400, "INVALID_PARAMS")
    assert ok(req(http, "GET", echo.url(d, "tasks"), key=echo.key))["totalSize"] == 0


@BOTH
def test_malformed_bodies_are_400(http, echo, d):
    task_id = completed_task(http, echo, d)["id"]
    not_json = [
        b'{"message": ',
        b"not json",
        b'{"message": {"messageId": "m",}}',
        b'{"message": {"metadata": {"x": NaN}}}',
        b'{"message": {"metadata": {"x": Infinity}}}',
        b'{"message": {"metadata": {"x": 1e400}}}',
        b"\xc3\x28{}",
        b"[" * 100_000 + b"]" * 100_000,
    ]
    not_objects = [b"[]", b"[1, 2]", b'"message"', b"42", b"null", b"true"]
    problems = []
    for path in ("message:send", "message:stream", f"tasks/{task_id}:cancel"):
        for raw in not_json + not_objects:
            response = req(http, "POST", echo.url(d, path), key=echo.key, content=raw)
            label = f"{path} {raw[:40]!r}"
            if response.status_code != 400:
                problems.append(f"{label}: {response.status_code} {response.text[:200]}")
                continue
            error = response.json()["error"]
            if not d.v10 and response.json().get("type") != "InvalidRequestError":
                problems.append(f"{label}: v0.3 type {response.json().get('type')!r}")
            if error["details"][0]["reason"] != "INVALID_REQUEST":
                problems.append(f"{label}: {error}")
            elif raw in not_objects and "JSON object" not in error["message"]:
                problems.append(f"{label}: {error['message']}")
            elif raw in not_json and "not valid JSON" not in error["message"]:
                problems.append(f"{label}: {error['message']}")
    assert not problems, "\n".join(problems)
    assert ok(req(http, "GET", echo.url(d, "tasks"), key=echo.key))["totalSize"] == 1


@BOTH
def test_nul_characters_and_lone_surrogates_in_strings_are_400(http, echo, d):
    bodies = [
        ({"message": d.message("a\u0000b")}, "U+0000"),
        ({"message": d.message(contextId="ctx\u0000")}, "U+0000"),
        ({"message": d.message(), "metadata": {"k\u0000": "v"}}, "U+0000"),
        # Valid JSON, but no Unicode text: protobuf and PostgreSQL cannot hold it.
        ({"message": d.message("a\ud800b")}, "U+D800 is a lone UTF-16 surrogate"),
        ({"message": d.message(), "metadata": {"\udfff": "v"}}, "U+DFFF"),
    ]
    for path in ("message:send", "message:stream"):
        for body, named in bodies:
            response = req(http, "POST", echo.url(d, path), key=echo.key, body=body)
            a2a_error(response, d, 400, "INVALID_PARAMS", named)
    response = req(http, "GET", echo.url(d, "tasks"), key=echo.key, params={"contextId": "a\u0000"})
    a2a_error(response, d, 400, "INVALID_PARAMS", "contextId")
    assert ok(req(http, "GET", echo.url(d, "tasks"), key=echo.key))["totalSize"] == 0


# --- query parameters -----------------------------------------------------------------------

HUGE = "99999999999"  # beyond int32


def _bad_queries(d: Rest, task_id: str) -> list[tuple[str, dict[str, str], str]]:
    """(path, query, the parameter the error must name)."""
    cases = [
        ("tasks", {"pageSize": "0"}, "pageSize"),
        ("tasks", {"pageSize": "101"}, "pageSize"),
        ("tasks", {"pageSize": "abc"}, "pageSize"),
        ("tasks", {"pageSize": HUGE}, "pageSize"),
        ("tasks", {"historyLength": "-1"}, "historyLength"),
        ("tasks", {"historyLength": "x"}, "historyLength"),
        ("tasks", {"historyLength": HUGE}, "historyLength"),
        ("tasks", {"pageToken": "not-a-token-we-issued"}, "pageToken"),
        ("tasks", {"pageToken": "eyJ0cyI6IDF9"}, "pageToken"),  # base64 of {"ts": 1}
        ("tasks", {"includeArtifacts": "maybe"}, "includeArtifacts"),
        ("tasks", {"includeArtifacts": "1"}, "includeArtifacts"),
        (f"tasks/{task_id}", {"historyLength": "-1"}, "historyLength"),
        (f"tasks/{task_id}", {"historyLength": "x"}, "historyLength"),
        (f"tasks/{task_id}", {"historyLength": HUGE}, "historyLength"),
    ]
    if d.v10:
        return cases + [
            ("tasks", {"status": "TASK_STATE_BOGUS"}, "status"),
            ("tasks", {"status": "completed"}, "status"),
            ("tasks", {"statusTimestampAfter": "yesterday"}, "statusTimestampAfter"),
            ("tasks", {"statusTimestampAfter": "2025-13-45T00:00:00Z"}, "statusTimestampAfter"),
        ]
    return cases + [
        ("tasks", {"status": "bogus"}, "status"),
        ("tasks", {"lastUpdatedAfter": "-5"}, "lastUpdatedAfter"),
        ("tasks", {"lastUpdatedAfter": "abc"}, "lastUpdatedAfter"),
        ("tasks", {"lastUpdatedAfter": "1.5"}, "lastUpdatedAfter"),
        ("tasks", {"lastUpdatedAfter": "99999999999999999999"}, "lastUpdatedAfter"),
    ]


@BOTH
def test_bad_query_values_are_400_naming_the_parameter(http, echo, d):
    task_id = completed_task(http, echo, d)["id"]
    problems = []
    for path, query, name in _bad_queries(d, task_id):
        # Not `req`: a 5xx here is one more problem to report with the others.
        response = http.get(echo.url(d, path), headers={"X-API-Key": echo.key}, params=query)
        label = f"GET {d.prefix}{path}?{'&'.join(f'{k}={v}' for k, v in query.items())}"
        if response.status_code != 400:
            problems.append(f"{label}: HTTP {response.status_code}: {response.text[:300]}")
            continue
        error = response.json()["error"]
        if error["details"][0]["reason"] != "INVALID_PARAMS":
            problems.append(f"{label}: reason {error['details'][0]['reason']}")
        if name not in error["message"]:
            problems.append(f"{label}: the message does not name {name!r}: {error['message']!r}")
    assert not problems, "\n".join(problems)


# --- list filters ---------------------------------------------------------------------------


def _without_defaults(value: Any) -> Any:
    """A proto-JSON value without the fields that only spell a default ("", [], {}): GET tasks
    prints every field of its tasks, GET tasks/{id} only the set ones; both are proto-JSON."""
    if isinstance(value, dict):
        pruned = {k: _without_defaults(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v not in ("", [], {})}
    if isinstance(value, list):
        return [_without_defaults(v) for v in value]
    return value


def _listed(http: httpx.Client, t: Target, d: Rest, **query: str) -> dict[str, Any]:
    return ok(req(http, "GET", t.url(d, "tasks"), key=t.key, params=query))


@BOTH
def test_list_filters_and_history_length(http, target, d):
    t = target("asker", config={"input_required": True})
    waiting = send(http, t, d, "first")
    assert waiting["status"]["state"] == d.state("INPUT_REQUIRED"), waiting
    done = send(http, t, d, "second")
    done = send(
        http,
        t,
        d,
        "more",
        message_fields={"taskId": done["id"], "contextId": done["contextId"]},
    )
    assert done["status"]["state"] == d.state("COMPLETED"), done
    assert waiting["contextId"] != done["contextId"]
    full = ok(req(http, "GET", t.url(d, f"tasks/{done['id']}"), key=t.key))
    assert len(full["history"]) >= 3 and "more" in json.dumps(full["history"])

    def ids(listed: dict[str, Any]) -> list[str]:
        return [task["id"] for task in listed["tasks"]]

    everything = _listed(http, t, d)
    assert sorted(ids(everything)) == sorted([waiting["id"], done["id"]])
    assert everything["totalSize"] == 2
    assert all("artifacts" not in task for task in everything["tasks"]), everything

    assert ids(_listed(http, t, d, status=d.status_query("COMPLETED"))) == [done["id"]]
    assert ids(_listed(http, t, d, status=d.status_query("INPUT_REQUIRED"))) == [waiting["id"]]
    assert ids(_listed(http, t, d, status=d.status_query("WORKING"))) == []
    by_context = _listed(http, t, d, contextId=waiting["contextId"])
    assert ids(by_context) == [waiting["id"]] and by_context["totalSize"] == 1
    assert _listed(http, t, d, contextId=str(uuid.uuid4()))["tasks"] == []

    # Updated after the waiting task's last status: only the task completed since.
    if d.v10:
        after = {"statusTimestampAfter": waiting["status"]["timestamp"]}
        before_all = {"statusTimestampAfter": "2000-01-01T00:00:00Z"}
    else:
        stamp = datetime.fromisoformat(waiting["status"]["timestamp"].replace("Z", "+00:00"))
        after = {"lastUpdatedAfter": str(int(stamp.timestamp() * 1000) + 1)}
        before_all = {"lastUpdatedAfter": "946684800000"}  # 2000-01-01
    assert ids(_listed(http, t, d, **after)) == [done["id"]]
    assert len(ids(_listed(http, t, d, **before_all))) == 2

    with_artifacts = {
        task["id"]: task for task in _listed(http, t, d, includeArtifacts="true")["tasks"]
    }
    assert "second\\nmore" in json.dumps(with_artifacts[done["id"]]["artifacts"])
    assert not with_artifacts[waiting["id"]].get("artifacts")
    without = _listed(http, t, d, includeArtifacts="false")
    assert len(without["tasks"]) == 2
    assert all("artifacts" not in task for task in without["tasks"]), without

    one = {task["id"]: task for task in _listed(http, t, d, historyLength="1")["tasks"]}
    assert _without_defaults(one[done["id"]]["history"]) == full["history"][-1:]
    assert all(len(task["history"]) == 1 for task in one.values())
    assert all(not task.get("history") for task in _listed(http, t, d, historyLength="0")["tasks"])
    combined = _listed(
        http, t, d, status=d.status_query("COMPLETED"), includeArtifacts="true", historyLength="1"
    )
    assert ids(combined) == [done["id"]]
    assert _without_defaults(combined["tasks"][0]["history"]) == full["history"][-1:]
    assert _without_defaults(combined["tasks"][0]["artifacts"]) == full["artifacts"]

    got = ok(
        req(http, "GET", t.url(d, f"tasks/{done['id']}"), key=t.key, params={"historyLength": "1"})
    )
    assert got["history"] == full["history"][-1:]
    got = ok(
        req(http, "GET", t.url(d, f"tasks/{done['id']}"), key=t.key, params={"historyLength": "0"})
    )
    if d.version == "0.3":
        # v0.3 tasks/get reads historyLength 0 as "no limit" (the SDK's conversion, as JSON-RPC).
        assert got["history"] == full["history"]
    else:
        assert not got.get("history")

    first = _listed(http, t, d, pageSize="1")
    assert len(first["tasks"]) == 1 and first["nextPageToken"] and first["totalSize"] == 2
    second = _listed(http, t, d, pageSize="1", pageToken=first["nextPageToken"])
    assert len(second["tasks"]) == 1 and not second.get("nextPageToken")
    assert sorted(ids(first) + ids(second)) == sorted(ids(everything))


# --- content types --------------------------------------------------------------------------


@BOTH
def test_content_types(http, echo, d):
    def body() -> bytes:
        # A message of its own each time: a repeated messageId returns the first task.
        return json.dumps({"message": d.message()}).encode()

    url = echo.url(d, "message:send")

    def answer(response: httpx.Response, media_type: str) -> Any:
        content_type = response.headers["content-type"].split(";")[0].strip()
        assert content_type == media_type, (response.request.headers, content_type)
        return response.json()

    plain = req(http, "POST", url, key=echo.key, content=body())
    assert answer(plain, "application/json")["task"]["status"]["state"] == d.state("COMPLETED")
    for headers in (
        {"Content-Type": A2A_JSON},
        {"Content-Type": "application/json", "Accept": A2A_JSON},
        {"Content-Type": A2A_JSON, "Accept": A2A_JSON},
    ):
        response = req(http, "POST", url, key=echo.key, content=body(), headers=headers)
        assert response.status_code == 200, response.text
        assert answer(response, A2A_JSON)["task"]["status"]["state"] == d.state("COMPLETED")
    tasks = echo.url(d, "tasks")
    assert answer(req(http, "GET", tasks, key=echo.key), "application/json")["totalSize"] == 4
    response = req(http, "GET", tasks, key=echo.key, headers={"Accept": A2A_JSON})
    assert answer(response, A2A_JSON)["totalSize"] == 4
    response = req(http, "GET", tasks, key=echo.key, headers={"Accept": "application/json"})
    assert answer(response, "application/json")["totalSize"] == 4
    # Errors answer in kind too.
    missing = echo.url(d, f"tasks/{uuid.uuid4()}")
    response = req(http, "GET", missing, key=echo.key, headers={"Accept": A2A_JSON})
    a2a_error(response, d, 404, "TASK_NOT_FOUND")
    assert response.headers["content-type"].startswith(A2A_JSON)
    response = req(http, "GET", missing, key=echo.key)
    assert response.headers["content-type"].startswith("application/json")


# --- SSE ------------------------------------------------------------------------------------


def _check_stream(d: Rest, frames: list[Frame]) -> str:
    """A send stream: the task first, then its events in order, ending completed. Its id."""
    assert frames, "the stream sent no events"
    assert "task" in frames[0].data, frames[0]
    task_id = frames[0].data["task"]["id"]
    seqs = [seq_of(frame, task_id) for frame in frames]
    assert seqs == sorted(set(seqs)), seqs  # strictly increasing
    assert seqs[1:] == list(range(seqs[0] + 1, seqs[0] + len(seqs))), seqs  # none missed
    for frame in frames[1:]:
        (kind,) = frame.data
        assert kind in ("statusUpdate", "artifactUpdate"), frame
        assert frame.data[kind]["taskId"] == task_id, frame
    last = frames[-1].data
    assert last["statusUpdate"]["status"]["state"] == d.state("COMPLETED"), last
    if not d.v10:
        assert last["statusUpdate"]["final"] is True, last
        for frame in frames[:-1]:
            assert not frame.data.get("statusUpdate", {}).get("final"), frame
    return task_id


@BOTH
def test_message_stream_frames_and_resume_with_last_event_id(http, target, d):
    t = target("slow", config={"delay_seconds": 1})
    send_body = {"message": d.message("stream me")}
    frames = sse(http, "POST", t.url(d, "message:stream"), key=t.key, body=send_body)
    task_id = _check_stream(d, frames)
    streamed = json.dumps([frames[0].data["task"].get("artifacts")] + [f.data for f in frames])
    assert "stream me" in streamed  # the echo's artifact, in the snapshot or as an update
    last_seq = seq_of(frames[-1], task_id)

    # From the very start: every event of the task, once, in order.
    everything = sse(
        http,
        "POST",
        t.url(d, f"tasks/{task_id}:subscribe"),
        key=t.key,
        headers={"Last-Event-ID": f"{task_id}:0"},
    )
    assert [seq_of(f, task_id) for f in everything] == list(range(1, last_seq + 1))
    tail = [(f.id, f.data) for f in everything[-(len(frames) - 1) :]]
    assert tail == [(f.id, f.data) for f in frames[1:]]

    subscribes = [("POST", ":subscribe"), ("GET", ":subscribe")]
    if not d.v10:
        subscribes += [("POST", ":resubscribe"), ("GET", ":resubscribe")]
    for method, action in subscribes:
        url = t.url(d, f"tasks/{task_id}{action}")
        for n in range(len(frames)):
            replayed = sse(http, method, url, key=t.key, headers={"Last-Event-ID": frames[n].id})
            assert [(f.id, f.data) for f in replayed] == [
                (f.id, f.data) for f in frames[n + 1 :]
            ], (
                method,
                action,
                n,
            )

    # Re-POSTing the send with Last-Event-ID resumes its stream; the message is not sent again.
    resumed = sse(
        http,
        "POST",
        t.url(d, "message:stream"),
        key=t.key,
        body=send_body,
        headers={"Last-Event-ID": frames[0].id},
    )
    assert [(f.id, f.data) for f in resumed] == [(f.id, f.data) for f in frames[1:]]
    assert ok(req(http, "GET", t.url(d, "tasks"), key=t.key))["totalSize"] == 1

    other = send(http, t, d, configuration=d.no_wait())["id"]
    for bad in (
        f"{other}:1",
        f"{task_id}:{last_seq + 1}",
        f"{task_id}:-1",
        "garbage",
        f"{task_id}",
    ):
        for method, action in subscribes:
            response = refused_stream(
                http,
                method,
                t.url(d, f"tasks/{task_id}{action}"),
                key=t.key,
                headers={"Last-Event-ID": bad},
            )
            a2a_error(response, d, 400, "INVALID_PARAMS", "Last-Event-ID")


@BOTH
def test_subscribe_to_a_running_task_follows_it_to_the_end(http, target, d):
    t = target("slow", config={"delay_seconds": 1})
    task = send(http, t, d, "follow me", configuration=d.no_wait())
    frames = sse(http, "GET", t.url(d, f"tasks/{task['id']}:subscribe"), key=t.key)
    assert frames[0].data["task"]["id"] == task["id"]
    assert _check_stream(d, frames) == task["id"]
    got = ok(req(http, "GET", t.url(d, f"tasks/{task['id']}"), key=t.key))
    assert got["status"]["state"] == d.state("COMPLETED")


# --- the extended card ----------------------------------------------------------------------

SKILL = {"id": "pub", "name": "P", "description": "d", "tags": ["t"]}
EXTENDED_SKILL = {"id": "x", "name": "X", "description": "d", "tags": ["t"]}
CARD_PATHS = pytest.mark.parametrize(
    ("d", "path"),
    [(V10, "extendedAgentCard"), (V03, "card"), (V03, "extendedAgentCard")],
    ids=["v1.0-extendedAgentCard", "v0.3-card", "v0.3-extendedAgentCard"],
)


@CARD_PATHS
def test_extended_card_needs_a_key(http, target, d, path):
    private = target(skills=[SKILL], extended_skills=[EXTENDED_SKILL])
    public = target(
        "pub",
        skills=[SKILL],
        extended_skills=[EXTENDED_SKILL],
        visibility="public",
        anonymous_scope="shared",
    )
    for t in (private, public):
        card = ok(req(http, "GET", t.url(d, path), key=t.key))
        assert {s["id"] for s in card["skills"]} == {"pub", "x"}, card
        assert card["name"] == t.agent.name
        response = req(http, "GET", t.url(d, path))
        status_body(response, 401)
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert "x" not in {s["id"] for s in response.json().get("skills", [])}
    assert "requires authentication" in req(http, "GET", public.url(d, path)).text
    public_card = ok(req(http, "GET", public.root + ".well-known/agent-card.json"))
    assert {s["id"] for s in public_card["skills"]} == {"pub"}


@BOTH
def test_a_chunked_body_is_read(http, echo, d):
    """HTTP/1.1 bodies may come without Content-Length (Transfer-Encoding: chunked), as httpx
    sends an iterator; the server must read them, not take the request as bodiless."""
    body = json.dumps({"message": d.message("in pieces")}).encode()
    response = req(
        http,
        "POST",
        echo.url(d, "message:send"),
        key=echo.key,
        content=iter([body[:10], body[10:]]),  # type: ignore[arg-type]
    )
    assert response.request.headers.get("Transfer-Encoding") == "chunked"
    assert "Content-Length" not in response.request.headers
    task = ok(response)["task"]
    assert task["status"]["state"] == d.state("COMPLETED")
    assert "in pieces" in json.dumps(task["artifacts"])


@BOTH
def test_message_stream_with_a_malformed_last_event_id_is_400_naming_it(http, echo, d):
    """Re-POSTing message:stream with Last-Event-ID resumes the task that id names; an id that
    names no task at all is refused, and the message says which header is wrong."""
    body = {"message": d.message()}
    for bad in ("garbage", ":", ":7"):  # no task in it at all
        response = refused_stream(
            http,
            "POST",
            echo.url(d, "message:stream"),
            key=echo.key,
            body=body,
            headers={"Last-Event-ID": bad},
        )
        a2a_error(response, d, 400, "INVALID_PARAMS", "Last-Event-ID")
    assert ok(req(http, "GET", echo.url(d, "tasks"), key=echo.key))["totalSize"] == 0


# --- edges found in review ----------------------------------------------------------------


@BOTH
def test_too_many_query_parameters_is_400_not_500(http, echo, d):
    params = {f"x{n}": "1" for n in range(1100)}  # over DATA_UPLOAD_MAX_NUMBER_FIELDS (1000)
    body = status_body(req(http, "GET", echo.url(d, "tasks"), key=echo.key, params=params), 400)
    assert body["error"]["details"][0]["reason"] == "INVALID_REQUEST", body


@BOTH
def test_unknown_paths_under_an_agent_are_status_404s(http, echo, d):
    for method, path in (
        ("GET", "tasks/"),
        ("GET", "tasks/x:bogus"),
        ("POST", "message:sen"),
        ("DELETE", "nothing/here"),
    ):
        response = req(http, method, echo.url(d, path), key=echo.key)
        error = a2a_error(response, d, 404, "METHOD_NOT_FOUND", path)
        assert "/api/docs/" in error["message"]


def test_paths_no_pattern_matches_under_a2a_are_status_404s(http, live_platform, echo):
    """A CR or LF in a path, or a slug that cannot be one: the answer is still a Status body
    (from the REST views, or from the 404 handler where no URL pattern matches), not Django's
    HTML page."""
    base, agent = live_platform.url, f"/a2a/{echo.tenant_value}"
    for path, reason in (
        (f"{agent}/tasks/x%0A", "TASK_NOT_FOUND"),
        (f"{agent}/v1/tasks/a%0Db", "TASK_NOT_FOUND"),
        (f"{agent}/v1/%0A/x", "METHOD_NOT_FOUND"),
        (f"/a2a/{echo.agent.tenant.slug}%0A/{echo.agent.slug}/", "METHOD_NOT_FOUND"),
        ("/a2a/no slug here/", "METHOD_NOT_FOUND"),
    ):
        response = http.get(base + path, headers={"X-API-Key": echo.key})
        assert response.status_code == 404, (path, response.text)
        assert response.headers["content-type"].startswith("application/json"), response.text
        error = response.json()["error"]
        assert error["details"][0]["reason"] == reason, (path, error)
    # Outside /a2a/ Django's own page stays.
    assert "text/html" in http.get(base + "/nowhere%0A").headers["content-type"]


def test_a_host_the_platform_does_not_serve_is_a_400_in_the_bindings_form(http, echo):
    """Django's middleware refuses a Host outside ALLOWED_HOSTS (DisallowedHost) before any
    view runs: the answer is still the binding's, JSON-RPC's envelope at the agent's JSON-RPC
    URL and REST's Status on a REST path, not Django's HTML page."""
    headers = {"Host": "not-served.example", "X-API-Key": echo.key}
    rpc_body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}
    response = http.post(echo.root, json=rpc_body, headers=headers)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    assert response.json()["error"]["code"] == -32600, response.text
    for d in (V10, V03):
        response = http.get(echo.url(d, "tasks"), headers=headers)
        error = status_body(response, 400)["error"]
        assert error["details"][0]["reason"] == "INVALID_REQUEST", error


@BOTH
def test_head_does_not_open_a_subscription(http, echo, d):
    # (A finished task, so nothing is left running when the test's database is flushed.)
    task = completed_task(http, echo, d)
    response = req(http, "HEAD", echo.url(d, f"tasks/{task['id']}:subscribe"), key=echo.key)
    assert response.status_code == 405
    assert "HEAD" not in response.headers["Allow"]


def test_v03_list_cannot_filter_on_unknown(http, echo):
    response = req(http, "GET", echo.url(V03, "tasks"), key=echo.key, params={"status": "unknown"})
    a2a_error(response, V03, 400, "INVALID_PARAMS", "status")


def test_v03_transport_errors_carry_type_and_message(http, echo):
    response = req(http, "GET", echo.url(V03, "tasks"))  # no key
    body = status_body(response, 401)
    assert body["type"] == "Unauthenticated" and body["message"] == body["error"]["message"]
    response = req(http, "DELETE", echo.url(V03, "message:send"), key=echo.key)
    body = status_body(response, 405)
    assert body["type"] == "MethodNotAllowed" and body["message"] == body["error"]["message"]


def test_schema_pages_take_no_passwords(http, live_platform):
    # DRF's default Basic authentication would check (and hash) these; the pages are public.
    bogus = {"Authorization": "Basic " + base64.b64encode(b"admin:guess").decode()}
    response = http.get(f"{live_platform.url}/api/schema/", headers=bogus)
    assert response.status_code == 200


def test_static_paths_cannot_leave_the_static_folders(live_platform):
    host, port = live_platform.url.removeprefix("http://").split(":")
    for path in ("/static/../../a2a_platform/settings.py", "/static/%2e%2e/%2e%2e/manage.py"):
        connection = http_client.HTTPConnection(host, int(port), timeout=10)
        connection.request("GET", path)  # sent as is: httpx would normalise the dots away
        response = connection.getresponse()
        assert response.status == 404, (path, response.status)
        assert b"DJANGO_SETTINGS_MODULE" not in response.read()
        connection.close()
