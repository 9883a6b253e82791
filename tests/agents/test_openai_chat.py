"""The `openai` executor's pure parts: A2A messages as chat messages, the reasons a failed run
gives, and the client's headers (nothing taken from the worker's environment)."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest
from a2a.types import Message, Part, Role
from google.protobuf.struct_pb2 import Value

from a2a_platform.ssrf import UnsafeUrl
from agents.executors.openai_chat import (
    OpenAIConfig,
    chat_messages,
    connection_test,
    failure_reason,
    message_text,
)
from tests.e2e.fake_openai import FakeOpenAI

REQUEST = httpx.Request("POST", "https://models.example/v1/chat/completions")


def message(role: int, *parts: Part, message_id: str = "") -> Message:
    return Message(message_id=message_id or f"id-{id(parts)}", role=role, parts=list(parts))


def test_parts_become_one_text_data_as_json_files_as_notes():
    data = Value()
    data.struct_value.update({"b": [1, 2.5], "a": "x"})
    text = message_text(
        [
            Part(text="first"),
            Part(text="second"),
            Part(data=data),
            Part(url="https://files.example/a.pdf", filename="a.pdf", media_type="application/pdf"),
            Part(raw=b"12345", filename="b.png", media_type="image/png"),
        ]
    )
    lines = text.split("\n")
    assert json.loads(lines.pop(2)) == {"a": "x", "b": [1, 2.5]}  # compact, whole numbers kept
    assert "[1,2.5]" in text
    assert lines == [
        "first",
        "second",
        "[File a.pdf (application/pdf) at https://files.example/a.pdf]",
        "[File b.png (image/png), 5 bytes: its content is not sent to the model]",
    ]


def test_the_conversation_comes_in_order_with_the_current_message_once():
    earlier = [
        message(Role.ROLE_USER, Part(text="one")),
        message(Role.ROLE_AGENT, Part(text="reply one")),
    ]
    current = message(Role.ROLE_USER, Part(text="two"), message_id="current")
    expected = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "reply one"},
        {"role": "user", "content": "two"},
    ]
    # The history holds the current message already, or it does not.
    for history in ([current], []):
        got = chat_messages(
            system_prompt="Be brief.", earlier=earlier, history=history, current=current
        )
        assert got == expected
    # No system prompt: none sent; an empty message: left out.
    got = chat_messages(
        system_prompt="", earlier=[message(Role.ROLE_USER)], history=[current], current=current
    )
    assert got == [{"role": "user", "content": "two"}]


def status_error(status: int, body: object, retries: int = 0) -> openai.APIStatusError:
    request = httpx.Request("POST", REQUEST.url, headers={"x-stainless-retry-count": str(retries)})
    response = httpx.Response(status, request=request, json=body)
    return openai.APIStatusError("error", response=response, body=body)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            status_error(429, {"message": "Slow down."}, retries=2),
            "The model endpoint answered HTTP 429 (rate limited) after 3 attempts: Slow down.",
        ),
        (
            status_error(503, "<html>a page</html>"),
            "The model endpoint answered HTTP 503 (service unavailable).",
        ),
        (
            status_error(401, {"message": "Bad key sk-secret given."}),
            "The model endpoint refused the API key (HTTP 401): Bad key [redacted] given.",
        ),
        (
            openai.APITimeoutError(
                httpx.Request("POST", REQUEST.url, headers={"x-stainless-retry-count": "2"})
            ),
            "The model endpoint did not answer within 1.5 s (3 attempts).",
        ),
        (
            httpx.ReadTimeout("quiet"),
            "The model endpoint went quiet for more than 1.5 s in the middle of its reply.",
        ),
    ],
)
def test_failure_reasons_name_what_the_endpoint_did(error, reason):
    assert failure_reason(error, timeout=1.5, secret="sk-secret", midway=True) == reason


def test_a_guard_refusal_is_found_behind_the_client_error():
    try:
        try:
            raise UnsafeUrl("agent URL address 10.0.0.1 is a private address.")
        except UnsafeUrl as exc:
            raise openai.APIConnectionError(request=REQUEST) from exc
    except openai.APIConnectionError as wrapped:
        error = wrapped
    assert failure_reason(error, timeout=1) == "agent URL address 10.0.0.1 is a private address."


def test_the_client_takes_no_credentials_or_headers_from_the_environment(monkeypatch, settings):
    settings.A2A_AGENT_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    for name, value in {
        "OPENAI_API_KEY": "sk-operator",
        "OPENAI_ORG_ID": "org-operator",
        "OPENAI_PROJECT_ID": "proj-operator",
        "OPENAI_CUSTOM_HEADERS": "X-Operator: secret",
        "OPENAI_BASE_URL": "http://127.0.0.2:9/v1",
    }.items():
        monkeypatch.setenv(name, value)
    server = FakeOpenAI().start()
    try:
        config = OpenAIConfig(base_url=server.url, model="echo")
        asyncio.run(connection_test(config, {}))  # no key configured
        asyncio.run(connection_test(config, {"api_key": "sk-tenant"}))
    finally:
        server.stop()
    keyless, keyed = server.calls()
    for call in (keyless, keyed):
        assert call.path == "/v1/models"
        assert not {"openai-organization", "openai-project", "x-operator"} & set(call.headers)
    assert "authorization" not in keyless.headers
    assert keyed.headers["authorization"] == "Bearer sk-tenant"
