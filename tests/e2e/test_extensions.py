"""The A2A-Extensions service parameter reaches the agent's executor on every binding."""

from __future__ import annotations

import uuid

import grpc
import httpx
import pytest
from a2a.types import Message, Part, Role, SendMessageRequest
from a2a.types import a2a_pb2_grpc as pb10_grpc

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

EXECUTOR = "tests.agents.sample_executors.ExtensionsExecutor"
ASKED = ("https://example.com/ext/b/v1", "https://example.com/ext/a/v1")
EXPECTED = ",".join(sorted(ASKED))


@pytest.fixture
def agent(live_platform, make_tenant, make_agent, make_key, settings):
    settings.A2A_PYTHON_EXECUTORS = [EXECUTOR]  # agent_create validates in this process
    tenant = make_tenant()
    agent = make_agent(tenant, "ext", kind="python", config={"class_path": EXECUTOR})
    return agent, make_key(tenant)


def _message() -> dict:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "x"}]}


def _artifact_text(task: dict) -> str:
    return task["artifacts"][0]["parts"][0]["text"]


@pytest.mark.parametrize("header", [", ".join(ASKED), "repeated"])
def test_jsonrpc_and_rest_pass_requested_extensions(live_platform, agent, header):
    agent, key = agent
    url = live_platform.agent_url(agent)
    headers = [("X-API-Key", key), ("A2A-Version", "1.0")]
    if header == "repeated":  # the same parameter sent twice: both values count
        headers += [("A2A-Extensions", ASKED[0]), ("A2A-Extensions", f"{ASKED[1]} ,")]
    else:
        headers.append(("A2A-Extensions", header))
    with httpx.Client(timeout=30) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
        body["params"] = {"message": _message()}
        answer = http.post(url, json=body, headers=headers).json()
        assert _artifact_text(answer["result"]["task"]) == EXPECTED, answer
        response = http.post(url + "message:send", json={"message": _message()}, headers=headers)
        assert _artifact_text(response.json()["task"]) == EXPECTED, response.text
        # Without the parameter the executor sees none.
        plain = http.post(url + "message:send", json={"message": _message()}, headers=headers[:2])
        assert _artifact_text(plain.json()["task"]) == "-"


def test_grpc_passes_requested_extensions(live_platform, agent):
    agent, key = agent
    tenant = f"{agent.tenant.slug}/{agent.slug}"
    request = SendMessageRequest(
        tenant=tenant,
        message=Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="x")]),
    )
    # The current name, repeated, and the one v0.3-era clients send.
    metadata = [("x-api-key", key), ("a2a-extensions", ASKED[0]), ("x-a2a-extensions", ASKED[1])]
    with grpc.insecure_channel(live_platform.grpc_address) as channel:
        answer = pb10_grpc.A2AServiceStub(channel).SendMessage(
            request, metadata=metadata, timeout=30
        )
    assert answer.task.artifacts[0].parts[0].text == EXPECTED
