"""The `a2a-proxy` executor's pure parts: how upstream responses become our task's events
(`Relay`), the message that goes upstream, the binding and gRPC rules, and the sentence an
upstream error becomes. The whole executor runs end to end in tests/e2e/test_a2a_proxy_agent.py.
"""

from __future__ import annotations

import grpc
import grpc.aio
import httpx
import pytest
from a2a.client import A2AClientError, A2AClientTimeoutError
from a2a.types import (
    AgentCard,
    AgentInterface,
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import TaskNotFoundError

from a2a_platform.ssrf import UnsafeUrl
from agents.executors.a2a_proxy import (
    ProxyConfig,
    Relay,
    UpstreamFailed,
    binding_preference,
    grpc_target,
    outgoing_message,
    upstream_problem,
)

OURS, OUR_CONTEXT = "11111111-1111-1111-1111-111111111111", "our-context"
WORKING = TaskState.TASK_STATE_WORKING
SUBMITTED = TaskState.TASK_STATE_SUBMITTED
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED


def agent_message(text: str, message_id: str) -> Message:
    return Message(
        message_id=message_id,
        role=Role.ROLE_AGENT,
        task_id="up-task",
        context_id="up-context",
        parts=[Part(text=text)],
    )


def status_update(state: int, message: Message | None = None) -> StreamResponse:
    status = TaskStatus(state=state)  # type: ignore[arg-type]
    if message is not None:
        status.message.CopyFrom(message)
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id="up-task", context_id="up-context", status=status
        )
    )


def artifact_update(text: str, *, append: bool = False, last: bool = False) -> StreamResponse:
    return StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(
            task_id="up-task",
            context_id="up-context",
            artifact=Artifact(artifact_id="a1", parts=[Part(text=text)]),
            append=append,
            last_chunk=last,
        )
    )


def relay() -> Relay:
    return Relay.for_task(OURS, OUR_CONTEXT, None)


# --- Relay ---------------------------------------------------------------------------------------


def test_a_stream_becomes_our_events_with_our_ids():
    r = relay()
    opening = Task(id="up-task", context_id="up-context", status=TaskStatus(state=SUBMITTED))
    assert r.take(StreamResponse(task=opening)) == []  # ours is working already
    assert (r.upstream_task_id, r.upstream_context_id) == ("up-task", "up-context")

    assert r.take(status_update(WORKING)) == []  # nothing new
    (first,) = r.take(artifact_update("hel", last=False))
    (second,) = r.take(artifact_update("lo", append=True, last=True))
    (done,) = r.take(status_update(COMPLETED, agent_message("Echoed: hello", "up-m1")))

    for event in (first, second, done):
        assert (event.task_id, event.context_id) == (OURS, OUR_CONTEXT)
    assert (first.append, first.last_chunk, second.append, second.last_chunk) == (
        False,
        False,
        True,
        True,
    )
    # Held as our task stores it: the chunks as one text.
    assert [p.text for p in r.artifacts["a1"].parts] == ["hello"]
    # A snapshot of the upstream's task with the chunks as parts of their own (a server that
    # keeps them so) is the same artifact: nothing to relay again.
    chunked = Artifact(artifact_id="a1", parts=[Part(text="hel"), Part(text="lo")])
    assert r.take(StreamResponse(task=Task(id="up-task", artifacts=[chunked]))) == []
    assert done.status.state == COMPLETED
    message = done.status.message
    assert (message.task_id, message.context_id) == (OURS, OUR_CONTEXT)
    assert message.message_id not in ("up-m1", "") and message.parts[0].text == "Echoed: hello"
    assert r.settled
    # Nothing after the end.
    assert r.take(status_update(WORKING)) == []


def test_a_task_snapshot_gives_its_new_artifacts_then_its_status_once():
    r = Relay.for_task(
        OURS,
        OUR_CONTEXT,
        Task(id=OURS, artifacts=[Artifact(artifact_id="old", parts=[Part(text="kept")])]),
    )
    question = agent_message("More?", "up-q")
    snapshot = Task(
        id="up-task",
        context_id="up-context",
        status=TaskStatus(state=INPUT_REQUIRED, message=question),
        artifacts=[
            Artifact(artifact_id="old", parts=[Part(text="kept")]),
            Artifact(artifact_id="new", parts=[Part(text="fresh")]),
        ],
    )
    events = r.take(StreamResponse(task=snapshot))
    assert [type(e).__name__ for e in events] == [
        "TaskArtifactUpdateEvent",
        "TaskStatusUpdateEvent",
    ]
    assert events[0].artifact.artifact_id == "new"
    assert events[1].status.state == INPUT_REQUIRED
    assert events[1].status.message.parts[0].text == "More?"
    assert r.settled


