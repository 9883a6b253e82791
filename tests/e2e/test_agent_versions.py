"""Agents that serve some of the A2A versions (`Agent.protocol_versions`), end to end on real
daphne, Celery worker and gRPC sidecar processes, with the official a2a-sdk clients as the
referees: a v1.0-only agent's card is the strict v1.0 card whatever the request asks for, its
calls in v0.3 and v0.1 are refused with VersionNotSupportedError on every binding in that
binding's own shape, and its v1.0 calls work; a 0.3-only agent has the v0.3 card and refuses
v1.0 calls; an agent that serves 0.1 and not 0.3 reads header-less calls as v0.1."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import a2a_v0_3_pb2_grpc as pb03_grpc
from a2a.compat.v0_3.conversions import to_compat_agent_card
from a2a.types import AgentCard, AgentInterface, GetExtendedAgentCardRequest, TaskState
from a2a.utils.errors import VersionNotSupportedError
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from tasks_app.models import Task

from .clients import (
    AGENT_METADATA,
    GRPC,
    HTTP_JSON,
    JSONRPC,
    V0_3,
    V1_0,
    ServiceParameters,
    grpc_channel,
    sdk_client,
    send,
    user_message,
)
from .helpers import V1_0_HEADERS, Target, error_of, message, mid, result_of, rpc

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

CARD = ".well-known/agent-card.json"
LEGACY_CARD = ".well-known/agent.json"
# What the card carries for v0.3 clients, merged into the v1.0 card.
V03_FIELDS = {
    "url",
    "preferredTransport",
    "additionalInterfaces",
    "protocolVersion",
    "supportsAuthenticatedExtendedCard",
}
BINDINGS = pytest.mark.parametrize("binding", [JSONRPC, HTTP_JSON, GRPC])
VERSION_NOT_SUPPORTED = -32009
V01_SERVER_ERROR = -32000  # v0.1 has no code of its own for it (bindings.errors)


@pytest.fixture
def strict(make_target) -> Target:
    """An echo agent that serves A2A 1.0 alone."""
    return make_target("strict", protocol_versions="1.0")


@pytest.fixture
def legacy(make_target) -> Target:
    """An echo agent that serves A2A 0.3 alone."""
    return make_target("legacy", protocol_versions="0.3")


def refusal(message: str, target: Target, *, serves: str, speaks: str) -> None:
    """The refusal names the agent, what it serves and what the request spoke."""
    assert f"Agent {target.tenant_value} serves A2A {serves}" in message, message
    assert f"this request speaks {speaks}" in message, message


def interfaces_in(live_platform, target: Target, version: str) -> list[AgentInterface]:
    """The agent's three interfaces in `version`, at the URLs the platform serves it at: what a
    client that assumes that version, and knows the agent's URL, calls."""
    return [
        AgentInterface(url=target.url, protocol_binding=JSONRPC, protocol_version=version),
        AgentInterface(
            url=target.url.rstrip("/"), protocol_binding=HTTP_JSON, protocol_version=version
        ),
        AgentInterface(
            url=live_platform.grpc_address,
            protocol_binding=GRPC,
            protocol_version=version,
            tenant=target.tenant_value if version == V1_0 else "",
        ),
    ]


@asynccontextmanager
async def client_in(
    live_platform, target: Target, *, version: str, binding: str
) -> AsyncIterator[Client]:
    """The SDK's own client for the agent's served card with its interfaces replaced by those
    of `version`: a client of that version that found the agent but not in its card."""
    async with httpx.AsyncClient(headers={"X-API-Key": target.key}, timeout=60) as http:
        card = await A2ACardResolver(http, target.url).get_agent_card()
        assumed = AgentCard()
        assumed.CopyFrom(card)
        del assumed.supported_interfaces[:]
        assumed.supported_interfaces.extend(
            i
            for i in interfaces_in(live_platform, target, version)
            if i.protocol_binding == binding
        )
        config = ClientConfig(
            httpx_client=http,
            supported_protocol_bindings=[binding],
            grpc_channel_factory=grpc_channel if binding == GRPC else None,
        )
        # gRPC carries the key and the agent as metadata (v1.0 requests name it in `tenant` too).
        parameters = {"x-api-key": target.key, AGENT_METADATA: target.tenant_value}
        interceptors = [ServiceParameters(parameters)] if binding == GRPC else []
        client = ClientFactory(config).create(assumed, interceptors)
        try:
            yield client
        finally:
            await client.close()


