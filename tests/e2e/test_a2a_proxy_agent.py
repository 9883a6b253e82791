"""The `a2a-proxy` executor end to end: a proxy agent on the live platform fronts another agent
of the same platform (an `echo`, or the TCK's `conformance` agent; private, reached with its own
tenant's key as the proxy's `api_key` secret), over every upstream binding, and the official
a2a-sdk client speaks to the proxy over every binding of ours.

What a client of the proxy sees: the upstream's answer as our task's (artifacts and their
chunks, messages, a direct reply, states), multi-turn through the same upstream task, cancel
reaching the upstream task, push notifications of our events, upstream errors and refused
addresses named in our task's failure, and "test connection".
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from django.core.exceptions import ValidationError

from agents.executors import executor_connection_test
from agents.executors.outbound import ConnectionTestFailed
from tasks_app.models import ExecutorState, TaskEvent
from tasks_app.models import Task as TaskRow

from .clients import GRPC, HTTP_JSON, JSONRPC, sdk_client, send, user_message
from .helpers import bodies, mid, pushed_events, settled, wait_until
from .webhook import Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BINDINGS = (JSONRPC, HTTP_JSON, GRPC)
COMPLETED = TaskState.TASK_STATE_COMPLETED
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
CANCELED = TaskState.TASK_STATE_CANCELED
FAILED = TaskState.TASK_STATE_FAILED


def text_of(message: Any) -> str:
    return "\n".join(p.text for p in message.parts if p.HasField("text"))


class Platform:
    """Two tenants of the live platform: the upstream's (its agents are private, its key is
    the proxy's secret) and the proxy's (whose key our client uses)."""

    def __init__(self, live_platform, make_tenant, make_agent, make_key) -> None:
        self.live = live_platform
        self._make_agent = make_agent
        self.upstream_tenant = make_tenant()
        self.upstream_key = make_key(self.upstream_tenant, "proxy")
        self.tenant = make_tenant()
        self.key = make_key(self.tenant, "client")

    def upstream(self, slug: str, kind: str = "echo", **config: Any) -> Any:
        return self._make_agent(self.upstream_tenant, slug, kind=kind, config=config)

    def card_url(self, upstream: Any) -> str:
        return f"{self.live.agent_url(upstream)}.well-known/agent-card.json"

    def proxy(self, slug: str, card_url: str, secrets: dict[str, str] | None = None, **config):
        return self._make_agent(
            self.tenant,
            slug,
            kind="a2a-proxy",
            config={"card_url": card_url, **config},
            executor_secrets={"api_key": self.upstream_key} if secrets is None else secrets,
        )

    def url(self, agent: Any) -> str:
        return self.live.agent_url(agent)


@pytest.fixture
def platform(live_platform, make_tenant, make_agent, make_key, settings) -> Platform:
    # The live processes allowlist 127.0.0.0/8 for agents' requests; this one saves the
    # proxies (the save-time check resolves card_url) and runs "test connection".
    settings.A2A_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    return Platform(live_platform, make_tenant, make_agent, make_key)


async def exchange(
    url: str, key: str, binding: str, streaming: bool, text: str, **fields: Any
) -> tuple[list[StreamResponse], Task]:
    """Send `text` to our agent; every response, and our task as GetTask then reads it."""
    async with sdk_client(url, key=key, binding=binding, streaming=streaming) as client:
        message_id = fields.pop("message_id", None) or mid()
        request = SendMessageRequest(message=user_message(text, message_id, **fields))
        responses = [r async for r in client.send_message(request)]
        first = responses[0]
        task_id = first.task.id or first.message.task_id
        return responses, await client.get_task(GetTaskRequest(id=task_id))


def upstream_task_of(task_id: str) -> TaskRow:
    """The upstream task the proxy keeps for our task."""
    kept = ExecutorState.objects.get(task_id=task_id).data
    return TaskRow.objects.get(pk=kept["task_id"])


def user_texts(row: TaskRow) -> list[str]:
    return [
        "\n".join(p.get("text", "") for p in m.data["parts"])
        for m in row.messages.order_by("position")
        if m.role == "ROLE_USER"
    ]


# --- round trips -------------------------------------------------------------------------------


def test_a_message_round_trips_over_every_upstream_binding_and_every_binding_of_ours(platform):
    # given: an echo upstream, and a proxy for each upstream binding, streaming and not
    echo = platform.upstream("echo")
    proxies = {
        (upstream_binding, streaming): platform.proxy(
            f"via-{upstream_binding.lower().replace('+', '-')}-{streaming}".lower(),
            platform.card_url(echo),
            binding=upstream_binding,
            streaming=streaming,
        )
        for upstream_binding in BINDINGS
        for streaming in (True, False)
    }
    cases = [
        (upstream_binding, streaming, ours)
        for (upstream_binding, streaming) in proxies
        for ours in BINDINGS
    ]

    # when: each proxy gets a message over each of our bindings (our client streams when the
    # proxy does), all at once
    async def scenario():
        return await asyncio.gather(
            *(
                exchange(
                    platform.url(proxies[upstream_binding, streaming]),
                    platform.key,
                    ours,
                    streaming,
                    f"hello {upstream_binding} {streaming} {ours}",
                )
                for upstream_binding, streaming, ours in cases
            )
        )

    results = asyncio.run(scenario())

    # then: the echo comes back as our artifact and our message, and our task ends completed
    for (upstream_binding, streaming, ours), (responses, task) in zip(cases, results, strict=True):
        text = f"hello {upstream_binding} {streaming} {ours}"
        where = f"{upstream_binding} upstream, streaming={streaming}, our {ours}"
        assert task.status.state == COMPLETED, (where, task)
        assert [text_of(a) for a in task.artifacts] == [text], (where, task)
        assert text_of(task.status.message) == f"Echoed: {text}", (where, task)
        assert task.status.message.task_id == task.id
        if streaming:
            kinds = [r.WhichOneof("payload") for r in responses]
            assert kinds[0] == "task" and "artifact_update" in kinds, (where, kinds)
            assert responses[-1].status_update.status.state == COMPLETED, (where, responses)
            chunks = [r.artifact_update for r in responses if r.HasField("artifact_update")]
            assert "".join(text_of(c.artifact) for c in chunks) == text, (where, chunks)
            assert all(c.task_id == task.id for c in chunks)
        else:
            assert [r.task.status.state for r in responses] == [COMPLETED], (where, responses)

        # The upstream got the message once, in a task of its own the proxy keeps for ours.
        upstream = upstream_task_of(task.id)
        assert upstream.agent_id == echo.pk and upstream.state == "TASK_STATE_COMPLETED"
        assert user_texts(upstream) == [text], where

    assert TaskRow.objects.filter(agent=echo).count() == len(cases)
    # Our task's events are in our log (streams, resubscribe and push replay it): working,
    # the artifact, completed.
    events = list(TaskEvent.objects.filter(task_id=results[0][1].id).order_by("seq"))
    states = [e.state for e in events if e.kind == TaskEvent.Kind.STATUS]
    assert states[0] == "TASK_STATE_WORKING" and states[-1] == "TASK_STATE_COMPLETED", states
    assert [e.kind for e in events].count(TaskEvent.Kind.ARTIFACT) == 1, events


def test_a_direct_reply_a_rejection_and_artifact_chunks_come_through(platform):
    # given: the TCK's agent upstream, which answers by messageId prefix (kept upstream)
    conformance = platform.upstream("tck", kind="conformance")
    proxies = {
        streaming: platform.proxy(
            f"tck-{streaming}".lower(), platform.card_url(conformance), streaming=streaming
        )
        for streaming in (True, False)
    }
    scenarios = ("tck-message-response", "tck-reject-task", "tck-stream-artifact-chunked")
    cases = [(streaming, scenario) for streaming in proxies for scenario in scenarios]

    async def scenario():
        return await asyncio.gather(
            *(
                exchange(
                    platform.url(proxies[streaming]),
                    platform.key,
                    HTTP_JSON if streaming else JSONRPC,
                    streaming,
                    "hi",
                    message_id=f"{prefix}-{uuid.uuid4()}",
                )
                for streaming, prefix in cases
            )
        )

    results = dict(zip(cases, asyncio.run(scenario()), strict=True))
    for streaming in proxies:
        # A direct Message reply: our agent's reply, and our task completed with it.
        responses, task = results[streaming, "tck-message-response"]
        reply = responses[-1].message
        assert text_of(reply) == "Direct message response", (streaming, responses)
        assert (reply.task_id, reply.context_id) == (task.id, task.context_id)
        assert reply.role == Role.ROLE_AGENT
        assert task.status.state == COMPLETED, task
        assert [m.message_id for m in task.history if m.role == Role.ROLE_AGENT] == [
            reply.message_id
        ]
        # A rejection is ours, with its message.
        _, task = results[streaming, "tck-reject-task"]
        assert task.status.state == TaskState.TASK_STATE_REJECTED, task
        assert text_of(task.status.message) == "rejected"
        # Chunks: appended as the upstream sent them (streaming), or the whole artifact (polled);
        # stored as one text either way.
        responses, task = results[streaming, "tck-stream-artifact-chunked"]
        assert task.status.state == COMPLETED, task
        assert [(a.artifact_id, [p.text for p in a.parts]) for a in task.artifacts] == [
            ("chunked", ["chunk-1 chunk-2"])
        ], task
        if streaming:
            chunks = [r.artifact_update for r in responses if r.HasField("artifact_update")]
            assert [(c.append, c.last_chunk) for c in chunks] == [(False, False), (True, True)]


def test_multi_turn_goes_to_the_same_upstream_task_and_the_conversation_to_its_context(platform):
    asker = platform.upstream("asker", input_required=True)
    proxies = {
        streaming: platform.proxy(
            f"asker-{streaming}".lower(), platform.card_url(asker), streaming=streaming
        )
        for streaming in (True, False)
    }

    async def conversation(streaming: bool, ours: str) -> tuple[Task, Task, Task]:
        url = platform.url(proxies[streaming])
        async with sdk_client(url, key=platform.key, binding=ours) as client:
            first = (await send(client, user_message("first", mid()))).task
            second = (
                await send(
                    client,
                    user_message("second", mid(), task_id=first.id, context_id=first.context_id),
                )
            ).task
            # A new task in the same conversation.
            third = (
                await send(client, user_message("third", mid(), context_id=first.context_id))
            ).task
            return first, second, third

    async def scenario():
        return await asyncio.gather(conversation(True, JSONRPC), conversation(False, GRPC))

    for first, second, third in asyncio.run(scenario()):
        # The upstream's question reaches our client as ours.
        assert first.status.state == INPUT_REQUIRED, first
        assert "Send one more message" in text_of(first.status.message)
        # The follow-up to our task completes it with both messages echoed.
        assert second.id == first.id and second.status.state == COMPLETED, second
        assert [text_of(a) for a in second.artifacts] == ["first\nsecond"], second
        # One upstream task holds both user messages.
        upstream = upstream_task_of(first.id)
        assert user_texts(upstream) == ["first", "second"]
        assert upstream.state == "TASK_STATE_COMPLETED"
        # The next task of our conversation is a new upstream task in the same upstream context.
        assert third.id != first.id and third.status.state == INPUT_REQUIRED, third
        next_upstream = upstream_task_of(third.id)
        assert next_upstream.pk != upstream.pk
        assert next_upstream.context_id == upstream.context_id
        assert user_texts(next_upstream) == ["third"]
    # Only those upstream tasks: two per conversation.
    assert TaskRow.objects.filter(agent=asker).count() == 4


def test_cancel_cancels_the_upstream_task(platform):
    slow = platform.upstream("slow", delay_seconds=30)
    cases = [
        (
            platform.proxy(
                f"slow-{streaming}".lower(), platform.card_url(slow), streaming=streaming
            ),
            ours,
        )
        for streaming, ours in ((True, HTTP_JSON), (False, JSONRPC))
    ]

    async def start(proxy: Any, ours: str) -> Task:
        async with sdk_client(platform.url(proxy), key=platform.key, binding=ours) as client:
            message = user_message("long job", mid())
            return (await send(client, message, return_immediately=True)).task

    async def cancel(proxy: Any, ours: str, task: Task) -> Task:
        async with sdk_client(platform.url(proxy), key=platform.key, binding=ours) as client:
            return await client.cancel_task(CancelTaskRequest(id=task.id))

    tasks = asyncio.run(_gather(start(*c) for c in cases))
    # Once each upstream task runs (the proxy keeps its id as soon as it learns it).
    upstream_ids = [
        wait_until(lambda t=t: _running_upstream(t.id), what="the upstream task to run")
        for t in tasks
    ]
    canceled = asyncio.run(_gather(cancel(*c, t) for c, t in zip(cases, tasks, strict=True)))

    for task, upstream_id in zip(canceled, upstream_ids, strict=True):
        assert task.status.state == CANCELED, task
        wait_until(
            lambda u=upstream_id: TaskRow.objects.get(pk=u).state == "TASK_STATE_CANCELED",
            what="the upstream task to be canceled",
        )


def test_cancel_while_waiting_for_input_cancels_the_waiting_upstream_task(platform):
    # given our task waiting for input because the upstream task is (no run of ours under way)
    asker = platform.upstream("idle-asker", input_required=True)
    proxy = platform.proxy("idle-asker", platform.card_url(asker))

    async def scenario() -> tuple[Task, Task]:
        async with sdk_client(platform.url(proxy), key=platform.key) as client:
            asked = (await send(client, user_message("first", mid()))).task
            return asked, await client.cancel_task(CancelTaskRequest(id=asked.id))

    asked, canceled = asyncio.run(scenario())
    assert asked.status.state == INPUT_REQUIRED, asked
    upstream = upstream_task_of(asked.id)
    assert upstream.state == "TASK_STATE_INPUT_REQUIRED"
    # then ours is canceled at once, and the proxy's cancel() reaches the upstream task too
    assert canceled.status.state == CANCELED, canceled
    wait_until(
        lambda: TaskRow.objects.get(pk=upstream.pk).state == "TASK_STATE_CANCELED",
        what="the waiting upstream task to be canceled",
    )


async def _gather(calls: Any) -> list[Any]:
    return list(await asyncio.gather(*calls))


def _running_upstream(task_id: str) -> str | None:
    kept = ExecutorState.objects.filter(task_id=task_id).values_list("data", flat=True).first()
    if not kept or not kept.get("task_id"):
        return None
    upstream = TaskRow.objects.get(pk=kept["task_id"])
    return str(upstream.pk) if upstream.state == "TASK_STATE_WORKING" else None


def test_push_notifications_of_the_proxy_carry_our_events(platform, tmp_path):
    echo = platform.upstream("echo")
    proxy = platform.proxy("pushed", platform.card_url(echo))
    receiver = Receiver(directory=tmp_path / "webhooks").start()
    try:

        async def scenario() -> Task:
            async with sdk_client(platform.url(proxy), key=platform.key) as client:
                request = SendMessageRequest(message=user_message("pushed along", mid()))
                request.configuration.task_push_notification_config.CopyFrom(
                    TaskPushNotificationConfig(id="hook", url=receiver.url, token="t0")
                )
                return [r async for r in client.send_message(request)][0].task

        task = asyncio.run(scenario())
        assert task.status.state == COMPLETED, task
        expected = pushed_events(task.id)
        received = receiver.wait_for_count(len(expected))
        settled(task.id, len(expected))
        pushed = bodies(received)
        assert pushed == [e.data for e in expected]
        assert {p.get("statusUpdate", p.get("artifactUpdate"))["taskId"] for p in pushed} == {
            task.id
        }
        assert pushed[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        artifacts = [p["artifactUpdate"]["artifact"] for p in pushed if "artifactUpdate" in p]
        assert [a["parts"][0]["text"] for a in artifacts] == ["pushed along"]
    finally:
        receiver.stop()


# --- errors and the SSRF guard ------------------------------------------------------------------


@pytest.fixture
def card_server() -> Iterator[dict[str, Any]]:
    """A stand-in for another A2A host: serves, at any path, the card put in the dict."""
    served: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(served["card"]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    served["url"] = f"http://127.0.0.1:{server.server_address[1]}/card.json"
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_upstream_errors_and_refused_addresses_fail_our_task_with_the_reason(
    platform, card_server, settings
):
    echo = platform.upstream("echo")
    # A wrong key: the upstream refuses it, over each binding.
    wrong_key = {
        binding: platform.proxy(
            f"wrong-{binding.lower().replace('+', '-')}",
            platform.card_url(echo),
            secrets={"api_key": "a2a_not-a-key"},
            binding=binding,
        )
        for binding in BINDINGS
    }
    # A card whose gRPC address is in a private network the workers do not allow.
    card_server["card"] = {
        "name": "Elsewhere",
        "version": "1.0.0",
        "capabilities": {"streaming": True},
        "supportedInterfaces": [
            {"url": "10.0.0.1:50051", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
        ],
    }
    grpc_private = platform.proxy("grpc-private", card_server["url"], binding="GRPC")
    # Saved while this process allows 10.0.0.0/8; the workers do not.
    settings.A2A_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8", "10.0.0.0/8"]
    card_private = platform.proxy("card-private", "http://10.0.0.1:9/.well-known/agent-card.json")
    # Without that, saving the same is refused, naming card_url.
    settings.A2A_AGENT_ALLOWED_NETWORKS = []
    with pytest.raises(ValidationError) as refused:
        platform.proxy("refused", platform.card_url(echo))
    assert "card_url: " in str(refused.value) and "127.0.0.1 is a loopback address" in str(
        refused.value
    )

    async def scenario():
        agents = [*wrong_key.values(), grpc_private, card_private]
        return await asyncio.gather(
            *(exchange(platform.url(a), platform.key, JSONRPC, False, "hi") for a in agents)
        )

    results = asyncio.run(scenario())
    for _, task in results:
        assert task.status.state == FAILED, task
    # Each names the upstream and what it answered, on the binding configured.
    reasons = [text_of(task.status.message) for _, task in results]
    assert reasons[0] == 'The upstream agent "Echo" answered HTTP 401 Unauthorized.', reasons[0]
    assert reasons[1] == reasons[0], reasons[1]
    assert reasons[2].startswith('The upstream agent "Echo" answered gRPC UNAUTHENTICATED: '), (
        reasons[2]
    )
    assert reasons[3].startswith('The upstream agent "Elsewhere" was not contacted: '), reasons[3]
    assert "10.0.0.1 is a private address" in reasons[3], reasons[3]
    assert reasons[4].startswith(
        "The upstream agent's card at http://10.0.0.1:9/.well-known/agent-card.json was not "
        "contacted: "
    ), reasons[4]
    assert "10.0.0.1 is a private address" in reasons[4], reasons[4]
    # No secret in any reason.
    assert not any(platform.upstream_key in r or "a2a_not-a-key" in r for r in reasons)


# --- test connection ---------------------------------------------------------------------------


def _test_connection(card_url: str, secrets: dict[str, str], **config: Any) -> str:
    return asyncio.run(
        executor_connection_test(
            kind="a2a-proxy",
            config={"card_url": card_url, **config},
            secrets=secrets,
            agent_path="t/a",
        )
    )


def test_connection_test_names_the_upstream_or_what_went_wrong(platform):
    echo = platform.upstream("echo")
    secrets = {"api_key": platform.upstream_key}
    reached = "Reached Echo 1.0.0: JSONRPC, HTTP+JSON, GRPC; streams."

    assert _test_connection(platform.card_url(echo), secrets) == (
        f"{reached} It accepted the API key (X-API-Key): its extended card "
        "(GetExtendedAgentCard) answered."
    )
    wrong_path = f"{platform.url(echo)}.well-known/no-such-card.json"
    with pytest.raises(ConnectionTestFailed) as failed:
        _test_connection(wrong_path, secrets)
    assert str(failed.value) == (
        f"The upstream agent's card at {wrong_path} answered HTTP 404 Not Found."
    )
    with pytest.raises(ConnectionTestFailed) as failed:
        _test_connection("http://10.0.0.1:9/.well-known/agent-card.json", secrets)
    assert "was not contacted: " in str(failed.value)
    assert "10.0.0.1 is a private address" in str(failed.value)


@pytest.mark.parametrize("binding", BINDINGS)
def test_connection_test_tries_the_credential_over_the_binding_a_run_would_use(platform, binding):
    # given the private echo of another tenant, its card offering an extended card
    echo = platform.upstream("echo")
    card_url = platform.card_url(echo)
    reached = "Reached Echo 1.0.0: JSONRPC, HTTP+JSON, GRPC; streams."
    # then its key, as an API key or as a bearer token, gets the extended card
    for secrets, named in (
        ({"api_key": platform.upstream_key}, "the API key (X-API-Key)"),
        ({"token": platform.upstream_key}, "the token (Authorization: Bearer)"),
    ):
        answer = _test_connection(card_url, secrets, binding=binding)
        assert answer == (
            f"{reached} It accepted {named}: its extended card (GetExtendedAgentCard) answered."
        )
    # and a wrong one is refused, named, though the public card was reached with it
    refused = 'The upstream agent "Echo" refused the API key (X-API-Key): '
    with pytest.raises(ConnectionTestFailed) as failed:
        _test_connection(card_url, {"api_key": "a2a_00000000_wrong"}, binding=binding)
    if binding == GRPC:
        assert str(failed.value).startswith(refused + "gRPC UNAUTHENTICATED: "), failed.value
    else:
        assert str(failed.value) == refused + "HTTP 401 Unauthorized.", failed.value
    assert "a2a_00000000_wrong" not in str(failed.value)
    # and without a credential only the public card is checked, as the answer says
    assert _test_connection(card_url, {}, binding=binding) == (
        f"{reached} No credential is set (token, api_key), so only its public card was checked "
        "(its card says calls need one)."
    )


@pytest.mark.parametrize("binding", BINDINGS)
def test_connection_test_without_an_extended_card_gets_a_made_up_task(
    platform, card_server, binding
):
    # given the private echo's card as another host serves it, without an extended card (its
    # interfaces still lead to the live platform)
    echo = platform.upstream("echo")
    card = httpx.get(platform.card_url(echo), headers={"A2A-Version": "1.0"}, timeout=10).json()
    card["capabilities"]["extendedAgentCard"] = False
    card_server["card"] = card
    # then a GetTask of a made-up task answers TaskNotFound to the right key
    answer = _test_connection(
        card_server["url"], {"api_key": platform.upstream_key}, binding=binding
    )
    assert answer.endswith(
        "It accepted the API key (X-API-Key): GetTask of a made-up task answered TaskNotFound."
    ), answer
    # and a refusal to a wrong one
    with pytest.raises(ConnectionTestFailed) as failed:
        _test_connection(card_server["url"], {"api_key": "a2a_00000000_wrong"}, binding=binding)
    assert str(failed.value).startswith(
        'The upstream agent "Echo" refused the API key (X-API-Key): '
        + ("gRPC UNAUTHENTICATED: " if binding == GRPC else "HTTP 401 Unauthorized.")
    ), failed.value