def test_message_ids_are_ours_the_same_each_time_and_never_repeated():
    r = relay()
    (said,) = r.take(status_update(WORKING, agent_message("thinking", "up-m1")))
    # The same upstream message again (a snapshot after the update): not said twice.
    snapshot = Task(
        id="up-task",
        status=TaskStatus(state=WORKING, message=agent_message("thinking", "up-m1")),
    )
    assert r.take(StreamResponse(task=snapshot)) == []
    # Another relay of the same task maps it to the same id; another task to another.
    again = relay()
    (same,) = again.take(status_update(WORKING, agent_message("thinking", "up-m1")))
    other = Relay.for_task("22222222-2222-2222-2222-222222222222", OUR_CONTEXT, None)
    (elsewhere,) = other.take(status_update(WORKING, agent_message("thinking", "up-m1")))
    assert said.status.message.message_id == same.status.message.message_id
    assert said.status.message.message_id != elsewhere.status.message.message_id
    # A message already in our task's history is not said again on the next turn.
    history = Task(id=OURS, history=[said.status.message])
    later = Relay.for_task(OURS, OUR_CONTEXT, history)
    assert later.take(StreamResponse(task=snapshot)) == []


def test_a_direct_message_reply_is_our_agents_reply():
    r = relay()
    reply = agent_message("Hi!", "up-r")
    reply.task_id = ""
    (ours,) = r.take(StreamResponse(message=reply))
    assert isinstance(ours, Message)
    assert (ours.task_id, ours.context_id, ours.role) == (OURS, OUR_CONTEXT, Role.ROLE_AGENT)
    assert ours.parts[0].text == "Hi!" and ours.message_id != "up-r"
    assert r.settled and r.upstream_context_id == "up-context" and not r.upstream_task_id


def test_a_polled_task_that_completed_with_a_direct_reply_gives_the_reply():
    r = relay()
    user = Message(message_id="u1", role=Role.ROLE_USER, parts=[Part(text="hi")])
    polled = Task(
        id="up-task",
        context_id="up-context",
        status=TaskStatus(state=COMPLETED),
        history=[user, agent_message("Hi!", "up-r")],
        artifacts=[Artifact(artifact_id="a1", parts=[Part(text="file")])],
    )
    artifact, reply = r.take_polled(polled)
    assert artifact.artifact.artifact_id == "a1"
    assert isinstance(reply, Message) and reply.parts[0].text == "Hi!"
    assert reply.task_id == OURS and r.settled
    # Completed without any word after the user's: just the status.
    quiet = relay()
    (done,) = quiet.take_polled(
        Task(id="up-task", status=TaskStatus(state=COMPLETED), history=[user])
    )
    assert done.status.state == COMPLETED and not done.status.HasField("message")


def test_our_own_statuses_say_why():
    r = relay()
    failed = r.status(TaskState.TASK_STATE_FAILED, "The upstream agent answered HTTP 401.")
    assert (failed.task_id, failed.context_id) == (OURS, OUR_CONTEXT)
    assert failed.status.message.parts[0].text == "The upstream agent answered HTTP 401."
    assert failed.status.message.role == Role.ROLE_AGENT and r.settled


def test_the_user_message_goes_upstream_with_the_upstream_ids():
    message = Message(
        message_id="m1",
        role=Role.ROLE_USER,
        task_id=OURS,
        context_id=OUR_CONTEXT,
        parts=[Part(text="hi"), Part(url="https://example.com/a.png", media_type="image/png")],
        reference_task_ids=["33333333-3333-3333-3333-333333333333"],
        extensions=["https://example.com/ext"],
    )
    first = outgoing_message(message, task_id=OURS, upstream_task_id="", upstream_context_id="")
    again = outgoing_message(message, task_id=OURS, upstream_task_id="", upstream_context_id="")
    follow_up = outgoing_message(
        message, task_id=OURS, upstream_task_id="up-task", upstream_context_id="up-context"
    )
    assert list(first.parts) == list(message.parts) and list(first.extensions) == list(
        message.extensions
    )
    assert (first.task_id, first.context_id, list(first.reference_task_ids)) == ("", "", [])
    assert first.message_id == again.message_id and first.message_id.startswith("m1~")
    other_task = outgoing_message(
        message,
        task_id="44444444-4444-4444-4444-444444444444",
        upstream_task_id="",
        upstream_context_id="",
    )
    assert other_task.message_id.startswith("m1~") and other_task.message_id != first.message_id
    assert (follow_up.task_id, follow_up.context_id) == ("up-task", "up-context")
    assert message.task_id == OURS  # the original is left as it is


