"""The `openai` executor end to end: agents of real daphne + Celery workers ask a real
OpenAI-compatible server on 127.0.0.1 (tests/e2e/fake_openai.py), and the official a2a-sdk
client, over JSON-RPC, HTTP+JSON and gRPC, streaming and not, sees what comes back.

What is checked: the request the model endpoint gets (system prompt, key, model, options, the
conversation, the current message once); the reply as artifact chunks and as the completing
message, with the token usage in the task's metadata; streaming as it happens (ordered against
the server's own record, not timed); retries and failures naming the upstream status; the SSRF
guard at save and at connect time; cancel closing the upstream stream; push; test connection.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from a2a.client import Client
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

from agents.executors import executor_connection_test
from agents.executors.outbound import ConnectionTestFailed

from .clients import GRPC, HTTP_JSON, JSONRPC, sdk_client, user_message
from .fake_openai import NO_MODELS_PREFIX, WRONG_KEY, FakeOpenAI, pieces_of, reply_to, usage_of
from .webhook import Receiver

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

BINDINGS = (JSONRPC, HTTP_JSON, GRPC)
API_KEY = "sk-test-" + "k" * 24
LOCAL = ["127.0.0.0/8"]


# --- fixtures and helpers ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI().start()
    yield server
    server.stop()


@dataclass
class Agents:
    """Makes `openai` agents of one tenant, all pointed at the fake server."""

    live_platform: Any
    make_agent: Any
    upstream: FakeOpenAI
    tenant: Any
    key: str
    numbers: Iterator[int]

    def make(self, model: str = "echo", *, secrets: dict[str, str] | None = None, **config: Any):
        agent = self.make_agent(
            self.tenant,
            f"model{next(self.numbers)}",
            "openai",
            config={"base_url": self.upstream.url, "model": model, **config},
            executor_secrets={"api_key": API_KEY} if secrets is None else secrets,
        )
        return self.live_platform.agent_url(agent)


@pytest.fixture
def agents(live_platform, make_tenant, make_agent, make_key, upstream, settings) -> Agents:
    # The agents are saved from this process, whose guard would refuse 127.0.0.1.
    settings.A2A_AGENT_ALLOWED_NETWORKS = LOCAL
    tenant = make_tenant()
    return Agents(live_platform, make_agent, upstream, tenant, make_key(tenant), itertools.count())


def marked(text: str) -> tuple[str, str]:
    """A user text carrying a marker that finds its calls on the fake server."""
    marker = f"mark{uuid.uuid4().hex[:12]}"
    return f"{text} {marker}", marker


async def turn(
    client: Client, text: str, *, context_id: str = "", push_url: str = ""
) -> list[StreamResponse]:
    """Send one message; every response the client yields (one unless it streams)."""
    message = user_message(text, f"m-{uuid.uuid4()}", context_id=context_id)
    request = SendMessageRequest(message=message)
    if push_url:
        request.configuration.CopyFrom(
            SendMessageConfiguration(
                task_push_notification_config=TaskPushNotificationConfig(url=push_url, token="t")
            )
        )
    return [r async for r in client.send_message(request)]


def task_id_of(responses: list[StreamResponse]) -> str:
    first = responses[0]
    kind = first.WhichOneof("payload")
    return first.task.id if kind == "task" else getattr(first, kind).task_id


async def final_task(client: Client, responses: list[StreamResponse]) -> Task:
    return await client.get_task(GetTaskRequest(id=task_id_of(responses)))


def status_text(task: Task) -> str:
    return "\n".join(p.text for p in task.status.message.parts)


def artifact_text(task: Task) -> str:
    """The reply's artifact as stored: one text part holding the whole answer, however many
    chunks the model streamed."""
    assert len(task.artifacts) == 1, task.artifacts
    assert task.artifacts[0].name == "response"
    [part] = task.artifacts[0].parts
    return part.text


def expected_usage(model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    usage = usage_of(messages, pieces_of(reply_to(messages)))
    return {
        "model": model,
        "promptTokens": usage["prompt_tokens"],
        "completionTokens": usage["completion_tokens"],
        "totalTokens": usage["total_tokens"],
    }


# --- a reply --------------------------------------------------------------------------------


def test_a_reply_streams_into_one_artifact_and_completes_with_usage(agents, upstream):
    url = agents.make(system_prompt="You answer briefly.", temperature=0.3, max_tokens=64)

    async def scenario() -> None:
        for binding, streaming in itertools.product(BINDINGS, (False, True)):
            text, marker = marked(f"hello over {binding}")
            async with sdk_client(url, key=agents.key, binding=binding, streaming=streaming) as c:
                responses = await turn(c, text)
                task = await final_task(c, responses)
            where = f"{binding}, streaming={streaming}"

            [call] = upstream.calls(marker)
            assert call.path == "/v1/chat/completions"
            assert call.headers["authorization"] == f"Bearer {API_KEY}", where
            body = call.body
            assert body["model"] == "echo" and body["stream"] is True
            assert body["stream_options"] == {"include_usage": True}
            assert body["temperature"] == 0.3 and body["max_tokens"] == 64
            # The system prompt, then the current message, once.
            assert body["messages"] == [
                {"role": "system", "content": "You answer briefly."},
                {"role": "user", "content": text},
            ]
            reply = reply_to(body["messages"])

            assert task.status.state == TaskState.TASK_STATE_COMPLETED, where
            assert status_text(task) == reply
            assert artifact_text(task) == reply
            metadata = MessageToDict(task.metadata)
            assert metadata["usage"] == expected_usage("echo", body["messages"]), where

            if streaming:
                kinds = [r.WhichOneof("payload") for r in responses]
                updates = [r.artifact_update for r in responses if r.HasField("artifact_update")]
                assert len(updates) == len(pieces_of(reply)) >= 3, where
                # Every chunk comes before the final status.
                assert kinds.index("artifact_update") < len(kinds) - 1
                assert kinds[-1] == "status_update"
                assert responses[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
                assert [u.append for u in updates] == [False] + [True] * (len(updates) - 1)
                assert [u.last_chunk for u in updates] == [False] * (len(updates) - 1) + [True]
                assert "".join(p.text for u in updates for p in u.artifact.parts) == reply
                assert len({u.artifact.artifact_id for u in updates}) == 1

    asyncio.run(scenario())


def test_the_client_sees_the_first_chunk_before_the_model_has_sent_its_last(agents, upstream):
    url = agents.make("slow")

    async def scenario() -> None:
        for binding in BINDINGS:
            text, marker = marked(f"take your time over {binding}")
            seen_open: list[tuple[int, int, bool]] = []
            responses: list[StreamResponse] = []
            try:
                async with sdk_client(url, key=agents.key, binding=binding, streaming=True) as c:
                    request = SendMessageRequest(message=user_message(text, f"m-{uuid.uuid4()}"))
                    async for response in c.send_message(request):
                        responses.append(response)
                        if response.HasField("artifact_update") and not seen_open:
                            # The server holds its last chunk back until released here.
                            [call] = upstream.calls(marker)
                            seen_open.append((call.chunks_sent, call.chunks_total, call.finished))
                            call.release.set()
            finally:
                for call in upstream.calls(marker):
                    call.release.set()
            sent, total, finished = seen_open[0]
            assert sent < total and not finished, (binding, seen_open)
            assert responses[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
            [call] = upstream.calls(marker)
            assert call.finished and call.chunks_sent == call.chunks_total

    asyncio.run(scenario())


# --- a conversation -------------------------------------------------------------------------


def test_a_conversation_sends_earlier_turns_bounded_by_history_turns(agents, upstream):
    # An endpoint that sends no usage: none is recorded.
    url = agents.make("echo-no-usage", history_turns=2)

    async def scenario() -> None:
        for binding, streaming in zip(BINDINGS, (False, True, False), strict=True):
            context = str(uuid.uuid4())
            texts, markers = [], []
            async with sdk_client(url, key=agents.key, binding=binding, streaming=streaming) as c:
                for word in ("first", "second", "third"):
                    text, marker = marked(f"{word} over {binding}")
                    texts.append(text)
                    markers.append(marker)
                    task = await final_task(c, await turn(c, text, context_id=context))
                    assert task.status.state == TaskState.TASK_STATE_COMPLETED
                    assert "usage" not in MessageToDict(task.metadata)
                    assert task.context_id == context
            calls = [upstream.calls(m)[0] for m in markers]
            replies = [reply_to(call.messages) for call in calls]

            user = [{"role": "user", "content": t} for t in texts]
            assistant = [{"role": "assistant", "content": r} for r in replies]
            assert calls[0].messages == [user[0]]
            assert calls[1].messages == [user[0], assistant[0], user[1]]
            # history_turns=2: of the two earlier exchanges, the last two messages only.
            assert calls[2].messages == [user[1], assistant[1], user[2]], binding

    asyncio.run(scenario())


# --- failures -------------------------------------------------------------------------------


def test_upstream_failures_are_retried_then_fail_the_task_naming_the_status(agents, upstream):
    cases = [
        # model, config, calls the server gets, what the reason says
        ("fail-429", {"max_retries": 2}, 3, ["HTTP 429 (rate limited) after 3 attempts"]),
        ("fail-500", {"max_retries": 1}, 2, ["HTTP 500", "after 2 attempts", "had an error"]),
        ("fail-401", {"max_retries": 2}, 1, ["refused the API key (HTTP 401)"]),
        (
            "hang",
            {"timeout_seconds": 1, "max_retries": 0},
            1,
            ["did not answer within 1 s (1 attempt)"],
        ),
        ("broken", {}, 1, ["reported an error in the middle of its reply", "overloaded"]),
    ]
    urls = {model: agents.make(model, **config) for model, config, _, _ in cases}
    modes = itertools.cycle((False, True))

    async def scenario() -> None:
        for binding in BINDINGS:
            for model, _, count, words in cases:
                streaming = next(modes)
                where = (binding, model, streaming)
                text, marker = marked(f"try {model}")
                async with sdk_client(
                    urls[model], key=agents.key, binding=binding, streaming=streaming
                ) as c:
                    task = await final_task(c, await turn(c, text))
                assert task.status.state == TaskState.TASK_STATE_FAILED, where
                reason = status_text(task)
                for word in words:
                    assert word in reason, (where, reason)
                assert API_KEY not in reason
                assert len(upstream.calls(marker)) == count, where
                if model == "broken":  # what was streamed before the error stays
                    [call] = upstream.calls(marker)
                    assert artifact_text(task) == "".join(pieces_of(reply_to(call.messages))[:2])

    asyncio.run(scenario())


def test_a_private_address_is_refused_at_save_and_at_connect(agents, settings):
    # Saved from a process that does not allowlist it: refused, naming the field.
    settings.A2A_AGENT_ALLOWED_NETWORKS = []
    with pytest.raises(ValidationError) as refused:
        agents.make(base_url="http://10.20.30.40/v1")
    assert "base_url" in str(refused.value) and "private address" in str(refused.value)

    # Saved where it was allowlisted, run by workers that do not allowlist it.
    settings.A2A_AGENT_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    url = agents.make(base_url="http://10.20.30.40/v1", max_retries=0)

    async def scenario() -> None:
        for binding in BINDINGS:
            async with sdk_client(url, key=agents.key, binding=binding) as c:
                task = await final_task(c, await turn(c, "hello"))
            assert task.status.state == TaskState.TASK_STATE_FAILED
            reason = status_text(task)
            assert "10.20.30.40 is a private address" in reason, reason
            assert "A2A_AGENT_ALLOWED_NETWORKS" in reason

    asyncio.run(scenario())


# --- cancel and push ------------------------------------------------------------------------


def test_cancel_during_a_stream_closes_the_upstream_stream(agents, upstream):
    url = agents.make("slow")

    async def scenario() -> None:
        for binding in BINDINGS:
            text, marker = marked(f"cancel me over {binding}")
            responses: list[StreamResponse] = []
            canceled = False
            try:
                async with sdk_client(url, key=agents.key, binding=binding, streaming=True) as c:
                    request = SendMessageRequest(message=user_message(text, f"m-{uuid.uuid4()}"))
                    async for response in c.send_message(request):
                        responses.append(response)
                        if response.HasField("artifact_update") and not canceled:
                            canceled = True  # the model is still streaming: it waits for us
                            task_id = response.artifact_update.task_id
                            await c.cancel_task(CancelTaskRequest(id=task_id))
                    task = await final_task(c, responses)
            finally:
                for call in upstream.calls(marker):
                    call.release.set()
            assert task.status.state == TaskState.TASK_STATE_CANCELED, binding
            assert responses[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
            [call] = upstream.calls(marker)
            upstream.wait_for(
                lambda call=call: call.client_gone, what=f"the client to leave ({binding})"
            )
            assert not call.finished and call.chunks_sent < call.chunks_total, call

    asyncio.run(scenario())


def test_a_push_config_hears_the_chunks_and_the_final_status(agents, upstream, tmp_path):
    url = agents.make()
    receiver = Receiver(directory=tmp_path / "webhooks").start()
    try:
        text, marker = marked("push it")

        async def scenario() -> Task:
            async with sdk_client(url, key=agents.key) as c:
                return await final_task(c, await turn(c, text, push_url=receiver.url))

        task = asyncio.run(scenario())
        assert task.status.state == TaskState.TASK_STATE_COMPLETED

        def final(body: dict[str, Any]) -> bool:
            return body.get("statusUpdate", {}).get("status", {}).get("state") == (
                "TASK_STATE_COMPLETED"
            )

        received = receiver.wait_for(
            lambda got: any(final(r.json()) for r in got), what="the final status"
        )
    finally:
        receiver.stop()
    bodies = [r.json() for r in received]
    chunks = [b["artifactUpdate"] for b in bodies if "artifactUpdate" in b]
    [call] = upstream.calls(marker)
    reply = reply_to(call.messages)
    assert len(chunks) == len(pieces_of(reply))
    assert "".join(p["text"] for c in chunks for p in c["artifact"]["parts"]) == reply
    assert chunks[-1].get("lastChunk") is True
    assert final(bodies[-1])
    assert bodies[-1]["statusUpdate"]["metadata"]["usage"]["model"] == "echo"
    assert {c["taskId"] for c in chunks} == {task.id}


# --- test connection --------------------------------------------------------------------------


def test_connection_test_lists_models_and_names_a_refusal(upstream, settings):
    settings.A2A_AGENT_ALLOWED_NETWORKS = LOCAL

    def check(model: str = "echo", key: str = API_KEY, base_url: str = upstream.url) -> str:
        config = {"base_url": base_url, "model": model, "timeout_seconds": 5}
        return asyncio.run(
            executor_connection_test(
                kind="openai", config=config, secrets={"api_key": key}, agent_path="t/a"
            )
        )

    assert check() == f"Reached {upstream.url}: 8 models, echo among them."
    assert check("gpt-x") == f"Reached {upstream.url}: 8 models, but gpt-x is not among them."

    # An endpoint that lists no models: a one-token completion instead.
    no_models = upstream.root + NO_MODELS_PREFIX + "/v1"
    line = check(base_url=no_models)
    assert line.startswith(f"Reached {no_models}: it lists no models (HTTP 404)"), line
    completion = upstream.calls()[-1]
    assert completion.path == NO_MODELS_PREFIX + "/v1/chat/completions"
    assert completion.body["max_tokens"] == 1 and not completion.body.get("stream")

    before = len(upstream.calls())
    with pytest.raises(ConnectionTestFailed) as failed:
        check(key=WRONG_KEY)
    assert "refused the API key (HTTP 401)" in str(failed.value)
    assert WRONG_KEY not in str(failed.value)
    assert len(upstream.calls()) == before + 1  # never retried