def refused_send(live_platform, target: Target, *, version: str, binding: str) -> str:
    """A send by the SDK's `version` client on `binding`, which the SDK must read as
    VersionNotSupportedError; its message."""

    async def scenario() -> str:
        async with client_in(live_platform, target, version=version, binding=binding) as client:
            with pytest.raises(VersionNotSupportedError) as refused:
                await send(client, user_message("hello", mid()))
            return str(refused.value)

    return asyncio.run(scenario())


# --- a v1.0-only agent -------------------------------------------------------------------------


def test_a_10_only_agents_card_is_the_strict_v10_card_whatever_the_request_asks(http, strict):
    for asked in ({}, {"A2A-Version": "0.3"}, V1_0_HEADERS):
        for path in (CARD, LEGACY_CARD):
            response = http.get(strict.url + path, headers=asked)
            assert response.status_code == 200, response.text
            card = response.json()
            assert not V03_FIELDS & set(card), (asked, path, card)
            interfaces = card["supportedInterfaces"]
            assert {i["protocolVersion"] for i in interfaces} == {"1.0"}, interfaces
            assert sorted(i["protocolBinding"] for i in interfaces) == [GRPC, HTTP_JSON, JSONRPC]

    # The SDK reads it as a v1.0 card, in which its v0.3 view finds nothing to call.
    async def fetched() -> AgentCard:
        async with httpx.AsyncClient(timeout=60) as client:
            return await A2ACardResolver(client, strict.url).get_agent_card()

    card = asyncio.run(fetched())
    assert [i.protocol_version for i in card.supported_interfaces] == [V1_0] * 3
    with pytest.raises(VersionNotSupportedError):
        to_compat_agent_card(card)


@BINDINGS
def test_a_10_only_agent_refuses_the_sdks_v03_clients(live_platform, strict, binding):
    message = refused_send(live_platform, strict, version=V0_3, binding=binding)
    refusal(message, strict, serves="1.0 only", speaks="0.3")
    assert "'A2A-Version: 1.0'" in message  # where 1.0 is served
    assert not Task.objects.filter(agent=strict.agent).exists()  # nothing was written


