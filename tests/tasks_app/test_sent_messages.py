"""Repeated messageIds: the fingerprint that tells a retry from another message reusing an id
(tasks_app.services.send_fingerprint), and what a send then does, with the agent's
de-duplication on and off."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.types import SendMessageRequest, TaskState

from agents.auth import Principal
from bindings.codecs import v03, v10
from tasks_app.errors import InvalidParamsError
from tasks_app.models import Message, SentMessage, Task, TaskEvent
from tasks_app.services import message_send, send_fingerprint
from tests.factories import task_create, task_send, user_message

ALICE = Principal(owner="key:alice")


def v10_request(params: dict[str, Any]) -> SendMessageRequest:
    return v10.v10_params(params, SendMessageRequest)


V10_MESSAGE = {
    "messageId": "m-1",
    "role": "ROLE_USER",
    "parts": [{"text": "hi", "metadata": {"lang": "en"}}, {"data": {"n": 1}}],
    "contextId": "c-1",
    "taskId": "t-1",
    "referenceTaskIds": ["t-0"],
    "extensions": ["https://example.com/ext"],
    "metadata": {"source": "test"},
}
V03_MESSAGE = {
    "kind": "message",
    "messageId": "m-1",
    "role": "user",
    "parts": [
        {"kind": "text", "text": "hi", "metadata": {"lang": "en"}},
        {"kind": "data", "data": {"n": 1}},
    ],
    "contextId": "c-1",
    "taskId": "t-1",
    "referenceTaskIds": ["t-0"],
    "extensions": ["https://example.com/ext"],
    "metadata": {"source": "test"},
}


@pytest.mark.parametrize(
    "v03_params, v10_params",
    [
        ({"message": V03_MESSAGE}, {"message": V10_MESSAGE}),
        # v0.3 writes an empty configuration where v1.0 leaves it out, and drops an empty
        # metadata that v1.0 keeps: the same request either way.
        ({"message": V03_MESSAGE, "configuration": {}}, {"message": V10_MESSAGE, "metadata": {}}),
        (
            {
                "message": V03_MESSAGE,
                "configuration": {
                    "acceptedOutputModes": ["text/plain"],
                    "blocking": False,
                    "historyLength": 3,
                    "pushNotificationConfig": {"url": "https://example.com/hook", "token": "t"},
                },
                "metadata": {"trace": "x"},
            },
            {
                "message": V10_MESSAGE,
                "configuration": {
                    "acceptedOutputModes": ["text/plain"],
                    "returnImmediately": True,
                    "historyLength": 3,
                    "taskPushNotificationConfig": {"url": "https://example.com/hook", "token": "t"},
                },
                "metadata": {"trace": "x"},
            },
        ),
    ],
)
def test_the_same_request_in_v03_and_v10_has_one_fingerprint(v03_params, v10_params):
    in_v03 = v03.v03json_send_request(v03_params)
    in_v10 = v10_request(v10_params)
    assert send_fingerprint(in_v03) == send_fingerprint(in_v10)
    assert len(send_fingerprint(in_v10)) == 64 and int(send_fingerprint(in_v10), 16) >= 0


def test_the_tenant_that_routes_a_request_is_not_part_of_it():
    routed = v10_request({"message": V10_MESSAGE, "tenant": "acme/echo"})
    assert send_fingerprint(routed) == send_fingerprint(v10_request({"message": V10_MESSAGE}))


def test_an_empty_object_the_sender_wrote_as_a_value_is_kept():
    """A data part holding {} is not an empty part: only sub-messages outside a oneof, and
    outside Struct and Value, are cleared."""

    def with_parts(*parts: dict[str, Any]) -> str:
        message = {"messageId": "m-1", "role": "ROLE_USER", "parts": list(parts)}
        return send_fingerprint(v10_request({"message": message}))

    assert with_parts({"data": {}}) != with_parts({})
    assert with_parts({"data": {"a": {}}}) != with_parts({"data": {}})


def changed(params: dict[str, Any], path: str, value: Any) -> None:
    """Set `value` at `path` (dot-separated keys; digits index lists) of `params`."""
    *parents, last = path.split(".")
    here: Any = params
    for key in parents:
        here = here[int(key)] if key.isdigit() else here.setdefault(key, {})
    here[int(last) if last.isdigit() else last] = value


@pytest.mark.parametrize(
    "path, value",
    [
        ("message.parts.0.text", "hello"),
        ("message.parts.0.metadata", {"lang": "fr"}),
        ("message.parts.1", {"data": {"n": 2}}),
        ("message.parts", [{"text": "hi"}]),
        ("message.metadata", {"source": "other"}),
        ("message.extensions", []),
        ("message.referenceTaskIds", ["t-9"]),
        ("message.role", "ROLE_AGENT"),
        ("message.taskId", "t-2"),
        ("message.taskId", ""),
        ("message.contextId", "c-2"),
        ("configuration.acceptedOutputModes", ["application/json"]),
        ("configuration.returnImmediately", True),
        ("configuration.historyLength", 0),
        ("configuration.historyLength", 5),
        ("configuration.taskPushNotificationConfig", {"url": "https://example.com/h"}),
        ("metadata", {"trace": "y"}),
    ],
)
def test_any_change_to_what_a_send_asks_changes_its_fingerprint(path, value):
    params = {
        "message": {**V10_MESSAGE, "parts": [dict(p) for p in V10_MESSAGE["parts"]]},
        "configuration": {"historyLength": 2},
        "metadata": {"trace": "x"},
    }
    before = send_fingerprint(v10_request(params))
    changed(params, path, value)
    assert send_fingerprint(v10_request(params)) != before


# --- sends -----------------------------------------------------------------------------------


@pytest.fixture
def agent(make_tenant, make_agent):
    return make_agent(make_tenant(), "echo")


def written() -> tuple[int, int, int, int]:
    return (
        Task.objects.count(),
        TaskEvent.objects.count(),
        Message.objects.count(),
        SentMessage.objects.count(),
    )


def test_a_repeat_asking_something_else_is_refused_and_writes_nothing(agent):
    first = task_send(agent, message_id="m-1", text="once")
    before = written()
    with pytest.raises(InvalidParamsError) as refused:
        task_send(agent, message_id="m-1", text="other words")
    assert str(refused.value) == (
        f"messageId 'm-1' was already sent to this agent with another message (it made task "
        f"{first.task_id}); send a new messageId for a new message, or the same message to get "
        "that task again."
    )
    assert written() == before
    # The same words again are the first message.
    assert task_send(agent, message_id="m-1", text="once").task_id == first.task_id


def test_a_repeated_follow_up_asking_something_else_is_refused(agent):
    task_id = task_create(agent, state=TaskState.TASK_STATE_INPUT_REQUIRED).pk
    task_send(agent, task_id=str(task_id), message_id="answer", text="yes")
    before = written()
    with pytest.raises(InvalidParamsError, match=f"it continued task {task_id}"):
        task_send(agent, task_id=str(task_id), message_id="answer", text="no")
    assert written() == before
    assert task_send(agent, task_id=str(task_id), message_id="answer", text="yes").repeated


def test_a_first_send_recorded_without_a_fingerprint_matches_any_repeat(agent):
    """Rows written by a process of the version before fingerprints (the column's default)."""
    first = task_send(agent, message_id="m-1", text="once")
    SentMessage.objects.update(fingerprint="")
    repeat = task_send(agent, message_id="m-1", text="other words")
    assert repeat.repeated and repeat.task_id == first.task_id


def test_without_deduplication_every_send_is_new_and_no_id_is_kept(make_tenant, make_agent):
    agent = make_agent(make_tenant(), "echo", deduplicate_messages=False)
    first = task_send(agent, message_id="m-1", text="once")
    again = task_send(agent, message_id="m-1", text="once")
    other = task_send(agent, message_id="m-1", text="other words")
    assert len({first.task_id, again.task_id, other.task_id}) == 3
    assert not (again.repeated or other.repeated)
    assert not SentMessage.objects.exists()


def test_the_fingerprint_is_stored_with_the_sent_id(agent):
    request = SendMessageRequest(message=user_message("once", message_id="m-1"))
    message_send(agent=agent, principal=ALICE, request=request)
    assert SentMessage.objects.get().fingerprint == send_fingerprint(request)
