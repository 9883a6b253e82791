"""`webhook` agents end to end: real daphne, Celery worker and gRPC sidecar; the tenant's service
is the documented example (examples/webhook_receiver.py) in a process of its own, or a recording
receiver (tests/e2e/webhook.py) answering what a test needs; the a2a-sdk client is the referee,
over JSON-RPC, HTTP+JSON and gRPC.

The contract held here is docs/webhook-agents.md: a signed POST per run with the message, the
history and a callback; a synchronous reply mapped to artifacts, state and message; 202 and
callbacks that stream as they come; multi-turn; cancel while waiting (and callbacks refused
after it); push; failures named for the tenant; the SSRF guard; "test connection".
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from django.core.exceptions import ValidationError
from google.protobuf.json_format import MessageToDict

from agents.executors import webhook
from agents.executors.outbound import ConnectionTestFailed
from agents.signing import push_signature_verify
from tasks_app.models import TaskEvent

from .clients import GRPC, HTTP_JSON, JSONRPC, sdk_client, user_message
from .helpers import mid
from .tenant_service import ExampleService
from .webhook import Received, Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BINDINGS = (JSONRPC, HTTP_JSON, GRPC)
MODES = [(binding, streaming) for binding in BINDINGS for streaming in (False, True)]
SECRET = "service-token-" + "s" * 16
LOOPBACK = ["127.0.0.0/8", "::1/128"]


def text(message: Any) -> str:
    return "".join(p.text for p in message.parts if p.HasField("text"))


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture
def place(live_platform, make_tenant, make_key, settings):
    """A tenant, a key of it, and the JWKS its service pins; agents of this test process may
    point at 127.0.0.1 (the live processes allow it on their own)."""
    settings.A2A_AGENT_ALLOWED_NETWORKS = LOOPBACK
    tenant = make_tenant()
    jwks = f"{live_platform.url}/a2a/{tenant.slug}/.well-known/jwks.json"
    return tenant, make_key(tenant), jwks


@pytest.fixture
def example(place, tmp_path) -> Iterator[ExampleService]:
    service = ExampleService(tmp_path / "service", jwks=place[2], token=SECRET).start()
    yield service
    service.stop()


@pytest.fixture
def receivers(tmp_path) -> Iterator[Callable[..., Receiver]]:
    made: list[Receiver] = []

    def make(status: int = 200, body: str = "") -> Receiver:
        receiver = Receiver(
            directory=tmp_path / "receivers",
            default={
                "status": status,
                "headers": {"Content-Type": "application/json"},
                "body": body,
            },
        )
        made.append(receiver)
        return receiver.start()

    yield make
    for receiver in made:
        receiver.stop()


@pytest.fixture
def hook_agent(live_platform, place, make_agent):
    """A webhook agent of the tenant at `url`: (its URL, its row)."""

    def make(url: str, slug: str = "hook", **config: Any) -> tuple[str, Any]:
        row = make_agent(
            place[0],
            slug,
            kind="webhook",
            config={"url": url, "timeout_seconds": 10, **config},
            executor_secrets={"token": SECRET},
        )
        return live_platform.agent_url(row), row

    return make


async def exchange(
    url: str, key: str, binding: str, streaming: bool, request: SendMessageRequest
) -> list[StreamResponse]:
    async with sdk_client(url, key=key, binding=binding, streaming=streaming) as client:
        return [r async for r in client.send_message(request)]


async def turns(
    url: str, key: str, binding: str, streaming: bool, *texts: str
) -> tuple[list[list[StreamResponse]], Task]:
    """Send `texts` as the turns of one task (each after the last settled) with one client:
    the answer to each, and the task as GetTask shows it at the end."""
    answers: list[list[StreamResponse]] = []
    task_id = context_id = ""
    async with sdk_client(url, key=key, binding=binding, streaming=streaming) as client:
        for said in texts:
            message = user_message(said, mid(), task_id=task_id, context_id=context_id)
            answers.append(
                [r async for r in client.send_message(SendMessageRequest(message=message))]
            )
            last = answers[-1][-1]
            task_id, context_id = (
                (last.task.id, last.task.context_id)
                if last.HasField("task")
                else (last.status_update.task_id, last.status_update.context_id)
            )
        return answers, await client.get_task(GetTaskRequest(id=task_id))


def final_task(responses: list[StreamResponse]) -> tuple[str, TaskState.ValueType, Any]:
    """The task id, final state and final status message of a send's answer (a task, or a
    stream of events)."""
    last = responses[-1]
    if last.HasField("task"):
        return last.task.id, last.task.status.state, last.task.status.message
    assert last.HasField("status_update"), last
    update = last.status_update
    return update.task_id, update.status.state, update.status.message


def get_task(url: str, key: str, binding: str, task_id: str) -> Task:
    async def get() -> Task:
        async with sdk_client(url, key=key, binding=binding) as client:
            return await client.get_task(GetTaskRequest(id=task_id))

    return asyncio.run(get())


def wait_for_state(url, key, binding, task_id, state, *, timeout: float = 20) -> Task:
    deadline = time.monotonic() + timeout
    while True:
        task = get_task(url, key, binding, task_id)
        if task.status.state == state or time.monotonic() > deadline:
            assert task.status.state == state, task
            return task
        time.sleep(0.1)


def run_posts(receiver: Receiver, count: int) -> list[Received]:
    """The first `count` run requests (those with a message) the receiver got."""

    def runs(got: list[Received]) -> list[Received]:
        return [r for r in got if "message" in r.json()]

    return runs(receiver.wait_for(lambda got: len(runs(got)) >= count, what=f"{count} runs"))


def callback(base: str, task_id: str, token: str | None, **kw: Any) -> httpx.Response:
    """POST to a task's callback URL as a service would (`json=` or `content=` in kw)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return httpx.post(f"{base}/callbacks/{task_id}/", headers=headers, timeout=30, **kw)


