"""The v0.1 legacy JSON-RPC dialect over raw HTTP against the live platform (daphne + Celery):
client-chosen task ids, sessionId, multi-turn, get, cancel, the v0.1 card, and no leaks."""

from __future__ import annotations

import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from agents.crypto import decrypt
from agents.models import Plan
from push_app.models import PushConfig

from .helpers import Target, error_of, result_of, rpc, rpc_send_nonblocking, rpc_stream

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

V01 = {"A2A-Version": "0.1"}
V10 = {"A2A-Version": "1.0"}


@pytest.fixture
def echo(make_target) -> Target:
    return make_target(headers=V01)


def message(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "text": text}]}


def text_part(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tasks_send(http, t, task_id, text, **params) -> dict[str, Any]:
    """v0.1's tasks/send; the task it answers with."""
    return result_of(
        rpc(http, t, "tasks/send", {"id": task_id, "message": message(text), **params})
    )


def test_send_creates_the_task_with_the_clients_id_and_completes(http, echo):
    task_id = uuid.uuid4()
    task = tasks_send(
        http, echo, task_id.hex, "hello", sessionId="session-a", metadata={"trace": "x"}
    )
    assert task["id"] == task_id.hex  # exactly as the client wrote it
    assert task["sessionId"] == "session-a"
    assert task["status"]["state"] == "completed"
    assert task["status"]["message"] == {"role": "agent", "parts": [text_part("Echoed: hello")]}
    assert task["status"]["timestamp"].endswith("Z")
    assert task["artifacts"] == [
        {
            "name": "echo",
            "parts": [text_part("hello")],
            "index": 0,
            "append": False,
            "lastChunk": True,
        }
    ]
    assert task["history"][0] == {"role": "user", "parts": [text_part("hello")]}
    assert task["metadata"] == {"trace": "x"}
    # The id is the client's, in any spelling: each answer echoes the spelling of its request.
    assert result_of(rpc(http, echo, "tasks/get", {"id": task_id.hex}))["id"] == task_id.hex
    assert result_of(rpc(http, echo, "tasks/get", {"id": str(task_id)}))["id"] == str(task_id)
    # A terminal task takes no more messages; the answer says so.
    error_of(
        rpc(http, echo, "tasks/send", {"id": str(task_id), "message": message("again")}),
        -32000,  # v0.1 has no UnsupportedOperation code: a server error
        "accepts no more messages",
    )


def test_a_second_send_with_the_same_id_continues_an_input_required_task(http, make_target):
    target = make_target(config={"input_required": True}, headers=V01)
    task_id = str(uuid.uuid4())
    first = tasks_send(http, target, task_id, "one", sessionId="s-multi")
    assert first["status"]["state"] == "input-required"
    assert first["status"]["message"]["role"] == "agent"
    assert "one more message" in first["status"]["message"]["parts"][0]["text"]
    assert first["artifacts"] == []

    second = tasks_send(http, target, task_id, "two", sessionId="s-multi")
    assert second["id"] == task_id and second["sessionId"] == "s-multi"
    assert second["status"]["state"] == "completed"
    assert second["artifacts"][0]["parts"] == [text_part("one\ntwo")]
    # user, the agent's question (moved to history when answered), user
    assert [m["role"] for m in second["history"]] == ["user", "agent", "user"]

    # tasks/get: the whole history, the newest N, or none
    def history(**params):
        return result_of(rpc(http, target, "tasks/get", {"id": task_id, **params}))["history"]

    assert len(history()) == 3
    assert history(historyLength=1) == [{"role": "user", "parts": [text_part("two")]}]
    assert [m["role"] for m in history(historyLength=2)] == ["agent", "user"]
    assert history(historyLength=0) == []
    # tasks/send's historyLength cuts the answer the same way
    third_id = str(uuid.uuid4())
    cut = tasks_send(http, target, third_id, "x", historyLength=1)
    assert cut["status"]["state"] == "input-required" and len(cut["history"]) == 1


def test_a_mismatched_session_on_a_follow_up_is_invalid(http, make_target):
    target = make_target(config={"input_required": True}, headers=V01)
    task_id = str(uuid.uuid4())
    assert tasks_send(http, target, task_id, "one", sessionId="s-1")["status"]["state"] == (
        "input-required"
    )
    error_of(
        rpc(
            http,
            target,
            "tasks/send",
            {"id": task_id, "sessionId": "s-2", "message": message("two")},
        ),
        -32602,
        "does not match",
    )


def test_cancel_a_slow_task(http, make_target):
    target = make_target(config={"delay_seconds": 30}, headers=V01)
    task_id = str(uuid.uuid4())
    with ThreadPoolExecutor(1) as pool, httpx.Client(timeout=60) as other:
        # tasks/send blocks while the agent works: send it aside
        pending = pool.submit(
            rpc, other, target, "tasks/send", {"id": task_id, "message": message("slow")}
        )
        deadline = time.monotonic() + 20
        while True:
            response = rpc(http, target, "tasks/get", {"id": task_id}).json()
            if response.get("result", {}).get("status", {}).get("state") == "working":
                break
            assert time.monotonic() < deadline, response
            time.sleep(0.1)
        canceled = result_of(rpc(http, target, "tasks/cancel", {"id": task_id}))
        assert canceled["id"] == task_id and canceled["status"]["state"] == "canceled"
        # the blocked send returns once the task ends
        assert result_of(pending.result(timeout=30))["status"]["state"] == "canceled"
    assert result_of(rpc(http, target, "tasks/get", {"id": task_id}))["status"]["state"] == (
        "canceled"
    )
    error_of(
        rpc(http, target, "tasks/cancel", {"id": task_id}), -32000, "canceled"
    )  # v0.1 uses -32002 for "session not found"


def test_session_id_round_trips_and_is_the_context(http, echo):
    session = f"session-{uuid.uuid4()}"
    first = tasks_send(http, echo, str(uuid.uuid4()), "a", sessionId=session)
    second = tasks_send(http, echo, str(uuid.uuid4()), "b", sessionId=session)
    assert first["sessionId"] == second["sessionId"] == session
    # the same task through v1.0: its contextId is the session
    v10 = result_of(rpc(http, echo, "GetTask", {"id": first["id"]}, headers={"A2A-Version": "1.0"}))
    assert v10["contextId"] == session
    listed = result_of(
        rpc(http, echo, "ListTasks", {"contextId": session}, headers={"A2A-Version": "1.0"})
    )
    assert {t["id"] for t in listed["tasks"]} == {first["id"], second["id"]}
    # without a sessionId the server chooses one
    assert tasks_send(http, echo, str(uuid.uuid4()), "c")["sessionId"]


def test_agent_card(http, live_platform, make_tenant, make_agent, make_key):
    tenant = make_tenant()
    agent = make_agent(
        tenant,
        "carded",
        skills=[{"id": "echo", "name": "Echo", "description": "echoes", "tags": ["demo"]}],
    )
    target = Target(live_platform.agent_url(agent), make_key(tenant, "alice"), agent, V01)
    card = result_of(rpc(http, target, "agent/getCard", {}))
    assert card["name"] == "Carded" and card["description"] == "The carded agent."
    assert card["url"] == target.url + "?A2A-Version=0.1"
    assert card["capabilities"]["pushNotifications"] is True
    assert card["capabilities"]["stateTransitionHistory"] is False
    assert card["authentication"] == {"schemes": ["apiKey", "bearer"]}
    assert card["defaultInputModes"] == ["text/plain"]
    assert card["skills"] == [
        {"id": "echo", "name": "Echo", "description": "echoes", "tags": ["demo"]}
    ]
    assert "supportedInterfaces" not in card and "securitySchemes" not in card
    # A v0.1 client sends no version header: the card's URL keeps it in v0.1, where
    # tasks/get (also a v0.3 name) answers in v0.1 shape.
    task = tasks_send(http, target, str(uuid.uuid4()), "hi")
    got = result_of(rpc(http, target, "tasks/get", {"id": task["id"]}, headers={}, url=card["url"]))
    assert got["sessionId"] == task["sessionId"] and "kind" not in got
    assert got["history"][0]["parts"][0]["type"] == "text"


def test_v01_only_methods_need_no_header(http, echo):
    task = result_of(
        rpc(
            http,
            echo,
            "tasks/send",
            {"id": str(uuid.uuid4()), "message": message("bare")},
            headers={},
        )
    )
    assert task["status"]["state"] == "completed" and "sessionId" in task
    assert result_of(rpc(http, echo, "agent/getCard", {}, headers={}))["name"] == "Echo"
    # (v0.1 reports a task without a push config as task-not-found, -32001.)
    error_of(rpc(http, echo, "tasks/pushNotification/get", {"id": task["id"]}, headers={}), -32001)


def test_push_notification_methods(http, echo, make_agent):
    task = tasks_send(http, echo, str(uuid.uuid4()), "hi")
    hook = "http://127.0.0.1:9/hook"  # loopback is allowlisted in the tests; nothing listens
    # set, flat as the v0.1 text has it, then in the original pushNotificationConfig form
    flat = {"id": task["id"], "url": hook, "headers": {"X-Hook-Secret": "s3"}}
    # the answer has no headers: they are write-only (kept, and sent with each notification)
    assert result_of(rpc(http, echo, "tasks/pushNotification/set", flat)) == {
        "url": hook,
        "headers": {},
    }
    assert stored_headers(task["id"]) == {"X-Hook-Secret": "s3"}
    nested = {"id": task["id"], "pushNotificationConfig": {"url": hook + "2"}}
    assert result_of(rpc(http, echo, "tasks/pushNotification/set", nested))["url"] == hook + "2"
    # one config per task in v0.1: the second set replaced the first
    got = result_of(rpc(http, echo, "tasks/pushNotification/get", {"id": task["id"]}))
    assert got == {"url": hook + "2", "headers": {}}
    # the platform's own headers and private addresses are refused, naming why
    reserved = {"id": task["id"], "url": hook, "headers": {"X-A2A-Signature": "forged"}}
    error_of(rpc(http, echo, "tasks/pushNotification/set", reserved), -32602, "X-A2A-Signature")
    private = {"id": task["id"], "url": "http://10.0.0.1/hook"}
    error_of(rpc(http, echo, "tasks/pushNotification/set", private), -32602, "private")
    # inline with a send: the new task has the config
    sent = result_of(
        rpc(
            http,
            echo,
            "tasks/send",
            {
                "id": str(uuid.uuid4()),
                "message": message("x"),
                "pushNotification": {"url": hook, "headers": {"X-Hook": "1"}},
            },
        )
    )
    got = result_of(rpc(http, echo, "tasks/pushNotification/get", {"id": sent["id"]}))
    assert got == {"url": hook, "headers": {}}
    assert stored_headers(sent["id"]) == {"X-Hook": "1"}


def stored_headers(task_id: str) -> dict[str, str]:
    """The headers a task's v0.1 config keeps for its deliveries (test_push.py sees them
    arrive)."""
    return json.loads(decrypt(PushConfig.objects.get(task_id=task_id).headers_encrypted))


def test_push_notification_methods_on_an_agent_without_push(http, live_platform, echo):
    echo.agent.push_notifications = False
    echo.agent.save()
    task = tasks_send(http, echo, str(uuid.uuid4()), "hi")
    set_params = {"id": task["id"], "url": "http://127.0.0.1:9/hook"}
    error_of(rpc(http, echo, "tasks/pushNotification/set", set_params), -32003)
    error_of(rpc(http, echo, "tasks/pushNotification/get", {"id": task["id"]}), -32003)
    card = result_of(rpc(http, echo, "agent/getCard", {}))
    assert card["capabilities"]["pushNotifications"] is False


@pytest.mark.parametrize(
    "method, params, fragment",
    [
        ("tasks/send", {"id": "task-1", "message": message("x")}, "'id' must be a UUID"),
        ("tasks/send", {"id": str(uuid.uuid4())}, "'message' must be an object"),
        (
            "tasks/send",
            {"message": {"role": "user", "parts": [{"kind": "text", "text": "v3"}]}},
            "'message.parts[0].type' must be one of text, data, file",
        ),
        ("tasks/send", {"message": {"role": "robot", "parts": [text_part("x")]}}, "'message.role'"),
        ("tasks/send", {"message": {"role": "user", "parts": []}}, "at least one part"),
        (
            "tasks/send",
            {"message": {"role": "user", "parts": [{"type": "file", "file": {"bytes": "%%"}}]}},
            "'message.parts[0].file.bytes' is not valid base64",
        ),
        ("tasks/send", {"message": message("x"), "historyLength": -1}, "'historyLength'"),
        ("tasks/send", {"message": message("x"), "sessionId": 5}, "'sessionId' must be a string"),
        ("tasks/send", {"message": {"role": "agent", "parts": [text_part("x")]}}, "ROLE_USER"),
        ("tasks/get", {}, "'id' is required"),
        ("tasks/get", {"id": str(uuid.uuid4()), "historyLength": "all"}, "'historyLength'"),
        ("tasks/cancel", {"id": 7}, "'id' must be a string"),
    ],
)
def test_malformed_params(http, echo, method, params, fragment):
    error_of(rpc(http, echo, method, params), -32602, fragment)


def test_another_owners_task_id_does_not_leak(
    http, echo, live_platform, make_tenant, make_agent, make_key
):
    # given Bob's task on the same agent, and Carol's on another tenant's agent
    bob = make_key(echo.agent.tenant, "bob")
    bobs = result_of(
        rpc(
            http,
            echo,
            "tasks/send",
            {"id": str(uuid.uuid4()), "message": message("secret")},
            key=bob,
        )
    )
    carol_tenant = make_tenant()
    carol_agent = make_agent(carol_tenant, "echo")
    carol = Target(
        live_platform.agent_url(carol_agent), make_key(carol_tenant, "carol"), carol_agent, V01
    )
    carols = tasks_send(http, carol, str(uuid.uuid4()), "carol's")

    answers = []
    for task_id in (bobs["id"], carols["id"]):
        # when Alice uses those ids
        sent = error_of(
            rpc(http, echo, "tasks/send", {"id": task_id, "message": message("hi")}),
            -32602,
            "cannot be used for a new task",
        )
        answers.append(sent["message"].replace(task_id, "<id>"))
        # then nothing says whose or in what state, and get/cancel do not find them
        for word in ("bob", "carol", "completed", "owner", "tenant"):
            assert word not in sent["message"].lower()
        error_of(rpc(http, echo, "tasks/get", {"id": task_id}), -32001)
        error_of(rpc(http, echo, "tasks/cancel", {"id": task_id}), -32001)
    assert answers[0] == answers[1]
    # and Bob's task is untouched
    again = result_of(rpc(http, echo, "tasks/get", {"id": bobs["id"]}, key=bob))
    assert again["history"] == bobs["history"] and again["status"] == bobs["status"]


# --- the v0.1 lifecycle: created -> working -> input-required -> completed | failed | canceled


def test_a_task_no_agent_has_taken_yet_is_created_in_every_v01_answer(
    http, make_tenant, make_target
):
    """a2a-v0.1-legacy-jsonrpc.md, "Task Lifecycle", starts at `created`: what v1.0 calls
    submitted (accepted, not yet taken by the agent) is `created` in every v0.1 answer,
    streamed or not; v1.0 still says TASK_STATE_SUBMITTED of the same task."""
    # given a tenant that runs one task at a time, busy with a task that works for an hour:
    # any other task of it waits, untaken, in the tenant's lane (docs/limits.md)
    tenant = make_tenant()
    tenant.plan = Plan.objects.create(name=f"one-{uuid.uuid4().hex[:8]}", running_runs=1)
    tenant.save()
    target = make_target("slow", tenant=tenant, config={"delay_seconds": 3600}, headers=V01)
    busy = rpc_send_nonblocking(http, target, "the hour-long task")
    task_id = uuid.uuid4().hex

    # when a v0.1 client sends and subscribes: the stream opens with the task as sent
    with httpx.Client(timeout=60) as streaming:
        events = rpc_stream(
            streaming, target, "tasks/sendSubscribe", {"id": task_id, "message": message("x")}
        )
        opening = next(events)["result"]
        events.close()
    assert opening["id"] == task_id and opening["final"] is False
    assert opening["status"]["state"] == "created"

    # then tasks/get, and a resubscription's first event, say created too
    got = result_of(rpc(http, target, "tasks/get", {"id": task_id}))
    assert got["id"] == task_id and got["status"]["state"] == "created"
    assert got["history"] == [{"role": "user", "parts": [text_part("x")]}]
    with httpx.Client(timeout=60) as watching:
        events = rpc_stream(watching, target, "tasks/resubscribe", {"id": task_id})
        assert next(events)["result"]["status"]["state"] == "created"
        events.close()
    v10 = rpc(http, target, "GetTask", {"id": str(uuid.UUID(task_id))}, headers=V10)
    assert result_of(v10)["status"]["state"] == "TASK_STATE_SUBMITTED"

    # (a cancel ends the waiting task at once, in v0.1's words; then the busy one)
    canceled = result_of(rpc(http, target, "tasks/cancel", {"id": task_id}))
    assert canceled["status"]["state"] == "canceled"
    assert result_of(rpc(http, target, "CancelTask", {"id": busy}, headers=V10))


# --- streaming (tasks/sendSubscribe, tasks/resubscribe) -------------------------------------


def test_send_subscribe_streams_v01_events(http, make_target):
    target = make_target(config={"input_required": True}, headers=V01)
    task_id = str(uuid.uuid4())

    def turn(text: str) -> list[dict[str, Any]]:
        params = {"id": task_id, "sessionId": "s-stream", "message": message(text)}
        responses = list(rpc_stream(http, target, "tasks/sendSubscribe", params))
        assert all(r["id"] == 1 and "error" not in r for r in responses), responses
        events = [r["result"] for r in responses]
        assert all(e["id"] == task_id for e in events), events
        return events

    first = turn("one")
    assert first[-1]["final"] is True and first[-1]["status"]["state"] == "input-required"
    assert not any(e.get("final") for e in first[:-1])
    second = turn("two")
    # The artifact comes live, or whole in the snapshot a stream opens with if the agent was
    # quicker than the stream: either way once, at index 0, not appended to anything.
    artifacts = [e["artifact"] for e in second if "artifact" in e]
    assert [(a["name"], a["parts"], a["index"], a["append"]) for a in artifacts] == [
        ("echo", [text_part("one\ntwo")], 0, False)
    ]
    assert second[-1]["final"] is True and second[-1]["status"]["state"] == "completed"
    assert second[-1]["status"]["message"]["parts"] == [text_part("Echoed: one\ntwo")]
    assert "kind" not in json.dumps(first + second)


def test_resubscribe_follows_a_task_until_it_is_canceled(http, make_target):
    target = make_target(config={"delay_seconds": 30}, headers=V01)
    task_id = str(uuid.uuid4())
    with ThreadPoolExecutor(2) as pool, httpx.Client(timeout=60) as other:
        pool.submit(rpc, other, target, "tasks/send", {"id": task_id, "message": message("x")})
        deadline = time.monotonic() + 20
        while rpc(http, target, "tasks/get", {"id": task_id}).json().get("error"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        with httpx.Client(timeout=60) as watcher:
            watched = pool.submit(
                lambda: list(rpc_stream(watcher, target, "tasks/resubscribe", {"id": task_id}))
            )
            time.sleep(0.5)
            assert (
                result_of(rpc(http, target, "tasks/cancel", {"id": task_id}))["status"]["state"]
                == "canceled"
            )
            events = [r["result"] for r in watched.result(timeout=30)]
    assert events[0]["id"] == task_id and events[0]["status"]["state"] in ("created", "working")
    assert events[-1]["status"]["state"] == "canceled" and events[-1]["final"] is True


def test_a_hex_task_id_comes_back_as_sent_in_every_answer(http, make_target):
    """A client that chose `uuid4().hex` finds that string in tasks/send, tasks/get,
    tasks/cancel and every tasks/sendSubscribe and tasks/resubscribe event; the platform
    stores the UUID (v1.0 reads the task by its dashed form)."""
    target = make_target(config={"input_required": True}, headers=V01)
    task_id = uuid.uuid4()
    events = [
        r["result"]
        for r in rpc_stream(
            http, target, "tasks/sendSubscribe", {"id": task_id.hex, "message": message("one")}
        )
    ]
    assert events and all(e["id"] == task_id.hex for e in events), events
    assert events[-1]["status"]["state"] == "input-required"
    follow_up = tasks_send(http, target, task_id.hex, "two")
    assert follow_up["id"] == task_id.hex and follow_up["status"]["state"] == "completed"
    v10 = rpc(http, target, "GetTask", {"id": str(task_id)}, headers={"A2A-Version": "1.0"})
    assert result_of(v10)["id"] == str(task_id)

    other = uuid.uuid4()
    asked = tasks_send(http, target, other.hex, "one")
    assert asked["id"] == other.hex
    with httpx.Client(timeout=60) as watcher:
        watching = rpc_stream(watcher, target, "tasks/resubscribe", {"id": other.hex})
        first = next(watching)["result"]
        canceled = result_of(rpc(http, target, "tasks/cancel", {"id": other.hex}))
        rest = [r["result"] for r in watching]
    assert canceled["id"] == other.hex and canceled["status"]["state"] == "canceled"
    assert [first["id"], *(e["id"] for e in rest)] == [other.hex] * (1 + len(rest))
    assert rest[-1]["status"]["state"] == "canceled"