def test_a_10_only_agents_v03_and_v01_calls_are_refused_in_each_bindings_shape(
    http, live_platform, strict
):
    # JSON-RPC without a version header speaks 0.3: the error in its envelope.
    params = {"message": {"messageId": mid(), "role": "user", "parts": [{"text": "hi"}]}}
    for method in ("message/send", "tasks/get", "agent/getAuthenticatedExtendedCard"):
        response = rpc(http, strict, method, params if method == "message/send" else {}, headers={})
        error = error_of(response, VERSION_NOT_SUPPORTED)
        refusal(error["message"], strict, serves="1.0 only", speaks="0.3")
        assert error["data"][0]["reason"] == "VERSION_NOT_SUPPORTED", error
    # A v0.1 method speaks 0.1, without a header or with one: in v0.1's own codes.
    v01 = {
        "id": str(uuid.uuid4()),
        "message": {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
    }
    for headers in ({}, {"A2A-Version": "0.1"}):
        error = error_of(rpc(http, strict, "tasks/send", v01, headers=headers), V01_SERVER_ERROR)
        refusal(error["message"], strict, serves="1.0 only", speaks="0.1")
    # A batch refuses each call in its place.
    body = [
        {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": params},
        {"jsonrpc": "2.0", "id": 2, "method": "tasks/send", "params": v01},
    ]
    answers = http.post(strict.url, json=body, headers={"X-API-Key": strict.key}).json()
    assert [(a["id"], a["error"]["code"]) for a in answers] == [
        (1, VERSION_NOT_SUPPORTED),
        (2, V01_SERVER_ERROR),
    ]

    # REST under v1/ speaks 0.3: a google.rpc.Status body with v0.3's `type` and `message`.
    for method, path, body in (
        ("POST", "v1/message:send", params),
        ("GET", f"v1/tasks/{uuid.uuid4()}", None),
        ("GET", "v1/card", None),
    ):
        response = http.request(
            method, strict.url + path, json=body, headers={"X-API-Key": strict.key}
        )
        assert response.status_code == 400, response.text
        answer = response.json()
        assert answer["type"] == "VersionNotSupportedError", answer
        assert answer["error"]["status"] == "FAILED_PRECONDITION", answer
        assert answer["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED", answer
        refusal(answer["message"], strict, serves="1.0 only", speaks="0.3")

    # gRPC's v0.3 service: UNIMPLEMENTED, the class named in the message as v0.3 clients read
    # it, and the ErrorInfo.
    with grpc.insecure_channel(live_platform.grpc_address) as channel:
        stub = pb03_grpc.A2AServiceStub(channel)
        request = pb03.SendMessageRequest(
            request=pb03.Message(
                message_id=mid(), role=pb03.Role.ROLE_USER, content=[pb03.Part(text="hi")]
            )
        )
        metadata = [("x-api-key", strict.key), (AGENT_METADATA, strict.tenant_value)]
        with pytest.raises(grpc.RpcError) as refused:
            stub.SendMessage(request, metadata=metadata, timeout=30)
    error = refused.value
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED, error
    assert error.details().startswith("VersionNotSupportedError: "), error.details()
    refusal(error.details(), strict, serves="1.0 only", speaks="0.3")
    info = error_details_pb2.ErrorInfo()
    assert rpc_status.from_call(error).details[0].Unpack(info)
    assert info.reason == "VERSION_NOT_SUPPORTED"
    assert not Task.objects.filter(agent=strict.agent).exists()


@BINDINGS
def test_a_10_only_agent_serves_the_sdks_v10_client(strict, binding):
    async def scenario() -> tuple[TaskState, AgentCard]:
        async with sdk_client(strict.url, key=strict.key, version=V1_0, binding=binding) as client:
            response = await send(client, user_message("hello", mid()))
            card = await client.get_extended_agent_card(GetExtendedAgentCardRequest())
            return response.task.status.state, card

    state, extended = asyncio.run(scenario())
    assert state == TaskState.TASK_STATE_COMPLETED
    assert {i.protocol_version for i in extended.supported_interfaces} == {V1_0}


# --- a 0.3-only agent --------------------------------------------------------------------------


def test_a_03_only_agents_card_lists_its_03_interfaces_for_v03_clients(http, legacy):
    for asked in ({}, V1_0_HEADERS):
        card = http.get(legacy.url + CARD, headers=asked).json()
        interfaces = card["supportedInterfaces"]
        assert {i["protocolVersion"] for i in interfaces} == {"0.3"}, interfaces
        assert (card["url"], card["preferredTransport"], card["protocolVersion"]) == (
            legacy.url,
            JSONRPC,
            "0.3",
        )

    async def scenario() -> TaskState:
        async with sdk_client(legacy.url, key=legacy.key, version=V0_3) as client:
            return (await send(client, user_message("hello", mid()))).task.status.state

    assert asyncio.run(scenario()) == TaskState.TASK_STATE_COMPLETED


@BINDINGS
def test_a_03_only_agent_refuses_the_sdks_v10_clients(live_platform, legacy, binding):
    message = refused_send(live_platform, legacy, version=V1_0, binding=binding)
    refusal(message, legacy, serves="0.3 only", speaks="1.0")
    assert not Task.objects.filter(agent=legacy.agent).exists()


# --- v0.1 without v0.3 ---------------------------------------------------------------------------


def test_an_agent_serving_01_and_not_03_reads_header_less_calls_as_v01(http, make_target):
    # given an agent that serves 1.0 and 0.1: v0.1 clients send no header
    target = make_target("old-and-new", protocol_versions="1.0,0.1")
    sent_id = str(uuid.uuid4())
    v01 = {"id": sent_id, "message": {"role": "user", "parts": [{"type": "text", "text": "hi"}]}}
    task = result_of(rpc(http, target, "tasks/send", v01, headers={}))
    assert task["id"] == sent_id and task["status"]["state"] == "completed", task
    # tasks/get, a name of 0.3 and 0.1, is read as v0.1's and answered in its shape
    got = result_of(rpc(http, target, "tasks/get", {"id": sent_id}, headers={}))
    assert got["id"] == sent_id and got["artifacts"][0]["parts"][0]["type"] == "text", got
    assert "kind" not in got  # v0.3's tasks carry it; v0.1's do not
    # a v0.3 method without a header is refused; v1.0 is served
    params = {"message": message("hi")}
    error = error_of(rpc(http, target, "message/send", params, headers={}), VERSION_NOT_SUPPORTED)
    refusal(error["message"], target, serves="1.0 and 0.1", speaks="0.3")
    assert result_of(rpc(http, target, "SendMessage", params))["task"]["id"]


def test_an_agent_serving_only_01_lists_its_json_rpc_url_for_v01(http, make_target):
    target = make_target("oldest", protocol_versions="0.1")
    card = http.get(target.url + CARD).json()
    assert card["supportedInterfaces"] == [
        {"url": target.url, "protocolBinding": JSONRPC, "protocolVersion": "0.1"}
    ]
    assert not V03_FIELDS & set(card)
    # v0.1's own card gives the URL its clients call, in v0.1
    v01_card = result_of(rpc(http, target, "agent/getCard", {}, headers={}))
    assert v01_card["url"] == target.url + "?A2A-Version=0.1"