def error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["Content-Type"].startswith("application/json")
    return response.json()["error"]


def event_count(task_id: str) -> int:
    return TaskEvent.objects.filter(task_id=task_id).count()


async def cancel_after_post(
    url: str, key: str, binding: str, request: SendMessageRequest, service: Receiver, n: int
) -> Task:
    """Send without waiting, wait until the service got run `n`, then cancel the task."""
    async with sdk_client(url, key=key, binding=binding) as client:
        [response] = [r async for r in client.send_message(request)]
        await asyncio.to_thread(run_posts, service, n)
        return await client.cancel_task(CancelTaskRequest(id=response.task.id))


def cancel_notice(service: Receiver, task_id: str) -> Received:
    def notices(got: list[Received]) -> list[Received]:
        return [r for r in got if r.json().get("cancel") and r.json()["taskId"] == task_id]

    return notices(service.wait_for(notices, what="the cancel notice"))[0]


def verified(live_platform, tenant_slug: str, received: Received) -> dict[str, Any]:
    """The claims of a request's X-A2A-Signature, checked against the tenant's JWKS."""
    jwks = httpx.get(f"{live_platform.url}/a2a/{tenant_slug}/.well-known/jwks.json").json()
    return push_signature_verify(
        received.header("X-A2A-Signature") or "",
        received.body,
        jwks,
        task_id=received.json().get("taskId", ""),
        issuer=live_platform.url,
    )


# --- the synchronous reply -------------------------------------------------------------------


def test_a_synchronous_reply_completes_with_the_services_message_and_artifact(
    place, example, hook_agent
):
    _, key, _ = place
    url, _ = hook_agent(example.url)
    for binding, streaming in MODES:
        said = f"hello over {binding} streaming={streaming}"
        [responses], task = asyncio.run(turns(url, key, binding, streaming, said))

        _, state, message = final_task(responses)
        assert state == TaskState.TASK_STATE_COMPLETED, (binding, streaming, text(message))
        # The service answered (it answers 401 to a request whose signature or Bearer token
        # does not verify) what it got: the message, and the history with it as the last.
        assert text(message) == f"You said: {said}"
        [artifact] = task.artifacts
        assert artifact.name == "echo"
        assert artifact.parts[0].text == said
        assert MessageToDict(artifact.parts[1])["data"] == {"turns": 1, "historyLength": 1}
        if streaming:  # the artifact came before the final status
            kinds = [r.WhichOneof("payload") for r in responses]
            assert kinds.index("artifact_update") < len(kinds) - 1, kinds