# --- bindings and gRPC ---------------------------------------------------------------------------


def card(*bindings: str) -> AgentCard:
    return AgentCard(
        name="Up",
        supported_interfaces=[
            AgentInterface(url=f"http://up/{b}", protocol_binding=b, protocol_version="1.0")
            for b in bindings
        ],
    )


@pytest.mark.parametrize(
    "binding, offered, expected",
    [
        ("auto", ("HTTP+JSON", "JSONRPC"), (["JSONRPC", "HTTP+JSON", "GRPC"], False)),
        ("GRPC", ("JSONRPC", "GRPC"), (["GRPC"], True)),
        ("HTTP+JSON", ("JSONRPC", "GRPC"), (["JSONRPC", "HTTP+JSON", "GRPC"], False)),
    ],
)
def test_the_configured_binding_when_offered_else_the_cards_preferred_one(
    binding, offered, expected
):
    config = ProxyConfig(card_url="https://up/card.json", binding=binding)
    assert binding_preference(config, card(*offered)) == expected


@pytest.mark.parametrize(
    "address, card_url, expected",
    [
        ("127.0.0.1:50051", "http://127.0.0.1/card.json", ("127.0.0.1:50051", False)),
        ("agents.example.com:443", "https://x/card.json", ("agents.example.com:443", True)),
        (
            "grpc://agents.example.com:50051",
            "https://x/card.json",
            ("agents.example.com:50051", False),
        ),
        ("grpcs://agents.example.com:443/", "http://x/card.json", ("agents.example.com:443", True)),
        ("https://agents.example.com", "http://x/card.json", ("agents.example.com", True)),
    ],
)
def test_grpc_tls_follows_the_address_scheme_else_the_cards(address, card_url, expected):
    assert grpc_target(address, card_url) == expected


def test_an_unknown_grpc_scheme_is_refused():
    with pytest.raises(UpstreamFailed, match="unknown scheme 'ftp'"):
        grpc_target("ftp://agents.example.com", "https://x/card.json")


# --- errors --------------------------------------------------------------------------------------


def chained(outer: Exception, cause: BaseException) -> Exception:
    outer.__cause__ = cause
    return outer


def test_errors_name_the_upstream_and_what_it_answered():
    who = 'The upstream agent "Up"'
    request = httpx.Request("POST", "https://up/a2a")
    unauthorized = httpx.HTTPStatusError(
        "401", request=request, response=httpx.Response(401, request=request)
    )
    rpc = grpc.aio.AioRpcError(
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.aio.Metadata(),
        grpc.aio.Metadata(),
        details="An API key is required.",
    )
    cases = {
        chained(A2AClientError("HTTP Error 401"), unauthorized): (
            f"{who} answered HTTP 401 Unauthorized."
        ),
        chained(TaskNotFoundError("Task up-task not found"), unauthorized): (
            f"{who} answered HTTP 401 Unauthorized: Task up-task not found."
        ),
        chained(A2AClientError("gRPC Error"), rpc): (
            f"{who} answered gRPC UNAUTHENTICATED: An API key is required."
        ),
        TaskNotFoundError("Task up-task not found"): (
            f"{who} answered error -32001 (TaskNotFoundError): Task up-task not found."
        ),
        chained(A2AClientError("Network"), httpx.ConnectError("Connection refused")): (
            f"{who} could not be reached: Connection refused."
        ),
        A2AClientTimeoutError("Client Request timed out"): (
            f"{who} did not answer within 5 seconds."
        ),
        TimeoutError(): f"{who} did not answer within 5 seconds.",
        chained(
            A2AClientError("x"), UnsafeUrl("agent URL address 10.0.0.1 is a private address.")
        ): (f"{who} was not contacted: agent URL address 10.0.0.1 is a private address."),
    }
    for error, sentence in cases.items():
        assert upstream_problem(error, who, 5) == sentence