def test_the_service_gets_a_signed_post_with_message_history_callback_and_token(
    live_platform, place, receivers, hook_agent
):
    tenant, key, _ = place
    receiver = receivers(200, json.dumps({"message": "fine"}))
    url, _ = hook_agent(receiver.url + "/hook")
    sent = user_message("inspect me", mid(), metadata={"k": "v"})
    responses = asyncio.run(exchange(url, key, JSONRPC, False, SendMessageRequest(message=sent)))
    task_id, state, message = final_task(responses)
    assert state == TaskState.TASK_STATE_COMPLETED and text(message) == "fine"

    [post] = receiver.requests()
    assert post.method == "POST" and post.path == "/hook"
    assert post.header("Content-Type") == "application/json"
    assert post.header("Authorization") == f"Bearer {SECRET}"
    assert post.header("User-Agent") == webhook.USER_AGENT
    claims = verified(live_platform, tenant.slug, post)
    assert claims["task_id"] == task_id
    body = post.json()
    assert body["taskId"] == task_id and body["agent"] == f"{tenant.slug}/hook"
    assert body["contextId"] == responses[-1].task.context_id
    assert body["message"]["parts"] == [{"text": "inspect me"}]
    assert body["message"]["metadata"] == {"k": "v"}
    assert body["message"]["role"] == "ROLE_USER"
    assert [m["messageId"] for m in body["history"]] == [sent.message_id]
    assert body["callback"]["url"] == f"{live_platform.url}/callbacks/{task_id}/"
    assert len(body["callback"]["token"]) >= 40 and body["callback"]["expiresAt"].endswith("Z")


# --- 202 and callbacks -----------------------------------------------------------------------


def test_a_202_run_streams_the_callback_events_as_they_come_then_completes(
    place, example, hook_agent
):
    _, key, _ = place
    url, _ = hook_agent(example.url)
    for binding, streaming in MODES:
        said = f"slow work over {binding}"
        [responses], task = asyncio.run(turns(url, key, binding, streaming, said))
        _, state, message = final_task(responses)
        assert state == TaskState.TASK_STATE_COMPLETED, (binding, streaming, text(message))
        assert text(message) == f"Done: {said}"
        # stored as one text (tasks_app.artifacts); the stream carries the two chunks
        assert [p.text for p in task.artifacts[0].parts] == ["1/2 2/2"]
        if not streaming:
            continue
        # In the stream: the service's working status, then each artifact chunk as it was
        # posted, then the final state.
        seen = []
        for response in responses[1:]:
            if response.HasField("status_update"):
                status = response.status_update.status
                seen.append((TaskState.Name(status.state), text(status.message)))
            else:
                chunk = response.artifact_update
                seen.append(("chunk", chunk.artifact.parts[0].text, chunk.append, chunk.last_chunk))
        assert seen == [
            ("TASK_STATE_WORKING", ""),
            ("TASK_STATE_WORKING", "Working on it..."),
            ("chunk", "1/2 ", False, False),
            ("chunk", "2/2", True, True),
            ("TASK_STATE_COMPLETED", f"Done: {said}"),
        ], binding


def test_multi_turn_the_follow_up_reaches_the_service_with_the_history(place, example, hook_agent):
    _, key, _ = place
    url, _ = hook_agent(example.url)
    for binding, streaming in MODES:
        (first, second), task = asyncio.run(
            turns(url, key, binding, streaming, "ask me", "and more")
        )
        task_id, state, message = final_task(first)
        assert state == TaskState.TASK_STATE_INPUT_REQUIRED, (binding, text(message))
        assert text(message) == "What else should I add?"
        assert final_task(second)[:2] == (task_id, TaskState.TASK_STATE_COMPLETED)
        [artifact] = task.artifacts
        # user, the service's question, user: the whole task went to the service.
        assert artifact.parts[0].text == "ask me\nand more"
        assert MessageToDict(artifact.parts[1])["data"] == {"turns": 2, "historyLength": 3}


def test_cancel_while_a_202_run_waits_ends_it_canceled_and_closes_the_callback(
    live_platform, place, receivers, hook_agent
):
    tenant, key, _ = place
    service = receivers(202)
    url, _ = hook_agent(service.url)
    for n, binding in enumerate(BINDINGS, start=1):
        request = SendMessageRequest(message=user_message(f"long job {n}", mid()))
        request.configuration.return_immediately = True

        canceled = asyncio.run(cancel_after_post(url, key, binding, request, service, n))
        task = wait_for_state(url, key, binding, canceled.id, TaskState.TASK_STATE_CANCELED)
        post = run_posts(service, n)[-1]
        assert post.json()["taskId"] == task.id
        token = post.json()["callback"]["token"]

        # The service was told, signed as every request is.
        notice = cancel_notice(service, task.id)
        assert verified(live_platform, tenant.slug, notice)["task_id"] == task.id
        assert notice.header("Authorization") == f"Bearer {SECRET}"

        # A callback with the run's token, after the cancel, is refused and changes nothing.
        before = event_count(task.id)
        late = callback(live_platform.url, task.id, token, json={"state": "completed"})
        problem = error(late, 409)
        assert problem["code"] == "task_settled" and "TASK_STATE_CANCELED" in problem["message"]
        assert event_count(task.id) == before
        assert get_task(url, key, binding, task.id).status.state == TaskState.TASK_STATE_CANCELED


def test_push_on_a_webhook_agent_receives_the_services_events(
    place, example, hook_agent, receivers
):
    _, key, _ = place
    url, _ = hook_agent(example.url)
    for binding in BINDINGS:
        push = receivers()
        request = SendMessageRequest(
            message=user_message("slow and pushed", mid()),
            configuration=SendMessageConfiguration(
                task_push_notification_config=TaskPushNotificationConfig(
                    url=push.url + "/push", token="push-token"
                )
            ),
        )
        responses = asyncio.run(exchange(url, key, binding, False, request))
        task_id, state, _ = final_task(responses)
        assert state == TaskState.TASK_STATE_COMPLETED, binding

        expected = [
            e.data
            for e in TaskEvent.objects.filter(
                task_id=task_id, kind__in=(TaskEvent.Kind.STATUS, TaskEvent.Kind.ARTIFACT)
            ).order_by("seq")
        ]
        received = push.wait_for_count(len(expected))
        assert [r.json() for r in received] == expected, binding
        assert all(r.header("X-A2A-Notification-Token") == "push-token" for r in received)
        chunks = [r.json()["artifactUpdate"] for r in received if "artifactUpdate" in r.json()]
        assert [c["artifact"]["parts"][0]["text"] for c in chunks] == ["1/2 ", "2/2"]
        assert expected[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


# --- failures --------------------------------------------------------------------------------


def test_a_service_answering_500_fails_the_task_naming_the_status(place, receivers, hook_agent):
    _, key, _ = place
    service = receivers(500, "boom")
    url, _ = hook_agent(service.url)
    for binding, streaming in MODES:
        request = SendMessageRequest(message=user_message("hi", mid()))
        responses = asyncio.run(exchange(url, key, binding, streaming, request))
        _, state, message = final_task(responses)
        assert state == TaskState.TASK_STATE_FAILED, binding
        assert text(message) == "Your service answered HTTP 500."


def test_a_service_that_does_not_answer_in_time_fails_the_task_naming_the_timeout(
    place, hook_agent
):
    _, key, _ = place
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url, _ = hook_agent(f"http://127.0.0.1:{silent.getsockname()[1]}/", timeout_seconds=0.5)
        request = SendMessageRequest(message=user_message("hi", mid()))
        _, state, message = final_task(asyncio.run(exchange(url, key, GRPC, False, request)))
    assert state == TaskState.TASK_STATE_FAILED
    assert text(message) == "Your service did not answer within 0.5 s (timeout_seconds)."


def test_an_invalid_reply_fails_the_task_naming_what_is_wrong(place, receivers, hook_agent):
    _, key, _ = place
    reply = {"state": "completed", "artifacts": [{"parts": [{"kind": "text", "text": "x"}]}]}
    url, _ = hook_agent(receivers(200, json.dumps(reply)).url)
    responses = asyncio.run(
        exchange(url, key, HTTP_JSON, False, SendMessageRequest(message=user_message("x", mid())))
    )
    _, state, message = final_task(responses)
    assert state == TaskState.TASK_STATE_FAILED
    assert text(message).startswith("Your service's reply is not valid: artifacts[0].parts[0]: "), (
        text(message)
    )
    assert '"kind"' in text(message)


def accepted_runs(
    url: str, key: str, service: Receiver
) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """One task per binding, sent without waiting to an agent whose service answers 202:
    [(binding, task id)], and the run request the service got for each task id."""
    tasks = []
    for binding in BINDINGS:
        request = SendMessageRequest(message=user_message(f"accepted over {binding}", mid()))
        request.configuration.return_immediately = True
        [response] = asyncio.run(exchange(url, key, binding, False, request))
        tasks.append((binding, response.task.id))
    posts = {p.json()["taskId"]: p.json() for p in run_posts(service, len(tasks))}
    return tasks, posts


def test_callbacks_are_refused_unless_authentic_and_well_formed(
    live_platform, place, receivers, hook_agent
):
    _, key, _ = place
    service = receivers(202)
    url, _ = hook_agent(service.url, callback_timeout_seconds=120)
    base = live_platform.url
    tasks, posts = accepted_runs(url, key, service)

    for binding, task_id in tasks:
        token = posts[task_id]["callback"]["token"]
        before = event_count(task_id)
        progress = {"state": "working", "message": "half way"}

        for wrong in ("not-the-token", None):
            assert error(callback(base, task_id, wrong, json=progress), 401)["code"] == (
                "unauthenticated"
            )
        other_token = next(p["callback"]["token"] for t, p in posts.items() if t != task_id)
        assert error(callback(base, task_id, other_token, json=progress), 401)
        assert error(callback(base, str(uuid.uuid4()), token, json=progress), 404)["code"] == (
            "task_not_found"
        )
        bad_json = error(callback(base, task_id, token, content=b"{nope"), 400)
        assert bad_json["code"] == "invalid_json"
        empty_parts = {"state": "working", "artifacts": [{"parts": []}]}
        bad_event = error(callback(base, task_id, token, json=empty_parts), 400)
        assert bad_event["code"] == "invalid_event"
        assert "artifacts[0].parts" in bad_event["message"], bad_event
        no_state = error(callback(base, task_id, token, json={"message": "no state"}), 400)
        assert "state" in no_state["message"], no_state
        after_final = [{"state": "completed"}, {"state": "working"}]
        assert "[1]" in error(callback(base, task_id, token, json=after_final), 400)["message"]
        assert event_count(task_id) == before, "a refused callback recorded something"

        # The run's own token is taken: progress and a chunk, then the final state.
        chunk = {"artifact": {"artifactId": "a", "parts": [{"text": "part"}]}, "lastChunk": True}
        taken = callback(base, task_id, token, json=[progress, chunk])
        assert taken.status_code == 200, taken.text
        assert taken.json() == {"recorded": 2, "state": "TASK_STATE_WORKING"}
        done = callback(base, task_id, token, json={"state": "completed", "message": "ok"})
        assert done.json() == {"recorded": 1, "state": "TASK_STATE_COMPLETED"}, done.text
        task = wait_for_state(url, key, binding, task_id, TaskState.TASK_STATE_COMPLETED)
        assert text(task.status.message) == "ok" and task.artifacts[0].parts[0].text == "part"
        assert error(callback(base, task_id, token, json=progress), 409)["code"] == "task_settled"

    # What is too large is refused before it is read; only POST is a callback.
    too_large = b" " * (10 * 1024 * 1024 + 1)
    assert error(callback(base, tasks[0][1], "x", content=too_large), 413)["code"] == "too_large"
    assert error(httpx.get(f"{base}/callbacks/{tasks[0][1]}/", timeout=30), 405)


def test_a_service_that_never_posts_its_final_state_fails_the_task_naming_the_timeout(
    place, receivers, hook_agent
):
    _, key, _ = place
    service = receivers(202)
    url, _ = hook_agent(service.url, callback_timeout_seconds=1)
    tasks, _ = accepted_runs(url, key, service)
    for binding, task_id in tasks:
        task = wait_for_state(url, key, binding, task_id, TaskState.TASK_STATE_FAILED)
        assert text(task.status.message) == (
            "Your service accepted the task (HTTP 202) but posted no final state within 1 s "
            "(callback_timeout_seconds)."
        )


def test_a_private_address_is_refused_at_save_time_and_at_connect_time(
    place, make_agent, hook_agent, settings
):
    tenant, key, _ = place
    private = "http://10.20.30.40:9/hook"
    settings.A2A_AGENT_ALLOWED_NETWORKS = []
    with pytest.raises(ValidationError) as refused:
        make_agent(tenant, "private", kind="webhook", config={"url": private})
    [problem] = refused.value.message_dict["executor_config"]
    assert problem.startswith("url: ") and "10.20.30.40" in problem and "private" in problem

    # Saved where this process allows it; the platform's workers do not.
    settings.A2A_AGENT_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    url, _ = hook_agent(private, slug="private")
    for binding in BINDINGS:
        request = SendMessageRequest(message=user_message("hi", mid()))
        _, state, message = final_task(asyncio.run(exchange(url, key, binding, False, request)))
        assert state == TaskState.TASK_STATE_FAILED
        assert "10.20.30.40" in text(message) and "a private address" in text(message)


# --- test connection -------------------------------------------------------------------------


def test_connection_test_sends_a_signed_ping(
    live_platform, place, example, receivers, make_tenant, settings
):
    tenant, _, jwks = place
    settings.A2A_PUBLIC_BASE_URL = live_platform.url  # the signature's issuer, as the platform's
    config = webhook.WebhookConfig(url=example.url, timeout_seconds=10)
    ping = webhook.connection_test

    # The example service checks the token and the signature: both right, it answers 200.
    line = asyncio.run(ping(config, {"token": SECRET}, agent_path=f"{tenant.slug}/hook"))
    assert line.startswith("Your service answered HTTP 200 in "), line
    assert line.endswith(" ms; the ping carried the token."), line

    # A wrong token, or another tenant's signature: the refusal names what it checks.
    other = make_tenant()
    for secrets, agent_path in (
        ({"token": "wrong"}, f"{tenant.slug}/hook"),
        ({"token": SECRET}, f"{other.slug}/hook"),
    ):
        with pytest.raises(ConnectionTestFailed) as failed:
            asyncio.run(ping(config, secrets, agent_path=agent_path))
        assert str(failed.value) == (
            "Your service refused the token (Authorization: Bearer) or the X-A2A-Signature: "
            "HTTP 401. Check that it expects this agent's token secret, and that it verifies "
            f"signatures against {live_platform.url}/a2a/{agent_path.partition('/')[0]}"
            "/.well-known/jwks.json."
        )
    # No token set, for a service that wants one: the refusal says that none was sent.
    with pytest.raises(ConnectionTestFailed) as failed:
        asyncio.run(ping(config, {}, agent_path=f"{tenant.slug}/hook"))
    assert str(failed.value) == (
        "Your service refused the ping: HTTP 401. No token is set: if it expects one, set this "
        "agent's token secret; if it checks only the X-A2A-Signature, check that it verifies "
        f"signatures against {jwks}."
    )

    # A service that asks for no token: the answer says what the ping carried.
    open_service = receivers(200, "{}")
    unguarded = webhook.WebhookConfig(url=open_service.url, timeout_seconds=10)
    line = asyncio.run(ping(unguarded, {}, agent_path=f"{tenant.slug}/hook"))
    assert line.startswith("Your service answered HTTP 200 in "), line
    assert line.endswith(
        " ms. No token is set, so the ping carried only the X-A2A-Signature (no Authorization "
        "header)."
    ), line
    [received] = open_service.wait_for_count(1)
    assert received.header("Authorization") is None and received.header("X-A2A-Signature")

    forbidding = webhook.WebhookConfig(url=receivers(403).url, timeout_seconds=10)
    with pytest.raises(ConnectionTestFailed, match=r"^Your service refused the token .*HTTP 403"):
        asyncio.run(ping(forbidding, {"token": SECRET}, agent_path=f"{tenant.slug}/hook"))

    failing = webhook.WebhookConfig(url=receivers(500).url, timeout_seconds=10)
    with pytest.raises(ConnectionTestFailed) as failed:
        asyncio.run(ping(failing, {}, agent_path=f"{tenant.slug}/hook"))
    assert str(failed.value) == "Your service answered HTTP 500; it must answer a ping with 2xx."
